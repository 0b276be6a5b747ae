"""An analytic stand-in for the co-simulation, for tests and benchmarks of sweeps and studies.

:func:`toy_run` has the signature of a sweep run function. It reads the base YAML file, applies
the overrides with the real :func:`~openg2g.scenario.loader.apply_override`, and computes a
summary from the ``toy`` section by hand-checkable formulas:

- ``violation_integral_pu_s = max(0, toy.mw - toy.limit_mw) * duration_s / 100``
- ``mean_throughput_tok_s = 1000 * toy.mw + noise`` with ``noise ~ N(0, 1)`` seeded by ``seed``
- ``energy_mwh = toy.mw * duration_s / 3600``, ``dc_peak_mw = toy.mw``

When the file has ``datacenters``, each site draws ``mw = (sum of replicas x gpus_per_replica x
toy.kw_per_gpu + 3 x base_load_kw_per_phase) / 1000`` and may draw up to the limit of its bus,
``toy.limit_mw_by_bus[bus]`` (default ``toy.limit_mw``), times ``toy.controller_gain`` when any
controller is configured; the violation integral sums each site's excess.

``toy.mw < 0`` is invalid (raises :class:`ScenarioError`); ``toy.fail: true`` raises an error;
``toy.sleep_s`` waits before returning. Other keys of the ``toy`` section are left to wrappers (the
sweep tests add one that kills its worker process, read through :func:`toy_data`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from openg2g.core.atomic import write_json_atomic
from openg2g.core.errors import ScenarioError
from openg2g.scenario.loader import apply_override

__all__ = ["toy_data", "toy_run", "toy_summary"]


def toy_summary(mw: float, limit_mw: float, duration_s: float, seed: int) -> dict[str, Any]:
    """The toy's figures for one set of inputs (see the module docstring)."""
    noise = float(np.random.default_rng(seed).normal())
    return {
        "status": "complete",
        "violation_integral_pu_s": max(0.0, mw - limit_mw) * duration_s / 100.0,
        "mean_throughput_tok_s": 1000.0 * mw + noise,
        "energy_mwh": mw * duration_s / 3600.0,
        "duration_s": duration_s,
        "seed": seed,
    }


def toy_data(scenario: str, overrides: tuple[str, ...]) -> dict[str, Any]:
    """The YAML file ``scenario`` as a dict, with the ``dotted.key=value`` overrides applied."""
    data = yaml.safe_load(Path(scenario).read_text()) or {}
    for assignment in overrides:
        apply_override(data, assignment, scenario)
    return data


def toy_run(scenario: str, overrides: tuple[str, ...], out_dir: Path) -> Mapping[str, Any]:
    """Run the toy on a YAML file with overrides, writing ``summary.json`` into ``out_dir``."""
    data = toy_data(scenario, overrides)
    toy = data.get("toy", {})
    mw = float(toy.get("mw", 1.0))
    if mw < 0:
        raise ScenarioError([(f"{scenario}: toy.mw", f"must be >= 0 MW, got {mw}")])
    if toy.get("fail"):
        raise RuntimeError("toy failure requested")
    if toy.get("sleep_s"):
        time.sleep(float(toy["sleep_s"]))
    duration_s = float(data.get("duration_s", 60))
    limit_mw = float(toy.get("limit_mw", 2.0))
    summary = toy_summary(mw, limit_mw, duration_s, int(data.get("seed", 0)))
    if data.get("datacenters"):
        gain = float(toy.get("controller_gain", 1.5)) if data.get("controllers") else 1.0
        excess = mw = 0.0
        for site in data["datacenters"]:
            gpus = sum(int(m["replicas"]) * int(m.get("gpus_per_replica", 1)) for m in site["models"])
            site_mw = (
                gpus * float(toy.get("kw_per_gpu", 1.0)) + 3 * float(site.get("base_load_kw_per_phase", 0))
            ) / 1000
            limit = float(toy.get("limit_mw_by_bus", {}).get(str(site["bus"]), limit_mw)) * gain
            excess += max(0.0, site_mw - limit)
            mw += site_mw
        summary = toy_summary(mw, 0.0, duration_s, int(data.get("seed", 0)))
        summary["violation_integral_pu_s"] = excess * duration_s / 100.0
    summary["dc_peak_mw"] = mw
    write_json_atomic(Path(out_dir) / "summary.json", summary)
    return summary
