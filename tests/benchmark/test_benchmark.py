"""``openg2g benchmark``: a 3-case toy suite of real short runs, scored against the runs' own summaries."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from openg2g.benchmark import SCORES, load_suite, run_benchmark
from openg2g.cli.main import main
from openg2g.core.errors import ScenarioError
from openg2g.sweep.engines import make_engine

# ieee13 with the fixed taps, 20 s: the training job from 5 to 15 s pushes the feeder below 0.95 pu
TOY = {
    "suite": "toy",
    "set": ["duration_s=20", "datacenters.0.training.start_s=5", "datacenters.0.training.end_s=15"],
    "controllers": [
        {"name": "rule_based", "kind": "rule_based", "params": {"hold_s": 2}},
        {"name": "ofo", "kind": "ofo", "tuned": True},
    ],
    "cases": [
        {
            "name": "t13",
            "scenario": "ieee13_fixedtap_none",
            "variations": [{"zip": {"datacenters.0.bus": ["675", "692"]}}],
        }
    ],
}
CONTROLLERS = ["none", "rule_based", "ofo"]
CASES = ["t13-ref", "t13-v0", "t13-v1"]


def write_suite(directory: Path, **changes) -> Path:
    """The toy suite with top-level fields replaced; returns its path."""
    path = directory / "suite.yaml"
    path.write_text(yaml.safe_dump({**TOY, **changes}, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    directory = tmp_path_factory.mktemp("bench")
    suite = load_suite(write_suite(directory))
    out = directory / "out"
    return suite, out, run_benchmark(suite, out, make_engine("serial"))  # the local pool: tests/studies


def _summary(out: Path, case: str, controller: str) -> dict:
    return json.loads((out / "runs" / f"{case}-{controller}" / "summary.json").read_text())


@pytest.mark.slow
def test_suite_expands_to_cases_times_controllers_plus_baseline(toy_run):
    suite, out, result = toy_run
    assert [c.case_id for c in suite.cases] == CASES
    assert [c.params for c in suite.cases] == [{}, {"datacenters.0.bus": "675"}, {"datacenters.0.bus": "692"}]
    assert sorted(zip(result.cases["case"], result.cases["controller"])) == sorted(
        (c, k) for c in CASES for k in CONTROLLERS
    )
    # ofo is tuned: the ieee13_fixedtap_ofo.yaml block, not the defaults
    assert set(result.cases.loc[result.cases["controller"] == "ofo", "controller_source"]) == {
        "ieee13_fixedtap_ofo.yaml"
    }
    for case in CASES:
        ran = yaml.safe_load((out / "runs" / f"{case}-none" / "scenario.yaml").read_text())
        assert ran["controllers"] == [] and float(ran["duration_s"]) == 20
    assert yaml.safe_load((out / "runs" / "t13-v1-ofo" / "scenario.yaml").read_text())["datacenters"][0]["bus"] == "692"


def test_leaderboard_is_the_mean_and_worst_of_the_run_summaries(toy_run):
    _, out, result = toy_run
    assert result.n_incomplete() == 0
    board = pd.read_csv(out / "leaderboard.csv").set_index("controller")
    for controller in CONTROLLERS:
        scores: dict[str, list[float]] = {col: [] for col in SCORES}
        for case in CASES:
            s = _summary(out, case, controller)
            base = _summary(out, case, "none")
            scores["violation_integral_pu_s"].append(s["violation_integral_pu_s"])
            scores["violation_time_s"].append(s["violation_time_s"])
            scores["throughput_loss_pct"].append(100 * (1 - s["mean_throughput_tok_s"] / base["mean_throughput_tok_s"]))
            scores["itl_deadline_miss_pct"].append(100 * s["itl_deadline_miss_fraction"])
            scores["n_tap_changes"].append(s["n_tap_changes"])
        for col, values in scores.items():
            assert board.loc[controller, f"{col}_mean"] == pytest.approx(
                sum(values) / len(values), rel=1e-12, abs=1e-12
            )
            assert board.loc[controller, f"{col}_worst"] == pytest.approx(max(values), rel=1e-12, abs=1e-12)
        assert board.loc[controller, "n_cases"] == 3
    # the baseline loses nothing against itself; the case is one a controller improves
    assert board.loc["none", "throughput_loss_pct_worst"] == 0
    assert board.loc["none", "violation_integral_pu_s_mean"] > 0
    ranked = board.sort_values("rank")
    assert list(ranked["violation_integral_pu_s_mean"]) == sorted(ranked["violation_integral_pu_s_mean"])
    cases = pd.read_parquet(out / "cases.parquet")
    assert len(cases) == 9 and len(pd.read_csv(out / "cases.csv")) == 9
    assert (out / "leaderboard.png").stat().st_size > 0
    markdown = (out / "leaderboard.md").read_text().splitlines()
    assert len(markdown) == 2 + 3 and all(line.startswith("| ") for line in markdown)


@pytest.mark.slow
def test_rerun_reuses_complete_runs_and_reruns_a_changed_controller(toy_run, tmp_path):
    suite, shared, first = toy_run
    out = tmp_path / "out"
    shutil.copytree(shared, out)  # the runs of the other tests stay as they are
    again = run_benchmark(suite, out, make_engine("serial"), plot=False)
    assert again.n_reused == 9
    pd.testing.assert_frame_equal(first.leaderboard, again.leaderboard)
    # new rule_based parameters: its three runs are stale, the other six are kept; replacing the
    # three complete runs needs overwrite, and without it nothing runs
    changed = dict(TOY["controllers"][0], params={"hold_s": 3})
    path = write_suite(tmp_path, controllers=[changed, TOY["controllers"][1]])
    before = (out / "runs" / "t13-ref-rule_based" / "summary.json").read_bytes()
    with pytest.raises(ScenarioError, match="3 complete runs were made from other inputs.*t13-ref-rule_based"):
        run_benchmark(load_suite(path), out, make_engine("serial"), plot=False)
    assert (out / "runs" / "t13-ref-rule_based" / "summary.json").read_bytes() == before
    third = run_benchmark(load_suite(path), out, make_engine("serial"), plot=False, overwrite=True)
    assert third.n_reused == 6
    assert set(third.cases.loc[~third.cases["reused"], "run_id"]) == {f"{c}-rule_based" for c in CASES}


def test_cli_prints_the_leaderboard(toy_run, capsys):
    suite, out, _ = toy_run
    assert main(["benchmark", str(suite.path), "--out", str(out), "--no-progress", "--no-plot"]) == 0
    printed = capsys.readouterr().out
    for controller in CONTROLLERS:
        assert controller in printed
    assert "9 runs (0 incomplete; 9 reused from earlier)" in printed


def test_command_line_overrides_come_last(tmp_path):
    suite = load_suite(write_suite(tmp_path), ["duration_s=7"], check=False)
    assert all(case.overrides[-1] == "duration_s=7" for case in suite.cases)
    assert suite.cases[1].overrides[-2] == 'datacenters.0.bus="675"'


def test_validate_checks_a_suite(toy_run, capsys):
    suite, _, _ = toy_run
    assert main(["validate", str(suite.path)]) == 0
    assert "ok (suite toy: 3 cases, 2 controllers and no control, 9 runs)" in capsys.readouterr().out


def _errors(capsys, path: Path) -> str:
    assert main(["validate", str(path)]) == 2
    return capsys.readouterr().err


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"controllers": [{"name": "x", "kind": "fuzzy"}]}, ["controllers.0 (x)", "unknown controller 'fuzzy'", "ofo"]),
        (
            {"controllers": [{"name": "x", "kind": "ofo", "params": {"primal_stepp": 1}}]},
            ["controllers.0 (x)", "params.primal_stepp"],
        ),
        ({"controllers": []}, ["suite.yaml: controllers", "at least 1"]),
        ({"cases": []}, ["suite.yaml: cases", "at least 1"]),
        (
            {"cases": [{"name": "a", "scenario": "ieee99_none"}]},
            ["suite.yaml: cases.0.scenario", "'ieee99_none'"],
        ),
        (
            {"cases": [dict(TOY["cases"][0], variations=[{"zip": {"datacenters.0.bus": ["675", "999"]}}])]},
            ["cases.0.variations (point t13-v1)", 'datacenters.0.bus="999"', "unknown bus '999'"],
        ),
        ({"controllers": [{"name": "none", "kind": "ofo"}]}, ["controllers.0", "no-control baseline"]),
        (
            {"controllers": [{"name": "x", "kind": "ofo", "cases": ["t14"]}]},
            ["controllers.0.cases", "['t14'] are not case groups"],
        ),
        ({"controllers": [{"name": "x", "kind": "ofo", "scenario": "ieee13_ofo"}]}, ["exactly one of kind"]),
    ],
)
def test_bad_suites_are_refused_before_anything_runs(tmp_path, capsys, changes, expected):
    path = write_suite(tmp_path, **changes)
    err = _errors(capsys, path)
    assert "Traceback" not in err
    assert str(path) in err
    for text in expected:
        assert text in err
    assert main(["benchmark", str(path), "--out", str(tmp_path / "out"), "--no-progress"]) == 2
    assert not (tmp_path / "out" / "runs").exists()


def test_bundled_suite_has_twenty_cases_on_three_feeders():
    suite = load_suite(Path(__file__).parents[2] / "scenarios" / "benchmark_ieee.yaml", check=False)
    assert len(suite.cases) >= 20
    feeders = {yaml.safe_load(c.scenario.read_text())["grid"]["feeder"] for c in suite.cases}
    assert feeders == {"openg2g-ieee13", "openg2g-ieee34", "openg2g-ieee123"}
    assert all(not math.isnan(len(c.overrides)) for c in suite.cases)


def test_unusable_out_is_refused_before_the_suite_is_checked(tmp_path, capsys):
    (tmp_path / "afile").write_text("keep me")
    path = write_suite(tmp_path)
    assert main(["benchmark", str(path), "--out", str(tmp_path / "afile"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"--out {tmp_path / 'afile'}: is a file" in err and "Traceback" not in err


def _result(case: str, controller: str, status: str, violation: float, throughput: float) -> dict:
    return {
        "run_id": f"{case}-{controller}",
        "case": case,
        "controller": controller,
        "status": status,
        "violation_integral_pu_s": violation,
        "violation_time_s": 1.0,
        "mean_throughput_tok_s": throughput,
        "itl_deadline_miss_fraction": 0.01,
        "n_tap_changes": 0,
    }


def test_incomplete_runs_are_counted_and_left_out_of_the_scores():
    from openg2g.benchmark import case_table, leaderboard

    run = _result
    results = pd.DataFrame(
        [
            run("a", "none", "complete", 4.0, 100.0),
            run("a", "x", "complete", 1.0, 80.0),
            run("b", "none", "failed", math.nan, math.nan),  # no baseline: x's throughput loss unknown in b
            run("b", "x", "complete", 3.0, 50.0),
            run("c", "none", "complete", 2.0, 100.0),
            run("c", "x", "failed", 9.0, 10.0),  # a failed run's partial figures do not count
        ]
    )
    board = leaderboard(case_table(results), ["x"]).set_index("controller")
    assert board.loc["x", "n_cases"] == 3 and board.loc["x", "n_incomplete"] == 1
    assert board.loc["x", "violation_integral_pu_s_mean"] == pytest.approx(2.0)
    assert board.loc["x", "violation_integral_pu_s_worst"] == 3.0
    assert board.loc["x", "throughput_loss_pct_mean"] == pytest.approx(20.0)  # case a only
    assert board.loc["x", "itl_deadline_miss_pct_worst"] == pytest.approx(1.0)
    assert board.loc["none", "n_incomplete"] == 1 and board.loc["none", "violation_integral_pu_s_mean"] == 3.0
    assert list(board.sort_values("rank").index) == ["x", "none"]


def test_ranking_uses_the_cases_every_controller_ran():
    """``y`` ran only the easy case: its overall mean (1.8) is the lowest of all, yet on the case
    that everyone ran ``x`` does better (1.5), so ``x`` ranks first."""
    from openg2g.benchmark import case_table, leaderboard

    results = pd.DataFrame(
        [
            _result("easy", "none", "complete", 2.0, 100.0),
            _result("easy", "x", "complete", 1.5, 100.0),
            _result("easy", "y", "complete", 1.8, 100.0),
            _result("hard", "none", "complete", 20.0, 100.0),
            _result("hard", "x", "complete", 5.0, 100.0),
        ]
    )
    board = leaderboard(case_table(results), ["x", "y"]).set_index("controller")
    assert board.attrs["n_shared"] == 1
    assert board.loc["y", "violation_integral_pu_s_mean"] == 1.8 < board.loc["x", "violation_integral_pu_s_mean"]
    assert board.loc["y", "violation_integral_pu_s_shared"] == 1.8
    assert board.loc["x", "violation_integral_pu_s_shared"] == 1.5
    assert list(board.sort_values("rank").index) == ["x", "y", "none"]


def test_select_runs_some_cases_and_controllers_with_the_baseline(tmp_path):
    from openg2g.benchmark.spec import select_suite

    suite = load_suite(write_suite(tmp_path), check=False)
    part = select_suite(suite, cases=["t13-v*"], controllers=["of?"])
    assert [c.case_id for c in part.cases] == ["t13-v0", "t13-v1"]
    assert [c.name for c in part.spec.controllers] == ["ofo"]
    assert all(list(part.controllers[c]) == ["none", "ofo"] for c in ("t13-v0", "t13-v1"))
    assert part.n_runs() == 4 and suite.n_runs() == 9
    assert select_suite(suite, cases=["t13"]).cases == suite.cases  # a group names all its cases


def test_a_selection_that_matches_nothing_is_refused_with_the_names(tmp_path, capsys):
    path = write_suite(tmp_path)
    assert main(["benchmark", str(path), "--controllers", "pid", "--out", str(tmp_path / "o"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "--controllers pid: matches nothing; names: rule_based, ofo" in err
    assert main(["benchmark", str(path), "--cases", "t34", "--out", str(tmp_path / "o"), "--no-progress"]) == 2
    assert "--cases t34: matches nothing; names: t13" in capsys.readouterr().err


def test_a_run_with_non_converged_steps_ranks_as_a_failure():
    """The issue's case: ``x`` leaves its feeder in voltage collapse, 100 of 200 grid steps not
    converged, and its converged steps add up to only 1.59 pu.s; ``y`` converges throughout at
    50.5 pu.s. ``x`` must not rank first on its low figure: its runs count as failures, shown."""
    from openg2g.benchmark import case_table, leaderboard
    from openg2g.benchmark.run import leaderboard_cells

    rows = [
        _result("a", "none", "complete", 60.0, 100.0),
        _result("a", "x", "complete", 1.59, 100.0),
        _result("a", "y", "complete", 50.5, 100.0),
    ]
    for row, failed in zip(rows, (0, 100, 0)):
        row.update(grid_steps=200, nonconverged_steps=failed)
    cases = case_table(pd.DataFrame(rows))
    assert math.isnan(cases.set_index("controller").loc["x", "violation_integral_pu_s"])
    board = leaderboard(cases, ["x", "y"])
    assert list(board["controller"]) == ["y", "none", "x"]
    assert list(board["n_nonconverged"]) == [0, 0, 1]
    # x's failure does not take case a from the others' comparison
    assert board.attrs["n_shared"] == 1 and list(board["violation_integral_pu_s_shared"])[:2] == [50.5, 60.0]
    assert leaderboard_cells(board)[3][:2] == ["3", "x [1 not converged]"]


def test_a_tie_on_the_shared_cases_is_broken_only_by_shared_figures_or_reported():
    """At 60 s no controller violates: ``rl`` ran only the ieee13 case, ``mpc`` both. Their means over
    their own cases differ (0 and 1.0 pu.s) but compare different cases; on the shared case ``rl``
    loses less throughput (10% vs 20%), so it ranks first; ``a`` and ``b`` equal ``mpc`` there on
    every shared figure and share its rank."""
    from openg2g.benchmark import case_table, leaderboard
    from openg2g.benchmark.run import leaderboard_cells

    results = pd.DataFrame(
        [
            _result("ieee13", "none", "complete", 0.0, 100.0),
            _result("ieee13", "rl", "complete", 0.0, 90.0),
            _result("ieee13", "mpc", "complete", 0.0, 80.0),
            _result("ieee13", "a", "complete", 0.0, 80.0),
            _result("ieee13", "b", "complete", 0.0, 80.0),
            _result("ieee123", "none", "complete", 3.0, 100.0),
            _result("ieee123", "mpc", "complete", 2.0, 100.0),
            _result("ieee123", "a", "complete", 0.5, 100.0),
            _result("ieee123", "b", "complete", 9.0, 100.0),
        ]
    )
    board = leaderboard(case_table(results), ["mpc", "rl", "a", "b"])
    assert list(zip(board["controller"], board["rank"], board["tied"])) == [
        ("none", 1, False),  # no violation anywhere shared and nothing lost: doing nothing is best
        ("rl", 2, False),
        ("mpc", 3, True),
        ("a", 3, True),
        ("b", 3, True),
    ]
    assert [row[0] for row in leaderboard_cells(board)[1:]] == ["1", "2", "=3", "=3", "=3"]
