"""Output files under faults: hidden temporary parts, reruns into the same folder, a full disk, Ctrl-C."""

from __future__ import annotations

import dataclasses
import errno
import json
import signal
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from openg2g.core.errors import OutputError
from openg2g.core.state import BranchSet, DatacenterState, GridState
from openg2g.engine.simulation import Simulation
from openg2g.record import tables as outputs
from openg2g.record import writer as recorder
from openg2g.scenario.run import run_scenario
from tests.engine.toys import KilowattSite, TwoBusGrid, make_loaded

TABLES = ("datacenter", "models", "grid")


def _sim(out: Path, duration_s: float = 5, flush_every_s: float = 1) -> Simulation:
    loaded = make_loaded(duration_s=duration_s, outputs={"plots": False, "flush_every_s": flush_every_s})
    return Simulation.from_scenario(loaded, out, components=([KilowattSite("dc", [])], TwoBusGrid([]), []))


def test_a_left_over_temporary_part_does_not_break_reading(tmp_path: Path) -> None:
    _sim(tmp_path).run()
    (tmp_path / "grid" / ".part-00099.parquet.tmp").write_bytes(b"half a parquet file")  # a kill mid-write
    grid = pd.read_parquet(tmp_path / "grid")
    assert len(grid) == 50 and grid["t_s"].iloc[-1] == 5.0


def test_the_summary_returned_is_the_one_written(tmp_path: Path) -> None:
    summary = _sim(tmp_path).run()
    assert json.loads((tmp_path / "summary.json").read_text()) == summary  # wall_time_s included


def test_a_rerun_into_the_same_folder_replaces_the_earlier_tables(tmp_path: Path) -> None:
    _sim(tmp_path, duration_s=5).run()
    summary = _sim(tmp_path, duration_s=2).run()
    for table in TABLES:
        assert pd.read_parquet(tmp_path / table)["t_s"].max() == summary["sim_time_s"] == 2.0
    assert len(pd.read_parquet(tmp_path / "grid")) == 20


def test_a_rerun_without_an_optional_table_leaves_none_of_the_earlier_one(tmp_path: Path) -> None:
    def run(voltages: str) -> None:
        loaded = make_loaded(duration_s=2, outputs={"plots": False, "voltages": voltages})
        Simulation.from_scenario(loaded, tmp_path, components=([KilowattSite("dc", [])], TwoBusGrid([]), [])).run()

    run("all")
    assert len(pd.read_parquet(tmp_path / "grid_voltages")) > 0
    run("envelope")  # the voltages of the first run must not pass for this run's
    assert not list((tmp_path / "grid_voltages").glob("*.parquet"))


def test_a_full_disk_fails_the_run_with_all_tables_ending_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write = pq.write_table

    def disk_fills_after_two_seconds(table, where, *args, **kwargs):  # type: ignore[no-untyped-def]
        if Path(where).parent.name == "grid" and table["t_s"].to_pylist()[0] > 2.0:
            raise OSError(errno.ENOSPC, "No space left on device")
        return write(table, where, *args, **kwargs)

    monkeypatch.setattr(recorder.pq, "write_table", disk_fills_after_two_seconds)
    with pytest.raises(OutputError, match="No space left on device"):
        _sim(tmp_path).run()
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "failed" and "No space left on device" in summary["error"]
    ends = {table: pd.read_parquet(tmp_path / table)["t_s"].max() for table in TABLES}
    assert set(ends.values()) == {2.0}  # the flush at 3 s made no table longer than the others
    assert not list(tmp_path.rglob("*.tmp"))


class _NoLatencySite(KilowattSite):
    """The toy site serving an unknown throughput (NaN), as a trace imported without latency data
    does; with ``nan_misses`` its throughput is known and its miss fraction is not (a plug-in's NaN)."""

    def __init__(self, nan_misses: bool = False):
        super().__init__("dc", [])
        self.nan_misses = nan_misses

    def step(self, t_s: float, dt_s: float) -> DatacenterState:
        state = super().step(t_s, dt_s)
        model = state.models["toy"]
        changes = {"deadline_miss_fraction": np.nan} if self.nan_misses else {"throughput_tok_s": np.nan}
        return dataclasses.replace(state, models={"toy": dataclasses.replace(model, **changes)})


def test_a_model_without_latency_data_leaves_its_figures_null_and_named(tmp_path: Path) -> None:
    loaded = make_loaded(duration_s=2, outputs={"plots": False, "flush_every_s": 1})
    summary = Simulation.from_scenario(loaded, tmp_path, components=([_NoLatencySite()], TwoBusGrid([]), [])).run()
    written = json.loads((tmp_path / "summary.json").read_text())
    assert written == summary and written["status"] == "complete"
    assert written["mean_throughput_tok_s"] is None and written["itl_deadline_miss_fraction"] is None
    why = "no throughput or ITL data for toy at site dc (a trace imported without latency metadata)"
    assert written["unavailable_figures"] == {"mean_throughput_tok_s": why, "itl_deadline_miss_fraction": why}
    assert written["energy_mwh"] > 0  # what can be computed still is


def test_any_figure_that_is_not_a_finite_number_is_null_and_named(tmp_path: Path) -> None:
    loaded = make_loaded(duration_s=2, outputs={"plots": False})
    sim = Simulation.from_scenario(loaded, tmp_path, components=([_NoLatencySite(nan_misses=True)], TwoBusGrid([]), []))
    sim.run()
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["mean_throughput_tok_s"] == pytest.approx(100.0) and summary["itl_deadline_miss_fraction"] is None
    assert summary["unavailable_figures"] == {"itl_deadline_miss_fraction": "not a finite number (nan)"}


class _InterruptedChunk(Mapping):
    """Column chunk whose third column is never delivered: Ctrl-C arrives while it is recorded."""

    def __init__(self, columns: dict):
        self._columns = columns

    def __getitem__(self, name):  # type: ignore[no-untyped-def]
        if name == list(self._columns)[2]:
            raise KeyboardInterrupt
        return self._columns[name]

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._columns)

    def __len__(self) -> int:
        return len(self._columns)


def test_a_chunk_cut_by_ctrl_c_is_not_half_recorded(tmp_path: Path) -> None:
    writer = recorder.TableWriter(tmp_path / "t")
    chunk = {name: np.arange(3.0) + i for i, name in enumerate("abcd")}
    writer.append(chunk)
    with pytest.raises(KeyboardInterrupt):
        writer.append(_InterruptedChunk({name: np.arange(2.0) for name in "abcd"}))
    writer.append_row(a=10.0, b=11.0, c=12.0, d=13.0)
    writer.flush()  # columns of different lengths would raise pyarrow's ArrowInvalid here
    table = pd.read_parquet(tmp_path / "t")
    assert list(table["c"]) == [2.0, 3.0, 4.0, 12.0]


def test_a_flush_cut_by_ctrl_c_writes_the_rows_it_took(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C lands after a flush took the grid's rows from the buffer, before they were written:
    the rows are written, the interrupt comes after, and the tables end where the summary does."""
    sim = _sim(tmp_path, duration_s=5, flush_every_s=2)
    append = outputs.TableRecorder._append
    grid_appends = []

    def ctrl_c_then_append(self: outputs.TableRecorder, writer: Any, columns: dict[str, Any]) -> None:
        if writer is self.grid:
            grid_appends.append(None)
            if len(grid_appends) == 2:  # the second flush (4 s): its rows are out of the buffer
                signal.raise_signal(signal.SIGINT)
        append(self, writer, columns)

    monkeypatch.setattr(outputs.TableRecorder, "_append", ctrl_c_then_append)
    with pytest.raises(KeyboardInterrupt):
        sim.run()
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "interrupted" and summary["sim_time_s"] == 4.0
    grid = pd.read_parquet(tmp_path / "grid")
    assert list(grid["t_s"]) == pytest.approx([0.1 * k for k in range(1, 41)])


def test_a_burst_of_ctrl_c_leaves_the_summary_interrupted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C pressed several times at once: the first stops the run, the rest land in its closing
    (here: while the last rows are written), which used to stop there and leave the summary saying
    ``running``; they are ignored until the run is closed."""
    sim = _sim(tmp_path, duration_s=5, flush_every_s=1)
    flush = outputs.TableRecorder._flush
    flushes = []

    def burst_at_the_third_flush_and_in_the_closing(self: outputs.TableRecorder) -> None:
        flushes.append(None)
        if len(flushes) >= 3:
            for _ in range(3):
                signal.raise_signal(signal.SIGINT)
        flush(self)

    monkeypatch.setattr(outputs.TableRecorder, "_flush", burst_at_the_third_flush_and_in_the_closing)
    with pytest.raises(KeyboardInterrupt):
        sim.run()
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "interrupted" and summary["error"] == "interrupted by the user (Ctrl-C)"
    grid = pd.read_parquet(tmp_path / "grid")
    assert grid["t_s"].iloc[-1] == pytest.approx(summary["sim_time_s"])
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


class _LoadedLineGrid(TwoBusGrid):
    """The two-bus toy feeder with its line reported as a branch: 1 A per 100 W drawn per phase,
    rated 8 A, so the toy site at batch 1 (1 kW per phase, 10 A) loads it to exactly 125%."""

    BRANCHES = BranchSet(
        names=("line.feed",),
        branch=np.zeros(3, dtype=np.int64),
        terminal=np.ones(3, dtype=np.int64),
        phase=("a", "b", "c"),
        rating_a=np.full(3, 8.0),
        emergency_a=np.full(3, 12.0),
        default_rating=np.zeros(3, dtype=bool),
        default_emergency=np.ones(3, dtype=bool),
    )

    def branches(self) -> BranchSet:
        return self.BRANCHES

    def solve(self, t_s: float, loads: Mapping[str, DatacenterState], dt_s: float) -> GridState:
        state = super().solve(t_s, loads, dt_s)
        current_a = sum((s.p_w for s in loads.values()), np.zeros(3)) / 100.0
        loading = np.array([current_a.max() * 100.0 / 8.0])
        return dataclasses.replace(
            state, branches=self.BRANCHES, branch_current_a=current_a, branch_loading_pct=loading
        )


@pytest.mark.parametrize("flush_every_s", [1, 5])
def test_branch_loading_table_and_summary(tmp_path: Path, flush_every_s: float) -> None:
    """50 grid steps of 0.1 s at 125%: overload integral 50 x 0.1 s x 25% = 125 %.s whatever the
    flush blocks; the table (opt-in) has one row per step and conductor."""
    outputs = {"plots": False, "flush_every_s": flush_every_s, "branches": "all"}
    loaded = make_loaded(duration_s=5, outputs=outputs)
    summary = Simulation.from_scenario(
        loaded, tmp_path, components=([KilowattSite("dc", [])], _LoadedLineGrid([]), [])
    ).run()
    assert summary["max_loading_pct"] == 125.0
    assert summary["max_loading_branch"] == "line.feed"
    assert summary["overload_integral_pct_s"] == pytest.approx(125.0, rel=1e-12)
    table = pd.read_parquet(tmp_path / "grid_branches")
    assert len(table) == 50 * 3 and set(table["phase"].astype(str)) == {"a", "b", "c"}
    assert (table["current_a"] == 10.0).all() and (table["loading_pct"] == 125.0).all()
    assert not table["rating_default"].any() and table["emergency_default"].all()


def test_branch_table_is_opt_in_and_a_grid_without_branches_reports_none(tmp_path: Path) -> None:
    summary = Simulation.from_scenario(
        make_loaded(), tmp_path / "a", components=([KilowattSite("dc", [])], _LoadedLineGrid([]), [])
    ).run()
    assert not (tmp_path / "a" / "grid_branches").exists() and summary["overload_integral_pct_s"] > 0
    summary = _sim(tmp_path / "b").run()
    assert summary["max_loading_pct"] is None and summary["max_loading_branch"] is None
    assert summary["overload_integral_pct_s"] is None


@pytest.mark.parametrize(
    "values",
    [
        np.array([1.5, np.nan, -0.0, np.inf]),
        np.arange(5),
        np.arange(3, dtype=np.int8),
        np.array([True, False, True] * 5),
        np.array(["a", "bé", ""], dtype=object),
        np.array(["x", "yy"]),
    ],
    ids=["float64", "int64", "int8", "bool", "object-str", "numpy-str"],
)
def test_arrow_columns_are_those_pyarrow_infers(values: np.ndarray) -> None:
    import pyarrow as pa

    built = recorder.arrow_array(values)
    built.validate(full=True)
    inferred = pa.array(values.tolist() if values.dtype.kind == "U" else values)
    assert built.type == inferred.type and built.null_count == 0
    assert built.to_pylist() == inferred.to_pylist() or values.dtype.kind == "f"
    if values.dtype.kind == "f":  # NaN != NaN: compare the bits
        assert np.asarray(built).tobytes() == np.asarray(inferred).tobytes()


def test_arrow_columns_of_other_objects_are_refused() -> None:
    with pytest.raises(TypeError, match="dtype"):
        recorder.arrow_array(np.array([1j]))


@pytest.mark.slow
def test_writing_the_tables_imports_neither_pandas_nor_pyarrow_compute(tmp_path: Path) -> None:
    import subprocess
    import sys

    code = (  # _sim without this module, which imports pandas to read the tables back
        "import sys; from pathlib import Path; from openg2g.engine.simulation import Simulation; "
        "from tests.engine.toys import KilowattSite, TwoBusGrid, make_loaded; "
        "loaded = make_loaded(duration_s=5, outputs={'plots': False, 'flush_every_s': 1}); "
        f"Simulation.from_scenario(loaded, Path({str(tmp_path)!r}), components=([KilowattSite('dc', [])], TwoBusGrid([]), [])).run(); "
        "print('pandas' in sys.modules or 'pyarrow.compute' in sys.modules)"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_dictionary_columns_are_those_pyarrow_encodes() -> None:
    values = np.array(["b", "a", "b", "c", "a"], dtype=object)
    built = recorder._dictionary_array(values)
    built.validate(full=True)
    assert built.equals(recorder.arrow_array(values).dictionary_encode())


def test_each_part_states_its_time_range_for_readers_that_skip_parts(tmp_path: Path) -> None:
    loaded = make_loaded(duration_s=2, outputs={"plots": False, "voltages": "all", "flush_every_s": 1})
    Simulation.from_scenario(loaded, tmp_path, components=([KilowattSite("dc", [])], TwoBusGrid([]), [])).run()
    parts = sorted((tmp_path / "grid_voltages").glob("part-*.parquet"))
    assert len(parts) == 2
    for part in parts:
        meta = pq.ParquetFile(part).metadata.row_group(0)
        columns = {meta.column(i).path_in_schema: meta.column(i) for i in range(meta.num_columns)}
        times = pq.read_table(part)["t_s"].to_numpy()
        stats = columns["t_s"].statistics
        assert stats is not None and (stats.min, stats.max) == (times.min(), times.max())
    # which lets a reader filter by time without reading every part
    late = pd.read_parquet(tmp_path / "grid_voltages", filters=[("t_s", ">", 1.0)])
    assert late["t_s"].min() > 1.0 and len(late) > 0


def test_tap_columns_are_named_by_bank_and_phase_letter(tmp_path: Path) -> None:
    """IEEE 123's banks regulate a/b/c, a alone and a/c: one ``tap_<bank>_<phase>`` column each."""
    run_scenario("ieee123_ref_none", tmp_path, ["duration_s=1", "outputs.plots=false"])
    taps = [c for c in pd.read_parquet(tmp_path / "grid").columns if c.startswith("tap_")]
    assert taps == [
        "tap_reg1_a", "tap_reg1_b", "tap_reg1_c", "tap_reg2_a", "tap_reg3_a", "tap_reg3_c",
        "tap_reg4_a", "tap_reg4_b", "tap_reg4_c",
    ]  # fmt: skip


_RUN_ONLY = ("wall_time_s", "steps_per_s", "realtime_factor", "scenario_sha256", "outputs", "overrides", "plots")
"""summary.json entries that describe the run's settings or its wall clock, not its results."""


@pytest.mark.slow
def test_results_do_not_depend_on_the_output_settings(tmp_path: Path) -> None:
    """ieee13_ofo for 30 s, flushed every 7 s without plots and every 0.1 s (between control
    steps) with plots, voltage envelopes and branch tables: every table both write and every result
    in summary.json are equal bit for bit. A flush between control steps used to close the grid's
    batch window there, and the two batches' iterative solutions moved voltages by ~3e-9 pu."""
    base = ["duration_s=30", "outputs.plots=false"]
    a = run_scenario("ieee13_ofo", tmp_path / "a", [*base, "outputs.flush_every_s=7"]).summary
    b = run_scenario(
        "ieee13_ofo",
        tmp_path / "b",
        [*base, "outputs.flush_every_s=0.1", "outputs.plots=true", "outputs.voltages=envelope", "outputs.branches=all"],
    ).summary
    assert {k: v for k, v in a.items() if k not in _RUN_ONLY} == {k: v for k, v in b.items() if k not in _RUN_ONLY}
    shared = sorted(p.name for p in (tmp_path / "a").iterdir() if p.is_dir() and (tmp_path / "b" / p.name).is_dir())
    assert {"grid", "datacenter", "models", "commands"} <= set(shared)
    for table in shared:
        ta, tb = pq.read_table(tmp_path / "a" / table), pq.read_table(tmp_path / "b" / table)
        assert ta.schema == tb.schema, table
        for name in ta.column_names:  # bitwise: NaN equals NaN, -0.0 differs from 0.0
            ca, cb = ta[name].to_numpy(), tb[name].to_numpy()
            if ca.dtype.kind == "f":
                assert np.array_equal(ca.view(f"u{ca.itemsize}"), cb.view(f"u{cb.itemsize}")), f"{table}.{name}"
            else:
                assert ca.tolist() == cb.tolist(), f"{table}.{name}"
