"""Block stepping: a run computed in blocks equals the same run stepped one instant at a time."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from openg2g.engine import simulation
from openg2g.scenario.run import run_scenario

TABLES = ("datacenter", "models", "grid", "grid_voltages", "commands", "events")

# DC and grid commands at instants that are neither control steps nor flushes, a ramp that spans
# several blocks, and a controller whose commands arrive 0.3 s after it sends them.
OVERRIDES = (
    "duration_s=40",
    "outputs.plots=false",
    "outputs.voltages=all",
    "outputs.flush_every_s=7",
    "periods.control_s=2",
    (
        "events=[{t_s: 3.05, command: set_batch_size, site: dc1, model: Llama-3.1-70B, batch_size: 32},"
        " {t_s: 4.3, command: set_replicas, site: dc1, model: Llama-3.1-8B, replicas: 300, ramp_s: 11.7},"
        " {t_s: 9.9, command: set_power_cap, site: dc1, cap_w_per_gpu: 450},"
        " {t_s: 12.1, command: set_taps, bank: reg1, taps: [16, 6, 17]},"
        " {t_s: 17.0, command: set_inference_scale, site: dc1, fraction: 0.613, ramp_s: 6.3},"
        " {t_s: 25.05, command: set_site_online, site: dc1, online: false},"
        " {t_s: 27.0, command: set_site_online, site: dc1, online: true}]"
    ),
    "controllers=[{kind: rule_based, delay_s: 0.3}]",
)


def _run(out: Path, monkeypatch: pytest.MonkeyPatch, cells: int) -> dict:
    monkeypatch.setattr(simulation, "_BLOCK_CELLS", cells)
    return run_scenario("ieee13_none", out, OVERRIDES).summary


@pytest.mark.slow
def test_one_step_blocks_equal_long_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stepped = _run(tmp_path / "stepped", monkeypatch, 1)  # one datacenter step per block
    blocked = _run(tmp_path / "blocked", monkeypatch, 10**9)  # as long as the engine allows
    for key in ("wall_time_s",):
        stepped.pop(key), blocked.pop(key)
    assert stepped == blocked
    assert stepped["n_commands"] > 0 and stepped["n_batch_changes"] > 0
    for table in TABLES:
        a = pd.read_parquet(tmp_path / "stepped" / table)
        b = pd.read_parquet(tmp_path / "blocked" / table)
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    models = pd.read_parquet(tmp_path / "blocked" / "models")
    replicas = models.loc[models["model"] == "Llama-3.1-8B", "replicas"]
    assert (replicas % 1 > 0).any() and replicas.iloc[-1] == 441  # fractional ramp, ended at 0.613 * 720 rounded
    assert json.loads((tmp_path / "blocked" / "summary.json").read_text())["status"] == "complete"


DISTURBED = (
    *OVERRIDES,
    (
        "disturbances={window: {step_s: 1/60, before_s: 0.2, after_s: 0.45},"
        " events: [{kind: line_trip, line: '670671', start_s: 6.05, reclose_after_s: 0.35},"
        " {kind: line_trip, line: '632645', start_s: 12.1, reclose_after_s: 4}]}"
    ),
)


@pytest.mark.slow
def test_blocks_equal_steps_through_disturbance_windows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # windows whose ends are neither control steps nor flushes, one holding a tap event (12.1 s)
    monkeypatch.setattr(simulation, "_BLOCK_CELLS", 1)
    stepped = run_scenario("ieee13_none", tmp_path / "stepped", DISTURBED).summary
    monkeypatch.setattr(simulation, "_BLOCK_CELLS", 10**9)
    blocked = run_scenario("ieee13_none", tmp_path / "blocked", DISTURBED).summary
    stepped.pop("wall_time_s"), blocked.pop("wall_time_s")
    assert stepped == blocked
    assert blocked["site_unsupplied_s"]["dc1"] > 0 and len(blocked["disturbance_windows_s"]) == 3
    for table in TABLES:
        a = pd.read_parquet(tmp_path / "stepped" / table)
        b = pd.read_parquet(tmp_path / "blocked" / table)
        pd.testing.assert_frame_equal(a, b, check_exact=True)
