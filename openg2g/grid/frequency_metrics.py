"""Metrics of a system frequency trajectory after a disturbance: nadir, zenith, RoCoF, settling.

The same definitions serve the aggregate model (:class:`openg2g.grid.frequency.SystemFrequency`
feeds a :class:`FrequencyMonitor` as it steps) and any recorded trajectory, such as a dynamics
engine's centre-of-inertia frequency (:func:`frequency_metrics` over arrays), so that a comparison
compares like with like. A monitor keeps only what its metrics need (the last RoCoF window and the
first :data:`SETTLING_WINDOW_S` after the event), so a long run costs no memory.

Definitions (all times in seconds on the trajectory's own clock, frequencies in Hz):

- **nadir, zenith**: the lowest and highest frequency recorded, and the first time each is
  reached. A model that locates its turning points inside its steps records those too.
- **RoCoF**: the largest rate of change of frequency over a sliding window of ``rocof_window_s``,
  ``(f(t + W) - f(t)) / W``, over every window that ends at a recorded sample and every one that
  starts at one (so the window that starts at the disturbance is always among them), the other
  end read by linear interpolation between the samples. Signed (negative after a load gain); the
  one of largest magnitude, with the end time of its window. The default
  window is 0.5 s (:data:`ROCOF_WINDOW_S`): neither NERC's frequency response standard
  (BAL-003) nor ERCOT's operating guides fix a RoCoF window for the bulk system (they measure
  frequency points, below), and the 500 ms window that ENTSO-E's RoCoF withstand guidance (2018)
  names is long enough to average out the inter-machine swings a real measurement sees (0.5 to
  2 Hz) and short enough to show the inertial slope before governors act. An aggregate model has
  no swings, so its windowed RoCoF approaches the initial slope ``-dP f0 / (2 H)`` as ``W`` shrinks;
  a 0.1 s window (the minimum delay ERCOT's under-frequency relays wait, NOGRR 247) can be asked for.
- **settling frequency**: NERC's "Value B" (BAL-003-1, Attachment A; the Frequency Response
  Initiative's settling frequency): the time-weighted mean of the frequency from 20 s to 52 s
  after the event, the trapezoid rule over the recorded samples, interpolated at the window's
  ends. ``None`` until the trajectory reaches 52 s after the event, or without an event.
- **settling time**: the earliest time from the event on after which the frequency stays within
  ``settling_band_hz`` of the settling frequency up to the end of the Value B window (52 s after
  the event), the band crossing interpolated linearly between samples; the event time itself if
  the frequency never leaves the band. ``None`` when the settling frequency is, or when the
  frequency is still outside the band at the window's end (it has not settled).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "ROCOF_WINDOW_S",
    "SETTLING_BAND_HZ",
    "SETTLING_WINDOW_S",
    "FrequencyMetrics",
    "FrequencyMonitor",
    "frequency_metrics",
]

ROCOF_WINDOW_S = 0.5
"""Default length of the RoCoF window (s); the module docstring says why."""

SETTLING_WINDOW_S = (20.0, 52.0)
"""NERC BAL-003 Value B: the settling frequency is the mean over this span after the event (s)."""

SETTLING_BAND_HZ = 0.01
"""Default half-width of the band around the settling frequency that ends the settling time (Hz)."""


@dataclass(frozen=True)
class FrequencyMetrics:
    """What a frequency trajectory did (module docstring for each definition); Hz, s, Hz/s."""

    nadir_hz: float
    """Lowest frequency (Hz)."""
    nadir_t_s: float
    """When it was first reached (s)."""
    zenith_hz: float
    """Highest frequency (Hz)."""
    zenith_t_s: float
    """When it was first reached (s)."""
    rocof_hz_s: float | None
    """Largest-magnitude RoCoF over the window (Hz/s, signed); None if the trajectory is shorter than one window."""
    rocof_t_s: float | None
    """End of that window (s)."""
    rocof_window_s: float
    """The window's length (s)."""
    event_t_s: float | None
    """The disturbance the settling metrics are measured from (s); None if there was none."""
    settling_hz: float | None
    """NERC Value B, the mean frequency 20 to 52 s after the event (Hz); None before 52 s or without an event."""
    settling_t_s: float | None
    """When the frequency entered the settling band for good (s); None if it had not by 52 s after the event."""
    settling_band_hz: float
    """Half-width of that band (Hz)."""


def _positive(name: str, value: float) -> float:
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


class FrequencyMonitor:
    """Running metrics of a frequency trajectory fed one sample at a time, in time order.

    :param rocof_window_s: RoCoF window (s, > 0).
    :param settling_band_hz: band around the settling frequency (Hz, > 0).
    :param event_t_s: time of the disturbance (s); None to set it later with :meth:`mark_event`
        (the model marks its first load change).
    """

    def __init__(
        self,
        *,
        rocof_window_s: float = ROCOF_WINDOW_S,
        settling_band_hz: float = SETTLING_BAND_HZ,
        event_t_s: float | None = None,
    ):
        self.rocof_window_s = _positive("rocof_window_s", rocof_window_s)
        self.settling_band_hz = _positive("settling_band_hz", settling_band_hz)
        if event_t_s is not None and not math.isfinite(event_t_s):
            raise ValueError(f"event_t_s must be a finite time (s), got {event_t_s!r}")
        self._event_t_s = event_t_s
        self._t_last = -math.inf
        self._f_last = math.nan
        self._nadir = (math.inf, math.nan)
        self._zenith = (-math.inf, math.nan)
        self._first_t = math.nan
        # the samples of the last window, for f(t - W)
        self._recent: deque[tuple[float, float]] = deque()
        self._rocof: tuple[float, float] | None = None
        # the samples whose window (starting there) has not ended yet, and the latest sample
        self._pending: deque[tuple[float, float]] = deque()
        self._prev = (math.nan, math.nan)
        # the samples from the event to the first one at or past the end of the Value B window
        self._settle: list[tuple[float, float]] = []
        self._settle_done = False

    @property
    def event_t_s(self) -> float | None:
        """The disturbance's time (s), or None while there is none."""
        return self._event_t_s

    def mark_event(self, t_s: float) -> None:
        """Set the disturbance's time (s) if none is set yet; samples from then on count for settling."""
        if self._event_t_s is None:
            if t_s < self._t_last:
                raise ValueError(f"event at t={t_s} s is before the last sample (t={self._t_last} s)")
            self._event_t_s = float(t_s)
            if t_s == self._t_last:
                # the sample at the event's instant starts the settling record
                self._settle.append((self._t_last, self._f_last))

    def add(self, t_s: float, f_hz: float) -> None:
        """Record the frequency ``f_hz`` (Hz) at ``t_s`` (s, not before the previous sample)."""
        if not (math.isfinite(t_s) and math.isfinite(f_hz)):
            raise ValueError(f"a sample must be finite, got t={t_s!r} s, f={f_hz!r} Hz")
        if t_s < self._t_last:
            raise ValueError(f"samples must come in time order: t={t_s} s after t={self._t_last} s")
        if math.isnan(self._first_t):
            self._first_t = t_s
        self._t_last, self._f_last = t_s, f_hz
        if f_hz < self._nadir[0]:
            self._nadir = (f_hz, t_s)
        if f_hz > self._zenith[0]:
            self._zenith = (f_hz, t_s)
        self._add_rocof(t_s, f_hz)
        self._add_settling(t_s, f_hz)

    def _add_rocof(self, t_s: float, f_hz: float) -> None:
        # every window that ends at a sample (its start interpolated) and every one that starts at
        # a sample (its end interpolated), so that the window starting at the event is among them
        w = self.rocof_window_s
        reach = w * (1 - 1e-9)  # a window of samples whose spacing sums to W up to rounding
        recent = self._recent
        if recent and t_s - self._first_t >= reach:
            start = t_s - w
            while len(recent) >= 2 and recent[1][0] <= start:
                recent.popleft()
            (t0, f0), (t1, f1) = recent[0], (recent[1] if len(recent) > 1 else (t_s, f_hz))
            self._rate((f_hz - _lerp(t0, f0, t1, f1, start)) / w, t_s)
        pending = self._pending
        while pending and t_s - pending[0][0] >= reach:
            tj, fj = pending.popleft()
            tp, fp = self._prev
            self._rate((_lerp(tp, fp, t_s, f_hz, tj + w) - fj) / w, tj + w)
        recent.append((t_s, f_hz))
        pending.append((t_s, f_hz))
        self._prev = (t_s, f_hz)

    def _rate(self, rate: float, t_s: float) -> None:
        if self._rocof is None or abs(rate) > abs(self._rocof[0]):
            self._rocof = (rate, t_s)

    def _add_settling(self, t_s: float, f_hz: float) -> None:
        if self._event_t_s is None or self._settle_done or t_s < self._event_t_s:
            return
        self._settle.append((t_s, f_hz))
        if t_s >= self._event_t_s + SETTLING_WINDOW_S[1]:
            self._settle_done = True

    def _settling(self) -> tuple[float | None, float | None]:
        if not self._settle_done or self._event_t_s is None:
            return None, None
        t = np.array([s[0] for s in self._settle])
        f = np.array([s[1] for s in self._settle])
        lo, hi = self._event_t_s + SETTLING_WINDOW_S[0], self._event_t_s + SETTLING_WINDOW_S[1]
        inside = (t > lo) & (t < hi)
        tw = np.concatenate(([lo], t[inside], [hi]))
        fw = np.concatenate(([np.interp(lo, t, f)], f[inside], [np.interp(hi, t, f)]))
        settling = float(np.sum((fw[1:] + fw[:-1]) * np.diff(tw)) / 2 / (hi - lo))
        # the last sample up to the window's end outside the band; the crossing after it ends settling
        last = int(np.count_nonzero(t <= hi)) - 1
        outside = np.flatnonzero(np.abs(f[: last + 1] - settling) > self.settling_band_hz)
        if outside.size == 0:
            return settling, self._event_t_s
        k = int(outside[-1])
        if k == last:
            return settling, None
        # the band's edge on the side sample k lay, crossed between samples k and k + 1
        edge = settling + math.copysign(self.settling_band_hz, f[k] - settling)
        frac = (f[k] - edge) / (f[k] - f[k + 1])
        return settling, float(t[k] + frac * (t[k + 1] - t[k]))

    def result(self) -> FrequencyMetrics:
        """The metrics of the samples so far (module docstring).

        :raises ValueError: no sample was recorded.
        """
        if math.isnan(self._first_t):
            raise ValueError("no frequency sample recorded: the metrics need at least one")
        settling_hz, settling_t_s = self._settling()
        return FrequencyMetrics(
            nadir_hz=self._nadir[0],
            nadir_t_s=self._nadir[1],
            zenith_hz=self._zenith[0],
            zenith_t_s=self._zenith[1],
            rocof_hz_s=None if self._rocof is None else self._rocof[0],
            rocof_t_s=None if self._rocof is None else self._rocof[1],
            rocof_window_s=self.rocof_window_s,
            event_t_s=self._event_t_s,
            settling_hz=settling_hz,
            settling_t_s=settling_t_s,
            settling_band_hz=self.settling_band_hz,
        )


def _lerp(t0: float, f0: float, t1: float, f1: float, t: float) -> float:
    """The line through ``(t0, f0)`` and ``(t1, f1)`` at ``t`` (``f0`` where the two times coincide)."""
    return f0 if t1 == t0 else f0 + (f1 - f0) * (t - t0) / (t1 - t0)


def frequency_metrics(
    t_s: Sequence[float] | np.ndarray,
    f_hz: Sequence[float] | np.ndarray,
    *,
    event_t_s: float | None,
    rocof_window_s: float = ROCOF_WINDOW_S,
    settling_band_hz: float = SETTLING_BAND_HZ,
) -> FrequencyMetrics:
    """The metrics (module docstring) of a recorded trajectory: times ``t_s`` (s, non-decreasing)
    and frequencies ``f_hz`` (Hz) of the same length, the disturbance at ``event_t_s`` (s).

    :raises ValueError: the arrays differ in length, are empty, not finite or out of time order.
    """
    t = np.asarray(t_s, dtype=float)
    f = np.asarray(f_hz, dtype=float)
    if t.ndim != 1 or t.shape != f.shape:
        raise ValueError(f"t_s and f_hz must be 1-D of one length, got shapes {t.shape} and {f.shape}")
    monitor = FrequencyMonitor(rocof_window_s=rocof_window_s, settling_band_hz=settling_band_hz, event_t_s=event_t_s)
    for ti, fi in zip(t.tolist(), f.tolist(), strict=True):
        monitor.add(ti, fi)
    return monitor.result()
