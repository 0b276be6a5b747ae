"""MPC: agreement with brute force on a tiny problem, latency bounds, battery dispatch."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from pydantic import ValidationError

from openg2g.controllers.mpc import MPCController
from openg2g.core.commands import SetBatchSize, SetStoragePower
from tests.controllers.conftest import make_context, make_observation, toy_model

SIZES = (8, 16, 32, 64)


def _tiny_context():
    return make_context(
        [
            toy_model("m1", batch_sizes=SIZES, replicas=400, initial_batch_size=32, itl_deadline_s=None),
            toy_model(
                "m2", batch_sizes=SIZES, replicas=150, p_span_w=900.0, initial_batch_size=32, itl_deadline_s=None
            ),
        ]
    )


def _brute_force(ctrl: MPCController, obs) -> tuple[int, ...]:
    prob, _, _ = ctrl.problem(obs)
    best = None
    for combo in itertools.product(SIZES, repeat=2):
        x = np.log2(np.array(combo, dtype=float))[:, None]
        j = prob.cost(x.ravel(), with_grad=False)[0]
        if best is None or j < best[0]:
            best = (j, combo)
    return best[1]


@pytest.mark.parametrize("v_pu", [0.93, 0.945, 0.947, 0.949, 0.95, 0.951, 0.953, 0.955, 0.96, 0.99])
@pytest.mark.parametrize("solver", ["lbfgsb", "slsqp", "enumerate"])
def test_one_step_mpc_matches_brute_force(v_pu, solver):
    """Interior optima (mixed batch sizes) appear for 0.949 <= v <= 0.953."""
    ctx = _tiny_context()
    cfg = MPCController.Config(horizon_steps=1, max_move_log2=10.0, switching_weight=0.0, solver=solver, margin_pu=0.0)
    ctrl = MPCController(cfg)
    ctrl.reset(ctx, 0)
    obs = make_observation(ctx, v_pu, sensitivity=-5e-8 * np.ones((6, 3)))
    expected = _brute_force(ctrl, obs)
    prob, x_now, ub = ctrl.problem(obs)
    batches, _ = ctrl.solve(prob, x_now, ub)
    assert tuple(batches) == expected


def test_undervoltage_cuts_power_within_move_limits():
    ctx = _tiny_context()
    ctrl = MPCController(MPCController.Config(horizon_steps=3, max_move_log2=1.0))
    ctrl.reset(ctx, 0)
    cmds = ctrl.step(make_observation(ctx, 0.93))
    assert cmds and all(isinstance(c, SetBatchSize) for c in cmds)
    assert all(c.batch_size == 16 for c in cmds)  # one move (one log2 step) down from 32


def test_latency_bound_excludes_slow_batches():
    info = toy_model("m1", batch_sizes=(8, 16, 32, 64, 128, 256, 512), itl_deadline_s=0.05)
    ctx = make_context([info])
    ctrl = MPCController(MPCController.Config(horizon_steps=2, max_move_log2=3.0, throughput_weight=10.0))
    ctrl.reset(ctx, 0)
    limit = max(b for b, l in zip(info.batch_sizes, info.itl_s) if l <= 0.05)
    for k in range(5):
        for c in ctrl.step(make_observation(ctx, 1.0, t_s=k)):
            assert c.batch_size <= limit
    _, _, ub = ctrl.problem(make_observation(ctx, 1.0))
    assert ub[0] < math.log2(limit) + 1.0


def test_battery_discharges_on_undervoltage():
    ctx = make_context([toy_model()], storages=("bat1",))
    cfg = MPCController.Config(storage={"name": "bat1", "site": "dc1", "p_max_kw": 500.0}, storage_weight=0.01)
    ctrl = MPCController(cfg)
    ctrl.reset(ctx, 0)
    cmds = ctrl.step(make_observation(ctx, 0.94))
    bat = [c for c in cmds if isinstance(c, SetStoragePower)]
    assert len(bat) == 1 and 0.0 < bat[0].p_w <= 500e3


def test_bad_params():
    with pytest.raises(ValidationError, match="horizon_steps"):
        MPCController.Config(horizon_steps=0)
    with pytest.raises(ValidationError, match="p_max_kw"):
        MPCController.Config(storage={"name": "b", "site": "dc1", "p_max_kw": -1})


def test_cost_gradient_matches_finite_differences():
    ctx = make_context([toy_model("m1"), toy_model("m2", p_span_w=900.0)], storages=("bat1",))
    cfg = MPCController.Config(
        horizon_steps=3,
        voltage_weight_linear=1e3,
        switching_weight=0.5,
        storage={"name": "bat1", "site": "dc1", "p_max_kw": 300.0},
    )
    ctrl = MPCController(cfg)
    ctrl.reset(ctx, 0)
    prob, _, _ = ctrl.problem(make_observation(ctx, 0.947, sensitivity=-5e-8 * np.ones((6, 3))))
    prob.move_limit, prob.w_move = 0.5, 10.0
    rng = np.random.default_rng(0)
    z = np.concatenate([rng.uniform(4.0, 8.0, prob.m * prob.n), rng.uniform(-0.5, 0.5, prob.n)])
    _, grad = prob.cost(z)
    h = 1e-6
    numeric = np.array(
        [
            (prob.cost(z + h * e, with_grad=False)[0] - prob.cost(z - h * e, with_grad=False)[0]) / (2 * h)
            for e in np.eye(z.size)
        ]
    )
    np.testing.assert_allclose(grad, numeric, rtol=1e-4, atol=1e-4)
