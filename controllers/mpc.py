r"""Receding-horizon (model predictive) control of batch sizes with a forecast of known changes.

At each control step the controller predicts the zone's voltages ``N = horizon_steps`` steps
ahead for every choice of batch sizes it may make now, picks the choice of least expected cost,
sends it, and plans again at the next step (move blocking: one decision, held over the horizon).

**Prediction**, for step ``k = 1..N`` (times ``t_k = t + k dt``) and monitored bus-phase ``j``::

    v_jk = vbar_j + f_jk + sum_s g_sj a_k dW_s(b)          a_k = 1 - exp(-k dt / tau)
    dW_s(b) = pue_s sum_{i at s} n_i (P_i(b_i) - p_i)       (W of the site's GPU power)

``g_s = H_s e_s`` is the site's voltage sensitivity (pu per W of site power: the grid's dV/dP
``H_s`` times the measured phase shares ``e_s``, as OFO uses it); ``P_i(b)`` the trace library's
mean per-replica power at batch ``b``, ``p_i`` the observed one (so a transition still under way
is predicted to finish) and ``n_i`` the active replicas; ``tau = response_time_s`` the site's
power response to a batch change (replicas blend into a new batch over ~1 s when it grows and
over the requests' residual time, several seconds, when it shrinks). ``vbar`` is the measured
voltage with the training job's deviation from its level taken out
(``vbar = v - g_s pue (p_train - L_s)``), and ``f_jk`` the known changes of
:mod:`controllers._forecast`: the training level ``L_s(t_k)`` (the announced mean before the job
starts, then followed online; 0 after it ends) and scheduled tap changes. What remains unknown
is the training job's swing around its level and the rest of the feeder: a Gaussian error with
standard deviation ``sigma_jk = sqrt(sum_s (g_sj pue S_s(t_k))^2 + sigma_0^2)``, ``S_s`` the
training spread (:class:`controllers._forecast.TrainingEstimate`), ``sigma_0 = voltage_noise_pu``.

**Problem** over one batch ``b_i`` per model, from the measured sizes ``B_i`` that meet the latency
constraint and lie within ``max_move_log2`` of the batch in force::

    min  w_v dt (1/N) sum_k sum_j ( E[v_lo - v_jk - e]_+ + E[v_jk + e - v_hi]_+ )
         - w_T sum_i n_i T_i(b_i) / T_ref  +  w_s #{i: b_i != b_i^now}
    s.t. b_i in B_i,   c_i l_i(b_i) <= g_i d_i

``E[d - e]_+ = d Phi(d / sigma) + sigma phi(d / sigma)`` is the expected violation (pu) of a
bus-phase whose predicted distance outside the limit is ``d``: it is what the violation integral
counts, so the cost weighs the integral's expectation against throughput (``T_ref``: the fleet's
tokens/s at the initial batches; ``w_T = 1`` prices 1% of it like ``0.01 / (w_v dt)`` pu.s of
violation per step). It is convex in each ``v_jk``, and so in ``dW``. The latency constraint is
the one of OFO's chance constraint: ``c_i`` a filtered ratio of the measured to the library's ITL
at the batch in force, and with ``miss_fraction_target = eps`` each guard ``g_i`` integrates the
measured deadline-miss fraction ``m_i``: ``g_i <- clip(g_i - a min(m_i / eps - 1, 1), 0.05, latency_guard)``.
An over-voltage is the one violation larger batches fight; with ``overvoltage_miss_fraction``
the target is that larger value while the zone is above ``v_max`` and the model's run so far
(token-weighted, as ``summary.json`` counts) is within ``miss_fraction_budget`` (``B > eps``): the
run's miss budget, unspent while batches sat low or at ``eps < B``, goes where it lowers the violation.

**Thermal limits** (``thermal: true``, off by default): the constrained branches' loading
(``thermal_branches``, all when not given; % of the normal rating) is predicted like the voltages,
``L_bk = L_b + f^L_bk + sum_s gl_sb a_k dW_s`` with ``gl_s = G_s e_s`` from the grid's exact
``d(loading)/dP`` (``observation.loading_sensitivity``) and ``f^L`` the training level's shift,
and the cost gains ``w_L dt (1/N) sum_k sum_b [L_bk - L_max]_+`` (``w_L = overload_weight``, per
%.s of overload, the unit of ``summary.json``'s ``overload_integral_pct_s``). It is convex in
``dW`` too, so the exact solver below stays exact (:class:`controllers._thermal.LoadingForecast`).

**Exact solver.** The choices are enumerated (``prod_i |B_i|`` combinations, vectorized). With one
site the violation term is a convex function ``F`` of the scalar ``dW``: its continuous minimizer
``W*`` is bracketed by golden section in ``[a, b]``; left of ``a`` ``F`` falls as ``dW`` grows, so a
combination is beaten by any other with ``dW`` between it and ``a`` and at least its throughput
value (and symmetrically right of ``b``). Only the combinations in ``[a, b]`` and the undominated
ones outside (two staircases, typically a few dozen) are scored exactly, and the best is the exact
optimum over the enumeration. With several sites every combination is scored while that stays
cheap; beyond, block coordinate descent over the sites, each site's batches solved exactly with
the others held (a block-wise optimum, not always the global one). Beyond ``max_combinations``
the solver is coordinate descent over one model at a time (not exact; for large fleets).

Tuning on ieee13 (``scenarios/ieee13_fixedtap_mpc.yaml``, ``scenarios/ieee13_mpc.yaml``): ``N = 8``
steps of 1 s with ``tau = 3 s`` (a cut shows within the horizon); ``w_v = 1000`` (1% of the fleet's
throughput is worth 0.036 pu.s over an hour: raising it to 3000 changed the fixed-tap hour by
under 1%, the violation left being the training job's swings beyond what the batches reach);
``max_move_log2 = 6`` (the whole range in one step: with 2, Qwen3-235B stayed at 512, where its
power is flat down to 64, and the fixed-tap hour kept 0.36 instead of 0.21 pu.s);
``miss_fraction_target = 0.04``; on the tap schedule ``overvoltage_miss_fraction = 0.15`` with
``miss_fraction_budget = 0.048`` (6.09 instead of 6.84 pu.s: the late over-voltage is what larger
batches fight, and the 4% target leaves budget to spend there). One solve takes ~1-2 ms on ieee13
(16,807 combinations pruned to a few dozen).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

import numpy as np
from pydantic import Field

from openg2g.controllers._base import ConfiguredController
from openg2g.controllers._forecast import TrainingEstimate, scheduled_tap_shift
from openg2g.controllers._sites import active_replicas, phase_share
from openg2g.controllers._thermal import (
    LoadingForecast,
    LoadingSensitivityCache,
    ThermalParams,
    branch_loading,
    thermal_rows,
)
from openg2g.controllers._voltage import SensitivityCache
from openg2g.core.commands import Command, SetBatchSize
from openg2g.core.interfaces import ControlContext
from openg2g.core.state import Observation

__all__ = ["MPCController", "MPCProblem", "ModelOptions", "expected_shortfall"]

_MAX_SCORED = 200_000
"""With several sites, score every combination while combinations x bus-phases x steps stays below this."""

_NEGLIGIBLE_SIGMAS = 8.0
"""A bus-phase farther than this many sigmas inside both limits at every step adds < 1e-16 sigma."""


def expected_shortfall(d: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    """``E[d - e]_+`` for ``e ~ N(0, sigma^2)`` (elementwise; ``sigma > 0``), in the units of ``d``."""
    from scipy.special import ndtr  # 0.3 s to import: only when an MPC solves

    z = d / sigma
    return d * ndtr(z) + sigma * np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)


@functools.lru_cache(maxsize=64)
def _combinations(sizes: tuple[int, ...]) -> np.ndarray:
    """Every index combination for option counts ``sizes``, shape ``(prod(sizes), len(sizes))``:
    the same few shapes recur at every step, so they are built once."""
    grids = np.meshgrid(*[np.arange(n) for n in sizes], indexing="ij")
    out = np.stack([g.ravel() for g in grids], axis=1)
    out.flags.writeable = False
    return out


@dataclass(frozen=True)
class ModelOptions:
    """The batch sizes one model may take at this step and what each brings.

    :param site: index of the model's site in :attr:`MPCProblem.gain`.
    :param batches: allowed batch sizes.
    :param dw_w: change of the site's power if the model moves to each size (W).
    :param value: throughput value minus switching cost of each size (cost units).
    """

    site: int
    batches: np.ndarray
    dw_w: np.ndarray
    value: np.ndarray


@dataclass(frozen=True)
class MPCProblem:
    """The horizon problem of one control step (symbols as in the module docstring).

    :param base: predicted voltages with no batch change, ``vbar + f``, shape ``(J, N)`` (pu).
    :param sigma: error standard deviation, shape ``(J, N)`` (pu, > 0).
    :param gain: ``g_sj a_k``, shape ``(S, J, N)`` (pu per W of site power).
    :param options: one entry per model.
    :param v_lo: lower limit aimed at (pu).
    :param v_hi: upper limit aimed at (pu).
    :param violation_weight: ``w_v dt / N`` (cost per pu of expected violation per bus-phase-step).
    :param thermal: the constrained branches' loading forecast, ``None`` without thermal limits.
    """

    base: np.ndarray
    sigma: np.ndarray
    gain: np.ndarray
    options: tuple[ModelOptions, ...]
    v_lo: float
    v_hi: float
    violation_weight: float
    thermal: LoadingForecast | None = None

    def shifted(self, dv_pu: np.ndarray) -> MPCProblem:
        """The same problem with every step's voltages shifted by ``dv_pu`` (shape ``(J,)``)."""
        return replace(self, base=self.base + dv_pu[:, None])

    def _dw(self, choice: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Site power changes ``(C, S)`` and values ``(C,)`` of choices ``(C, M)`` (option indices)."""
        dw = np.zeros((choice.shape[0], self.gain.shape[0]))
        value = np.zeros(choice.shape[0])
        for i, opt in enumerate(self.options):
            dw[:, opt.site] += opt.dw_w[choice[:, i]]
            value += opt.value[choice[:, i]]
        return dw, value

    def violation(self, dw: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """Violation cost of site power changes ``dw`` (shape ``(C, S)``), over bus-phases ``rows``."""
        base, sigma, gain = (self.base, self.sigma, self.gain) if rows is None else self._rows(rows)
        v = base[None] + np.einsum("cs,sjn->cjn", dw, gain)
        e = expected_shortfall(self.v_lo - v, sigma[None]) + expected_shortfall(v - self.v_hi, sigma[None])
        cost = self.violation_weight * e.sum(axis=(1, 2))
        return cost if self.thermal is None else cost + self.thermal.cost(dw)

    def cost(self, choice: np.ndarray) -> np.ndarray:
        """Total cost of choices ``(C, M)`` (option indices per model)."""
        dw, value = self._dw(np.atleast_2d(choice))
        return self.violation(dw) - value

    def _rows(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.base[rows], self.sigma[rows], self.gain[:, rows]

    def relevant_rows(self) -> np.ndarray:
        """Bus-phases that can come within ``_NEGLIGIBLE_SIGMAS`` of a limit for some choice."""
        lo = np.zeros(self.gain.shape[0])
        hi = np.zeros(self.gain.shape[0])
        for opt in self.options:
            lo[opt.site] += opt.dw_w.min()
            hi[opt.site] += opt.dw_w.max()
        g = self.gain
        v_min = self.base + np.einsum("s,sjn->jn", lo, np.maximum(g, 0)) + np.einsum("s,sjn->jn", hi, np.minimum(g, 0))
        v_max = self.base + np.einsum("s,sjn->jn", hi, np.maximum(g, 0)) + np.einsum("s,sjn->jn", lo, np.minimum(g, 0))
        reach = _NEGLIGIBLE_SIGMAS * self.sigma
        near = (v_min - self.v_lo < reach) | (self.v_hi - v_max < reach)
        return np.flatnonzero(near.any(axis=1))

    def n_combinations(self) -> int:
        return math.prod(opt.batches.size for opt in self.options)

    def enumerate(self) -> np.ndarray:
        """Every combination of option indices, shape ``(C, M)`` (read-only)."""
        return _combinations(tuple(opt.batches.size for opt in self.options))

    def solve(self, max_combinations: int) -> np.ndarray:
        """Option index per model minimizing :meth:`cost`: exact with one site (up to
        ``max_combinations``) and with several sites while scoring every combination is affordable
        (:data:`_MAX_SCORED`), else a block-wise optimum over the sites."""
        if self.n_combinations() > max_combinations:
            return self._coordinate_descent()
        rows = self.relevant_rows()
        n_sites = self.gain.shape[0]
        if n_sites > 1 and self.n_combinations() * rows.size * self.base.shape[1] > _MAX_SCORED:
            return self._site_descent()
        choice = self.enumerate()
        dw, value = self._dw(choice)
        if rows.size == 0 and self.thermal is None:
            return choice[int(np.argmax(value))]
        if n_sites == 1:
            keep = self._undominated(dw[:, 0], value, rows)
            choice, dw, value = choice[keep], dw[keep], value[keep]
        return choice[int(np.argmin(self.violation(dw, rows) - value))]

    def _site_descent(self) -> np.ndarray:
        """Block coordinate descent over the sites: each site's models solved exactly (one-site
        problem, the other sites' changes held) until no site changes (a block-wise optimum)."""
        choice = np.array([int(np.argmin(np.abs(opt.dw_w))) for opt in self.options])
        best = float(self.cost(choice)[0])
        sites = sorted({opt.site for opt in self.options})
        for _ in range(len(sites) * len(self.options) + 1):
            improved = False
            for s in sites:
                mine = [i for i, opt in enumerate(self.options) if opt.site == s]
                dw, _ = self._dw(choice[None])
                dw[0, s] = 0.0
                sub = MPCProblem(
                    base=self.base + np.einsum("s,sjn->jn", dw[0], self.gain),
                    sigma=self.sigma,
                    gain=self.gain[s : s + 1],
                    options=tuple(replace(self.options[i], site=0) for i in mine),
                    v_lo=self.v_lo,
                    v_hi=self.v_hi,
                    violation_weight=self.violation_weight,
                    thermal=None if self.thermal is None else self.thermal.held(dw[0], s),
                )
                trial = choice.copy()
                trial[mine] = sub.solve(_MAX_SCORED)
                j = float(self.cost(trial)[0])
                if j < best - 1e-12:
                    choice, best, improved = trial, j, True
            if not improved:
                break
        return choice

    def _undominated(self, w: np.ndarray, value: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Indices of the single-site combinations no other beats (see the module docstring)."""
        a, b = self._minimizer_bracket(float(w.min()), float(w.max()), rows)
        order = np.argsort(w, kind="stable")
        w_sorted = w[order]
        lo, hi = np.searchsorted(w_sorted, a, side="left"), np.searchsorted(w_sorted, b, side="right")
        keep = [order[lo:hi]]  # the minimizer lies in [a, b]: keep every combination there
        for idx in (order[:lo][::-1], order[hi:]):  # from the bracket outward, left then right
            if idx.size:
                best_before = np.maximum.accumulate(np.concatenate([[-np.inf], value[idx][:-1]]))
                keep.append(idx[value[idx] > best_before])
        return np.concatenate(keep)

    def _minimizer_bracket(self, lo: float, hi: float, rows: np.ndarray, iterations: int = 14) -> tuple[float, float]:
        """An interval ``[a, b]`` (W) holding a minimizer of the convex single-site violation cost
        over ``[lo, hi]``: golden section, ``iterations`` shrinks by 0.618."""
        r = (math.sqrt(5.0) - 1.0) / 2.0
        a, b = lo, hi
        c, d = b - r * (b - a), a + r * (b - a)
        fc, fd = self.violation(np.array([[c]]), rows)[0], self.violation(np.array([[d]]), rows)[0]
        for _ in range(iterations):
            if fc <= fd:  # a minimizer lies in [a, d]
                b, d, fd = d, c, fc
                c = b - r * (b - a)
                fc = self.violation(np.array([[c]]), rows)[0]
            else:  # in [c, b]
                a, c, fc = c, d, fd
                d = a + r * (b - a)
                fd = self.violation(np.array([[d]]), rows)[0]
        return a, b

    def _coordinate_descent(self) -> np.ndarray:
        """One model at a time, every option, until no move lowers the cost (a local optimum)."""
        choice = np.array([int(np.argmin(np.abs(opt.dw_w))) for opt in self.options])
        best = float(self.cost(choice)[0])
        improved = True
        while improved:
            improved = False
            for i, opt in enumerate(self.options):
                trials = np.repeat(choice[None], opt.batches.size, axis=0)
                trials[:, i] = np.arange(opt.batches.size)
                costs = self.cost(trials)
                j = int(np.argmin(costs))
                if costs[j] < best - 1e-12:
                    choice, best, improved = trials[j], float(costs[j]), True
        return choice


class MPCController(ConfiguredController):
    """Receding-horizon batch-size control: expected violation against throughput, exact over the
    measured batch sizes, with a forecast of announced training jobs and scheduled taps."""

    name = "mpc"

    class Config(ThermalParams):
        """Parameters of :class:`MPCController` (symbols as in the module docstring; the thermal
        limit's ``thermal``, ``thermal_branches`` and ``max_loading_pct`` from :class:`ThermalParams`)."""

        sites: list[str] | None = Field(None, description="Sites to control; None = all.")
        buses: list[str] | None = Field(None, description="Zone buses whose limits count; None = all monitored.")
        horizon_steps: int = Field(8, gt=0, le=60, description="N: steps predicted ahead (control periods).")
        response_time_s: float = Field(3.0, gt=0, description="tau: time constant of the power response (s).")
        violation_weight: float = Field(
            1000.0, ge=0, description="w_v: cost per pu.s of expected violation summed over bus-phases."
        )
        throughput_weight: float = Field(1.0, ge=0, description="w_T: cost per unit of the fleet's throughput.")
        switching_weight: float = Field(1e-4, ge=0, description="w_s: cost per batch change.")
        margin_pu: float = Field(0.0, ge=0, description="Aim this far inside the voltage limits (pu).")
        voltage_noise_pu: float = Field(
            5e-4, gt=0, description="sigma_0: standard deviation of the voltage error besides training (pu)."
        )
        noise_filter_s: float = Field(
            60.0, gt=0, description="Time constant of the training level and spread estimates (s)."
        )
        max_move_log2: float = Field(
            6.0, gt=0, description="Largest change of log2 batch per step (6: 8 <-> 512 in one step)."
        )
        latency_guard: float = Field(1.0, gt=0, description="Plan ITL up to this fraction of the deadline.")
        latency_correction_filter: float = Field(
            0.9, ge=0, lt=1, description="Low-pass factor of the measured/library ITL correction (0 = none kept)."
        )
        miss_fraction_target: float | None = Field(
            None,
            gt=0,
            lt=1,
            description="eps: adapt each model's guard so its deadline-miss fraction stays <= eps.",
        )
        miss_adapt_gain: float = Field(0.01, ge=0, description="Guard change per step per unit (m/eps - 1).")
        overvoltage_miss_fraction: float | None = Field(
            None,
            gt=0,
            lt=1,
            description=(
                "eps_over: the guard's target while the zone is above v_max (larger batches lower it), as long "
                "as the model's deadline-miss fraction over the run so far is below the budget; None = eps throughout."
            ),
        )
        miss_fraction_budget: float | None = Field(
            None,
            gt=0,
            lt=1,
            description="B: the run-level deadline-miss fraction that ends the over-voltage relief; None = eps.",
        )
        max_combinations: int = Field(
            50_000, gt=0, description="Enumerate up to this many batch combinations; beyond, coordinate descent."
        )
        sensitivity_every_steps: int = Field(1, gt=0, description="Refresh the grid sensitivity every N steps.")
        overload_weight: float = Field(
            10.0, ge=0, description="w_L: cost per %.s of overload summed over the constrained branches."
        )

    config: Config

    def reset(self, context: ControlContext, seed: int) -> None:
        super().reset(context, seed)
        cfg = self.config
        self._keys = [(s, m) for s in self._sites for m in context.sites[s].models]
        self._infos = [context.sites[s].models[m] for s, m in self._keys]
        self._site_of = np.array([self._sites.index(s) for s, _ in self._keys])
        self._sent = {key: info.initial_batch_size for key, info in zip(self._keys, self._infos)}
        self._itl_ratio = np.ones(len(self._keys))
        self._guard = np.full(len(self._keys), cfg.latency_guard)
        self._tokens = np.zeros(len(self._keys))  # token rates summed over control steps (tok/s)
        self._missed = np.zeros(len(self._keys))  # the same, times the deadline-miss fraction
        self._sens = SensitivityCache(self._zone, cfg.sensitivity_every_steps)
        alpha = 1.0 - math.exp(-context.dt_s / cfg.noise_filter_s)
        self._training = {
            s: TrainingEstimate(t, alpha) for s in self._sites if (t := context.sites[s].training) is not None
        }
        self._zone_names = [context.bus_phases[j] for j in self._zone]
        self._t_ref = sum(
            info.replicas * info.throughput_tok_s[info.batch_sizes.index(info.initial_batch_size)]
            for info in self._infos
        )
        rows = thermal_rows(context, cfg.thermal_branches, controller=self.name) if cfg.thermal else None
        self._loading_sens = None if rows is None else LoadingSensitivityCache(rows, cfg.sensitivity_every_steps)
        self._steps = 0
        self.last_problem: MPCProblem | None = None

    # -- model pieces --------------------------------------------------------------------------

    def _latency_ok(self, observation: Observation) -> list[np.ndarray]:
        """Per model, which measured sizes meet the corrected ITL bound (updates ratio and guard)."""
        cfg = self.config
        v = np.asarray(observation.grid.v_pu, dtype=float)[self._zone]
        over = bool(np.any(v > observation.v_max_pu))
        out = []
        for i, ((site, model), info) in enumerate(zip(self._keys, self._infos)):
            itl = np.asarray(info.itl_s, dtype=float)
            dc = observation.datacenters.get(site)
            state = dc.models.get(model) if dc is not None else None
            if state is not None and state.replicas > 0 and math.isfinite(state.itl_s) and state.itl_s > 0:
                lib = itl[info.batch_sizes.index(state.batch_size)] if state.batch_size in info.batch_sizes else 0.0
                if lib > 0 and math.isfinite(lib):
                    a = cfg.latency_correction_filter
                    self._itl_ratio[i] = a * self._itl_ratio[i] + (1 - a) * state.itl_s / lib
                if cfg.miss_fraction_target is not None and info.itl_deadline_s is not None:
                    if math.isfinite(state.throughput_tok_s) and state.throughput_tok_s > 0:
                        self._tokens[i] += state.throughput_tok_s
                        self._missed[i] += state.throughput_tok_s * state.deadline_miss_fraction
                    # saturated as OFO's latency dual: a burst of misses must not collapse the guard
                    excess = min(state.deadline_miss_fraction / self._miss_target(i, over) - 1.0, 1.0)
                    g = self._guard[i] - cfg.miss_adapt_gain * excess
                    self._guard[i] = float(np.clip(g, 0.05, cfg.latency_guard))
            if info.itl_deadline_s is None:
                out.append(np.ones(itl.size, dtype=bool))
            else:
                out.append(self._itl_ratio[i] * itl <= self._guard[i] * info.itl_deadline_s)
        return out

    def _miss_target(self, i: int, over: bool) -> float:
        """The guard's target for model ``i`` this step: ``eps``, or ``eps_over`` during an over-voltage
        while the model's run so far is within the budget (token-weighted, as ``summary.json`` counts)."""
        cfg = self.config
        eps = float(cfg.miss_fraction_target or 0.0)
        budget = eps if cfg.miss_fraction_budget is None else cfg.miss_fraction_budget
        relief = cfg.overvoltage_miss_fraction
        if relief is None or not over or self._missed[i] >= budget * self._tokens[i]:
            return eps
        return relief

    def _options(self, observation: Observation, latency_ok: list[np.ndarray]) -> tuple[ModelOptions, ...]:
        cfg = self.config
        tol = 1e-9
        out = []
        for i, ((site, model), info) in enumerate(zip(self._keys, self._infos)):
            dc = observation.datacenters.get(site)
            state = dc.models.get(model) if dc is not None else None
            b_now = state.batch_size if state is not None else self._sent[(site, model)]
            sizes = np.asarray(info.batch_sizes)
            power = np.asarray(info.power_w, dtype=float)
            reach = np.abs(np.log2(sizes) - math.log2(b_now)) <= cfg.max_move_log2 + tol
            ok = reach & latency_ok[i]
            if not ok.any():  # nothing reachable meets the bound: the smallest reachable size
                ok = np.zeros(sizes.size, dtype=bool)
                ok[np.flatnonzero(reach)[0] if reach.any() else 0] = True
            n = active_replicas(dc, model, info.replicas)
            if state is not None and state.replicas > 0 and math.isfinite(state.power_w):
                p_now = state.power_w / state.replicas
            else:
                p_now = power[info.batch_sizes.index(b_now)] if b_now in info.batch_sizes else float(power.mean())
            pue = self.context.sites[site].pue
            value = cfg.throughput_weight * n * np.asarray(info.throughput_tok_s, dtype=float) / self._t_ref
            value = value - cfg.switching_weight * (sizes != b_now)
            out.append(
                ModelOptions(
                    site=int(self._site_of[i]),
                    batches=sizes[ok],
                    dw_w=pue * n * (power[ok] - p_now),
                    value=value[ok],
                )
            )
        return tuple(out)

    def problem(self, observation: Observation) -> MPCProblem:
        """The horizon problem at this step (updates the training and latency estimates)."""
        cfg = self.config
        dt = self.context.dt_s
        n = cfg.horizon_steps
        k = np.arange(1, n + 1)
        times = observation.t_s + k * dt
        a_k = 1.0 - np.exp(-k * dt / cfg.response_time_s)
        v = np.asarray(observation.grid.v_pu, dtype=float)[self._zone]
        base = np.repeat(v[:, None], n, axis=1)
        var = np.full_like(base, cfg.voltage_noise_pu**2)
        gain = np.empty((len(self._sites), self._zone.size, n))
        for s, site in enumerate(self._sites):
            dc = observation.datacenters.get(site)
            g = self._sens.get(observation, site, self._steps) @ phase_share(dc)
            gain[s] = g[:, None] * a_k[None, :]
            est = self._training.get(site)
            if est is None:
                continue
            pue = self.context.sites[site].pue
            p_train = dc.training_power_w if dc is not None else 0.0
            est.observe(observation.t_s, p_train)
            # the job's swing around its level is noise, not the state to plan from
            base += (g * pue)[:, None] * (est.level(times) - p_train)[None, :]
            var += ((g * pue)[:, None] * est.spread(times)[None, :]) ** 2
        base += scheduled_tap_shift(
            self.context, self._zone_names, dict(observation.grid.taps), observation.t_s, times
        )
        prob = MPCProblem(
            base=base,
            sigma=np.sqrt(var),
            gain=gain,
            options=self._options(observation, self._latency_ok(observation)),
            v_lo=observation.v_min_pu + cfg.margin_pu,
            v_hi=observation.v_max_pu - cfg.margin_pu,
            violation_weight=cfg.violation_weight * dt / n,
            thermal=self._loading_forecast(observation, a_k, times),
        )
        self.last_problem = prob
        return prob

    def _loading_forecast(self, observation: Observation, a_k: np.ndarray, times: np.ndarray) -> LoadingForecast | None:
        """The constrained branches' loading over the horizon (module docstring), None without
        thermal limits; the training estimates are those :meth:`problem` has just updated."""
        if self._loading_sens is None:
            return None
        cfg = self.config
        rows = self._loading_sens.zone
        now = np.nan_to_num(branch_loading(observation, rows))  # a step without results: no overload seen
        base = np.repeat(now[:, None], a_k.size, axis=1)
        gain = np.empty((len(self._sites), rows.size, a_k.size))
        for s, site in enumerate(self._sites):
            dc = observation.datacenters.get(site)
            g = self._loading_sens.get(observation, site, self._steps) @ phase_share(dc)
            gain[s] = g[:, None] * a_k[None, :]
            est = self._training.get(site)
            if est is not None:
                p_train = dc.training_power_w if dc is not None else 0.0
                base += (g * self.context.sites[site].pue)[:, None] * (est.level(times) - p_train)[None, :]
        weight = cfg.overload_weight * self.context.dt_s / a_k.size
        return LoadingForecast(base, gain, cfg.max_loading_pct, weight)

    def batch_commands(self, prob: MPCProblem, choice: np.ndarray) -> list[Command]:
        """``SetBatchSize`` for every model whose chosen size differs from the one last sent."""
        out: list[Command] = []
        for (site, model), opt, j in zip(self._keys, prob.options, choice):
            b = int(opt.batches[j])
            if b != self._sent[(site, model)]:
                self._sent[(site, model)] = b
                out.append(SetBatchSize(site=site, model=model, batch_size=b))
        return out

    def step(self, observation: Observation) -> list[Command]:
        prob = self.problem(observation)
        choice = prob.solve(self.config.max_combinations)
        self._steps += 1
        return self.batch_commands(prob, choice)

