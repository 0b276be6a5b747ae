"""One BLAS thread while openg2g computes.

The power-flow matrices are small (tens to a few hundred unknowns): a multi-threaded BLAS only
spins on them (a one-hour ieee13 run took 45 s of CPU for 24 s of wall time, 19 s and 20 s with
one thread), and how it splits the work changes the last bits of a result with the number of
cores, so a run would not be bit-identical from one machine to another. Building components and
running a simulation therefore hold the BLAS libraries of the process to one thread, and so do
the grid's public solves (:func:`with_one_blas_thread`) when called on their own, from a notebook
or a test: under load, a threaded BLAS made a voltage-collapse test 40 times slower.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar

from threadpoolctl import ThreadpoolController

__all__ = ["one_blas_thread", "with_one_blas_thread"]

_P = ParamSpec("_P")
_R = TypeVar("_R")

_BLAS: list[Any] | None = None
"""threadpoolctl's controllers of the process's BLAS libraries, found once."""
_DEPTH = 0
"""Contexts entered and not yet left: an inner one changes nothing and costs about 1 us."""


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """A context in which the process's BLAS libraries (numpy's and scipy's) use one thread; the
    previous limits come back when the outermost one ends.

    Each library's own get and set calls, a few microseconds, rather than threadpoolctl's
    ``limit``, which describes every library (versions, paths) at each entry: 36-77 us, paid at
    every env step (``Simulation.run_until``).
    """
    global _BLAS, _DEPTH
    if _DEPTH:
        yield
        return
    if _BLAS is None:  # inspecting the loaded libraries is the slow part (about 1 ms)
        # scipy's own BLAS must be loaded to be found; imported here, not with this module, so
        # that what only decorates a solve (the schema's grid settings) loads no scipy
        import scipy.linalg  # noqa: F401

        _BLAS = ThreadpoolController().select(user_api="blas").lib_controllers
    previous = [lib.get_num_threads() for lib in _BLAS]
    for lib in _BLAS:
        lib.set_num_threads(1)
    _DEPTH += 1
    try:
        yield
    finally:
        _DEPTH -= 1
        for lib, n in zip(_BLAS, previous):
            lib.set_num_threads(n)


def with_one_blas_thread(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """``fn`` run inside :func:`one_blas_thread`."""

    @functools.wraps(fn)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with one_blas_thread():
            return fn(*args, **kwargs)

    return wrapper
