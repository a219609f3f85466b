"""SET, RESET and the state directory: how an engine's settings and catalog are kept and restored.

:class:`EngineState` is a part of :class:`dsms.Engine` (it runs the SET and
RESET statements and records what a state directory keeps); the engine
holds the catalog, the scheduler and the :class:`StateDir` it uses.
"""

from __future__ import annotations

from dataclasses import replace

from .grammar import DsmsError, ResetOption, SetOption, Statement, parse_statement
from .planner.catalog import DEFAULT_SETTINGS, SETTING_ALIASES, SourceDef
from .queries import rows_table
from .query import Result
from .settings import check_setting


class EngineState:
    """The SET / RESET statements and the state directory of an :class:`dsms.Engine`."""

    # -- SET and RESET ------------------------------------------------------------------

    def _do_SetOption(self, stmt: SetOption, base: str) -> Result:
        if stmt.key is None:
            rows = [{"key": k, "value": v} for k, v in sorted(self.catalog.settings.items())]
            return Result("rows", table=rows_table(rows, ["key", "value"]))
        if stmt.key in SETTING_ALIASES:  # Flink's name of a setting
            stmt = replace(stmt, key=SETTING_ALIASES[stmt.key])
        self._set(stmt.key, stmt.value, stmt, save=True)
        return Result("ok", f"Set {stmt.key} = {stmt.value}")

    def _set(self, key: str, value: str, stmt: SetOption | None, save: bool) -> None:
        key = SETTING_ALIASES.get(key, key)  # Flink's name of a setting
        check_setting(key, value, *((stmt.span, stmt.source) if stmt is not None else ()))
        if key == "batch.size":
            self.scheduler.batch_rows = self.batch_rows or int(value)  # for queries started from now on
        self.catalog.settings[key] = value
        if save:
            self._save_settings()

    def _do_ResetOption(self, stmt: ResetOption, base: str) -> Result:
        if stmt.key in SETTING_ALIASES:
            stmt = replace(stmt, key=SETTING_ALIASES[stmt.key])
        if stmt.key is None:
            self.catalog.settings = dict(DEFAULT_SETTINGS)
        elif stmt.key in DEFAULT_SETTINGS:
            self.catalog.settings[stmt.key] = DEFAULT_SETTINGS[stmt.key]
        else:
            self.catalog.settings.pop(stmt.key, None)
        self._save_settings()
        return Result("ok", "Reset")

    # -- the state directory ----------------------------------------------------------

    def _restore(self) -> None:
        """Recreate the saved catalog, in order, each object under the settings it was created with."""
        for entry in self.durable.objects:
            self.catalog.settings = dict(entry["settings"])
            if self.batch_rows:
                self.scheduler.batch_rows = self.batch_rows
            self._replaying = entry
            try:
                self.execute_statement(parse_statement(entry["sql"]), entry["base"])
            except DsmsError as e:
                raise DsmsError(f"cannot restore {entry['kind']} '{entry['name']}' from the state directory "
                                f"{self.durable.path}: {e}") from e
            finally:
                self._replaying = None
        self.catalog.settings = dict(self.durable.settings or DEFAULT_SETTINGS)
        if self.catalog.settings.get("batch.size", "").isdigit():
            self.scheduler.batch_rows = int(self.catalog.settings["batch.size"])
        if self.batch_rows:
            self.scheduler.batch_rows = self.batch_rows
        for obj in self.catalog.of_kind("stream", "table"):
            if isinstance(obj, SourceDef) and obj.descriptor.insertable:
                self.scheduler.memory_log(obj)  # what was inserted is back before anything runs

    def _save_create(self, kind: str, name: str, stmt: Statement, base: str) -> str | None:
        if self.durable is None or self._replaying is not None:
            return None
        return self.durable.record_create(kind, name, stmt.text, base, self.catalog.settings)

    def _save_settings(self) -> None:
        if self.durable is not None and self._replaying is None and not self._in_session:
            self.durable.record_settings(self.catalog.settings)
