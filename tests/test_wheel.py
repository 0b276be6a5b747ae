"""The package as a user installs it: a wheel, used from outside the clone.

Builds the wheel, unpacks it into a folder of its own (``pip install --no-deps --target``), and runs
the ``openg2g`` command from an empty working folder with that folder first on the path, so
nothing of the checkout is importable or readable: the bundled scenarios, traces, feeders and the
trained policy must come from the installed package.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Folder holding the installed wheel (importable as ``openg2g``)."""
    tmp = tmp_path_factory.mktemp("wheel")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "-w", str(tmp / "dist"), str(ROOT)], check=True, capture_output=True)
    (wheel,) = (tmp / "dist").glob("openg2g_cosim-*.whl")
    target = tmp / "site"
    subprocess.run([*pip, "install", "--no-deps", "--target", str(target), str(wheel)], check=True, capture_output=True)
    return target


def _openg2g(installed: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(installed)}
    return subprocess.run(
        [sys.executable, "-m", "openg2g", *args],
        check=False,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_distribution_is_not_named_after_the_public_openg2g(installed: Path) -> None:
    """``openg2g`` on the package index is the public OpenG2G; ours installs as ``openg2g-cosim``."""
    (dist_info,) = installed.glob("openg2g_cosim-*.dist-info")
    metadata = (dist_info / "METADATA").read_text()
    assert "\nName: openg2g-cosim\n" in metadata
    assert not list(installed.glob("openg2g-*.dist-info"))


def test_the_installed_package_is_the_wheel(installed: Path, tmp_path: Path) -> None:
    probe = subprocess.run(
        [sys.executable, "-c", "import openg2g, openg2g.controllers as c; print(openg2g.__file__, c.__file__)"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(installed)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert all(Path(p).is_relative_to(installed) for p in probe.stdout.split()), probe.stdout


def test_the_wheel_runs_the_rl_case_and_evaluates_the_bundled_policy(installed: Path, tmp_path: Path) -> None:
    run = _openg2g(installed, tmp_path, "run", "ieee13_rl", "--set", "duration_s=5", "--out", "rl", "--no-progress")
    assert run.returncode == 0, run.stderr
    summary = json.loads((tmp_path / "rl" / "summary.json").read_text())
    assert summary["status"] == "complete" and summary["sim_time_s"] == 5.0
    evaluate = _openg2g(
        installed,
        tmp_path,
        "evaluate",
        "ieee13_ppo",
        "--scenarios",
        "ieee13_rl",
        "--set",
        "duration_s=5",
        "--out",
        "eval",
    )
    assert evaluate.returncode == 0, evaluate.stderr


def test_the_wheel_validates_every_bundled_scenario(installed: Path, tmp_path: Path) -> None:
    names = sorted(p.stem for p in (ROOT / "scenarios").glob("*.yaml") if not p.stem.startswith(("sweep_", "study_")))
    names.remove("benchmark_ieee")
    result = _openg2g(installed, tmp_path, "validate", *names)
    assert result.returncode == 0, result.stdout + result.stderr


def test_an_unknown_policy_names_where_it_looked(installed: Path, tmp_path: Path) -> None:
    result = _openg2g(installed, tmp_path, "evaluate", "no_such_policy", "--scenarios", "ieee13_rl")
    assert result.returncode != 0
    assert (
        "no_such_policy" in result.stderr and str(installed / "openg2g" / "controllers" / "policies") in result.stderr
    )


def test_the_wheel_copies_a_bundled_scenario_that_runs_from_its_new_folder(installed: Path, tmp_path: Path) -> None:
    new = _openg2g(installed, tmp_path, "new", "scenario", "ieee13_none", "mine")
    assert new.returncode == 0, new.stderr
    assert (tmp_path / "mine" / "profiles" / "reference_pv0.csv").is_file()
    (tmp_path / "elsewhere").mkdir()
    run = _openg2g(
        installed, tmp_path / "elsewhere", "run", "../mine/ieee13_none.yaml", "--set", "duration_s=5", "--out", "r"
    )
    assert run.returncode == 0, run.stderr
    assert json.loads((tmp_path / "elsewhere" / "r" / "summary.json").read_text())["status"] == "complete"
