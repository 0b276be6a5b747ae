"""Sweeps and the CLI on real (one-second) co-simulation runs of the bundled ieee13 scenario."""

from __future__ import annotations

import importlib.util
import json
import socket
import time

import pandas as pd
import pytest
import yaml

from openg2g.cli.main import main
from openg2g.sweep import run_sweep

SHORT = ["duration_s=1", "events=[]", "outputs.voltages=envelope"]


def write(tmp_path, parameters, name="real"):
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({"name": name, "base": "ieee13_none", "set": SHORT, "parameters": parameters}))
    return path


@pytest.fixture(scope="module")
def real_sweep(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("real")
    path = write(tmp, [{"zip": {"datacenters.0.bus": ["671", "675", "nowhere"], "seed": [0, 1, 2]}}])
    return path, run_sweep(path, tmp / "out", workers=2)


@pytest.mark.slow
def test_real_sweep_reports_the_invalid_bus_and_runs_the_rest(real_sweep):
    _, result = real_sweep
    table = result.table
    assert list(table["status"]) == ["complete", "complete", "invalid"]
    assert "datacenters.0.bus" in table["error"].iloc[2] and "nowhere" in table["error"].iloc[2]
    assert (table["violation_integral_pu_s"].iloc[:2] >= 0).all()
    assert (table["dc_peak_mw"].iloc[:2] > 0).all()
    assert table["duration_s"].iloc[0] == 1.0


@pytest.mark.slow
def test_real_sweep_summaries_match_the_run_folders(real_sweep):
    _, result = real_sweep
    for row in result.table.iloc[:2].itertuples():
        summary = json.loads((result.out_dir / row.run_id / "summary.json").read_text())
        assert summary["status"] == "complete"
        assert summary["violation_integral_pu_s"] == row.violation_integral_pu_s
        assert (result.out_dir / row.run_id / "grid").is_dir()
        assert not list((result.out_dir / row.run_id).glob("*.png"))  # plots off in sweeps


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("ray") is None, reason="Ray is not installed (pip install 'openg2g-cosim[ray]')"
)
def test_real_runs_on_ray_equal_local(real_sweep, tmp_path):
    path, local = real_sweep
    on_ray = run_sweep(path, tmp_path / "ray", engine="ray", workers=2).table
    volatile = ["wall_time_s", "scenario_file"]
    pd.testing.assert_frame_equal(local.table.drop(columns=volatile), on_ray.drop(columns=volatile), check_exact=True)


@pytest.mark.slow
def test_cli_sweep_resumes_and_prints_results(real_sweep, capsys):
    path, result = real_sweep
    code = main(["sweep", str(path), "--out", str(result.out_dir), "--no-progress"])
    out = capsys.readouterr()
    assert code == 1  # one run is invalid
    assert "3 runs (2 complete, 1 invalid; 2 reused from earlier)" in out.out
    assert "nowhere" in out.err


def test_cli_reports_a_bad_sweep_file_with_exit_2(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text(
        yaml.safe_dump(
            {"name": "x", "base": "ieee13_none", "parameters": [{"zip": {"a": [1, 2], "b": [1]}}], "extra": 1}
        )
    )
    assert main(["sweep", str(path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert f"error: {path}: parameters.0" in err and "equal lengths" in err
    assert f"error: {path}: extra" in err


def test_cli_unreachable_ray_address_fails_fast(tmp_path, capsys):
    path = write(tmp_path, [{"product": {"seed": [0]}}])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    start = time.monotonic()
    code = main(["sweep", str(path), "--out", str(tmp_path / "o"), "--engine", "ray", "--address", f"127.0.0.1:{port}"])
    assert code == 1 and time.monotonic() - start < 10
    assert f"cannot reach a Ray cluster at 127.0.0.1:{port}" in capsys.readouterr().err
