"""Running sweeps with the toy run function: results table, invalid runs, resuming, crashed workers."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from openg2g.core.errors import ScenarioError
from openg2g.sweep import load_sweep, run_sweep
from openg2g.testing import toy_run, toy_summary
from tests.studies.conftest import write_sweep
from tests.studies.crashing import CRASH_EXIT_CODE, crashing_toy_run


def test_results_table_has_one_row_per_run_with_parameters_and_figures(toy_sweep, tmp_path):
    out = tmp_path / "out"
    result = run_sweep(toy_sweep, out, engine="serial", run_fn=toy_run)
    table = pd.read_parquet(out / "results.parquet")
    pd.testing.assert_frame_equal(table, result.table)
    assert list(table["index"]) == list(range(6))
    assert list(table["toy.mw"]) == [0.5, 0.5, 2.5, 2.5, -1.0, -1.0]
    assert list(table["seed"]) == [0, 1, 0, 1, 0, 1]
    ok = table[table["status"] == "complete"]
    for _, row in ok.iterrows():
        expected = toy_summary(row["toy.mw"], 2.0, 360.0, int(row["seed"]))
        for key in ("violation_integral_pu_s", "mean_throughput_tok_s", "energy_mwh"):
            assert row[key] == pytest.approx(expected[key], rel=1e-12)
    assert {"run_id", "status", "error", "reused", "violation_integral_pu_s"} <= set(table.columns)
    for run_id in table["run_id"]:
        assert (out / run_id / "summary.json").exists() and (out / run_id / "run.json").exists()


@pytest.mark.slow
def test_invalid_parameters_are_reported_per_run_and_do_not_stop_the_sweep(toy_sweep, tmp_path):
    result = run_sweep(toy_sweep, tmp_path / "out", workers=2, run_fn=toy_run)
    assert result.counts() == {"complete": 4, "invalid": 2}
    bad = result.table[result.table["status"] == "invalid"]
    assert list(bad["toy.mw"]) == [-1.0, -1.0]
    assert all("toy.mw" in e and "must be >= 0 MW" in e for e in bad["error"])
    assert result.table[result.table["status"] == "complete"]["error"].isna().all()


def test_rerun_skips_complete_runs_and_reruns_the_others(toy_sweep, tmp_path):
    out = tmp_path / "out"
    first = run_sweep(toy_sweep, out, engine="serial", run_fn=toy_run)
    done = first.table.loc[first.table["status"] == "complete", "run_id"].tolist()
    mtimes = {r: (out / r / "summary.json").stat().st_mtime_ns for r in first.table["run_id"]}
    # one complete run was killed half way: its summary says running
    killed = done[0]
    (out / killed / "summary.json").write_text(json.dumps({"status": "running"}))
    second = run_sweep(toy_sweep, out, engine="serial", run_fn=toy_run)
    assert second.n_reused == len(done) - 1
    reused = set(second.table.loc[second.table["reused"], "run_id"])
    assert reused == set(done) - {killed}
    for run_id in reused:
        assert (out / run_id / "summary.json").stat().st_mtime_ns == mtimes[run_id]
    for run_id in set(first.table["run_id"]) - reused:
        assert (out / run_id / "summary.json").stat().st_mtime_ns != mtimes.get(run_id)
    cols = ["run_id", "status", "violation_integral_pu_s", "mean_throughput_tok_s"]
    pd.testing.assert_frame_equal(first.table[cols], second.table[cols])


def test_a_changed_base_scenario_invalidates_complete_runs(toy_sweep, tmp_path):
    out = tmp_path / "out"
    run_sweep(toy_sweep, out, engine="serial", run_fn=toy_run)
    base = toy_sweep.parent / "base.yaml"
    base.write_text(base.read_text().replace("limit_mw: 2.0", "limit_mw: 0.1"))
    before = {p: p.read_bytes() for p in out.glob("*/summary.json")}
    with pytest.raises(ScenarioError, match="4 complete runs were made from other inputs and would be replaced"):
        run_sweep(toy_sweep, out, engine="serial", run_fn=toy_run)
    assert {p: p.read_bytes() for p in out.glob("*/summary.json")} == before  # refused before any run
    again = run_sweep(toy_sweep, out, engine="serial", run_fn=toy_run, overwrite=True)
    assert again.n_reused == 0
    assert (again.table.loc[again.table["status"] == "complete", "violation_integral_pu_s"] > 0).all()


def test_failed_run_is_recorded_with_its_error(tmp_path):
    path = write_sweep(tmp_path, [{"product": {"toy.fail": [False, True]}}])
    result = run_sweep(path, tmp_path / "out", engine="serial", run_fn=toy_run)
    assert list(result.table["status"]) == ["complete", "failed"]
    assert result.table["error"].iloc[1] == "RuntimeError: toy failure requested"


@pytest.mark.slow
def test_killed_worker_loses_only_its_run_which_is_retried(tmp_path):
    # run 1 kills its worker process on the first attempt; the other runs share the pool
    path = write_sweep(tmp_path, [{"zip": {"toy.mw": [0.5, 1.0, 1.5, 3.0], "toy.crash": [None, "once", None, None]}}])
    result = run_sweep(path, tmp_path / "out", workers=2, retries=1, run_fn=crashing_toy_run)
    assert list(result.table["status"]) == ["complete"] * 4
    assert list(result.table["energy_mwh"]) == pytest.approx([0.05, 0.1, 0.15, 0.3])


@pytest.mark.slow
def test_a_worker_that_always_dies_is_reported_failed_after_its_retries(tmp_path):
    path = write_sweep(tmp_path, [{"zip": {"toy.mw": [0.5, 1.0, 1.5], "toy.crash": [None, "always", None]}}])
    result = run_sweep(path, tmp_path / "out", workers=2, retries=1, run_fn=crashing_toy_run)
    assert list(result.table["status"]) == ["complete", "failed", "complete"]
    assert f"worker process died with exit code {CRASH_EXIT_CODE} (attempt 2 of 2" in result.table["error"].iloc[1]
    summary = json.loads((tmp_path / "out" / result.table["run_id"].iloc[1] / "summary.json").read_text())
    assert summary["status"] == "failed"


def test_local_pool_matches_serial(toy_sweep, tmp_path):
    serial = run_sweep(toy_sweep, tmp_path / "a", engine="serial", run_fn=toy_run).table
    local = run_sweep(toy_sweep, tmp_path / "b", engine="local", workers=2, run_fn=toy_run).table
    pd.testing.assert_frame_equal(serial, local, check_exact=True)


def test_plan_overrides_put_fixed_settings_first(toy_sweep, tmp_path):
    from openg2g.sweep import plan_sweep

    text = toy_sweep.read_text() + "set: [toy.limit_mw=3]\n"
    toy_sweep.write_text(text)
    tasks = plan_sweep(load_sweep(toy_sweep), tmp_path / "o")
    assert tasks[0].overrides == ("outputs.plots=false", "toy.limit_mw=3", "toy.mw=0.5", "seed=0")


def test_the_sweep_table_shows_non_converged_steps(capsys):
    """A run whose feeder collapsed on half its steps shows that count beside its (partial) figures."""
    import pandas as pd

    from openg2g.cli.sweep import print_results

    table = pd.DataFrame(
        {
            "run_id": ["r0", "r1"],
            "bus": ["671", "680"],
            "status": ["complete", "complete"],
            "error": [None, None],
            "violation_integral_pu_s": [50.5, 1.59],
            "grid_steps": [200, 200],
            "nonconverged_steps": [0, 100],
        }
    )
    print_results(table, ["bus"])
    out, err = capsys.readouterr()
    assert out.splitlines()[0].split()[-1] == "nonconverged_steps" and out.splitlines()[2].split()[-1] == "100"
    assert err == "r1: 100 of 200 grid steps did not converge: its voltage figures cover the converged steps only\n"
