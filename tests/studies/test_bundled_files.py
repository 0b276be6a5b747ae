"""Every bundled sweep and study file validates and expands (no runs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from openg2g.core.paths import bundled_dir
from openg2g.scenario.loader import load_scenario
from openg2g.studies import HostingSpec, LoadLossSpec, PVPlacementSpec, SitingSpec, load_study
from openg2g.sweep import load_sweep, plan_sweep

SCENARIOS = bundled_dir("scenarios")


@pytest.mark.parametrize("path", sorted(SCENARIOS.glob("sweep_*.yaml")), ids=lambda p: p.stem)
def test_bundled_sweep_validates_and_expands(path, tmp_path):
    tasks = plan_sweep(load_sweep(path), tmp_path)
    assert tasks and len({t.run_id for t in tasks}) == len(tasks)
    load_scenario(tasks[0].scenario, tasks[0].overrides)  # the first run is a valid scenario


@pytest.mark.parametrize("path", sorted(SCENARIOS.glob("study_*.yaml")), ids=lambda p: p.stem)
def test_bundled_study_validates(path: Path):
    loaded = load_study(path)
    kinds = {"siting": SitingSpec, "hosting": HostingSpec, "pv_placement": PVPlacementSpec, "load_loss": LoadLossSpec}
    expected = next(k for word, k in kinds.items() if word in path.stem)
    assert isinstance(loaded.spec, expected)
    assert loaded.base.data["datacenters"]


@pytest.mark.parametrize("path", sorted(SCENARIOS.glob("ieee34_*.yaml")), ids=lambda p: p.stem)
def test_bundled_ieee34_scenarios_validate(path):
    assert load_scenario(path).scenario.grid.feeder == "openg2g-ieee34"
