"""What every time plot of a run shares: thinning for drawing and the run's events marked.

An hour at 0.1 s is 36,000 points per line, far more than a figure has pixel columns. Lines are
thinned by :func:`envelope` (per column of points, the lowest and the highest in time order, so
every extreme is drawn) and step signals by :func:`changes` (only the points where the value
changes, which loses nothing). :func:`run_marks` reads a run's scenario events, supply changes
and training windows from its tables and :func:`mark` draws them on a time axes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # only annotations: ``openg2g run`` imports this module without them
    import pandas as pd
    from matplotlib.axes import Axes

__all__ = [
    "DRAW_POINTS",
    "ChangeStream",
    "EnvelopeStream",
    "Marks",
    "TrainingSpans",
    "band",
    "changes",
    "envelope",
    "event_marks",
    "mark",
    "run_marks",
    "table_groups",
    "titled",
]

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
    line breaks there, as it would at the original gap). :class:`EnvelopeStream` gives the same
    points for a line read in pieces.

    :param t_s: sample times (s), ascending.
    :param values: one value per time.
    :return: ``(t_s, values)``, unchanged when there are at most ``max_points``.
    """
    t = np.asarray(t_s, dtype=float)
    stream = EnvelopeStream(t.size, max_points)
    stream.add(t, values)
    return stream.result()


def _run_extremes(tt: np.ndarray, yy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's (one run of samples) lowest and highest sample in time order, one when the
    same sample is both, one NaN for a row without a finite sample; flattened."""
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


class EnvelopeStream:
    """:func:`envelope` of a line whose samples arrive in time-ordered pieces (a table read one
    part at a time): only the pieces' unfinished run of samples is held between them, and the
    result equals :func:`envelope` of the whole line.

    :param total: the line's number of samples (fixes the run length, as :func:`envelope` does).
    :param max_points: points at most.
    """

    def __init__(self, total: int, max_points: int = DRAW_POINTS) -> None:
        self.total = int(total)
        self.size = 1 if self.total <= max_points else int(np.ceil(self.total / (max_points // 2)))
        self._seen = 0
        self._rest_t = np.array([])
        self._rest_y = np.array([])
        self._out: list[tuple[np.ndarray, np.ndarray]] = []

    def add(self, t_s: Any, values: Any) -> None:
        """The next samples, after every sample added before.

        :raises ValueError: more samples than ``total``.
        """
        t = np.concatenate([self._rest_t, np.asarray(t_s, dtype=float)])
        y = np.concatenate([self._rest_y, np.asarray(values, dtype=float)])
        self._seen += t.size - self._rest_t.size
        if self._seen > self.total:
            raise ValueError(f"{self._seen} samples added to an envelope of {self.total}")
        if self.size == 1:
            self._out.append((t, y))
            self._rest_t, self._rest_y = np.array([]), np.array([])
            return
        whole = t.size - t.size % self.size
        if whole:
            self._out.append(_run_extremes(t[:whole].reshape(-1, self.size), y[:whole].reshape(-1, self.size)))
        self._rest_t, self._rest_y = t[whole:], y[whole:]

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        """The thinned line ``(t_s, values)``.

        :raises ValueError: fewer samples added than ``total``.
        """
        if self._seen != self.total:
            raise ValueError(f"{self._seen} samples added to an envelope of {self.total}")
        pieces = list(self._out)
        if self._rest_t.size:
            pad = self.size - self._rest_t.size
            tt = np.concatenate([self._rest_t, np.full(pad, np.nan)]).reshape(1, -1)
            yy = np.concatenate([self._rest_y, np.full(pad, np.nan)]).reshape(1, -1)
            pieces.append(_run_extremes(tt, yy))
        if not pieces:
            return np.array([]), np.array([])
        return np.concatenate([p[0] for p in pieces]), np.concatenate([p[1] for p in pieces])


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
    point (drawn with ``drawstyle="steps-post"`` it is the same line). :class:`ChangeStream` gives
    the same points for a signal read in pieces.

    :return: ``(t_s, values)``.
    """
    stream = ChangeStream()
    stream.add(t_s, values)
    return stream.result()


class ChangeStream:
    """:func:`changes` of a step signal whose samples arrive in time-ordered pieces: only the
    last sample is held between them."""

    def __init__(self) -> None:
        self._last: tuple[float, float] | None = None
        self._last_kept = False
        self._out: list[tuple[np.ndarray, np.ndarray]] = []

    def add(self, t_s: Any, values: Any) -> None:
        """The next samples, after every sample added before."""
        t = np.asarray(t_s, dtype=float)
        y = np.asarray(values, dtype=float)
        if t.size == 0:
            return
        before = np.concatenate([[self._last[1] if self._last is not None else np.nan], y[:-1]])
        keep = (y != before) | (np.isnan(y) != np.isnan(before))
        if self._last is None:
            keep[0] = True  # the first point
        self._out.append((t[keep], y[keep]))
        self._last = (float(t[-1]), float(y[-1]))
        self._last_kept = bool(keep[-1])

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        """The reduced signal ``(t_s, values)``."""
        pieces = list(self._out)
        if self._last is not None and not self._last_kept:
            pieces.append((np.array([self._last[0]]), np.array([self._last[1]])))  # the last point
        if not pieces:
            return np.array([]), np.array([])
        return np.concatenate([p[0] for p in pieces]), np.concatenate([p[1] for p in pieces])


@dataclass(frozen=True)
class Marks:
    """Times to mark on a run's time plots.

    :param events: ``(t_s, label)`` of each scenario event and supply change (s).
    :param spans: ``(start_s, end_s, label)`` of each training window (s).
    """

    events: tuple[tuple[float, str], ...] = ()
    spans: tuple[tuple[float, float, str], ...] = field(default=())


def table_groups(columns: Mapping[str, Any], keys: str | list[str] | None) -> list[tuple[Any, np.ndarray]]:
    """The row positions of each group of ``keys`` among ``columns`` (column -> values, ``t_s``
    among them; ``keys`` ``None``: one group, key ``None``), the groups in order of their first
    row; a key is the value of ``keys`` (a ``str``), or the tuple of values (a list). No rows, no
    group."""
    n = len(columns["t_s"])
    if n == 0:
        return []
    if keys is None:
        return [(None, np.arange(n))]
    names = [keys] if isinstance(keys, str) else keys
    factors = [_first_seen(np.asarray(columns[k], dtype=object)) for k in names]
    combined = np.zeros(n, dtype=np.int64)
    for codes, uniques in factors:
        combined = combined * max(len(uniques), 1) + codes
    group, firsts = _first_seen(combined)
    rows = np.split(np.argsort(group, kind="stable"), np.cumsum(np.bincount(group, minlength=len(firsts)))[:-1])
    found = []
    for at in rows:
        values = tuple(uniques[codes[at[0]]] for codes, uniques in factors)
        found.append((values[0] if isinstance(keys, str) else values, at))
    return found


def _first_seen(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``values`` numbered in order of first appearance: ``(codes, distinct values)``."""
    distinct, first, inverse = np.unique(values, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return rank[inverse.reshape(-1)], distinct[order]


class TrainingSpans:
    """Per site, each run of consecutive steps with training power above zero, of a
    ``datacenter`` table read in time-ordered pieces: only each site's open span is held between
    them. The sites in order of first appearance, each site's spans in time order."""

    def __init__(self) -> None:
        self._open: dict[str, float | None] = {}  # site -> start of its span still open
        self._last_t: dict[str, float] = {}
        self._done: dict[str, list[tuple[float, float, str]]] = {}

    def add(self, t_s: Any, site: Any, training_power_w: Any) -> None:
        """The next rows (one value per row each), after every row added before."""
        columns = {"t_s": np.asarray(t_s, dtype=float), "site": site}
        on_all = (np.asarray(training_power_w, dtype=float) > 0).astype(np.int8)
        for key, rows in table_groups(columns, "site"):
            name = str(key)
            rows = rows[np.argsort(columns["t_s"][rows], kind="stable")]
            on, t = on_all[rows], columns["t_s"][rows]
            start = self._open.get(name)
            done = self._done.setdefault(name, [])
            edges = np.diff(np.concatenate([[0 if start is None else 1], on]))
            for i in np.flatnonzero(edges):
                if edges[i] == 1:
                    start = float(t[i])
                else:
                    assert start is not None
                    done.append((start, float(t[i - 1]) if i else self._last_t[name], f"{name} training"))
                    start = None
            self._open[name] = start
            self._last_t[name] = float(t[-1])

    def result(self) -> list[tuple[float, float, str]]:
        """The spans ``(start_s, end_s, label)``, a span still open ending at its site's last step."""
        spans = []
        for site, done in self._done.items():
            spans += done
            start = self._open.get(site)
            if start is not None:
                spans.append((start, self._last_t[site], f"{site} training"))
        return spans


def event_marks(events: pd.DataFrame) -> tuple[tuple[float, str], ...]:
    """``(t_s, label)`` of each row of a run's ``events`` table but a ride-through block's change
    of mode (a site's blocks move many times in one event; the disturbance plot draws them)."""
    if events.empty:
        return ()
    return tuple((float(t), str(c)) for t, c in zip(events["t_s"], events["command"]) if c != "ride_through")


def run_marks(events: pd.DataFrame, datacenter: pd.DataFrame) -> Marks:
    """The marks of a run from its ``events`` table (scenario events, ``supply_lost`` and
    ``supply_restored`` rows) and its ``datacenter`` table (steps drawing training power)."""
    spans = TrainingSpans()
    if not datacenter.empty and "training_power_w" in datacenter:
        spans.add(datacenter["t_s"], datacenter["site"], datacenter["training_power_w"])
    return Marks(events=event_marks(events), spans=tuple(spans.result()))


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
