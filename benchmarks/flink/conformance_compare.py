"""Comparing the two engines' answers in the Flink conformance run (conformance.py).

Each answer's changelog is applied to an empty table, and the final tables
are compared as multisets of rows (DOUBLE values to 1e-9 relative), along
with the column names and types.
"""

from __future__ import annotations

import collections
import decimal
import math


def flink_type(t: str) -> str:
    """Flink's type without nullability or time attribute; VARCHAR(n) and CHAR(n) as STRING (dsms has one)."""
    t = t.replace(" NOT NULL", "").replace(" *ROWTIME*", "").replace(" *PROCTIME*", "")
    return "STRING" if t.startswith(("VARCHAR(", "CHAR(")) else t


def final_table(changes: list[list]) -> collections.Counter:
    """Apply a changelog (+I/+U add a row, -U/-D take one away) to an empty table."""
    table: collections.Counter = collections.Counter()
    for op, *row in changes:
        key = tuple(_key(v) for v in row)
        if op in ("+I", "+U"):
            table[key] += 1
        else:
            table[key] -= 1
            if table[key] == 0:
                del table[key]
    if any(n < 0 for n in table.values()):
        raise ValueError("the changelog retracts a row it never inserted")
    return table


def _key(v):
    """Rows are compared as values: decimals by number (scale is the type's), doubles to 9 digits (then _close)."""
    if isinstance(v, float):
        return ("f", float(f"{v:.9g}")) if math.isfinite(v) else ("f", v)
    if isinstance(v, dict) and "decimal" in v:
        return ("decimal", decimal.Decimal(v["decimal"]).normalize())
    if isinstance(v, list):  # an ARRAY
        return ("list", tuple(_key(x) for x in v))
    if isinstance(v, dict):  # a MAP or MULTISET (dsms's by its pairs: conformance.py), in no order
        return ("map", tuple(sorted(((_key(a), _key(b)) for a, b in v.items()), key=repr)))
    return (type(v).__name__, v)


def _close(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(
        x == y or (x[0] == y[0] == "f" and math.isclose(x[1], y[1], rel_tol=1e-9, abs_tol=1e-12)) for x, y in zip(a, b))


def diff(flink: collections.Counter, ours: collections.Counter) -> tuple[list, list]:
    only_flink = list((flink - ours).elements())
    only_dsms = list((ours - flink).elements())
    # Pair up rows that differ only in the last digits of a DOUBLE.
    for row in list(only_flink):
        match = next((r for r in only_dsms if _close(row, r)), None)
        if match is not None:
            only_flink.remove(row)
            only_dsms.remove(match)
    return sorted(only_flink, key=repr), sorted(only_dsms, key=repr)


def show(row: tuple) -> str:
    return "(" + ", ".join("NULL" if v is None else repr(v) for _, v in row) + ")"


def compare(case: dict, flink: dict, ours: dict) -> dict:
    """Differences of one case: errors, column names, types, rows."""
    found = {}
    if "error" in flink or "error" in ours:
        found["error"] = f"Flink: {flink.get('error', 'ran')}; dsms: {ours.get('error', 'ran')}"
        if "error" not in flink:
            found["error"] += f"; Flink's answer: {len(flink['rows'])} changes, e.g. {flink['rows'][:2]}"
        return found
    if [c.lower() for c in flink["columns"]] != [c.lower() for c in ours["columns"]]:
        found["names"] = f"Flink {flink['columns']} vs dsms {ours['columns']}"
    ft = [flink_type(t) for t in flink["types"]]
    if ft != ours["types"]:
        found["types"] = "; ".join(f"{c}: Flink {a}, dsms {b}" for c, a, b in
                                   zip(flink["columns"], ft, ours["types"]) if a != b)
    try:
        want, got = final_table(flink["rows"]), final_table(ours["rows"])
    except ValueError as e:
        found["rows"] = str(e)
        return found
    snapshot = collections.Counter(tuple(_key(v) for v in r) for r in ours["snapshot"])
    if snapshot != got:
        found["snapshot"] = "dsms's snapshot() differs from its changelog applied to an empty table"
    only_flink, only_dsms = diff(want, got)
    if only_flink or only_dsms:
        found["rows"] = (len(only_flink), len(only_dsms), only_flink, only_dsms, sum(want.values()),
                         sum(got.values()))
    return found
