"""An engine's state directory: what it was told, and how far its standing queries got.

Layout::

    DIR/LOCK                      held while an engine uses DIR (a second one is refused)
    DIR/catalog.json              the catalog: each object's DDL, in order, with the settings it was
                                  created under; the session settings; each standing query's status
    DIR/streams/<uid>.log         what was inserted into a memory stream or table (runtime/journal.py)
    DIR/queries/<uid>/ckpt-<n>/   the newest checkpoint of a standing query (runtime/checkpoint.py)

Every object gets a ``uid`` when it is created, so a sink dropped and
created again under the same name never sees the old one's checkpoints.
``catalog.json`` is rewritten whole on every change, atomically (written
to a temporary file, synced, renamed). Files of uids the catalog no longer
names are removed when the directory is opened.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil

from .errors import DsmsError
from .runtime.journal import Journal

_VERSION = 1


class StateDir:
    def __init__(self, path: str):
        self.path = os.path.abspath(path)
        try:
            os.makedirs(self.path, exist_ok=True)
            self._lock = open(os.path.join(self.path, "LOCK"), "a+")
        except OSError as e:
            raise DsmsError(f"cannot use {e.filename or self.path} as a state directory: {e.strerror or e}") from None
        try:
            fcntl.flock(self._lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._lock.close()
            raise DsmsError(f"the state directory {self.path} is in use by another engine "
                            "(close it first, or use another --state-dir)") from None
        self.data = {"version": _VERSION, "next_uid": 1, "objects": [], "settings": None, "queries": {},
                     "script": []}
        catalog = os.path.join(self.path, "catalog.json")
        if os.path.exists(catalog):
            try:
                with open(catalog, encoding="utf-8") as f:
                    saved = json.load(f)
                if not isinstance(saved, dict):
                    raise ValueError("not a JSON object")
            except (OSError, ValueError) as e:
                self.close()
                raise DsmsError(f"the state directory's catalog {catalog} cannot be read ({e}); it is damaged: "
                                "restore it from a backup, or use another --state-dir") from None
            self.data.update(saved)
            if self.data["version"] != _VERSION:
                self.close()
                raise DsmsError(f"the state directory {self.path} was written by another version of dsms")
        self._collect_garbage()

    # -- the catalog ----------------------------------------------------------------------

    @property
    def objects(self) -> list[dict]:
        """``{"uid", "kind", "name", "sql", "base", "settings"}`` per object, in the order to replay them."""
        return list(self.data["objects"])

    @property
    def settings(self) -> dict | None:
        return self.data["settings"]

    def entry(self, name: str) -> dict | None:
        return next((o for o in self.data["objects"] if o["name"].lower() == name.lower()), None)

    def record_create(self, kind: str, name: str, sql: str, base: str, settings: dict) -> str:
        """Save a CREATE; one OR REPLACE is a new object (a new uid, at the end: it may read later ones)."""
        old = self.entry(name)
        if old is not None:
            self.data["objects"].remove(old)
        uid = f"u{self.data['next_uid']}"
        self.data["next_uid"] += 1
        self.data["objects"].append({"uid": uid, "kind": kind, "name": name, "sql": sql, "base": base,
                                     "settings": dict(settings)})
        self.save()
        if old is not None:
            self._remove_files(old["uid"])
        return uid

    def record_drop(self, name: str) -> None:
        old = self.entry(name)
        if old is None:
            return
        self.data["objects"].remove(old)
        self.data["queries"].pop(old["uid"], None)
        self.save()
        self._remove_files(old["uid"])

    def record_redeclared(self, name: str, sql: str) -> None:
        """``name`` is declared by ``sql`` from now on, where it was in the replay order and keeping its
        journal (a CREATE TABLE … AS SELECT whose query was dropped: the table stays, the query goes)."""
        entry = self.entry(name)
        if entry is None:
            return
        entry["sql"] = sql
        self.data["queries"].pop(entry["uid"], None)
        self.save()
        shutil.rmtree(self.checkpoint_dir(entry["uid"]), ignore_errors=True)

    def record_settings(self, settings: dict) -> None:
        self.data["settings"] = dict(settings)
        self.save()

    def query(self, uid: str) -> dict:
        """A standing query's saved status: ``{"paused": bool, "failed": message or None}``."""
        return {"paused": False, "failed": None, **self.data["queries"].get(uid, {})}

    def set_query(self, uid: str, **status) -> None:
        self.data["queries"][uid] = {**self.query(uid), **status}
        self.save()

    # -- script progress (dsms run --state-dir) ------------------------------------------------

    @property
    def script(self) -> list[str]:
        """The statements of a script run in this directory that have taken effect, in order."""
        return list(self.data["script"])

    def record_script(self, applied: list[str]) -> None:
        self.data["script"] = list(applied)
        self.save()

    # -- files ---------------------------------------------------------------------------------

    def journal(self, name: str) -> Journal | None:
        """The journal of the memory stream or table ``name`` (None if the catalog does not hold it)."""
        entry = self.entry(name)
        return None if entry is None else Journal(os.path.join(self.path, "streams", f"{entry['uid']}.log"))

    def checkpoint_dir(self, uid: str) -> str:
        return os.path.join(self.path, "queries", uid)

    def save(self) -> None:
        path = os.path.join(self.path, "catalog.json")
        tmp = path + ".tmp"
        try:
            with open(tmp, "w") as f:
                json.dump(self.data, f, indent=1)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)  # the old catalog stays whole until the new one is
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as e:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise DsmsError(f"cannot write the state directory's catalog {path}: {e.strerror or e} "
                            "(the previous one is kept; free disk space or fix permissions)") from None

    def close(self) -> None:
        if not self._lock.closed:
            fcntl.flock(self._lock.fileno(), fcntl.LOCK_UN)
            self._lock.close()

    def _remove_files(self, uid: str) -> None:
        shutil.rmtree(self.checkpoint_dir(uid), ignore_errors=True)
        log = os.path.join(self.path, "streams", f"{uid}.log")
        if os.path.exists(log):
            os.remove(log)

    def _collect_garbage(self) -> None:
        """Remove what belongs to objects that are gone (a crash between a DROP and its clean-up)."""
        live = {o["uid"] for o in self.data["objects"]}
        queries = os.path.join(self.path, "queries")
        for uid in os.listdir(queries) if os.path.isdir(queries) else ():
            if uid not in live:
                shutil.rmtree(os.path.join(queries, uid), ignore_errors=True)
        streams = os.path.join(self.path, "streams")
        for name in os.listdir(streams) if os.path.isdir(streams) else ():
            if name.removesuffix(".log") not in live:
                os.remove(os.path.join(streams, name))
