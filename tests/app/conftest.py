"""Run folders the app tests read: two short ieee13 runs (no control, OFO), without PNG plots."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("dash", reason="the app needs the app extra: pip install -e '.[app]'")


@pytest.fixture(scope="session")
def runs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from openg2g.scenario.run import run_scenario

    root = tmp_path_factory.mktemp("runs")
    for name in ("ieee13_none", "ieee13_ofo"):
        run_scenario(name, out_dir=root / name, overrides=["duration_s=20", "outputs.plots=false"])
    return root


@pytest.fixture(scope="session")
def commands_dir(runs_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A runs folder of two runs whose commands name different actuators: ``ieee13_taps`` (no
    control, 5 s, one tap change of reg1 at 2 s) and a copy of ``runs_dir``'s ``ieee13_ofo`` (OFO's
    batch sizes)."""
    import shutil

    from openg2g.scenario.run import run_scenario

    root = tmp_path_factory.mktemp("commands")
    taps = "events=[{t_s: 2, command: set_taps, bank: reg1, taps: [15, 6, 16]}]"
    run_scenario("ieee13_none", out_dir=root / "ieee13_taps", overrides=["duration_s=5", "outputs.plots=false", taps])
    shutil.copytree(runs_dir / "ieee13_ofo", root / "ieee13_ofo")
    return root


# ieee13 at the scenario's own taps [14, 6, 15], tolerance 0, 3 s runs, voltage envelopes only:
# without a site the feeder is over-voltage (632.c), so a small site is not hosted either; 675 and
# 692 host a range of sizes, at 634 under-voltage sets in below the over-voltage floor (no size)
HOSTING_ARGS = [
    "study",
    "hosting-capacity",
    "ieee13",
    "--buses",
    "675",
    "692",
    "634",
    "--controller",
    "none",
    "--duration-s",
    "3",
    "--max-mw",
    "10",
    "--no-thermal",
    "--set",
    "outputs.voltages=envelope",
    "--engine",
    "serial",
    "--no-progress",
]

# two 6 s cases of ieee13 with fixed taps, a training job from 1 to 5 s; rule_632 watches only
# bus 632, which stays inside the band, so it never acts and ties with no control
SUITE = {
    "suite": "tiny",
    "set": ["duration_s=6", "datacenters.0.training.start_s=1", "datacenters.0.training.end_s=5"],
    "controllers": [
        {"name": "rule_based", "kind": "rule_based", "params": {"hold_s": 2}},
        {"name": "pid", "kind": "pid", "tuned": True},
        {"name": "rule_632", "kind": "rule_based", "params": {"buses": ["632"], "hold_s": 2}},
    ],
    "cases": [
        {"name": "t13", "scenario": "ieee13_fixedtap_none", "variations": [{"zip": {"datacenters.0.bus": ["675"]}}]}
    ],
}


@pytest.fixture(scope="session")
def studies_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A runs folder holding a tiny hosting-capacity study (``hosting/``) and a tiny benchmark
    (``bench/``), each made by its own command (about a minute together)."""
    import yaml

    from openg2g.cli.main import main

    root = tmp_path_factory.mktemp("studies")
    assert main([*HOSTING_ARGS, "--out", str(root / "hosting")]) == 0
    suite = root.parent / "tiny_suite.yaml"
    suite.write_text(yaml.safe_dump(SUITE, sort_keys=False))
    assert main(["benchmark", str(suite), "--out", str(root / "bench"), "--no-progress", "--no-plot"]) == 0
    return root


# ieee13 without control, 3 s runs: the whole site on 675, 692 or 634, and split over each pair
SITING = {
    "study": "siting",
    "name": "tiny_siting",
    "base": "ieee13_none",
    "set": ["outputs.voltages=envelope"],
    "duration_s": 3,
    "candidates": ["675", "692", "634"],
    "pairs": True,
    "controllers": ["none"],
}


@pytest.fixture(scope="session")
def siting_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A runs folder holding a tiny siting study (``siting/``), made by its command (six runs)."""
    import yaml

    from openg2g.cli.main import main

    root = tmp_path_factory.mktemp("siting")
    study = root.parent / "tiny_siting.yaml"
    study.write_text(yaml.safe_dump(SITING, sort_keys=False))
    assert (
        main(["study", "siting", str(study), "--out", str(root / "siting"), "--engine", "serial", "--no-progress"]) == 0
    )
    return root


# the stiff case of tests/studies/load_loss_cases.py searched coarsely (0.5 to 2.5 by 0.5): whole
# and half trip at the sag, stays rides it through (capped at 2.5x)
LOAD_LOSS_HOLDABLE = {"multiplier_min": 0.5, "multiplier_max": 2.5, "tolerance": 0.5}


@pytest.fixture(scope="session")
def load_loss_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A runs folder holding a small load-loss study with its search (``ll/``), made by its command
    (eight runs of 8 s)."""
    from openg2g.cli.main import main
    from tests.studies.load_loss_cases import write_stiff_study

    root = tmp_path_factory.mktemp("load_loss")
    study = write_stiff_study(root.parent / "load_loss_study", holdable=LOAD_LOSS_HOLDABLE)
    args = ["study", "load-loss", str(study), "--out", str(root / "ll"), "--workers", "2", "--no-progress"]
    assert main(args) == 0
    return root
