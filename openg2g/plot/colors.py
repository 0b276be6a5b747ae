"""Colours shared by the figures and the app's panels (no matplotlib here: ``openg2g run`` reads
them while writing its tables)."""

from __future__ import annotations

__all__ = ["PHASE_COLORS"]

PHASE_COLORS: dict[str, str] = {"a": "#1f77b4", "b": "#ff7f0e", "c": "#2ca02c"}
"""Line colour of each phase."""
