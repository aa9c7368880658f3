"""Names a package exports without importing the modules behind them until first use."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, modules: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` (PEP 562) of ``package``: ``name`` is imported from
    ``modules[name]`` (absolute, or relative to ``package`` with a leading dot) when it is
    first asked for, so a caller of one name does not import the code behind the others."""

    def __getattr__(name: str) -> Any:
        module = modules.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module, package), name)

    return __getattr__
