"""The app's data layer: what it reads from run folders and what it sends to the browser."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from itertools import pairwise
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from openg2g.app.data import AppError, RunStore, compare, list_runs, map_at, resolve_run
from openg2g.plot.overview import OVERVIEW_CACHE, Overview, overview_stamp, read_overview
from openg2g.plot.overview_tables import LOADING_CACHE, branch_loading, overview, run_panels
from openg2g.plot.parts import table_parts
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
    # a range between two samples: the part holds it, none of its rows is in it, nothing is drawn
    assert run_panels(RunData(tmp_path), t_range=(1234.51, 1234.55)) == []


def _run_in_parts(folder: Path, cuts: list[int], n: int = 4000) -> None:
    """A run of ``n`` steps of 0.1 s on one site and one model, its tables cut into parts at
    ``cuts`` (rows): power ``k`` W at step ``k`` with a spike at step 2502, batch sizes 8 then 16
    from step 1234 then 8 from step 3000, and a grid table with one regulator tap."""
    k = np.arange(n)
    t = np.round((k + 1) * 0.1, 1)
    p = k.astype(float)
    p[2502] = 9.0e6
    batch = np.where((k >= 1234) & (k < 3000), 16, 8)
    tables = {
        "datacenter": pd.DataFrame({"t_s": t, "site": "dc1", "p_a_w": p, "p_b_w": 0.0, "p_c_w": 0.0}),
        "models": pd.DataFrame(
            {"t_s": t, "site": "dc1", "model": "m", "batch_size": batch, "itl_s": 0.05, "throughput_tok_s": 1.0e6}
        ),
        "grid": pd.DataFrame(
            {
                "t_s": t,
                "v_min_pu": 0.97,
                "v_max_pu": 1.02,
                **{f"p_sub_{ph}_w": 1.0e6 for ph in "abc"},
                **{f"q_sub_{ph}_var": 0.0 for ph in "abc"},
                "tap_reg1_a": np.where(k < 100, 0, 2),
            }
        ),
    }
    bounds = [0, *cuts, n]
    for name, frame in tables.items():
        (folder / name).mkdir(exist_ok=True)
        for i, (lo, hi) in enumerate(pairwise(bounds)):
            frame.iloc[lo:hi].to_parquet(folder / name / f"part-{i:05d}.parquet")
    (folder / "summary.json").write_text("{}")


def test_the_overview_holds_each_line_thinned_and_is_kept_beside_the_run(tmp_path: Path) -> None:
    _run_in_parts(tmp_path, [1001, 2502])  # parts cut across the thinning's runs of samples
    panels = {p.key: p for p in overview(RunData(tmp_path)).panels}
    # 4000 steps for 1600 points: runs of 5 steps, each its lowest and highest step; a ramp keeps
    # each run's first and last, the spike's run its first and the spike
    power = panels["dc_power"].lines[0]
    expected = [i for j in range(800) for i in ((5 * j, 2502) if j == 500 else (5 * j, 5 * j + 4))]
    assert power.name == "dc1 a" and power.t_s.tolist() == [round((i + 1) * 0.1, 1) for i in expected]
    assert power.y[500 * 2 + 1] == 9.0 and power.y[3] == 9 / 1e6  # MW
    batch = panels["batch"].lines[0]
    assert batch.step and batch.t_s.tolist() == [0.1, 123.5, 300.1, 400.0] and batch.y.tolist() == [8, 16, 8, 8]
    taps = panels["taps"].lines[0]
    assert taps.name == "reg1 a" and taps.t_s.tolist() == [0.1, 10.1, 400.0] and taps.y.tolist() == [0, 2, 2]
    # written beside the run: one row per point, the points of every line in order, then the
    # grid steps (the slider's)
    kept = pd.read_parquet(tmp_path / OVERVIEW_CACHE)
    assert kept["t_s"].tolist()[: power.t_s.size] == power.t_s.tolist()
    assert len(kept) == sum(ln.t_s.size for p in panels.values() for ln in p.lines) + 4000
    assert kept["t_s"].tolist()[-4000:] == [round((i + 1) * 0.1, 1) for i in range(4000)]


def test_the_overview_is_computed_again_when_a_part_changes(tmp_path: Path) -> None:
    _run_in_parts(tmp_path, [2000], n=3000)
    first = overview(RunData(tmp_path)).panels[0].lines[0]
    assert first.t_s[-1] == 300.0 and first.t_s.size == 1500  # 3000 steps: 750 runs of 4, two points each
    _run_in_parts(tmp_path, [2000])  # the run goes on: its last part rewritten longer
    again = overview(RunData(tmp_path)).panels[0].lines[0]
    assert again.t_s[-1] == 400.0 and again.y.max() == 9.0
    assert pd.read_parquet(tmp_path / OVERVIEW_CACHE)["t_s"].max() == 400.0


def test_the_panels_and_the_map_asking_at_once_read_the_overview_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "r").mkdir()
    _run_in_parts(tmp_path / "r", [1001, 2502])
    computed: list[Path] = []

    def slow_overview(run: RunData) -> Overview:
        computed.append(run.out_dir)
        time.sleep(0.2)  # the second caller arrives while the first reads
        return overview(run)

    monkeypatch.setattr("openg2g.app.data.overview", slow_overview)
    store = RunStore(tmp_path)
    run = store.get("r")
    found: list[Overview] = []
    callers = [threading.Thread(target=lambda: found.append(store.overview(run))) for _ in range(2)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join()
    assert computed == [run.out_dir] and found[0] is found[1]
    assert store.overview(store.get("r")) is found[0]  # the run unchanged: kept


def test_the_page_says_how_far_an_overview_being_built_is(tmp_path: Path) -> None:
    from openg2g.app.server import create_app

    run = tmp_path / "older"
    run.mkdir()
    _run_in_parts(run, [1001, 2502])  # no overview beside it: three parts each of three tables
    app, queue = create_app(tmp_path)
    try:
        status = app.callback_map["overview-status.children"]["callback"].__wrapped__
        shown: list[str] = []
        overview(RunData(run), on_progress=lambda *_: shown.append(status(1, False, ["older"])))
        assert shown == [f"building the overview of older: {k} of 9 parts" for k in range(1, 10)]
        assert status(2, False, ["older", "../elsewhere"]) == ""  # built, and a refused id: nothing to say
        assert status(3, True, ["older", "../elsewhere"]) == ""
    finally:
        queue.close()


def _same_overview(a: Overview, b: Overview) -> None:
    assert [(p.key, p.ylabel, p.levels, p.categories, p.log2) for p in a.panels] == [
        (p.key, p.ylabel, p.levels, p.categories, p.log2) for p in b.panels
    ]
    for pa_, pb in zip(a.panels, b.panels):
        assert [(ln.name, ln.step, ln.dash, ln.color) for ln in pa_.lines] == [
            (ln.name, ln.step, ln.dash, ln.color) for ln in pb.lines
        ]
        for la, lb in zip(pa_.lines, pb.lines):
            np.testing.assert_array_equal(la.t_s, lb.t_s, err_msg=la.name)
            np.testing.assert_array_equal(la.y, lb.y, err_msg=la.name)
    assert a.marks == b.marks
    np.testing.assert_array_equal(a.grid_times_s, b.grid_times_s)


# 300 s of ieee13 with OFO, a training job and every branch recorded, flushed every 7 s: 3000
# datacenter steps for 1600 points (runs of 4 steps, cut across by the flushes), OFO commands
SHORT_OFO = [
    "duration_s=300",
    "outputs.plots=false",
    "outputs.branches=all",
    "outputs.flush_every_s=7",
    "datacenters.0.training.start_s=40",
    "datacenters.0.training.end_s=120",
]


@pytest.mark.slow
def test_the_overview_written_by_the_run_equals_the_one_the_app_builds(tmp_path: Path) -> None:
    from openg2g.scenario.run import run_scenario

    out = (tmp_path / "ofo").resolve()
    run_scenario("ieee13_ofo", out_dir=out, overrides=SHORT_OFO)
    written = read_overview(out / OVERVIEW_CACHE, overview_stamp(out))
    assert written is not None  # written by the run, for exactly the parts it wrote
    keys = [p.key for p in written.panels]
    assert keys == ["dc_power", "batch", "itl", "throughput", "voltage", "substation", "taps", "loading", "commands"]
    assert written.marks.spans == ((40.0, 119.9, "dc1 training"),)
    assert written.panels[0].lines[0].t_s.size <= 1500  # 750 runs of 4 steps, each its lowest and highest
    (out / OVERVIEW_CACHE).unlink()
    _same_overview(written, overview(RunData(out)))  # built by the app from the parts


def _running_past(out: Path, t_s: float) -> bool:
    """Whether the run in ``out`` says it is running and has flushed past ``t_s``."""
    try:
        summary = json.loads((out / "summary.json").read_text())
    except (OSError, ValueError):
        return False
    return summary.get("status") == "running" and summary.get("sim_time_s", 0) >= t_s


@pytest.mark.slow
def test_a_run_stopped_by_ctrl_c_leaves_no_overview_and_the_app_builds_one_for_its_parts(tmp_path: Path) -> None:
    from openg2g.scenario.run import run_scenario

    out = (tmp_path / "cut").resolve()
    run_scenario("ieee13_fixedtap_none", out_dir=out, overrides=["duration_s=30", "outputs.plots=false"])
    assert (out / OVERVIEW_CACHE).is_file()
    # the same folder run again by `openg2g run`, interrupted with Ctrl-C (SIGINT) after its first flushes
    cmd = [sys.executable, "-m", "openg2g.cli.main", "run", "ieee13_fixedtap_none", "--out", str(out), "--overwrite"]
    cmd += ["--set", "outputs.plots=false", "--set", "outputs.flush_every_s=1", "--no-progress"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 180
        while not _running_past(out, 5.0):
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            assert time.monotonic() < deadline, "timed out waiting for the run's flushes"
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert json.loads((out / "summary.json").read_text())["status"] == "interrupted"
    # the earlier run's overview is gone and none was written for this one: no file to misread
    assert not (out / OVERVIEW_CACHE).exists() and not list(out.glob(".*tmp*"))
    grid = read_table(out, "grid")
    found = overview(RunData(out))  # the app's, from the parts written
    np.testing.assert_array_equal(found.grid_times_s, np.sort(grid["t_s"].to_numpy()))
    last = found.grid_times_s[-1]
    # Ctrl-C can fall between a site's block and the grid's solve of it: the site's rows then end a
    # block after the grid's, both written as computed
    ends = max(ln.t_s[-1] for p in found.panels for ln in p.lines)
    assert 5 <= last < 3600 and last <= ends == read_table(out, "datacenter")["t_s"].max()
    assert read_overview(out / OVERVIEW_CACHE, overview_stamp(out)) is not None


def _branch_part(folder: Path, k: int, steps: list[float], loading: dict[str, list[float]]) -> None:
    """Part ``k`` of a ``grid_branches`` table: at each step, each conductor's loading (%)."""
    rows = [
        {"t_s": t, "branch": name.split(".")[0], "phase": name.split(".")[1], "current_a": 1.0, "loading_pct": pct}
        for i, t in enumerate(steps)
        for name, values in loading.items()
        for pct in [values[i]]
    ]
    (folder / "grid_branches").mkdir(exist_ok=True)
    pd.DataFrame(rows).to_parquet(folder / "grid_branches" / f"part-{k:05d}.parquet")


def test_branch_loading_reads_only_the_parts_of_the_range_and_equals_the_rows(tmp_path: Path) -> None:
    (tmp_path / "summary.json").write_text("{}")
    _branch_part(tmp_path, 0, [0.1, 0.2], {"l1.a": [50.0, 60.0], "l2.b": [70.0, 10.0]})
    _branch_part(tmp_path, 1, [0.3, 0.4], {"l1.a": [80.0, 20.0], "l2.b": [30.0, 90.0]})
    _branch_part(tmp_path, 2, [0.5, 0.6], {"l1.a": [40.0, np.nan], "l2.b": [45.0, 99.0]})
    # the statistics of each part's t_s place it in time: a zoom on 0.3-0.4 s opens part 1 only
    parts = table_parts(tmp_path, "grid_branches", (0.3, 0.4))
    assert [p.path.name for p in parts] == ["part-00001.parquet"]
    assert [(p.t_min_s, p.t_max_s, p.rows) for p in parts] == [(0.3, 0.4, 4)]
    assert [p.path.name for p in table_parts(tmp_path, "grid_branches", (0.25, 0.5))] == [
        "part-00001.parquet",
        "part-00002.parquet",
    ]
    zoom = branch_loading(tmp_path, (0.3, 0.4))
    assert zoom.to_dict("list") == {"t_s": [0.3, 0.4], "max_loading_pct": [80.0, 90.0], "branch": ["l1", "l2"]}
    # the whole run, step by step: the highest conductor and its branch (a NaN loading is no figure)
    expected = {
        "t_s": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6],
        "max_loading_pct": [70.0, 60.0, 80.0, 90.0, 45.0, 99.0],
        "branch": ["l2", "l1", "l1", "l2", "l2", "l2"],
    }
    assert branch_loading(tmp_path).to_dict("list") == expected
    panel = next(p for p in run_panels(RunData(tmp_path)) if p.key == "loading")
    assert panel.lines[0].t_s.tolist() == expected["t_s"]
    assert panel.lines[0].y.tolist() == expected["max_loading_pct"]
    # kept beside the run, and computed again when a part is added (a running run)
    assert pd.read_parquet(tmp_path / LOADING_CACHE).to_dict("list") == expected
    _branch_part(tmp_path, 3, [0.7], {"l1.a": [5.0], "l2.b": [6.0]})
    grown = branch_loading(tmp_path)
    assert grown["t_s"].tolist()[-1] == 0.7 and grown["max_loading_pct"].tolist()[-1] == 6.0
    assert pd.read_parquet(tmp_path / LOADING_CACHE)["t_s"].tolist()[-1] == 0.7


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


def test_two_steps_share_a_drawing_key_until_a_bus_phase_loses_its_value(runs_dir: Path) -> None:
    """The key says when one step's figures can be patched into another's: the same bus-phases
    in the same order, each with a value or without one in both."""
    from dataclasses import replace

    store = RunStore(runs_dir)
    run = store.get("ieee13_none")
    first, later = map_at(run, 0.1), map_at(run, 12.3)
    assert first.bus_phase_v_pu != later.bus_phase_v_pu
    assert first.drawing_key() == later.drawing_key()
    dead = dict(later.bus_phase_v_pu, **{"671.a": float("nan")})
    assert replace(later, bus_phase_v_pu=dead).drawing_key() != first.drawing_key()
    fewer = {k: v for k, v in later.bus_phase_v_pu.items() if k != "671.a"}
    assert replace(later, bus_phase_v_pu=fewer).drawing_key() != first.drawing_key()


def test_a_bus_over_the_run_counts_its_steps_beyond_a_limit(runs_dir: Path) -> None:
    """Counted by hand from grid_voltages under a tightened upper limit that bus 675 crosses at
    some steps and not at others."""
    from dataclasses import replace

    from openg2g.app.data import bus_voltages

    run = RunStore(runs_dir).get("ieee13_none")
    volts = read_table(run.out_dir, "grid_voltages")
    mine = volts[volts["bus_phase"].astype(str).str.startswith("675.")]
    limit = float(mine.groupby("t_s")["v_pu"].max().median())  # half the steps go above it
    tight = replace(run, v_max_pu=limit)
    series = bus_voltages(tight, "675")
    per_step = mine.groupby("t_s")["v_pu"].agg(["min", "max"])
    beyond = int(((per_step["max"] > limit) | (per_step["min"] < run.v_min_pu)).sum())
    assert 0 < beyond < len(per_step)
    assert (series.steps, series.steps_beyond) == (len(per_step), beyond)
    assert series.seconds_beyond == pytest.approx(beyond * 0.1)
    assert sorted(series.phases) == ["a", "b", "c"]
    t_a, v_a = series.phases["a"]
    a = mine[mine["bus_phase"].astype(str) == "675.a"].sort_values("t_s")
    assert len(a) <= 1600 or len(t_a) <= 1600  # thinned for the browser when long
    assert np.nanmax(v_a) == a["v_pu"].max() and np.nanmin(v_a) == a["v_pu"].min()  # no extreme lost
    margin = np.fmin(mine["v_pu"] - run.v_min_pu, limit - mine["v_pu"])
    worst = mine.iloc[int(np.argmin(margin.to_numpy()))]
    assert (series.worst_t_s, series.worst_v_pu) == (worst["t_s"], worst["v_pu"])
    with pytest.raises(AppError, match="bus 'nowhere' has no recorded voltage"):
        bus_voltages(run, "nowhere")


def test_branch_loading_is_placed_on_the_map_branch_of_its_name(tmp_path: Path, runs_dir: Path) -> None:
    """Each recorded branch's most loaded terminal and phase, on the map's branch of its name: the
    switch the grid models as a line, the regulator bank recorded per phase as one regulator."""
    from openg2g.scenario.run import run_scenario

    run_scenario(
        "ieee13_none", out_dir=tmp_path / "r", overrides=["duration_s=1", "outputs.plots=false", "outputs.branches=all"]
    )
    run = RunStore(tmp_path).get("r")
    rows = read_table(run.out_dir, "grid_branches")
    step = rows[rows["t_s"] == 0.5].assign(branch=lambda r: r["branch"].astype(str))
    state = map_at(run, 0.5)
    loading = state.loading.set_index("branch")
    assert state.unplaced == ()
    assert loading.loc["line.671692", ["from_bus", "to_bus"]].tolist() == ["671", "692"]  # a switch on the map
    assert loading.loc["line.650632", "loading_pct"] == step[step["branch"] == "line.650632"]["loading_pct"].max()
    bank = step[step["branch"].str.match(r"transformer\.reg1[abc]")]
    assert bank["branch"].nunique() == 3
    assert loading.loc["regulator.reg1", "loading_pct"] == bank["loading_pct"].max()
    assert list(state.loading["loading_pct"]) == sorted(state.loading["loading_pct"], reverse=True)
    unrecorded = map_at(RunStore(runs_dir).get("ieee13_none"), 0.5)  # outputs.branches: none
    assert unrecorded.loading.empty and unrecorded.unplaced == ()


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


@pytest.mark.slow
def test_a_run_killed_with_sigkill_shows_as_stopped_not_running(tmp_path: Path) -> None:
    # a real `openg2g run` holds its folder's lock; kill -9 leaves its summary saying "running"
    out = tmp_path / "killed"
    root = Path(__file__).resolve().parents[2]
    cmd = [sys.executable, "-m", "openg2g.cli.main", "run", "ieee13_fixedtap_none", "--out", str(out)]
    cmd += ["--set", "outputs.plots=false", "--set", "outputs.flush_every_s=1", "--no-progress"]
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 180
        while not (out / "summary.json").is_file():
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            assert time.monotonic() < deadline, "timed out waiting for the run's first summary"
            time.sleep(0.2)
        assert [(r.run_id, r.status) for r in list_runs(tmp_path)] == [("killed", "running")]
    finally:
        proc.kill()
        proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert json.loads((out / "summary.json").read_text())["status"] == "running"
    assert [(r.run_id, r.status) for r in list_runs(tmp_path)] == [("killed", "stopped")]


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


def test_the_runs_table_lists_own_runs_then_what_ifs_then_study_runs() -> None:
    from openg2g.app.data import RunEntry
    from openg2g.app.views import runs_rows

    entries = [
        RunEntry(run_id, "complete", "ieee13_none", 1.0, 1.0)
        for run_id in ("bench/runs/a", "whatif/ieee13_none-001", "mine", "aaa/b", "hosting/675-1")
    ]
    rows = runs_rows(entries, ["bench", "hosting"])
    assert [(r["group"], r["run"]) for r in rows] == [
        ("run", "aaa/b"),
        ("run", "mine"),
        ("what-if", "whatif/ieee13_none-001"),
        ("study", "bench/runs/a"),
        ("study", "hosting/675-1"),
    ]
