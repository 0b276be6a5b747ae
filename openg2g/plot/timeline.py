"""What every time plot of a run shares: thinning for drawing and the run's events marked.

An hour at 0.1 s is 36,000 points per line, far more than a figure has pixel columns. Lines are
thinned by :func:`envelope` (per column of points, the lowest and the highest in time order, so
every extreme is drawn) and step signals by :func:`changes` (only the points where the value
changes, which loses nothing). :func:`run_marks` reads a run's scenario events, supply changes
and training windows from its tables and :func:`mark` draws them on a time axes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes

__all__ = ["DRAW_POINTS", "Marks", "band", "changes", "envelope", "mark", "run_marks", "titled"]

DRAW_POINTS = 2000
"""Points per line above which :func:`envelope` thins a line (about two per pixel column)."""

EVENT_STYLE: dict[str, Any] = {"color": "#7f7f7f", "ls": ":", "lw": 0.9}
"""Vertical line at a scenario event or supply change."""

TRAINING_STYLE: dict[str, Any] = {"color": "#fdb462", "alpha": 0.18, "lw": 0}
"""Shaded span of a training window."""


def envelope(t_s: Any, values: Any, max_points: int = DRAW_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """A line thinned to at most ``max_points`` points without losing an extreme.

    The points are cut into ``max_points // 2`` runs of consecutive samples; each run keeps its
    lowest and its highest sample, in time order. A run with no finite sample keeps one NaN (the
    line breaks there, as it would at the original gap).

    :param t_s: sample times (s), ascending.
    :param values: one value per time.
    :return: ``(t_s, values)``, unchanged when there are at most ``max_points``.
    """
    t = np.asarray(t_s, dtype=float)
    y = np.asarray(values, dtype=float)
    if t.size <= max_points:
        return t, y
    size = int(np.ceil(t.size / (max_points // 2)))
    pad = (-t.size) % size
    tt = np.concatenate([t, np.full(pad, np.nan)]).reshape(-1, size)
    yy = np.concatenate([y, np.full(pad, np.nan)]).reshape(-1, size)
    finite = np.isfinite(yy)
    lo = np.argmin(np.where(finite, yy, np.inf), axis=1)
    hi = np.argmax(np.where(finite, yy, -np.inf), axis=1)
    first, second = np.minimum(lo, hi), np.maximum(lo, hi)
    rows = np.arange(yy.shape[0])
    out_t = np.stack([tt[rows, first], tt[rows, second]], axis=1)
    out_y = np.stack([yy[rows, first], yy[rows, second]], axis=1)
    out_y[~finite.any(axis=1)] = np.nan
    same = first == second  # one sample is both: keep it once
    keep = np.ones_like(out_t, dtype=bool)
    keep[same, 1] = False
    return out_t[keep], out_y[keep]


def band(t_s: Any, low: Any, high: Any, max_points: int = DRAW_POINTS) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A band between two lines thinned to at most ``max_points`` steps: per run of consecutive
    samples, its first time, the lowest ``low`` and the highest ``high`` (drawn with
    ``step="post"``, it covers every sample).

    :return: ``(t_s, low, high)``, unchanged when there are at most ``max_points``.
    """
    t = np.asarray(t_s, dtype=float)
    lo = np.asarray(low, dtype=float)
    hi = np.asarray(high, dtype=float)
    if t.size <= max_points:
        return t, lo, hi
    size = int(np.ceil(t.size / max_points))
    starts = np.arange(0, t.size, size)
    # fmin/fmax skip the NaN of a step that did not converge unless every step of the run is one
    return t[starts], np.fmin.reduceat(lo, starts), np.fmax.reduceat(hi, starts)


def changes(t_s: Any, values: Any) -> tuple[np.ndarray, np.ndarray]:
    """A step signal reduced to its first point, every point where the value changes, and its last
    point (drawn with ``drawstyle="steps-post"`` it is the same line).

    :return: ``(t_s, values)``.
    """
    t = np.asarray(t_s, dtype=float)
    y = np.asarray(values, dtype=float)
    if t.size <= 2:
        return t, y
    keep = np.ones(t.size, dtype=bool)
    keep[1:-1] = y[1:-1] != y[:-2]
    keep[1:-1] |= np.isnan(y[1:-1]) != np.isnan(y[:-2])
    return t[keep], y[keep]


@dataclass(frozen=True)
class Marks:
    """Times to mark on a run's time plots.

    :param events: ``(t_s, label)`` of each scenario event and supply change (s).
    :param spans: ``(start_s, end_s, label)`` of each training window (s).
    """

    events: tuple[tuple[float, str], ...] = ()
    spans: tuple[tuple[float, float, str], ...] = field(default=())


def _training_spans(datacenter: pd.DataFrame) -> list[tuple[float, float, str]]:
    """Per site, each run of consecutive steps with training power above zero."""
    if datacenter.empty or "training_power_w" not in datacenter:
        return []
    spans = []
    for site, df in datacenter.groupby("site", observed=True, sort=False):
        df = df.sort_values("t_s")
        on = (df["training_power_w"].to_numpy(dtype=float) > 0).astype(np.int8)
        t = df["t_s"].to_numpy(dtype=float)
        edges = np.diff(np.concatenate([[0], on, [0]]))
        for start, stop in zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)):
            spans.append((float(t[start]), float(t[stop - 1]), f"{site} training"))
    return spans


def run_marks(events: pd.DataFrame, datacenter: pd.DataFrame) -> Marks:
    """The marks of a run from its ``events`` table (scenario events, ``supply_lost`` and
    ``supply_restored`` rows) and its ``datacenter`` table (steps drawing training power)."""
    rows: list[tuple[float, str]] = []
    if not events.empty:
        rows = [(float(t), str(c)) for t, c in zip(events["t_s"], events["command"])]
    return Marks(events=tuple(rows), spans=tuple(_training_spans(datacenter)))


def mark(ax: Axes, marks: Marks | None) -> None:
    """Draw the marks on a time axes: a dotted line per event (named at the top), a shaded span
    per training window; one legend entry for each kind present."""
    if marks is None:
        return
    for k, (start, end, label) in enumerate(marks.spans):
        ax.axvspan(start, end, **TRAINING_STYLE, label="training" if k == 0 else "_")
    for k, (t, label) in enumerate(marks.events):
        ax.axvline(t, **EVENT_STYLE, label="event" if k == 0 else "_")
        ax.annotate(
            label,
            (t, 1.0),
            xycoords=("data", "axes fraction"),
            rotation=90,
            va="top",
            ha="right",
            fontsize=6,
            color=EVENT_STYLE["color"],
        )


def titled(run: str, what: str) -> str:
    """An axes title naming the run (``"run: what"``; ``what`` alone without a run name)."""
    return f"{run}: {what}" if run else what
