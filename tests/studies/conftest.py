"""A toy base file and sweep files for the sweep machinery (see openg2g.testing.sweep)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

TOY_BASE = {"name": "toy", "duration_s": 360, "seed": 0, "toy": {"mw": 1.0, "limit_mw": 2.0}}


def write_sweep(directory: Path, parameters: list, **fields) -> Path:
    """Write the toy base and a sweep file over it; returns the sweep file's path."""
    (directory / "base.yaml").write_text(yaml.safe_dump(TOY_BASE))
    spec = {"name": "toy_sweep", "base": "base.yaml", "parameters": parameters, **fields}
    path = directory / "sweep.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


@pytest.fixture
def toy_sweep(tmp_path: Path) -> Path:
    """Six runs: mw in {0.5, 2.5, -1 (invalid)} x seed in {0, 1}."""
    return write_sweep(tmp_path, [{"product": {"toy.mw": [0.5, 2.5, -1.0], "seed": [0, 1]}}])
