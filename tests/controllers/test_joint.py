"""Joint tap + batch control: the decision against brute force over tap moves and batch sizes,
the hourly tap budget, and bad parameters."""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from openg2g.controllers.joint import JointController
from openg2g.core.commands import SetTaps
from openg2g.core.errors import ControllerError, ScenarioError
from openg2g.scenario.loader import load_scenario
from tests.controllers.conftest import make_context, make_observation, toy_model

SIZES = (8, 16, 32, 64, 128)
SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def _context():
    return make_context(
        [
            toy_model("m1", batch_sizes=SIZES, replicas=400, initial_batch_size=32, itl_deadline_s=None),
            toy_model(
                "m2", batch_sizes=SIZES, replicas=150, p_span_w=900.0, initial_batch_size=32, itl_deadline_s=None
            ),
        ]
    )


def _with_taps(obs, taps):
    return replace(obs, grid=replace(obs.grid, taps={"reg1": tuple(taps)}))


def _joint(**kw) -> JointController:
    params = {"max_tap_operations_per_hour": 10, "max_move_log2": 10.0, "voltage_noise_pu": 0.002, **kw}
    return JointController(JointController.Config(**params))


@pytest.mark.parametrize(
    "v_pu",
    [
        [0.94] * 6,  # under-voltage on every phase
        [0.97, 0.97, 1.056, 0.97, 0.97, 1.052],  # over-voltage on phase c only
        [0.947, 0.99, 0.99, 0.95, 0.99, 0.99],  # near the lower limit on phase a
        [0.99] * 6,  # inside the band: no move is worth its cost
    ],
)
def test_decision_matches_brute_force_over_taps_and_batches(v_pu):
    ctx = _context()
    ctrl = _joint(tap_weight=0.02)
    ctrl.reset(ctx, 0)
    obs = make_observation(ctx, v_pu, sensitivity=-5e-8 * np.ones((6, 3)))
    prob = ctrl.problem(obs)
    moves = ctrl.candidate_moves(obs)
    assert len(moves) == 6  # +-1 on each of the three phases
    move, choice = ctrl.decide(prob, moves)
    combos = np.array(list(itertools.product(range(len(SIZES)), repeat=2)))
    best = (np.inf, None, None)
    for m in [None, *moves]:
        p = prob if m is None else prob.shifted(ctrl._incidence[m[0]][:, m[1]] * m[2])
        costs = p.cost(combos) + (0.0 if m is None else 0.02)
        j = int(np.argmin(costs))
        if costs[j] < best[0] - 1e-12:
            best = (costs[j], m, combos[j])
    assert move == best[1]
    np.testing.assert_array_equal(choice, best[2])


def test_overvoltage_on_one_phase_lowers_that_phase():
    ctx = _context()
    ctrl = _joint()
    ctrl.reset(ctx, 0)
    cmds = ctrl.step(make_observation(ctx, [0.99, 0.99, 1.06, 0.99, 0.99, 1.06], batches={"m1": 128, "m2": 128}))
    assert [c for c in cmds if isinstance(c, SetTaps)] == [SetTaps(bank="reg1", taps=(0, 0, -1))]


def test_hourly_budget_limits_tap_operations():
    """Under a lasting over-voltage the controller moves as often as dwell and budget allow: two
    steps in the first hour, then again once the first move is an hour old."""
    ctx = _context()
    ctrl = _joint(max_tap_operations_per_hour=2, tap_dwell_s=0.0)
    ctrl.reset(ctx, 0)
    taps = [0, 0, 0]
    moved_at = []
    for t in [*range(6), *range(3598, 3604)]:
        obs = _with_taps(make_observation(ctx, [0.99, 0.99, 1.08, 0.99, 0.99, 1.08], t_s=float(t)), taps)
        for c in ctrl.step(obs):
            if isinstance(c, SetTaps):
                taps = list(c.taps)
                moved_at.append(t)
    assert moved_at == [0, 1, 3600, 3601]
    assert taps == [0, 0, -4]


def test_no_budget_no_moves():
    ctx = _context()
    ctrl = _joint(max_tap_operations_per_hour=0)
    ctrl.reset(ctx, 0)
    cmds = ctrl.step(make_observation(ctx, [0.99, 0.99, 1.08, 0.99, 0.99, 1.08]))
    assert not [c for c in cmds if isinstance(c, SetTaps)]


def test_bad_params():
    with pytest.raises(ValidationError, match="max_tap_operations_per_hour"):
        JointController.Config(max_tap_operations_per_hour=-1)
    with pytest.raises(ControllerError, match="tap-operation limit"):
        JointController()
    ctrl = _joint(banks=["reg9"])
    with pytest.raises(ControllerError, match=r"unknown regulator banks \['reg9'\]; valid banks: \['reg1'\]"):
        ctrl.reset(_context(), 0)


def test_negative_limit_in_a_scenario_names_the_field():
    with pytest.raises(ScenarioError, match=r"controllers\.0\.params\.max_tap_operations_per_hour"):
        load_scenario(
            SCENARIOS / "ieee13_joint.yaml",
            overrides=[
                "controllers.0.kind=openg2g.controllers.joint:JointController",  # by module, registered or not
                "controllers.0.params.max_tap_operations_per_hour=-3",
            ],
        )


OVERVOLTAGE = [
    "duration_s=150",
    "outputs.plots=false",
    # the tap schedule's late state, early: phase c at +17 while inference runs at half load
    (
        "events=[{t_s: 5, command: set_inference_scale, site: dc1, fraction: 0.5, ramp_s: 0},"
        " {t_s: 10, command: set_taps, bank: reg1, taps: [16, 6, 17]}]"
    ),
]


@pytest.mark.slow
def test_closed_loop_joint_removes_an_overvoltage_batches_cannot():
    """Phase c over 1.05 pu with every batch already large: the MPC alone cannot lower it, the joint
    controller moves taps within its budget (3 steps) and the over-voltage integral falls."""
    from openg2g.engine.simulation import Simulation
    from openg2g.scenario.build import build_components
    from openg2g.scenario.run import run_scenario

    mpc = run_scenario(
        SCENARIOS / "ieee13_joint.yaml",
        overrides=[*OVERVOLTAGE, "controllers=[{kind: mpc, params: {miss_fraction_target: 0.045}}]"],
    ).summary
    loaded = load_scenario(SCENARIOS / "ieee13_joint.yaml", overrides=[*OVERVOLTAGE, "controllers=[{kind: noop}]"])
    sites, grid, _ = build_components(loaded)
    joint = _joint(max_tap_operations_per_hour=3, miss_fraction_target=0.045, max_move_log2=6.0, voltage_noise_pu=5e-4)
    summary = Simulation.from_scenario(loaded, components=(sites, grid, [joint])).run()
    assert mpc["overvoltage_integral_pu_s"] > 0.1, "the case must over-volt"
    assert summary["overvoltage_integral_pu_s"] < 0.5 * mpc["overvoltage_integral_pu_s"]
    assert 0 < joint.operations_last_hour(150.0) <= 3
