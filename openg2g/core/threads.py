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
from typing import ParamSpec, TypeVar

import scipy.linalg  # noqa: F401  (loads scipy's own BLAS, so the controller below sees it too)
from threadpoolctl import ThreadpoolController

__all__ = ["one_blas_thread", "with_one_blas_thread"]

_P = ParamSpec("_P")
_R = TypeVar("_R")

_CONTROLLER: ThreadpoolController | None = None
_DEPTH = 0
"""Contexts entered and not yet left: an inner one changes nothing and costs about 1 us."""


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """A context in which the process's BLAS libraries (numpy's and scipy's) use one thread; the
    previous limits come back when the outermost one ends. Entering it costs about 15 us."""
    global _CONTROLLER, _DEPTH
    if _DEPTH:
        yield
        return
    if _CONTROLLER is None:  # inspecting the loaded libraries is the slow part (about 1 ms)
        _CONTROLLER = ThreadpoolController()
    with _CONTROLLER.limit(limits=1, user_api="blas"):
        _DEPTH += 1
        try:
            yield
        finally:
            _DEPTH -= 1


def with_one_blas_thread(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """``fn`` run inside :func:`one_blas_thread`."""

    @functools.wraps(fn)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with one_blas_thread():
            return fn(*args, **kwargs)

    return wrapper
