"""Engine behaviour: order within an instant, exact periods, delays, events, batching, outputs."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from openg2g.control.config import ControllerSpec
from openg2g.core.commands import SetBatchSize, SetTaps
from openg2g.core.errors import CommandError, ControllerError, SimulationError
from openg2g.engine.clock import Clock, fraction_gcd
from openg2g.engine.simulation import Simulation
from tests.engine.toys import K_PU_PER_W, KilowattSite, ScriptedController, TwoBusGrid, make_loaded


@pytest.fixture
def log() -> list:
    return []


def _sim(log, out_dir=None, **overrides):
    """A simulation of the toy scenario without controllers."""
    return Simulation.from_scenario(
        make_loaded(**overrides), out_dir, components=([KilowattSite("dc", log)], TwoBusGrid(log), [])
    )


def test_fraction_gcd_and_clock_are_exact():
    assert fraction_gcd([Fraction(1, 10), Fraction(1, 4), Fraction(3)]) == Fraction(1, 20)
    clock = Clock([Fraction(1, 10), Fraction(1)])
    assert clock.ticks(Fraction(86400)) == 864000
    with pytest.raises(ValueError, match="not a whole number"):
        clock.ticks(Fraction(1, 3))
    # seconds of many ticks at once: the float nearest the exact rational, as one at a time
    thirds = Clock([Fraction(1, 3), Fraction(1, 10)])
    ticks = np.arange(0, 3 * 86400 * 30, 997)
    exact = [float(int(k) * Fraction(1, 30)) for k in ticks]
    assert thirds.seconds_of(ticks).tolist() == exact == [thirds.seconds(int(k)) for k in ticks]
    assert clock.seconds_of(np.array([3])).tolist() == [0.3] != [3 * 0.1]


def test_order_within_one_instant(log):
    event = {"t_s": 1, "command": "set_taps", "taps": [1, 1, 1], "bank": "reg1"}
    ctrl = ScriptedController(log)
    loaded = make_loaded(events=[event], controllers=[{"kind": "scripted"}])
    sim = Simulation.from_scenario(loaded, None, components=([KilowattSite("dc", log)], TwoBusGrid(log), [ctrl]))
    sim.run()
    at_one = [entry[0] for entry in log if entry[1] == pytest.approx(1.0)]
    assert at_one == ["apply", "dc", "grid", "control"]


def test_two_controllers_run_in_listed_order(log):
    first, second = ScriptedController(log, name="first"), ScriptedController(log, name="second")
    loaded = make_loaded(controllers=[{"kind": "a"}, {"kind": "b"}])
    Simulation.from_scenario(
        loaded, None, components=([KilowattSite("dc", log)], TwoBusGrid(log), [first, second])
    ).run()
    names = [e[2] for e in log if e[0] == "control"]
    assert names == ["first", "second"] * 5


def test_a_day_of_third_second_periods_lands_exactly_on_the_tick_grid():
    """24 h of 1/3 s datacenter, 60 s grid and 1 h control periods: every instant is k/3 s exactly
    (the float nearest the rational, no accumulated drift), the counts are whole and the last
    instant is the day's end."""
    clock = Clock([Fraction(1, 3), Fraction(60), Fraction(3600)])
    day = clock.ticks(Fraction(86400))
    dc = clock.seconds_of(np.arange(1, day + 1))
    grid_every = clock.ticks(Fraction(60))
    grid = clock.seconds_of(np.arange(grid_every, day + 1, grid_every))
    assert (len(dc), len(grid)) == (86400 * 3, 1440)
    assert dc[-1] == grid[-1] == 86400.0
    assert dc.tolist() == [k / 3 for k in range(1, day + 1)]  # int / int: correctly rounded
    assert all(dc[k - 1] == float(Fraction(k, 3)) for k in range(1, day + 1, 997))


def test_the_engine_samples_at_the_clock_instants(log):
    sim = _sim(log, duration_s=600, periods={"datacenter_s": "1/3", "grid_s": 60, "control_s": 3600})
    sim.run()
    dc_times = [e[1] for e in log if e[0] == "dc"]
    grid_times = [e[1] for e in log if e[0] == "grid"]
    assert dc_times == [k / 3 for k in range(1, 600 * 3 + 1)]
    assert grid_times == [60.0 * k for k in range(1, 11)]


def test_command_delay_takes_effect_later(log):
    cmd = SetBatchSize(site="dc", model="toy", batch_size=4)
    for delay, first_changed in ((0, 1.1), (Fraction(3, 10), 1.3)):
        log.clear()
        ctrl = ScriptedController(log, {1.0: [cmd]})
        loaded = make_loaded(controllers=[{"kind": "scripted", "delay_s": str(delay)}])
        site = KilowattSite("dc", log)
        grid = TwoBusGrid(log)
        Simulation.from_scenario(loaded, None, components=([site], grid, [ctrl])).run()
        applied = [e for e in log if e[0] == "apply"]
        assert applied and applied[0][1] == pytest.approx(float(delay) + 1.0)
        loads = np.array(grid.seen_loads)[:, 0]
        times = np.arange(1, len(loads) + 1) / 10
        assert times[np.argmax(loads > 1000.0)] == pytest.approx(first_changed)


def test_event_at_arbitrary_time(log):
    event = {"t_s": 2.35, "command": "set_batch_size", "site": "dc", "model": "toy", "batch_size": 2}
    grid = TwoBusGrid(log)
    Simulation.from_scenario(make_loaded(events=[event]), None, components=([KilowattSite("dc", log)], grid, [])).run()
    applied = [e for e in log if e[0] == "apply"]
    assert applied[0][1] == pytest.approx(2.35)
    loads = np.array(grid.seen_loads)[:, 0]
    assert loads[22] == 1000.0 and loads[23] == 2000.0  # samples at 2.3 s and 2.4 s


def test_grid_takes_mean_or_last_of_samples(log):
    periods = {"datacenter_s": "1/10", "grid_s": 1, "control_s": 1}
    for aggregation, expected in (("mean", 100.0 * 0.55), ("last", 100.0 * 1.0)):
        grid = TwoBusGrid(log)
        site = KilowattSite("dc", log, ramp_w_per_s=100.0)
        loaded = make_loaded(periods=periods, grid={"feeder": "two-bus", "load_aggregation": aggregation})
        Simulation.from_scenario(loaded, None, components=([site], grid, [])).run()
        assert grid.seen_loads[0][0] == pytest.approx(expected)


def test_batched_grid_equals_step_by_step(log, tmp_path):
    voltages = []
    for batch in (False, True):
        ctrl = ScriptedController(log, {2.0: [SetTaps(bank="reg1", taps=(2, 2, 2))]})
        out = tmp_path / f"batch{batch}"
        loaded = make_loaded(controllers=[{"kind": "s"}], grid={"feeder": "two-bus", "batch": batch})
        site = KilowattSite("dc", log, ramp_w_per_s=1000.0)
        Simulation.from_scenario(loaded, out, components=([site], TwoBusGrid(log, batchable=True), [ctrl])).run()
        voltages.append(pd.read_parquet(out / "grid_voltages"))
    pd.testing.assert_frame_equal(voltages[0], voltages[1])


def test_summary_metrics_by_hand(log, tmp_path):
    # 1 kW per phase for 5 s; v = 1 - 1e-4 -> no violation; with tap -9: v = 1 - 0.05625 - 1e-4
    event = {"t_s": 0, "command": "set_taps", "bank": "reg1", "taps": [-9, 0, 0]}
    sim = _sim(log, tmp_path, events=[event])
    summary = sim.run()
    assert summary["energy_mwh"] == pytest.approx(3 * 1000.0 * 5 / 3.6e9)
    v_low = 1 - 9 * 0.00625 - K_PU_PER_W * 1000
    assert summary["v_min_pu"] == pytest.approx(v_low)
    assert summary["violation_integral_pu_s"] == pytest.approx((0.95 - v_low) * 5)
    assert summary["undervoltage_integral_pu_s"] == summary["violation_integral_pu_s"]
    assert summary["overvoltage_integral_pu_s"] == 0.0
    assert summary["violation_time_s"] == pytest.approx(5.0)
    assert summary["mean_throughput_tok_s"] == pytest.approx(100.0)
    assert summary["itl_deadline_miss_fraction"] == 0.0
    written = json.loads((tmp_path / "summary.json").read_text())
    assert written["status"] == "complete" and written["sim_time_s"] == 5.0


def test_same_scenario_same_outputs(log, tmp_path):
    frames = []
    for k in range(2):
        ctrl = ScriptedController(log, {1.0: [SetBatchSize(site="dc", model="toy", batch_size=2)]})
        out = tmp_path / str(k)
        loaded = make_loaded(controllers=[{"kind": "s"}])
        Simulation.from_scenario(loaded, out, components=([KilowattSite("dc", log)], TwoBusGrid(log), [ctrl])).run()
        frames.append([pd.read_parquet(out / t) for t in ("datacenter", "models", "grid", "grid_voltages", "commands")])
    for a, b in zip(*frames):
        pd.testing.assert_frame_equal(a, b)


class _Interrupt(ScriptedController):
    def step(self, observation):
        if observation.t_s >= 50:
            raise KeyboardInterrupt
        return super().step(observation)


def test_interrupted_run_leaves_complete_files(log, tmp_path):
    ctrl = _Interrupt(log)
    loaded = make_loaded(duration_s=100, controllers=[{"kind": "s"}], outputs={"plots": False, "flush_every_s": 7})
    sim = Simulation.from_scenario(loaded, tmp_path, components=([KilowattSite("dc", log)], TwoBusGrid(log), [ctrl]))
    with pytest.raises(KeyboardInterrupt):
        sim.run()
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "interrupted"
    assert summary["sim_time_s"] == 50.0
    grid = pd.read_parquet(tmp_path / "grid")
    assert grid["t_s"].max() == 50.0 and len(grid) == 500
    assert len(pd.read_parquet(tmp_path / "grid_voltages")) == 1500
    assert not list(tmp_path.rglob("*.tmp"))


def test_controller_returning_garbage_is_named(log):
    class Bad(ScriptedController):
        def step(self, observation):
            return ["set batch to 8"]

    loaded = make_loaded(controllers=[{"kind": "bad"}])
    sim = Simulation.from_scenario(
        loaded, None, components=([KilowattSite("dc", log)], TwoBusGrid(log), [Bad(log, name="bad")])
    )
    with pytest.raises(ControllerError, match="controller 'bad' returned 'set batch to 8'"):
        sim.run()


def test_controller_raising_is_named_with_the_time(log, tmp_path):
    class Broken(ScriptedController):
        def step(self, observation):
            if observation.t_s >= 3:
                return [1 / 0]
            return []

    loaded = make_loaded(controllers=[{"kind": "broken"}])
    sim = Simulation.from_scenario(
        loaded, tmp_path, components=([KilowattSite("dc", log)], TwoBusGrid(log), [Broken(log, name="mine")])
    )
    with pytest.raises(
        ControllerError, match=r"t=3 s: controller 'mine' step\(\) raised ZeroDivisionError: division by zero"
    ):
        sim.run()
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["sim_time_s"] == 3.0


def test_rejected_command_stops_with_time_and_source(log):
    class StrictGrid(TwoBusGrid):
        def apply(self, command, t_s):
            raise CommandError("tap 1 is above this bank's range")

    ctrl = ScriptedController(log, {2.0: [SetTaps(bank="reg1", taps=(1, 1, 1))]}, name="tapper")
    loaded = make_loaded(controllers=[{"kind": "s"}])
    sim = Simulation.from_scenario(loaded, None, components=([KilowattSite("dc", log)], StrictGrid(log), [ctrl]))
    with pytest.raises(SimulationError, match=r"t=2 s: .*from controller 'tapper' was rejected: tap 1 is above"):
        sim.run()


def test_external_driving_matches_sensitivity(log):
    sim = _sim(log)
    sim.run_until(1)
    obs = sim.observation()
    assert obs.t_s == 1.0
    assert obs.voltage_sensitivity("dc")[0, 0] == -K_PU_PER_W
    sim.send([SetBatchSize(site="dc", model="toy", batch_size=4)])
    sim.run_until(2)
    assert sim.observation().datacenters["dc"].p_w[0] == 4000.0


def test_controllers_beyond_the_scenario_list_run_every_control_period(log, tmp_path):
    extra = ScriptedController(log, name="notebook")
    sim = Simulation.from_scenario(
        make_loaded(), str(tmp_path), components=([KilowattSite("dc", log)], TwoBusGrid(log), [extra])
    )
    sim.run()
    assert [e[1] for e in log if e[0] == "control"] == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert (tmp_path / "summary.json").exists()


def test_a_second_controller_writing_a_setting_stops_the_run(log):
    """Controllers that do not declare their settings are checked command by command: the first
    command writing what another controller wrote stops the run, naming both and the setting."""
    first = ScriptedController(log, {1.0: [SetTaps(bank="reg1", taps=(1, 1, 1))]}, name="first")
    second = ScriptedController(log, {3.0: [SetTaps(bank="reg1", taps=(2, 2, 2))]}, name="second")
    loaded = make_loaded(controllers=[{"kind": "a"}, {"kind": "b"}])
    sim = Simulation.from_scenario(
        loaded, None, components=([KilowattSite("dc", log)], TwoBusGrid(log), [first, second])
    )
    with pytest.raises(
        SimulationError,
        match=r"t=3 s: .*controllers\.1 \('second'\) writes regulator of bank 'reg1', "
        r"which controllers\.0 \('first'\) already writes; a setting has one owner",
    ):
        sim.run()
    assert [e[2].taps for e in log if e[0] == "apply"] == [(1, 1, 1)]  # the second never took effect


def _observed_voltages(log, duration_s: int, **spec) -> tuple[np.ndarray, np.ndarray]:
    """What two controllers read each step (the first with ``spec``, the second exactly) over a
    toy run: arrays of shape (steps, bus-phases)."""
    noisy, exact = ScriptedController(log, name="noisy"), ScriptedController(log, name="exact")
    loaded = make_loaded(duration_s=duration_s, controllers=[{"kind": "noisy", **spec}, {"kind": "exact"}])
    Simulation.from_scenario(
        loaded, None, components=([KilowattSite("dc", log)], TwoBusGrid(log), [noisy, exact])
    ).run()
    read = np.array([o.grid.v_pu for o in noisy.observations])
    true = np.array([o.grid.v_pu for o in exact.observations])
    return read, true


def test_a_controllers_voltage_noise_is_its_own_seeded_gaussian_error(log):
    """``voltage_noise_pu: 0.01``: the first controller reads the solution plus an error of mean 0
    and standard deviation 0.01 pu (3,000 draws: within 5 standard errors), the same draws on a
    rerun; the second, listed without it, reads the solution itself."""
    read, true = _observed_voltages(log, 1000, voltage_noise_pu=0.01)
    error = (read - true).ravel()
    assert error.size == 3000 and np.all(error != 0.0)
    assert abs(error.mean()) < 5 * 0.01 / np.sqrt(error.size)
    assert error.std() == pytest.approx(0.01, rel=5 * np.sqrt(0.5 / error.size))
    again, _ = _observed_voltages([], 1000, voltage_noise_pu=0.01)
    np.testing.assert_array_equal(again, read)
    exact, true_again = _observed_voltages([], 20)
    np.testing.assert_array_equal(exact, true_again)
    with pytest.raises(ValueError, match="voltage_noise_pu"):
        make_loaded(controllers=[{"kind": "noisy", "voltage_noise_pu": -0.01}])


def test_a_controller_with_exact_readings_dumps_and_hashes_as_before():
    """``voltage_noise_pu`` at its default 0 is left out of the dump (and so of the scenario's
    SHA-256 in ``summary.json``); a value given is kept."""
    assert "voltage_noise_pu" not in ControllerSpec(kind="ofo").model_dump()
    assert ControllerSpec(kind="ofo", voltage_noise_pu=0.004).model_dump()["voltage_noise_pu"] == 0.004
