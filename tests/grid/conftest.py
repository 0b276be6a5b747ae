"""Shared fixtures of the grid tests: the OpenDSS sources (../shared beside the clone) and an
OpenDSS reference solution computed with opendssdirect.py."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED_DATA = Path(os.environ.get("OPENG2G_SHARED_DATA") or REPO.parent / "shared" / "data")
"""The source data: ``../shared/data`` beside the clone, or ``$OPENG2G_SHARED_DATA`` (a git worktree
kept elsewhere); the bundled feeders' masters are :data:`openg2g.grid.feeder.build.SOURCES` in it."""

TEST_TAPS: dict[str, dict[str, list[int]]] = {
    "ieee13": {"reg1": [10, 8, 11]},
    "openg2g-ieee13": {"reg1": [14, 6, 15]},
    "ieee34": {"reg1": [12, 5, 5], "reg2": [13, 11, 12]},
    "openg2g-ieee34": {"reg1": [12, 5, 5], "reg2": [13, 11, 12]},
    "ieee123": {"reg1": [7, 7, 7], "reg2": [-1], "reg3": [0, -1], "reg4": [8, 1, 5]},
    "openg2g-ieee123": {"reg1": [7, 7, 7], "reg2": [-1], "reg3": [0, -1], "reg4": [8, 1, 5]},
}
"""Fixed taps per feeder: the published IEEE ones where they exist (IEEE 13: 10/8/11; IEEE 34:
12/5/5 and 13/11/12; IEEE 123: 7, -1, 0/-1, 8/1/5), the OpenG2G study's 14/6/15 on
openg2g-ieee13."""

DC_BUS = {
    "ieee13": "671",
    "openg2g-ieee13": "671",
    "ieee34": "806",
    "openg2g-ieee34": "828",
    "ieee123": "67",
    "openg2g-ieee123": "67",
}
"""Three-phase bus that gets the 3 MW test datacenter (on IEEE 34, 3 MW further out collapses the
voltage in OpenDSS too, so the test uses a bus near the substation)."""


def shared_data() -> Path:
    """The source data folder, or skip the test when ../shared is not beside the clone."""
    if not SHARED_DATA.is_dir():
        pytest.skip(
            f"source data not found at {SHARED_DATA} (CI has ../shared beside the clone; else set OPENG2G_SHARED_DATA)"
        )
    return SHARED_DATA


def opendss_voltages(
    master: Path,
    taps: dict[str, float],
    dc: tuple[str, float, float] | None = None,
    model1_loads: tuple[tuple[str, str, float, float], ...] = (),
    source_pu: float | None = None,
) -> dict[str, float]:
    """OpenDSS's own solution, controls off: ``{"<bus>.<phase>": pu}`` (arguments as
    :func:`opendss_solve`)."""
    dss = opendss_solve(master, taps, dc, model1_loads, source_pu)
    out = {}
    for name, v in zip(dss.Circuit.AllNodeNames(), dss.Circuit.AllBusMagPu()):
        bus, node = name.rsplit(".", 1)
        out[f"{bus}.{'abc'[int(node) - 1]}"] = v
    return out


def opendss_branches(
    master: Path, taps: dict[str, float], dc: tuple[str, float, float] | None = None
) -> dict[tuple[str, int, str], tuple[float, float]]:
    """OpenDSS's own branch currents, controls off (arguments as :func:`opendss_solve`):
    ``{("line.<name>" or "transformer.<name>", terminal, phase): (|I| A, element NormAmps A)}``
    for every phase conductor of every line's and transformer's terminals (neutrals left out)."""
    dss = opendss_solve(master, taps, dc)
    out = {}
    for cls, names in (("Line", dss.Lines.AllNames()), ("Transformer", dss.Transformers.AllNames())):
        for name in names:
            dss.Circuit.SetActiveElement(f"{cls}.{name}")
            n_cond = dss.CktElement.NumConductors()
            mags = dss.CktElement.CurrentsMagAng()[::2]
            for k, node in enumerate(dss.CktElement.NodeOrder()):
                if node:
                    key = (f"{cls.lower()}.{name.lower()}", k // n_cond + 1, "abc"[node - 1])
                    out[key] = (mags[k], dss.CktElement.NormalAmps())
    return out


def opendss_solve(
    master: Path,
    taps: dict[str, float],
    dc: tuple[str, float, float] | None = None,
    model1_loads: tuple[tuple[str, str, float, float], ...] = (),
    source_pu: float | None = None,
) -> Any:
    """Solve with OpenDSS itself, controls off; returns ``opendssdirect`` with the circuit solved.

    :param master: OpenDSS master file.
    :param taps: transformer name -> winding-2 tap (pu).
    :param dc: optional ``(bus, kW total, pf)`` balanced wye constant-PQ load.
    :param model1_loads: ``(bus, phase, kW, kvar)`` single-phase wye loads of OpenDSS model 1
        with its default band (vminpu 0.95, vmaxpu 1.05), as the OpenG2G study attaches its
        datacenters, PV (negative kW) and loads.
    :param source_pu: source voltage, None = the file's.
    """
    dss = pytest.importorskip("opendssdirect", reason="opendssdirect.py (test extra) is not installed")
    dss.Text.Command("clear")
    dss.Text.Command(f'compile "{master}"')
    for name, tap in taps.items():
        dss.Text.Command(f"transformer.{name}.taps=[1 {tap!r}]")
    if source_pu is not None:
        dss.Text.Command(f"edit vsource.source pu={source_pu!r}")
    for i, (bus, phase, kw, kvar) in enumerate(model1_loads):
        dss.Circuit.SetActiveBus(bus)
        dss.Text.Command(
            f"new load.m1_{i} bus1={bus}.{'abc'.index(phase) + 1} phases=1 conn=wye model=1 "
            f"kv={dss.Bus.kVBase()!r} kw={kw!r} kvar={kvar!r}"
        )
    if dc is not None:
        bus, kw, pf = dc
        kvar = kw * np.tan(np.arccos(pf))
        kv = dss.Circuit.SetActiveBus(bus) >= 0 and dss.Bus.kVBase() * np.sqrt(3)
        dss.Text.Command(
            f"new load.openg2g_dc bus1={bus}.1.2.3 phases=3 conn=wye model=1 kv={kv} kw={kw} kvar={kvar} "
            "vminpu=0.6 vmaxpu=1.5"
        )
    dss.Text.Command("set controlmode=off")
    dss.Text.Command("set tolerance=1e-8")
    dss.Text.Command("set maxiterations=1000")  # near the nose of the P-V curve OpenDSS needs > 100
    dss.Text.Command("solve")
    assert dss.Solution.Converged()
    return dss
