"""Hosting capacity as a range of sizes: over-voltage shrinks as the site grows, under-voltage
grows with it, and the feeder without the site is checked first.

:func:`band_run` is a stand-in feeder with hand-set limits: a site of ``k`` blocks (one replica
each) has an over-voltage integral of ``0.1 * max(0, k_a - k)`` pu.s (at 632.a) and an
under-voltage integral of ``0.1 * max(0, k - k_b)`` pu.s (at 611.c); sizes ``k_a..k_b`` pass.
The real-run tests use ieee13, whose light feeder sits above 1.05 pu at 632.c without a site.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from openg2g.cli.main import main
from openg2g.core.atomic import write_json_atomic
from openg2g.studies import HostingConfig, read_base, run_hosting_capacity
from openg2g.studies.hosting import broken_limits
from openg2g.sweep.engines import SerialEngine
from openg2g.testing import toy_data


def band_run(scenario: str, overrides: tuple[str, ...], out_dir: Path) -> Mapping[str, Any]:
    """The stand-in feeder of the module docstring."""
    data = toy_data(scenario, overrides)
    k = sum(int(m["replicas"]) for m in data["datacenters"][0]["models"])
    over = 0.1 * max(0, data["band"]["k_a"] - k)
    under = 0.1 * max(0, k - data["band"]["k_b"])
    summary = {
        "status": "complete",
        "violation_integral_pu_s": over + under,
        "undervoltage_integral_pu_s": under,
        "overvoltage_integral_pu_s": over,
        "v_min_bus_phase": "611.c",
        "v_max_bus_phase": "632.a",
        "dc_peak_mw": 0.1 * k,
        "energy_mwh": 0.1 * k * float(data["duration_s"]) / 3600,
        "metrics_start_s": (data.get("outputs") or {}).get("metrics_start_s"),
    }
    write_json_atomic(Path(out_dir) / "summary.json", summary)
    return summary


def _study(directory: Path, k_a: int, k_b: int, controllers: tuple[str, ...] = ("none",)) -> pd.DataFrame:
    data = {
        "name": "band_none",
        "duration_s": 600,
        "grid": {"feeder": "toy"},
        "datacenters": [{"name": "dc1", "bus": "671", "models": [{"model": "m1", "replicas": 4, "batch_size": 8}]}],
        "controllers": [],
        "band": {"k_a": k_a, "k_b": k_b},
    }
    path = directory / "band_none.yaml"
    directory.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data))
    config = HostingConfig(buses=["675"], controllers=controllers, duration_s=60)
    return run_hosting_capacity(read_base(path), config, directory / "out", SerialEngine(), run_fn=band_run)


def test_the_range_between_over_and_under_voltage_and_what_bounds_each_end(tmp_path: Path) -> None:
    row = _study(tmp_path, k_a=9, k_b=23).iloc[0]
    assert (row.min_blocks, row.capacity_blocks, row.empty_range) == (9, 23, False)
    assert row.min_peak_mw == pytest.approx(0.9) and row.capacity_peak_mw == pytest.approx(2.3)
    # the capacity is bounded by what a larger site breaks, never by over-voltage
    assert (row.binding_limit, row.binding_element, row.first_failing_blocks) == ("undervoltage", "611.c", 24)
    assert (row.lower_limit, row.lower_element) == ("overvoltage", "632.a")
    # the feeder without the site: 9 blocks short of the band, 0.9 pu.s of over-voltage
    assert row.baseline_limits == "overvoltage" and row.baseline_violation_pu_s == pytest.approx(0.9)
    # the reported capacity run passes every limit
    run = tmp_path / "out" / "runs" / "675-none-k00023" / "summary.json"
    summary = yaml.safe_load(run.read_text())
    assert broken_limits({"status": "complete", "summary": summary}, HostingConfig(buses=["675"])) == []
    assert row.violation_integral_pu_s == 0.0


def test_crossing_ends_give_an_empty_range_with_both_ends_known(tmp_path: Path) -> None:
    row = _study(tmp_path, k_a=24, k_b=20).iloc[0]
    assert row.empty_range and row.capacity_blocks == 0 and row.capacity_peak_mw == 0.0
    assert row.min_blocks == 24 and row.first_failing_blocks == 21 and row.binding_limit == "undervoltage"


def test_a_feeder_already_too_low_without_the_site_hosts_nothing(tmp_path: Path) -> None:
    row = _study(tmp_path, k_a=0, k_b=-1).iloc[0]
    assert row.empty_range and row.capacity_blocks == 0 and row.first_failing_blocks == 0
    assert row.baseline_limits == "undervoltage" and row.binding_limit == "undervoltage"
    assert row.n_runs == 1  # nothing to search above the empty feeder


def test_a_controller_counts_from_its_settling_window(tmp_path: Path) -> None:
    table = _study(tmp_path, k_a=0, k_b=5, controllers=("none", "ofo"))
    assert dict(zip(table.controller, table.settle_s)) == {"none": 0.0, "ofo": 10.0}
    assert list(table.baseline_limits) == [None, None] and list(table.min_blocks) == [0, 0]
    runs = tmp_path / "out" / "runs"
    overrides = {p.name: yaml.safe_load((p / "run.json").read_text())["overrides"] for p in runs.iterdir()}
    assert all(("outputs.metrics_start_s=10.0" in o) == ("-ofo-" in name) for name, o in overrides.items())


@pytest.mark.slow  # about 20 real 10 s runs
def test_ieee13_bus_675_hosts_a_range_and_warns_of_the_light_feeder(tmp_path: Path, capsys) -> None:
    out = tmp_path / "hc"
    args = ["study", "hosting-capacity", "ieee13", "--buses", "675", "--controller", "none", "--no-thermal"]
    args += ["--duration-s", "10", "--out", str(out), "--no-progress", "--workers", "1"]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "warning: controller none: the feeder without the site already breaks overvoltage (at 632.c" in err
    row = pd.read_parquet(out / "hosting_capacity.parquet").iloc[0]
    assert row.baseline_limits == "overvoltage" and row.baseline_violation_pu_s > 1.0
    assert 0 < row.min_blocks < row.capacity_blocks and not row.empty_range
    assert row.binding_limit == "undervoltage" and row.lower_limit == "overvoltage"
    evaluations = pd.read_parquet(out / "evaluations.parquet").set_index("blocks")
    # each end is where its limit sets in: over-voltage just below the smallest size, under-voltage
    # just above the largest, neither at either end
    assert evaluations.loc[row.min_blocks - 1, "overvoltage_integral_pu_s"] > 0
    assert evaluations.loc[row.capacity_blocks + 1, "undervoltage_integral_pu_s"] > 0
    for k in (row.min_blocks, row.capacity_blocks):
        assert evaluations.loc[k, "violation_integral_pu_s"] == 0.0
