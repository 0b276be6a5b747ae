"""OFO: dual updates and the primal gradient on hand-computed cases; projection; directions."""

from __future__ import annotations

import math

import numpy as np
import pytest
from pydantic import ValidationError

from openg2g.controllers.ofo import OFOController
from openg2g.core.commands import SetBatchSize
from tests.controllers.conftest import K_PU_PER_W, make_context, make_observation, toy_model


def _ofo(ctx, **params) -> OFOController:
    ctrl = OFOController(OFOController.Config(**params))
    ctrl.reset(ctx, 0)
    return ctrl


def test_voltage_and_latency_duals_by_hand():
    info = toy_model(itl_deadline_s=0.1)
    ctx = make_context([info])
    ctrl = _ofo(ctx, voltage_dual_step=0.5, latency_dual_step=2.0)
    v = [0.94, 0.96, 0.95, 1.06, 1.00, 1.00]
    ctrl.update_duals(make_observation(ctx, v, itl_s={"m1": 0.12}))
    np.testing.assert_allclose(ctrl.lam_under, [0.005, 0, 0, 0, 0, 0], atol=1e-15)
    np.testing.assert_allclose(ctrl.lam_over, [0, 0, 0, 0.005, 0, 0], atol=1e-15)
    assert ctrl.mu[("dc1", "m1")] == pytest.approx(2.0 * (0.12 / 0.1 - 1.0))  # 0.4
    ctrl.update_duals(make_observation(ctx, v, itl_s={"m1": 0.12}))
    np.testing.assert_allclose(ctrl.lam_under, [0.01, 0, 0, 0, 0, 0], atol=1e-15)
    assert ctrl.mu[("dc1", "m1")] == pytest.approx(0.8)
    # back inside the limits: duals decrease and are projected on >= 0
    ctrl.update_duals(make_observation(ctx, 1.0, itl_s={"m1": 0.05}))
    np.testing.assert_allclose(ctrl.lam_under, [0, 0, 0, 0, 0, 0], atol=1e-15)  # 0.01 + 0.5 (0.95 - 1) < 0
    assert ctrl.mu[("dc1", "m1")] == pytest.approx(max(0.8 + 2.0 * (0.5 - 1.0), 0.0))  # 0


def test_gradient_by_hand():
    info = toy_model(replicas=200, itl_deadline_s=0.1)
    ctx = make_context([info], pue=1.2)
    ctrl = _ofo(
        ctx,
        voltage_dual_step=1.0,
        latency_dual_step=1.0,
        throughput_weight=0.3,
        voltage_weight_per_pu2=1e4,
        voltage_proportional_gain=2.0,
    )
    obs = make_observation(ctx, [0.94, 0.95, 0.95, 1.0, 1.0, 1.0], itl_s={"m1": 0.11})
    ctrl.update_duals(obs)
    c = ctrl.curves[("dc1", "m1")]
    x = math.log2(128)
    # dv/dx on the under-voltage phase: H e = -K (balanced), times pue n P'(x)
    dv_dx = -K_PU_PER_W * 1.2 * 200 * c.power_w.slope(x)
    expected = (
        -0.3 * c.throughput_tok_s.slope(x) / c.throughput_tok_s.value(x)
        + 1e4 * (0.0 - 0.01 + 2.0 * (0.0 - 0.01)) * dv_dx  # dual + kappa x present violation
        + 0.1 * c.itl_s.slope(x) / 0.1
    )
    assert ctrl.gradient(obs, "dc1", "m1") == pytest.approx(expected, rel=1e-12)


def test_undervoltage_drives_batch_down_and_projects_on_measured_sizes():
    ctx = make_context([toy_model("m1"), toy_model("m2", batch_sizes=(16, 64, 256), initial_batch_size=64)])
    ctrl = _ofo(ctx, throughput_weight=0.0)
    sent: dict[str, int] = {}
    for k in range(30):
        for c in ctrl.step(make_observation(ctx, 0.93, t_s=k)):
            assert isinstance(c, SetBatchSize)
            assert c.batch_size in ctx.sites["dc1"].models[c.model].batch_sizes
            sent[c.model] = c.batch_size
    assert sent["m1"] < 128 and sent["m2"] < 64
    assert ctrl.x[("dc1", "m1")] < math.log2(128)


@pytest.mark.parametrize("h", [0.0, 0.3])
def test_batch_hysteresis_sends_a_new_size_only_past_the_margin(h: float):
    """From 128 (x = 7) down to 64 (x = 6), x is nearer to 6 by more than h once x < 6.5 - h / 2."""
    ctx = make_context([toy_model()])
    ctrl = _ofo(ctx, throughput_weight=0.0, primal_step=0.001, batch_hysteresis=h)  # x falls ~0.04 a step
    first = None
    for k in range(200):
        commands = ctrl.step(make_observation(ctx, 0.93, t_s=k))
        x = ctrl.x[("dc1", "m1")]
        if commands and first is None:
            first = (x, commands[0].batch_size)
            break
        assert x >= 6.5 - h / 2  # not yet past the margin: the batch in force stays
    assert first is not None and first[1] == 64 and first[0] < 6.5 - h / 2


def test_throughput_pulls_up_until_latency_dual_pushes_back():
    info = toy_model(itl_deadline_s=0.1)
    ctx = make_context([info])
    ctrl = _ofo(ctx, throughput_weight=1.0, primal_step=0.5)
    for k in range(40):
        ctrl.step(make_observation(ctx, 1.0, t_s=k))
    assert ctrl.x[("dc1", "m1")] > 8.5  # no constraint active: the largest batch (512) is sent
    assert ctrl._sent[("dc1", "m1")] == 512
    for k in range(40, 200):  # ITL far above the deadline: latency dual grows, batch falls
        ctrl.step(make_observation(ctx, 1.0, t_s=k, itl_s={"m1": 0.3}))
    assert ctrl.x[("dc1", "m1")] < 9.0


def test_batch_rate_bound_holds_against_any_gradient():
    """A deep under-voltage moves x by log2 units in one step unbounded; bounded, by r dt a step."""
    ctx = make_context([toy_model()], dt_s=2.0)
    free = _ofo(ctx, max_batch_rate_log2_per_s=None, batch_hysteresis=0.0)
    free.step(make_observation(ctx, 0.80))
    assert free.x[("dc1", "m1")] < 7.0 - 2.0  # from log2(128), more than 4 bounded steps at once
    bounded = _ofo(ctx, max_batch_rate_log2_per_s=0.25, batch_hysteresis=0.0)
    sent = []
    for k in range(8):
        sent += [c.batch_size for c in bounded.step(make_observation(ctx, 0.80, t_s=2.0 * k))]
        assert bounded.x[("dc1", "m1")] == pytest.approx(7.0 - 0.5 * (k + 1))  # 0.25 log2/s x 2 s
    assert sent == [64, 32, 16, 8]  # one measured size every second step, never two at once


def test_a_price_steep_in_x_converges_without_reversals():
    """A latency price held at mu = 24.5 (no dual step) against the throughput weight: the balance
    lies near x = 5, where ``rho_x h`` is ~3.7 for ``rho_x = 5``. The plain step ``-rho_x g`` flips x
    across it every step; the step limited to ``-g / h`` approaches it from one side."""
    ctx = make_context([toy_model(itl_deadline_s=0.1)])
    params = {"primal_step": 5.0, "latency_dual_step": 0.0, "batch_hysteresis": 0.0}
    ctrl = _ofo(ctx, max_batch_rate_log2_per_s=None, **params)
    key = ("dc1", "m1")
    ctrl.mu[key] = 24.5
    obs = make_observation(ctx, 1.0, itl_s={"m1": 0.1})
    xs = [ctrl.x[key]]
    sent = []
    for _ in range(30):
        sent += [c.batch_size for c in ctrl.step(obs)]
        xs.append(ctrl.x[key])
    moves = np.diff(xs)
    assert np.all(moves <= 1e-12)  # monotone: never a reversal
    assert abs(ctrl.gradient(obs, *key)) < 1e-6 and 4.5 < xs[-1] < 5.5  # at the balance g = 0
    assert sent == [64, 32]  # down to the size nearest x ~ 5, never back
    # the fixed step alone, as before the curvature limit (h = 0): x alternates every step
    ctrl = _ofo(ctx, max_batch_rate_log2_per_s=None, **params)
    ctrl.mu[key] = 24.5
    flips = 0
    for _ in range(30):
        before = ctrl.x[key]
        g = ctrl.gradient(obs, *key)
        ctrl.x[key] = min(max(before + ctrl.primal_move(g, 0.0), 3.0), 9.0)
        flips += (ctrl.x[key] - before) * (before - ctrl._x_prev[key]) < 0
        ctrl._x_prev[key] = before
    assert flips >= 25


def test_batch_ceiling_initial_never_exceeds_initial_batch():
    ctx = make_context([toy_model()])
    ctrl = _ofo(ctx, throughput_weight=5.0, batch_ceiling="initial")
    for k in range(20):
        for c in ctrl.step(make_observation(ctx, 1.0, t_s=k)):
            assert c.batch_size <= 128
    assert ctrl.x[("dc1", "m1")] <= 7.0


def test_bad_params():
    with pytest.raises(ValidationError, match="primal_step"):
        OFOController.Config(primal_step=0.0)
    with pytest.raises(ValidationError, match="batch_ceiling"):
        OFOController.Config(batch_ceiling="huge")
    for bad in (-0.1, 1.5, float("nan"), True):  # a YAML `true` is not a number here
        with pytest.raises(ValidationError, match="batch_hysteresis"):
            OFOController.Config(batch_hysteresis=bad)
    for bad in (0.0, -1.0):
        with pytest.raises(ValidationError, match="max_batch_rate_log2_per_s"):
            OFOController.Config(max_batch_rate_log2_per_s=bad)
