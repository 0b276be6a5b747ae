"""Hosting capacity with thermal limits, on real runs: ieee13 with a site at 671 (feeder taps,
band 0.9-1.1 pu). The trunk line 650-632 (400 A) reaches its rating at about 0.7 MW, long before
the voltages leave the band (about 2.3 MW): with the thermal check the line binds, without it an
under-voltage does, and the table says which and where."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from openg2g.studies import HostingConfig, read_base, run_hosting_capacity
from openg2g.studies.hosting import broken_limits
from openg2g.sweep.engines import SerialEngine
from openg2g.sweep.spec import SweepError
from openg2g.sweep.tasks import COMPLETE
from tests.grid.overload_case import OVERLOAD


def _base(directory: Path) -> Path:
    data = copy.deepcopy(OVERLOAD)
    data.update(events=[], outputs={"plots": False}, duration_s=10)
    data["grid"] = {"feeder": "openg2g-ieee13", "v_min_pu": 0.9, "v_max_pu": 1.1}
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "base.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _study(directory: Path, thermal: bool):
    config = HostingConfig(buses=["671"], controllers=("none",), duration_s=10, thermal=thermal)
    row = run_hosting_capacity(read_base(_base(directory)), config, directory / "out", SerialEngine()).iloc[0]
    failing = directory / "out" / "runs" / f"671-none-k{int(row.first_failing_blocks):05d}" / "summary.json"
    return row, yaml.safe_load(failing.read_text())


@pytest.mark.slow  # two hosting searches of real runs
def test_the_line_rating_binds_before_the_voltages(tmp_path: Path) -> None:
    row, failing = _study(tmp_path / "thermal", thermal=True)
    assert row.binding_limit == "thermal" and row.binding_element == "line.650632"
    assert row.max_loading_pct <= 100.0 < row.first_failing_max_loading_pct
    assert failing["max_loading_branch"] == "line.650632" and failing["violation_integral_pu_s"] == 0.0

    loose, failing_v = _study(tmp_path / "voltage", thermal=False)
    assert loose.capacity_blocks > row.capacity_blocks
    assert loose.max_loading_pct > 100.0  # hosted by voltage, overloaded by current
    assert loose.binding_limit == "undervoltage"
    assert loose.binding_element == failing_v["v_min_bus_phase"] and failing_v["v_min_pu"] < 0.9


TIGHT = HostingConfig(buses=["x"])
LOOSE = HostingConfig(buses=["x"], tolerance_pu_s=0.5, overload_tolerance_pct_s=10.0)


@pytest.mark.parametrize(
    "config, summary, expected",
    [
        (TIGHT, {"violation_integral_pu_s": 0.0, "overload_integral_pct_s": 0.0}, []),
        (
            TIGHT,
            {
                "violation_integral_pu_s": 0.3,
                "undervoltage_integral_pu_s": 0.1,
                "overvoltage_integral_pu_s": 0.2,
                "v_min_bus_phase": "611.c",
                "v_max_bus_phase": "632.a",
                "overload_integral_pct_s": 5.0,
                "max_loading_branch": "line.x",
            },
            [("undervoltage", "611.c"), ("overvoltage", "632.a"), ("thermal", "line.x")],
        ),
        # within both tolerances: hosted
        (
            LOOSE,
            {"violation_integral_pu_s": 0.5, "undervoltage_integral_pu_s": 0.5, "overload_integral_pct_s": 10.0},
            [],
        ),
        # a summary without the split (e.g. an older run): the voltage limit, unnamed
        (TIGHT, {"violation_integral_pu_s": 0.1}, [("voltage", None)]),
        # a grid that reports no branches: voltages only
        (TIGHT, {"violation_integral_pu_s": 0.0, "overload_integral_pct_s": None}, []),
        # half the steps in voltage collapse: the low integral of the rest hosts nothing
        (TIGHT, {"violation_integral_pu_s": 0.0, "grid_steps": 200, "nonconverged_steps": 100}, [("failed", None)]),
    ],
)
def test_broken_limits_by_hand(config: HostingConfig, summary: dict, expected: list) -> None:
    assert broken_limits({"status": COMPLETE, "summary": summary}, config) == expected


def test_a_failed_run_breaks_the_limits() -> None:
    assert broken_limits({"status": "failed", "summary": None}, TIGHT) == [("failed", None)]


@pytest.mark.parametrize(
    "field, value",
    [
        ("overload_tolerance_pct_s", float("nan")),
        ("overload_tolerance_pct_s", float("inf")),
        ("overload_tolerance_pct_s", -1.0),
        ("tolerance_pu_s", float("nan")),
        ("duration_s", float("nan")),
        ("max_mw", float("inf")),
    ],
)
def test_bad_limits_are_refused_naming_the_option(field: str, value: float) -> None:
    with pytest.raises(SweepError, match=rf"--{field.replace('_', '-')}: must be"):
        HostingConfig(buses=["x"], **{field: value})
