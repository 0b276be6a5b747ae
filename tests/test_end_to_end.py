"""Whole runs with the real backends: determinism, CLI outputs, interruption, comparison."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from openg2g.cli.main import main
from openg2g.scenario.run import run_scenario

TABLES = ("datacenter", "models", "grid", "grid_voltages", "commands", "events")


def _tables(out: Path) -> list[pd.DataFrame]:
    return [pd.read_parquet(out / t) if any((out / t).glob("*.parquet")) else pd.DataFrame() for t in TABLES]


def test_same_scenario_and_seed_give_identical_outputs(tmp_path):
    overrides = ["duration_s=20", "outputs.plots=false"]
    runs = [run_scenario("ieee13_ofo", tmp_path / name, overrides) for name in ("a", "b")]
    for left, right in zip(_tables(tmp_path / "a"), _tables(tmp_path / "b")):
        pd.testing.assert_frame_equal(left, right, check_exact=True)
    keys = set(runs[0].summary) - {"wall_time_s"}
    assert {k: runs[0].summary[k] for k in keys} == {k: runs[1].summary[k] for k in keys}
    other = run_scenario("ieee13_ofo", tmp_path / "c", [*overrides, "seed=7"])
    assert other.summary["energy_mwh"] != runs[0].summary["energy_mwh"]


@pytest.mark.slow
def test_cli_run_writes_outputs_and_compare_reads_them(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["run", "ieee13_none", "--set", "duration_s=10", "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "viol. integral (pu.s)" in printed and "ieee13_none" in printed
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "complete" and summary["sim_time_s"] == 10.0
    for png in ("dc_power.png", "voltage_envelope.png", "batch_sizes.png", "latency.png"):
        assert (out / png).stat().st_size > 10_000
    grid = pd.read_parquet(out / "grid")
    assert len(grid) == 100 and grid["t_s"].iloc[-1] == 10.0
    volts = pd.read_parquet(out / "grid_voltages")
    assert set(volts["bus_phase"].astype(str)) >= {"671.a", "671.b", "671.c"}
    assert main(["compare", str(out), str(out), "--markdown"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith(f"| {out}")]
    assert len(rows) == 2 and rows[1].startswith(f"| {out} #2 |")  # one run named twice stays two rows


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, pytest.param(signal.SIGTERM, marks=pytest.mark.slow)])
def test_interrupted_cli_run_keeps_complete_files(tmp_path, sig):
    out = tmp_path / "cut"
    cmd = [
        sys.executable,
        "-m",
        "openg2g.cli.main",
        "run",
        "ieee13_none",
        "--out",
        str(out),
        "--no-progress",
        "--set",
        "outputs.flush_every_s=5",
    ]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "PYTHONUNBUFFERED": "1"}
    )
    deadline = time.time() + 120
    while time.time() < deadline and not list((out / "grid").glob("part-00001.parquet")):
        time.sleep(0.2)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err.decode()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "interrupted"
    assert summary["error"] == (
        "terminated by SIGTERM" if sig == signal.SIGTERM else "interrupted by the user (Ctrl-C)"
    )
    grid = pd.read_parquet(out / "grid")
    assert grid["t_s"].iloc[-1] == pytest.approx(summary["sim_time_s"])
    assert 10.0 <= summary["sim_time_s"] < 3600.0
    volts = pd.read_parquet(out / "grid_voltages")
    assert volts["t_s"].max() == grid["t_s"].max()
    assert not list(out.rglob("*.tmp"))


@pytest.mark.slow
def test_steps_that_did_not_converge_are_shown(tmp_path, capsys):
    # 100 MW per phase at bus 671 is past the feeder's collapse point: no step converges
    args = ["run", "ieee13_none", "--set", "duration_s=2", "--set", "grid.on_nonconvergence=flag", "--no-progress"]
    args += ["--set", "datacenters.0.base_load_kw_per_phase=100000", "--set", "outputs.plots=false"]
    assert main([*args, "--out", str(tmp_path / "out")]) == 0
    captured = capsys.readouterr()
    header, _, row = captured.out.splitlines()[1:4]  # after the site's line
    assert "non-conv. steps" in header and row.split()[7] == "20"
    assert "20 of 20 grid steps did not converge" in captured.err
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["nonconverged_steps"] == 20 and summary["violation_integral_pu_s"] == 0.0


@pytest.mark.slow
def test_results_do_not_depend_on_the_blas_thread_count(tmp_path):
    """ieee123's dense solves split differently over 1 and 2 BLAS threads; openg2g holds BLAS to
    one thread (openg2g.core.threads), so both processes write the same bits."""
    outs = []
    for threads in ("1", "2"):
        out = tmp_path / f"threads{threads}"
        cmd = [
            sys.executable,
            "-m",
            "openg2g",
            "run",
            "ieee123_ref_ofo",
            "--set",
            "duration_s=20",
            "--set",
            "outputs.plots=false",
            "--no-progress",
            "--out",
            str(out),
        ]
        env = {**os.environ, "OPENBLAS_NUM_THREADS": threads, "OMP_NUM_THREADS": threads}
        subprocess.run(cmd, check=True, capture_output=True, env=env)
        outs.append(_tables(out))
    for one, two in zip(*outs):
        pd.testing.assert_frame_equal(one, two, check_exact=True)


@pytest.mark.slow
def test_a_feeder_without_datacenters_runs(tmp_path):
    """The feeder alone: no site draws, so the energy and throughput are 0 and the grid table has
    every step (the feeder's own loads), with plots."""
    result = run_scenario("ieee13_none", tmp_path / "run", ["duration_s=5", "datacenters=[]", "events=[]"])
    assert result.summary["status"] == "complete"
    assert result.summary["energy_mwh"] == 0.0 and result.summary["mean_throughput_tok_s"] == 0.0
    assert len(pd.read_parquet(tmp_path / "run" / "grid")) == 50
    assert not any((tmp_path / "run" / "datacenter").glob("*.parquet"))


def test_power_caps_below_the_calibrated_range_are_flagged(tmp_path, capsys):
    # caps of 650 W (inside the 602-700 W the cap model is calibrated on), then 300 W and 250 W
    caps = [(1, 650.0, None), (2, 300.0, "Llama-3.1-8B"), (3, 250.0, None)]
    events = [{"t_s": t, "command": "set_power_cap", "site": "dc1", "cap_w_per_gpu": w, "model": m} for t, w, m in caps]
    args = ["run", "ieee13_none", "--set", "duration_s=4", "--set", "outputs.plots=false", "--no-progress"]
    args += ["--set", f"events={json.dumps(events)}", "--out", str(tmp_path / "out")]
    assert main(args) == 0
    captured = capsys.readouterr()
    header, _, row = captured.out.splitlines()[1:4]  # after the site's line
    assert header.split()[-4:] == ["caps", "<", "602", "W"] and row.split()[-1] == "2"
    assert "2 power-cap commands went below 602 W per GPU (lowest 250 W)" in captured.err
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["power_caps_below_calibration"] == 2 and summary["lowest_power_cap_w_per_gpu"] == 250.0
