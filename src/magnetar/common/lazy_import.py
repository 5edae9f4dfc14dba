"""Import a module on first attribute access (start-up time and idle memory, issue 15).

Theory of operation: ``m = lazy_import("magnetar.common.rest_models")`` binds
``m`` to a stand-in whose first attribute access imports the real module (with
``importlib``, so the import lock and ``sys.modules`` work as usual) and
returns that attribute; every later access goes straight to the module.
Nothing is registered in ``sys.modules`` until then, so a process that never
touches ``m`` never loads it -- e.g. pydantic for the admin REST models, or
httpx for broker-to-broker HTTP calls, in a broker that only moves messages.
Use it for modules referenced only inside functions (and in string
annotations); a module-level ``m.X`` defeats it.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class LazyModule:
    __slots__ = ("_name", "_module")

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:
        module = self._module
        if module is None:
            module = self._module = importlib.import_module(self._name)
        return getattr(module, attr)

    def __repr__(self) -> str:
        state = "loaded" if self._module is not None else "not loaded yet"
        return f"<lazy module {self._name!r} ({state})>"


def lazy_import(name: str) -> Any:
    """A stand-in for module ``name`` that imports it on first attribute access."""
    return LazyModule(name)
