"""MPC: the exact solver against brute force, the expected-violation term against its integral,
the forecast of announced training and scheduled taps, latency bounds, bad parameters."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import numpy as np
import pytest
from pydantic import ValidationError

from openg2g.controllers.mpc import ModelOptions, MPCController, MPCProblem, expected_shortfall
from openg2g.core.commands import SetBatchSize, SetTaps
from openg2g.core.interfaces import ScheduledEvent, TrainingInfo
from tests.controllers.conftest import K_PU_PER_W, make_context, make_observation, model_state, toy_model

SIZES = (8, 16, 32, 64, 128)


def _brute_force(prob: MPCProblem) -> np.ndarray:
    combos = np.array(list(itertools.product(*[range(o.batches.size) for o in prob.options])))
    costs = prob.cost(combos)
    return combos[int(np.argmin(costs))]


def _two_models(**kw):
    return [
        toy_model("m1", batch_sizes=SIZES, replicas=400, initial_batch_size=32, itl_deadline_s=None, **kw),
        toy_model("m2", batch_sizes=SIZES, replicas=150, p_span_w=900.0, initial_batch_size=32, itl_deadline_s=None),
    ]


@pytest.mark.parametrize("v_pu", [0.93, 0.945, 0.948, 0.95, 0.952, 0.955, 0.96, 1.045, 1.052, 1.06])
def test_single_site_solver_matches_brute_force(v_pu):
    """The exact solver keeps the optimum: its choice is the enumerated minimum, at voltages
    from deep under-voltage through the band to over-voltage (interior optima near the limits)."""
    ctx = make_context(_two_models())
    ctrl = MPCController(MPCController.Config(horizon_steps=3, max_move_log2=10.0, voltage_noise_pu=0.002))
    ctrl.reset(ctx, 0)
    prob = ctrl.problem(make_observation(ctx, v_pu, sensitivity=-5e-8 * np.ones((6, 3))))
    assert prob.n_combinations() == len(SIZES) ** 2
    np.testing.assert_array_equal(prob.solve(10_000), _brute_force(prob))


@pytest.mark.parametrize("v_pu", [0.94, 0.949, 0.951, 0.953, 1.049, 1.055])
def test_single_site_solver_matches_brute_force_on_343_combinations(v_pu):
    sizes = (8, 16, 32, 64, 128, 256, 512)
    models = [
        toy_model("m1", batch_sizes=sizes, replicas=400, initial_batch_size=32, itl_deadline_s=None),
        toy_model("m2", batch_sizes=sizes, replicas=150, p_span_w=900.0, itl_deadline_s=None),
        toy_model("m3", batch_sizes=sizes, replicas=60, p_idle_w=1000.0, p_span_w=2500.0, itl_deadline_s=None),
    ]
    ctx = make_context(models)
    ctrl = MPCController(MPCController.Config(horizon_steps=4, voltage_noise_pu=0.001))
    ctrl.reset(ctx, 0)
    prob = ctrl.problem(make_observation(ctx, v_pu, sensitivity=-3e-8 * np.ones((6, 3))))
    assert prob.n_combinations() == 343
    np.testing.assert_array_equal(prob.solve(10_000), _brute_force(prob))


@pytest.mark.parametrize("v_pu", [0.94, 0.949, 0.951, 0.96])
def test_two_site_solver_matches_brute_force(v_pu):
    m1, m2 = _two_models()
    ctx = make_context(sites={"dc1": [m1], "dc2": [m2]})
    ctrl = MPCController(MPCController.Config(horizon_steps=2, max_move_log2=10.0, voltage_noise_pu=0.002))
    ctrl.reset(ctx, 0)
    # dc1 weighs on bus 671, dc2 on bus 680
    h = {"dc1": np.diag([-6e-8] * 3 + [-1e-8] * 3)[:, :3], "dc2": np.diag([-1e-8] * 3 + [-6e-8] * 3)[:, 3:]}
    obs = make_observation(ctx, v_pu)
    obs = replace(obs, _sensitivity=lambda site: np.repeat(h[site].sum(axis=1, keepdims=True), 3, axis=1))
    prob = ctrl.problem(obs)
    assert prob.gain.shape[0] == 2
    np.testing.assert_array_equal(prob.solve(10_000), _brute_force(prob))


@pytest.mark.parametrize("v_pu", [0.94, 0.949, 0.951, 1.051])
def test_three_models_on_two_sites_match_brute_force(v_pu):
    """Cutting planes are exact with several sites too (no block-wise optimum)."""
    m1, m2 = _two_models()
    m3 = toy_model("m3", batch_sizes=SIZES, replicas=80, p_span_w=2000.0, itl_deadline_s=None)
    ctx = make_context(sites={"dc1": [m1, m3], "dc2": [m2]})
    ctrl = MPCController(MPCController.Config(horizon_steps=2, voltage_noise_pu=0.002))
    ctrl.reset(ctx, 0)
    h = {"dc1": np.full((6, 3), -4e-8), "dc2": np.full((6, 3), -2e-8)}
    obs = replace(make_observation(ctx, v_pu), _sensitivity=lambda site: h[site])
    prob = ctrl.problem(obs)
    np.testing.assert_array_equal(prob.solve(10_000), _brute_force(prob))


def test_a_swap_dips_while_the_cut_drains():
    """One model up, the other cut by the same power: zero net change at the end, but the rise shows
    with ``tau_up`` and the cut with ``tau_down = drain_tokens * ITL`` of the batch it leaves, so the
    prediction dips by hand-computed amounts."""
    models = _two_models()
    ctx = make_context(models)
    cfg = MPCController.Config(horizon_steps=4, rise_time_s=1.0, drain_tokens=300.0)
    ctrl = MPCController(cfg)
    ctrl.reset(ctx, 0)
    prob = ctrl.problem(make_observation(ctx, 0.9505, t_s=0.0))
    k = np.arange(1, 5)
    tau_down = 300.0 * models[1].itl_s[models[1].batch_sizes.index(32)]
    up, down = 1.0 - np.exp(-k / 1.0), 1.0 - np.exp(-k / tau_down)
    dw = np.array([[2.0e5, 0.0, -2.0e5, 0.0, 0.0]])  # channels: the site's rise; cuts m1, m2; drains m1, m2
    v = 0.9505 - K_PU_PER_W * 2.0e5 * (up - down)  # the toy grid lowers v by K per W of site power
    expected = prob.violation_weight * expected_shortfall(0.95 - v, np.full(4, cfg.voltage_noise_pu)).sum() * 6
    assert prob.violation(dw)[0] == pytest.approx(expected, rel=1e-9)  # six bus-phases, all alike
    assert prob.violation(dw)[0] > prob.violation(np.zeros_like(dw))[0]


def test_tokens_follow_a_batch_change_at_the_pace_of_its_power():
    """Option values are the horizon's mean token rate: a fill reaches its size's rate with
    ``tau_up``, a cut with its drain time, so a slow cut costs its tokens as slowly as it saves power."""
    info = _two_models()[0]
    ctx = make_context([info])
    cfg = MPCController.Config(horizon_steps=5, max_move_log2=10.0, switching_weight=0.0, drain_tokens=400.0)
    ctrl = MPCController(cfg)
    ctrl.reset(ctx, 0)
    (opt,) = ctrl.problem(make_observation(ctx, 1.0)).options
    k = np.arange(1, 6)
    t_now = info.throughput_tok_s[info.batch_sizes.index(32)]
    tau_down = 400.0 * info.itl_s[info.batch_sizes.index(32)]
    progress = np.where(opt.batches > 32, np.mean(1 - np.exp(-k / 1.0)), np.mean(1 - np.exp(-k / tau_down)))
    expected = info.replicas * (t_now + (np.array(info.throughput_tok_s) - t_now) * progress) / ctrl._t_ref
    np.testing.assert_allclose(opt.value, expected, rtol=1e-12)


def _random_problem(rng: np.random.Generator, n_models: int, j: int = 4, n: int = 3) -> MPCProblem:
    """Two sites, six options per model (the third in force), rises, cuts and drains with their own gains."""
    options = tuple(
        ModelOptions(
            site=int(rng.integers(2)),
            batches=np.arange(6),
            dw_w=rng.normal(0, 2e5, 6),
            value=rng.random(6),
            batch_now=2,
        )
        for _ in range(n_models)
    )
    return MPCProblem(
        base=0.95 + rng.normal(0, 0.004, (j, n)),
        sigma=np.full((j, n), 0.001),
        gain=-np.abs(rng.normal(0, 3e-8, (2, j, n))),
        options=options,
        v_lo=0.95,
        v_hi=1.05,
        violation_weight=300.0,
        fall_gain=-np.abs(rng.normal(0, 1e-8, (n_models, j, n))),
        drain_gain=-np.abs(rng.normal(0, 1e-8, (n_models, j, n))),
    )


def test_violation_slope_is_the_derivative():
    rng = np.random.default_rng(3)
    prob = _random_problem(rng, n_models=2, j=5)
    x = rng.normal(0, 1e5, (1, 2 + 2 * 2))
    h = 1.0
    numeric = [(prob.violation(x + h * e)[0] - prob.violation(x - h * e)[0]) / (2 * h) for e in np.eye(x.size)[:, None]]
    np.testing.assert_allclose(prob.violation_slope(x)[0], numeric, rtol=1e-5)


@pytest.mark.parametrize("seed", range(6))
def test_cutting_planes_match_brute_force_on_random_problems(seed):
    """Random two-site problems: the solver's choice is the enumerated minimum."""
    prob = _random_problem(np.random.default_rng(seed), n_models=4)
    np.testing.assert_array_equal(prob.solve(10_000), _brute_force(prob))


def test_the_drain_time_is_learned_from_the_decay_after_a_cut():
    """Under-voltage: m1 is cut from 32; five seconds later its replica power has covered
    ``1 - exp(-5 / tau)`` of the way down, so the learned tokens are ``tau / ITL(32)`` (rate 1)."""
    info = _two_models()[0]
    ctx = make_context([info])
    ctrl = MPCController(MPCController.Config(violation_weight=1e6, drain_learning_rate=1.0))
    ctrl.reset(ctx, 0)
    (cut,) = ctrl.step(make_observation(ctx, 0.93))
    assert cut.batch_size < 32
    p_old, p_new = (info.power_w[info.batch_sizes.index(b)] for b in (32, cut.batch_size))
    tau = 7.0
    obs = make_observation(ctx, 0.93, t_s=5.0)
    state = replace(
        model_state(info, cut.batch_size), power_w=info.replicas * (p_new + (p_old - p_new) * math.exp(-5.0 / tau))
    )
    obs = replace(obs, datacenters={"dc1": replace(obs.datacenters["dc1"], models={"m1": state})})
    ctrl.step(obs)
    assert ctrl._drain[0].tokens == pytest.approx(tau / info.itl_s[info.batch_sizes.index(32)], rel=1e-9)


def test_coordinate_descent_beyond_the_enumeration_limit_never_raises_the_cost():
    ctx = make_context(_two_models())
    ctrl = MPCController(MPCController.Config(max_move_log2=10.0))
    ctrl.reset(ctx, 0)
    prob = ctrl.problem(make_observation(ctx, 0.948))
    keep = np.array([list(o.batches).index(32) for o in prob.options])
    local = prob.solve(max_combinations=1)
    assert prob.cost(local)[0] <= prob.cost(keep)[0]


@pytest.mark.parametrize("d", [-0.004, -0.001, 0.0, 0.0005, 0.003])
def test_expected_shortfall_equals_its_integral(d):
    sigma = 0.001
    e = np.linspace(-10 * sigma, 10 * sigma, 200_001)
    density = np.exp(-0.5 * (e / sigma) ** 2) / (sigma * math.sqrt(2 * math.pi))
    numeric = np.trapezoid(np.maximum(d - e, 0.0) * density, e)
    assert expected_shortfall(np.array(d), np.array(sigma)) == pytest.approx(numeric, rel=1e-6, abs=1e-12)


def test_undervoltage_cuts_batches_and_margin_lets_them_grow():
    ctx = make_context(_two_models()[:1])
    # on the toy grid one log2 step moves 671 by ~2e-4 pu: violation must outweigh the throughput
    ctrl = MPCController(MPCController.Config(max_move_log2=1.0, violation_weight=1e4))
    ctrl.reset(ctx, 0)
    cmds = ctrl.step(make_observation(ctx, 0.93))
    assert [c.batch_size for c in cmds if isinstance(c, SetBatchSize)] == [16]  # one move down from 32
    ctrl.reset(ctx, 0)
    cmds = ctrl.step(make_observation(ctx, 1.0))
    assert [c.batch_size for c in cmds if isinstance(c, SetBatchSize)] == [64]  # room: one move up


def test_announced_training_start_is_in_the_forecast():
    """Before the job starts the prediction already holds its announced mean from the start on:
    ``v`` falls by ``K * pue * mean`` (the toy grid: K pu per W of site power, balanced)."""
    mean_w, start_s = 2.0e5, 3.0
    ctx = make_context(_two_models())
    site = replace(ctx.sites["dc1"], training=TrainingInfo(start_s, 100.0, 500, mean_w, 1.5 * mean_w))
    ctx = replace(ctx, sites={"dc1": site})
    ctrl = MPCController(MPCController.Config(horizon_steps=5))
    ctrl.reset(ctx, 0)
    prob = ctrl.problem(make_observation(ctx, 0.97, t_s=0.0))
    expected = np.where(np.arange(1, 6) >= start_s, 0.97 - K_PU_PER_W * mean_w, 0.97)
    np.testing.assert_allclose(prob.base[0], expected, atol=1e-12)
    spread = K_PU_PER_W * 0.25 * mean_w  # half the peak-to-mean gap before any observation
    np.testing.assert_allclose(prob.sigma[0, 3:], math.hypot(spread, ctrl.config.voltage_noise_pu))


def test_scheduled_taps_are_in_the_forecast():
    ctx = make_context(_two_models())
    ctx = replace(ctx, events=(ScheduledEvent(2.0, SetTaps(bank="reg1", taps=(0, 0, 2))),))
    ctrl = MPCController(MPCController.Config(horizon_steps=4))
    ctrl.reset(ctx, 0)
    prob = ctrl.problem(make_observation(ctx, 0.99, t_s=0.0))
    step = 2 * ctx.regulators["reg1"].step_pu
    # bus-phases 671.c and 680.c (rows 2 and 5) rise by two steps from t = 2 s on; a and b stay
    np.testing.assert_allclose(prob.base[2], [0.99, 0.99 + step, 0.99 + step, 0.99 + step])
    np.testing.assert_allclose(prob.base[[0, 1, 3, 4]], 0.99)


def test_latency_bound_excludes_slow_batches():
    info = toy_model("m1", batch_sizes=(8, 16, 32, 64, 128, 256, 512), itl_deadline_s=0.05)
    ctx = make_context([info])
    ctrl = MPCController(MPCController.Config(max_move_log2=3.0, throughput_weight=10.0))
    ctrl.reset(ctx, 0)
    limit = max(b for b, l in zip(info.batch_sizes, info.itl_s) if l <= 0.05)
    for k in range(5):
        for c in ctrl.step(make_observation(ctx, 1.0, t_s=k)):
            assert c.batch_size <= limit
    assert max(ctrl.last_problem.options[0].batches) == limit


def test_overvoltage_relief_spends_the_unused_miss_budget():
    """At 8% misses the guard tightens (target 4%) except during an over-voltage while the run so
    far is within its budget (4%, or miss_fraction_budget) (relief target 12%); past it, it tightens."""
    info = toy_model("m1", itl_deadline_s=0.1)
    ctx = make_context([info])
    cfg = MPCController.Config(miss_fraction_target=0.04, overvoltage_miss_fraction=0.12, miss_adapt_gain=0.1)

    def guard_after(v_pu: float, miss: float, history: tuple[float, float] = (0.0, 0.0)) -> float:
        ctrl = MPCController(cfg)
        ctrl.reset(ctx, 0)
        ctrl._tokens[0], ctrl._missed[0] = history
        obs = make_observation(ctx, v_pu)
        state = obs.datacenters["dc1"].models["m1"]
        dc = replace(obs.datacenters["dc1"], models={"m1": replace(state, deadline_miss_fraction=miss)})
        ctrl._latency_ok(replace(obs, datacenters={"dc1": dc}))
        return float(ctrl._guard[0])

    assert guard_after(1.0, 0.08) == pytest.approx(0.9)  # 1 - 0.1 (0.08 / 0.04 - 1)
    banked = (1e9, 0.01e9)  # the run so far at 1% misses
    assert guard_after(1.06, 0.08, banked) == pytest.approx(1.0)  # relief: 0.08 < 0.12, the guard stays at its cap
    assert guard_after(1.0, 0.08, banked) == pytest.approx(0.9)  # no over-voltage: no relief
    assert guard_after(1.06, 0.08, history=(1e9, 0.05e9)) == pytest.approx(0.9)  # run at 5%: no relief
    cfg = cfg.model_copy(update={"miss_fraction_budget": 0.06})
    assert guard_after(1.06, 0.08, history=(1e9, 0.05e9)) == pytest.approx(1.0)  # within a 6% budget: relief


def test_bad_params():
    with pytest.raises(ValidationError, match="horizon_steps"):
        MPCController.Config(horizon_steps=0)
    with pytest.raises(ValidationError, match="voltage_noise_pu"):
        MPCController.Config(voltage_noise_pu=0.0)


def _guard_plant(cfg: MPCController.Config, steps: int) -> list[int]:
    """Closed loop on a model whose batch 128 misses half its tokens and 64 none (no voltage
    limit near): the latency guard alone decides. Returns the times (s) of the changes sent."""
    info = toy_model("m1", batch_sizes=(8, 16, 32, 64, 128), itl_deadline_s=0.04)
    ctx = make_context([info])
    ctrl = MPCController(cfg)
    ctrl.reset(ctx, 0)
    batch, changes = 128, []
    for t in range(steps):
        obs = make_observation(ctx, 1.0, t_s=float(t), batches={"m1": batch})
        state = obs.datacenters["dc1"].models["m1"]
        miss = replace(state, deadline_miss_fraction=0.5 if batch == 128 else 0.0)
        obs = replace(obs, datacenters={"dc1": replace(obs.datacenters["dc1"], models={"m1": miss})})
        for c in ctrl.step(obs):
            batch = c.batch_size
            changes.append(t)
    return changes


def test_latency_guard_cycles_every_step_without_dwell_and_not_with_it():
    """The guard integrates misses at 0.03 a step (excess saturated at +-1): 128 needs a guard of
    ITL(128) / deadline = 0.9475, so from 1.0 the guard falls to 0.97 (t = 0, 128 kept), 0.94 (t = 1:
    cut to 64), rises to 0.97 (t = 2: 128 again), falls to 0.94 (t = 3: cut)...: a period-2 cycle.
    With a 4 s dwell each size is held 4 s (the guard moves 0.12 meanwhile): changes at 1, 5, 9, ...
    every 4 s, and the budget of 8 changes in 60 s holds the model at 128 from the eighth (t = 29, a
    fill) until the first leaves the window (t = 61: the cut); the guard, at its floor by then, takes
    30 steps to climb back, so nothing follows within 66 s."""
    free = MPCController.Config(miss_fraction_target=0.04, miss_adapt_gain=0.03, min_dwell_s=0, max_changes_per_min=60)
    assert _guard_plant(free, 60) == list(range(1, 60))
    dwell = free.model_copy(update={"min_dwell_s": 4.0, "max_changes_per_min": 100})
    assert _guard_plant(dwell, 60) == list(range(1, 60, 4))
    default = free.model_copy(update={"min_dwell_s": 4.0, "max_changes_per_min": 8})
    assert _guard_plant(default, 66) == [*range(1, 30, 4), 61]


def _held_options(v_pu: float, changes: int = 1, budget: int = 8) -> np.ndarray:
    """The batches open to a model 1 s after the last of its ``changes`` cuts from 64 to 32 (10 s
    apart, the last at 60 s), at zone voltage ``v_pu``, with a budget of ``budget`` changes in 60 s;
    default dwell (4 s) and override (0.005 pu)."""
    info = toy_model("m1", batch_sizes=SIZES, initial_batch_size=64, itl_deadline_s=None)
    ctx = make_context([info])
    ctrl = MPCController(MPCController.Config(max_changes_per_min=budget))
    ctrl.reset(ctx, 0)
    for k in range(changes):
        ctrl._sent[("dc1", "m1")] = 64
        prob = ctrl.problem(make_observation(ctx, 0.9, t_s=60.0 - 10.0 * (changes - 1 - k), batches={"m1": 64}))
        ctrl.batch_commands(prob, np.array([list(prob.options[0].batches).index(32)]))
    return ctrl.problem(make_observation(ctx, v_pu, t_s=61.0, batches={"m1": 32})).options[0].batches


def test_dwell_holds_a_model_but_for_relief_beyond_the_margin_and_the_budget_holds_it_always():
    # within the override margin (0.95 - 0.947 < 0.005) or in the band: only the batch sent
    np.testing.assert_array_equal(_held_options(0.947), [32])
    np.testing.assert_array_equal(_held_options(1.0), [32])
    # 0.006 beyond a limit: the moves that relieve it (cuts below v_min, fills above v_max)
    np.testing.assert_array_equal(_held_options(0.944), [8, 16, 32])
    np.testing.assert_array_equal(_held_options(1.056), [32, 64, 128])
    # the budget (2 changes in 60 s, both spent) admits no emergency
    np.testing.assert_array_equal(_held_options(0.9, changes=2, budget=2), [32])
    np.testing.assert_array_equal(_held_options(0.9, changes=2, budget=3), [8, 16, 32])
