"""Faults and source sags in the phase-frame network (openg2g/grid/feeder/faults.py, FeederGrid's
apply_fault, clear_fault and set_source_voltage): the OpenDSS-style spec, the refusals, and the
solution on a source-and-line feeder against the symmetrical-component closed forms of every
fault type (the bundled feeders against OpenDSS: test_fault_validation.py)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from openg2g.core.commands import ApplyFault, ClearFault, SetLineInService, SetSourceVoltage
from openg2g.core.errors import CommandError, PowerFlowError
from openg2g.core.state import DatacenterState
from openg2g.grid.config import GridSpec
from openg2g.grid.feeder import backend
from openg2g.grid.feeder.backend import FeederGrid
from openg2g.grid.feeder.faults import OPENDSS_FAULT_R_OHM, fault_text, parse_fault
from openg2g.grid.feeder.library import feeder_from_model
from openg2g.grid.feeder.model import FeederModel, LineModel, LoadModel, SourceModel
from openg2g.grid.feeder.network import FORTESCUE, sequence_to_phase
from openg2g.scenario.schema import ModelSpec, SiteSpec

KV = 12.47
E = KV * 1000.0 / math.sqrt(3.0)
A = np.exp(2j * np.pi / 3)
ZS1, ZS0 = 0.4 + 2.2j, 1.1 + 6.5j
"""Source impedances (ohm), positive (= negative) and zero sequence."""
ZL1, ZL0 = 0.9 + 1.6j, 2.4 + 5.1j
"""The line's sequence impedances (ohm)."""
Z1, Z0 = ZS1 + ZL1, ZS0 + ZL0


def toy() -> FeederModel:
    """A source (12.47 kV, angle 0) and one transposed line to bus ``b``, nothing else."""
    z = sequence_to_phase(ZL0, ZL1, ZL1)
    line = LineModel(
        name="l1",
        bus1="src",
        bus2="b",
        phases1=("a", "b", "c"),
        phases2=("a", "b", "c"),
        r_ohm=z.real.tolist(),
        x_ohm=z.imag.tolist(),
        b_us=np.zeros((3, 3)).tolist(),
        length_km=1.0,
    )
    source = SourceModel(
        bus="src", base_kv=KV, v_pu=1.0, angle_deg=0.0, z1_ohm=[ZS1.real, ZS1.imag], z0_ohm=[ZS0.real, ZS0.imag]
    )
    phases = ("a", "b", "c")
    return FeederModel(
        name="toy", source=source, bus_kv={"src": KV, "b": KV}, bus_phases={"src": phases, "b": phases}, lines=[line]
    )


def toy_grid() -> FeederGrid:
    return FeederGrid(feeder_from_model(toy()), GridSpec(feeder="toy.dss"), [], Path("."))


def v_at_b(grid: FeederGrid) -> np.ndarray:
    sol = grid.node_solution(0.0, {})
    return sol.v_v[[sol.nodes.index[("b", p)] for p in "abc"]]


def _from_sequences(i0: complex, i1: complex, i2: complex) -> np.ndarray:
    return FORTESCUE @ np.array([i0, i1, i2])


def closed_form(kind: str, r: float, e: np.ndarray) -> np.ndarray:
    """Phase voltages (V) at ``b`` through the fault, by symmetrical components: fault currents
    from the sequence networks (Z1 = Z2, Z0; EMF ``e`` per phase), then ``V = E - Z I``."""
    e0, e1, e2 = np.linalg.solve(FORTESCUE, e)
    if kind == "SLG":  # a to ground through r
        if abs(e0) + abs(e2) > 1e-9 * abs(e1):
            raise ValueError("the SLG closed form here is for a balanced EMF")
        i1 = e1 / (Z0 + 2 * Z1 + 3 * r)
        i_abc = _from_sequences(i1, i1, i1)
    elif kind == "LL":  # b to c through r
        if abs(e0) + abs(e2) > 1e-9 * abs(e1):
            raise ValueError("the LL closed form here is for a balanced EMF")
        i1 = e1 / (2 * Z1 + r)
        i_abc = _from_sequences(0.0, i1, -i1)
    elif kind == "LLG":  # b and c, each through r to ground: a bolted LLG behind Z + r
        if abs(e0) + abs(e2) > 1e-9 * abs(e1):
            raise ValueError("the LLG closed form here is for a balanced EMF")
        z1, z0 = Z1 + r, Z0 + r
        i1 = e1 / (z1 + z1 * z0 / (z1 + z0))
        i_abc = _from_sequences(-i1 * z1 / (z1 + z0), i1, -i1 * z0 / (z1 + z0))
    elif kind == "3ph":  # each phase through r to ground: the sequences decouple
        i_abc = _from_sequences(e0 / (Z0 + r), e1 / (Z1 + r), e2 / (Z1 + r))
    else:
        raise ValueError(kind)
    return e - sequence_to_phase(Z0, Z1, Z1) @ i_abc


FAULTS = {
    "SLG": ApplyFault(name="f", bus1="b.1"),
    "LL": ApplyFault(name="f", bus1="b.2", bus2="b.3"),
    "LLG": ApplyFault(name="f", bus1="b.2.3", phases=2),
    "3ph": ApplyFault(name="f", bus1="b", phases=3),
}
BALANCED = E * np.array([1.0, A**2, A])


@pytest.mark.parametrize("path", ["dense", "sparse"])
@pytest.mark.parametrize("kind", list(FAULTS))
@pytest.mark.parametrize("r", [OPENDSS_FAULT_R_OHM, 2.5])
def test_fault_voltages_match_the_closed_forms(kind: str, r: float, path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if path == "sparse":
        monkeypatch.setattr(backend, "SPARSE_MIN_NODES", 0)
    grid = toy_grid()
    command = FAULTS[kind]
    grid.apply(ApplyFault(name=command.name, bus1=command.bus1, phases=command.phases, r_ohm=r, bus2=command.bus2), 0.0)
    v = v_at_b(grid)
    expected = closed_form(kind, r, BALANCED)
    assert np.abs(v - expected).max() / E < 1e-9


def test_a_per_phase_sag_through_a_three_phase_fault() -> None:
    """An unbalanced EMF excites every sequence; a three-phase fault keeps them apart."""
    grid = toy_grid()
    grid.apply(SetSourceVoltage(v_pu=(0.5, 1.0, 0.8)), 0.0)
    no_fault = v_at_b(grid)
    sagged = E * np.array([0.5, A**2, 0.8 * A])
    assert np.abs(no_fault - sagged).max() / E < 1e-12  # no load: the EMF itself
    grid.apply(ApplyFault(name="f", bus1="b", phases=3, r_ohm=0.7), 0.0)
    assert np.abs(v_at_b(grid) - closed_form("3ph", 0.7, sagged)).max() / E < 1e-9
    grid.apply(SetSourceVoltage(v_pu=(1.0,)), 0.0)
    grid.apply(ClearFault("f"), 0.0)
    assert np.abs(v_at_b(grid) - BALANCED).max() / E < 1e-12


def test_cleared_and_reset_grids_solve_as_before_the_fault() -> None:
    grid = FeederGrid.from_spec(GridSpec(feeder="ieee13"), [], Path("."))
    before = grid.solve(0.0, {}, 1.0).v_pu
    grid.apply(ApplyFault(name="f", bus1="671", phases=3), 1.0)
    faulted = grid.solve(1.0, {}, 1.0)
    assert faulted.voltage("671.a") < 1e-3 and faulted.converged
    grid.apply(ClearFault("f"), 2.0)
    assert np.abs(grid.solve(2.0, {}, 1.0).v_pu - before).max() < 1e-8
    grid.apply(ApplyFault(name="f", bus1="671", phases=3), 3.0)
    grid.reset(0)
    assert np.array_equal(grid.solve(0.0, {}, 1.0).v_pu, before)  # a fresh grid's floats


def test_a_fault_to_a_cut_off_bus_energizes_its_phase() -> None:
    """A conductor joined to a live one carries its voltage: bus 675, cut off by line 692675, has
    phase a back through a fault from 692.a, phases b and c stay dead (a site there still lacks supply)."""
    site = SiteSpec(name="far", bus="675", models=[ModelSpec(model="m", gpus_per_replica=1, replicas=1, batch_size=1)])
    grid = FeederGrid.from_spec(GridSpec(feeder="ieee13"), [site], Path("."))
    grid.apply(SetLineInService("692675", False), 0.0)
    grid.apply(ApplyFault(name="f", bus1="692.1", bus2="675.1", r_ohm=0.01), 0.0)
    state = grid.solve(0.0, {}, 1.0)
    assert state.energized is not None
    live = dict(zip(state.bus_phases, state.energized))
    assert live["675.a"] and not live["675.b"] and not live["675.c"]
    assert state.voltage("675.b") == 0.0 and state.voltage("675.a") > 0.5
    assert grid.unsupplied_sites() == {"far"}
    grid.apply(ClearFault("f"), 1.0)
    assert not dict(zip(grid.bus_phases(), grid.solve(1.0, {}, 1.0).energized))["675.a"]


def test_a_constant_power_site_that_cannot_be_solved_names_site_fault_and_time() -> None:
    sites = [
        SiteSpec(name=n, bus=b, models=[ModelSpec(model="m", gpus_per_replica=1, replicas=1, batch_size=1)])
        for n, b in (("far", "632"), ("near", "671"))
    ]
    grid = FeederGrid.from_spec(GridSpec(feeder="ieee13"), sites, Path("."))
    p = np.full(3, 3e5)
    loads = {n: DatacenterState(n, 0.0, p, p * 0.33, {}) for n in ("far", "near")}
    grid.apply(ApplyFault(name="arc", bus1="671.1", r_ohm=0.01), 12.5)
    with pytest.raises(PowerFlowError) as err:
        grid.solve(12.5, loads, 1.0)
    text = str(err.value)
    assert "t=12.5 s" in text and "fault arc (bus1=671.1 phases=1 r=0.01)" in text
    assert text.index("near (bus 671") < text.index("far (bus 632")  # nearest the fault first
    assert "load_model: opendss" in text


def test_a_constant_power_site_that_cannot_ride_through_a_sag_names_the_sag() -> None:
    site = SiteSpec(name="dc", bus="671", models=[ModelSpec(model="m", gpus_per_replica=1, replicas=1, batch_size=1)])
    grid = FeederGrid.from_spec(GridSpec(feeder="ieee13"), [site], Path("."))
    p = np.full(3, 3e5)
    grid.apply(SetSourceVoltage(v_pu=(0.2,)), 4.0)
    with pytest.raises(
        PowerFlowError, match=r"t=4.0 s .* through source at 0.2/0.2/0.2 pu: site dc .* sag the source less"
    ):
        grid.solve(4.0, {"dc": DatacenterState("dc", 0.0, p, p * 0.33, {})}, 1.0)


def test_a_feeder_load_at_constant_power_at_any_voltage_is_named() -> None:
    """A load with no low-voltage band (vminpu 0, as a pandapower net's) at a bolted fault."""
    model = toy()
    model.loads = [LoadModel("house", "b", ("a",), "wye", 1, KV / math.sqrt(3.0), 5.0, 1.0, 1, vminpu=0.0, vlowpu=0.0)]
    grid = FeederGrid(feeder_from_model(model), GridSpec(feeder="toy.dss"), [], Path("."))
    grid.apply(ApplyFault(name="f", bus1="b.1"), 3.0)
    with pytest.raises(PowerFlowError, match=r"t=3.0 s .* the feeder's load house \(bus b, .* constant power at any"):
        grid.solve(3.0, {}, 1.0)


def test_a_site_at_its_opendss_band_solves_through_a_bolted_fault() -> None:
    site = SiteSpec(
        name="dc",
        bus="671",
        load_model="opendss",
        models=[ModelSpec(model="m", gpus_per_replica=1, replicas=1, batch_size=1)],
    )
    grid = FeederGrid.from_spec(GridSpec(feeder="ieee13"), [site], Path("."))
    p = np.full(3, 3e5)
    grid.apply(ApplyFault(name="f", bus1="671.1"), 0.0)
    state = grid.solve(0.0, {"dc": DatacenterState("dc", 0.0, p, p * 0.33, {})}, 1.0)
    assert state.converged and state.voltage("671.a") < 1e-3 and state.voltage("671.b") > 0.9


# ----------------------------------------------------------------------------------- the spec
def test_parse_fault_reads_opendss_properties() -> None:
    f = parse_fault("bus1=671.1 phases=1 r=0.01", "f1")
    assert (f.name, f.bus1, f.bus2, f.phases, f.r_ohm) == ("f1", "671.1", None, 1, 0.01)
    f = parse_fault("R=2  BUS2=671.3 Bus1=671.2", "x")
    assert (f.bus1, f.bus2, f.phases, f.r_ohm) == ("671.2", "671.3", 1, 2.0)
    assert parse_fault("bus1=671", "d").r_ohm == OPENDSS_FAULT_R_OHM
    assert parse_fault(fault_text(f), "x") == f  # the text reads back


@pytest.mark.parametrize(
    "text,match",
    [
        ("phases=1", "bus1: missing"),
        ("bus1=671.1 phases=x", "phases: 'x' is not a whole number"),
        ("bus1=671.1 phases=4", "phases: '4'"),
        ("bus1=671.1 phases=0", "phases: '0'"),
        ("bus1=671.1 r=0", "r: '0' is not a resistance"),
        ("bus1=671.1 r=-1", "r: '-1'"),
        ("bus1=671.1 r=nan", "r: 'nan'"),
        ("bus1=671.1 r=1ohm", "r: '1ohm'"),
        ("bus1=671.1 gmatrix=[1]", "gmatrix: not a property taken here"),
        ("bus1=671.1 bus1=671.2", "bus1: given twice"),
        ("bus1=671.1 r", "'r' is not property=value"),
        ("bus1=", "'bus1=' is not property=value"),
    ],
)
def test_parse_fault_refuses_a_bad_spec_naming_the_property(text: str, match: str) -> None:
    with pytest.raises(CommandError, match=match) as err:
        parse_fault(text, "f1")
    assert str(err.value).startswith(repr(text))


# ----------------------------------------------------------------------------------- refusals
@pytest.fixture(scope="module")
def ieee13() -> FeederGrid:
    return FeederGrid.from_spec(GridSpec(feeder="ieee13"), [], Path("."))


@pytest.mark.parametrize(
    "command,match",
    [
        (ApplyFault(name="f", bus1="999.1"), r"apply_fault 'f': bus1: unknown bus '999' on feeder ieee13"),
        (ApplyFault(name="f", bus1="671.4"), r"bus1: bus 671 has no node 4 \(its nodes: 1, 2, 3\)"),
        (ApplyFault(name="f", bus1="611"), r"bus1: bus 611 has no node 1 \(its nodes: 3\)"),
        (ApplyFault(name="f", bus1="671.1", phases=2), r"bus1: '671.1' lists 1 node\(s\) for a fault of 2 phase"),
        (ApplyFault(name="f", bus1="671.1.x"), r"bus1: '671.1.x': node 'x' is not a node number"),
        (ApplyFault(name="f", bus1="671.0"), "bus1: '671.0': node 0 is ground"),
        (ApplyFault(name="f", bus1="671.1.1", phases=2), "bus1: '671.1.1' lists a node twice"),
        (ApplyFault(name="f", bus1="671.1", bus2="671.1"), "bus2: conductor 1 joins node '671.1' to itself"),
        (ApplyFault(name="f", bus1="671.1", bus2="675.1.2"), r"bus2: '675.1.2' lists 2 node\(s\) for a fault of 1"),
        (ApplyFault(name="f", bus1="671.1", bus2="xyz.1"), "bus2: unknown bus 'xyz'"),
        (ApplyFault(name="f", bus1="671", phases=0), "phases: 0 .a fault has 1 to 3 conductors"),
        (ApplyFault(name="f", bus1="671", phases=4), "phases: 4"),
        (ApplyFault(name="f", bus1="671.1", r_ohm=0.0), "r_ohm: 0.0 ohm .must be > 0"),
        (ApplyFault(name="f", bus1="671.1", r_ohm=-1.0), "r_ohm: -1.0 ohm"),
        (ClearFault("nope"), r"clear_fault 'nope': name: no fault of that name is in place \(in place: none\)"),
        (SetSourceVoltage(v_pu=(1.0, 0.9)), "set_source_voltage: v_pu: 2 values"),
        (
            SetSourceVoltage(v_pu=(1.0, 0.0, 1.0)),
            "set_source_voltage: v_pu: 0.0 .pu of the source's base voltage, must",
        ),
        (SetSourceVoltage(v_pu=(-0.5,)), "v_pu: -0.5 .* must be > 0"),
        (SetSourceVoltage(v_pu=(2.5,)), "v_pu: 2.5 .* at most 2: a larger value is no swell"),
    ],
)
def test_bad_fault_and_source_commands_are_refused(ieee13: FeederGrid, command, match: str) -> None:
    with pytest.raises(CommandError, match=match):
        ieee13.apply(command, 0.0)
    assert not ieee13._switching.faults and ieee13._switching.source_pu is None  # nothing changed


def test_fault_names_are_unique_and_a_cleared_name_is_free_again() -> None:
    grid = FeederGrid.from_spec(GridSpec(feeder="ieee13"), [], Path("."))
    grid.apply(ApplyFault(name="f", bus1="671.1"), 0.0)
    with pytest.raises(CommandError, match=r"apply_fault 'f': name: a fault of that name is in place \(bus1=671.1"):
        grid.apply(ApplyFault(name="f", bus1="675.2"), 0.0)
    grid.apply(ApplyFault(name="g", bus1="675.2"), 0.0)
    with pytest.raises(CommandError, match=r"in place: f, g"):
        grid.apply(ClearFault("h"), 0.0)
    grid.apply(ClearFault("f"), 0.0)
    grid.apply(ApplyFault(name="f", bus1="680.3"), 0.0)
    assert [f.describe() for f in grid._switching.faults.values()] == [
        "bus1=675.2 phases=1 r=0.0001",
        "bus1=680.3 phases=1 r=0.0001",
    ]


def test_the_pandapower_solver_mode_refuses_faults_and_sags() -> None:
    grid = FeederGrid.from_spec(GridSpec(feeder="ieee13", solver="pandapower"), [], Path("."))
    for command in (ApplyFault(name="f", bus1="671.1"), ClearFault("f"), SetSourceVoltage(v_pu=(0.9,))):
        with pytest.raises(CommandError, match="the pandapower solver mode does not model faults or source sags"):
            grid.apply(command, 0.0)
