"""``openg2g new``: a bundled scenario copied with what it reads runs anywhere and gives the same
results; a new controller comes with a scenario and tests that pass; nothing is overwritten."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from openg2g.cli.main import main
from openg2g.plot import read_table

REPO = Path(__file__).resolve().parents[1]
TABLES = ("datacenter", "models", "grid", "grid_voltages", "commands", "events")


def test_a_copied_bundled_scenario_runs_from_anywhere_with_the_same_results(tmp_path, monkeypatch, capsys):
    copy = tmp_path / "mine"
    assert main(["new", "scenario", "ieee13_ofo", str(copy)]) == 0
    written = capsys.readouterr().out.split()
    # the scenario and the two profiles it reads (PV at 675, load at 680), at the same relative paths
    assert written == [
        str(copy / "ieee13_ofo.yaml"),
        str(copy / "profiles" / "reference_pv0.csv"),
        str(copy / "profiles" / "reference_load0.csv"),
    ]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    args = ["--set", "duration_s=20", "--set", "outputs.plots=false", "--no-progress"]
    assert main(["run", str(copy / "ieee13_ofo.yaml"), "--out", "copied", *args]) == 0
    assert main(["run", "ieee13_ofo", "--out", "bundled", *args]) == 0
    for table in TABLES:
        pd.testing.assert_frame_equal(
            read_table(elsewhere / "copied", table), read_table(elsewhere / "bundled", table), check_exact=True
        )
    copied, bundled = (json.loads((elsewhere / run / "summary.json").read_text()) for run in ("copied", "bundled"))
    assert copied.pop("scenario_file") == str(copy / "ieee13_ofo.yaml") and bundled.pop("scenario_file") != ""
    assert {k: v for k, v in copied.items() if k != "wall_time_s"} == {
        k: v for k, v in bundled.items() if k != "wall_time_s"
    }


def test_new_scenario_overwrites_nothing(tmp_path, capsys):
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "reference_load0.csv").write_text("mine")
    assert main(["new", "scenario", "ieee13_none", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'profiles' / 'reference_load0.csv'}: exists; nothing was written" in err
    assert (tmp_path / "profiles" / "reference_load0.csv").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["profiles", "reference_load0.csv"]


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("sweep_ieee13_taps", "a bundled sweep file; bundled scenarios: cigre_mv_ofo"),
        ("nope", "not a bundled scenario"),
    ],
)
def test_new_scenario_names_the_bundled_scenarios(tmp_path, capsys, name, reason):
    assert main(["new", "scenario", name, str(tmp_path)]) == 2
    assert f"error: {name}: {reason}" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def _generated_tests(folder: Path) -> subprocess.CompletedProcess[str]:
    """The generated tests run as a user runs them: pytest in that folder, this checkout's openg2g."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_volt_guard.py"],
        check=False,
        cwd=folder,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.slow
def test_a_new_controller_validates_and_its_tests_pass(tmp_path, capsys):
    assert main(["new", "controller", "volt_guard", str(tmp_path)]) == 0
    assert capsys.readouterr().out.split() == [
        str(tmp_path / "volt_guard.py"),
        str(tmp_path / "volt_guard.yaml"),
        str(tmp_path / "test_volt_guard.py"),
    ]
    assert main(["validate", str(tmp_path / "volt_guard.yaml")]) == 0
    assert "volt_guard.yaml: ok (volt_guard" in capsys.readouterr().out
    tests = _generated_tests(tmp_path)
    assert tests.returncode == 0 and "4 passed" in tests.stdout, tests.stdout + tests.stderr
    assert main(["new", "controller", "volt_guard", str(tmp_path)]) == 2  # a second time: nothing overwritten


_STEP = re.compile(r"(    def step\(self, observation: Observation\) -> list\[Command\]:\n        \"\"\".*?\"\"\"\n).*", re.DOTALL)
_SMALLEST = """        return [
            SetBatchSize(site=site, model=model, batch_size=self.context.sites[site].models[model].batch_sizes[0])
            for site, model in self._models
        ]
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    "edit",
    [
        lambda text: text.replace("if v_low_pu < floor_pu:", "if v_low_pu < floor_pu + 0.02:"),
        lambda text: _STEP.sub(lambda found: found.group(1) + _SMALLEST, text),
    ],
    ids=["another-threshold", "always-the-smallest-batch"],
)
def test_the_generated_tests_hold_when_the_rule_is_changed(tmp_path, capsys, edit):
    assert main(["new", "controller", "volt_guard", str(tmp_path)]) == 0
    source = tmp_path / "volt_guard.py"
    edited = edit(source.read_text())
    assert edited != source.read_text()
    source.write_text(edited)
    tests = _generated_tests(tmp_path)
    assert tests.returncode == 0 and "4 passed" in tests.stdout, tests.stdout + tests.stderr


@pytest.mark.slow
def test_the_generated_tests_fail_on_a_command_the_sites_cannot_take(tmp_path, capsys):
    assert main(["new", "controller", "volt_guard", str(tmp_path)]) == 0
    source = tmp_path / "volt_guard.py"
    source.write_text(source.read_text().replace("batch_size=sizes[target]", "batch_size=sizes[target] + 1"))
    tests = _generated_tests(tmp_path)
    assert tests.returncode == 1, tests.stdout + tests.stderr
    # batch 128 - 1 step = 96, plus one: no measured size, named by the contract test
    assert "SetBatchSize(site='dc1', model='Llama-3.1-8B', batch_size=97): 97 is not one of" in tests.stdout
    assert "2 failed, 2 passed" in tests.stdout


@pytest.mark.parametrize("name", ["VoltGuard", "volt-guard", "2guard", "../guard"])
def test_a_controller_name_must_be_a_lower_case_python_name(tmp_path, capsys, name):
    assert main(["new", "controller", name, str(tmp_path)]) == 2
    assert "lower-case Python name" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("name", "word"),
    [("none", "the class 'None'"), ("true", "the class 'True'"), ("class", "the module 'class'"),
     ("not_implemented", "the class 'NotImplemented'")],
)  # fmt: skip
def test_a_controller_name_that_makes_a_keyword_is_refused(tmp_path, capsys, name, word):
    """``none`` used to write ``class None(...)``, which does not compile."""
    assert main(["new", "controller", name, str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        f"error: {name}: would name {word}, a Python keyword or built-in constant: choose another name\n"
    )
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("what", [["controller", "mine"], ["scenario", "ieee13_none"]])
def test_new_into_a_file_says_so_without_a_traceback(tmp_path, capsys, what):
    (tmp_path / "file").write_text("mine")
    assert main(["new", *what, str(tmp_path / "file")]) == 2
    assert capsys.readouterr().err == f"error: DIR {tmp_path / 'file'}: is a file, not a folder\n"
    assert main(["new", *what, str(tmp_path / "file" / "sub")]) == 2
    assert capsys.readouterr().err == (
        f"error: DIR {tmp_path / 'file' / 'sub'}: is below {tmp_path / 'file'}, which is a file\n"
    )
    assert [p.name for p in tmp_path.iterdir()] == ["file"] and (tmp_path / "file").read_text() == "mine"


def test_new_that_cannot_write_a_file_leaves_none_and_says_why(tmp_path, capsys, monkeypatch):
    write_text = Path.write_text

    def disk_full_at_the_scenario(self: Path, *args, **kwargs):  # type: ignore[no-untyped-def]
        if self.suffix == ".yaml":
            raise OSError(28, "No space left on device")
        return write_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", disk_full_at_the_scenario)
    assert main(["new", "controller", "mine", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        f"error: {tmp_path / 'mine.yaml'}: cannot write it (No space left on device); nothing was written\n"
    )
    assert not any(tmp_path.iterdir())
