"""dsms as one zip for Spark's executors, so a cluster's workers need not have it installed.

On a cluster (``spark.master`` other than ``local``), the Spark routes
run dsms's readers and writers in the executors' Python workers
(``mapInArrow``). Rather than ask every worker to install dsms, the driver
zips the dsms it runs and adds it to the session (``addPyFile``): Spark
copies it to each executor and puts it on its workers' ``sys.path``, so the
executors run exactly the driver's version. The workers still need dsms's
dependencies (pyarrow, numpy, duckdb, sqlglot, lark, ...), as any PySpark
job needs its libraries.

The zip is built from the packages of the running ``dsms`` (however it was
installed: a wheel, or an editable install whose sub-packages live in the
project's folders), each at its import path: ``dsms/planner/...``.

Example:
    >>> import zipfile
    >>> names = zipfile.ZipFile(dsms_zip()).namelist()
    >>> "dsms/runtime/batch_read.py" in names, "dsms/grammar/statements.lark" in names
    (True, True)
"""

from __future__ import annotations

import os
import sys
import tempfile
import zipfile

_SHIPPED = (".py", ".lark")  # sources and the statement grammar; compiled files are made on the workers
_built: str | None = None


def package_dirs() -> dict[str, str]:
    """Every dsms package's import name and folder: the imported ones, and the packages in their folders.

    (``dsms`` itself is always imported: it is the parent of this module's package.)
    """
    found: dict[str, str] = {}
    todo = [(name, module.__path__[0]) for name, module in list(sys.modules.items())
            if (name == "dsms" or name.startswith("dsms.")) and getattr(module, "__path__", None)]
    while todo:
        name, folder = todo.pop()
        if name in found:
            continue
        found[name] = folder
        for entry in os.listdir(folder):
            sub = os.path.join(folder, entry)
            if os.path.isfile(os.path.join(sub, "__init__.py")):
                todo.append((f"{name}.{entry}", sub))
    return found


def dsms_zip() -> str:
    """The path of a zip of the running dsms (built once per process, in the temporary folder)."""
    global _built
    if _built is not None and os.path.exists(_built):
        return _built
    fd, path = tempfile.mkstemp(prefix="dsms-executors-", suffix=".zip")
    os.close(fd)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, folder in sorted(package_dirs().items()):
            arc = name.replace(".", "/")
            for entry in sorted(os.listdir(folder)):
                if entry.endswith(_SHIPPED) and os.path.isfile(os.path.join(folder, entry)):
                    z.write(os.path.join(folder, entry), f"{arc}/{entry}")
    _built = path
    return path


def ship_to_executors(spark_context) -> None:
    """Add the dsms zip to a cluster session, so its executors import the driver's dsms."""
    spark_context.addPyFile(dsms_zip())
