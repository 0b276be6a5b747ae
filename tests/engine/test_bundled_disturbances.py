"""The bundled disturbance scenarios tell the story their descriptions and the docs tell."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from openg2g.scenario.run import run_scenario

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def virginia(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("virginia")
    return run_scenario("virginia_load_loss", out, ["outputs.plots=false"]).summary


def test_virginia_six_faults_lock_the_line_out_and_five_campuses_leave(virginia: dict) -> None:
    (fault,) = virginia["disturbances"]
    assert fault["outcome"] == "lockout" and fault["start_s"] == 10.0 and fault["end_s"] == pytest.approx(91.0)
    left = {site: events[0] for site, rt in virginia["ride_through"].items() if (events := rt["events"])}
    # the campus built to a ride-through requirement stays through all six faults
    assert set(left) == {"campus1", "campus2", "campus4", "campus5", "campus6"}
    # the sag counter leaves at the third fault (15.67 s), the legacy windows at the first
    assert left["campus2"]["start_s"] == pytest.approx(15 + 2 / 3, abs=0.02)
    assert all(left[c]["start_s"] < 10.05 for c in ("campus1", "campus4", "campus5", "campus6"))
    assert left["campus4"]["blocks_tripped"] == ["trip_half"] and left["campus4"]["tokens_not_served"] > 0
    # five of six campuses of about 234 MW each: a loss of more than 1.1 GW, the frequency up
    assert 1100 < virginia["load_lost_mw"] < 1250
    assert 60.05 < virginia["frequency_zenith_hz"] < 60.2 and virginia["frequency_nadir_hz"] < 60.0


def test_ieee13_the_coordinated_return_keeps_the_feeder_higher(tmp_path: Path) -> None:
    lows = {}
    for name in ("ieee13_fault_ups", "ieee13_fault_return"):
        summary = run_scenario(name, tmp_path / name, ["outputs.plots=false", "duration_s=300"]).summary
        (event,) = summary["ride_through"]["dc1"]["events"]
        assert event["blocks_transferred"] == ["hall1", "hall2", "hall3", "hall4"]
        grid = pd.read_parquet(tmp_path / name / "grid")
        lows[name] = float(grid.loc[grid["t_s"] > 40, "v_min_pu"].min())  # after the fault and its reclosings
        assert json.loads((tmp_path / name / "summary.json").read_text())["disturbances"][0]["outcome"] == "reclosed"
    assert lows["ieee13_fault_ups"] < 0.92 < lows["ieee13_fault_return"]
