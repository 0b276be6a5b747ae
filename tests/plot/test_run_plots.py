"""A run's plots: each written when the run has its data and skipped (said in the summary) when
not, the data the figures draw against the tables, Ctrl-C while drawing, and the comparison
against a baseline run."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import PathCollection
from matplotlib.figure import Figure

from openg2g.cli.main import main
from openg2g.grid.topology import Topology, distance_from_source_km
from openg2g.plot.commands import command_series
from openg2g.plot.compare import baseline_deltas
from openg2g.plot.extremes import bus_phase_extremes, extremes_of
from openg2g.plot.feeder import plot_worst_voltage_map, worst_bus_voltages
from openg2g.plot.overview import OVERVIEW_CACHE
from openg2g.plot.run import RUN_PLOTS, PlotsInterrupted, RunData, expand_fields, read_table
from openg2g.plot.timeline import ChangeStream, EnvelopeStream, changes, envelope
from openg2g.record.tables import PLOT_FILES
from openg2g.scenario.run import run_scenario

TAP_EVENT = [{"t_s": 1, "command": "set_taps", "bank": "reg1", "taps": [15, 6, 16]}]


@pytest.fixture(scope="module")
def full_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four seconds of ieee13_ofo with the branch table, a tap event and the bulk system's
    frequency: data for every plot."""
    out = tmp_path_factory.mktemp("full") / "run"
    overrides = [
        "duration_s=4",
        "outputs.branches=all",
        f"events={json.dumps(TAP_EVENT)}",
        "grid.frequency={base_mw: 100}",
    ]
    run_scenario("ieee13_ofo", out, overrides)  # keeps scenario.yaml, where `openg2g plot` reads the grid
    return out


def test_the_engine_clears_every_plot_a_run_draws() -> None:
    assert PLOT_FILES == tuple(RUN_PLOTS)


@pytest.mark.slow
def test_a_run_with_every_table_writes_every_plot_and_says_so(full_run: Path) -> None:
    summary = json.loads((full_run / "summary.json").read_text())
    assert summary["status"] == "complete"
    assert summary["plots"] == {"written": list(RUN_PLOTS), "skipped": {}}
    for name in RUN_PLOTS:
        assert (full_run / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(full_run.glob(".*.tmp-*"))  # no temporary file left


@pytest.mark.slow
def test_a_run_without_branches_or_commands_skips_those_plots_with_the_reason(tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    args = ["run", "ieee13_none", "--set", "duration_s=2", "--set", "events=[]", "--no-progress", "--out", str(out)]
    assert main(args) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["plots"]["skipped"] == {
        "branch_loading.png": "no grid_branches table (set outputs.branches: all)",
        "commands.png": "no command was sent and no scenario event fired",
        "disturbance.png": "no disturbance, ride-through or frequency model in the run",
    }
    skipped = ("branch_loading.png", "commands.png", "disturbance.png")
    assert summary["plots"]["written"] == [n for n in RUN_PLOTS if n not in skipped]
    assert not (out / "branch_loading.png").exists()
    err = capsys.readouterr().err
    assert "plot branch_loading.png skipped: no grid_branches table" in err


@pytest.mark.slow
def test_command_fields_come_as_columns(full_run: Path) -> None:
    events = read_table(full_run, "events")
    (tap,) = events[events["command"] == "set_taps"].itertuples()
    assert (tap.t_s, tap.bank, list(tap.taps)) == (1.0, "reg1", [15, 6, 16])
    assert json.loads(tap.fields) == {"bank": "reg1", "taps": [15, 6, 16]}  # the stored text stays


def test_fields_of_other_commands_are_none() -> None:
    frame = pd.DataFrame({"command": ["a", "b"], "fields": ['{"site":"dc1","batch_size":64}', '{"bank":"reg1"}']})
    spread = expand_fields(frame)
    assert list(spread.columns) == ["command", "fields", "site", "batch_size", "bank"]
    assert spread["batch_size"].tolist() == [64, None] and spread["bank"].tolist() == [None, "reg1"]


@pytest.mark.slow
def test_openg2g_plot_redraws_a_finished_run(full_run: Path, tmp_path: Path) -> None:
    for name in RUN_PLOTS:
        (full_run / name).unlink()
    assert main(["plot", str(full_run)]) == 0
    assert all((full_run / name).is_file() for name in RUN_PLOTS)
    assert main(["plot", str(tmp_path)]) == 1  # not a run folder: an error, not a traceback


@pytest.mark.slow
def test_the_feeder_map_colours_the_bus_the_tables_call_worst(full_run: Path) -> None:
    run = RunData(full_run)
    assert isinstance(run.topology, Topology)
    fig = plot_worst_voltage_map(run.topology.buses, run.topology.edges, bus_phase_extremes(full_run), 0.95, 1.05)
    buses = next(c for c in fig.axes[0].collections if isinstance(c, PathCollection))
    drawn = np.asarray(buses.get_array(), dtype=float)
    names = list(run.topology.buses["bus"])
    summary = json.loads((full_run / "summary.json").read_text())
    # ieee13's worst is an undervoltage (0.955 pu against 0.95; the highest, 1.026, is 0.024 from 1.05)
    assert names[int(np.nanargmin(drawn))] == summary["v_min_bus_phase"].rsplit(".", 1)[0]
    assert np.nanmin(drawn) == summary["v_min_pu"]
    assert summary["v_min_bus_phase"] in fig.axes[0].get_title()


def test_worst_bus_voltage_is_the_one_nearer_its_limit() -> None:
    table = pd.DataFrame(
        {
            "t_s": [1.0, 1.0, 2.0, 2.0, 1.0, 2.0],
            "bus_phase": ["a.a", "a.b", "a.a", "a.b", "b.a", "b.a"],
            # bus a: lowest 0.97 (0.02 above 0.95), highest 1.04 (0.01 below 1.05): 1.04 is worse
            # bus b: lowest 0.94, outside the band
            "v_pu": [0.97, 1.00, 1.01, 1.04, 0.94, 0.99],
        }
    )
    worst = worst_bus_voltages(extremes_of(table), 0.95, 1.05)
    assert worst.loc["a", "v_pu"] == 1.04 and worst.loc["a", "bus_phase"] == "a.b" and worst.loc["a", "t_s"] == 2.0
    assert worst.loc["b", "v_pu"] == 0.94 and worst.loc["b", "margin_pu"] == pytest.approx(-0.01)


def test_ctrl_c_while_drawing_leaves_no_partial_png_and_the_summary_says_which(tmp_path: Path, monkeypatch) -> None:
    calls = {"n": 0}
    real = Figure.savefig

    def interrupted_third(self: Figure, fname, *args, **kwargs) -> None:
        calls["n"] += 1
        if calls["n"] == 3:
            Path(fname).write_bytes(b"\x89PNG half a figure")  # a write cut short
            raise KeyboardInterrupt
        real(self, fname, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", interrupted_third)
    out = tmp_path / "run"
    with pytest.raises(PlotsInterrupted) as caught:
        run_scenario("ieee13_none", out, ["duration_s=2", "events=[]"])
    first_two = list(RUN_PLOTS)[:2]
    assert caught.value.report.written == first_two
    assert sorted(p.name for p in out.glob("*.png")) == sorted(first_two)
    # no temporary file left: the only hidden file is the app's overview, written before the plots
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == [OVERVIEW_CACHE]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "complete"
    assert summary["plots"]["written"] == first_two
    assert summary["plots"]["not_drawn"] == list(RUN_PLOTS)[2:]


def test_cli_run_says_the_run_completed_when_ctrl_c_hits_the_plots(tmp_path: Path, monkeypatch, capsys) -> None:
    def interrupt(self: Figure, *args, **kwargs) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(Figure, "savefig", interrupt)
    args = ["run", "ieee13_none", "--set", "duration_s=1", "--no-progress", "--out", str(tmp_path / "run")]
    assert main(args) == 130
    err = capsys.readouterr().err
    assert "interrupted while drawing the plots; the run is complete" in err and "written: none" in err


def test_a_figure_out_of_memory_is_reported_and_the_run_completes_with_the_others(tmp_path: Path, monkeypatch) -> None:
    from openg2g.plot import run as plot_run_module

    def out_of_memory(run: RunData) -> Figure:
        raise MemoryError

    monkeypatch.setitem(plot_run_module.RUN_PLOTS, "feeder_map.png", out_of_memory)
    out = tmp_path / "run"
    run_scenario("ieee13_none", out, ["duration_s=2", "events=[]", "outputs.voltages=all"])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "complete"
    assert list(summary["plots"]["failed"]) == ["feeder_map.png"]
    assert summary["plots"]["failed"]["feeder_map.png"].startswith("MemoryError: out of memory while drawing it")
    assert "voltage_profile.png" in summary["plots"]["written"]  # drawn after the one that failed


# --------------------------------------------------------------------------- thinning
def test_envelope_keeps_every_extreme_and_thins_to_the_budget() -> None:
    t = np.arange(10_000) * 0.1
    y = np.sin(t)
    y[4321], y[777] = 5.0, -7.0
    tt, yy = envelope(t, y, max_points=200)
    assert len(tt) <= 200 and np.all(np.diff(tt) > 0)
    assert yy.max() == 5.0 and tt[yy.argmax()] == t[4321]
    assert yy.min() == -7.0 and tt[yy.argmin()] == t[777]
    _, short_y = envelope(t[:50], y[:50])
    assert np.array_equal(short_y, y[:50])


def test_changes_keep_only_the_steps() -> None:
    t, v = changes([0, 1, 2, 3, 4, 5], [8, 8, 16, 16, 16, 8])
    assert list(t) == [0, 2, 5] and list(v) == [8, 16, 8]


def test_a_line_thinned_in_pieces_equals_the_line_thinned_whole() -> None:
    # 23 samples, 10 points: runs of ceil(23 / 5) = 5 samples, each keeping its lowest and highest
    # in time order (one when the run is flat at one sample); cut across runs' boundaries
    t = np.arange(23.0)
    y = np.array([3, 1, 2, 5, 4, 0, 0, 0, 0, 0, 9, 8, 7, 6, 5, np.nan, np.nan, 2, 2, 1, 4, 3, 6], dtype=float)
    stream = EnvelopeStream(23, max_points=10)
    for lo, hi in ((0, 7), (7, 8), (8, 8), (8, 17), (17, 23)):
        stream.add(t[lo:hi], y[lo:hi])
    tt, yy = stream.result()
    assert tt.tolist() == [1, 3, 5, 10, 14, 17, 19, 21, 22]
    assert yy.tolist() == [1, 5, 0, 9, 5, 2, 1, 3, 6]
    whole = envelope(t, y, max_points=10)
    assert np.array_equal(whole[0], tt) and np.array_equal(whole[1], yy)
    with pytest.raises(ValueError, match="24 samples added to an envelope of 23"):
        stream.add([23.0], [1.0])
    steps = ChangeStream()
    for lo, hi in ((0, 2), (2, 3), (3, 6)):
        steps.add(np.arange(6.0)[lo:hi], [8, 8, 16, 16, 16, 8][lo:hi])
    assert [a.tolist() for a in steps.result()] == [[0, 2, 5], [8, 16, 8]]


# --------------------------------------------------------------------------- commands and topology
def test_command_series_one_row_per_actuator_and_value() -> None:
    commands = pd.DataFrame(
        {
            "t_effective_s": [2.0, 1.0],
            "source": ["ofo", "ofo"],
            "command": ["set_batch_size", "set_power_cap"],
            "fields": [
                '{"site":"dc1","model":"A","batch_size":64}',
                '{"site":"dc1","cap_w_per_gpu":null,"model":"B"}',
            ],
        }
    )
    events = pd.DataFrame(
        {
            "t_s": [3.0, 4.0],
            "command": ["set_taps", "supply_lost"],
            "fields": ['{"bank":"reg1","taps":[1,2,3]}', '{"site":"dc1","bus":"671"}'],
        }
    )
    series = command_series(commands, events)
    assert list(series["actuator"]) == ["set_power_cap dc1/B", "set_batch_size dc1/A"] + ["set_taps reg1"] * 3
    assert list(series["series"]) == ["cap_w_per_gpu", "batch_size", "taps[0]", "taps[1]", "taps[2]"]
    assert np.isnan(series["value"][0]) and list(series["value"][1:]) == [64.0, 1.0, 2.0, 3.0]
    assert list(series["source"]) == ["ofo", "ofo", "event", "event", "event"]


def test_distance_from_source_sums_line_lengths_and_skips_open_branches() -> None:
    buses = pd.DataFrame({"bus": ["s", "a", "b", "c", "d"], "x": np.nan, "y": np.nan, "phases": "abc"})
    edges = pd.DataFrame(
        {
            "name": ["t", "l1", "l2", "l3", "sw"],
            "from_bus": ["s", "a", "b", "a", "c"],
            "to_bus": ["a", "b", "c", "c", "d"],
            "kind": ["transformer", "line", "line", "line", "switch"],
            "in_service": [True, True, True, True, False],
            "length_km": [0.0, 0.5, 0.25, 1.0, 0.0],
        }
    )
    distance = distance_from_source_km(Topology(buses, edges, "s"))
    assert distance["s"] == 0.0 and distance["a"] == pytest.approx(0.0, abs=1e-9)
    assert distance["b"] == pytest.approx(0.5)
    assert distance["c"] == pytest.approx(0.75)  # through b, shorter than the 1 km line
    assert np.isnan(distance["d"])  # behind an open switch


# --------------------------------------------------------------------------- compare
SUMMARIES = [
    ("base", {"violation_integral_pu_s": 2.0, "mean_throughput_tok_s": 8e6, "n_batch_changes": 0}),
    ("ofo", {"violation_integral_pu_s": 0.5, "mean_throughput_tok_s": 7e6, "n_batch_changes": 9}),
]


def test_baseline_deltas_are_differences_and_percent_of_the_baseline() -> None:
    keys = ["violation_integral_pu_s", "mean_throughput_tok_s", "n_batch_changes"]
    deltas = baseline_deltas(SUMMARIES, "base", keys)
    assert list(deltas.index) == ["ofo"]
    row = deltas.loc["ofo"]
    assert row["violation_integral_pu_s"] == -1.5 and row["violation_integral_pu_s_pct"] == -75.0
    assert row["mean_throughput_tok_s"] == -1e6 and row["mean_throughput_tok_s_pct"] == -12.5
    assert row["n_batch_changes"] == 9 and np.isnan(row["n_batch_changes_pct"])  # baseline 0
    with pytest.raises(ValueError, match="no run labelled 'nope'"):
        baseline_deltas(SUMMARIES, "nope", keys)


def test_cli_compare_against_a_baseline_prints_the_changes_and_draws_the_runs(tmp_path: Path, capsys) -> None:
    runs = {}
    for name, throughput, misses in (("a", 8e6, 0.02), ("b", 6e6, 0.03)):
        out = tmp_path / name
        (out / "grid").mkdir(parents=True)
        summary = {"scenario": f"sc_{name}", "mean_throughput_tok_s": throughput, "itl_deadline_miss_fraction": misses}
        (out / "summary.json").write_text(json.dumps(summary))
        pd.DataFrame({"t_s": [0.1, 0.2], "violation_pu": [0.0, 0.01]}).to_parquet(out / "grid" / "part-0.parquet")
        runs[name] = out
    png = tmp_path / "cmp.png"
    assert main(["compare", str(runs["b"]), "--baseline", str(runs["a"]), "--plot", str(png)]) == 0
    text = capsys.readouterr().out
    change = next(line for line in text.splitlines() if line.startswith("sc_b") and "(" in line)
    assert "-2,000,000 (-25.0%)" in change  # throughput 6e6 against 8e6
    assert "+1.00 (+50.0%)" in change  # ITL misses 3% against 2%: +1 percentage point, +50%
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert main(["compare", str(runs["b"]), "--baseline", str(runs["a"]), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["baseline"] == "sc_a" and list(data["runs"]) == ["sc_a", "sc_b"]
    assert data["deltas"]["sc_b"]["mean_throughput_tok_s_pct"] == -25.0
    assert data["deltas"]["sc_b"]["v_min_pu"] is None  # neither run reports it
