"""The app's data layer: what it reads from run folders and what it sends to the browser."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from openg2g.app.data import AppError, RunStore, compare, list_runs, map_at, resolve_run, run_panels
from openg2g.plot.run import RunData, read_table


def _write(folder: Path, name: str, frame: pd.DataFrame) -> None:
    (folder / name).mkdir(parents=True)
    frame.to_parquet(folder / name / "part-00000.parquet")


def test_a_long_line_is_thinned_for_the_browser_keeping_its_extremes(tmp_path: Path) -> None:
    # an hour at 0.1 s with one spike and one dip: both must reach the browser
    t = np.round(np.arange(1, 36001) * 0.1, 1)
    p = np.full(t.size, 1.0e6)
    p[12345], p[30000] = 3.0e6, 0.2e6
    frame = pd.DataFrame({"t_s": t, "site": "dc1", "p_a_w": p, "p_b_w": 1.0e6, "p_c_w": 1.0e6, "training_power_w": 0.0})
    _write(tmp_path, "datacenter", frame)
    (tmp_path / "summary.json").write_text("{}")
    panels = run_panels(RunData(tmp_path), points=400)
    line = next(ln for ln in panels[0].lines if ln.name == "dc1 a")
    assert line.t_s.size <= 400
    assert line.y.max() == pytest.approx(3.0) and line.y.min() == pytest.approx(0.2)  # MW
    assert 1234.6 in line.t_s and 3000.1 in line.t_s
    # zoomed in on 100 s around the spike, every sample is sent
    zoomed = run_panels(RunData(tmp_path), t_range=(1200.0, 1300.0), points=2000)
    detail = next(ln for ln in zoomed[0].lines if ln.name == "dc1 a")
    assert detail.t_s.size == 1001 and detail.y.max() == pytest.approx(3.0)


def test_the_map_at_t_shows_exactly_the_grid_voltages_rows_at_t(runs_dir: Path) -> None:
    store = RunStore(runs_dir)
    run = store.get("ieee13_none")
    volts = read_table(run.out_dir, "grid_voltages")
    at = volts[volts["t_s"] == 12.3]
    assert len(at) == 32  # the ieee13 case monitors 32 bus-phases
    state = map_at(run, 12.3, store.positions(run))
    assert state.t_s == 12.3
    assert state.bus_phase_v_pu == dict(zip(at["bus_phase"].astype(str), at["v_pu"]))
    # a time between steps shows the step before it
    assert map_at(run, 12.34).t_s == 12.3
    # a bus's colour is its phase nearest to (or beyond) a limit: 671's lowest phase here
    v671 = at[at["bus_phase"].astype(str).str.startswith("671.")]["v_pu"]
    assert state.bus_v_pu["671"] == pytest.approx(v671.min())
    # the worst list is the bus-phases of smallest margin, smallest first
    margin = np.fmin(at["v_pu"] - 0.95, 1.05 - at["v_pu"])
    assert list(state.worst["bus_phase"]) == list(
        at["bus_phase"].astype(str).iloc[np.argsort(margin.to_numpy(), kind="stable")][:8]
    )
    assert state.sites == ("671",)
    profile = state.profile.set_index(state.profile["bus"] + "." + state.profile["phase"])["v_pu"]
    assert profile.to_dict() == state.bus_phase_v_pu


def test_a_time_before_the_first_grid_step_is_a_clear_error(runs_dir: Path) -> None:
    run = RunStore(runs_dir).get("ieee13_none")
    with pytest.raises(AppError, match=r"no grid step at or before t = 0.05 s \(the first is 0.1 s\)"):
        map_at(run, 0.05)


def test_runs_are_listed_with_their_status(tmp_path: Path) -> None:
    def summary(folder: str, **fields: object) -> None:
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "summary.json").write_text(json.dumps(fields))

    summary("done", scenario="a", status="complete", sim_time_s=60, duration_s=60, violation_integral_pu_s=0.5)
    summary("whatif/a-001", scenario="a", status="running", sim_time_s=15, duration_s=60)
    summary("stopped", scenario="b", status="interrupted", sim_time_s=5, duration_s=60)
    (tmp_path / "starting").mkdir()
    (tmp_path / "starting" / "scenario.yaml").write_text("name: x\n")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "summary.json").write_text("[1, 2")
    (tmp_path / "done" / "grid").mkdir()  # a run's table folder is not a run
    summary(".hidden", status="complete")
    (tmp_path / "notes").mkdir()  # a folder with no run in it
    runs = {r.run_id: r for r in list_runs(tmp_path)}
    assert {k: r.status for k, r in runs.items()} == {
        "broken": "unreadable",
        "done": "complete",
        "starting": "starting",
        "stopped": "interrupted",
        "whatif/a-001": "running",
    }
    assert runs["done"].figures == {"violation_integral_pu_s": 0.5}
    assert runs["whatif/a-001"].sim_time_s / runs["whatif/a-001"].duration_s == 0.25


def test_a_run_id_outside_the_runs_folder_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    (root / "a").mkdir(parents=True)
    (root / "a" / "summary.json").write_text("{}")
    outside = tmp_path / "secret"
    outside.mkdir()
    (outside / "summary.json").write_text("{}")
    os.symlink(outside, root / "link")
    assert resolve_run(root, "a") == (root / "a").resolve()
    for bad in ("../secret", str(outside), "link", "a/../../secret"):
        with pytest.raises(AppError, match="not inside the runs folder"):
            resolve_run(root, bad)
    with pytest.raises(AppError, match="no run 'b'"):
        resolve_run(root, "b")
    with pytest.raises(AppError, match="not inside the runs folder"):
        compare(root, ["a", "../secret"], "a")


def test_runs_are_compared_against_the_baseline(runs_dir: Path) -> None:
    result = compare(runs_dir, ["ieee13_none", "ieee13_ofo"], "ieee13_none")
    none = json.loads((runs_dir / "ieee13_none" / "summary.json").read_text())
    ofo = json.loads((runs_dir / "ieee13_ofo" / "summary.json").read_text())
    key = "mean_throughput_tok_s"
    assert result.baseline == "ieee13_none"
    assert result.deltas.at["ieee13_ofo", key] == pytest.approx(ofo[key] - none[key])
    assert result.deltas.at["ieee13_ofo", f"{key}_pct"] == pytest.approx((ofo[key] - none[key]) / none[key] * 100)
    assert set(result.curves["power_w"]) == {"ieee13_none", "ieee13_ofo"}


def test_the_server_serves_only_files_of_the_runs_folder(runs_dir: Path) -> None:
    from openg2g.app import create_app

    app, queue = create_app(runs_dir)
    try:
        client = app.server.test_client()
        assert client.get("/files/ieee13_none/summary.json").status_code == 200
        (runs_dir.parent / "secret.txt").write_text("secret")
        for path in ("/files/../secret.txt", "/files/%2e%2e/secret.txt", "/files/ieee13_none/.openg2g.lock"):
            response = client.get(path)
            assert response.status_code == 404, path
            assert b"secret" not in response.data
        # an absolute path is no file route at all: Dash answers it with its page, not the file
        response = client.get("/files//etc/passwd")
        assert b"root:" not in response.data and b"react-entry-point" in response.data
    finally:
        queue.close()
