"""Package faces whose names load their modules on first use (PEP 562).

A package that re-exports heavy modules (pandas, pyarrow, matplotlib) keeps ``import package``
cheap with::

    __getattr__, __dir__ = lazy_exports(__name__, {"runner": ("run_sweep",), ...})
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, modules: Mapping[str, Sequence[str]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module-level ``__getattr__`` and ``__dir__`` of ``package``.

    :param package: the package's ``__name__``.
    :param modules: submodule name -> the names it provides to the package.
    """
    home = {name: module for module, names in modules.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = home.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)  # later lookups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *home})

    return __getattr__, __dir__
