"""How big a file source is, for routing (``planner/analysis/routing.py``).

JSON and CSV count their file sizes; Parquet counts the uncompressed size
of its row groups from the file footers (a compressed file says little
about the work). Files are listed as the source's reader would list them.
"""

from __future__ import annotations

import os

import pyarrow.parquet as pq

from ..planner.catalog import SourceDef
from .connectors.files import FileSet


def estimated_bytes(source: SourceDef) -> int:
    """The bytes a batch route would read for ``source``.

    Raises:
        SourceError: the path does not exist.
    """
    files = FileSet.open(source.name, source.path, source.format)
    paths = [files.full(name) for name in files.list()]
    if source.format != "parquet":
        return sum(os.path.getsize(p) for p in paths)
    total = 0
    for p in paths:
        meta = pq.ParquetFile(p).metadata
        total += sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    return total
