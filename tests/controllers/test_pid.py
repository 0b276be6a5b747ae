"""PID: discrete law against closed-form responses, anti-windup, and the controller wrapper."""

from __future__ import annotations

import math

import numpy as np
import pytest
from pydantic import ValidationError

from openg2g.controllers.pid import DiscretePID, PIDController
from openg2g.core.commands import SetBatchSize, SetPowerCap
from tests.controllers.conftest import make_context, make_observation, toy_model


def _first_order_loop(
    pid: DiscretePID, tau_s: float, gain: float, r: float, dt_s: float, t_end_s: float
) -> tuple[np.ndarray, np.ndarray]:
    """Closed loop of ``pid`` with the plant ``tau dy/dt = -y + gain u`` (exact ZOH discretization)."""
    a = math.exp(-dt_s / tau_s)
    y = 0.0
    ts, ys = [0.0], [0.0]
    for k in range(round(t_end_s / dt_s)):
        u = pid.update(r, y, dt_s)
        y = a * y + (1.0 - a) * gain * u
        ts.append((k + 1) * dt_s)
        ys.append(y)
    return np.array(ts), np.array(ys)


def test_p_only_matches_discrete_closed_form():
    tau, gain, kp, r, dt = 5.0, 2.0, 1.5, 1.0, 0.5
    pid = DiscretePID(kp=kp, ki=0.0, kd=0.0, u_min=-1e9, u_max=1e9)
    ts, ys = _first_order_loop(pid, tau, gain, r, dt, 20.0)
    a = math.exp(-dt / tau)
    rho = a - (1 - a) * gain * kp
    y_ss = gain * kp * r / (1 + gain * kp)
    expected = y_ss * (1 - rho ** np.arange(len(ts)))
    np.testing.assert_allclose(ys, expected, atol=1e-12)


def test_pi_with_pole_cancellation_matches_continuous_first_order_response():
    # Ki = Kp / tau cancels the plant pole: closed loop y(t) = r (1 - exp(-K Kp t / tau))
    tau, gain, kp, r, dt = 10.0, 2.0, 1.5, 0.8, 0.001
    pid = DiscretePID(kp=kp, ki=kp / tau, kd=0.0, u_min=-1e9, u_max=1e9)
    ts, ys = _first_order_loop(pid, tau, gain, r, dt, 20.0)
    expected = r * (1 - np.exp(-gain * kp * ts / tau))
    assert np.max(np.abs(ys - expected)) < 2e-3 * r
    assert ys[-1] == pytest.approx(expected[-1], rel=1e-3)


@pytest.mark.parametrize("mode", ["back_calculation", "clamping"])
def test_anti_windup_leaves_saturation_at_once(mode):
    pid = DiscretePID(kp=0.1, ki=1.0, kd=0.0, u_min=0.0, u_max=1.0, anti_windup=mode)
    for _ in range(1000):  # large positive error for a long time: output pinned at 1
        assert pid.update(10.0, 0.0, 0.1) == 1.0
    assert pid.integral <= 1.0 + 1e-9
    u = pid.update(-10.0, 0.0, 0.1)  # error reverses: output must leave the limit at once
    assert u < 1.0
    # without anti-windup the integral would be ~1000 and u would stay at 1 for ~1000 steps


@pytest.mark.parametrize("mode", ["back_calculation", "clamping"])
def test_output_leaves_the_limit_at_the_first_error_of_the_other_sign(mode):
    """The ieee13 gains (Kp = 2, Ki T = 10 > Kp) on a voltage loop (e = y - r), u_0 = 0.5, limits
    [0, 2/3]. With e = +0.01: u = 0.52 (I -> 0.1), 0.62 (I -> 0.2), then v = 0.72 saturates; back-
    calculation would leave I = u - u_0 - Kp e + Ki T e = 0.2467, clamping I = 0.2, both more than
    u_max - u_0 = 1/6, where the clip holds it. At the first error of the other sign (e = -0.001),
    u = 0.5 - 0.002 + 1/6 < 2/3 at once (unclipped back-calculation: 0.745, still pinned)."""
    pid = DiscretePID(kp=2.0, ki=10.0, kd=0.0, u_min=0.0, u_max=2 / 3, u0=0.5, anti_windup=mode, measurement_sign=-1.0)
    outputs = [pid.update(0.955, 0.965, 1.0) for _ in range(5)]
    assert outputs == pytest.approx([0.52, 0.62, 2 / 3, 2 / 3, 2 / 3], abs=1e-12)
    assert pid.integral == pytest.approx(1 / 6, abs=1e-12)
    assert pid.update(0.955, 0.954, 1.0) == pytest.approx(0.5 - 0.002 + 1 / 6, abs=1e-12)


def test_errors_inside_the_deadband_do_nothing_and_larger_ones_count_less_it():
    """Deadband 0.002 pu around the 0.955 setpoint: at 0.9535 (error -0.0015) the output is u_0 and
    the integral stays 0; at 0.952 the error counts as -0.001: u = 0.5 + 2 (-0.001), I = 10 (-0.001);
    back inside the band the output holds at u_0 + I = 0.49."""
    pid = DiscretePID(kp=2.0, ki=10.0, kd=0.0, u_min=0.0, u_max=1.0, u0=0.5, measurement_sign=-1.0, deadband=0.002)
    assert pid.update(0.955, 0.9535, 1.0) == 0.5 and pid.integral == 0.0
    assert pid.update(0.955, 0.952, 1.0) == pytest.approx(0.498, abs=1e-12)
    assert pid.integral == pytest.approx(-0.01, abs=1e-12)
    assert pid.update(0.955, 0.9565, 1.0) == pytest.approx(0.49, abs=1e-12)


def test_batch_sizes_rest_while_the_voltage_is_inside_the_default_deadband():
    ctx = make_context([toy_model("m1"), toy_model("m2")])  # both at 128: the output starts at their level
    ctrl = PIDController(PIDController.Config(setpoint=0.955, kp=2.0, ki_per_s=10.0, actuator="batch_size"))
    ctrl.reset(ctx, 0)
    assert ctrl.pid.deadband == 0.002  # worst_undervoltage's default
    for k, v in enumerate([0.9535, 0.9565, 0.9531, 0.9569]):  # noise within +-0.002 pu: no command
        assert ctrl.step(make_observation(ctx, v, t_s=float(k))) == []
    # 0.008 beyond the band: the level falls by Kp 0.008 = 0.016 (less than half of a size's 1/6),
    # then by 0.016 + Ki T 0.008 = 0.096: both models cut from 128 to 64
    assert ctrl.step(make_observation(ctx, 0.945, t_s=4.0)) == []
    assert {c.batch_size for c in ctrl.step(make_observation(ctx, 0.945, t_s=5.0))} == {64}


@pytest.mark.parametrize("budget", [3, None])
def test_a_models_batch_changes_at_most_the_budget_in_any_60_s(budget):
    """A P-only loop on readings that swing 0.03 pu either side of the setpoint every second (a
    meter's error beyond the deadband) flips the level across a size boundary each step; a budget of
    3 lets the flips at 0, 1 and 2 s through and then holds the size of 2 s (the low one) until the
    change at 0 s is more than 60 s old: at 60 s the level asks for that size anyway, at 61 s for
    the other, which goes. Without a budget every one of the 62 flips goes out."""
    ctx = make_context([toy_model("m1")])
    cfg = PIDController.Config(setpoint=0.955, kp=5.0, actuator="batch_size", max_changes_per_min=budget)
    ctrl = PIDController(cfg)
    ctrl.reset(ctx, 0)
    sent = []
    for k in range(62):
        v = 0.955 - 0.03 if k % 2 == 0 else 0.955 + 0.03
        sent += [(k, c.batch_size) for c in ctrl.step(make_observation(ctx, v, t_s=float(k)))]
    times = [k for k, _ in sent]
    if budget is None:
        assert len(sent) == 62
    else:
        assert times == [0, 1, 2, 61]


def test_derivative_acts_on_measurement_not_setpoint():
    pid = DiscretePID(kp=0.0, ki=0.0, kd=1.0, u_min=-10, u_max=10, u0=0.5)
    assert pid.update(0.0, 1.0, 1.0) == 0.5
    assert pid.update(5.0, 1.0, 1.0) == 0.5  # setpoint step: no kick
    assert pid.update(5.0, 2.0, 1.0) == pytest.approx(0.5 - 1.0)  # measurement rises 1/s: D = -Kd dy/dt


def test_voltage_below_setpoint_lowers_batch_sizes():
    ctx = make_context([toy_model("m1"), toy_model("m2", initial_batch_size=64)])
    ctrl = PIDController(PIDController.Config(setpoint=0.96, kp=5.0, ki_per_s=0.0, actuator="batch_size"))
    ctrl.reset(ctx, 0)
    cmds = ctrl.step(make_observation(ctx, 0.94))  # error -0.02 -> level drops by 0.1
    assert cmds and all(isinstance(c, SetBatchSize) for c in cmds)
    assert {c.model: c.batch_size for c in cmds}["m1"] < 128
    assert all(c.batch_size in ctx.sites["dc1"].models[c.model].batch_sizes for c in cmds)


def test_substation_power_above_setpoint_lowers_power_cap():
    ctx = make_context()
    cfg = PIDController.Config(
        measurement="substation_power", setpoint=2.0e6, kp=1e-4, ki_per_s=1e-4, actuator="power_cap", output_max=700.0
    )
    ctrl = PIDController(cfg)
    ctrl.reset(ctx, 0)
    cmds = ctrl.step(make_observation(ctx, 1.0, p_sub_w=(1e6, 1e6, 1e6)))  # 3 MW: 1 MW too much
    assert len(cmds) == 1 and isinstance(cmds[0], SetPowerCap)
    assert cmds[0].site == "dc1" and 200.0 <= cmds[0].cap_w_per_gpu < 700.0


def test_bad_params_name_the_field():
    with pytest.raises(ValidationError, match="kp"):
        PIDController.Config(setpoint=0.96, kp=-1.0)
    with pytest.raises(ValidationError, match="gain_p"):
        PIDController.Config(setpoint=0.96, kp=1.0, gain_p=2.0)
    with pytest.raises(ValidationError, match="output"):
        PIDController.Config(setpoint=0.96, kp=1.0, output_max=2.0)
    with pytest.raises(ValidationError, match="measurement"):
        PIDController.Config(setpoint=0.96, kp=1.0, measurement="frequency")
    with pytest.raises(ValidationError, match="deadband"):
        PIDController.Config(setpoint=0.96, kp=1.0, deadband=-0.001)
