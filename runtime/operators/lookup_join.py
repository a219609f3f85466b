"""Lookup join: each event of a stream with the current rows of a table, when it is processed.

``s JOIN t ON s.k = t.k`` (t a table, no time condition) or ``FOR SYSTEM_TIME
AS OF PROCTIME()``. Input delta -> output delta::

    table changes (a valid changelog)  -> applied to the stored table (a multiset
                                          of rows with counts); nothing emitted
    events                             -> joined with the stored table as it is
                                          now; LEFT JOIN pads unmatched events

A later change of the table does not revise events already joined
(processing-time semantics, as Flink's lookup join). The watermark is the
stream's; the table's does not hold it back.

An updating stream side (a changelog: a keyed table read as
``FOR SYSTEM_TIME AS OF PROCTIME()``) is looked up change by change, and
each joined row keeps the change's kind, in arrival order, as Flink's
lookup join does. A retraction meets the table as it is when the
retraction comes, so it retracts what it joins now, which is what was
emitted before only if the table did not change in between::

    table  {a: 1}          changes of s            out
           -               +I (k=a, x=1)            +I (1, a, 1)
    {a: 2} (t updated)     -U (k=a, x=1)            -U (1, a, 2)   (joined now, not with the old 1)
                           +U (k=a, x=5)            +U (5, a, 2)

A table in another system (a lookup connector such as ``jdbc``: ``spec.external``) is
not an input: before a batch of events is joined, the rows of its keys
that the stored table (the cache) lacks are fetched in one round trip and
stored with the time they were fetched; keys the database does not have
are remembered too. ``lookup.cache.ttl`` expires what is older,
``lookup.cache.max-rows`` keeps the newest rows, and without a cache every
batch fetches its keys afresh (Flink's JDBC lookup cache)::

    events (k)     cache before        fetched          joined with
    1, 2, 1        {1: a}              2 -> b           {1: a, 2: b}
    2, 3           {1: a, 2: b}        3 -> (none)      {1: a, 2: b} (3 remembered as missing)
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ...planner.connectors import find
from ...planner.lower.sqlgen_join import SEQ
from ...planner.physical.join_specs import LookupJoinSpec
from ..connectors.factory import runtime_module
from ..duck import registered
from .base import Env
from .join_base import JoinLogic


class LookupJoinLogic(JoinLogic):
    def __init__(self, spec: LookupJoinSpec, env: Env):
        super().__init__(spec, env)
        self.clock = env.clock
        self._fetcher = None  # the connector's lookup (its runtime module's open_lookup), opened on first use

    def on_batch(self, port: int, batch: pa.Table) -> list[pa.Table]:
        if self.spec.sequenced and port == self.spec.stream_port:  # changes come out in the order they came in
            batch = batch.append_column(SEQ, pa.array(np.arange(batch.num_rows, dtype=np.int64)))
        if self.spec.external is not None:
            self._refresh(batch)
            out = self.run(self.spec.lookup, batch)
            self._evict()  # after the join: a batch with more keys than the cache holds still meets them all
            return out
        if port == self.spec.stream_port:
            return self.run(self.spec.lookup, batch)
        self.apply(self.spec.update, batch)
        return []

    def input_watermark(self, ports: list[int]) -> int:
        return ports[self.spec.stream_port]

    def _refresh(self, batch: pa.Table) -> None:
        """Fetch the rows of the batch's keys that the cache lacks (see the module docstring)."""
        ext = self.spec.external
        cache, misses = self.spec.state_tables
        now = self.clock.now_us()
        if ext.max_rows is None:
            self.con.execute(f"DELETE FROM {cache}")
            self.con.execute(f"DELETE FROM {misses}")
        elif ext.ttl_us is not None:
            self.con.execute(f"DELETE FROM {cache} WHERE __fetched < {now - ext.ttl_us}")
            self.con.execute(f"DELETE FROM {misses} WHERE __fetched < {now - ext.ttl_us}")
        keys = self.duck.run(ext.key_sql, batch)
        if not keys.num_rows:
            return
        match = " AND ".join(f'k."{k}" = c."{k}"' for k in ext.keys)
        wanted = self.duck.sql(f"SELECT * FROM __keys k WHERE NOT EXISTS (SELECT 1 FROM {cache} c WHERE {match}) "
                               f"AND NOT EXISTS (SELECT 1 FROM {misses} c WHERE {match})", __keys=keys)
        if not wanted.num_rows:
            return
        if self._fetcher is None:
            options = dict(ext.options)
            open_lookup = runtime_module(find(options["connector"]), "open_lookup", self.spec.label)
            self._fetcher = open_lookup(options, list(ext.columns), ext.keys)
        rows = self._fetcher.fetch(wanted)
        columns = ", ".join(f'"{name}"' for name, _ in ext.columns)
        with registered(self.con, __rows=rows, __wanted=wanted):
            self.con.execute(f"INSERT INTO {cache} SELECT {columns}, 1, {now} FROM __rows")
            self.con.execute(f"INSERT INTO {misses} SELECT k.*, {now} FROM __wanted k WHERE NOT EXISTS "
                             f"(SELECT 1 FROM __rows c WHERE {match})")

    def _evict(self) -> None:
        """Keep the ``lookup.cache.max-rows`` newest rows (and as many missing keys)."""
        max_rows = self.spec.external.max_rows
        if max_rows is None:
            return
        for table in self.spec.state_tables:
            self.con.execute(f"DELETE FROM {table} WHERE rowid IN (SELECT rowid FROM {table} "
                             f"ORDER BY __fetched DESC, rowid DESC OFFSET {max_rows})")

    def close(self) -> None:
        if self._fetcher is not None:
            self._fetcher.close()
