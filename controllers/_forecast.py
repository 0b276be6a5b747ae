"""What a controller can foresee over its horizon: announced training jobs and scheduled taps.

Two known sources of voltage change, both read from the :class:`ControlContext`:

- **training jobs** (``SiteInfo.training``): while a job runs its power swings around a level
  (compute and communication plateaus, noise); :class:`TrainingEstimate` follows that level and
  its spread with exponentially weighted means of the observed ``training_power_w`` (time constant
  ``filter_s``), starting from the announced mean and a spread of half the peak-to-mean gap. Ahead
  of the job and after it the forecast is the announced mean (or 0) with no spread.
- **scheduled tap changes** (``ControlContext.events`` holding :class:`SetTaps`): a bank moving
  phase ``p`` by ``d`` steps shifts every monitored bus-phase on phase ``p`` by ``d * step_pu``
  (:func:`tap_incidence`): the regulator feeds the whole zone, as the substation regulator of
  ieee13 does. Where several banks feed parts of a feeder, this overstates the reach of each.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from openg2g.core.commands import SetTaps
from openg2g.core.interfaces import ControlContext, RegulatorInfo, TrainingInfo

__all__ = ["TrainingEstimate", "scheduled_tap_shift", "tap_incidence"]


def tap_incidence(bus_phases: Sequence[str], regulator: RegulatorInfo) -> np.ndarray:
    """Voltage change of each bus-phase per tap step of each regulated phase (pu per step).

    :return: shape ``(len(bus_phases), len(regulator.phases))``: ``step_pu`` where the bus-phase is
        on the regulated phase, else 0.
    """
    letters = [bp.rsplit(".", 1)[-1].lower() for bp in bus_phases]
    return np.array([[regulator.step_pu if b == p.lower() else 0.0 for p in regulator.phases] for b in letters])


def scheduled_tap_shift(
    context: ControlContext,
    bus_phases: Sequence[str],
    taps_now: dict[str, tuple[int, ...]],
    t_s: float,
    times_s: np.ndarray,
) -> np.ndarray:
    """Voltage shift (pu) at each future time from the scheduled tap events in ``(t_s, time]``.

    :param taps_now: bank -> taps in force now.
    :param times_s: the horizon's times (s), shape ``(N,)``.
    :return: shape ``(len(bus_phases), N)``.
    """
    shift = np.zeros((len(bus_phases), times_s.size))
    taps = {bank: np.asarray(t, dtype=float) for bank, t in taps_now.items()}
    for event in context.events:
        cmd = event.command
        if not isinstance(cmd, SetTaps) or event.t_s <= t_s or event.t_s > times_s[-1] or cmd.bank not in taps:
            continue
        new = np.asarray(cmd.taps, dtype=float)
        step = tap_incidence(bus_phases, context.regulators[cmd.bank]) @ (new - taps[cmd.bank])
        taps[cmd.bank] = new
        shift += step[:, None] * (times_s >= event.t_s)[None, :]
    return shift


class TrainingEstimate:
    """Level and spread of one site's training power (W), announced and then observed.

    :param info: the announced job.
    :param alpha: weight of a new observation in the exponentially weighted means (0-1].
    """

    def __init__(self, info: TrainingInfo, alpha: float) -> None:
        self.info = info
        self.alpha = alpha
        self.level_w = info.mean_power_w
        self.var_w2 = (0.5 * (info.peak_power_w - info.mean_power_w)) ** 2

    def running(self, t_s: float | np.ndarray) -> np.ndarray:
        """True where the job draws power."""
        t = np.asarray(t_s, dtype=float)
        return (t >= self.info.start_s) & (t < self.info.end_s)

    def observe(self, t_s: float, power_w: float) -> None:
        """Fold in the job's observed power at ``t_s`` (ignored outside the job)."""
        if not bool(self.running(t_s)) or not math.isfinite(power_w):
            return
        a = self.alpha
        dev = power_w - self.level_w
        self.level_w += a * dev
        self.var_w2 = (1 - a) * (self.var_w2 + a * dev * dev)

    def level(self, times_s: np.ndarray) -> np.ndarray:
        """Forecast level (W) at ``times_s``: the estimate while the job runs, else 0."""
        return np.where(self.running(times_s), self.level_w, 0.0)

    def spread(self, times_s: np.ndarray) -> np.ndarray:
        """Forecast standard deviation (W) around :meth:`level` at ``times_s``."""
        return np.where(self.running(times_s), math.sqrt(self.var_w2), 0.0)
