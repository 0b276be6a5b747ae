"""The bulk system's frequency after a load change: an aggregate system frequency response model.

**The model and why.** A datacenter that rides a fault through on its UPS, or trips, changes the
load of the whole interconnection by up to gigawatts within a cycle. What that does to frequency
in the first minute is set by three things: the kinetic energy of the synchronous machines
online (inertia), how much the load itself falls with frequency (damping), and how far and how
fast the governors raise the turbines' power (primary response). The aggregate *system frequency
response* (SFR) model of Anderson and Mirheydar ("A low-order system frequency response model",
IEEE Trans. Power Systems 5(3), 1990) keeps exactly those: every machine is lumped into one
equivalent rotor on the system's base, swinging with the centre-of-inertia frequency, driven by
the governor-turbine response. It gives the nadir, its time, the RoCoF and the settling frequency
that a full dynamics engine gives for the centre of inertia (``docs/disturbances.md`` shows the
comparison with ANDES), in closed form for one reheat group, and costs a small matrix-vector
product per step. A multi-machine model would add what an aggregate cannot show (inter-area
oscillations, voltage, protection) at the cost of a network and its data, which a co-simulation of
feeders under one bulk system does not have.

**Equations** (per unit on the system base ``base_mw``; ``w`` is the frequency deviation
``(f - f0) / f0``, ``dP`` the load change ``delta_p_w / (base_mw * 1e6)``, positive for more load)::

    2 H dw/dt = sum_i Pm_i - dP - D w                                swing of the equivalent rotor
    Pm_i(s)   = -(k_i / R_i) G_i(s) w(s)                             governor-turbine group i

with ``G_i(0) = 1`` and, per kind of group (``s`` the Laplace variable)::

    reheat steam   G = (1 + F_H T_R s) / ((1 + T_G s) (1 + T_R s))
    gas turbine    G = 1 / ((1 + T_V s) (1 + T_F s))
    hydro          G = 1 / (1 + T_G s) * (1 + T_r s) / (1 + (R_t / R_p) T_r s) * (1 - T_W s) / (1 + T_W s / 2)

A time constant of 0 drops its lag. Anderson and Mirheydar's model is one reheat group with
``T_G = 0`` and share ``k = K_m``. Two facts follow at once and are tested:
the steady state ``w = -dP / (D + sum_i k_i / R_i)`` and the initial slope ``dw/dt = -dP / (2 H)``
(in Hz: ``f0`` times each).

**Parameters and their typical values** (the defaults are Anderson and Mirheydar's typical
reheat system unless said otherwise):

- ``H`` (s, on ``base_mw``): 4.0 s. Large interconnections run 3 to 6 s on the online capacity;
  a grid rich in inverter-based generation lower (its inverters add base but no inertia).
- ``D`` (pu power per pu frequency): 1.0, a load that falls 1 % per 1 % of frequency; ANDES's
  constant-power loads have none (0).
- per group: ``k`` (share: the fraction of ``base_mw`` whose governors respond; the rest is
  blocked, at a limit or inverter-based), ``R`` (droop, pu frequency per pu power on the group's
  own rating: 0.05, the 5 % that NERC's primary frequency control guideline recommends at most).
- reheat steam: ``T_G`` governor (0 s in Anderson and Mirheydar; 0.05 to 0.5 s in TGOV1 data,
  0.49 s in ANDES's Kundur case), ``F_H`` the high-pressure turbine's fraction of power (0.3),
  ``T_R`` the reheater (8 s; 7 s in the Kundur case).
- gas turbine: ``T_V`` valve positioner and ``T_F`` fuel system (0.4 s and 0.1 s, the values
  usually given for the GAST model's T1 and T2). The temperature and load limits of a gas
  turbine act only at its ceiling and are not modelled.
- hydro: ``T_G`` gate servo, ``R_t`` temporary droop, ``T_r`` its reset time, ``T_W`` water
  starting time (0.5 to 4 s). Kundur (Power System Stability and Control, 1994, ch. 9) sets
  ``R_t = (2.3 - 0.15 (T_W - 1)) T_W / (2 H)`` and ``T_r = (5 - 0.5 (T_W - 1)) T_W`` for a stable
  unit; without transient droop the non-minimum-phase turbine makes the governor unstable,
  which :class:`SystemFrequencySpec` refuses.

**Exact stepping.** The equations are linear, ``x' = A x + b dP``. Over a step of ``dt`` with the
load held, ``x(t + dt) = Phi x(t) + Gamma dP`` with ``[Phi Gamma] = expm([[A, b], [0, 0]] dt)``,
exact for a piecewise-constant load (no integration error, whatever the step), computed once per
distinct ``dt`` and cached; like the grid's solves, a step holds the BLAS libraries to one thread
(:mod:`openg2g.core.threads`), so its last bits do not depend on the number of cores. Turning points of the frequency inside a step (where its slope
changes sign) are located by Brent's method on the exact solution and recorded for the metrics, so
the nadir does not depend on the step sizes (:mod:`openg2g.grid.frequency_metrics`).

**Not modelled.** A governor deadband (NERC's guideline: at most 36 mHz) and valve limits make
the response piecewise linear with switching times inside a step, so the stepping would no longer
be exact; for the large events this model is for (hundreds of mHz) a deadband delays and offsets
the response by a fraction of the deviation. Nor are AGC (minutes), under-frequency load
shedding, protection, voltage, or the swings between machines and areas: ``docs/disturbances.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Discriminator, Field, Tag, model_validator

from openg2g.core.config import ConfigModel
from openg2g.core.errors import SimulationError
from openg2g.core.threads import with_one_blas_thread
from openg2g.grid.frequency_metrics import (
    ROCOF_WINDOW_S,
    SETTLING_BAND_HZ,
    FrequencyMetrics,
    FrequencyMonitor,
)

__all__ = [
    "GasTurbineGovernor",
    "GovernorSpec",
    "HydroGovernor",
    "ReheatSteamGovernor",
    "ReheatStepResponse",
    "SystemFrequency",
    "SystemFrequencySpec",
    "reheat_step_response",
]

_Block = tuple[float, float]
"""A lead-lag ``(1 + a s) / (1 + b s)`` as ``(a, b)``, ``b > 0`` (s)."""


class ReheatSteamGovernor(ConfigModel):
    """A group of reheat steam units and their governors (Anderson and Mirheydar's turbine)."""

    kind: Literal["reheat_steam"] = "reheat_steam"
    share: float = Field(
        0.95, gt=0, le=1, description="Fraction of base_mw whose governors respond (Anderson and Mirheydar's K_m)."
    )
    droop_pu: float = Field(0.05, gt=0, le=1, description="Droop R (pu frequency per pu power, own rating).")
    t_gov_s: float = Field(0.0, ge=0, le=60, description="Governor time constant T_G (s); 0 drops it.")
    f_hp: float = Field(0.3, ge=0, le=1, description="High-pressure turbine's fraction of power F_H (pu).")
    t_reheat_s: float = Field(8.0, gt=0, le=60, description="Reheater time constant T_R (s).")

    def blocks(self) -> list[_Block]:
        """The transfer function ``G(s)`` as lead-lags, governor first."""
        return [*_lag(self.t_gov_s), (self.f_hp * self.t_reheat_s, self.t_reheat_s)]


class GasTurbineGovernor(ConfigModel):
    """A group of gas turbines (simple or the gas part of combined cycles) below their limits."""

    kind: Literal["gas_turbine"] = "gas_turbine"
    share: float = Field(gt=0, le=1, description="Fraction of base_mw whose governors respond.")
    droop_pu: float = Field(0.05, gt=0, le=1, description="Droop R (pu frequency per pu power, own rating).")
    t_valve_s: float = Field(0.4, ge=0, le=60, description="Valve positioner time constant T_V (s); 0 drops it.")
    t_fuel_s: float = Field(0.1, ge=0, le=60, description="Fuel system time constant T_F (s); 0 drops it.")

    def blocks(self) -> list[_Block]:
        """The transfer function ``G(s)`` as lead-lags, valve first."""
        return [*_lag(self.t_valve_s), *_lag(self.t_fuel_s)]


class HydroGovernor(ConfigModel):
    """A group of hydro units: gate servo, transient droop compensation, linearised penstock."""

    kind: Literal["hydro"] = "hydro"
    share: float = Field(gt=0, le=1, description="Fraction of base_mw whose governors respond.")
    droop_pu: float = Field(0.05, gt=0, le=1, description="Permanent droop R_p (pu frequency per pu power).")
    temporary_droop_pu: float = Field(gt=0, le=5, description="Temporary droop R_t (pu), above R_p.")
    t_reset_s: float = Field(gt=0, le=100, description="Reset time T_r of the transient droop (s).")
    t_gate_s: float = Field(0.2, ge=0, le=60, description="Gate servo time constant T_G (s); 0 drops it.")
    t_water_s: float = Field(gt=0, le=10, description="Water starting time T_W at the operating point (s).")

    @model_validator(mode="after")
    def _droops(self) -> HydroGovernor:
        if self.temporary_droop_pu <= self.droop_pu:
            raise ValueError(
                f"temporary_droop_pu ({self.temporary_droop_pu:g}) must exceed droop_pu ({self.droop_pu:g}): "
                "the transient droop is what keeps a hydro governor stable"
            )
        return self

    def blocks(self) -> list[_Block]:
        """The transfer function ``G(s)`` as lead-lags: gate, transient droop, penstock."""
        slow = self.temporary_droop_pu / self.droop_pu * self.t_reset_s
        return [*_lag(self.t_gate_s), (self.t_reset_s, slow), (-self.t_water_s, self.t_water_s / 2)]


def _kind(value: Any) -> Any:
    """The ``kind`` of a governor entry (a mapping or a made model)."""
    return value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)


GovernorSpec = Annotated[
    Annotated[ReheatSteamGovernor, Tag("reheat_steam")]
    | Annotated[GasTurbineGovernor, Tag("gas_turbine")]
    | Annotated[HydroGovernor, Tag("hydro")],
    Discriminator(_kind),
]
"""One governor-turbine group, told apart by ``kind`` (a callable discriminator, as
:data:`openg2g.envs.actions.ActionSpec`: the config models' strict field checks run before
validation, which pydantic's field discriminator refuses)."""


def _lag(t_s: float) -> list[_Block]:
    return [(0.0, t_s)] if t_s > 0 else []


def _default_governors() -> list[GovernorSpec]:
    return [ReheatSteamGovernor()]


class SystemFrequencySpec(ConfigModel):
    """The bulk system seen by :class:`SystemFrequency` (module docstring for the equations)."""

    f0_hz: float = Field(60.0, gt=0, le=1000, description="Nominal frequency (Hz).")
    base_mw: float = Field(
        gt=0, le=1e7, description="Synchronous generation online (MW): the base of H, D, shares and load changes."
    )
    h_s: float = Field(4.0, gt=0, le=100, description="Inertia constant H on base_mw (s, MW s per MW).")
    d_pu: float = Field(1.0, ge=0, le=100, description="Load damping D (pu power per pu frequency).")
    governors: list[GovernorSpec] = Field(
        default_factory=_default_governors,
        description="Governor-turbine groups; the default is Anderson and Mirheydar's reheat system (share 0.95).",
    )
    rocof_window_s: float = Field(ROCOF_WINDOW_S, gt=0, le=60, description="RoCoF metric window (s).")
    settling_band_hz: float = Field(SETTLING_BAND_HZ, gt=0, le=10, description="Settling metric band (Hz).")

    @model_validator(mode="after")
    def _system(self) -> SystemFrequencySpec:
        total = math.fsum(g.share for g in self.governors)
        if total > 1:
            raise ValueError(f"governors: the shares add up to {total:g}, more than the generation online (1)")
        if self.d_pu == 0 and not self.governors:
            raise ValueError("d_pu is 0 and there are no governors: nothing restores the frequency after a change")
        a, _ = _state_space(self)
        worst = max(np.linalg.eigvals(a).real)
        if worst >= 0:
            raise ValueError(
                f"governors: the system is unstable (an eigenvalue with real part {worst:.3g} 1/s): a hydro "
                "group needs more temporary droop or a longer reset time, a lagging group a larger droop"
            )
        return self

    @property
    def restoring_pu(self) -> float:
        """``D + sum_i k_i / R_i``: the steady-state power per frequency deviation (pu/pu)."""
        return self.d_pu + math.fsum(g.share / g.droop_pu for g in self.governors)


def _state_space(spec: SystemFrequencySpec) -> tuple[np.ndarray, np.ndarray]:
    """``A`` (1/s) and ``b`` (1/s per pu load) of ``x' = A x + b dP``, ``x[0]`` the deviation ``w``."""
    blocks = [(g.share / g.droop_pu, g.blocks()) for g in spec.governors]
    n = 1 + sum(len(b) for _, b in blocks)
    a = np.zeros((n, n))
    pm = np.zeros(n)
    j = 1
    for gain, chain in blocks:
        v = np.zeros(n)
        v[0] = -gain
        for lead, lag in chain:
            # z' = (v - z) / lag, out = (lead / lag) v + (1 - lead / lag) z
            a[j] += v / lag
            a[j, j] -= 1.0 / lag
            v = v * (lead / lag)
            v[j] += 1.0 - lead / lag
            j += 1
        pm += v
    two_h = 2.0 * spec.h_s
    a[0] = pm / two_h
    a[0, 0] -= spec.d_pu / two_h
    b = np.zeros(n)
    b[0] = -1.0 / two_h
    return a, b


class SystemFrequency:
    """The bulk system's frequency, stepped by the engine with the load change it sees.

    :param spec: the system (:class:`SystemFrequencySpec`).
    :param event_t_s: the disturbance the settling metrics count from (s); ``None``: the first
        step whose load differs from the one before (a replayed load differs at every step, so a
        run with disturbances names the first one's start).
    """

    _CACHE_SIZE = 256

    @with_one_blas_thread
    def __init__(self, spec: SystemFrequencySpec, event_t_s: float | None = None):
        self.spec = spec
        self._event_t_s = event_t_s
        self._a, self._b = _state_space(spec)
        n = self._a.shape[0]
        self._aug = np.zeros((n + 1, n + 1))
        self._aug[:n, :n] = self._a
        self._aug[:n, n] = self._b
        # turning points are looked for on pieces no longer than the fastest time scale
        self._piece_s = 1.0 / float(np.max(np.abs(np.linalg.eigvals(self._a))))
        self._base_w = spec.base_mw * 1e6
        self._cache: dict[float, tuple[np.ndarray, np.ndarray]] = {}
        self.reset()

    def reset(self) -> None:
        """Back to nominal frequency at ``t = 0`` with no load change; the metrics start anew."""
        self._x = np.zeros(self._a.shape[0])
        self._t = 0.0
        self._u = 0.0
        self._monitor = FrequencyMonitor(
            rocof_window_s=self.spec.rocof_window_s,
            settling_band_hz=self.spec.settling_band_hz,
            event_t_s=self._event_t_s,
        )
        self._monitor.add(0.0, self.spec.f0_hz)

    @property
    def f0_hz(self) -> float:
        """Nominal frequency (Hz)."""
        return self.spec.f0_hz

    @property
    def t_s(self) -> float:
        """Time since :meth:`reset` (s): the sum of the steps."""
        return self._t

    @property
    def frequency_hz(self) -> float:
        """Frequency now (Hz)."""
        return self.spec.f0_hz * (1.0 + float(self._x[0]))

    def steady_state_hz(self, delta_p_w: float) -> float:
        """Where the frequency settles with the load change ``delta_p_w`` (W) held: ``f0 (1 - dP / (D + sum k/R))``."""
        return self.spec.f0_hz * (1.0 - delta_p_w / self._base_w / self.spec.restoring_pu)

    def initial_rocof_hz_s(self, delta_p_w: float) -> float:
        """The frequency's slope just after a step of ``delta_p_w`` (W) from rest: ``-dP f0 / (2 H)`` (Hz/s)."""
        return -delta_p_w / self._base_w * self.spec.f0_hz / (2.0 * self.spec.h_s)

    def _transition(self, dt_s: float) -> tuple[np.ndarray, np.ndarray]:
        hit = self._cache.get(dt_s)
        if hit is None:
            if len(self._cache) >= self._CACHE_SIZE:
                # recomputing gives the same bits, so dropping the cache changes no result
                self._cache.clear()
            import scipy.linalg  # here, so that the model's settings (the scenario schema) load no scipy

            e = scipy.linalg.expm(self._aug * dt_s)
            n = self._a.shape[0]
            hit = (e[:n, :n].copy(), e[:n, n].copy())
            self._cache[dt_s] = hit
        return hit

    def _advance(self, x: np.ndarray, u: float, dt_s: float) -> np.ndarray:
        phi, gamma = self._transition(dt_s)
        return phi @ x + gamma * u

    def _slope(self, x: np.ndarray, u: float) -> float:
        return float(self._a[0] @ x + self._b[0] * u)

    @with_one_blas_thread
    def step(self, dt_s: float, delta_p_w: float, t_s: float | None = None) -> float:
        """Advance over ``dt_s`` (s, > 0, may differ from step to step) with the load ``delta_p_w``
        (W above the load at the start, held over the step) and return the frequency at the
        step's end (Hz). ``t_s``: the step's end as the caller's exact clock has it (s), so that
        the metrics' times are the run's; default the sum of the steps.

        :raises SimulationError: ``dt_s`` is not a finite positive time, ``delta_p_w`` is not finite
            or exceeds the generation online (``base_mw``), naming the time.
        """
        t0 = self._t
        if not (math.isfinite(dt_s) and dt_s > 0):
            raise SimulationError(f"t={t0} s, system frequency: the step must be a finite time > 0 s, got {dt_s!r}")
        if not math.isfinite(delta_p_w):
            raise SimulationError(f"t={t0} s, system frequency: the load change must be finite W, got {delta_p_w!r}")
        if abs(delta_p_w) > self._base_w:
            raise SimulationError(
                f"t={t0} s, system frequency: a load change of {delta_p_w / 1e6:g} MW exceeds the "
                f"{self.spec.base_mw:g} MW of generation online (base_mw); is it in W?"
            )
        dt_s = float(dt_s)
        u = delta_p_w / self._base_w
        if u != self._u:
            self._monitor.mark_event(t0)
        x0 = self._x
        x1 = self._advance(x0, u, dt_s)
        self._record_turning_points(x0, x1, u, dt_s, t0)
        self._x, self._u = x1, u
        self._t = t0 + dt_s if t_s is None else float(t_s)
        f = self.frequency_hz
        self._monitor.add(self._t, f)
        return f

    def _record_turning_points(self, x0: np.ndarray, x1: np.ndarray, u: float, dt_s: float, t0: float) -> None:
        pieces = max(1, math.ceil(dt_s / self._piece_s))
        h = dt_s / pieces
        xa, sa = x0, self._slope(x0, u)
        for p in range(pieces):
            xb = x1 if pieces == 1 else self._advance(xa, u, h)
            sb = self._slope(xb, u)
            if sa * sb < 0:
                tau = self._root(xa, u, h)
                x = self._at(xa, u, tau)
                self._monitor.add(t0 + p * h + tau, self.spec.f0_hz * (1.0 + float(x[0])))
            xa, sa = xb, sb

    def _at(self, x: np.ndarray, u: float, tau: float) -> np.ndarray:
        # an instant inside a step: not cached, as such instants are not repeated
        import scipy.linalg

        e = scipy.linalg.expm(self._aug * tau)
        n = self._a.shape[0]
        return e[:n, :n] @ x + e[:n, n] * u

    def _root(self, x: np.ndarray, u: float, h: float) -> float:
        import scipy.optimize  # only a turning point needs it: 80 ms of every run's start otherwise

        tau = scipy.optimize.brentq(lambda s: self._slope(self._at(x, u, s), u), 0.0, h, xtol=1e-13, rtol=1e-15)
        return float(tau)

    def metrics(self) -> FrequencyMetrics:
        """Nadir, zenith, RoCoF and settling (:mod:`openg2g.grid.frequency_metrics`) since
        :meth:`reset`, the event being the first step whose load differs from the one before."""
        return self._monitor.result()

    def figures(self) -> dict[str, Any]:
        """:meth:`metrics` as a run summary's ``frequency_*`` keys (Hz, s, Hz/s)."""
        m = self.metrics()
        return {
            "frequency_nadir_hz": m.nadir_hz,
            "frequency_nadir_at_s": m.nadir_t_s,
            "frequency_zenith_hz": m.zenith_hz,
            "frequency_zenith_at_s": m.zenith_t_s,
            "frequency_rocof_hz_s": m.rocof_hz_s,
            "frequency_rocof_at_s": m.rocof_t_s,
            "frequency_rocof_window_s": m.rocof_window_s,
            "frequency_event_at_s": m.event_t_s,
            "frequency_settling_hz": m.settling_hz,
            "frequency_settled_at_s": m.settling_t_s,
        }


@dataclass(frozen=True)
class ReheatStepResponse:
    """Anderson and Mirheydar's closed-form response to a load step ``dP`` (pu) from rest at
    ``t = 0``, for one reheat group without governor lag, underdamped::

        w(t) = w_ss (1 + alpha exp(-zeta wn t) sin(wr t + phi))
        wn^2 = (D R + k) / (2 H R T_R),   2 zeta wn = (2 H R + (D R + k F_H) T_R) / (2 H R T_R)
        wr = wn sqrt(1 - zeta^2),         w_ss = -dP R / (D R + k)
        alpha = sqrt((1 - 2 T_R zeta wn + T_R^2 wn^2) / (1 - zeta^2))
        nadir at t_z = atan2(T_R wr, zeta wn T_R - 1) / wr: w = w_ss (1 + sqrt(1 - zeta^2) alpha exp(-zeta wn t_z))

    (``phi`` with ``alpha sin(phi) = -1``, so that ``w(0) = 0``, and ``alpha cos(phi) = (wn^2 T_R - zeta wn) / wr``,
    so that ``w'(0) = -dP / (2 H)``.)
    """

    f0_hz: float
    steady_state_pu: float
    omega_n: float
    """Natural frequency (rad/s)."""
    zeta: float
    """Damping ratio."""
    omega_r: float
    """Damped frequency (rad/s)."""
    alpha: float
    phi: float
    """Phase (rad)."""
    nadir_t_s: float
    """Time of the extreme after the step (s)."""
    nadir_pu: float
    """The deviation there (pu; a nadir for a load gain, a zenith for a loss)."""

    def deviation_pu(self, t_s: np.ndarray | float) -> np.ndarray:
        """``w(t)`` (pu) at times ``t_s`` (s) after the step."""
        t = np.asarray(t_s, dtype=float)
        sigma = self.zeta * self.omega_n
        return self.steady_state_pu * (1.0 + self.alpha * np.exp(-sigma * t) * np.sin(self.omega_r * t + self.phi))

    def frequency_hz(self, t_s: np.ndarray | float) -> np.ndarray:
        """``f0 (1 + w(t))`` (Hz)."""
        return self.f0_hz * (1.0 + self.deviation_pu(t_s))

    @property
    def nadir_hz(self) -> float:
        """The extreme frequency (Hz)."""
        return self.f0_hz * (1.0 + self.nadir_pu)


def reheat_step_response(spec: SystemFrequencySpec, delta_p_w: float) -> ReheatStepResponse:
    """The closed form (:class:`ReheatStepResponse`) of a step of ``delta_p_w`` (W) from rest.

    :raises ValueError: the spec is not one reheat group with ``t_gov_s = 0``, or is not underdamped.
    """
    if len(spec.governors) != 1 or not isinstance(spec.governors[0], ReheatSteamGovernor):
        raise ValueError("the closed form is for one reheat steam group (governors: one reheat_steam)")
    g = spec.governors[0]
    if g.t_gov_s != 0:
        raise ValueError(f"the closed form neglects the governor lag: t_gov_s is {g.t_gov_s:g}, not 0")
    h, d, r, k, fh, tr = spec.h_s, spec.d_pu, g.droop_pu, g.share, g.f_hp, g.t_reheat_s
    dp = delta_p_w / (spec.base_mw * 1e6)
    wn = math.sqrt((d * r + k) / (2 * h * r * tr))
    zeta = (2 * h * r + (d * r + k * fh) * tr) / (2 * (d * r + k)) * wn
    if zeta >= 1:
        raise ValueError(f"the closed form is for an underdamped response; zeta is {zeta:.4g}")
    wr = wn * math.sqrt(1 - zeta * zeta)
    alpha = math.sqrt((1 - 2 * tr * zeta * wn + tr * tr * wn * wn) / (1 - zeta * zeta))
    phi = math.atan2(-1.0, (wn * wn * tr - zeta * wn) / wr)
    w_ss = -dp * r / (d * r + k)
    t_z = math.atan2(tr * wr, zeta * wn * tr - 1) / wr
    nadir = w_ss * (1 + math.sqrt(1 - zeta * zeta) * alpha * math.exp(-zeta * wn * t_z))
    return ReheatStepResponse(
        f0_hz=spec.f0_hz,
        steady_state_pu=w_ss,
        omega_n=wn,
        zeta=zeta,
        omega_r=wr,
        alpha=alpha,
        phi=phi,
        nadir_t_s=t_z,
        nadir_pu=nadir,
    )
