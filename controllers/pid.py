"""Discrete PID control of a datacenter's load from one measured grid or site quantity.

Control law (positional form, sampling period ``T = dt_s``, measurement ``y``, setpoint ``r``)::

    e'_k = r - y_k                  for substation_power, site_power (too much power -> e < 0)
    e'_k = y_k - r                  for worst_undervoltage           (voltage too low -> e < 0)
    e_k = sign(e'_k) max(|e'_k| - delta, 0)             (deadband delta: no action within it)

    P_k = Kp e_k
    D_k = a D_{k-1} - s Kd (1 - a) (y_k - y_{k-1}) / T,   a = tau_d / (tau_d + T)
    v_k = u_0 + P_k + I_k + D_k                          (unsaturated output)
    u_k = clip(v_k, u_min, u_max)
    I_{k+1} = I_k + Ki T e_k + Kt T (u_k - v_k)          (anti_windup = back_calculation)
    I_{k+1} = I_k + Ki T e_k   unless u_k is saturated and e_k pushes further into the limit
                                                         (anti_windup = clamping)
    I_{k+1} <- clip(I_{k+1}, u_min - u_0, u_max - u_0)   (both: the integral alone stays in range)

with ``s = +1`` for power measurements and ``s = -1`` for voltage (so the derivative acts on the
measurement with the sign of the error: no derivative kick on setpoint changes). With this sign
convention ``e > 0`` always means "the load may grow", so positive gains are correct for every
measurement/actuator pair: a higher output is a higher power cap or a larger batch.

**No limit cycles.** Back-calculation alone leaves the integral beyond the limit by
``(Ki T - Kp) e`` when ``Ki T > Kp`` (as on ieee13, ``Ki T = 10``, ``Kp = 2``), so the output stays
pinned for steps after the error changes sign; the integral's clip keeps ``u_0 + I`` within the
limits, so with ``Kp > 0`` the output leaves a limit at the first sample whose error points back.
A batch-size output is projected onto discrete sizes: when the setpoint lies between two of them
an integrator alternates between them forever (a quantization limit cycle: on the fixed-tap hour
all five models moved together 11 times in one minute). The deadband ``delta`` (in the
measurement's unit) stops the integral once the error is within it; with ``2 delta`` larger than
the measurement's change for one size step, a size exists whose error is inside the band and the
loop rests there. At bus 671 one size step of all five models (1/6 of the level) moves 652.a by
``|g| / 6 ~ 0.0038`` pu, so the default for ``worst_undervoltage`` is ``delta = 0.002`` pu; power
measurements default to no deadband. A meter's error larger than the deadband brings the
alternation back (0.005 pu on the fixed-tap hour: all five models 14 times in one minute,
``bench/robustness.py``), so a batch-size output also has the change budget of OFO and the
rule-based controller (``max_changes_per_min``, :mod:`controllers._budget`): a model that changed
``K`` times in the last 60 s keeps its size while the level goes on.

Measured variable ``y``:

* ``worst_undervoltage``: the lowest voltage of the zone (``buses``, default all), pu; the
  setpoint is the voltage to hold, e.g. 0.955.
* ``substation_power``: ``sum(GridState.p_sub_w)`` (W).
* ``site_power``: the controlled sites' total active power (W).

Actuator ``u``:

* ``power_cap``: per-GPU power cap (W) sent as one :class:`SetPowerCap` per site when it moves by
  more than ``power_cap_resolution_w``. ``u_min``/``u_max`` must lie within the GPUs' cap range.
* ``batch_size``: a level ``u`` in ``[0, 1]`` mapped per model to ``x = log2(b_min) + u
  (log2(b_max) - log2(b_min))`` and projected to the nearest measured batch size; a
  :class:`SetBatchSize` goes out only when a model's projected size changes.

Tuning on ieee13 (``scenarios/ieee13_pid.yaml``, worst undervoltage, batch-size actuator): the
grid is static between control steps, so the plant is a static gain ``g = dy/du`` seen one step
later, and an integral loop has the closed-loop pole ``1 - |g| Ki T``: monotone for
``Ki <= 1 / (|g| T)``, with a factor-2 margin at ``Ki = 1 / (2 |g| T)``. At bus 671
the lowest bus-phase (652.a) moves ``H e = -2.5e-8`` pu per W of site power, and level 0 -> 2/3
(batch 8 -> 128 for all five models) moves about 600 kW, so ``|g| ~ 0.0225`` pu per unit level
and ``1 / (2 |g| T) ~ 22 /s``. The scenario uses ``Ki = 10 /s`` (pole ~0.78), ``Kp = 2`` (``Kp |g| ~ 0.05``,
a small proportional kick for speed), ``Kd = 0`` (the voltage is noisy from sample to sample), a
setpoint 0.005 pu above the 0.95 pu limit, and ``output_max = 2/3`` so that the loop never raises
batches above the initial 128 (latency stays as in the baseline).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from openg2g.core.commands import Actuator, Command, SetBatchSize, SetPowerCap
from openg2g.core.interfaces import ControlContext
from openg2g.core.limits import CAP_MAX_W, CAP_MIN_W
from openg2g.core.state import Observation

from ._base import ConfiguredController, ControllerConfig
from ._budget import ChangeBudget
from ._sites import model_actuators, site_models
from .curves import log2_bounds, project_batch

__all__ = ["DiscretePID", "PIDController"]

_VOLTAGE_DEADBAND_PU = 0.002
"""Default deadband of ``worst_undervoltage`` (pu): over half of one size step's effect on ieee13."""


@dataclass
class DiscretePID:
    """A textbook discrete PID with output limits, derivative on measurement and anti-windup.

    :param kp: proportional gain (output units per error unit).
    :param ki: integral gain (output units per error unit per second).
    :param kd: derivative gain (output units per error unit times seconds).
    :param u_min: lower output limit.
    :param u_max: upper output limit.
    :param u0: output bias (the output when all terms are zero).
    :param anti_windup: ``"back_calculation"`` or ``"clamping"``.
    :param kt_per_s: back-calculation tracking gain (1/s); ``None`` = ``1 / T`` (reset in one step).
    :param derivative_tau_s: first-order filter time constant of the derivative (s); 0 = none.
    :param measurement_sign: ``+1`` when ``e = r - y``, ``-1`` when ``e = y - r``.
    :param deadband: errors within ``+-deadband`` count as 0, larger ones less it (measurement units).
    """

    kp: float
    ki: float
    kd: float
    u_min: float
    u_max: float
    u0: float = 0.0
    anti_windup: str = "back_calculation"
    kt_per_s: float | None = None
    derivative_tau_s: float = 0.0
    measurement_sign: float = 1.0
    deadband: float = 0.0
    integral: float = field(default=0.0, init=False)
    derivative: float = field(default=0.0, init=False)
    _y_prev: float | None = field(default=None, init=False)

    def reset(self, integral: float = 0.0) -> None:
        """Clear the memory; ``integral`` preloads the integrator (bumpless start)."""
        self.integral = float(integral)
        self.derivative = 0.0
        self._y_prev = None

    def update(self, setpoint: float, measurement: float, dt_s: float) -> float:
        """One sample: returns the saturated output ``u_k`` and advances the integrator."""
        if dt_s <= 0:
            raise ValueError(f"dt_s must be > 0, got {dt_s}")
        raw = self.measurement_sign * (setpoint - measurement)
        e = math.copysign(max(abs(raw) - self.deadband, 0.0), raw)
        if self._y_prev is not None and self.kd != 0.0:
            a = self.derivative_tau_s / (self.derivative_tau_s + dt_s)
            dy = (measurement - self._y_prev) / dt_s
            self.derivative = a * self.derivative - self.measurement_sign * self.kd * (1.0 - a) * dy
        self._y_prev = measurement
        v = self.u0 + self.kp * e + self.integral + self.derivative
        u = min(max(v, self.u_min), self.u_max)
        if self.anti_windup == "back_calculation":
            kt = 1.0 / dt_s if self.kt_per_s is None else self.kt_per_s
            self.integral += self.ki * dt_s * e + kt * dt_s * (u - v)
        else:
            pushes_out = (v > self.u_max and e > 0) or (v < self.u_min and e < 0)
            if not pushes_out:
                self.integral += self.ki * dt_s * e
        # no wind-up beyond the limits in either mode, so the output leaves a limit without delay
        self.integral = min(max(self.integral, self.u_min - self.u0), self.u_max - self.u0)
        return u


class PIDController(ConfiguredController):
    """Holds a measured voltage or power at a setpoint by moving power caps or batch sizes."""

    name = "pid"
    requires = "at least params setpoint and kp"

    class Config(ControllerConfig):
        """Parameters of :class:`PIDController`."""

        measurement: Literal["worst_undervoltage", "substation_power", "site_power"] = Field(
            "worst_undervoltage", description="Measured variable (pu for voltage, W for powers)."
        )
        setpoint: float = Field(description="Setpoint in the measurement's unit (pu or W).")
        buses: list[str] | None = Field(None, description="worst_undervoltage: zone buses; None = all monitored.")
        sites: list[str] | None = Field(None, description="Sites to actuate (and to sum for site_power); None = all.")
        actuator: Literal["power_cap", "batch_size"] = Field("batch_size", description="What the output drives.")
        kp: float = Field(ge=0, description="Proportional gain (output unit per measurement unit).")
        ki_per_s: float = Field(0.0, ge=0, description="Integral gain (output unit per measurement unit per s).")
        kd_s: float = Field(0.0, ge=0, description="Derivative gain (output unit per measurement unit times s).")
        derivative_tau_s: float = Field(0.0, ge=0, description="Derivative low-pass time constant (s).")
        anti_windup: Literal["back_calculation", "clamping"] = Field(
            "back_calculation",
            description="How the integral stops winding at an output limit (with either, u_0 + I stays within them).",
        )
        deadband: float | None = Field(
            None,
            ge=0,
            description=(
                "delta: errors within +-delta count as 0 (measurement unit: pu or W), so a batch-size output rests "
                "between two sizes; None = 0.002 pu for worst_undervoltage, 0 W for the powers."
            ),
        )
        tracking_gain_per_s: float | None = Field(
            None, gt=0, description="Back-calculation gain Kt (1/s); None = 1/period (reset in one step)."
        )
        output_min: float | None = Field(
            None,
            description=f"Lower output limit: W per GPU for power_cap (default {CAP_MIN_W:g}), level for batch_size (0).",
        )
        output_max: float | None = Field(
            None,
            description=f"Upper output limit: W per GPU for power_cap (default {CAP_MAX_W:g}), level for batch_size (1).",
        )
        power_cap_resolution_w: float = Field(5.0, ge=0, description="Smallest cap change worth a command (W).")
        max_changes_per_min: int | None = Field(
            10,
            gt=0,
            description="batch_size: a model whose batch changed K times in the last 60 s keeps it until the "
            "oldest change is 60 s old; None: no budget.",
        )

        @model_validator(mode="after")
        def _limits(self) -> PIDController.Config:
            lo, hi = self.limits()
            if not lo < hi:
                raise ValueError(f"need output_min < output_max, got {lo} and {hi}")
            if self.actuator == "batch_size" and not (0.0 <= lo and hi <= 1.0):
                raise ValueError(f"batch_size output limits must lie in [0, 1], got [{lo}, {hi}]")
            if self.actuator == "power_cap" and lo <= 0:
                raise ValueError(f"power_cap output_min must be > 0 W, got {lo}")
            return self

        def deadband_value(self) -> float:
            """``deadband`` with the measurement's default filled in (pu or W)."""
            if self.deadband is not None:
                return self.deadband
            return _VOLTAGE_DEADBAND_PU if self.measurement == "worst_undervoltage" else 0.0

        def limits(self) -> tuple[float, float]:
            """``(output_min, output_max)`` with the actuator's defaults filled in."""
            lo_default, hi_default = (CAP_MIN_W, CAP_MAX_W) if self.actuator == "power_cap" else (0.0, 1.0)
            lo = lo_default if self.output_min is None else self.output_min
            hi = hi_default if self.output_max is None else self.output_max
            return lo, hi

    config: Config

    def reset(self, context: ControlContext, seed: int) -> None:
        super().reset(context, seed)
        cfg = self.config
        lo, hi = cfg.limits()
        u0 = hi if cfg.actuator == "power_cap" else self._initial_level()
        sign = -1.0 if cfg.measurement == "worst_undervoltage" else 1.0
        self.pid = DiscretePID(
            kp=cfg.kp,
            ki=cfg.ki_per_s,
            kd=cfg.kd_s,
            u_min=lo,
            u_max=hi,
            u0=min(max(u0, lo), hi),
            anti_windup=cfg.anti_windup,
            kt_per_s=cfg.tracking_gain_per_s,
            derivative_tau_s=cfg.derivative_tau_s,
            measurement_sign=sign,
            deadband=cfg.deadband_value(),
        )
        self.pid.reset()
        self._sent_cap: float | None = None
        self._budget = ChangeBudget(cfg.max_changes_per_min)
        self._sent_batch: dict[tuple[str, str], int] = {
            (s, m): context.sites[s].models[m].initial_batch_size for s, m in site_models(context, self._sites)
        }

    def actuators(self) -> tuple[Actuator, ...]:
        if self.config.actuator == "power_cap":
            return tuple(Actuator("power_cap", (s,)) for s in self._sites)
        return model_actuators("batch_size", site_models(self.context, self._sites))

    def _initial_level(self) -> float:
        levels = []
        for s in self._sites:
            for info in self.context.sites[s].models.values():
                lo, hi = log2_bounds(info.batch_sizes)
                if hi > lo:
                    levels.append((math.log2(info.initial_batch_size) - lo) / (hi - lo))
        return float(np.mean(levels)) if levels else 1.0

    def measure(self, observation: Observation) -> float:
        """The measured variable ``y`` at this step (pu or W)."""
        m = self.config.measurement
        if m == "worst_undervoltage":
            v = observation.grid.v_pu[self._zone]
            return float(v.min()) if v.size else observation.v_min_pu
        if m == "substation_power":
            return float(np.sum(observation.grid.p_sub_w))
        return float(sum(observation.datacenters[s].power_w for s in self._sites if s in observation.datacenters))

    def step(self, observation: Observation) -> list[Command]:
        y = self.measure(observation)
        u = self.pid.update(self.config.setpoint, y, self.context.dt_s)
        return self._actuate(u, observation.t_s)

    def _actuate(self, u: float, t_s: float) -> list[Command]:
        cfg = self.config
        out: list[Command] = []
        if cfg.actuator == "power_cap":
            if self._sent_cap is None or abs(u - self._sent_cap) > cfg.power_cap_resolution_w:
                self._sent_cap = u
                out.extend(SetPowerCap(site=s, cap_w_per_gpu=float(u)) for s in self._sites)
            return out
        for s in self._sites:
            for model, info in self.context.sites[s].models.items():
                lo, hi = log2_bounds(info.batch_sizes)
                b = project_batch(lo + u * (hi - lo), info.batch_sizes)
                key = (s, model)
                if b != self._sent_batch[key] and self._budget.allows(key, t_s):
                    self._sent_batch[key] = b
                    self._budget.spend(key, t_s)
                    out.append(SetBatchSize(site=s, model=model, batch_size=b))
        return out
