"""Connectors as plug-ins: descriptors (``descriptor.py``) found in a registry (``registry.py``).

dsms's own connectors are described here, one module each (``filesystem.py``,
``memory.py``, ``datagen.py``, ``print_sink.py``, ``blackhole.py``); their
runtime halves are the modules of the same names in ``runtime/connectors/``.
docs/development.md has the recipe for adding one.
"""

from .descriptor import ConnectorDescriptor, Format, Option, OptionError
from .registry import GROUP, ConnectorRegistryError, connector_names, connectors, find, reload
