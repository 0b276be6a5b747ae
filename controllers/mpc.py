r"""Receding-horizon (model predictive) control of batch sizes with a forecast of known changes.

At each control step the controller predicts the zone's voltages ``N = horizon_steps`` steps
ahead for every choice of batch sizes it may make now, picks the choice of least expected cost,
sends it, and plans again at the next step (move blocking: one decision, held over the horizon).

**Prediction**, for step ``k = 1..N`` (times ``t_k = t + k dt``) and monitored bus-phase ``j``::

    v_jk = vbar_j + f_jk + sum_i g_{s(i)j} a_ik dW_i(b_i)        dW_i(b) = pue_s n_i (P_i(b) - p_i)

``g_s = H_s e_s`` is the site's voltage sensitivity (pu per W of site power: the grid's dV/dP
``H_s`` times the measured phase shares ``e_s``, as OFO uses it); ``P_i(b)`` the trace library's
mean per-replica power at batch ``b``, ``p_i`` the observed one (so a transition still under way
is predicted to finish) and ``n_i`` the active replicas. ``a_ik = 1 - exp(-k dt / tau)`` is how
far the power has moved by step ``k``, and ``tau`` depends on the move, as the servers' queues
make it: a larger batch fills within ``tau_up = rise_time_s`` (queued requests are admitted in a
few decode iterations); a smaller one waits for the running requests to drain,
``tau_i = R_i l_i(b_now)``: the residual decode tokens ``R_i`` of a request times the ITL of the
batch in force; keeping the batch lets a transition under way finish at its own pace (a cut's,
at the ITL of the batch it left, or ``tau_up`` after a fill). ``R_i`` starts at ``drain_tokens``
and is learned per model from the decay the controller observes
(:class:`openg2g.controllers._response.DrainTime`): 1-30 s on the bundled models. So a swap of power
from one model to another (one batch up, another cut) dips the voltage while the cut drains (on
ieee34 a single 3 s response for all moves hid such dips, which made most of the under-voltage
at 852.a). ``vbar`` is the measured voltage with the training job's deviation from its level taken
out (``vbar = v - g_s pue (p_train - L_s)``), and ``f_jk`` the known changes of
:mod:`openg2g.controllers._forecast`: the training level ``L_s(t_k)`` (the announced mean before the job
starts, then followed online; 0 after it ends) and scheduled tap changes. What remains unknown
is the training job's swing around its level and the rest of the feeder: a Gaussian error with
standard deviation ``sigma_jk = sqrt(sum_s (g_sj pue S_s(t_k))^2 + sigma_0^2)``, ``S_s`` the
training spread (:class:`openg2g.controllers._forecast.TrainingEstimate`), ``sigma_0 = voltage_noise_pu``.

**Problem** over one batch ``b_i`` per model, from the measured sizes ``B_i`` that meet the latency
constraint and lie within ``max_move_log2`` of the batch in force::

    min  w_v dt (1/N) sum_k sum_j ( E[v_lo - v_jk - e]_+ + E[v_jk + e - v_hi]_+ )
         - w_T sum_i n_i Tbar_i(b_i) / T_ref  +  w_s #{i: b_i != b_i^now}
    s.t. b_i in B_i,   c_i l_i(b_i) <= g_i d_i          Tbar_i(b) = t_i + (T_i(b) - t_i) (1/N) sum_k a_ik

``E[d - e]_+ = d Phi(d / sigma) + sigma phi(d / sigma)`` is the expected violation (pu) of a
bus-phase whose predicted distance outside the limit is ``d``: it is what the violation integral
counts, so the cost weighs the integral's expectation against the horizon's throughput (the
token rate follows a batch change as the power does, from the observed ``t_i``: a slow cut saves
power and costs tokens at the same pace; ``T_ref``: the fleet's tokens/s at the initial batches; ``w_T = 1`` prices 1% of it like ``0.01 / (w_v dt)`` pu.s of
violation per step). It is convex in each ``v_jk``. The latency constraint is
the one of OFO's chance constraint: ``c_i`` a filtered ratio of the measured to the library's ITL
at the batch in force, and with ``miss_fraction_target = eps`` each guard ``g_i`` integrates the
measured deadline-miss fraction ``m_i``: ``g_i <- clip(g_i - a min(m_i / eps - 1, 1), 0.05, latency_guard)``.
An over-voltage is the one violation larger batches fight; with ``overvoltage_miss_fraction``
the target is that larger value while the zone is above ``v_max`` and the model's run so far
(token-weighted, as ``summary.json`` counts) is within ``miss_fraction_budget`` (``B > eps``): the
run's miss budget, unspent while batches sat low or at ``eps < B``, goes where it lowers the violation.

**Switching.** Each change costs ``w_s`` (``switching_weight``), and three rules bound how often
a model's batch may change, so a period-2 cycle cannot run however the costs fall: after a change
the model is held ``D = min_dwell_s`` (its one option is the size last sent, which under a command
delay is still in flight), unless a zone voltage is beyond a limit by more than
``dwell_override_pu``, and then only moves that relieve it are added (smaller batches below
``v_min``, larger above ``v_max``); and a model that changed ``K = max_changes_per_min`` times in
the last 60 s is held, emergencies included, until the oldest change is 60 s old, so no model
changes more than ``K`` times in any 60 s (``summary.json``'s ``max_batch_changes_per_min``).
Without them the bundled hours were period-2 cycles: the latency guard integrates the miss
fraction, so a model whose larger size misses more than ``eps`` and whose smaller one misses less
alternated between them every 1-2 s (Llama-3.1-8B 256 <-> 512 on ieee13), and the training
job's swings did the same to Llama-3.1-70B (32 <-> 8), up to 28-45 changes of one model in a
minute. With ``D = 4 s`` and ``K = 8`` (``w_s = 1e-3``: 0.1% of the fleet's throughput for one
step) the fixed-tap hour's violation rose 5% (0.166 -> 0.174 pu.s; 0.172 -> 0.159 with a 2 s
delay) at equal throughput; the guard still alternates a model between two sizes, at the pace
the dwell and the budget allow (``bench/switching.py`` prints the table).

**Thermal limits** (``thermal: true``, off by default): the constrained branches' loading
(``thermal_branches``, all when not given; % of the normal rating) is predicted like the voltages,
``L_bk = L_b + f^L_bk + sum_c gl_cb a_ck dW_c`` over the same response channels ``c`` (fills, cuts,
transitions under way) with ``gl = G_s e_s`` from the grid's exact ``d(loading)/dP``
(``observation.loading_sensitivity``) and ``f^L`` the training level's shift, and the cost gains
``w_L dt (1/N) sum_k sum_b [L_bk - L_max]_+`` (``w_L = overload_weight``, per %.s of overload, the
unit of ``summary.json``'s ``overload_integral_pct_s``). It is non-negative and convex (piecewise
linear) in the channel changes, so the solver below stays exact
(:class:`openg2g.controllers._thermal.LoadingForecast`).

**Exact solver.** The choices are enumerated (``prod_i |B_i|`` combinations, vectorized) and
each is reduced to its inputs ``x``, the power changes that share a response (per site, the fills;
per model, a cut, and the rest of a transition under way: ``S + 2M``); the penalty ``F(x)``, the
violation term plus the overload term, is convex (a sum of expected shortfalls of affine functions
of ``x``, and of positive parts of affine functions). Cutting planes: a tangent plane of ``F`` at
any scored combination (its gradient, or for the overload's kinks a subgradient) bounds ``F`` from
below everywhere, so ``F_lb(x) - value`` bounds every combination's cost; the combination of least
bound is scored exactly and adds its plane, until no bound lies below the best score. Then that
score is the exact optimum over the enumeration (for any number of sites); after ``_MAX_CUTS``
planes the combinations still open are scored one by one. Beyond ``max_combinations`` the solver
is coordinate descent over one model at a time (not exact; for large fleets).

Tuning on ieee13 (``scenarios/ieee13_fixedtap_mpc.yaml``, ``scenarios/ieee13_mpc.yaml``): ``N = 8``
steps of 1 s (a cut of a fast model shows within the horizon) with ``tau_up = 1 s`` (the replay
datacenter's fill time) and ``drain_tokens = 200`` (the bundled Llama models' residual; the Qwen3
models' ~450 are learned within their first cuts); ``w_v = 1000`` (1% of the fleet's
throughput is worth 0.036 pu.s over an hour: raising it to 3000 changed the fixed-tap hour by
under 1%, the violation left being the training job's swings beyond what the batches reach);
``max_move_log2 = 6`` (the whole range in one step: with 2, Qwen3-235B stayed at 512, where its
power is flat down to 64, and the fixed-tap hour kept 0.36 instead of 0.21 pu.s);
``miss_fraction_target = 0.04``; on the tap schedule ``overvoltage_miss_fraction = 0.15`` with
``miss_fraction_budget = 0.048`` (6.09 instead of 6.84 pu.s: the late over-voltage is what larger
batches fight, and the 4% target leaves budget to spend there). One solve takes ~2.4 ms on ieee13
and ~2.1 ms on ieee34 (16,807 combinations, a mean over the fixed-tap hour on a loaded 2-core
machine; most steps need one or two planes).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

import numpy as np
from pydantic import Field

from openg2g.core.commands import Actuator, Command, SetBatchSize
from openg2g.core.interfaces import ControlContext
from openg2g.core.state import Observation

from ._base import ConfiguredController
from ._budget import ChangeBudget
from ._forecast import TrainingEstimate, scheduled_tap_shift
from ._response import DrainTime
from ._sites import active_replicas, model_actuators, phase_share, site_models
from ._thermal import (
    LoadingForecast,
    LoadingSensitivityCache,
    ThermalParams,
    branch_loading,
    thermal_rows,
)
from ._voltage import SensitivityCache

__all__ = ["MPCController", "MPCProblem", "ModelOptions", "expected_shortfall"]

_MAX_CUTS = 40
"""Tangent planes the exact solver adds before it scores the combinations still open one by one."""

_CUT_TOLERANCE = 1e-12
"""A combination whose cost bound is within this of the best score cannot beat it by more."""

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
    :param batch_now: the batch in force: larger sizes respond as fills (the site's rise channel),
        smaller ones as cuts, the batch in force as what remains of a transition under way;
        ``None``: every size responds as a fill.
    """

    site: int
    batches: np.ndarray
    dw_w: np.ndarray
    value: np.ndarray
    batch_now: int | None = None

    def responses(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Masks over ``batches``: fills, cuts, and the batch in force (one true per size)."""
        if self.batch_now is None:
            none = np.zeros(self.batches.size, dtype=bool)
            return ~none, none, none
        return self.batches > self.batch_now, self.batches < self.batch_now, self.batches == self.batch_now


@dataclass(frozen=True)
class MPCProblem:
    """The horizon problem of one control step (symbols as in the module docstring).

    :param base: predicted voltages with no batch change, ``vbar + f``, shape ``(J, N)`` (pu).
    :param sigma: error standard deviation, shape ``(J, N)`` (pu, > 0).
    :param gain: ``g_sj a_k``, shape ``(S, J, N)`` (pu per W of site power, after a larger batch).
    :param options: one entry per model.
    :param v_lo: lower limit aimed at (pu).
    :param v_hi: upper limit aimed at (pu).
    :param violation_weight: ``w_v dt / N`` (cost per pu of expected violation per bus-phase-step).
    :param fall_gain: ``g_sj a'_ik`` for a cut of model ``i``'s batch (at its site ``s``), shape
        ``(M, J, N)``; ``None``: as ``gain`` (falls as fast as rises).
    :param drain_gain: the same for the rest of a cut under way (model ``i`` keeps its batch),
        shape ``(M, J, N)``; ``None``: as ``fall_gain``.
    :param thermal: the constrained branches' loading forecast over the ``S + 2M`` channels,
        ``None`` without thermal limits.
    """

    base: np.ndarray
    sigma: np.ndarray
    gain: np.ndarray
    options: tuple[ModelOptions, ...]
    v_lo: float
    v_hi: float
    violation_weight: float
    fall_gain: np.ndarray | None = None
    drain_gain: np.ndarray | None = None
    thermal: LoadingForecast | None = None

    def shifted(self, dv_pu: np.ndarray) -> MPCProblem:
        """The same problem with every step's voltages shifted by ``dv_pu`` (shape ``(J,)``)."""
        return replace(self, base=self.base + dv_pu[:, None])

    @property
    def channel_gain(self) -> np.ndarray:
        """Gains of the ``S + 2M`` channels (each site's fills, each model's cut, each model's
        transition under way), shape ``(S + 2M, J, N)``."""
        fall = self.gain[[opt.site for opt in self.options]] if self.fall_gain is None else self.fall_gain
        drain = fall if self.drain_gain is None else self.drain_gain
        return np.concatenate([self.gain, fall, drain])

    def _dw(self, choice: np.ndarray) -> np.ndarray:
        """Channel power changes ``(C, S + 2M)`` (W, in the order of :attr:`channel_gain`) of choices
        ``(C, M)`` (option indices)."""
        n_sites, n_models = self.gain.shape[0], len(self.options)
        dw = np.zeros((choice.shape[0], n_sites + 2 * n_models))
        for i, opt in enumerate(self.options):
            fill, cut, stay = opt.responses()
            w = opt.dw_w[choice[:, i]]
            dw[:, opt.site] += np.where(fill[choice[:, i]], w, 0.0)
            dw[:, n_sites + i] = np.where(cut[choice[:, i]], w, 0.0)
            dw[:, n_sites + n_models + i] = np.where(stay[choice[:, i]], w, 0.0)
        return dw

    def _value(self, choice: np.ndarray) -> np.ndarray:
        """Values ``(C,)`` of choices ``(C, M)`` (option indices)."""
        value = np.zeros(choice.shape[0])
        for i, opt in enumerate(self.options):
            value += opt.value[choice[:, i]]
        return value

    def _voltages(self, dw: np.ndarray, rows: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Predicted voltages ``(C, J', N)`` of channel changes ``dw`` with the sigmas and channel gains used."""
        gain = self.channel_gain
        base, sigma = self.base, self.sigma
        if rows is not None:
            base, sigma, gain = base[rows], sigma[rows], gain[:, rows]
        return base[None] + np.einsum("cs,sjn->cjn", dw, gain), sigma[None], gain

    def violation(self, dw: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """Violation cost of channel power changes ``dw`` (shape ``(C, S + 2M)``), over bus-phases ``rows``."""
        v, sigma, _ = self._voltages(dw, rows)
        e = expected_shortfall(self.v_lo - v, sigma) + expected_shortfall(v - self.v_hi, sigma)
        return self.violation_weight * e.sum(axis=(1, 2))

    def penalty(self, dw: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """``F``: :meth:`violation` plus the predicted overload's cost (without thermal limits, the
        violation alone) of channel power changes ``dw`` (shape ``(C, S + 2M)``)."""
        cost = self.violation(dw, rows)
        return cost if self.thermal is None else cost + self.thermal.cost(dw)

    def penalty_slope(self, dw: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """A subgradient of :meth:`penalty` with respect to ``dw`` (shape ``(C, S + 2M)``, cost per W)."""
        slope = self.violation_slope(dw, rows)
        return slope if self.thermal is None else slope + self.thermal.slope(dw)

    def violation_slope(self, dw: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """Gradient of :meth:`violation` with respect to ``dw`` (shape ``(C, S + 2M)``, cost per W):
        ``d E[d - e]_+ / dd = Phi(d / sigma)``."""
        from scipy.special import ndtr

        v, sigma, gain = self._voltages(dw, rows)
        dv = ndtr((v - self.v_hi) / sigma) - ndtr((self.v_lo - v) / sigma)
        return self.violation_weight * np.einsum("cjn,sjn->cs", dv, gain)

    def cost(self, choice: np.ndarray) -> np.ndarray:
        """Total cost of choices ``(C, M)`` (option indices per model)."""
        choice = np.atleast_2d(choice)
        return self.penalty(self._dw(choice)) - self._value(choice)

    def relevant_rows(self) -> np.ndarray:
        """Bus-phases that can come within ``_NEGLIGIBLE_SIGMAS`` of a limit for some choice."""
        n_sites, n_models = self.gain.shape[0], len(self.options)
        lo = np.zeros(n_sites + 2 * n_models)
        hi = np.zeros_like(lo)
        for i, opt in enumerate(self.options):
            for channel, where in zip((opt.site, n_sites + i, n_sites + n_models + i), opt.responses()):
                w = np.where(where, opt.dw_w, 0.0)  # 0: an option of another channel leaves this one
                lo[channel] += w.min()
                hi[channel] += w.max()
        g = self.channel_gain
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
        """Option index per model minimizing :meth:`cost`: exact up to ``max_combinations``
        (cutting planes, see the module docstring), else coordinate descent."""
        if self.n_combinations() > max_combinations:
            return self._coordinate_descent()
        rows = self.relevant_rows()
        choice = self.enumerate()
        value = self._value(choice)
        if rows.size == 0 and self.thermal is None:
            return choice[int(np.argmax(value))]
        return choice[self._cutting_planes(self._dw(choice), value, rows)]

    def _cutting_planes(self, dw: np.ndarray, value: np.ndarray, rows: np.ndarray) -> int:
        """Index of the least-cost combination: tangent planes of the convex penalty bound every
        combination's cost from below; the combination of least bound is scored exactly and adds
        its plane, until no bound is below the best score; the few left open are scored exactly."""
        bound = np.full(value.size, -np.inf)
        best, best_cost = int(np.argmax(value)), np.inf
        trial = best
        for _ in range(_MAX_CUTS):
            x = dw[trial : trial + 1]
            f = float(self.penalty(x, rows)[0])
            if f - value[trial] < best_cost:
                best, best_cost = trial, f - value[trial]
            plane = f + (dw - x) @ self.penalty_slope(x, rows)[0]
            bound = np.maximum(bound, plane - value)
            trial = int(np.argmin(bound))
            if bound[trial] >= best_cost - _CUT_TOLERANCE:
                return best
        open_ = np.flatnonzero(bound < best_cost - _CUT_TOLERANCE)
        costs = self.penalty(dw[open_], rows) - value[open_]
        j = int(np.argmin(costs))
        return int(open_[j]) if costs[j] < best_cost else best

    def _coordinate_descent(self) -> np.ndarray:
        """One model at a time, every option, until no move lowers the cost (a local optimum); the
        violation is summed over the bus-phases that can come near a limit (:meth:`relevant_rows`),
        as the exact solver does."""
        rows = self.relevant_rows()

        def cost(choice: np.ndarray) -> np.ndarray:
            choice = np.atleast_2d(choice)
            return self.penalty(self._dw(choice), rows) - self._value(choice)

        choice = np.array([int(np.argmin(np.abs(opt.dw_w))) for opt in self.options])
        best = float(cost(choice)[0])
        improved = True
        while improved:
            improved = False
            for i, opt in enumerate(self.options):
                trials = np.repeat(choice[None], opt.batches.size, axis=0)
                trials[:, i] = np.arange(opt.batches.size)
                costs = cost(trials)
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
        rise_time_s: float = Field(
            1.0, gt=0, description="tau_up: time constant of the power response to larger batches (s)."
        )
        drain_tokens: float = Field(
            200.0,
            gt=0,
            description=(
                "Prior residual decode tokens per request: a cut drains with tau_down = tokens x ITL of the batch "
                "in force (s), the tokens then learned per model from the observed decay."
            ),
        )
        drain_learning_rate: float = Field(
            0.2, gt=0, le=1, description="Weight of one observed decay interval in the learned drain tokens."
        )
        violation_weight: float = Field(
            1000.0, ge=0, description="w_v: cost per pu.s of expected violation summed over bus-phases."
        )
        throughput_weight: float = Field(1.0, ge=0, description="w_T: cost per unit of the fleet's throughput.")
        switching_weight: float = Field(
            1e-3,
            ge=0,
            description=(
                "w_s: cost per batch change (cost units: 1e-3 is 0.1% of the fleet's throughput for one step)."
            ),
        )
        min_dwell_s: float = Field(
            4.0,
            ge=0,
            description=(
                "D: a model's batch is held at least this long after a change (s) but in an emergency "
                "(dwell_override_pu), so a period-2 cycle takes 2 D at least; 0 = no dwell."
            ),
        )
        max_changes_per_min: int = Field(
            8,
            gt=0,
            description=(
                "K: a model whose batch changed K times in the last 60 s is held until the oldest change is 60 s "
                "old, emergencies included: no model changes more than K times in any 60 s."
            ),
        )
        dwell_override_pu: float = Field(
            0.005,
            ge=0,
            description=(
                "Emergency: while a zone voltage is beyond a limit by more than this (pu), a held model may "
                "move in the direction that relieves it (smaller batches below v_min, larger above v_max)."
            ),
        )
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
        self._keys = site_models(context, self._sites)
        self._infos = [context.sites[s].models[m] for s, m in self._keys]
        self._site_of = np.array([self._sites.index(s) for s, _ in self._keys])
        self._sent = {key: info.initial_batch_size for key, info in zip(self._keys, self._infos)}
        self._itl_ratio = np.ones(len(self._keys))
        self._guard = np.full(len(self._keys), cfg.latency_guard)
        self._tokens = np.zeros(len(self._keys))  # token rates summed over control steps (tok/s)
        self._missed = np.zeros(len(self._keys))  # the same, times the deadline-miss fraction
        self._sens = SensitivityCache(self._zone, cfg.sensitivity_every_steps)
        self._drain = [DrainTime(cfg.drain_tokens, cfg.drain_learning_rate, cfg.rise_time_s) for _ in self._keys]
        self._p_now = np.full(len(self._keys), np.nan)  # replica power at this step (W)
        self._b_now = np.array([info.initial_batch_size for info in self._infos])  # batch in force
        self._n_now = np.zeros(len(self._keys))  # active replicas
        self._t_now = np.full(len(self._keys), np.nan)  # replica token rate at this step (tok/s)
        self._dev_cut = np.full(len(self._keys), np.nan)  # p - P(batch in force) at the last cut (W)
        self._t_cut = np.full(len(self._keys), np.nan)  # time of the last cut (s)
        self._t_sent = np.full(len(self._keys), -np.inf)  # time of the last change sent (s)
        self._budget = ChangeBudget(self.config.max_changes_per_min)  # changes sent in the last 60 s
        self._t_obs_s = 0.0  # time of the observation being planned from (s)
        self._cut_itl = np.full(len(self._keys), np.nan)  # library ITL the last cut drains at; NaN: no cut
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

    def _relief(self, v_pu: np.ndarray, observation: Observation) -> tuple[bool, bool]:
        """Whether a model held by the dwell may cut (a zone voltage more than ``dwell_override_pu``
        below ``v_min``) and fill (as far above ``v_max``): only the moves that relieve the violation."""
        margin = self.config.dwell_override_pu
        finite = v_pu[np.isfinite(v_pu)]
        if not finite.size:
            return False, False
        return bool(finite.min() < observation.v_min_pu - margin), bool(finite.max() > observation.v_max_pu + margin)

    def _observe_models(self, observation: Observation) -> None:
        """Each model's batch in force, active replicas and replica power and throughput this step."""
        self._t_obs_s = observation.t_s
        for i, ((site, model), info) in enumerate(zip(self._keys, self._infos)):
            dc = observation.datacenters.get(site)
            state = dc.models.get(model) if dc is not None else None
            b_now = state.batch_size if state is not None else self._sent[(site, model)]
            self._b_now[i] = b_now
            self._n_now[i] = active_replicas(dc, model, info.replicas)
            measured = state is not None and state.replicas > 0
            p = state.power_w / state.replicas if measured and state is not None else math.nan
            t = state.throughput_tok_s / state.replicas if measured and state is not None else math.nan
            # unmeasured: the library's means at the batch in force
            self._p_now[i] = p if math.isfinite(p) else self._library(i, "power_w", b_now)
            self._t_now[i] = t if math.isfinite(t) else self._library(i, "throughput_tok_s", b_now)

    def _options(
        self, latency_ok: list[np.ndarray], progress: np.ndarray, relief: tuple[bool, bool]
    ) -> tuple[ModelOptions, ...]:
        """Each model's allowed sizes with their power changes and values; ``progress`` (shape
        ``(3, M)``): the horizon's mean of the fill, cut and under-way responses (the token rate
        follows a batch change as the power does, so a slow cut also costs its tokens slowly);
        ``relief``: whether a held model may cut and fill (:meth:`_relief`)."""
        cfg = self.config
        tol = 1e-9
        out = []
        for i, ((site, model), info) in enumerate(zip(self._keys, self._infos)):
            b_now, n, t_now = int(self._b_now[i]), self._n_now[i], self._t_now[i]
            sizes = np.asarray(info.batch_sizes)
            reach = np.abs(np.log2(sizes) - math.log2(b_now)) <= cfg.max_move_log2 + tol
            ok = reach & latency_ok[i]
            if not ok.any():  # nothing reachable meets the bound: the smallest reachable size
                ok = np.zeros(sizes.size, dtype=bool)
                ok[np.flatnonzero(reach)[0] if reach.any() else 0] = True
            sent = self._sent[(site, model)]
            if not self._budget.allows(i, self._t_obs_s):  # the budget is spent: no exception
                ok = sizes == sent
            elif self._t_obs_s - self._t_sent[i] < cfg.min_dwell_s - tol:
                # held: the size last sent (still in flight under a command delay), or a move that
                # relieves a violation beyond the override margin
                ok &= (relief[0] & (sizes < sent)) | (relief[1] & (sizes > sent))
                ok |= sizes == sent
            batches = sizes[ok]
            share = np.select([batches > b_now, batches < b_now], progress[:2, i], progress[2, i])
            tokens = n * (t_now + (np.asarray(info.throughput_tok_s, dtype=float)[ok] - t_now) * share)
            power = np.asarray(info.power_w, dtype=float)[ok]
            out.append(
                ModelOptions(
                    site=int(self._site_of[i]),
                    batches=batches,
                    dw_w=self.context.sites[site].pue * n * (power - self._p_now[i]),
                    value=cfg.throughput_weight * tokens / self._t_ref - cfg.switching_weight * (batches != b_now),
                    batch_now=b_now,
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
        rise_k = 1.0 - np.exp(-k * dt / cfg.rise_time_s)
        v = np.asarray(observation.grid.v_pu, dtype=float)[self._zone]
        base = np.repeat(v[:, None], n, axis=1)
        var = np.full_like(base, cfg.voltage_noise_pu**2)
        site_g = np.empty((len(self._sites), self._zone.size))
        for s, site in enumerate(self._sites):
            dc = observation.datacenters.get(site)
            g = site_g[s] = self._sens.get(observation, site, self._steps) @ phase_share(dc)
            est = self._training.get(site)
            if est is None:
                continue
            pue = self.context.sites[site].pue
            p_train = dc.training_power_w if dc is not None else 0.0
            est.observe(observation.t_s, p_train)
            # the job's swing around its level is noise, not the state to plan from
            base += (g * pue)[:, None] * (est.level(times) - p_train)[None, :]
            var += ((g * pue)[:, None] * est.spread(times)[None, :]) ** 2
        base += scheduled_tap_shift(self.context, self._zone_names, dict(observation.grid.taps), observation.t_s, times)
        latency_ok = self._latency_ok(observation)
        self._observe_models(observation)
        self._learn_drain()
        relief = self._relief(v, observation)
        fall_k = self._fall_response(k * dt, np.array([self._itl_in_force(i) for i in range(len(self._keys))]))
        # a cut under way drains at the pace of the batch it left; after a fill (or none) power and
        # tokens settle within tau_up
        cutting = np.isfinite(self._cut_itl)
        drain_k = np.where(cutting[:, None], self._fall_response(k * dt, np.where(cutting, self._cut_itl, 0.0)), rise_k)
        progress = np.stack([np.full(len(self._keys), rise_k.mean()), fall_k.mean(axis=1), drain_k.mean(axis=1)])
        options = self._options(latency_ok, progress, relief)
        prob = MPCProblem(
            base=base,
            sigma=np.sqrt(var),
            gain=site_g[:, :, None] * rise_k[None, None, :],
            options=options,
            v_lo=observation.v_min_pu + cfg.margin_pu,
            v_hi=observation.v_max_pu - cfg.margin_pu,
            violation_weight=cfg.violation_weight * dt / n,
            fall_gain=site_g[self._site_of][:, :, None] * fall_k[:, None, :],
            drain_gain=site_g[self._site_of][:, :, None] * drain_k[:, None, :],
            thermal=self._loading_forecast(observation, (rise_k, fall_k, drain_k), times),
        )
        self.last_problem = prob
        return prob

    def _loading_forecast(
        self, observation: Observation, responses: tuple[np.ndarray, np.ndarray, np.ndarray], times: np.ndarray
    ) -> LoadingForecast | None:
        """The constrained branches' loading over the horizon (module docstring), None without
        thermal limits; ``responses``: the fill ``(N,)``, cut ``(M, N)`` and under-way ``(M, N)``
        responses the voltages use; the training estimates are those :meth:`problem` has just updated."""
        if self._loading_sens is None:
            return None
        rise_k, fall_k, drain_k = responses
        rows = self._loading_sens.zone
        now = np.nan_to_num(branch_loading(observation, rows))  # a step without results: no overload seen
        base = np.repeat(now[:, None], times.size, axis=1)
        site_gl = np.empty((len(self._sites), rows.size))
        for s, site in enumerate(self._sites):
            dc = observation.datacenters.get(site)
            g = site_gl[s] = self._loading_sens.get(observation, site, self._steps) @ phase_share(dc)
            est = self._training.get(site)
            if est is not None:
                p_train = dc.training_power_w if dc is not None else 0.0
                base += (g * self.context.sites[site].pue)[:, None] * (est.level(times) - p_train)[None, :]
        model_gl = site_gl[self._site_of][:, :, None]
        gain = np.concatenate(
            [site_gl[:, :, None] * rise_k[None, None, :], model_gl * fall_k[:, None, :], model_gl * drain_k[:, None, :]]
        )
        weight = self.config.overload_weight * self.context.dt_s / times.size
        return LoadingForecast(base, gain, self.config.max_loading_pct, weight)

    def _library(self, i: int, field: str, batch: int) -> float:
        """Model ``i``'s library mean ``field`` (``"power_w"``, ``"itl_s"``, ``"throughput_tok_s"``) at
        ``batch``; the mean over the measured sizes if ``batch`` is not one of them."""
        info = self._infos[i]
        values = np.asarray(getattr(info, field), dtype=float)
        return float(values[info.batch_sizes.index(batch)] if batch in info.batch_sizes else values.mean())

    def _itl_in_force(self, i: int) -> float:
        """Library ITL of model ``i``'s batch in force (s): a cut from it drains at this pace."""
        return self._library(i, "itl_s", int(self._b_now[i]))

    def _fall_response(self, t_s: np.ndarray, itl_s: np.ndarray) -> np.ndarray:
        """``a'_ik = 1 - exp(-t_k / tau_i)`` for cuts draining at ITLs ``itl_s`` (one per model), ``(M, N)``."""
        tau_s = np.array([d.tau_s(itl) for d, itl in zip(self._drain, itl_s)])
        return 1.0 - np.exp(-t_s[None, :] / tau_s[:, None])

    def _learn_drain(self) -> None:
        """Fold the decay since the last cut into each model's drain estimate while it drains."""
        for i, drain in enumerate(self._drain):
            if math.isfinite(self._cut_itl[i]):
                mean_w = self._library(i, "power_w", int(self._b_now[i]))
                elapsed_s = self._t_obs_s - self._t_cut[i]
                drain.observe(elapsed_s, self._dev_cut[i], self._p_now[i] - mean_w, mean_w, self._cut_itl[i])

    def batch_commands(self, prob: MPCProblem, choice: np.ndarray) -> list[Command]:
        """``SetBatchSize`` for every model whose chosen size differs from the one last sent."""
        out: list[Command] = []
        for i, ((site, model), opt, j) in enumerate(zip(self._keys, prob.options, choice)):
            b = int(opt.batches[j])
            old = self._sent[(site, model)]
            if b != old:
                self._sent[(site, model)] = b
                out.append(SetBatchSize(site=site, model=model, batch_size=b))
                # the decay from now on heads for the new batch; a fill is not learned from
                self._cut_itl[i] = self._library(i, "itl_s", old) if b < old else math.nan
                self._dev_cut[i] = self._p_now[i] - self._library(i, "power_w", b)
                self._t_cut[i] = self._t_obs_s
                self._t_sent[i] = self._t_obs_s
                self._budget.spend(i, self._t_obs_s)
        return out

    def actuators(self) -> tuple[Actuator, ...]:
        return model_actuators("batch_size", self._keys)

    def step(self, observation: Observation) -> list[Command]:
        prob = self.problem(observation)
        choice = prob.solve(self.config.max_combinations)
        self._steps += 1
        return self.batch_commands(prob, choice)
