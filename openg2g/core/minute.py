"""The 60 s window in which a model's batch changes are counted (the run summary's
``max_batch_changes_per_min``) and bounded (the controllers' change budgets), defined once."""

from __future__ import annotations

from collections import deque

__all__ = ["MINUTE_S", "TIME_TOLERANCE_S", "in_last_minute"]

MINUTE_S = 60.0
"""The window (s)."""

TIME_TOLERANCE_S = 1e-6
"""Two event times closer than this are the same time (s): times are sums of float periods
(``1281 * 0.1 - 681 * 0.1`` is ``59.999999999999986``), so 60 s within it counts as 60 s."""


def in_last_minute(recent_s: deque[float], t_s: float) -> int:
    """Drop from ``recent_s`` (event times, s, ascending, none after ``t_s``) those 60 s or more
    before ``t_s``; the events left, in the minute up to ``t_s``."""
    while recent_s and t_s - recent_s[0] >= MINUTE_S - TIME_TOLERANCE_S:
        recent_s.popleft()
    return len(recent_s)
