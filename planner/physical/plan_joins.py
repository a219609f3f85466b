"""Physical planning of joins and of keyed-table sources (a part of ``physical.planner._Planner``)."""

from __future__ import annotations

import pyarrow as pa
from sqlglot import exp

from ...grammar import DsmsError
from ..analysis.lateness import judged_inputs, judges_join
from ..logical import nodes as L
from ..logical.join import Join
from ..lower.sqlgen_join import (
    JoinSql,
    external_lookup_sql,
    interval_join_sql,
    lookup_join_sql,
    regular_join_sql,
    temporal_join_sql,
    window_join_sql,
)
from ..lower.sqlgen_normalize import normalize_sql
from ..timeutil import parse_duration
from .join_specs import (
    ChangelogNormalizeSpec,
    ExternalLookup,
    IntervalJoinSpec,
    LookupJoinSpec,
    RegularJoinSpec,
    TemporalJoinSpec,
    WindowJoinSpec,
)
from .specs import OP


class JoinPlanning:
    """Methods of the physical planner for joins; mixed into ``physical.planner._Planner``."""

    @property
    def raw_sources(self) -> dict[int, int]:
        """Sources of versioned tables read by temporal joins without normalization, by Scan node."""
        if not hasattr(self, "_raw_sources"):
            self._raw_sources: dict[int, int] = {}
        return self._raw_sources

    def normalize(self, node: L.Scan, source_id: int) -> int:
        """ChangelogNormalize over a keyed table's source: changes by key -> a valid changelog."""
        src = self.ops[source_id]
        columns = [(f.name, f.type) for f in src.schema if f.name != OP]
        sql = normalize_sql(len(self.ops), columns, node.source.primary_key)
        label = f"ChangelogNormalize(key=[{', '.join(node.source.primary_key)}])"
        return self.add(ChangelogNormalizeSpec, node, (source_id,), label, schema=src.schema,
                        state="the current row per key (bounded by the table's keys)",
                        keys=node.source.primary_key, setup=sql.setup, per_batch=sql.per_batch,
                        state_tables=(sql.state_table,))

    def external_lookup(self, node: Join, inputs: list[L.Node]) -> int:
        """A lookup join with a table fetched by key from another system: one input, the stream."""
        s = 0 if node.stream_side == "left" else 1
        table = inputs[1 - s]
        if not all(isinstance(b if s == 0 else a, exp.Column) for a, b in node.equi) or not node.equi:
            raise DsmsError(f"a lookup join on lookup table '{table.source.name}' needs equalities between "
                                  "its columns and the stream's (ON s.k = t.k), to fetch rows by key")
        stream = self.op_for(inputs[s])
        table_schema = pa.schema([pa.field(f.name, f.type) for f in table.schema])
        schemas = (_without_op(self.ops[stream].schema), table_schema)[:: 1 if s == 0 else -1]
        j = JoinSql(node, len(self.ops), schemas)
        updating = inputs[s].changelog == L.UPDATING
        sql = external_lookup_sql(j, updating)
        options = table.source.options
        external = ExternalLookup(
            options=tuple(sorted(options.items())), columns=tuple((f.name, f.type) for f in table_schema),
            keys=sql["keys"], key_sql=sql["key_sql"], misses=sql["misses"],
            max_rows=int(options["lookup.cache.max-rows"]) if options.get("lookup.cache.max-rows") else None,
            ttl_us=parse_duration(options["lookup.cache.ttl"]) if options.get("lookup.cache.ttl") else None)
        label = node.label() + f" (fetched by key from {table.source.connector} table '{table.source.name}'"
        label += f", cache {external.max_rows} rows)" if external.max_rows else ", no cache)"
        bound = (f"at most {external.max_rows} cached rows" if external.max_rows
                 else "none (every batch's keys are fetched)")
        return self.add(LookupJoinSpec, node, (stream,), label, kind=node.kind, schema=j.output_schema(), state=bound,
                        setup=sql["setup"], state_tables=sql["state_tables"], stream_port=0, lookup=sql["lookup"],
                        external=external, sequenced=updating)

    def _judged_here(self, node: Join) -> tuple[bool, bool]:
        """Per input, whether a window, interval or temporal join judges its late rows itself: every source
        below leaves them to it."""
        def judged(side: L.Node, own: bool) -> bool:
            scans = [n for n in L.walk(side) if isinstance(n, L.Scan)]
            return own and judges_join(node) and all(id(n) in self.window_judged for n in scans)

        return tuple(judged(side, own) for side, own in zip(node.inputs, judged_inputs(node)))

    def plan_Join(self, node: Join) -> int:
        if node.strategy == "temporal":
            # The versioned table's changes by key, as read: each is a version (deletes end one at their time).
            left = self.op_for(node.left)
            if id(node.right) not in self.raw_sources:
                self.raw_sources[id(node.right)] = self.source(node.right)
            right = self.raw_sources[id(node.right)]
        else:
            inputs = list(node.inputs)  # narrowed to what the join needs by rules/prune_columns.py
            if node.strategy == "lookup" and lookup_table(inputs[1 if node.stream_side == "left" else 0]):
                return self.external_lookup(node, inputs)
            left, right = (self.op_for(i) for i in inputs)
        schemas = tuple(_without_op(self.ops[i].schema) for i in (left, right))
        j = JoinSql(node, len(self.ops), schemas)
        common = dict(kind=node.kind, schema=j.output_schema())
        label = node.label()
        if node.strategy == "interval":
            sql = interval_join_sql(j)
            b = node.bounds
            return self.add(IntervalJoinSpec, node, (left, right), label, **common, setup=sql["setup"],
                            state_tables=sql["state_tables"], lower=b.lower, upper=b.upper,
                            delay=b.delay + node.lateness, lateness=node.lateness, on_batch=sql["on_batch"],
                            expire=sql["expire"], min_time=sql["min_time"], time_columns=sql["times"],
                            ids=j.preserved, judged=self._judged_here(node), unmatched=sql["unmatched"])
        if node.strategy == "window":
            sql = window_join_sql(j)
            return self.add(WindowJoinSpec, node, (left, right), label, **common, setup=sql["setup"],
                            state_tables=sql["state_tables"], lateness=node.lateness, on_batch=sql["on_batch"],
                            fire=sql["fire"], min_end=sql["min_end"], end_columns=sql["ends"],
                            judged=self._judged_here(node))
        if node.strategy == "temporal":
            updating = node.left.changelog == L.UPDATING
            judged = self._judged_here(node)
            sql = temporal_join_sql(j, node.right.source.primary_key, updating, judged[0])
            return self.add(TemporalJoinSpec, node, (left, right), label, **common, setup=sql["setup"],
                            state_tables=sql["state_tables"], lateness=node.lateness, on_batch=sql["on_batch"],
                            fire=sql["fire"], prune=sql["prune"], min_time=sql["min_time"],
                            time_column=sql["time"], sequenced=updating, judged=judged)
        if node.strategy == "lookup":
            stream = node.left if node.stream_side == "left" else node.right
            updating = stream.changelog == L.UPDATING
            sql = lookup_join_sql(j, updating)
            return self.add(LookupJoinSpec, node, (left, right), label, **common, setup=sql["setup"],
                            state_tables=sql["state_tables"], stream_port=0 if node.stream_side == "left" else 1,
                            lookup=sql["lookup"], update=sql["update"], sequenced=updating)
        updating = (node.left.changelog == L.UPDATING, node.right.changelog == L.UPDATING)
        sql = regular_join_sql(j, updating, node.ttl)
        return self.add(RegularJoinSpec, node, (left, right), label, **common, setup=sql["setup"],
                        state_tables=sql["state_tables"], on_batch=sql["on_batch"], ttl_us=node.ttl,
                        expire=sql["expire"], oldest=sql["oldest"])


def _without_op(schema: pa.Schema) -> pa.Schema:
    return schema.remove(schema.get_field_index(OP)) if OP in schema.names else schema


def lookup_table(node: L.Node) -> bool:
    """Whether ``node`` is a table read only by key lookups (a lookup connector that is not a source: jdbc)."""
    return isinstance(node, L.Scan) and node.source.descriptor.lookup and not node.source.descriptor.source
