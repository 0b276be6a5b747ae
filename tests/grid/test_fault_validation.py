"""openg2g through faults and source sags against OpenDSS's own solution (``Fault`` elements in
its snapshot, controls held, tolerance 1e-10), every node of the bundled IEEE 13, 123 and 8500
feeders (their OpenDSS sources under ../shared/data, skipped when absent) within 1e-6 pu: SLG,
LL, LLG and three-phase faults, bolted and through 1 ohm, at a bus near the source, one
mid-feeder and a far one (tests/grid/fault_cases.py); the same faults at the bus of a datacenter
drawn as an OpenDSS model-1 load; three source sags. The feeders' own loads keep their OpenDSS
models (model 1 constant impedance below vminpu, 2, 4 and 5 as they are). The table of
docs/disturbances.md is these comparisons (``bench/fault_validation.py``)."""

from __future__ import annotations

import functools

import pytest

from openg2g.grid.feeder.build import SOURCES
from openg2g.grid.feeder.crosscheck import CrossCheck, crosscheck_disturbances
from openg2g.grid.feeder.library import load_feeder
from tests.grid.conftest import shared_data
from tests.grid.fault_cases import FAULT_BUSES, FAULT_KINDS, FAULT_R_OHM, SAGS, SITE, fault

pytestmark = pytest.mark.slow

TOL_PU = 1e-6
"""Largest ``|V_openg2g - V_OpenDSS|`` on any node (pu of its bus base); they agree to a few 1e-9."""


@functools.cache
def _faults(feeder: str) -> dict[tuple[str, str, float], CrossCheck]:
    """(bus, kind, ohm) -> the comparison, for every fault of the feeder (one grid, solved per case)."""
    keys = [(bus, kind, r) for bus in FAULT_BUSES[feeder] for kind in FAULT_KINDS for r in FAULT_R_OHM]
    cases = [(fault(kind, bus, r),) for bus, kind, r in keys]
    path = shared_data() / SOURCES[feeder]
    return dict(zip(keys, crosscheck_disturbances(path, cases, feeder=load_feeder(feeder))))


@pytest.mark.parametrize("r", FAULT_R_OHM, ids=["bolted", "1ohm"])
@pytest.mark.parametrize("kind", FAULT_KINDS)
@pytest.mark.parametrize("feeder,where", [(f, k) for f in FAULT_BUSES for k in range(3)])
def test_fault_matches_opendss(feeder: str, where: int, kind: str, r: float) -> None:
    check = _faults(feeder)[(FAULT_BUSES[feeder][where], kind, r)]
    assert check.max_dv_pu < TOL_PU, check


@pytest.mark.parametrize("feeder", list(SITE))
def test_opendss_model_site_at_the_faulted_bus_matches_opendss(feeder: str) -> None:
    """The datacenter as an OpenDSS model-1 load (vminpu 0.95, vmaxpu 1.05, vlowpu 0.5) at the
    faulted bus: its ports draw the interpolated admittance between 0.5 and 0.95 pu and the nominal
    one below, as OpenDSS's load does (dense path on IEEE 13 and 123, sparse on IEEE 8500)."""
    bus, mw = SITE[feeder]
    cases = [(fault(kind, bus, r),) for kind in FAULT_KINDS for r in FAULT_R_OHM]
    path = shared_data() / SOURCES[feeder]
    checks = crosscheck_disturbances(path, cases, bus, mw, feeder=load_feeder(feeder), dc_load_model="opendss")
    worst = max(checks, key=lambda c: c.max_dv_pu)
    assert worst.max_dv_pu < TOL_PU, worst


@pytest.mark.parametrize("feeder", list(FAULT_BUSES))
def test_source_sags_match_opendss(feeder: str) -> None:
    """Every phase alike (the Vsource's pu) and per phase (its Norton equivalent, crosscheck.py),
    alone and with a bolted line-to-ground fault mid-feeder."""
    mid = FAULT_BUSES[feeder][1]
    cases = [(sag,) for sag in SAGS.values()] + [(sag, fault("SLG", mid, FAULT_R_OHM[0])) for sag in SAGS.values()]
    path = shared_data() / SOURCES[feeder]
    checks = crosscheck_disturbances(path, cases, feeder=load_feeder(feeder))
    worst = max(checks, key=lambda c: c.max_dv_pu)
    assert worst.max_dv_pu < TOL_PU, worst
