"""Python functions of the conformance cases: PyFlink UDFs in Flink's venv, dsms functions in dsms's.

The same Python code runs on both sides; only the declaration of the
result type differs (``pyflink.table.udf.udf`` or ``dsms.udf``). Flink
imports this module through ``python.files``; dsms from the folder of
conformance.py (on the import path when it runs).
"""

from __future__ import annotations

import os
import time

HOLD_S = float(os.environ.get("DSMS_CONFORMANCE_HOLD_S", "4"))

try:
    from pyflink.table import DataTypes
    from pyflink.table.udf import udf as _flink_udf
except ImportError:  # dsms's venv
    import dsms

    def _declare(func, sql_type: str):
        return dsms.udf(func, returns=sql_type)
else:
    def _declare(func, sql_type: str):
        return _flink_udf(func, result_type=getattr(DataTypes, sql_type)())


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
