"""Bounds every layer shares: what a machine can simulate, so nothing unbounded gets accepted."""

from __future__ import annotations

__all__ = ["CAP_MAX_W", "CAP_MIN_W", "MAX_DURATION_S"]

MAX_DURATION_S = 366 * 86_400
"""Longest run accepted (s): a leap year. Also the longest ramp or delay anything may ask for."""

CAP_MIN_W = 200.0
"""Lowest settable H100 SXM power limit (W per GPU)."""

CAP_MAX_W = 700.0
"""Highest settable H100 SXM power limit (W per GPU)."""
