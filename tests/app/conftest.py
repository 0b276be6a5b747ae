"""Run folders the app tests read: two short ieee13 runs (no control, OFO), without PNG plots."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("dash", reason="the app needs the app extra: pip install -e '.[app]'")


@pytest.fixture(scope="session")
def runs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from openg2g.engine import run_scenario

    root = tmp_path_factory.mktemp("runs")
    for name in ("ieee13_none", "ieee13_ofo"):
        run_scenario(name, out_dir=root / name, overrides=["duration_s=20", "outputs.plots=false"])
    return root
