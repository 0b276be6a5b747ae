"""The package as a user installs it: a wheel built from the sdist, used from outside the clone.

``python -m build`` makes the sdist and then the wheel from the unpacked sdist, as an index's
installer would, so what the sdist leaves out (the stock controllers' top-level folder, the build
hook) is missing from the wheel too. The wheel is unpacked into a folder of its own (``pip install
--no-deps --target``, on top of this environment's dependencies) and the ``openg2g`` command runs
from an empty working folder with that folder first on the path, so nothing of the checkout is
importable or readable: the stock controllers, the bundled scenarios, traces, feeders and the
trained policy must come from the installed package.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """``(sdist, wheel)``, the wheel built from the sdist."""
    pytest.importorskip("build", reason="build is not installed (pip install -e '.[test]')")
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)], check=True, capture_output=True)
    (sdist,) = out.glob("openg2g_cosim-*.tar.gz")
    (wheel,) = out.glob("openg2g_cosim-*.whl")
    return sdist, wheel


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory, dists: tuple[Path, Path]) -> Path:
    """Folder holding the installed wheel (importable as ``openg2g``, its commands in ``bin/``)."""
    target = tmp_path_factory.mktemp("wheel") / "site"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [*pip, "install", "--no-deps", "--target", str(target), str(dists[1])], check=True, capture_output=True
    )
    return target


def _openg2g(installed: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The installed ``openg2g`` command (the wheel's console script) run in ``cwd``."""
    env = {**os.environ, "PYTHONPATH": str(installed)}
    return subprocess.run(
        [str(installed / "bin" / "openg2g"), *args],
        check=False,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_sdist_carries_the_stock_controllers_folder_and_no_link(dists: tuple[Path, Path]) -> None:
    with tarfile.open(dists[0]) as sdist:
        members = sdist.getmembers()
    names = {m.name.split("/", 1)[1] for m in members if "/" in m.name}
    assert {"controllers/ofo.py", "controllers/policies/ieee13_ppo.zip", "hatch_build.py"} <= names
    assert {"scenarios/ieee13_fixedtap_ofo.yaml", "traces/PROVENANCE.md"} <= names
    assert not [m.name for m in members if m.issym() or m.islnk()]


def test_the_wheel_carries_the_stock_controllers_inside_the_package(dists: tuple[Path, Path]) -> None:
    with zipfile.ZipFile(dists[1]) as wheel:
        names = set(wheel.namelist())
    assert {"openg2g/controllers/ofo.py", "openg2g/controllers/policies/ieee13_ppo.zip"} <= names
    stray = sorted(n for n in names if not n.startswith(("openg2g/", "openg2g_cosim-")))
    assert not stray, f"the wheel installs more than openg2g: {stray}"


def test_the_distribution_is_not_named_after_the_public_openg2g(installed: Path) -> None:
    """``openg2g`` on the package index is the public OpenG2G; ours installs as ``openg2g-cosim``."""
    (dist_info,) = installed.glob("openg2g_cosim-*.dist-info")
    metadata = (dist_info / "METADATA").read_text()
    assert "\nName: openg2g-cosim\n" in metadata
    assert not list(installed.glob("openg2g-*.dist-info"))


def test_the_installed_package_is_the_wheel(installed: Path, tmp_path: Path) -> None:
    probe = subprocess.run(
        [sys.executable, "-c", "import openg2g, openg2g.controllers.ofo as c; print(openg2g.__file__, c.__file__)"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(installed)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert all(Path(p).is_relative_to(installed) for p in probe.stdout.split()), probe.stdout


def test_the_wheel_runs_the_readme_first_case(installed: Path, tmp_path: Path) -> None:
    """The README's first command, an hour cut to a minute: the OFO stock controller and the plots."""
    run = _openg2g(installed, tmp_path, "run", "ieee13_fixedtap_ofo", "--set", "duration_s=60", "--no-progress")
    assert run.returncode == 0, run.stderr
    summary = json.loads((tmp_path / "runs" / "ieee13_fixedtap_ofo" / "summary.json").read_text())
    assert summary["status"] == "complete" and summary["sim_time_s"] == 60.0


def test_the_wheel_runs_the_rl_case_and_evaluates_the_bundled_policy(installed: Path, tmp_path: Path) -> None:
    run = _openg2g(installed, tmp_path, "run", "ieee13_rl", "--set", "duration_s=60", "--out", "rl", "--no-progress")
    assert run.returncode == 0, run.stderr
    summary = json.loads((tmp_path / "rl" / "summary.json").read_text())
    assert summary["status"] == "complete" and summary["sim_time_s"] == 60.0
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
