"""What controllers can foresee: the engine hands them the scenario's events and each site's
announced training job, and the forecast helpers read them as documented."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from openg2g.controllers._forecast import TrainingEstimate, tap_incidence
from openg2g.core.commands import SetInferenceScale, SetTaps
from openg2g.core.interfaces import RegulatorInfo, TrainingInfo
from openg2g.engine.simulation import Simulation
from openg2g.scenario.loader import load_scenario

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def test_context_carries_scheduled_events_and_the_training_job():
    sim = Simulation.from_scenario(load_scenario(SCENARIOS / "ieee13_mpc.yaml"))
    ctx = sim.context(1.0)
    assert [e.t_s for e in ctx.events] == [1500.0, 2500.0, 3300.0]
    assert ctx.events[0].command == SetTaps(bank="reg1", taps=(16, 6, 17))
    assert isinstance(ctx.events[1].command, SetInferenceScale)
    job = ctx.sites["dc1"].training
    assert job is not None and (job.start_s, job.end_s, job.gpus) == (1000.0, 2000.0, 2400)
    # the study's job: 400 W peak and ~253 W mean per GPU (TrainingSpec's documented defaults)
    assert job.peak_power_w == pytest.approx(2400 * 400.0)
    assert job.mean_power_w / 2400 == pytest.approx(253.0, rel=0.01)


def test_tap_incidence_follows_the_phase_letter():
    reg = RegulatorInfo("r", ("a", "c"), -16, 16, 0.00625)
    a = tap_incidence(["1.a", "1.b", "1.c", "2.c"], reg)
    np.testing.assert_array_equal(a, [[0.00625, 0], [0, 0], [0, 0.00625], [0, 0.00625]])


def test_training_estimate_starts_from_the_announcement_and_converges_to_observations():
    info = TrainingInfo(start_s=10.0, end_s=1e6, gpus=100, mean_power_w=30e3, peak_power_w=40e3)
    est = TrainingEstimate(info, alpha=0.1)
    times = np.array([5.0, 10.0, 20.0])
    np.testing.assert_array_equal(est.level(times), [0.0, 30e3, 30e3])
    np.testing.assert_array_equal(est.spread(times), [0.0, 5e3, 5e3])
    est.observe(5.0, 99e3)  # before the job: not its power
    assert est.level_w == 30e3
    rng = np.random.default_rng(0)
    for t in range(10, 2000):
        est.observe(float(t), 20e3 + 2e3 * rng.standard_normal())
    assert est.level_w == pytest.approx(20e3, abs=1e3)
    assert np.sqrt(est.var_w2) == pytest.approx(2e3, rel=0.3)
