"""Bounds every layer shares: what a machine can simulate, so nothing unbounded gets accepted."""

from __future__ import annotations

__all__ = ["CAP_CALIBRATED_MIN_W", "CAP_MAX_W", "CAP_MIN_W", "MAX_DURATION_S"]

MAX_DURATION_S = 366 * 86_400
"""Longest run accepted (s): a leap year. Also the longest ramp or delay anything may ask for."""

CAP_MIN_W = 200.0
"""Lowest settable H100 SXM power limit (W per GPU)."""

CAP_MAX_W = 700.0
"""Highest settable H100 SXM power limit (W per GPU)."""

CAP_CALIBRATED_MIN_W = 602.0
"""Lowest power limit the power-cap model is calibrated on (W per GPU): 14 % below the 700 W
default, the cut the reports behind its slowdown exponent measured. Lower caps are accepted down to
:data:`CAP_MIN_W` and flagged in the run summary: their slowdown is an extrapolation."""
