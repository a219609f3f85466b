"""Physical planning of joins and of keyed-table sources (a part of ``physical_plan._Planner``)."""

from __future__ import annotations

from . import logical as L
from .physical import OP
from .physical_joins import ChangelogNormalizeOp
from .sqlgen_normalize import normalize_sql


class JoinPlanning:
    """Methods of the physical planner for joins; mixed into ``physical_plan._Planner``."""

    def normalize(self, node: L.Scan, source_id: int) -> int:
        """ChangelogNormalize over a keyed table's source: changes by key -> a valid changelog."""
        src = self.ops[source_id]
        columns = [(f.name, f.type) for f in src.schema if f.name != OP]
        sql = normalize_sql(len(self.ops), columns, node.source.primary_key)
        label = f"ChangelogNormalize(key=[{', '.join(node.source.primary_key)}], state: the current row per key)"
        return self.add(ChangelogNormalizeOp, node, (source_id,), label, schema=src.schema,
                        keys=node.source.primary_key, setup=sql.setup, per_batch=sql.per_batch,
                        state_tables=(sql.state_table,))
