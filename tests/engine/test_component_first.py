"""The engine built from components: a site of one's own, a bundled feeder and a stock controller,
without a scenario file; the same run named in a scenario file (a ``kind:`` plug-in site) writes
the same tables; :meth:`Simulation.steps` walks a run to the same numbers as :meth:`Simulation.run`."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from openg2g.controllers.tap_schedule import TapScheduleController
from openg2g.core.errors import ScenarioError
from openg2g.engine import Periods, Simulation
from openg2g.grid import GridSpec, SiteConnection, build_grid
from openg2g.record import MetricsRecorder, TableRecorder
from openg2g.scenario.loader import load_scenario
from openg2g.scenario.preflight import check_start
from openg2g.scenario.run import run_scenario
from openg2g.testing.constant import ConstantSite

KW = 500.0
SCHEDULE = [{"t_s": 30, "bank": "reg1", "taps": [10, 6, 10]}]
TABLES = ("datacenter", "grid", "commands", "events")


def _scenario(tmp_path: Path, kind: str = "constant", params: dict | None = None) -> Path:
    site = {"kind": kind, "name": "dc", "bus": "671", "power_factor": 1.0, "params": params or {"kw_per_phase": KW}}
    data = {
        "name": "flat",
        "duration_s": 60,
        "periods": {"datacenter_s": 0.1, "grid_s": 0.1, "control_s": 1},
        "grid": {"feeder": "openg2g-ieee13"},
        "datacenters": [site],
        "controllers": [{"kind": "tap_schedule", "params": {"schedule": SCHEDULE}}],
        "outputs": {"plots": False},
    }
    path = tmp_path / "flat.yaml"
    path.write_text(json.dumps(data))
    return path


def _tables(out: Path) -> dict[str, pd.DataFrame]:
    return {name: pd.read_parquet(out / name) for name in TABLES}


def test_a_run_built_in_code_writes_the_tables_of_the_same_run_from_a_file(tmp_path: Path) -> None:
    grid = build_grid(GridSpec(feeder="openg2g-ieee13"), [SiteConnection("dc", "671", power_factor=1.0)], Path("."))
    taps = TapScheduleController(TapScheduleController.Config(schedule=SCHEDULE))
    taps.name = "tap_schedule"  # as a scenario names it (the commands table's source)
    sim = Simulation(
        [ConstantSite("dc", "671", kw_per_phase=KW, power_factor=1.0)],
        grid,
        [taps],
        duration_s=60,
        periods=Periods(grid_s=0.1),
        recorders=[MetricsRecorder(), TableRecorder(tmp_path / "code")],
        name="flat",
    )
    in_code = sim.run()
    from_file = run_scenario(_scenario(tmp_path), tmp_path / "file").summary

    code, file = _tables(tmp_path / "code"), _tables(tmp_path / "file")
    for name in TABLES:
        pd.testing.assert_frame_equal(code[name], file[name], check_exact=True)
    # hand-computed: 3 x 500 kW for 60 s is 0.025 MWh; the schedule's taps arrive at 30 s
    assert in_code["energy_mwh"] == pytest.approx(0.025, rel=1e-12)
    assert from_file["energy_mwh"] == in_code["energy_mwh"]
    assert code["commands"]["t_effective_s"].tolist() == [30.0]
    for key in ("v_min_pu", "v_max_pu", "violation_integral_pu_s", "n_tap_changes", "grid_steps"):
        assert in_code[key] == from_file[key], key


def test_steps_walks_the_run_to_the_numbers_of_run(tmp_path: Path) -> None:
    loaded = load_scenario(_scenario(tmp_path))
    whole = Simulation.from_scenario(loaded, tmp_path / "whole").run()
    stepped = Simulation.from_scenario(loaded, tmp_path / "stepped")
    times = [observation.t_s for observation in stepped.steps(every_s=10)]
    assert times == [10.0, 20.0, 30.0, 40.0, 50.0, 60.0]
    for name, table in _tables(tmp_path / "whole").items():
        pd.testing.assert_frame_equal(table, _tables(tmp_path / "stepped")[name], check_exact=True)
    summary = json.loads((tmp_path / "stepped" / "summary.json").read_text())
    assert summary["status"] == "complete"
    assert summary["violation_integral_pu_s"] == whole["violation_integral_pu_s"]


def test_leaving_the_steps_early_closes_the_run_as_interrupted(tmp_path: Path) -> None:
    sim = Simulation.from_scenario(load_scenario(_scenario(tmp_path)), tmp_path / "out")
    for observation in sim.steps(every_s=10):
        if observation.t_s >= 20:
            break
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["status"] == "interrupted" and summary["sim_time_s"] == 20.0
    assert pd.read_parquet(tmp_path / "out" / "grid")["t_s"].max() == 20.0


@pytest.mark.parametrize(
    ("kind", "params", "message"),
    [
        ("no_such_backend", None, "unknown datacenter backend 'no_such_backend'"),
        ("openg2g.testing.toy:AnalyticGrid", None, "is not a subclass of openg2g.core.interfaces.DatacenterBackend"),
        ("constant", {"kw_per_phase": -1}, "kw_per_phase must be a finite number >= 0 kW"),
        ("constant", {"watts": 1}, "unexpected keyword argument 'watts'"),
    ],
)
def test_a_bad_plug_in_site_is_refused_naming_the_site(tmp_path: Path, kind: str, params: dict | None, message: str):
    with pytest.raises(ScenarioError) as err:
        check_start(load_scenario(_scenario(tmp_path, kind, params)))
    text = str(err.value)
    assert "datacenters.0.kind" in text and message in text and "'dc'" in text
