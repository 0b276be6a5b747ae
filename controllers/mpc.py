r"""Receding-horizon (model predictive) control of batch sizes, and optionally a battery.

At each control step the controller plans ``N = horizon_steps`` steps ahead on a model built from
the present measurement, sends the first step and discards the rest.

Prediction model (linearized grid, fitted curves), for step ``k = 1..N``::

    v_k = v_0 + k T r + sum_i S_i (P_i(x_ik) - P_i(x_i0)) - S_b p_k

``v_0``: measured zone voltages; ``x_i0 = log2`` of the batch in force; ``S_i = H_s e_s pue_s n_i``
(pu per W of model ``i``'s per-replica power, with ``H_s`` the site's sensitivity, ``e_s`` its phase
shares, ``n_i`` active replicas); ``P_i`` the fitted per-replica GPU power; ``r`` an estimate of the
uncontrolled voltage drift (pu/s, filtered, weighted by ``trend_weight``; 0 = constant
disturbance); ``p_k`` battery discharge (W) with ``S_b = H_s 1/3`` (battery at the site's bus).

Optimization over ``x_ik`` (continuous log2 batch) and ``p_k``::

    min  sum_k [ sum_j ( w_1 ([v_lo - v_jk]_+ + [v_jk - v_hi]_+) + w_v ([v_lo - v_jk]_+^2 + [v_jk - v_hi]_+^2) )
                 - w_T sum_i log T_i(x_ik)
                 + w_s sum_i (x_ik - x_i,k-1)^2 + w_b (p_k / p_max)^2 ]
    s.t. log2 b_i^min <= x_ik <= xbar_i            (xbar_i: largest x with  c_i l_i(x) <= g_i d_i)
         |x_ik - x_i,k-1| <= max_move_log2         (move limits; they make the horizon matter)
         |p_k| <= p_max

with ``v_lo = v_min + margin_pu``, ``v_hi = v_max - margin_pu``, and ``c_i`` a filtered ratio of the
measured to the fitted ITL at the batch in force (so a latency model error is corrected by
feedback). The constraint reads ``c_i l_i(x) <= g_i d_i`` with a guard ``g_i`` = ``latency_guard``;
with ``miss_fraction_target = eps`` each guard integrates the measured deadline-miss fraction
``m_i``: ``g_i <- clip(g_i - a (m_i / eps - 1), 0.05, latency_guard)`` (a chance constraint on the
ITL tail, which the mean-ITL curve does not see).

Solvers: ``solver="lbfgsb"`` (default) solves the continuous problem with scipy's L-BFGS-B
(analytic gradient; move limits as a stiff penalty), ``solver="slsqp"`` with SLSQP (move limits as
linear constraints; exact, but 20-30x slower here). Both then project the first step onto the
measured sizes: every floor/ceil combination of the models (``2^M`` candidates, within the latency
bound and the move limit) is scored with the rest of the plan fixed, and the best one is improved
by single-model moves to neighbouring sizes until none lowers the cost. ``solver="enumerate"``
searches every combination of measured sizes held constant over the horizon (exact for that
move-blocked problem; ``prod_i |B_i|`` candidates, for small cases).

Tuning on ieee13 (``scenarios/ieee13_mpc.yaml``): ``N = 5`` steps of 1 s; ``w_v = 1e6`` and
``w_1 = 1e4`` so that violation costs dominate the log-throughput term (``w_T = 1``) until the
violation is below ~1e-4 pu, and the linear part keeps pushing while any violation remains (the
integral metric is linear); ``max_move_log2 = 6`` lets it go from 512 to 8 in one step when a
load step arrives; ``trend_weight = 1`` with ``trend_filter = 0.5`` feeds the measured voltage
drift forward over the horizon (it anticipates the training ramp); ``miss_fraction_target = 0.05``
as for OFO.
"""

from __future__ import annotations

import itertools
import math
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from openg2g.controllers._base import ConfiguredController, ControllerConfig
from openg2g.controllers._sites import active_replicas, phase_share
from openg2g.controllers._voltage import SensitivityCache
from openg2g.controllers.curves import ModelCurves, project_batch
from openg2g.core.commands import Command, SetBatchSize, SetStoragePower
from openg2g.core.errors import ControllerError
from openg2g.core.interfaces import ControlContext
from openg2g.core.state import Observation

__all__ = ["MPCController", "MPCProblem", "MPCStorage"]

_MOVE_PENALTY = 1.0
"""Weight of the soft move-limit penalty (per (log2 batch)^2 beyond the limit) relative to w_v."""


class MPCStorage(BaseModel):
    """A battery the MPC may dispatch; it sits at ``site``'s bus."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="Battery name (grid.storage[].name).")
    site: str = Field(description="Site whose bus the battery is connected to.")
    p_max_kw: float = Field(gt=0, description="Largest |P| the MPC may ask for (kW), within the rating.")


class MPCProblem:
    """The horizon problem for one control step; evaluates cost and gradient.

    :param v0: zone voltages now (pu), shape ``(J,)``.
    :param drift: predicted drift per step (pu), shape ``(J,)``: ``v`` gains ``k * drift`` at step ``k``.
    :param sens: ``S_i`` per model, shape ``(M, J)`` (pu per W of per-replica power).
    :param curves: fitted curves per model.
    :param x0: log2 batch in force per model, shape ``(M,)``.
    :param storage_sens: ``S_b``, shape ``(J,)`` (pu per W discharged), or None.
    """

    def __init__(
        self,
        *,
        v0: np.ndarray,
        drift: np.ndarray,
        sens: np.ndarray,
        curves: list[ModelCurves],
        x0: np.ndarray,
        horizon: int,
        v_lo: float,
        v_hi: float,
        w_v: float,
        w_t: float,
        w_s: float,
        w_1: float = 0.0,
        storage_sens: np.ndarray | None = None,
        p_max_w: float = 0.0,
        w_b: float = 0.0,
        move_limit: float = np.inf,
        w_move: float = 0.0,
    ) -> None:
        self.v0, self.drift, self.sens, self.curves, self.x0 = v0, drift, sens, curves, x0
        self.n, self.m = horizon, len(curves)
        self.v_lo, self.v_hi, self.w_v, self.w_t, self.w_s, self.w_1 = v_lo, v_hi, w_v, w_t, w_s, w_1
        self.storage_sens = storage_sens
        self.p_max_w, self.w_b = p_max_w, w_b
        self.move_limit, self.w_move = move_limit, w_move
        self.p_now = np.array([float(c.power_w.value(x)) for c, x in zip(curves, x0)])

    @property
    def has_storage(self) -> bool:
        return self.storage_sens is not None and self.p_max_w > 0

    def split(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Decision vector -> ``(X (M, N), p (N,) in W)``."""
        x = z[: self.m * self.n].reshape(self.m, self.n)
        p = z[self.m * self.n :] * self.p_max_w if self.has_storage else np.zeros(self.n)
        return x, p

    def cost(self, z: np.ndarray, *, with_grad: bool = True) -> tuple[float, np.ndarray]:
        """Cost ``J(z)`` and its gradient (storage entries are in units of ``p_max``)."""
        x, p = self.split(z)
        pw = np.empty_like(x)
        dpw = np.empty_like(x)
        th = np.empty_like(x)
        dth = np.empty_like(x)
        for i, c in enumerate(self.curves):
            pw[i] = c.power_w.value(x[i])
            dpw[i] = c.power_w.slope(x[i])
            th[i] = c.throughput_tok_s.value(x[i])
            dth[i] = c.throughput_tok_s.slope(x[i])
        k = np.arange(1, self.n + 1)
        v = self.v0[:, None] + self.drift[:, None] * k[None, :] + self.sens.T @ (pw - self.p_now[:, None])
        if self.storage_sens is not None and self.has_storage:
            v = v - self.storage_sens[:, None] * p[None, :]
        under = np.maximum(self.v_lo - v, 0.0)
        over = np.maximum(v - self.v_hi, 0.0)
        xprev = np.concatenate([self.x0[:, None], x[:, :-1]], axis=1)
        dx = x - xprev
        cost = (
            self.w_v * float(np.sum(under**2) + np.sum(over**2))
            + self.w_1 * float(np.sum(under) + np.sum(over))
            - self.w_t * float(np.sum(np.log(np.maximum(th, 1e-9))))
            + self.w_s * float(np.sum(dx**2))
        )
        excess = np.maximum(np.abs(dx) - self.move_limit, 0.0) if self.w_move > 0 else None
        if excess is not None:
            cost += self.w_move * float(np.sum(excess**2))
        if self.has_storage:
            cost += self.w_b * float(np.sum((p / self.p_max_w) ** 2))
        if not with_grad:
            return cost, np.empty(0)
        dj_dv = self.w_v * 2.0 * (over - under) + self.w_1 * ((over > 0).astype(float) - (under > 0))  # (J, N)
        gx = (self.sens @ dj_dv) * dpw - self.w_t * dth / np.maximum(th, 1e-9)
        gs = 2.0 * self.w_s * dx
        if excess is not None:
            gs = gs + 2.0 * self.w_move * excess * np.sign(dx)
        gx += gs
        gx[:, :-1] -= gs[:, 1:]
        grad = gx.ravel()
        if self.has_storage:
            gp = -(self.storage_sens @ dj_dv) * self.p_max_w + 2.0 * self.w_b * p / self.p_max_w
            grad = np.concatenate([grad, gp])
        return cost, grad


class MPCController(ConfiguredController):
    """Receding-horizon batch-size (and battery) control on the linearized grid."""

    name = "mpc"

    class Config(ControllerConfig):
        """Parameters of :class:`MPCController` (symbols as in the module docstring)."""

        sites: list[str] | None = Field(None, description="Sites to control; None = all.")
        buses: list[str] | None = Field(None, description="Zone buses whose limits count; None = all monitored.")
        horizon_steps: int = Field(5, gt=0, le=50, description="N: steps planned ahead (control periods).")
        voltage_weight: float = Field(1.0e6, ge=0, description="w_v: cost per pu^2 of violation per bus-phase-step.")
        voltage_weight_linear: float = Field(
            1.0e4,
            ge=0,
            description="w_1: cost per pu of violation per bus-phase-step (targets the violation integral).",
        )
        throughput_weight: float = Field(1.0, ge=0, description="w_T: weight of log throughput per model-step.")
        switching_weight: float = Field(0.02, ge=0, description="w_s: cost per (log2 batch)^2 of change.")
        margin_pu: float = Field(0.002, ge=0, description="Aim this far inside the voltage limits (pu).")
        max_move_log2: float = Field(1.0, gt=0, description="Largest change of log2 batch per step.")
        latency_guard: float = Field(1.0, gt=0, description="Plan ITL up to this fraction of the deadline.")
        latency_correction_filter: float = Field(
            0.9, ge=0, lt=1, description="Low-pass factor of the measured/fitted ITL correction (0 = none kept)."
        )
        miss_fraction_target: float | None = Field(
            None, gt=0, lt=1, description="eps: adapt each model's guard so its deadline-miss fraction stays <= eps."
        )
        miss_adapt_gain: float = Field(0.01, ge=0, description="Guard change per step per unit (m/eps - 1).")
        trend_weight: float = Field(0.0, ge=0, le=1, description="Weight of the estimated voltage drift (0 = off).")
        trend_filter: float = Field(0.9, ge=0, lt=1, description="Low-pass factor of the drift estimate.")
        solver: Literal["lbfgsb", "slsqp", "enumerate"] = Field(
            "lbfgsb", description="Continuous L-BFGS-B or SLSQP, then rounding; or exhaustive enumeration."
        )
        max_iterations: int = Field(100, gt=0, description="SLSQP iteration limit.")
        storage: MPCStorage | None = Field(None, description="Battery to dispatch alongside the batch sizes.")
        storage_weight: float = Field(0.1, ge=0, description="w_b: cost of battery use per (p/p_max)^2 per step.")
        storage_resolution_kw: float = Field(1.0, ge=0, description="Smallest battery change worth a command (kW).")
        sensitivity_every_steps: int = Field(1, gt=0, description="Refresh the grid sensitivity every N steps.")

    config: Config

    def reset(self, context: ControlContext, seed: int) -> None:
        super().reset(context, seed)
        cfg = self.config
        if cfg.storage is not None:
            if cfg.storage.name not in context.storages:
                raise ControllerError(f"mpc: unknown storage {cfg.storage.name!r}; valid: {list(context.storages)}")
            if cfg.storage.site not in context.sites:
                raise ControllerError(f"mpc: storage site {cfg.storage.site!r} unknown; valid: {list(context.sites)}")
        self._keys = [(s, m) for s in self._sites for m in context.sites[s].models]
        self.curves = [ModelCurves.from_model_info(context.sites[s].models[m]) for s, m in self._keys]
        self._sent = {key: context.sites[key[0]].models[key[1]].initial_batch_size for key in self._keys}
        self._itl_ratio = np.ones(len(self._keys))
        self._guard = np.full(len(self._keys), cfg.latency_guard)
        self._sens = SensitivityCache(self._zone, cfg.sensitivity_every_steps)
        self._steps = 0
        self._v_prev: np.ndarray | None = None
        self._own_prev: np.ndarray | None = None
        self._drift = np.zeros(self._zone.size)
        self._p_sent_kw: float | None = None
        self.last_plan: np.ndarray | None = None

    # -- model pieces --------------------------------------------------------------------------

    def _x_now(self, observation: Observation) -> np.ndarray:
        x = []
        for site, model in self._keys:
            dc = observation.datacenters.get(site)
            state = dc.models.get(model) if dc is not None else None
            b = state.batch_size if state is not None else self._sent[(site, model)]
            x.append(math.log2(max(b, 1)))
        return np.array(x)

    def _latency_bounds(self, observation: Observation, x_now: np.ndarray) -> np.ndarray:
        """``xbar_i``: the largest log2 batch whose corrected ITL meets ``latency_guard`` x deadline."""
        cfg = self.config
        ub = np.empty(len(self._keys))
        for i, ((site, model), c) in enumerate(zip(self._keys, self.curves)):
            info = self.context.sites[site].models[model]
            dc = observation.datacenters.get(site)
            state = dc.models.get(model) if dc is not None else None
            if state is not None and state.replicas > 0 and math.isfinite(state.itl_s) and state.itl_s > 0:
                fitted = float(c.itl_s.value(x_now[i]))
                if fitted > 0:
                    a = cfg.latency_correction_filter
                    self._itl_ratio[i] = a * self._itl_ratio[i] + (1 - a) * state.itl_s / fitted
            if info.itl_deadline_s is None:
                ub[i] = c.x_max
                continue
            if cfg.miss_fraction_target is not None and state is not None and state.replicas > 0:
                excess = state.deadline_miss_fraction / cfg.miss_fraction_target - 1.0
                self._guard[i] = float(np.clip(self._guard[i] - cfg.miss_adapt_gain * excess, 0.05, cfg.latency_guard))
            grid = np.linspace(c.x_min, c.x_max, 241)
            ok = self._itl_ratio[i] * np.asarray(c.itl_s.value(grid)) <= self._guard[i] * info.itl_deadline_s
            if not ok[0]:
                ub[i] = c.x_min
            else:
                first_bad = np.argmin(ok) if not ok.all() else len(ok)
                ub[i] = grid[first_bad - 1]
        return ub

    def problem(self, observation: Observation) -> tuple[MPCProblem, np.ndarray, np.ndarray]:
        """The horizon problem at this step, the log2 batches in force and the latency bounds."""
        cfg = self.config
        x_now = self._x_now(observation)
        v0 = np.asarray(observation.grid.v_pu, dtype=float)[self._zone]
        sens = np.zeros((len(self._keys), self._zone.size))
        for i, (site, model) in enumerate(self._keys):
            info = self.context.sites[site].models[model]
            dc = observation.datacenters.get(site)
            n = active_replicas(dc, model, info.replicas)
            h = self._sens.get(observation, site, self._steps)
            sens[i] = h @ phase_share(dc) * self.context.sites[site].pue * n
        storage_sens = None
        p_max_w = 0.0
        if cfg.storage is not None:
            h = self._sens.get(observation, cfg.storage.site, self._steps)
            storage_sens = h @ np.full(3, 1.0 / 3.0)
            p_max_w = cfg.storage.p_max_kw * 1e3
        # drift: measured change not explained by our own batch changes, low-pass filtered
        own = sens.T @ np.array([float(c.power_w.value(x)) for c, x in zip(self.curves, x_now)])
        if self._v_prev is not None and self._own_prev is not None and cfg.trend_weight > 0:
            unexplained = (v0 - self._v_prev) - (own - self._own_prev)
            a = cfg.trend_filter
            self._drift = a * self._drift + (1 - a) * unexplained
        self._v_prev, self._own_prev = v0, own
        ub = self._latency_bounds(observation, x_now)
        prob = MPCProblem(
            v0=v0,
            drift=cfg.trend_weight * self._drift,
            sens=sens,
            curves=self.curves,
            x0=x_now,
            horizon=cfg.horizon_steps,
            v_lo=observation.v_min_pu + cfg.margin_pu,
            v_hi=observation.v_max_pu - cfg.margin_pu,
            w_v=cfg.voltage_weight,
            w_t=cfg.throughput_weight,
            w_s=cfg.switching_weight,
            w_1=cfg.voltage_weight_linear,
            storage_sens=storage_sens,
            p_max_w=p_max_w,
            w_b=cfg.storage_weight,
        )
        return prob, x_now, ub

    # -- solvers -------------------------------------------------------------------------------

    def _batch_grid(self, i: int) -> list[int]:
        site, model = self._keys[i]
        return sorted(self.context.sites[site].models[model].batch_sizes)

    def _allowed(self, i: int, ub: float, x_now: float) -> list[int]:
        """Measured sizes within the latency bound and one move of ``x_now`` (never empty)."""
        sizes = self._batch_grid(i)
        tol = 1e-9
        ok = [
            b
            for b in sizes
            if math.log2(b) <= ub + tol and abs(math.log2(b) - x_now) <= self.config.max_move_log2 + tol
        ]
        if ok:
            return ok
        # nothing reachable meets both: take the reachable size closest to the latency bound from below
        reach = [b for b in sizes if abs(math.log2(b) - x_now) <= self.config.max_move_log2 + tol] or sizes
        return [min(reach, key=lambda b: (max(math.log2(b) - ub, 0.0), -b))]

    def solve(self, prob: MPCProblem, x_now: np.ndarray, ub: np.ndarray) -> tuple[list[int], float]:
        """First-step batch sizes and battery power (W) minimizing the horizon cost."""
        if self.config.solver == "enumerate":
            return self._solve_enumerate(prob, x_now, ub)
        return self._solve_continuous(prob, x_now, ub)

    def _solve_enumerate(self, prob: MPCProblem, x_now: np.ndarray, ub: np.ndarray) -> tuple[list[int], float]:
        choices = [self._allowed(i, ub[i], x_now[i]) for i in range(prob.m)]
        best: tuple[float, tuple[int, ...]] | None = None
        for combo in itertools.product(*choices):
            x = np.repeat(np.log2(np.array(combo, dtype=float))[:, None], prob.n, axis=1)
            z = self._with_storage(prob, x, None)
            j = prob.cost(z, with_grad=False)[0]
            if best is None or j < best[0] - 1e-12:
                best = (j, combo)
        assert best is not None
        chosen = list(best[1])
        p = 0.0
        if prob.has_storage:
            x = np.repeat(np.log2(np.array(chosen, dtype=float))[:, None], prob.n, axis=1)
            p = self._optimize_storage(prob, x)
        return chosen, p

    def _with_storage(self, prob: MPCProblem, x: np.ndarray, p_units: np.ndarray | None) -> np.ndarray:
        z = x.ravel()
        if prob.has_storage:
            z = np.concatenate([z, np.zeros(prob.n) if p_units is None else p_units])
        return z

    def _optimize_storage(self, prob: MPCProblem, x: np.ndarray) -> float:
        """Battery plan for fixed batches (bounded L-BFGS-B); returns the first-step power (W)."""
        from scipy.optimize import minimize  # 0.3 s to import: only when an MPC solves

        m_n = prob.m * prob.n

        def f(pu: np.ndarray) -> tuple[float, np.ndarray]:
            j, g = prob.cost(np.concatenate([x.ravel(), pu]))
            return j, g[m_n:]

        res = minimize(f, np.zeros(prob.n), jac=True, method="L-BFGS-B", bounds=[(-1.0, 1.0)] * prob.n)
        return float(res.x[0]) * prob.p_max_w

    def _solve_continuous(self, prob: MPCProblem, x_now: np.ndarray, ub: np.ndarray) -> tuple[list[int], float]:
        from scipy.optimize import minimize  # 0.3 s to import: only when an MPC solves

        cfg = self.config
        m, n = prob.m, prob.n
        lo = np.array([c.x_min for c in self.curves])
        hi = np.maximum(ub, lo)
        start = np.clip(x_now, lo, hi)
        if self.last_plan is not None and self.last_plan.shape == (m, n):
            x_init = np.concatenate([self.last_plan[:, 1:], self.last_plan[:, -1:]], axis=1)
        else:
            x_init = np.repeat(start[:, None], n, axis=1)
        x_init = np.clip(x_init, lo[:, None], hi[:, None])
        bounds = [(lo[i], hi[i]) for i in range(m) for _ in range(n)]
        if prob.has_storage:
            bounds += [(-1.0, 1.0)] * n
        # move limits as linear inequalities  d - (x_k - x_{k-1}) >= 0  and  d + (x_k - x_{k-1}) >= 0
        nz = m * n + (n if prob.has_storage else 0)
        rows, rhs = [], []
        for i in range(m):
            for k in range(n):
                r = np.zeros(nz)
                r[i * n + k] = 1.0
                if k > 0:
                    r[i * n + k - 1] = -1.0
                    b = 0.0
                else:
                    b = x_now[i]
                rows.append(r)
                rhs.append(b)
        a_mat, b_vec = np.array(rows), np.array(rhs)
        d = cfg.max_move_log2
        z0 = self._with_storage(prob, x_init, None)
        if cfg.solver == "slsqp":
            cons = [
                {"type": "ineq", "fun": lambda z: d - (a_mat @ z - b_vec), "jac": lambda z: -a_mat},
                {"type": "ineq", "fun": lambda z: d + (a_mat @ z - b_vec), "jac": lambda z: a_mat},
            ]
            res = minimize(
                lambda z: prob.cost(z),
                z0,
                jac=True,
                method="SLSQP",
                bounds=bounds,
                constraints=cons,
                options={"maxiter": cfg.max_iterations, "ftol": 1e-10},
            )
        else:  # move limits as a stiff penalty; the first step is made exact by the projection below
            prob.move_limit, prob.w_move = d, _MOVE_PENALTY * max(prob.w_v, 1.0)
            res = minimize(
                lambda z: prob.cost(z),
                z0,
                jac=True,
                method="L-BFGS-B",
                bounds=bounds,
                options={"maxiter": cfg.max_iterations},
            )
            prob.w_move = 0.0
        z = res.x if np.all(np.isfinite(res.x)) else z0
        x_plan, _ = prob.split(z)
        x_plan = np.clip(x_plan, lo[:, None], hi[:, None])
        self.last_plan = x_plan.copy()
        p_units = z[m * n :] if prob.has_storage else None
        chosen = self._project_first_step(prob, x_plan, p_units, x_now, ub)
        p_w = float(p_units[0]) * prob.p_max_w if p_units is not None else 0.0
        return chosen, p_w


    def _project_first_step(
        self, prob: MPCProblem, x_plan: np.ndarray, p_units: np.ndarray | None, x_now: np.ndarray, ub: np.ndarray
    ) -> list[int]:
        """The batch sizes of the plan's first step on the measured grid: the best floor/ceil
        combination with the rest of the plan fixed, then a local search around it."""
        m = prob.m
        options = []
        for i in range(m):
            allowed = self._allowed(i, ub[i], x_now[i])
            below = [b for b in allowed if math.log2(b) <= x_plan[i, 0] + 1e-9]
            above = [b for b in allowed if math.log2(b) >= x_plan[i, 0] - 1e-9]
            cand = {max(below)} if below else set()
            cand |= {min(above)} if above else set()
            options.append(sorted(cand) or [project_batch(x_plan[i, 0], allowed)])
        best: tuple[float, tuple[int, ...]] | None = None
        for combo in itertools.product(*options):
            x = x_plan.copy()
            x[:, 0] = np.log2(np.array(combo, dtype=float))
            j = prob.cost(self._with_storage(prob, x, p_units), with_grad=False)[0]
            if best is None or j < best[0] - 1e-12:
                best = (j, combo)
        assert best is not None
        return self._local_search(
            prob, x_plan, p_units, list(best[1]), best[0], [self._allowed(i, ub[i], x_now[i]) for i in range(m)]
        )

    def _local_search(
        self,
        prob: MPCProblem,
        x_plan: np.ndarray,
        p_units: np.ndarray | None,
        combo: list[int],
        cost: float,
        allowed: list[list[int]],
    ) -> list[int]:
        """Improve a rounded first step by single-model moves to neighbouring sizes until none helps."""
        improved = True
        while improved:
            improved = False
            for i in range(prob.m):
                j_idx = allowed[i].index(combo[i]) if combo[i] in allowed[i] else None
                if j_idx is None:
                    continue
                for nb in (j_idx - 1, j_idx + 1):
                    if not 0 <= nb < len(allowed[i]):
                        continue
                    trial = list(combo)
                    trial[i] = allowed[i][nb]
                    x = x_plan.copy()
                    x[:, 0] = np.log2(np.array(trial, dtype=float))
                    j = prob.cost(self._with_storage(prob, x, p_units), with_grad=False)[0]
                    if j < cost - 1e-12:
                        combo, cost, improved = trial, j, True
        return combo

    # -- step ----------------------------------------------------------------------------------

    def step(self, observation: Observation) -> list[Command]:
        prob, x_now, ub = self.problem(observation)
        batches, p_w = self.solve(prob, x_now, ub)
        self._steps += 1
        out: list[Command] = []
        for (site, model), b in zip(self._keys, batches):
            if b != self._sent[(site, model)]:
                self._sent[(site, model)] = b
                out.append(SetBatchSize(site=site, model=model, batch_size=int(b)))
        st = self.config.storage
        if st is not None:
            p_kw = float(np.clip(p_w / 1e3, -st.p_max_kw, st.p_max_kw))
            if self._p_sent_kw is None or abs(p_kw - self._p_sent_kw) > self.config.storage_resolution_kw:
                self._p_sent_kw = p_kw
                out.append(SetStoragePower(name=st.name, p_w=p_kw * 1000.0))
        return out
