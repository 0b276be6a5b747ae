"""One BLAS thread while openg2g computes.

The power-flow matrices are small (tens to a few hundred unknowns): a multi-threaded BLAS only
spins on them (a one-hour ieee13 run took 45 s of CPU for 24 s of wall time, 19 s and 20 s with
one thread), and how it splits the work changes the last bits of a result with the number of
cores, so a run would not be bit-identical from one machine to another. Building components and
running a simulation therefore hold the BLAS libraries of the process to one thread.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

import scipy.linalg  # noqa: F401  (loads scipy's own BLAS, so the controller below sees it too)
from threadpoolctl import ThreadpoolController

__all__ = ["one_blas_thread"]

_CONTROLLER: ThreadpoolController | None = None


def one_blas_thread() -> AbstractContextManager[Any]:
    """A context in which the process's BLAS libraries (numpy's and scipy's) use one thread; the
    previous limits come back when it ends. Entering it costs about 15 us."""
    global _CONTROLLER
    if _CONTROLLER is None:  # inspecting the loaded libraries is the slow part (about 1 ms)
        _CONTROLLER = ThreadpoolController()
    return _CONTROLLER.limit(limits=1, user_api="blas")
