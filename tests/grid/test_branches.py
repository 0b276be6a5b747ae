"""Branch currents and loading (openg2g.grid.feeder.branches) against OpenDSS's own, ratings as OpenDSS
reads them, and an overload scenario whose overload integral is recomputed by hand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from openg2g.cli.main import main
from openg2g.core.commands import SetLineInService, SetTaps
from openg2g.core.state import DatacenterState, GridState
from openg2g.grid.feeder.backend import FeederGrid
from openg2g.grid.feeder.build import SOURCES
from openg2g.grid.feeder.opendss import read_opendss
from openg2g.plot.run import branch_loading_envelope, plot_voltage_envelope
from openg2g.scenario.run import run_scenario
from openg2g.scenario.schema import GridSpec, ModelSpec, RegulatorSpec, SiteSpec
from tests.grid.conftest import DC_BUS, TEST_TAPS, opendss_branches, shared_data
from tests.grid.overload_case import OVERLOAD

REL_TOL = 1e-3
"""Currents agree with OpenDSS within 0.1% ..."""
ABS_TOL_A = 1e-3
"""... or within 1 mA for conductors carrying under 1 A (lightly used laterals, open elements)."""

SOLVER_ATOL_A = 1e-4
"""Two solves of one operating point from different starting points agree to the solver's
tolerance (1e-8 pu), which moves a current by up to ~1e-5 A."""
SOLVER_RTOL = 1e-7
"""The same solver tolerance, relative: a few 1e-8 of a current or a loading (the chord Newton
stops at different points of the 1e-8 pu ball from different starts)."""

DSS_NORMHKVA_DEFAULT = 1.1
"""OpenDSS's transformer NormAmps is at ``normhkva``, by default 110% of the kVA (openg2g: 100%)."""


def _site(bus: str) -> SiteSpec:
    return SiteSpec(
        name="dc",
        bus=bus,
        power_factor=0.95,
        models=[ModelSpec(model="m", gpus_per_replica=1, replicas=1, batch_size=1)],
    )


def _dc_load(mw: float) -> dict[str, DatacenterState]:
    p = np.full(3, mw * 1e6 / 3)
    return {"dc": DatacenterState("dc", 0.0, p, p * np.tan(np.arccos(0.95)), {})}


def _conductors(state: GridState) -> dict[tuple[str, int, str], int]:
    b = state.branches
    assert b is not None
    return {(b.names[b.branch[j]], int(b.terminal[j]), b.phase[j]): j for j in range(len(b))}


@pytest.mark.parametrize("feeder", ["ieee13", "ieee34", "ieee123"])
@pytest.mark.parametrize("with_dc", [False, True], ids=["as_given", "dc_3mw"])
def test_currents_and_loading_match_opendss(feeder: str, with_dc: bool) -> None:
    """Every line's bus1-end conductors and every transformer winding's conductors: |I| within
    0.1% of OpenDSS at the same fixed taps (with and without a 3 MW datacenter), line loading
    within 0.1% of OpenDSS's |I| / NormAmps, transformer winding-1 ratings at OpenDSS's NormAmps
    / 1.1; and nothing OpenDSS reports is missing."""
    src = shared_data()
    taps = TEST_TAPS[feeder]
    spec = GridSpec(feeder=feeder, regulators={b: RegulatorSpec(taps=t) for b, t in taps.items()})
    grid = FeederGrid.from_spec(spec, [_site(DC_BUS[feeder])] if with_dc else [], Path("."))
    state = grid.solve(0.0, _dc_load(3.0) if with_dc else {}, 1.0)
    tr_taps = {
        tname: 1.0 + step * grid.feeder.regulators[bank].step_pu
        for bank, units in grid.feeder.bank_units.items()
        for (tname, _), step in zip(units, taps[bank])
    }
    ref = opendss_branches(src / SOURCES[feeder], tr_taps, (DC_BUS[feeder], 3000.0, 0.95) if with_dc else None)
    expected = {k for k in ref if k[0].startswith("transformer.") or k[1] == 1}  # lines: the bus1 end
    ours = _conductors(state)
    assert set(ours) == expected
    b = state.branches
    assert b is not None and state.branch_current_a is not None
    bad = []
    for key, j in ours.items():
        i_ref, norm_amps = ref[key]
        i = float(state.branch_current_a[j])
        if abs(i - i_ref) > max(REL_TOL * i_ref, ABS_TOL_A):
            bad.append((key, i, i_ref))
        if key[0].startswith("line."):
            assert b.rating_a[j] == norm_amps
            assert 100 * i / b.rating_a[j] == pytest.approx(100 * i_ref / norm_amps, rel=REL_TOL, abs=ABS_TOL_A)
        elif key[1] == 1:
            assert b.rating_a[j] == pytest.approx(norm_amps / DSS_NORMHKVA_DEFAULT, rel=1e-12)
    assert not bad, f"{feeder}: {len(bad)} conductors off OpenDSS by more than 0.1%, e.g. {bad[:3]}"
    # the reported branch loading is the most loaded conductor of each branch
    per_conductor = state.branch_current_a * (100.0 / b.rating_a)
    for k, name in enumerate(b.names):
        assert state.branch_loading_pct[k] == per_conductor[b.branch == k].max(), name


_RATINGS_DSS = """clear
new circuit.t basekv=12.47 bus1=src
new linecode.code nphases=3 r1=0.1 x1=0.2 normamps=250
new line.from_code bus1=src bus2=b1 linecode=code length=1
new line.overridden bus1=b1 bus2=b2 linecode=code length=1 normamps=300 emergamps=450
new line.code_after bus1=b2 bus2=b3 normamps=10 linecode=code length=1
new line.unrated bus1=b3 bus2=b4 r1=0.1 x1=0.2 length=1
new transformer.nameplate phases=3 buses=[b4 b5] conns=[delta wye] kvs=[12.47 4.16] kvas=[500 500]
new transformer.rated phases=1 buses=[b4.1 b6.1] kvs=[7.2 0.24] kvas=[50 50] normhkva=60 emerghkva=70
set voltagebases=[12.47 4.16 0.416]
calcv
"""


@pytest.mark.slow
def test_ratings_are_those_opendss_reads(tmp_path: Path) -> None:
    """normamps/emergamps from the line or its linecode (the last assignment wins, as in OpenDSS),
    OpenDSS's 400/600 A where none is set (flagged), transformer ratings from kVA and kV."""
    dss = pytest.importorskip("opendssdirect", reason="opendssdirect.py (test extra) is not installed")
    path = tmp_path / "ratings.dss"
    path.write_text(_RATINGS_DSS)
    model = read_opendss(path)
    grid_spec = GridSpec(feeder=str(path))
    branches = FeederGrid.from_spec(grid_spec, [], tmp_path).branches()
    dss.Text.Command("clear")
    dss.Text.Command(f'compile "{path}"')
    first = {name: int(np.flatnonzero(branches.branch == k)[0]) for k, name in enumerate(branches.names)}
    for ln in model.lines:
        dss.Circuit.SetActiveElement(f"Line.{ln.name}")
        j = first[f"line.{ln.name}"]
        assert branches.rating_a[j] == dss.CktElement.NormalAmps(), ln.name
        assert branches.emergency_a[j] == dss.CktElement.EmergAmps(), ln.name
    flags = {name: (bool(branches.default_rating[j]), bool(branches.default_emergency[j])) for name, j in first.items()}
    assert flags["line.from_code"] == (False, True)
    assert flags["line.overridden"] == (False, False)
    assert flags["line.unrated"] == (True, True)
    assert branches.rating_a[first["line.code_after"]] == 250.0  # the linecode assigned after normamps wins
    # nameplate: OpenDSS's NormAmps is at 110% of it; emergency at OpenDSS's default 150%
    dss.Circuit.SetActiveElement("Transformer.nameplate")
    j = first["transformer.nameplate"]
    assert branches.rating_a[j] == pytest.approx(500 / np.sqrt(3) / 12.47)
    assert branches.rating_a[j] == pytest.approx(dss.CktElement.NormalAmps() / DSS_NORMHKVA_DEFAULT)
    assert branches.emergency_a[j] == pytest.approx(dss.CktElement.EmergAmps())
    assert flags["transformer.nameplate"] == (False, True)
    # normhkva / emerghkva given: exactly OpenDSS's ratings
    dss.Circuit.SetActiveElement("Transformer.rated")
    j = first["transformer.rated"]
    assert branches.rating_a[j] == pytest.approx(dss.CktElement.NormalAmps()) == pytest.approx(60 / 7.2)
    assert branches.emergency_a[j] == pytest.approx(dss.CktElement.EmergAmps()) == pytest.approx(70 / 7.2)
    winding2 = int(
        np.flatnonzero((branches.branch == branches.names.index("transformer.rated")) & (branches.terminal == 2))[0]
    )
    assert branches.rating_a[winding2] == pytest.approx(60 / 0.24)


def test_batch_columns_equal_single_solves() -> None:
    spec = GridSpec(feeder="ieee123", regulators={b: RegulatorSpec(taps=t) for b, t in TEST_TAPS["ieee123"].items()})
    grid = FeederGrid.from_spec(spec, [_site("67")], Path("."))
    mws = [0.5, 1.5, 3.0]
    batch = grid.solve_batch([0.0, 1.0, 2.0], [_dc_load(mw) for mw in mws], 1.0)
    for mw, state in zip(mws, batch):
        single = grid.solve(0.0, _dc_load(mw), 1.0)
        # equal to the solver's tolerance (1e-8 pu: a warm start moves the converged point by that much)
        np.testing.assert_allclose(
            state.branch_current_a, single.branch_current_a, rtol=SOLVER_RTOL, atol=SOLVER_ATOL_A
        )
        np.testing.assert_allclose(state.branch_loading_pct, single.branch_loading_pct, rtol=SOLVER_RTOL, atol=1e-6)


def test_open_line_and_new_taps_are_followed() -> None:
    """An opened switch carries nothing; after a tap change the currents are those of a grid built
    with the new taps (the current matrix follows the taps)."""
    spec = GridSpec(feeder="ieee13", regulators={"reg1": RegulatorSpec(taps=[10, 8, 11])})
    grid = FeederGrid.from_spec(spec, [], Path("."))
    grid.apply(SetLineInService("671692", False), 0.0)
    state = grid.solve(0.0, {}, 1.0)
    assert state.branch_loading_pct is not None and state.branches is not None
    k = state.branches.names.index("line.671692")
    assert state.branch_loading_pct[k] == 0.0
    grid.apply(SetLineInService("671692", True), 0.0)
    grid.apply(SetTaps("reg1", (2, 3, 4)), 0.0)
    moved = grid.solve(0.0, {}, 1.0)
    fresh = FeederGrid.from_spec(
        GridSpec(feeder="ieee13", regulators={"reg1": RegulatorSpec(taps=[2, 3, 4])}), [], Path(".")
    )
    np.testing.assert_allclose(
        moved.branch_current_a, fresh.solve(0.0, {}, 1.0).branch_current_a, rtol=1e-9, atol=SOLVER_ATOL_A
    )
    assert not np.allclose(moved.branch_current_a, state.branch_current_a)


def test_overload_scenario_integral_by_hand(tmp_path: Path) -> None:
    """The trunk line 650-632 (400 A, OpenDSS's default) runs at ~67% without the site and ~109%
    with it: it alone is overloaded, exactly while the site is online, and the summary's
    overload integral is the sum over those steps of (loading - 100%) x 1 s."""
    path = tmp_path / "overload.yaml"
    path.write_text(yaml.safe_dump(OVERLOAD))
    result = run_scenario(path, tmp_path / "run")
    table = pd.read_parquet(tmp_path / "run" / "grid_branches")
    online = pd.read_parquet(tmp_path / "run" / "datacenter").set_index("t_s")["online"]
    loading = table.assign(branch=table["branch"].astype(str)).groupby(["t_s", "branch"])["loading_pct"].max()
    over = loading[loading > 100.0]
    assert set(over.index.get_level_values("branch")) == {"line.650632"}
    over_times = over.index.get_level_values("t_s").to_numpy()
    np.testing.assert_array_equal(over_times, online.index[online.to_numpy()].to_numpy())
    assert len(over_times) == 20  # online for the grid steps at 20 s ... 39 s
    by_hand = float(sum((pct - 100.0) * 1.0 for pct in over.to_numpy()))
    summary = result.summary
    assert summary["overload_integral_pct_s"] == pytest.approx(by_hand, rel=1e-12)
    assert summary["max_loading_pct"] == loading.max()
    assert summary["max_loading_branch"] == "line.650632"
    # the envelope plot's loading panel: the per-step maximum and the branch it is on
    envelope = branch_loading_envelope(table)
    per_step = loading.groupby("t_s").max()
    np.testing.assert_array_equal(envelope["max_loading_pct"].to_numpy(), per_step.to_numpy())
    assert set(envelope["branch"]) == {"line.650632"}
    grid = pd.read_parquet(tmp_path / "run" / "grid")
    assert len(plot_voltage_envelope(grid, 0.95, 1.05, table).axes) == 2
    lines = table[table["branch"].astype(str).str.startswith("line.")]
    assert lines["rating_default"].all() and (lines["rating_a"] == 400.0).all()


def test_validate_rejects_bad_branches_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = dict(OVERLOAD, outputs={"branches": "some"})
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}: outputs.branches" in err and "Traceback" not in err
