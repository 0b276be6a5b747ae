"""The feeder view's time: the slider in seconds over a run's grid steps, the step nearest to or
furthest beyond a voltage limit, playback at a chosen speed, and the link that opens a run at a
time. No Dash here: the callbacks (:mod:`openg2g.app.callbacks`) turn these into the page.

Every time here is a run's simulated time (s). The slider's value is a time, not a step index;
whatever it holds (a value typed into its box, one snapped to its step, a link's) is taken as the
grid step nearest to it (:func:`nearest_step`), so a run whose steps are not evenly spaced (one-cycle
steps through a fault) is still shown step by step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from urllib.parse import parse_qs, urlencode

import numpy as np

from openg2g.plot.overview import HIGHEST_V, LOWEST_V, Overview

__all__ = [
    "CLOCK_INTERVALS_S",
    "FIT",
    "PLAY_TICK_S",
    "SPEEDS",
    "SliderSettings",
    "link_search",
    "nearest_step",
    "next_play_time",
    "read_link",
    "slider_settings",
    "stepped",
    "worst_step",
]

PLAY_TICK_S = 0.7
"""Real seconds between two frames of playback (the page's play timer)."""

FIT = "fit"
"""The playback speed that plays a whole run in about :data:`FIT_FRAMES` frames."""

FIT_FRAMES = 100

SPEEDS: dict[str, str] = {
    FIT: "whole run in ~70 s",
    "1": "1x (real time)",
    "10": "10x",
    "60": "60x (a minute a second)",
    "600": "600x",
    "3600": "3600x (an hour a second)",
}
"""Playback speeds: the dropdown's value (simulated seconds per real second, or :data:`FIT`) ->
its label."""


def nearest_step(times_s: np.ndarray, t_s: float) -> int:
    """The index of the grid step nearest to ``t_s`` (s); the earlier one of two equally near.

    :param times_s: the run's grid step times (s), ascending, at least one.
    """
    i = int(np.searchsorted(times_s, t_s))
    if i == 0:
        return 0
    if i == times_s.size:
        return times_s.size - 1
    return i if times_s[i] - t_s < t_s - times_s[i - 1] else i - 1


def stepped(times_s: np.ndarray, t_s: float, steps: int) -> float:
    """The time (s) of the grid step ``steps`` after (negative: before) the one nearest to ``t_s``,
    held at the first and last step (previous/next)."""
    i = min(max(nearest_step(times_s, t_s) + steps, 0), times_s.size - 1)
    return float(times_s[i])


@dataclass(frozen=True)
class SliderSettings:
    """The slider over a run's grid steps: ``minimum`` to ``maximum`` (s) by ``step`` (s, the
    shortest interval between two steps), ``marks`` at round times and the worst step."""

    minimum: float
    maximum: float
    step: float
    marks: dict[float, str | dict[str, object]]


CLOCK_INTERVALS_S = (60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)
"""Intervals (s) between the slider's marks beyond a minute: the clock's."""


def _round_interval(span_s: float, count: int = 6) -> float:
    """A round interval (s) that cuts ``span_s`` in about ``count``: 1, 2 or 5 times a power of
    ten up to a minute, a clock interval (:data:`CLOCK_INTERVALS_S`) beyond."""
    raw = span_s / count
    clock = [float(c) for c in CLOCK_INTERVALS_S if c >= raw]
    if raw > 30 and clock:
        return clock[0]
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


def slider_settings(times_s: np.ndarray, worst_s: float | None) -> SliderSettings:
    """The slider of a run whose grid steps are at ``times_s`` (s, ascending, at least one): its
    ends and marks at round times between them labelled in seconds, and ``worst_s`` (s, the worst
    step, :func:`worst_step`) marked ``worst`` in the limit colour."""
    first, last = float(times_s[0]), float(times_s[-1])
    gaps = np.diff(times_s)
    gaps = gaps[gaps > 0]
    # to nine significant digits: the slider rounds its values to the step's decimals, so a step of
    # 0.1 keeps a typed 15.1 as 15.1, where the float difference 0.09999999999999964 showed 15.0999
    step = float(f"{gaps.min():.9g}") if gaps.size else 1.0
    marks: dict[float, str | dict[str, object]] = {first: f"{first:g} s", last: f"{last:g} s"}
    if last > first:
        interval = _round_interval(last - first)
        for k in range(math.ceil(first / interval), math.floor(last / interval) + 1):
            t = k * interval
            near = [first, last] if worst_s is None else [first, last, worst_s]
            if min(abs(t - other) for other in near) > interval / 3:  # not on top of another label
                marks[t] = f"{t:g} s"
    if worst_s is not None:
        marks[worst_s] = {"label": "worst", "style": {"color": "#b30000", "fontWeight": "bold"}}
    return SliderSettings(first, last, step, dict(sorted(marks.items())))


def worst_step(overview: Overview, v_min_pu: float, v_max_pu: float) -> float | None:
    """The time (s) of the grid step nearest to or furthest beyond a voltage limit: the smallest
    margin (pu) of the run's lowest bus-phase voltage above ``v_min_pu`` and of its highest below
    ``v_max_pu``, the earliest of equal ones; ``None`` for a run without voltages (no grid step
    converged). Exact from the overview: its voltage lines keep each run of steps' extremes at
    their own times (:func:`openg2g.plot.timeline.envelope`)."""
    margins: list[tuple[float, float]] = []
    for panel in overview.panels:
        for line in panel.lines:
            if line.name not in (LOWEST_V, HIGHEST_V):
                continue
            margin = line.y - v_min_pu if line.name == LOWEST_V else v_max_pu - line.y
            if np.isfinite(margin).any():
                k = int(np.nanargmin(margin))
                margins.append((float(margin[k]), float(line.t_s[k])))
    return min(margins)[1] if margins else None


def next_play_time(times_s: np.ndarray, t_s: float, speed: str) -> float:
    """The time (s) playback shows after ``t_s`` (s): one frame of :data:`PLAY_TICK_S` later at
    ``speed`` (a key of :data:`SPEEDS`), at least one grid step on, back to the first step after
    the last.

    :raises ValueError: ``speed`` is not one of :data:`SPEEDS`.
    """
    if speed not in SPEEDS:
        raise ValueError(f"playback speed {speed!r}: one of {', '.join(SPEEDS)}")
    i = nearest_step(times_s, t_s)
    if i == times_s.size - 1:
        return float(times_s[0])
    span = float(times_s[-1] - times_s[0])
    advance = span / FIT_FRAMES if speed == FIT else float(speed) * PLAY_TICK_S
    j = max(i + 1, int(np.searchsorted(times_s, times_s[i] + advance - 1e-9)))
    return float(times_s[min(j, times_s.size - 1)])


def link_search(run_id: str, t_s: float | None) -> str:
    """The query part (``?run=...&t=...``) of a link that opens ``run_id`` at ``t_s`` (s)."""
    query = {"run": run_id} if t_s is None else {"run": run_id, "t": f"{t_s:g}"}
    return "?" + urlencode(query)


def read_link(search: str | None) -> tuple[str, float | None] | None:
    """The run and time (s) a link's query part names (:func:`link_search`); ``None`` for a query
    without ``run``.

    :raises ValueError: ``t`` is not a finite number of seconds.
    """
    query = parse_qs((search or "").lstrip("?"))
    runs = query.get("run")
    if not runs or not runs[0]:
        return None
    times = query.get("t")
    if not times:
        return runs[0], None
    try:
        t_s = float(times[0])
    except ValueError:
        t_s = math.nan
    if not math.isfinite(t_s):
        raise ValueError(f"the link's time t={times[0]!r} is not a number of seconds")
    return runs[0], t_s
