"""Find and build controllers named in a scenario: stock ones by name, users' own by file path.

``kind: ofo`` names a stock controller from the top-level ``controllers`` package;
``kind: path/to/file.py:ClassName`` loads a class from a file (relative to the scenario file).
A controller class with a ``Config`` attribute (a pydantic model) is built as
``cls(cls.Config(**params))``; one without is built as ``cls(**params)``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from openg2g.core.errors import ControllerError
from openg2g.core.protocols import Controller
from openg2g.scenario.schema import ControllerSpec

__all__ = ["build_controller", "resolve_controller", "stock_controllers"]


def stock_controllers() -> dict[str, type[Controller]]:
    """The stock controllers by scenario name."""
    from controllers import STOCK

    return dict(STOCK)


def _load_from_file(kind: str, base_dir: Path) -> type[Controller]:
    file_part, _, class_name = kind.rpartition(":")
    path = (base_dir / file_part).resolve()
    if not path.is_file():
        raise ControllerError(f"controller file {file_part!r} not found (looked for {path})")
    module_name = f"openg2g_user_controller_{abs(hash(str(path)))}"
    module = sys.modules.get(module_name)
    if module is None:
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            raise ControllerError(f"cannot import controller file {path}")
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception as exc:  # a user's file may fail in any way; say where
            raise ControllerError(f"importing {path} failed: {type(exc).__name__}: {exc}") from exc
        sys.modules[module_name] = module
    cls = getattr(module, class_name, None)
    if cls is None:
        raise ControllerError(f"{path} has no class {class_name!r}")
    return cls


def resolve_controller(kind: str, base_dir: Path) -> type[Controller]:
    """The controller class a scenario's ``kind`` names.

    :raises ControllerError: unknown stock name (the message lists the valid ones), missing file
        or class, or a class that is not a :class:`~openg2g.core.protocols.Controller`.
    """
    if ":" in kind and kind.rpartition(":")[0].endswith(".py"):
        cls = _load_from_file(kind, base_dir)
    else:
        stock = stock_controllers()
        if kind not in stock:
            raise ControllerError(
                f"unknown controller {kind!r}; stock controllers: {', '.join(sorted(stock))} "
                "(or give path/to/file.py:ClassName)"
            )
        cls = stock[kind]
    if not (isinstance(cls, type) and issubclass(cls, Controller)):
        raise ControllerError(f"{kind!r} is not a subclass of openg2g.core.protocols.Controller")
    return cls


def build_controller(spec: ControllerSpec, base_dir: Path) -> Controller:
    """Instantiate the controller of ``spec`` with its validated parameters.

    :raises ControllerError: see :func:`resolve_controller`, or a constructor that rejects ``params``.
    :raises pydantic.ValidationError: ``params`` do not fit the controller's ``Config``.
    """
    cls = resolve_controller(spec.kind, base_dir)
    config_cls = getattr(cls, "Config", None)
    if config_cls is not None:
        controller = cls(config_cls(**spec.params))
    else:
        try:
            controller = cls(**spec.params)
        except TypeError as exc:
            raise ControllerError(f"{spec.kind}: bad parameters {sorted(spec.params)}: {exc}") from exc
    controller.name = spec.name or spec.kind
    return controller
