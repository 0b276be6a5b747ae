"""A per-model budget of batch changes in any 60 s, shared by the controllers that enforce one.

A fleet that resizes a model's batch every second is not deployable; the summary counts the most
changes of one model in any 60 s (``max_batch_changes_per_min``, :mod:`openg2g.record.metrics`),
and a controller with a budget of ``K`` never exceeds it: a model that changed ``K`` times in the
last 60 s is held until the oldest of those is 60 s old.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable

__all__ = ["WINDOW_S", "ChangeBudget"]

WINDOW_S = 60.0
"""The budget's window (s), as ``summary.json`` counts ``max_batch_changes_per_min``."""

_TOL_S = 1e-9
"""Times this close are one instant (control times are sums of float periods)."""


class ChangeBudget:
    """At most ``limit`` changes of each key within any :data:`WINDOW_S`.

    :param limit: changes allowed per window; ``None``: no budget.
    """

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self._times: dict[Hashable, deque[float]] = {}

    def allows(self, key: Hashable, t_s: float) -> bool:
        """Whether ``key`` may change at ``t_s`` (s) within its budget."""
        if self.limit is None:
            return True
        recent = self._times.setdefault(key, deque())
        while recent and recent[0] <= t_s - WINDOW_S + _TOL_S:
            recent.popleft()
        return len(recent) < self.limit

    def spend(self, key: Hashable, t_s: float) -> None:
        """Record a change of ``key`` at ``t_s`` (s)."""
        self._times.setdefault(key, deque()).append(t_s)
