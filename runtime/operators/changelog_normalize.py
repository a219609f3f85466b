"""ChangelogNormalize: a table's changes by key -> a changelog that downstream can apply.

Input delta -> output delta (per key, in arrival order)::

    upsert of a new key            -> +I row
    upsert that changes the row    -> -U old row, +U new row
    upsert that repeats the row    -> nothing
    delete of a known key          -> -D the stored row
    delete of an unknown key       -> nothing

The current row of every key lives in a DuckDB table of the job's
connection (see planner/lower/sqlgen_normalize.py for the statements).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ...planner.lower.sqlgen_normalize import SEQ
from ...planner.physical.join_specs import ChangelogNormalizeSpec
from ..duck import conform
from .base import DuckStateLogic


class ChangelogNormalizeLogic(DuckStateLogic):
    spec: ChangelogNormalizeSpec

    def on_batch(self, port: int, batch: pa.Table) -> list[pa.Table]:
        batch = batch.append_column(SEQ, pa.array(np.arange(batch.num_rows, dtype=np.int64)))
        out = self.duck.run_all(self.spec.per_batch, batch)
        return [conform(out, self.spec.schema)] if out.num_rows else []
