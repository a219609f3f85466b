"""A Spark streaming source over a watched file source, read by dsms's own readers.

The continuous Spark route (``spark_stream.py``) reads each watched source
through this Python data source (Spark 4's ``DataSourceStreamReader``):

* an offset is the name of the last file taken, ``{"last": name}``; a
  micro-batch takes the files that sort after the previous offset, in name
  order, as the runtime's watch mode does (a file that appears sorting
  before the last one taken is never read);
* each file is one input partition, read in a Python worker by the
  runtime's readers (``batch_read.read_files``), so values parse the same,
  a bad row fails the query with its file and line, and ``on_error =
  'skip'`` sends rejected rows to the same dead-letter file (each
  micro-batch's are moved into place by the driver, in file order);
* with ``Trigger.AvailableNow`` a run takes the files present when it
  starts (``prepareForTriggerAvailableNow``).

Spark reads a file once, when it first lists it: files must be complete
when they appear (write them under a hidden name, ``.part-7.jsonl``, and
rename them), as for Spark's own file sources. The workers need dsms
installed, as for the batch route.

Imports PySpark: loaded only when a continuous Spark query starts.
"""

from __future__ import annotations

import base64
import pickle

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadMaxFiles, SupportsTriggerAvailableNow

from .batch_read import ReadPlan, read_files
from .connectors.files import FileSet

NAME = "dsms_files"


def source_options(plan: ReadPlan, dead_letters: str | None) -> dict[str, str]:
    """The options of a ``spark.readStream.format(NAME)`` over ``plan``'s files."""
    return {"plan": base64.b64encode(pickle.dumps(plan)).decode("ascii"), "dead_letters": dead_letters or ""}


def listing(plan: ReadPlan) -> list[str]:
    """The names of the source's files now, in reading order (a glob may match nothing yet)."""
    files = FileSet.open(plan.name, plan.path, str(plan.options.get("format", "")).lower(), must_exist=False)
    return files.excluding(plan.dead_letter_path()).list()


class DsmsFiles(DataSource):
    """``spark.readStream.format("dsms_files")``: the files of a dsms file source, as they appear."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def _plan(self) -> ReadPlan:
        return pickle.loads(base64.b64decode(self.options["plan"]))

    def schema(self) -> str:
        from .spark_route import spark_schema

        return spark_schema(self._plan().relation_schema)

    def streamReader(self, schema) -> "FilesStream":
        return FilesStream(self._plan(), self.options.get("dead_letters") or None)


class FilesStream(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are file names: a micro-batch reads the files after the previous batch's last one."""

    def __init__(self, plan: ReadPlan, dead_letters: str | None):
        self.plan = plan
        self.dead_letters = dead_letters
        self.target: str | None = None  # Trigger.AvailableNow: the last file when the run started

    def initialOffset(self) -> dict:
        return {"last": ""}  # sorts before every name

    def prepareForTriggerAvailableNow(self) -> None:
        names = listing(self.plan)
        self.target = names[-1] if names else ""

    def latestOffset(self, start: dict, limit) -> dict:
        names = [n for n in listing(self.plan) if n > start["last"] and (self.target is None or n <= self.target)]
        if isinstance(limit, ReadMaxFiles):
            names = names[:max(1, limit.max_files)]
        return {"last": names[-1]} if names else start

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        files = FileSet.open(self.plan.name, self.plan.path, str(self.plan.options.get("format", "")).lower(),
                             must_exist=False)
        names = listing(self.plan)
        return [InputPartition((i, files.full(n))) for i, n in enumerate(names) if start["last"] < n <= end["last"]]

    def read(self, partition: InputPartition):
        index, path = partition.value
        for batch in read_files(self.plan, [(index, path)], self.dead_letters):
            yield _utc(batch)


def _utc(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Timestamps as Spark takes them from a data source: UTC (dsms's are naive UTC wall clock)."""
    arrays = [a.cast(pa.timestamp("us", tz="UTC")) if pa.types.is_timestamp(a.type) else a for a in batch.columns]
    names = batch.schema.names
    return pa.RecordBatch.from_arrays(arrays, names=names)


def register(spark) -> None:
    spark.dataSource.register(DsmsFiles)

