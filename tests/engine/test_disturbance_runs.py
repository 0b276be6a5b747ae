"""Runs with disturbances: cycle steps inside their windows, the regular periods outside, every
figure on the steps as they fell, and the load the sites lost."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from openg2g.core.errors import ScenarioError
from openg2g.engine.timeline import Timeline
from openg2g.scenario.loader import load_scenario
from openg2g.scenario.run import run_scenario

SCENARIO = """
name: trip
seed: 0
duration_s: 12
grid: {feeder: openg2g-ieee13}
datacenters:
  - name: dc1
    bus: "671"
    power_factor: 0.95
    base_load_kw_per_phase: 100
    gpu_capacity: 1000
    models:
      - {model: Llama-3.1-8B, gpus_per_replica: 1, replicas: 500, batch_size: 128}
disturbances:
  window: {step_s: 1/60, after_s: 1/2}
  events:
    - {kind: line_trip, line: "670671", start_s: 5, reclose_after_s: 1/2}
outputs: {plots: false}
"""


@pytest.fixture(scope="module")
def trip_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("trip")
    (folder / "trip.yaml").write_text(SCENARIO)
    run_scenario(folder / "trip.yaml", folder / "out")
    return folder / "out"


def test_steps_are_one_cycle_inside_the_window_only(trip_run: Path) -> None:
    grid = pd.read_parquet(trip_run / "grid")
    t = grid["t_s"].to_numpy()
    step = np.diff(np.concatenate([[0.0], t]))
    fine = (t > 4.9) & (t <= 6.0)  # the window: the grid step before 5 s to 5.5 s + 0.5 s
    assert np.allclose(step[fine], 1 / 60, rtol=0, atol=1e-12) and np.allclose(step[~fine], 0.1, atol=1e-12)
    summary = json.loads((trip_run / "summary.json").read_text())
    assert summary["grid_steps"] == len(t) == 120 - 11 + 66
    assert summary["disturbance_windows_s"] == [[4.9, 6.0]]
    datacenter = pd.read_parquet(trip_run / "datacenter")
    assert np.array_equal(datacenter["t_s"].to_numpy(), t)  # sampled at the grid's instants here


def test_energy_and_unsupplied_time_count_each_step_at_its_length(trip_run: Path) -> None:
    summary = json.loads((trip_run / "summary.json").read_text())
    datacenter = pd.read_parquet(trip_run / "datacenter")
    t = datacenter["t_s"].to_numpy()
    dt = np.diff(np.concatenate([[0.0], t]))
    assert summary["energy_mwh"] == pytest.approx(float((datacenter["power_w"] * dt).sum()) / 3.6e9, rel=1e-12)
    cut = ~datacenter["supplied"].to_numpy()
    assert np.array_equal(t[cut], t[(t >= 5 - 1e-9) & (t < 5.5 - 1e-9)])  # 30 cycles with the line open
    assert summary["site_unsupplied_s"]["dc1"] == pytest.approx(0.5, abs=1e-12)


def test_the_load_lost_is_the_draw_before_the_trip(trip_run: Path) -> None:
    summary = json.loads((trip_run / "summary.json").read_text())
    datacenter = pd.read_parquet(trip_run / "datacenter")
    before = datacenter.loc[datacenter["t_s"] < 5, "power_w"].iloc[-1]
    (event,) = summary["disturbances"]
    assert event | {"load_before_mw": None, "load_lost_mw": None} == {
        "name": "line_trip0",
        "kind": "line_trip",
        "start_s": 5.0,
        "end_s": 5.5,
        "outcome": "closed",
        "load_before_mw": None,
        "load_lost_mw": None,
        "load_lowest_at_s": 5.0,
    }
    assert event["load_before_mw"] == event["load_lost_mw"] == summary["load_lost_mw"] == before / 1e6
    events = pd.read_parquet(trip_run / "events")
    assert list(events["command"]) == ["set_line_in_service", "supply_lost", "set_line_in_service", "supply_restored"]
    assert json.loads(events["fields"].iloc[0])["disturbance"] == "line_trip0"


def test_a_disturbance_on_an_unknown_line_is_refused_naming_it(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(SCENARIO.replace('line: "670671"', 'line: "632671"'))
    from openg2g.scenario.preflight import check_start

    with pytest.raises(ScenarioError, match=r"disturbances\.events\.0: at t=5 s set_line_in_service would be rejected"):
        check_start(load_scenario(tmp_path / "bad.yaml"))


def test_the_window_step_must_divide_the_periods(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(SCENARIO.replace("step_s: 1/60", "step_s: 3/100"))
    with pytest.raises(
        ScenarioError, match=r"periods.datacenter_s \(1/10 s\) must be a whole multiple of disturbances.window.step_s"
    ):
        load_scenario(tmp_path / "bad.yaml")


def test_timeline_regimes_and_step_counts() -> None:
    # periods of 6 ticks (datacenter) and 12 (grid); one window [24, 48) at 2-tick steps
    timeline = Timeline(6, 12, [(24, 48)], 2)
    assert timeline.grid_step(12) == (12, 24)
    assert timeline.grid_step(24) == (2, 48) and timeline.dc_step(46) == (2, 48)
    assert timeline.grid_step(48) == (12, None)
    assert timeline.count(120, 12) == (120 - 24) // 12 + 24 // 2
    assert timeline.count(30, 6) == 24 // 6 + 6 // 2  # a run ending inside the window
    assert Timeline(6, 12).grid_step(0) == (12, None) and Timeline(6, 12).count(120, 6) == 20
    assert Fraction(1, 60) * 6 == Fraction(1, 10)


@pytest.mark.slow
def test_the_frequency_follows_the_grids_draw_from_the_bulk_system(tmp_path: Path) -> None:
    from openg2g.grid.frequency import SystemFrequency, SystemFrequencySpec

    (tmp_path / "f.yaml").write_text(
        SCENARIO.replace("grid: {feeder: openg2g-ieee13}", "grid: {feeder: openg2g-ieee13, frequency: {base_mw: 20}}")
    )
    summary = run_scenario(tmp_path / "f.yaml", tmp_path / "out").summary
    grid = pd.read_parquet(tmp_path / "out" / "grid")
    freq = pd.read_parquet(tmp_path / "out" / "frequency")
    assert np.array_equal(freq["t_s"].to_numpy(), grid["t_s"].to_numpy())
    p_sub = grid[["p_sub_a_w", "p_sub_b_w", "p_sub_c_w"]].sum(axis=1).to_numpy()
    assert np.array_equal(freq["delta_p_w"].to_numpy(), p_sub - p_sub[0])
    # the same steps through a model of its own give the same frequencies, bit for bit
    model = SystemFrequency(SystemFrequencySpec(base_mw=20), event_t_s=5.0)
    t = freq["t_s"].to_numpy()
    dt = np.diff(np.concatenate([[0.0], t]))
    # the engine's steps are its exact periods: 0.1 s and 1/60 s as the clock gives them
    steps = np.where(dt > 0.05, 0.1, 1 / 60)
    again = [model.step(float(h), float(d), float(tt)) for h, d, tt in zip(steps, freq["delta_p_w"], t)]
    assert np.array_equal(np.array(again), freq["f_hz"].to_numpy())
    # the site's loss at 5 s raises the frequency; settling is counted from that first disturbance
    assert summary["frequency_zenith_hz"] > 60.0 and summary["frequency_zenith_at_s"] > 5.0
    assert summary["frequency_event_at_s"] == 5.0
    assert summary["frequency_nadir_hz"] <= 60.0 + 1e-9
