"""The connectors dsms knows: found through the Python entry point group ``dsms.connectors``.

dsms's own connectors are entry points of the ``dsms`` distribution
(pyproject.toml); another package adds one the same way::

    [project.entry-points."dsms.connectors"]
    mydb = "mydb_dsms.descriptor:DESCRIPTOR"

Each entry point names a :class:`ConnectorDescriptor`. They are loaded
once, on first use (:func:`reload` reads them again, e.g. after a package
was installed into the running interpreter).

Example:
    >>> find("filesystem").name, find("FILE").name
    ('file', 'file')
    >>> find("nope") is None
    True
"""

from __future__ import annotations

import threading
from importlib.metadata import entry_points

from ..errors import ConnectorRegistryError
from .descriptor import ConnectorDescriptor

GROUP = "dsms.connectors"

_lock = threading.Lock()
_loaded: dict[str, ConnectorDescriptor] | None = None  # name and alias -> descriptor


def _load() -> dict[str, ConnectorDescriptor]:
    by_name: dict[str, ConnectorDescriptor] = {}
    seen: set[tuple[str, str]] = set()
    for ep in entry_points(group=GROUP):
        if (ep.name, ep.value) in seen:  # the same distribution found twice on sys.path
            continue
        seen.add((ep.name, ep.value))
        dist = getattr(getattr(ep, "dist", None), "name", None) or "an installed package"
        try:
            descriptor = ep.load()
        except Exception as e:  # noqa: BLE001 - any import failure of a plug-in is reported the same way
            raise ConnectorRegistryError(f"the connector '{ep.name}' of {dist} ({ep.value}) cannot be loaded: "
                                         f"{type(e).__name__}: {e}; fix or uninstall {dist}") from None
        if not isinstance(descriptor, ConnectorDescriptor):
            raise ConnectorRegistryError(f"the entry point '{ep.name}' of {dist} ({ep.value}) is not a "
                                         "dsms ConnectorDescriptor")
        for name in descriptor.names:
            other = by_name.get(name.lower())
            if other is not None and other is not descriptor:
                raise ConnectorRegistryError(f"two connectors are named '{name}' (from {ep.value} and "
                                             f"{other.module}); uninstall one of them")
            by_name[name.lower()] = descriptor
    return by_name


def _registry() -> dict[str, ConnectorDescriptor]:
    global _loaded
    with _lock:
        if _loaded is None:
            _loaded = _load()
        return _loaded


def reload() -> None:
    """Forget the loaded connectors: the next lookup reads the entry points again."""
    global _loaded
    with _lock:
        _loaded = None


def find(name: str | None) -> ConnectorDescriptor | None:
    """The connector called ``name`` (or one of its aliases), case-insensitively."""
    return _registry().get(name.lower()) if name else None


def connectors() -> tuple[ConnectorDescriptor, ...]:
    """Every known connector once, by name."""
    unique = {d.name: d for d in _registry().values()}
    return tuple(unique[n] for n in sorted(unique))


def connector_names(role: str | None = None) -> tuple[str, ...]:
    """Names and aliases of the connectors that can be a ``source``, a ``sink`` (or any when None)."""
    return tuple(sorted(n for n, d in _registry().items() if role is None or role in d.kinds))
