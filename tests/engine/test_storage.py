"""The storage table and the storage state controllers observe, on the IEEE 13 feeder: a battery's
state of charge by hand, its stop at the floor, and the SOC-aware droop stopping there."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from openg2g.controllers.storage_droop import StorageDroopController
from openg2g.core.commands import SetStoragePower
from openg2g.engine.simulation import Simulation
from openg2g.grid.feeder.backend import FeederGrid
from tests.engine.toys import ScriptedController, make_loaded

P_W = 300e3
KWH, SOC0, SOC_MIN, EFFICIENCY = 1.0, 0.5, 0.1, 0.9
BATTERY = {
    "name": "b1",
    "bus": "675",
    "kw": 400,
    "kwh": KWH,
    "soc0": SOC0,
    "soc_min": SOC_MIN,
    "soc_max": 0.9,
    "efficiency": EFFICIENCY,
}


def _run(out: Path | None, controller, duration_s: float = 10, control_s: float = 1) -> Simulation:
    """The ieee13 feeder with battery b1 and no datacenter; one grid solve per second."""
    loaded = make_loaded(
        duration_s=duration_s,
        periods={"datacenter_s": 1, "grid_s": 1, "control_s": control_s},
        grid={"feeder": "openg2g-ieee13", "storage": [BATTERY]},
        datacenters=[],
    )
    grid = FeederGrid.from_spec(loaded.scenario.grid, [], Path("."))
    sim = Simulation.from_scenario(loaded, out, components=([], grid, [controller]))
    sim.run()
    return sim


def test_storage_table_follows_the_state_of_charge_by_hand_and_shows_the_stop_at_the_floor(tmp_path: Path) -> None:
    """300 kW sent at t = 1 s, after that instant's solve: each later solve moves the state of charge
    by P dt / (3600 efficiency capacity) = 300e3 / (3600 x 0.9 x 1000) = 0.0926 per second, so
    soc(t) = 0.5 - 0.0926 (t - 1) until the floor 0.1, reached in the solve at 6 s. From there P is
    0 and limited by soc_min, while the commands table keeps the 300 kW setpoint."""
    ctrl = ScriptedController([], {1.0: [SetStoragePower("b1", P_W, 20e3)]})
    _run(tmp_path, ctrl)
    table = pd.read_parquet(tmp_path / "storage")
    assert list(table["t_s"]) == [float(t) for t in range(1, 11)]
    assert set(table["name"]) == {"b1"} and set(table["bus"]) == {"675"}
    t = table["t_s"].to_numpy()
    by_hand = np.maximum(SOC0 - P_W * (t - 1.0) / (3600.0 * EFFICIENCY * KWH * 1000.0), SOC_MIN)
    np.testing.assert_allclose(table["soc"], by_hand, rtol=1e-12)
    np.testing.assert_allclose(table["energy_kwh"], by_hand * KWH, rtol=1e-12)
    discharging = (t >= 2) & (t <= 5)
    np.testing.assert_array_equal(table["p_w"], np.where(discharging, P_W, 0.0))
    np.testing.assert_array_equal(table["p_set_w"], np.where(t >= 2, P_W, 0.0))  # t = 1 solved before the command
    np.testing.assert_array_equal(table["q_var"], np.where(t >= 2, 20e3, 0.0))  # Q is held at the floor
    np.testing.assert_array_equal(table["limited"], t >= 6)
    assert list(table["limit"]) == ["none"] * 5 + ["soc_min"] * 5
    commands = pd.read_parquet(tmp_path / "commands")
    assert list(commands["command"]) == ["set_storage_power"]
    assert '"p_w":300000.0' in commands["fields"].iloc[0]


def test_the_observation_carries_the_storage_states_of_the_table(tmp_path: Path) -> None:
    ctrl = ScriptedController([], {1.0: [SetStoragePower("b1", P_W, 0.0)]})
    _run(tmp_path, ctrl)
    table = pd.read_parquet(tmp_path / "storage").set_index("t_s")
    for obs in ctrl.observations:
        state = obs.grid.storage["b1"]
        row = table.loc[obs.t_s]
        assert (state.unit.name, state.unit.bus, state.unit.capacity_kwh) == ("b1", "675", KWH)
        assert (state.soc, state.energy_kwh, state.p_w, state.q_var, state.p_set_w) == (
            row["soc"],
            row["energy_kwh"],
            row["p_w"],
            row["q_var"],
            row["p_set_w"],
        )
        assert state.limited == row["limited"] and (state.limit or "none") == row["limit"]
    assert ctrl.observations[-1].grid.storage["b1"].limit == "soc_min"


def test_a_run_without_batteries_writes_no_storage_table(tmp_path: Path) -> None:
    (tmp_path / "storage").mkdir()
    (tmp_path / "storage" / "part-00000.parquet").write_bytes(b"an earlier run's")
    loaded = make_loaded(duration_s=2, grid={"feeder": "openg2g-ieee13"}, datacenters=[])
    grid = FeederGrid.from_spec(loaded.scenario.grid, [], Path("."))
    Simulation.from_scenario(loaded, tmp_path, components=([], grid, [])).run()
    assert not list((tmp_path / "storage").glob("*.parquet"))


def test_the_soc_aware_droop_discharges_to_the_floor_and_stops_there(tmp_path: Path) -> None:
    """The droop asks 300 kW at any voltage below 1.05 pu (every bus of the feeder), every 2 s; a
    solve every second moves the state of charge by 0.0926 at 300 kW. At 2 s the battery holds
    (0.5 - 0.1) x 1 kWh x 0.9 = 0.36 kWh above the floor, 648 kW for 2 s: 300 kW is sent. At 4 s
    (soc 0.3148) 348 kW: 300 kW stands. At 6 s (soc 0.1296) 0.0267 kWh, 48 kW for 2 s, which it is
    sent, reaching the floor at 8 s; then it is sent 0, once."""
    droop = StorageDroopController(
        StorageDroopController.Config(
            storage="b1", buses=["675"], v_ref_pu=1.05, deadband_pu=0.0, droop_kw_per_pu=1e7, p_max_kw=300
        )
    )
    sim = _run(tmp_path, droop, duration_s=12, control_s=2)
    commands = pd.read_parquet(tmp_path / "commands")
    assert list(commands["t_issued_s"]) == [2.0, 6.0, 8.0]
    sent_kw = [float(f.split('"p_w":')[1].split(",")[0]) / 1e3 for f in commands["fields"]]
    soc_6 = SOC0 - 4 * 300e3 / (3600.0 * EFFICIENCY * KWH * 1000.0)  # 300 kW in the solves at 3, 4, 5, 6 s
    assert sent_kw == [300.0, pytest.approx((soc_6 - SOC_MIN) * KWH * EFFICIENCY * 1800.0, rel=1e-12), 0.0]
    table = pd.read_parquet(tmp_path / "storage")
    assert table["soc"].min() >= SOC_MIN
    assert table.loc[table["t_s"] >= 8, "soc"].to_numpy() == pytest.approx(SOC_MIN, abs=1e-12)
    assert sim.observation().grid.storage["b1"].p_set_w == 0.0
