"""A per-model budget of batch changes in any 60 s, shared by the controllers that enforce one.

A fleet that resizes a model's batch every second is not deployable; the summary counts the most
changes of one model in any 60 s (``max_batch_changes_per_min``, :mod:`openg2g.record.metrics`,
the window of :mod:`openg2g.core.minute`), and a controller with a budget of ``K`` never exceeds
it: a model that changed ``K`` times in the last 60 s is held until the oldest of those is 60 s old.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable

from openg2g.core.minute import in_last_minute

__all__ = ["ChangeBudget"]


class ChangeBudget:
    """At most ``limit`` changes of each key within any 60 s.

    :param limit: changes allowed per window; ``None``: no budget.
    """

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self._times: dict[Hashable, deque[float]] = {}

    def allows(self, key: Hashable, t_s: float) -> bool:
        """Whether ``key`` may change at ``t_s`` (s) within its budget."""
        if self.limit is None:
            return True
        return in_last_minute(self._times.setdefault(key, deque()), t_s) < self.limit

    def spend(self, key: Hashable, t_s: float) -> None:
        """Record a change of ``key`` at ``t_s`` (s)."""
        self._times.setdefault(key, deque()).append(t_s)
