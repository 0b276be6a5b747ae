"""Bounds every layer shares: what a machine can simulate, so nothing unbounded gets accepted."""

from __future__ import annotations

import os
import resource

__all__ = [
    "CAP_CALIBRATED_MIN_W",
    "CAP_MAX_W",
    "CAP_MIN_W",
    "MAX_DURATION_S",
    "MAX_PROCESSES_PER_CPU",
    "MAX_RETRIES",
    "bound_text",
    "lower_limit",
    "max_processes",
]

MAX_DURATION_S = 366 * 86_400
"""Longest run accepted (s): a leap year. Also the longest ramp or delay anything may ask for."""

MAX_RETRIES = 10
"""Most re-attempts of a run whose worker process died. A worker that dies again and again (out of
memory, a crash in a native library) costs a whole run each time; ten attempts are past any
passing cause, so a larger count only hides a run that cannot finish."""

CAP_MIN_W = 200.0
"""Lowest settable H100 SXM power limit (W per GPU)."""

CAP_MAX_W = 700.0
"""Highest settable H100 SXM power limit (W per GPU)."""

CAP_CALIBRATED_MIN_W = 602.0
"""Lowest power limit the power-cap model is calibrated on (W per GPU): 14 % below the 700 W
default, the cut the reports behind its slowdown exponent measured. Lower caps are accepted down to
:data:`CAP_MIN_W` and flagged in the run summary: their slowdown is an extrapolation."""

MAX_PROCESSES_PER_CPU = 4
"""Most worker processes per usable CPU (sweep, study and benchmark ``--workers``, ``train
--n-envs``). Beyond the cores a process only waits its turn, and each holds a simulator of its own
(and torch, for training: a few hundred MB), so thousands of them exhaust memory and file handles
instead of going faster; four per core leaves room for runs that wait on their disk."""


def max_processes() -> int:
    """The most worker processes accepted on this machine: :data:`MAX_PROCESSES_PER_CPU` times the
    CPUs this process may run on (its affinity mask where the platform has one)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return MAX_PROCESSES_PER_CPU * cpus


def bound_text() -> str:
    """:func:`max_processes` and why, for messages."""
    return (
        f"at most {max_processes()} ({MAX_PROCESSES_PER_CPU} per CPU of the {max_processes() // MAX_PROCESSES_PER_CPU} "
        "this process may use; beyond the cores a process only waits its turn and holds memory)"
    )


def lower_limit(which: int, bound: int) -> None:
    """Lower this process's resource limit ``which`` (``resource.RLIMIT_AS``...) to at most
    ``bound``, soft and hard: a limit already lower stays (a shared cluster's ``ulimit -v``), and the
    soft limit never rises above the hard one, which an unprivileged process may not raise."""
    soft, hard = resource.getrlimit(which)
    hard = bound if hard == resource.RLIM_INFINITY else min(hard, bound)
    soft = hard if soft == resource.RLIM_INFINITY else min(soft, hard)
    resource.setrlimit(which, (soft, hard))
