"""Find and build controllers named in a scenario: stock ones by name, users' own by file path.

``kind: ofo`` names a registered controller: the stock ones (the repository's ``controllers/``
folder, installed as :mod:`openg2g.controllers`) and any other package's, each an entry point of
the ``openg2g.controllers`` group; ``kind: path/to/file.py:ClassName`` loads a class from a file
(relative to the scenario file); ``kind: package.module:ClassName`` imports it from an installed module.
The same loader (:func:`load_plugin`) finds the RL env's reward and observation terms
(:mod:`openg2g.envs.terms`, entry-point group ``openg2g.rl_terms``).
A controller class with a ``Config`` attribute (a pydantic model) is built as
``cls(cls.Config(**params))``; one without is built as ``cls(**params)``.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Mapping
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from openg2g.control.config import ControllerSpec
from openg2g.core.errors import ControllerError, G2GError, raised_in_user_code
from openg2g.core.interfaces import Controller

__all__ = [
    "build_controller",
    "describe_controller",
    "instantiate",
    "load_plugin",
    "registered",
    "resolve_controller",
    "stock_controllers",
]

T = TypeVar("T")


ENTRY_POINT_GROUP = "openg2g.controllers"
"""Package entry-point group of controllers a scenario can name by ``kind`` (the stock ones, in
openg2g's ``pyproject.toml``, and any other installed package's)."""


def registered(group: str, what: str) -> dict[str, object]:
    """Every entry point of ``group``, loaded, by name.

    :param what: what the group holds, for messages (``"controller"``, ``"reward term"``).
    :raises ControllerError: an entry point that cannot be imported (the message names it).
    """
    return {entry.name: _load_entry(entry, what) for entry in entry_points(group=group)}


def _load_entry(entry: EntryPoint, what: str) -> object:
    """What one entry point names, imported.

    :raises ControllerError: it cannot be imported (the message names it).
    """
    try:
        return entry.load()
    except Exception as exc:  # another package's plug-in may fail in any way; say which
        raise ControllerError(f"{what} {entry.name!r} ({entry.value}) failed to import: {exc}") from exc


def stock_controllers() -> dict[str, type[Controller]]:
    """The registered controllers by scenario name: every ``openg2g.controllers`` entry point.

    :raises ControllerError: an entry point that cannot be imported (the message names it).
    """
    return registered(ENTRY_POINT_GROUP, "controller")  # type: ignore[return-value]  # checked where resolved


def _raised(exc: BaseException) -> str:
    """What a user's code raised, for a message. ``SystemExit`` and ``KeyboardInterrupt`` are caught
    too: escaping, they would end the whole command (``sys.exit(0)`` with status 0 and nothing done),
    and a controller file is the scenario's input, so its failure is an input error like any other."""
    if isinstance(exc, SystemExit):
        return f"SystemExit: sys.exit({exc.code!r}) was called"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _load_from_file(kind: str, base_dir: Path, what: str) -> object:
    file_part, _, class_name = kind.rpartition(":")
    path = (base_dir / file_part).resolve()
    if not path.is_file():
        raise ControllerError(f"{what} file {file_part!r} not found (looked for {path})")
    module_name = f"openg2g_user_controller_{abs(hash(str(path)))}"
    module = sys.modules.get(module_name)
    if module is None:
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            raise ControllerError(f"cannot import {what} file {path}")
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except BaseException as exc:  # a user's file may fail in any way, sys.exit() included; say where
            raise ControllerError(f"importing {path} failed: {_raised(exc)}{raised_in_user_code(exc)}") from exc
        sys.modules[module_name] = module
    cls = getattr(module, class_name, None)
    if cls is None:
        raise ControllerError(f"{path} has no class {class_name!r}")
    return cls


def _load_from_module(kind: str, what: str) -> object:
    module_name, _, name = kind.rpartition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise ControllerError(f"{what} {kind!r}: no module named {exc.name!r}") from None
    except BaseException as exc:  # an installed module may fail in any way, sys.exit() included; say where
        raise ControllerError(
            f"{what} {kind!r}: importing {module_name} failed: {_raised(exc)}{raised_in_user_code(exc)}"
        ) from exc
    found = getattr(module, name, None)
    if found is None:
        raise ControllerError(f"{what} {kind!r}: module {module_name} has no {name!r}")
    return found


def load_plugin(kind: str, base_dir: Path, group: str, what: str, *, stock_label: str | None = None) -> object:
    """What ``kind`` names: ``path/to/file.py:Name`` (a file, relative to ``base_dir``),
    ``package.module:Name`` (an importable module) or the name of an entry point of ``group``.

    :param what: what is looked for, for messages (``"controller"``, ``"observation term"``).
    :param stock_label: how an unknown name's message introduces the valid names (default
        ``"registered <what>s"``).
    :raises ControllerError: unknown name (the message lists the valid ones), missing file, module
        or attribute, or an import that fails (the message says where).
    """
    source, sep, _ = kind.rpartition(":")
    if sep and source.endswith(".py"):
        return _load_from_file(kind, base_dir, what)
    if sep and source:
        return _load_from_module(kind, what)
    # only the entry point asked for is imported: another package's broken plug-in is named when
    # a scenario names it, and stops nothing else
    matches = list(entry_points(group=group, name=kind))
    if not matches:
        label = stock_label or f"registered {what}s"
        names = sorted({entry.name for entry in entry_points(group=group)})
        raise ControllerError(
            f"unknown {what} {kind!r}; {label}: {', '.join(names) or '(none)'} "
            "(or give path/to/file.py:ClassName or package.module:ClassName)"
        )
    if len({entry.value for entry in matches}) > 1:
        raise ControllerError(
            f"{what} {kind!r} is registered by several packages: {', '.join(sorted(e.value for e in matches))}; "
            "name one as package.module:ClassName"
        )
    return _load_entry(matches[0], what)


def resolve_controller(kind: str, base_dir: Path) -> type[Controller]:
    """The controller class a scenario's ``kind`` names (see :func:`load_plugin`).

    :raises ControllerError: unknown stock name (the message lists the valid ones), missing file,
        module or class, or a class that is not a :class:`~openg2g.core.interfaces.Controller`.
    """
    cls = load_plugin(kind, base_dir, ENTRY_POINT_GROUP, "controller", stock_label="stock controllers")
    if not (isinstance(cls, type) and issubclass(cls, Controller)):
        raise ControllerError(f"{kind!r} is not a subclass of openg2g.core.interfaces.Controller")
    return cls


def describe_controller(spec: ControllerSpec, base_dir: Path) -> str:
    """How messages name a controller: its label, and the file it comes from for a user's class."""
    label = spec.name or spec.kind
    file_part, _, class_name = spec.kind.rpartition(":")
    if file_part.endswith(".py"):
        return f"controller {label!r} (class {class_name} in {(base_dir / file_part).resolve()})"
    return f"controller {label!r}"


def _guarded(who: str, step: str, make: Callable[[], T]) -> T:
    """``make()``, with any failure but a parameter ``ValidationError`` as a ControllerError naming ``who``."""
    try:
        return make()
    except ValidationError:
        raise  # the loader reports each parameter by its field path
    except G2GError as exc:
        raise ControllerError(f"{who}: {exc}") from exc
    except BaseException as exc:  # a user's class may fail in any way, sys.exit() included; say which, where and how
        raise ControllerError(f"{who}: {step} raised {_raised(exc)}{raised_in_user_code(exc)}") from exc


def instantiate(cls: Callable[..., T], params: Mapping[str, Any], who: str, *args: Any) -> T:
    """A plug-in built with its validated parameters: ``cls(*args, cls.Config(**params))`` for a
    class with a ``Config`` attribute (a pydantic model), else ``cls(*args, **params)``.

    :param who: the plug-in as messages name it.
    :raises ControllerError: the ``Config`` or the constructor fails in any other way than a
        parameter ``ValidationError`` (the message names ``who`` and the exception).
    :raises pydantic.ValidationError: ``params`` do not fit the ``Config``.
    """
    config_cls = getattr(cls, "Config", None)
    if config_cls is None:
        return _guarded(who, "__init__", lambda: cls(*args, **params))
    config = _guarded(who, f"{getattr(config_cls, '__name__', 'Config')}(**params)", lambda: config_cls(**params))
    return _guarded(who, "__init__", lambda: cls(*args, config))


def build_controller(spec: ControllerSpec, base_dir: Path) -> Controller:
    """Instantiate the controller of ``spec`` with its validated parameters (:func:`instantiate`).

    :raises ControllerError: see :func:`resolve_controller`, or a ``Config`` or constructor that
        rejects ``params`` or fails in any other way (the message names the controller, its file
        and the exception).
    :raises pydantic.ValidationError: ``params`` do not fit the controller's ``Config``.
    """
    cls = resolve_controller(spec.kind, base_dir)
    controller = instantiate(cls, spec.params, describe_controller(spec, base_dir))
    controller.name = spec.name or spec.kind
    return controller
