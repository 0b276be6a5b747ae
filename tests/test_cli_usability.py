"""What a user meets at the terminal: bundled names resolved alike by every command, plain-text
help, a controller error that says where it was raised (``--traceback`` for all of it, and the
traceback kept in the run folder), and progress bars only on a terminal."""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from openg2g.benchmark.spec import load_suite
from openg2g.cli.main import build_parser, main
from openg2g.cli.scenarios import first_sentence, scenario_rows
from openg2g.core.errors import ScenarioError
from openg2g.datacenter.library import TraceLibrary
from openg2g.scenario.loader import resolve_scenario_path
from openg2g.studies.load import load_study
from openg2g.sweep.spec import SweepError, load_sweep
from tests.scenario.test_validation import BASE

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = REPO / "scenarios"

# ------------------------------------------------------------------ bundled names


@pytest.mark.parametrize(
    ("name", "said"),
    [
        # slow: validating a suite starts each of its 24 cases (7 s); a toy suite's validation is in
        # the fast path (tests/benchmark/test_benchmark.py)
        pytest.param("benchmark_ieee", "ok (suite benchmark_ieee: 24 cases", marks=pytest.mark.slow),
        ("sweep_ieee13_taps", "ok (sweep ieee13_taps: 36 runs of ieee13_none.yaml"),
        ("study_ieee13_siting", "ok (study siting ieee13_siting, base ieee13_none.yaml"),
        ("ieee13_none", "ok (ieee13_none, sha256"),
    ],
)
def test_validate_checks_a_bundled_file_as_what_it_is(capsys, name, said):
    assert main(["validate", name]) == 0
    out, err = capsys.readouterr()
    assert out.startswith(f"{SCENARIOS / name}.yaml: {said}") and err == ""


def test_sweep_suite_and_study_loaders_take_bundled_names():
    assert load_sweep("sweep_ieee13_taps").path == SCENARIOS / "sweep_ieee13_taps.yaml"
    assert load_suite("benchmark_ieee", check=False).path == SCENARIOS / "benchmark_ieee.yaml"
    assert load_study("study_ieee13_siting").path == SCENARIOS / "study_ieee13_siting.yaml"


def test_an_unknown_name_says_where_it_was_looked_for(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SweepError) as info:
        load_sweep("sweep_nowhere")
    assert info.value.problems == [
        (
            "sweep_nowhere",
            f"no sweep file {tmp_path / 'sweep_nowhere'}, nor a bundled sweep_nowhere.yaml in {SCENARIOS}",
        )
    ]
    assert main(["sweep", "sweep_nowhere", "--out", "x"]) == 2
    assert not (tmp_path / "x").exists()


@pytest.mark.slow
def test_a_folder_named_like_a_bundled_file_does_not_hide_it(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for name in ("ieee13_none", "sweep_ieee13_taps", "study_ieee13_siting", "benchmark_ieee"):
        (tmp_path / name).mkdir()
    assert resolve_scenario_path("ieee13_none") == SCENARIOS / "ieee13_none.yaml"
    assert load_sweep("sweep_ieee13_taps").path == SCENARIOS / "sweep_ieee13_taps.yaml"
    assert load_suite("benchmark_ieee", check=False).path == SCENARIOS / "benchmark_ieee.yaml"
    assert load_study("study_ieee13_siting").path == SCENARIOS / "study_ieee13_siting.yaml"
    assert main(["validate", "ieee13_none"]) == 0
    assert capsys.readouterr().out.startswith(f"{SCENARIOS / 'ieee13_none.yaml'}: ok (ieee13_none")
    # the run reads the bundled file (the folder has none) and writes into --out, not the folder
    short = ["--set", "duration_s=2", "--set", "outputs.plots=false", "--no-progress"]
    assert main(["run", "ieee13_none", "--out", "out", *short]) == 0
    # the run starts by saying what the site is
    assert capsys.readouterr().out.startswith("site dc1 at bus 671: 7,200 GPUs (4,800 serving, 2,400 training), peak")
    assert (tmp_path / "out" / "summary.json").is_file() and not any((tmp_path / "ieee13_none").iterdir())


def test_the_folder_itself_is_refused_by_name(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ieee13_none").mkdir()
    assert main(["validate", "./ieee13_none"]) == 2
    said = capsys.readouterr().err
    assert f"error: ./ieee13_none: {tmp_path / 'ieee13_none'} is a folder, not a scenario file" in said


def test_a_file_here_named_like_a_bundled_file_is_taken_with_a_note(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ieee13_none").write_text((SCENARIOS / "ieee13_none.yaml").read_text())
    assert resolve_scenario_path("ieee13_none") == Path("ieee13_none")
    assert resolve_scenario_path("ieee13_none") == Path("ieee13_none")
    # said once, however often the name is resolved
    assert capsys.readouterr().err == (
        f"note: ieee13_none is the file {tmp_path / 'ieee13_none'}, not the bundled scenario of that name "
        f"(give its path for that one: {SCENARIOS / 'ieee13_none.yaml'})\n"
    )


def test_a_bundled_name_given_with_yaml_says_the_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ScenarioError) as info:
        resolve_scenario_path("ieee13_none.yaml")
    said = f"no scenario file {tmp_path / 'ieee13_none.yaml'} (the bundled scenario of that name is ieee13_none, without"
    assert info.value.problems == [("ieee13_none.yaml", f"{said} .yaml)")]


# ------------------------------------------------------------------ a site's size before a run


def test_validate_says_each_sites_gpus_and_peak_power(tmp_path, capsys):
    path = tmp_path / "sized.yaml"
    path.write_text(yaml.safe_dump(BASE))
    assert main(["validate", str(path)]) == 0
    # by hand from the bundled traces: 100 x Llama-3.1-8B (1 GPU) and 20 x Llama-3.1-70B (4 GPUs), each
    # replica at its trace's highest sample over the measured batch sizes, PUE 1, 100 kW a phase base load
    library = TraceLibrary.load()
    peak_w = sum(
        replicas * max(library.power(model, gpus, b).max() for b in library.batch_sizes(model, gpus))
        for model, gpus, replicas in (("Llama-3.1-8B", 1, 100), ("Llama-3.1-70B", 4, 20))
    )
    peak_w += 3 * 100e3
    assert capsys.readouterr().out.splitlines()[1] == (
        f"  site dc1 at bus 671: 180 GPUs, peak about {peak_w / 1e3:,.0f} kW (an estimate from the traces' "
        "per-batch peaks: every replica at its trace's highest sample over its batch sizes)"
    )


# ------------------------------------------------------------------ scenarios list


def test_scenarios_list_names_each_bundled_file_with_its_kind_feeder_and_sites():
    rows = {row["name"]: row for row in scenario_rows()}
    assert sorted(rows) == sorted(p.stem for p in SCENARIOS.glob("*.yaml"))
    assert rows["ieee13_none"] == {
        "name": "ieee13_none",
        "kind": "scenario",
        "feeder": "openg2g-ieee13",
        "sites": ["dc1@671"],
        "duration_s": 3600.0,
        "description": "IEEE 13 (openg2g variant), one 7,200-GPU site at bus 671 serving five LLMs plus a 1,000 s "
        "training job, inference ramping to 50% at 2500-3000 s, scheduled tap changes at 1500 s and 3300 s; no "
        "controller (the baseline).",
    }
    # a sweep's base with its set applied (duration_s=30); a study's own duration_s (60)
    assert (rows["sweep_ieee13_taps"]["kind"], rows["sweep_ieee13_taps"]["duration_s"]) == ("sweep", 30.0)
    assert rows["sweep_ieee13_taps"]["feeder"] == "openg2g-ieee13"
    assert (rows["study_ieee13_siting"]["kind"], rows["study_ieee13_siting"]["duration_s"]) == ("study", 60.0)
    assert rows["study_ieee13_siting"]["description"] == "Where on IEEE 13 should the reference 7,200-GPU site go?"
    assert rows["benchmark_ieee"]["kind"] == "benchmark suite"
    assert rows["benchmark_ieee"]["feeder"] == "openg2g-ieee13, openg2g-ieee34, openg2g-ieee123"
    assert rows["cigre_mv_ofo"]["feeder"] == "pandapower:create_cigre_network_mv"
    assert rows["live_ieee13_ofo"]["sites"] == ["dc1@671 (live)"]


def test_scenarios_list_is_the_same_each_time_as_a_table_and_as_json(capsys):
    assert main(["scenarios", "list"]) == 0
    first = capsys.readouterr().out
    assert main(["scenarios", "list"]) == 0
    assert capsys.readouterr().out == first
    header, *lines = first.splitlines()
    assert header.split()[:5] == ["name", "kind", "feeder", "sites", "duration"]
    assert [line.split()[0] for line in lines] == sorted(p.stem for p in SCENARIOS.glob("*.yaml"))
    assert main(["scenarios", "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == scenario_rows()


def test_scenarios_list_runs_no_code_a_file_names(tmp_path):
    (tmp_path / "boom.py").write_text("raise SystemExit('imported')\n")
    data = {**copy.deepcopy(BASE), "controllers": [{"kind": "boom.py:Boom", "name": "boom"}]}
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump(data))
    assert [row["name"] for row in scenario_rows(tmp_path)] == ["mine"]


@pytest.mark.parametrize(
    ("text", "first"),
    [
        ("Limits 0.95-1.05 pu. Then more.", "Limits 0.95-1.05 pu."),
        ("Where should it go? Each bus alone.", "Where should it go?"),
        ("No full stop\n  over two lines", "No full stop over two lines"),
    ],
)
def test_a_description_is_shown_by_its_first_sentence(text, first):
    assert first_sentence(text) == first


# ------------------------------------------------------------------ plot errors


@pytest.mark.parametrize(
    ("error", "said"),
    [
        (MemoryError(), "out of memory drawing the plots from the run's tables; a run with --set outputs.voltages"),
        (RuntimeError("boom"), "drawing the plots failed: RuntimeError: boom (openg2g --traceback plot ... prints"),
    ],
    ids=["memory", "other"],
)
def test_a_plot_that_cannot_be_drawn_is_one_line(tmp_path, monkeypatch, capsys, error, said):
    (tmp_path / "summary.json").write_text("{}")

    def plot_run(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise error  # outside any one figure (reading the run's tables)

    monkeypatch.setattr("openg2g.plot.run.plot_run", plot_run)
    assert main(["plot", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {tmp_path}: {said}") and len(err.splitlines()) == 1
    assert main(["--traceback", "plot", str(tmp_path)]) == 1
    assert f"{type(error).__name__}" in capsys.readouterr().err.split("Traceback")[1]  # where, when asked


def test_one_figure_out_of_memory_is_a_warning_and_the_others_are_drawn(tmp_path, monkeypatch, capsys):
    (tmp_path / "summary.json").write_text("{}")

    def draw(run):  # type: ignore[no-untyped-def]
        raise MemoryError

    monkeypatch.setattr("openg2g.plot.run.RUN_PLOTS", {"feeder_map.png": draw, "taps.png": lambda run: "no taps"})
    assert main(["plot", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "plot feeder_map.png failed: MemoryError: out of memory while drawing it" in err
    assert "--set outputs.voltages=envelope" in err and "Traceback" not in err


def test_memory_running_out_in_any_command_is_one_line(monkeypatch, capsys):
    def exhausted(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise MemoryError

    monkeypatch.setattr("openg2g.scenario.loader.load_scenario", exhausted)
    assert main(["run", "ieee13_none"]) == 1
    assert capsys.readouterr().err == (
        "error: openg2g run ran out of memory (a large feeder's per-bus tables: --set outputs.voltages=envelope "
        "keeps only their per-step envelope)\n"
    )


# ------------------------------------------------------------------ plain-text help


def _parsers(parser: argparse.ArgumentParser, prog: str = "openg2g") -> list[tuple[str, argparse.ArgumentParser]]:
    found = [(prog, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _parsers(sub, f"{prog} {name}")
    return found


def test_every_help_is_plain_text():
    parsers = _parsers(build_parser())
    assert len(parsers) > 20  # every command and sub-command
    for prog, parser in parsers:
        text = parser.format_help()
        assert "``" not in text and not re.search(r":[a-z]+:`", text), (prog, text)
        assert not re.search(r"^\s*\.\. |::$", text, re.MULTILINE), (prog, text)


def test_help_keeps_what_the_markup_named():
    text = dict(_parsers(build_parser()))["openg2g train"].format_help()
    assert "--env KEY=VALUE sets an env setting (openg2g.envs.EnvConfig)" in text
    assert "Examples:\n\n    openg2g train ieee13_none --algo ppo" in text


# ------------------------------------------------------------------ controller errors, --traceback

FAILING = """\
from openg2g.core.interfaces import Controller


class Fails(Controller):
    def step(self, observation):
        return self.helper(observation.t_s)

    def helper(self, t_s):
        return [] if t_s < 2 else [1 / (t_s - 2)]
"""


@pytest.fixture
def failing_scenario(tmp_path: Path) -> Path:
    (tmp_path / "mine.py").write_text(FAILING)
    data = copy.deepcopy(BASE)
    data.update(controllers=[{"kind": "mine.py:Fails", "name": "mine"}], events=[], duration_s=3)
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_controller_error_names_the_line_that_raised(failing_scenario, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["run", str(failing_scenario), "--out", str(out), "--no-progress"]) == 1
    err = capsys.readouterr().err
    where = f"(at {tmp_path / 'mine.py'}:9)"  # the division, in helper() called by step()
    assert f"controller 'mine' step() raised ZeroDivisionError: float division by zero {where}" in err, err
    assert "Traceback" not in err
    kept = (out / "error.txt").read_text()
    assert kept.startswith("Traceback (most recent call last):") and f'File "{tmp_path / "mine.py"}", line 9' in kept
    assert "error.txt" in err


def test_traceback_option_prints_the_traceback(failing_scenario, tmp_path, capsys):
    assert main(["--traceback", "run", str(failing_scenario), "--out", str(tmp_path / "run"), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last):" in err and "return [] if t_s < 2 else [1 / (t_s - 2)]" in err
    assert err.rstrip().splitlines()[-1].startswith("error: t=2 s: controller 'mine' step() raised")


def test_a_controller_failing_in_reset_is_located_too(tmp_path, capsys):
    (tmp_path / "mine.py").write_text(
        FAILING.replace(
            "def step(self, observation):",
            "def reset(self, context, seed):\n        raise KeyError(seed)\n\n    def step(self, observation):",
        )
    )
    data = copy.deepcopy(BASE)
    data.update(controllers=[{"kind": "mine.py:Fails", "name": "mine"}], events=[])
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(data))
    assert main(["validate", str(tmp_path / "s.yaml")]) == 2
    assert f"reset() raised KeyError: 1 (at {tmp_path / 'mine.py'}:6)" in capsys.readouterr().err


# ------------------------------------------------------------------ progress bars


def _stderr_of(tmp_path: Path, *args: str) -> str:
    """stderr of ``openg2g ARGS`` run with stderr a pipe (as under a log file or CI)."""
    done = subprocess.run(
        [sys.executable, "-m", "openg2g", *args],
        check=False,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return done.stderr


@pytest.mark.slow
def test_no_progress_bar_into_a_pipe(tmp_path):
    err = _stderr_of(tmp_path, "run", "ieee13_none", "--set", "duration_s=5", "--out", "run")
    assert "\r" not in err and "sim s" not in err


@pytest.mark.slow
def test_no_training_progress_bar_into_a_pipe(tmp_path):
    err = _stderr_of(tmp_path, "train", "toy", "--steps", "300", "--eval-episodes", "0", "--out", "train")
    assert "\r" not in err and "train ppo" not in err
