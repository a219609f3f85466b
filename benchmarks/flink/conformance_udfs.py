"""Python functions of the conformance cases: PyFlink UDFs in Flink's venv, dsms functions in dsms's.

The same Python code runs on both sides; only the declaration of the
result type differs (``pyflink.table.udf.udf`` / ``udtf`` / ``udaf`` or
``dsms.udf`` / ``dsms.udtf``). PyFlink calls an aggregate function's
``open`` and ``close`` too, so on its side the class also derives from
PyFlink's ``AggregateFunction``. Flink
imports this module through ``python.files``; dsms from the folder of
conformance.py (on the import path when it runs).
"""

from __future__ import annotations

import os
import time

HOLD_S = float(os.environ.get("DSMS_CONFORMANCE_HOLD_S", "4"))

try:
    from pyflink.table import AggregateFunction as _FlinkAggregate
    from pyflink.table import DataTypes
    from pyflink.table.udf import udaf as _flink_udaf
    from pyflink.table.udf import udf as _flink_udf
    from pyflink.table.udf import udtf as _flink_udtf
except ImportError:  # dsms's venv
    import dsms

    def _declare(func, sql_type: str):
        return dsms.udf(func, returns=sql_type)

    def _declare_table(func, sql_types: list[str], names: list[str]):
        return dsms.udtf(func, returns=f"ROW<{', '.join(f'{n} {t}' for n, t in zip(names, sql_types))}>")

    def _declare_aggregate(cls, sql_type: str, accumulator_type: str):
        return dsms.udf(cls(), returns=sql_type)
else:
    def _declare(func, sql_type: str):
        return _flink_udf(func, result_type=getattr(DataTypes, sql_type)())

    def _declare_table(func, sql_types: list[str], names: list[str]):
        return _flink_udtf(func, result_types=[getattr(DataTypes, t)() for t in sql_types])

    def _declare_aggregate(cls, sql_type: str, accumulator_type: str):
        both = type(cls.__name__, (cls, _FlinkAggregate), {})
        return _flink_udaf(both(), result_type=sql_type, accumulator_type=accumulator_type)


def _label(k, v):
    return None if k is None else f"{k}:{v}"


def _scaled(v):
    return None if v is None else v * 3 - 1


_held = []


def _hold(v):
    """The value, after a pause on the first call: the side of a join that calls it reaches the join only
    after the other side's (small, bounded) input has finished, so that Flink's join watermark is this
    side's own, as dsms judges it (the join cases of the late-event rule)."""
    if not _held:
        _held.append(True)
        time.sleep(HOLD_S)
    return v


label = _declare(_label, "STRING")
scaled = _declare(_scaled, "BIGINT")
hold = _declare(_hold, "BIGINT")


def _url_parts(url):
    """The path segments of a URL and their lengths (none for NULL)."""
    if url is None:
        return
    for part in url.split("?")[0].split("/")[3:]:
        yield part, len(part)


class _WeightedSum:
    """SUM(v * price) and how many rows had both, as [sum, count]; retract and merge as PyFlink asks."""

    def create_accumulator(self):
        return [0.0, 0.0]

    def accumulate(self, acc, v, price):
        if v is not None and price is not None:
            acc[0] += v * price
            acc[1] += 1

    def retract(self, acc, v, price):
        if v is not None and price is not None:
            acc[0] -= v * price
            acc[1] -= 1

    def merge(self, acc, accs):
        for other in accs:
            acc[0] += other[0]
            acc[1] += other[1]

    def get_value(self, acc):
        return acc[0] if acc[1] else None


class _Spread:
    """MAX(v) - MIN(v) of the non-NULL values, without retract or merge (a TUMBLE needs neither)."""

    def create_accumulator(self):
        return [None, None]

    def accumulate(self, acc, v):
        if v is not None:
            acc[0] = v if acc[0] is None else min(acc[0], v)
            acc[1] = v if acc[1] is None else max(acc[1], v)

    def get_value(self, acc):
        return None if acc[0] is None else acc[1] - acc[0]


url_parts = _declare_table(_url_parts, ["STRING", "INT"], ["part", "n"])
weighted_sum = _declare_aggregate(_WeightedSum, "DOUBLE", "ARRAY<DOUBLE>")
spread = _declare_aggregate(_Spread, "INT", "ARRAY<INT>")
