"""Lookup join: each event of a stream with the current rows of a table, when it is processed.

``s JOIN t ON s.k = t.k`` (t a table, no time condition) or ``FOR SYSTEM_TIME
AS OF PROCTIME()``. Input delta -> output delta::

    table changes (a valid changelog)  -> applied to the stored table (a multiset
                                          of rows with counts); nothing emitted
    events                             -> joined with the stored table as it is
                                          now; LEFT JOIN pads unmatched events

The result is append-only: a later change of the table does not revise
events already joined (processing-time semantics, as Flink's lookup join).
The watermark is the stream's; the table's does not hold it back.
"""

from __future__ import annotations

import pyarrow as pa

from ...planner.physical_joins import LookupJoinOp
from .base import Env
from .join_base import JoinLogic


class LookupJoinLogic(JoinLogic):
    def __init__(self, spec: LookupJoinOp, env: Env):
        super().__init__(spec, env)

    def on_batch(self, port: int, batch: pa.Table) -> list[pa.Table]:
        if port == self.spec.stream_port:
            return self.run(self.spec.lookup, batch)
        self.apply(self.spec.update, batch)
        return []

    def input_watermark(self, ports: list[int]) -> int:
        return ports[self.spec.stream_port]
