"""Bounds every layer shares: what a machine can simulate, so nothing unbounded gets accepted."""

from __future__ import annotations

__all__ = ["MAX_DURATION_S"]

MAX_DURATION_S = 366 * 86_400
"""Longest run accepted (s): a leap year. Also the longest ramp or delay anything may ask for."""
