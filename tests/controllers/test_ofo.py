"""OFO: dual updates and the primal gradient on hand-computed cases; projection; directions."""

from __future__ import annotations

import dataclasses
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


def _with_misses(info, fractions):
    return dataclasses.replace(info, miss_fraction=tuple(fractions))


def test_the_miss_fraction_priced_along_its_own_slope():
    """With ``latency_gradient: miss_fraction`` the latency price is ``mu m'(x) / eps``, ``m'`` the
    secant of the measured fractions (made non-decreasing) around x; by default the mean ITL's."""
    info = _with_misses(toy_model(itl_deadline_s=0.1), [0.0, 0.002, 0.001, 0.004, 0.01, 0.06, 0.18])
    ctx = make_context([info])
    obs = make_observation(ctx, 1.0)
    x = math.log2(128)
    for gradient in ("mean_itl", "miss_fraction"):
        ctrl = _ofo(ctx, throughput_weight=0.0, latency_signal="miss_fraction", latency_gradient=gradient)
        ctrl.mu[("dc1", "m1")] = 3.0
        c = ctrl.curves[("dc1", "m1")]
        # 128 -> 256: (0.06 - 0.01) per log2 step over eps = 0.01; else the ITL's slope over 0.1 s
        expected = 3.0 * 0.05 / 0.01 if gradient == "miss_fraction" else 3.0 * c.itl_s.slope(x) / 0.1
        assert ctrl.gradient(obs, "dc1", "m1") == pytest.approx(expected, rel=1e-12)
    # the dip at 32 is the measurement's noise: 16 -> 32 is flat, not falling
    assert c.miss_fraction is not None and c.miss_fraction.slope(math.log2(16)) == 0.0
    assert c.miss_fraction.slope(math.log2(512)) == pytest.approx(0.12)  # the last point: the last segment
    with pytest.raises(ValidationError, match="latency_signal"):
        OFOController.Config(latency_gradient="miss_fraction")


def _with_site_step(observation, dp_w: float):
    """``observation`` with site dc1 drawing ``dp_w`` more on each phase (a training job's step)."""
    state = observation.datacenters["dc1"]
    stepped = dataclasses.replace(state, p_w=state.p_w + dp_w)
    return dataclasses.replace(observation, datacenters={"dc1": stepped})


def test_the_voltage_margin_is_z_times_the_running_spread_of_the_uncontrolled_draws_voltage_steps():
    """The site's draw beyond its controlled models rises by dp (W per phase) between two steps,
    which moves every bus-phase by H dp = -K 3 dp (pu); s^2 = (1 - k) (K 3 dp)^2 with
    k = 0.5^(dt / half-life), and the limit enforced is 0.95 + z s, so 0.951 pu is priced as an
    under-voltage. The controller's own models changing their draw (a batch change), or readings
    that move while the draw does not (a meter's error), leave it at 0."""
    ctx = make_context([toy_model()])
    params = {"voltage_margin_sigmas": 2.0, "voltage_margin_halflife_s": 10.0, "voltage_dual_step": 1.0}
    ctrl = _ofo(ctx, **params)
    ctrl.update_duals(make_observation(ctx, 1.0))
    np.testing.assert_array_equal(ctrl.lam_under, 0.0)
    dp = 200_000.0
    margin = 2.0 * math.sqrt((1.0 - 0.5 ** (1.0 / 10.0)) * (K_PU_PER_W * 3 * dp) ** 2)
    low = [0.951, 1.0, 1.0, 1.0, 1.0, 1.0]
    ctrl.update_duals(_with_site_step(make_observation(ctx, low), dp))
    assert margin > 0.002
    assert ctrl.lam_under[0] == pytest.approx(0.95 + margin - 0.951, rel=1e-9)
    np.testing.assert_array_equal(ctrl.lam_under[1:], 0.0)
    still = _ofo(ctx, **params)
    for v, batch in ((1.0, 128), (low, 64), ([0.97, 1.01, 0.99, 1.0, 1.0, 1.0], 8), (low, 512)):
        still.update_duals(make_observation(ctx, v, batches={"m1": batch}))
    np.testing.assert_array_equal(still.lam_under, 0.0)


def test_log_total_throughput_weighs_a_model_by_its_share_of_the_tokens():
    """``log_total``: ``-w n_i T_i'(x_i) / sum_j n_j T_j(x_j)``; a model with 3 times the replicas
    pulls 3 times as hard, where ``log_per_model`` gives both ``-w T'/T``."""
    big, small = toy_model("big", replicas=300), toy_model("small", replicas=100)
    ctx = make_context([big, small])
    obs = make_observation(ctx, 1.0)
    ctrl = _ofo(ctx, throughput_weight=2.0, throughput_objective="log_total", latency_dual_step=0.0)
    c = ctrl.curves[("dc1", "big")]
    x = math.log2(128)
    total = 400 * c.throughput_tok_s.value(x)
    assert ctrl.gradient(obs, "dc1", "big") == pytest.approx(-2.0 * 300 * c.throughput_tok_s.slope(x) / total)
    assert ctrl.gradient(obs, "dc1", "small") == pytest.approx(-2.0 * 100 * c.throughput_tok_s.slope(x) / total)
    fair = _ofo(ctx, throughput_weight=2.0, latency_dual_step=0.0)
    per_model = -2.0 * c.throughput_tok_s.slope(x) / c.throughput_tok_s.value(x)
    assert fair.gradient(obs, "dc1", "big") == pytest.approx(per_model)
    assert fair.gradient(obs, "dc1", "small") == pytest.approx(per_model)


def test_voltage_prices_hold_while_the_grid_carries_none_of_the_sites_load():
    """With the site out (or every hall on its UPS) batch sizes move no grid power: an under- or
    over-voltage then does not raise its price (anti-windup), and does again once the site is back."""
    ctx = make_context([toy_model()])
    ctrl = _ofo(ctx, voltage_dual_step=1.0)
    for v in (0.93, 1.07):
        obs = make_observation(ctx, v)
        out = dataclasses.replace(obs.datacenters["dc1"], online=False)
        ctrl.update_duals(dataclasses.replace(obs, datacenters={"dc1": out}))
    np.testing.assert_array_equal(ctrl.lam_under, 0.0)
    np.testing.assert_array_equal(ctrl.lam_over, 0.0)
    ctrl.update_duals(make_observation(ctx, 0.93))
    np.testing.assert_allclose(ctrl.lam_under, 0.02, rtol=1e-12)
