r"""Online feedback optimization (OFO) of batch sizes: a primal-dual gradient loop on the real grid.

Decision variables: ``x_i = log2(batch size)`` of every model ``i`` at the controlled sites, kept
continuous between steps and projected to the measured batch sizes when sent. The controller
approximately solves, by feedback::

    max  sum_i w_T log T_i(x_i)                                (throughput, proportionally fair)
    s.t. v_min <= v_j(x) <= v_max     for each monitored bus-phase j of the zone
         l_i(x_i) <= d_i              for each model with an ITL deadline d_i
         L_b(x) <= L_max              for each constrained branch b (with ``thermal``)

Update equations, at control step k with measured voltages v_j, measured mean ITL l_i (or
fraction m_i of tokens over the deadline, a chance constraint ``m_i <= eps``) and active replicas
n_i (``[.]_+ = max(., 0)``)::

    lam_j^- <- [lam_j^- + rho_v (v_min - v_j)]_+                 undervoltage duals
    lam_j^+ <- [lam_j^+ + rho_v (v_j - v_max)]_+                 overvoltage duals
    mu_i    <- [mu_i + rho_l sat(l_i / d_i - 1)]_+               latency duals (normalized,
               [mu_i + rho_l sat(m_i / eps - 1)]_+               sat = clip to [-1, 1])
    nu_b    <- [nu_b + rho_th (L_b / L_max - 1)]_+               thermal duals (normalized)

    dv/dx_i = H_s e_s * pue_s * n_i * P_i'(x_i)                  pu per unit log2 batch
    g_i     = - w_T T_i'(x_i) / T_i(x_i)                         throughput value
              + k_v (lam^+ - lam^- + kappa (o - u))^T dv/dx_i    voltage price
              + mu_i l_i'(x_i) / d_i                             latency price
              + k_th (nu + kappa_th w)^T dL/dx_i / L_max         thermal price
              + gamma (x_i - x_i^prev)                           switching damping
    h_i     =  dg_i/dx_i                                         curvature (below)
    x_i     <- Proj_[log2 b_i^min, log2 b_i^ceil] (x_i + sat_{r dt}(-g_i / max(1/rho_x, h_i)))
    b_i     =  measured batch size nearest 2^x_i (log2 distance), with hysteresis h

Three options change those terms (each off by default; ``ieee13_fixedtap_ofo``, ``ieee34_ref_ofo``
and ``ieee123_ref_ofo`` turn on the last two):

- ``throughput_objective: log_total`` values the log of the controlled models' total tokens,
  ``-w_T n_i T_i'(x_i) / sum_j n_j T_j(x_j)``: a model pulls by its share of the tokens, not as
  one of K equals;
- ``latency_gradient: miss_fraction`` (with ``latency_signal: miss_fraction``) prices the chance
  constraint along its own slope, ``mu_i m_i'(x_i) / eps``, ``m_i`` the broken line through the
  site's steady-state miss fractions per batch size (``ModelCurves.miss_fraction``). The mean ITL
  is a poor proxy at the top of the grid: Qwen3-30B-A3B's mean ITL rises 13% from batch 256 to
  512 (the PCHIP's end slope is 0.0002 s per log2 step) while its misses rise from 5.4% to 17%, so
  with the ITL's slope no latency price, however large, moved it off 512;
- ``voltage_margin_sigmas: z`` enforces ``v_min + z s_j`` and ``v_max - z s_j``, ``s_j^2`` the
  running mean (half-life ``voltage_margin_halflife_s``) of the squared change between control
  steps of the voltage moved by the part of the sites' draw this controller does not set,
  ``sum_s H_s (u_s(k) - u_s(k-1))`` (``u_s``: the site's power less its controlled models'): the
  integral action settles *on* a limit, so a draw that moves faster than the control period (a
  training job's power noise: ~0.003 pu a second at 671 on the fixed-tap hour) puts the feeder
  beyond it about half the time; the margin vanishes where that draw is steady. Two other
  estimates were measured and dropped. From the voltage readings: the same on the hour (0.168
  pu.s at 8.03 M tok/s), but a meter's error of 0.005 pu (``controllers[*].voltage_noise_pu``)
  widened it to ~0.01 pu and cost 45% of the tokens (this one: 0.107 pu.s at +1.8%). From the
  sites' whole draw: 0.170 pu.s at 8.03 M tok/s, but the controller's own moves widen it, and
  under a 2 s command delay ``ieee34_ref_ofo`` left 2.14 pu.s (this one: 1.05).

On the fixed-tap ieee13 hour these took the violation from 0.879 to 0.198 pu.s (2.36% -> 0.53% of
the no-control 37.22 pu.s) and the throughput from 7.53 to 8.05 M tok/s (-1.5% -> +5.4% against no
control), with ``w_T = 1.5`` and ``eps = 0.04`` (fleet misses 2.5%, the worst model 3.4%); with the
same settings ``ieee34_ref_ofo`` 0.0987 -> 0.0501 pu.s at 10.83 -> 12.04 M tok/s and
``ieee123_ref_ofo`` 20.57 -> 20.45 pu.s at 1.004 -> 1.061 M tok/s. Under a 2 s command delay the
fixed-tap hour gains too (0.930 -> 0.232 pu.s) but ``ieee34_ref_ofo`` loses (0.737 -> 1.054 pu.s,
at 10.65 -> 11.47 M tok/s): its over-voltage at the regulator's output in the first 20 minutes
and the latency budgets pull against each other, and the delay makes that a slow oscillation. Measured one at a time there
(the margin then from the readings): the miss-fraction slope alone (the earlier ``w_T`` 1 and
``eps`` 0.025) 0.886 pu.s at 7.80 M tok/s; with the margin too, ``z`` = 1 and 1.5, 0.329 and
0.119 pu.s at 7.53 and 7.33 M tok/s; then ``eps`` 0.04 and ``w_T`` 1.5 buy the throughput back.
``log_total`` in place of the per-model logs traded along a worse front (``w_T`` 10, ``z`` 1,
``eps`` 0.04: 0.500 pu.s at 8.18 M tok/s). The latency price's alternation between two measured
sizes remains (Llama-3.1-70B: 174 changes, 165 of them reversals, at most 6 a minute): where
``eps`` lies between two sizes' miss fractions, time-sharing between them is how the constraint
is met.

Stability of the primal step. The step ``-rho_x g_i`` is a discrete integrator around the balance of
the prices, with loop gain ``rho_x h_i``; ``h_i`` grows with the prices (``mu_i l_i''``, the voltage
price times ``P_i''``), and once ``rho_x h_i > 2`` x flips across the balance every step (a
period-2 limit cycle). That happens whenever two constraints pull against each other and both duals
integrate: on ``ieee13_ofo`` from ~2960 s the over-voltage that batches cannot remove (phase c at
+17 taps, inference ramping down) raised the voltage price while Llama-3.1-405B's deadline-miss
fraction at batch 128 (7.1%, over the 5% target) raised its latency price; x then alternated
between batch 32-64 and 256-512 every second for ~350 s. So the step is the gradient step where
``rho_x h_i <= 1`` and the Newton step ``-g_i / h_i`` beyond (loop gain at most 1: x approaches
the balance from one side). ``h_i`` is analytic: the same terms as ``g_i`` with the curves' second
derivatives, and ``kappa |dv/dx_i|^2`` over the violated rows for the present-violation term
(Gauss-Newton; ``kappa_th`` alike). ``sat_{r dt}`` bounds a model's move to ``r``
(``max_batch_rate_log2_per_s``, off by default) times the control period, whatever the gradient.
It is no cure for the flip and costs where duals integrate while x travels: on
``ieee123_ref_ofo`` (900 s) ``r = 1`` left the same violation (8.77 pu.s) at 294k instead of 755k
tok/s, the under-voltage duals winding up for the seconds x took to reach its floor (where
anti-windup holds them). With the quantization to
measured sizes, the latency constraint often lies between two sizes, where the integral action
switches between them; the hysteresis ``h`` (``batch_hysteresis``, default 0.25 log2) sends a new
size only once x is nearer to it than to the size in force by more than ``h``, so x must cross the
midpoint by ``h / 2`` (9% in batch) each way.

With ``dual_anti_windup`` (default) the voltage duals integrate conditionally: while every ``x_i``
sits at its lower bound the undervoltage increments are clipped at 0 (and the overvoltage ones
while every ``x_i`` sits at its ceiling), and both while the grid carries none of the sites' load
(every site out, or every ride-through block on its UPS), so a violation batch control cannot
remove does not wind the price up for the time after it. (Without the last: a fault at 675 with
the campus's four halls on UPS from 1500 s, taps fixed, left an over-voltage price that drove every
model to batch 512 when the halls returned, at 10-17% misses; ``bench/robustness.py``.) ``u_j = [v_min - v_j]_+`` and ``o_j = [v_j - v_max]_+`` are
the present violations: ``kappa > 0`` adds the gradient of a quadratic penalty (an
augmented-Lagrangian term) that acts at once while the duals integrate; it speeds up and damps the
pure primal-dual loop (a double integrator through the grid). ``H_s`` is
``observation.voltage_sensitivity(site)`` restricted to the zone (pu per W of per-phase active
power), ``e_s`` the site's measured phase shares, and ``P_i``, ``l_i``, ``T_i`` the logistic fits
of per-replica GPU power, ITL and throughput against ``log2(batch)`` (:mod:`openg2g.controllers.curves`).
A :class:`SetBatchSize` is sent only when ``b_i`` changes (past the hysteresis), and at most
``max_changes_per_min`` times per model in any 60 s (:mod:`controllers._budget`). A run's
``summary.json`` counts each model's changes and reversals (``batch_changes_by_model``,
``batch_reversals_by_model``, ``max_batch_reversals_per_min``).

Thermal limits (``thermal: true``, off by default): ``L_b`` is branch ``b``'s loading as the grid
reports it (% of its normal rating, ``GridState.branch_loading_pct``), for the branches
``thermal_branches`` (grid_branches names such as ``line.650632``; all when not given), and
``dL/dx_i = G_s e_s * pue_s * n_i * P_i'(x_i)`` with ``G_s`` the grid's exact ``d(loading)/dP``
(``observation.loading_sensitivity(site)``, % per W of per-phase power). ``w_b = [L_b / L_max - 1]_+``
is the present overload, the thermal counterpart of ``kappa (o - u)``. With ``dual_anti_windup`` the
thermal increments are clipped at 0 while every ``x_i`` sits at its lower bound. On ieee13 with a
site at 671 (``scenarios/ieee13_thermal_ofo.yaml``) the trunk 650-632 (400 A) moves by ~2% per log2
step of 1,440 x Llama-3.1-8B, so ``k_th = 300`` with ``kappa_th = 10`` turns a 5% overload into a
gradient of ~3, above the throughput weight's, at once. Measured there over 300 s (limit 100%; with the
fixed step ``-rho_x g``, before the curvature limit, rate bound and hysteresis defaults):
``k_th`` = 100, 300, 1000 left 95, 56, 40 %.s of overload, each then holding the line at the limit
on average, with 18, 22, 35 batch changes; the loop settles *on* the limit (an integral action),
so a scenario that must stay under the rating sets ``max_loading_pct`` a little below 100.

Tuning on ieee13 (``scenarios/ieee13_ofo.yaml``, the defaults): at bus 671 ``dv/dx_i`` of the
lowest bus-phases is ~7e-4 pu per log2 step for the largest models (720 x Llama-3.1-8B,
90 x Llama-3.1-405B), so ``k_v = 1e5`` with ``kappa = 10`` turns a 0.01 pu violation on a few
bus-phases into a gradient of tens at once (``rho_x = 0.1``: up to the rate bound, one log2 step
per second) and the dual keeps pushing while the violation lasts. The log-throughput
weight ``w_T = 1`` (gradient ~0.1-0.8 per log2 step) brings batches back within about a minute once
the voltage has margin; ``latency_signal = miss_fraction`` with ``eps = 0.05`` keeps the token
tail near the baseline's instead of letting the models sit at 512. On the full 3,600 s case the
violation left is the part batch control cannot remove (the feeder is below 0.95 pu during the
training job even with every batch at 8).
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from openg2g.core.commands import Actuator, Command, SetBatchSize
from openg2g.core.interfaces import ControlContext
from openg2g.core.state import Observation

from ._base import ConfiguredController
from ._budget import ChangeBudget
from ._sites import active_replicas, model_actuators, phase_share, site_models
from ._thermal import LoadingSensitivityCache, ThermalParams, branch_loading, thermal_rows
from ._voltage import SensitivityCache, grid_share
from .curves import ModelCurves, project_batch

__all__ = ["OFOController"]


class OFOController(ConfiguredController):
    """Primal-dual online feedback optimization of per-model batch sizes."""

    name = "ofo"

    class Config(ThermalParams):
        """Parameters of :class:`OFOController` (symbols as in the module docstring; the thermal
        limit's ``thermal``, ``thermal_branches`` and ``max_loading_pct`` from :class:`ThermalParams`)."""

        sites: list[str] | None = Field(None, description="Sites to control; None = all.")
        buses: list[str] | None = Field(None, description="Zone buses whose limits count; None = all monitored.")
        primal_step: float = Field(0.1, gt=0, description="rho_x: primal step (log2 batch per unit gradient).")
        voltage_dual_step: float = Field(1.0, ge=0, description="rho_v: voltage dual step (1 per pu).")
        latency_dual_step: float = Field(1.0, ge=0, description="rho_l: latency dual step (per unit ITL/deadline).")
        voltage_weight_per_pu2: float = Field(
            1.0e5, ge=0, description="k_v: scale of the voltage price in the primal gradient (1/pu^2)."
        )
        voltage_proportional_gain: float = Field(
            10.0, ge=0, description="kappa: weight of the present violation added to the voltage duals (1)."
        )
        latency_signal: Literal["mean_itl", "miss_fraction"] = Field(
            "mean_itl", description="Latency constraint: mean ITL <= deadline, or deadline-miss fraction <= target."
        )
        latency_gradient: Literal["mean_itl", "miss_fraction"] = Field(
            "mean_itl",
            description="What the latency price moves along: the mean ITL's slope over the deadline, or (with "
            "latency_signal miss_fraction) the miss fraction's own slope over its target, from the site's "
            "steady-state fractions per batch size (the mean ITL's slope only where the site gives none).",
        )
        miss_fraction_target: float = Field(
            0.01, gt=0, lt=1, description="epsilon: largest fraction of tokens over the deadline (miss_fraction)."
        )
        throughput_weight: float = Field(1.0, ge=0, description="w_T: weight of log throughput.")
        throughput_objective: Literal["log_per_model", "log_total"] = Field(
            "log_per_model",
            description="The throughput valued: the sum of each model's log throughput (proportionally fair: "
            "a model's relative loss costs the same whatever its size), or the log of the controlled "
            "models' total tokens per second (a token is a token: the fleet's total output).",
        )
        switching_weight: float = Field(0.0, ge=0, description="gamma: damping of x changes between steps.")
        v_min_pu: float | None = Field(None, gt=0, description="Lower limit to enforce (pu); None = the scenario's.")
        v_max_pu: float | None = Field(None, gt=0, description="Upper limit to enforce (pu); None = the scenario's.")
        voltage_margin_sigmas: float = Field(
            0.0,
            ge=0,
            description="z: keep each bus-phase z times the recent step-to-step spread of the voltage the sites' "
            "own draw moves inside the limits (a chance constraint; 0: the limits themselves).",
        )
        voltage_margin_halflife_s: float = Field(
            60.0, gt=0, description="Half-life of the voltage spread's running estimate (s)."
        )
        batch_ceiling: Literal["measured_max", "initial"] = Field(
            "measured_max", description="Largest batch OFO may choose: the largest measured, or the initial one."
        )
        dual_anti_windup: bool = Field(
            True, description="Stop raising a voltage price while every batch already sits at the bound it pushes to."
        )
        sensitivity_every_steps: int = Field(1, gt=0, description="Refresh the grid sensitivity every N steps.")
        batch_hysteresis: float = Field(
            0.25,
            ge=0,
            le=1,
            description="h: send a new batch size only once x is nearer to it than to the one in force by more "
            "than h (log2 units; 0: always the nearest).",
        )
        max_batch_rate_log2_per_s: float | None = Field(
            None,
            gt=0,
            description="r: largest change of a model's x per second (log2 batch per s, e.g. 1: one doubling or "
            "halving per second); None: unbounded.",
        )
        max_changes_per_min: int | None = Field(
            10,
            gt=0,
            description="K: a model whose batch changed K times in the last 60 s keeps it until the oldest change "
            "is 60 s old (its x goes on integrating); None: no budget.",
        )
        thermal_dual_step: float = Field(1.0, ge=0, description="rho_th: thermal dual step (per unit loading/limit).")
        thermal_weight: float = Field(
            300.0, ge=0, description="k_th: scale of the thermal price in the primal gradient (1)."
        )
        thermal_proportional_gain: float = Field(
            10.0, ge=0, description="kappa_th: weight of the present overload added to the thermal duals (1)."
        )

        @model_validator(mode="after")
        def _gradient_of_the_signal(self) -> OFOController.Config:
            if self.latency_gradient == "miss_fraction" and self.latency_signal != "miss_fraction":
                raise ValueError(
                    "latency_gradient 'miss_fraction' prices the miss fraction: it needs latency_signal 'miss_fraction'"
                )
            return self

    config: Config

    # -- setup -------------------------------------------------------------------------------

    def reset(self, context: ControlContext, seed: int) -> None:
        super().reset(context, seed)
        cfg = self.config
        self._keys: list[tuple[str, str]] = site_models(context, self._sites)
        self.curves: dict[tuple[str, str], ModelCurves] = {
            (s, m): ModelCurves.from_model_info(context.sites[s].models[m]) for s, m in self._keys
        }
        self.x: dict[tuple[str, str], float] = {}
        self._x_hi: dict[tuple[str, str], float] = {}
        self._sent: dict[tuple[str, str], int] = {}
        self._budget = ChangeBudget(self.config.max_changes_per_min)
        for key in self._keys:
            info = context.sites[key[0]].models[key[1]]
            c = self.curves[key]
            self._x_hi[key] = math.log2(info.initial_batch_size) if cfg.batch_ceiling == "initial" else c.x_max
            self.x[key] = min(max(math.log2(info.initial_batch_size), c.x_min), self._x_hi[key])
            self._sent[key] = info.initial_batch_size
        self._x_prev = dict(self.x)
        self.lam_under = np.zeros(self._zone.size)
        self.lam_over = np.zeros(self._zone.size)
        self._under = np.zeros(self._zone.size)
        self._over = np.zeros(self._zone.size)
        self._p_last: dict[str, np.ndarray] | None = None
        self._spread2 = np.zeros(self._zone.size)
        self._spread_keep = 0.5 ** (context.dt_s / cfg.voltage_margin_halflife_s)
        self.mu: dict[tuple[str, str], float] = {key: 0.0 for key in self._keys}
        self._sens = SensitivityCache(self._zone, cfg.sensitivity_every_steps)
        rows = thermal_rows(context, cfg.thermal_branches, controller=self.name) if cfg.thermal else np.zeros(0, int)
        self._thermal_rows = rows
        self.nu = np.zeros(rows.size)
        self._overload = np.zeros(rows.size)
        self._loading_sens = LoadingSensitivityCache(rows, cfg.sensitivity_every_steps)
        self._steps = 0
        self._eta: tuple[np.ndarray, bool] | None = None
        self._total: float | None = None
        self._zeta: tuple[np.ndarray, bool] | None = None
        self._responses: dict[tuple[int, str], tuple[tuple[int, int], Observation, np.ndarray]] = {}

    # -- the three updates -------------------------------------------------------------------

    def update_duals(self, observation: Observation) -> None:
        """Projected dual ascent on the voltage and latency constraints (first three equations)."""
        cfg = self.config
        v = np.asarray(observation.grid.v_pu, dtype=float)[self._zone]
        margin = self.voltage_margin(observation)
        v_min = (observation.v_min_pu if cfg.v_min_pu is None else cfg.v_min_pu) + margin
        v_max = (observation.v_max_pu if cfg.v_max_pu is None else cfg.v_max_pu) - margin
        self._under = np.maximum(v_min - v, 0.0)
        self._over = np.maximum(v - v_max, 0.0)
        d_under = cfg.voltage_dual_step * (v_min - v)
        d_over = cfg.voltage_dual_step * (v - v_max)
        detached = self._detached(observation)
        at_floor = detached or all(self.x[k] <= self.curves[k].x_min + 1e-9 for k in self._keys)
        if cfg.dual_anti_windup:
            # conditional integration: a price stops rising once every batch is already at the bound
            # it pushes toward, or the grid carries none of the sites' load (the violation is then
            # beyond what batch control can fix)
            if at_floor:
                d_under = np.minimum(d_under, 0.0)
            if detached or all(self.x[k] >= self._x_hi[k] - 1e-9 for k in self._keys):
                d_over = np.minimum(d_over, 0.0)
        self.lam_under = np.maximum(self.lam_under + d_under, 0.0)
        self.lam_over = np.maximum(self.lam_over + d_over, 0.0)
        self._eta = None  # the voltage price of these duals, computed once for all models (gradient)
        self._total = None
        if self._thermal_rows.size:
            self._update_thermal_duals(observation, at_floor and cfg.dual_anti_windup)
        for site, model in self._keys:
            info = self.context.sites[site].models[model]
            dc = observation.datacenters.get(site)
            state = dc.models.get(model) if dc is not None else None
            if info.itl_deadline_s is None or state is None or state.replicas <= 0 or not math.isfinite(state.itl_s):
                continue
            if cfg.latency_signal == "mean_itl":
                excess = state.itl_s / info.itl_deadline_s - 1.0
            else:
                excess = state.deadline_miss_fraction / cfg.miss_fraction_target - 1.0
            excess = min(max(excess, -1.0), 1.0)
            self.mu[(site, model)] = max(self.mu[(site, model)] + cfg.latency_dual_step * excess, 0.0)

    def _detached(self, observation: Observation) -> bool:
        """Whether the grid carries none of the controlled sites' load now (each out, cut off, or
        with every ride-through block on its UPS): batch sizes then move no grid power."""
        for site in self._sites:
            state = observation.datacenters.get(site)
            if state is not None and state.online and state.supplied and grid_share(observation, site) > 0.0:
                return False
        return True

    def voltage_margin(self, observation: Observation) -> np.ndarray:
        """``z s_j``: each zone bus-phase's margin (pu), where ``s_j^2`` is the running mean of the
        squared change, between control steps, of the voltage that the part of the sites' draw this
        controller does not set moves: ``sum_s H_s (u_s(k) - u_s(k-1))``, ``u_s`` a site's
        per-phase power less its controlled models' (:meth:`_site_power`).

        Why: a loop with integral action settles *on* a limit, so a draw that moves faster than the
        control period (a training job's power noise) puts about half the voltages beyond it; the
        margin is a chance constraint sized by that motion. It is taken from the sites' power, not
        from the voltage readings, so that a meter's error (which integral action averages out)
        does not widen it, and without the controlled models' power, so that the controller's own
        moves (which land late under a delay) do not."""
        zeros = np.zeros(self._zone.size)
        if self.config.voltage_margin_sigmas == 0.0:
            return zeros
        power = {site: self._site_power(observation, site) for site in self._sites}
        if self._p_last is not None:
            step = zeros
            for site, p in power.items():
                change = p - self._p_last[site]
                if np.all(np.isfinite(change)) and np.any(change != 0.0):
                    step = step + self._sens.get(observation, site, self._steps) @ change
            self._spread2 = self._spread_keep * self._spread2 + (1.0 - self._spread_keep) * step * step
        self._p_last = power
        return self.config.voltage_margin_sigmas * np.sqrt(self._spread2)

    def _site_power(self, observation: Observation, site: str) -> np.ndarray:
        """The part of a site's per-phase active power (W) that this controller does not set: the
        facility's measured draw less its controlled models' (their GPU power times the PUE, shared
        over the phases as the whole draw is); 0 where the site reports none."""
        state = observation.datacenters.get(site)
        if state is None:
            return np.zeros(3)
        p = np.asarray(state.p_w, dtype=float)
        own = sum(state.models[m].power_w for s, m in self._keys if s == site and m in state.models)
        total = float(p.sum())
        return p - p * (self.context.sites[site].pue * own / total) if total > 0 else p

    def _update_thermal_duals(self, observation: Observation, hold: bool) -> None:
        """Projected dual ascent on the thermal constraints (``nu``); ``hold``: clip the increments
        at 0 (every batch at its lower bound). A step without branch results leaves them as they are."""
        cfg = self.config
        excess = branch_loading(observation, self._thermal_rows) / cfg.max_loading_pct - 1.0
        excess = np.where(np.isfinite(excess), excess, 0.0)
        d_nu = cfg.thermal_dual_step * excess
        if hold:
            d_nu = np.minimum(d_nu, 0.0)
        self.nu = np.maximum(self.nu + d_nu, 0.0)
        self._overload = np.maximum(excess, 0.0)
        self._zeta = None  # the thermal price of these duals, computed once for all models (gradient)

    def _replicas(self, observation: Observation, site: str, model: str) -> float:
        """``n_i``: the model's active replicas at its site."""
        info = self.context.sites[site].models[model]
        return active_replicas(observation.datacenters.get(site), model, info.replicas)

    def _total_throughput(self, observation: Observation) -> float:
        """``sum_j n_j T_j(x_j)``: the controlled models' tokens per second by the curves at the present
        ``x`` (computed once a step)."""
        if self._total is None:
            self._total = sum(
                self._replicas(observation, *key) * float(self.curves[key].throughput_tok_s.value(self.x[key]))
                for key in self._keys
            )
        return self._total

    def _power_slope_w(self, observation: Observation, site: str, model: str) -> float:
        """``pue_s n_i P_i'(x_i)``: the site's power per unit log2 batch of the model (W)."""
        n = self._replicas(observation, site, model)
        return self.context.sites[site].pue * n * float(self.curves[(site, model)].power_w.slope(self.x[(site, model)]))

    def voltage_slope(self, observation: Observation, site: str, model: str) -> np.ndarray:
        """``dv/dx_i`` over the zone (pu per unit log2 batch) at the present ``x_i``."""
        return self._site_response(observation, site, self._sens) * self._power_slope_w(observation, site, model)

    def loading_slope(self, observation: Observation, site: str, model: str) -> np.ndarray:
        """``dL/dx_i`` of the constrained branches (% per unit log2 batch) at the present ``x_i``."""
        return self._site_response(observation, site, self._loading_sens) * self._power_slope_w(
            observation, site, model
        )

    def _site_response(self, observation: Observation, site: str, sens: SensitivityCache) -> np.ndarray:
        """``H_s e_s`` (or ``G_s e_s``: per W of site power) from ``sens``, the same for every model of
        the site: kept for the observation and step it was computed at."""
        key = (id(observation), self._steps)
        cached = self._responses.get((id(sens), site))
        if cached is not None and cached[0] == key:
            return cached[2]
        response = sens.get(observation, site, self._steps) @ phase_share(observation.datacenters.get(site))
        self._responses[(id(sens), site)] = (key, observation, response)  # the observation keeps its id unique
        return response

    def gradient(self, observation: Observation, site: str, model: str) -> float:
        """``g_i``: gradient of the Lagrangian with respect to ``x_i`` (per unit log2 batch)."""
        return self._derivatives(observation, site, model)[0]

    def curvature(self, observation: Observation, site: str, model: str) -> float:
        """``h_i``: ``dg_i/dx_i`` at the present prices (per unit log2 batch squared)."""
        return self._derivatives(observation, site, model)[1]

    def _derivatives(self, observation: Observation, site: str, model: str) -> tuple[float, float]:
        """``(g_i, h_i)``: the gradient and its derivative in ``x_i``, term by term alike; the present
        violation terms count through their Gauss-Newton part (``kappa |dv/dx_i|^2`` over the
        violated rows)."""
        cfg = self.config
        key = (site, model)
        info = self.context.sites[site].models[model]
        c = self.curves[key]
        x = self.x[key]
        g = h = 0.0
        if cfg.throughput_objective == "log_per_model":
            scale = float(c.throughput_tok_s.value(x))
        else:
            n = self._replicas(observation, site, model)
            scale = self._total_throughput(observation) / n if n > 0 else 0.0
        if scale > 0 and math.isfinite(scale):
            t_rel = float(c.throughput_tok_s.slope(x)) / scale
            g -= cfg.throughput_weight * t_rel
            h -= cfg.throughput_weight * (float(c.throughput_tok_s.curvature(x)) / scale - t_rel * t_rel)
        if self._eta is None:
            eta = self.lam_over - self.lam_under + cfg.voltage_proportional_gain * (self._over - self._under)
            self._eta = (eta, bool(np.any(eta != 0.0)))
        eta, priced = self._eta
        if priced:
            dv = self.voltage_slope(observation, site, model)
            bend = self._power_bend(x, key)
            violated = (self._over > 0.0) | (self._under > 0.0)
            g += cfg.voltage_weight_per_pu2 * float(eta @ dv)
            h += cfg.voltage_weight_per_pu2 * (
                bend * float(eta @ dv) + cfg.voltage_proportional_gain * float(dv[violated] @ dv[violated])
            )
        if self._zeta is None:
            zeta = self.nu + cfg.thermal_proportional_gain * self._overload
            self._zeta = (zeta, bool(np.any(zeta != 0.0)))
        zeta, loaded = self._zeta
        if loaded:
            dl = self.loading_slope(observation, site, model) / cfg.max_loading_pct
            over = dl[self._overload > 0.0]
            g += cfg.thermal_weight * float(zeta @ dl)
            h += cfg.thermal_weight * (
                self._power_bend(x, key) * float(zeta @ dl) + cfg.thermal_proportional_gain * float(over @ over)
            )
        if info.itl_deadline_s is not None:
            miss = c.miss_fraction if cfg.latency_gradient == "miss_fraction" else None
            if miss is not None:
                g += self.mu[key] * float(miss.slope(x)) / cfg.miss_fraction_target
                h += self.mu[key] * float(miss.curvature(x)) / cfg.miss_fraction_target
            else:
                g += self.mu[key] * float(c.itl_s.slope(x)) / info.itl_deadline_s
                h += self.mu[key] * float(c.itl_s.curvature(x)) / info.itl_deadline_s
        g += cfg.switching_weight * (x - self._x_prev[key])
        h += cfg.switching_weight
        return g, h

    def _power_bend(self, x: float, key: tuple[str, str]) -> float:
        """``P_i''(x_i) / P_i'(x_i)``: a price's slope term times this is its own derivative in
        ``x_i`` (``dv/dx_i`` and ``dL/dx_i`` scale with ``P_i'``); 0 where the power is flat."""
        power = self.curves[key].power_w
        slope = float(power.slope(x))
        return float(power.curvature(x)) / slope if slope != 0.0 else 0.0

    def primal_move(self, g: float, h: float) -> float:
        """The change of ``x_i`` for gradient ``g`` and curvature ``h``: ``-rho_x g``, shortened to the
        Newton step ``-g / h`` where ``rho_x h > 1`` and bounded by ``r dt`` (see the module docstring)."""
        cfg = self.config
        move = -g / max(1.0 / cfg.primal_step, h)
        if cfg.max_batch_rate_log2_per_s is None:
            return move
        bound = cfg.max_batch_rate_log2_per_s * self.context.dt_s
        return min(max(move, -bound), bound)

    def _beyond_hysteresis(self, x: float, batch: int, in_force: int) -> bool:
        """Whether ``x`` is nearer to ``log2(batch)`` than to ``log2(in_force)`` by more than the
        hysteresis: on a limit that lies between two batch sizes, the integral action otherwise
        switches between them every few steps."""
        h = self.config.batch_hysteresis
        return h == 0 or abs(x - math.log2(in_force)) - abs(x - math.log2(batch)) > h

    def actuators(self) -> tuple[Actuator, ...]:
        return model_actuators("batch_size", self._keys)

    def step(self, observation: Observation) -> list[Command]:
        self.update_duals(observation)
        derivatives = {key: self._derivatives(observation, *key) for key in self._keys}
        out: list[Command] = []
        for key, (g, h) in derivatives.items():
            site, model = key
            info = self.context.sites[site].models[model]
            x_new = min(max(self.x[key] + self.primal_move(g, h), self.curves[key].x_min), self._x_hi[key])
            self._x_prev[key] = self.x[key]
            self.x[key] = x_new
            b = project_batch(x_new, info.batch_sizes)
            if (
                b != self._sent[key]
                and self._beyond_hysteresis(x_new, b, self._sent[key])
                and self._budget.allows(key, observation.t_s)
            ):
                self._sent[key] = b
                self._budget.spend(key, observation.t_s)
                out.append(SetBatchSize(site=site, model=model, batch_size=b))
        self._steps += 1
        return out
