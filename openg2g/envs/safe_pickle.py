"""Reading the pickles of Stable-Baselines3 files without running code they could carry.

A pickle names callables that the reader calls to rebuild objects, so reading an untrusted one
runs whatever it names. :func:`load_restricted` calls only numpy's own array, dtype and scalar
constructors (and any classes the caller names); the objects SB3 keeps in its files besides arrays
(Gymnasium spaces, ``VecNormalize`` and its ``RunningMeanStd`` statistics, numpy random
generators) come back as inert :class:`Pickled` records of the class name and the state the pickle
gave, with none of their code run. Any other name is refused. That covers a saved model's spaces
and last observations and a ``vecnormalize.pkl`` written by ``VecNormalize.save``.
"""

from __future__ import annotations

import io
import pickle
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from gymnasium import spaces

from openg2g.core.errors import ControllerError

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["Pickled", "load_restricted", "rebuild_space"]

_NUMPY = {
    f"{module}.{name}"
    for module, name in (
        ("numpy", "dtype"),
        ("numpy", "ndarray"),
        ("numpy._core.numeric", "_frombuffer"),
        ("numpy.core.numeric", "_frombuffer"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "scalar"),
        ("numpy.core.multiarray", "scalar"),
    )
}
"""numpy's constructors of arrays, dtypes and scalars: they build data and run nothing else."""

_RECORDED = (
    "gymnasium.spaces.",
    "numpy.random.",
    "stable_baselines3.common.vec_env.vec_normalize.VecNormalize",
    "stable_baselines3.common.running_mean_std.RunningMeanStd",
    "collections.OrderedDict",
)
"""Names (or name prefixes) read as :class:`Pickled` records instead of being called."""


class Pickled:
    """What a pickle said about an object of an allowed class, without building it.

    :ivar name: the class (or constructor) as ``module.qualname``.
    :ivar args: the arguments the pickle passed to it.
    :ivar state: the state the pickle set on it (usually the object's ``__dict__``), or None.
    """

    name = ""

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:
        obj = super().__new__(cls)
        obj.args = args
        obj.state = None
        return obj

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args: tuple[Any, ...]
        self.state: Any

    def __setstate__(self, state: Any) -> None:
        self.state = state

    def __setitem__(self, key: Any, value: Any) -> None:  # an OrderedDict's items
        if self.state is None:
            self.state = {}
        self.state[key] = value

    def field(self, key: str) -> Any:
        """The value of ``key`` in the recorded state (a dict), or None."""
        return self.state.get(key) if isinstance(self.state, dict) else None

    def __repr__(self) -> str:
        return f"Pickled({self.name})"


class _Restricted(pickle.Unpickler):
    def __init__(self, data: bytes, classes: Mapping[str, Any]):
        super().__init__(io.BytesIO(data))
        self.classes = classes
        self.records: dict[str, type[Pickled]] = {}

    def find_class(self, module: str, name: str) -> Any:
        full = f"{module}.{name}"
        if full in self.classes:
            return self.classes[full]
        if full in _NUMPY:
            return super().find_class(module, name)
        if full.startswith(_RECORDED):
            if full not in self.records:
                self.records[full] = type(name, (Pickled,), {"name": full})
            return self.records[full]
        raise pickle.UnpicklingError(f"it names {full}, which is not among the classes read without running code")


def load_restricted(data: bytes, source: str | Path, classes: Mapping[str, Any] | None = None) -> Any:
    """Read a pickle that may hold numpy arrays, plain Python values and records of the allowed
    classes (module doc), calling nothing else.

    :param source: the file (and entry) read, named in errors.
    :param classes: further names (``module.qualname``) to return as the given objects.
    :raises ControllerError: the pickle is broken or names anything else (the message says what).
    """
    try:
        return _Restricted(data, classes or {}).load()
    except Exception as exc:  # noqa: BLE001 - a broken pickle raises many kinds
        raise ControllerError(f"{source}: cannot read it without unpickling code: {exc}") from None


def rebuild_space(record: Any, source: str) -> spaces.Space:
    """A Gymnasium space from its :class:`Pickled` record (Box, Discrete, MultiDiscrete, MultiBinary).

    :raises ControllerError: another kind of space, or a record without the fields of its kind.
    """
    kind = record.name.rpartition(".")[2] if isinstance(record, Pickled) else type(record).__name__
    try:
        if kind == "Box":
            low, high = np.asarray(record.field("low")), np.asarray(record.field("high"))
            return spaces.Box(low=low, high=high, shape=tuple(record.field("_shape")), dtype=record.field("dtype"))
        if kind == "Discrete":
            return spaces.Discrete(int(record.field("n")), start=int(record.field("start")))
        if kind == "MultiDiscrete":
            return spaces.MultiDiscrete(
                np.asarray(record.field("nvec")), dtype=record.field("dtype"), start=record.field("start")
            )
        if kind == "MultiBinary":
            return spaces.MultiBinary(record.field("n"))
    except (TypeError, ValueError) as exc:
        raise ControllerError(f"{source}: its {kind} space cannot be rebuilt: {exc}") from None
    raise ControllerError(
        f"{source}: holds a {kind} space; openg2g policies act on Box, Discrete, MultiDiscrete or MultiBinary spaces"
    )
