"""Which files a file source reads, in which order, and what they are called.

A source ``path`` is one of:

* a single file: read that file;
* a directory: read the regular files directly in it (not sub-directories),
  sorted by name. Hidden files (names starting with ``.``) are ignored, so a
  writer can create ``.part-7.jsonl`` and rename it when complete. When some
  of the files carry the format's extension (``.json``/``.jsonl``/``.ndjson``,
  ``.csv``/``.tsv``, ``.parquet``/``.pq``) only those are read; when none do,
  all are;
* a glob pattern (``*``, ``?``, ``[``): the matching regular files, sorted by
  their path relative to the pattern's fixed leading directory.

Dead-letter files (``*.dead-letter.jsonl``) are never read as input, so a
dead-letter file next to or inside the input cannot feed itself back.

Positions name a file by its path relative to the source's root directory
(the file's own folder, the directory, or the glob's fixed prefix), so a
checkpoint survives moving the whole folder. Files are ordered by plain
string comparison of those names: ``part-10`` sorts before ``part-9``, so
zero-pad numbers in file names.
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass

from .base import SourceError

FORMAT_EXTENSIONS = {
    "json": (".json", ".jsonl", ".ndjson"),
    "debezium-json": (".json", ".jsonl", ".ndjson"),
    "csv": (".csv", ".tsv"),
    "parquet": (".parquet", ".pq"),
}
DEAD_LETTER_SUFFIX = ".dead-letter.jsonl"
_MAGIC = ("*", "?", "[")


def is_glob(path: str) -> bool:
    return any(c in path for c in _MAGIC)


@dataclass(frozen=True)
class FileSet:
    """The input files of one source; listed again on demand for watch mode.

    Attributes:
        source: the source's name, for error messages.
        path: the path, directory or pattern as given.
        fmt: the format (``json``, ``csv``, ``parquet``) for the extension rule.
        kind: ``file``, ``dir`` or ``glob``.
        root: the directory that names in positions are relative to.
        exclude: absolute paths never to read (the dead-letter file).
    """

    source: str
    path: str
    fmt: str
    kind: str
    root: str
    exclude: frozenset = frozenset()

    @classmethod
    def open(cls, source: str, path: str | None, fmt: str, *, must_exist: bool = True) -> "FileSet":
        """Classify ``path`` and check that it exists.

        Args:
            source: the source's name, for messages.
            path: a file, a directory or a glob pattern.
            fmt: the source format.
            must_exist: False in watch mode, where a glob may match nothing yet.

        Raises:
            SourceError: the path is missing, or (bounded) a glob matches nothing.
        """
        if not path:
            raise SourceError("the file connector needs a 'path'", source=source)
        if is_glob(path):
            root = _static_prefix(path)
            if not os.path.isdir(root):
                raise SourceError(f"directory not found: {root}", source=source, file=path)
            files = cls(source, path, fmt, "glob", root)
            if must_exist and not files.list():
                raise SourceError("no files match the pattern", source=source, file=path)
            return files
        if os.path.isdir(path):
            return cls(source, path, fmt, "dir", os.path.normpath(path))
        if os.path.isfile(path):
            return cls(source, path, fmt, "file", os.path.dirname(os.path.abspath(path)))
        if os.path.exists(path):
            raise SourceError("not a regular file or directory", source=source, file=path)
        raise SourceError("file or directory not found", source=source, file=path)

    def excluding(self, path: str | None) -> "FileSet":
        """This file set, never listing ``path``."""
        if not path:
            return self
        return FileSet(self.source, self.path, self.fmt, self.kind, self.root,
                       self.exclude | {os.path.abspath(path)})

    def list(self) -> list[str]:
        """The names (relative to ``root``) of the files to read, sorted."""
        if self.kind == "file":
            return [os.path.basename(self.path)]
        if self.kind == "dir":
            try:
                with os.scandir(self.root) as it:
                    paths = [e.path for e in it if e.is_file()]
            except FileNotFoundError:
                raise SourceError("directory not found", source=self.source, file=self.path) from None
            paths = _prefer_extension([p for p in paths if self._wanted(p)], self.fmt)
        else:
            paths = [p for p in glob.glob(self.path) if os.path.isfile(p) and self._wanted(p)]
        return sorted(os.path.relpath(p, self.root).replace(os.sep, "/") for p in paths)

    def full(self, name: str) -> str:
        """The path of the file called ``name`` in positions."""
        if self.kind == "file":
            return self.path
        return os.path.join(self.root, name)

    def next_after(self, name: str | None, names: list[str] | None = None) -> str | None:
        """The first file sorting after ``name`` (the first file when ``name`` is None)."""
        for candidate in self.list() if names is None else names:
            if name is None or candidate > name:
                return candidate
        return None

    def default_dead_letter(self) -> str:
        """Where rejected rows go when ``dead_letter`` is not given.

        ``<file>.dead-letter.jsonl`` beside a single file; for a directory or a
        glob, ``<source name>.dead-letter.jsonl`` in the folder that holds the
        directory (or the pattern's fixed prefix), i.e. beside the input
        rather than among it.
        """
        if self.kind == "file":
            return self.path + DEAD_LETTER_SUFFIX
        parent = os.path.dirname(os.path.abspath(self.root))
        safe = self.source.replace(os.sep, "_").replace("/", "_") or "source"
        return os.path.join(parent, safe + DEAD_LETTER_SUFFIX)

    def _wanted(self, path: str) -> bool:
        base = os.path.basename(path)
        return (not base.startswith(".") and not base.endswith(DEAD_LETTER_SUFFIX)
                and os.path.abspath(path) not in self.exclude)


def _prefer_extension(paths: list[str], fmt: str) -> list[str]:
    """Only the files with the format's extension, if there are any."""
    exts = FORMAT_EXTENSIONS.get(fmt, ())
    matching = [p for p in paths if p.lower().endswith(exts)]
    return matching or paths


def _static_prefix(pattern: str) -> str:
    """The leading directories of a glob pattern that contain no wildcard."""
    parts = pattern.replace(os.sep, "/").split("/")
    fixed = []
    for part in parts[:-1]:
        if is_glob(part):
            break
        fixed.append(part)
    if not fixed:
        return "."
    if fixed == [""]:
        return "/"
    return os.path.normpath("/".join(fixed))
