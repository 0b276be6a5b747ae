"""Disturbances on balanced pandapower nets (``PandapowerGrid``): three-phase faults, line and
transformer outages, source sags, and the low-voltage model of the net's injections that lets a
faulted net solve.

Known answers: the Thevenin divider of a two-bus net; pandapower's own ``runpp`` on a copy of the
net with each fault a shunt, each branch out of service, the external grid at the sag, and every
load below :data:`DISTURBANCE_VMINPU` a constant impedance (``const_z`` 100 %, the static
generators there as negative impedance loads); the feeder's own OpenDSS model-1 kernel for a site
with ``load_model: opendss``; central finite differences of the backend's own solution for its
sensitivity; hand-computed timelines for a run through the engine.
"""

from __future__ import annotations

import copy
import functools
import math
from pathlib import Path

import numpy as np
import pandapower as pp
import pandas as pd
import pytest
import scipy.sparse as sp
from pandapower.pypower.makeSbus import makeSbus
from scipy.sparse.linalg import spsolve

from openg2g.core.commands import (
    ApplyFault,
    ClearFault,
    SetLineInService,
    SetLoadScale,
    SetSourceVoltage,
)
from openg2g.core.errors import CommandError
from openg2g.core.state import DatacenterState
from openg2g.grid.config import SiteConnection as Site
from openg2g.grid.feeder.ports import band_power_va
from openg2g.grid.nets.balanced import PandapowerGrid
from openg2g.grid.nets.case import run_pandapower
from openg2g.grid.nets.lowvoltage import DISTURBANCE_BAND, DISTURBANCE_VMINPU, Band, site_band
from openg2g.grid.nets.source import BusNames, quiet_pandapower
from openg2g.scenario.schema import GridSpec

V_TOL_PU = 1e-6
LOADING_TOL_PCT = 0.01
PF = 0.95


def site_state(name: str, mw: float, pf: float = PF) -> DatacenterState:
    """A balanced site drawing ``mw`` MW in all at power factor ``pf``."""
    p = np.full(3, mw * 1e6 / 3)
    return DatacenterState(name, 0.0, p, p * math.tan(math.acos(pf)), {})


def meshed_net() -> object:
    """A 110/20 kV substation feeding five 20 kV buses, meshed (MV1-MV2-MV3-MV4-MV5-MV1), with
    loads, a static generator at MV3 and a normally open tie MV2-MV5 (line 5, its switch open)."""
    net = pp.create_empty_network(sn_mva=1.0)
    hv = pp.create_bus(net, 110.0, name="HV")
    mv = [pp.create_bus(net, 20.0, name=f"MV{i}") for i in range(1, 6)]
    pp.create_ext_grid(net, hv, vm_pu=1.02)
    pp.create_transformer_from_parameters(net, hv, mv[0], 40.0, 110.0, 20.0, 0.4, 12.0, 0.0, 0.0)
    for a, b, km in ((0, 1, 4.0), (1, 2, 3.0), (2, 3, 2.0), (3, 4, 3.0), (4, 0, 5.0), (1, 4, 2.5)):
        pp.create_line_from_parameters(net, mv[a], mv[b], km, 0.16, 0.12, 250.0, 0.4)
    pp.create_switch(net, mv[1], 5, et="l", closed=False)
    for i, mw, mvar in ((1, 3.0, 1.0), (2, 2.0, 0.6), (3, 2.5, 0.8), (4, 1.5, 0.4)):
        pp.create_load(net, mv[i], p_mw=mw, q_mvar=mvar)
    pp.create_sgen(net, mv[2], p_mw=1.0, q_mvar=0.0)
    return net


@functools.cache
def _meshed_grid(sites: tuple[Site, ...]) -> PandapowerGrid:
    return PandapowerGrid(meshed_net(), "meshed", GridSpec(pandapower="meshed.json"), list(sites))


def meshed_grid(*sites: Site) -> PandapowerGrid:
    """A fresh backend on :func:`meshed_net` with ``sites`` (each built once per session, then copied)."""
    return copy.deepcopy(_meshed_grid(sites))


def voltages(grid: PandapowerGrid, state: object) -> dict[int, float]:
    """pandapower bus -> the state's voltage (pu), for the monitored buses."""
    by_name = dict(zip(state.bus_phases, state.v_pu))
    return {b: by_name[f"{n}.a"] for b, n in zip(grid.names.index, grid.names.names) if f"{n}.a" in by_name}


def reference(grid: PandapowerGrid, sites: dict[str, tuple[str, float]], faults: dict[str, float], vm: dict) -> object:
    """The net of ``grid`` for runpp: each site a load (``name -> (bus, MW)``), each fault a shunt
    of ``vn_kv^2 / r`` MW (``bus -> r_ohm``), and every load (the sites' too) and static generator
    on a bus below DISTURBANCE_VMINPU in ``vm`` (pandapower bus -> pu) the impedance drawing its
    power there."""
    net = copy.deepcopy(grid.net)
    names = BusNames(net)
    for bus, (site_bus, mw) in sites.items():
        pp.create_load(net, names.bus(site_bus), p_mw=mw, q_mvar=mw * math.tan(math.acos(PF)), name=bus)
    for bus, r in faults.items():
        b = names.bus(bus)
        pp.create_shunt(net, b, q_mvar=0.0, p_mw=float(net.bus.at[b, "vn_kv"]) ** 2 / r)
    z = 1.0 / DISTURBANCE_VMINPU**2
    for idx in net.load.index:
        if vm.get(int(net.load.at[idx, "bus"]), 1.0) < DISTURBANCE_VMINPU:
            net.load.loc[idx, ["p_mw", "q_mvar"]] = net.load.loc[idx, ["p_mw", "q_mvar"]] * z
            net.load.loc[idx, ["const_z_p_percent", "const_z_q_percent"]] = 100.0
    for idx in net.sgen.index[net.sgen.in_service.astype(bool)]:
        row = net.sgen.loc[idx]
        if vm.get(int(row.bus), 1.0) < DISTURBANCE_VMINPU:
            p, q = -row.p_mw * row.scaling * z, -row.q_mvar * row.scaling * z
            pp.create_load(net, int(row.bus), p_mw=p, q_mvar=q, const_z_p_percent=100.0, const_z_q_percent=100.0)
            net.sgen.at[idx, "in_service"] = False
    return net


def check_voltages(grid: PandapowerGrid, state: object, ref: object) -> None:
    """Every monitored voltage within 1e-6 pu of runpp's (0 where runpp leaves a bus unsupplied)."""
    for b, v in voltages(grid, state).items():
        expected = ref.res_bus.at[b, "vm_pu"]
        assert v == pytest.approx(expected if np.isfinite(expected) else 0.0, abs=V_TOL_PU), grid.names.names[b]


def check_loading(grid: PandapowerGrid, state: object, ref: object) -> None:
    loading = dict(zip(state.branches.names, state.branch_loading_pct))
    for idx in ref.line.index:
        expected = ref.res_line.at[idx, "loading_percent"]
        assert loading[f"line.{idx}"] == pytest.approx(np.nan_to_num(expected), abs=LOADING_TOL_PCT), idx
    for idx in ref.trafo.index:
        expected = ref.res_trafo.at[idx, "loading_percent"]
        assert loading[f"transformer.{idx}"] == pytest.approx(np.nan_to_num(expected), abs=LOADING_TOL_PCT), idx


def pandapower_case(net: object) -> dict:
    """pandapower's internal case of ``net`` (``Ybus``, buses, generators, bus types, ``V``), built
    by ``runpp`` whether or not its Newton converges; ``net`` is not changed."""
    from pandapower.powerflow import LoadflowNotConverged

    net = copy.deepcopy(net)
    try:
        run_pandapower(net)
    except LoadflowNotConverged:
        pass
    return net._ppc["internal"]


def current_mismatch(net: object, v: np.ndarray) -> np.ndarray:
    """Per PQ bus of pandapower's own equations of ``net`` (its ``Ybus``, its ZIP loads and
    shunts), the current mismatch ``|Ybus V - conj(S(|V|) / V)|`` (pu) at the internal voltages
    ``v`` (a bus with 0 V and a current into it shows; a power mismatch would vanish there)."""
    case = pandapower_case(net)
    s_bus = makeSbus(case["baseMVA"], case["bus"], case["gen"], vm=np.abs(v))
    return np.abs(case["Ybus"] @ v - np.conj(s_bus / v))[case["pq"]]


def backend_v(grid: PandapowerGrid, loads: dict[str, DatacenterState], t_s: float) -> np.ndarray:
    """The backend's complex bus voltages (pu) at ``t_s``, in the internal order of its case
    (pandapower's, so of a copy of its net with elements added but no bus)."""
    s_spec, dependence = grid._demand([t_s], [loads])
    return grid.case.solve(s_spec, grid._v_last, dependence).v[:, 0]


def runpp_from(net: object, start: object, off: float = 0.02) -> object:
    """runpp on ``net`` started from the results of ``start`` (a net with results, e.g.
    :meth:`PandapowerGrid.results_net`; its line and transformer results start the auxiliary buses
    of open switches), its bus voltages ``off`` (relative) and ``50 off`` degrees off.

    From a flat start runpp's Newton on a faulted net runs into the spurious solutions of the
    power equations that put a bus at 0 V with a current no branch brings it (a bus's power
    mismatch vanishes with its voltage): it starts near the answer, or from the undisturbed one."""
    net = copy.deepcopy(net)
    net.res_bus = start.res_bus.copy()
    net.res_bus["vm_pu"] *= 1.0 - off
    net.res_bus["va_degree"] += 50.0 * off
    net.res_line, net.res_trafo = start.res_line.copy(), start.res_trafo.copy()
    with quiet_pandapower():
        pp.runpp(net, numba=False, init="results", max_iteration=30)
    return net


def internal_v(net: object) -> np.ndarray:
    """The complex bus voltages (pu) of a net with results, in pandapower's internal order."""
    return np.asarray(net._ppc["internal"]["V"], dtype=complex)


# ----------------------------------------------------------------------------- the low-voltage model
def test_site_band_draws_what_the_feeders_opendss_kernel_draws() -> None:
    """A site's model-1 band on a balanced bus: the power of the feeder's own PQ-port kernel
    (``band_power_va``) at every voltage from 0.05 to 1.3 pu, and dg/dv its finite difference."""
    band = site_band(0.95, 1.05)
    v = np.linspace(0.05, 1.3, 251)
    s0 = 1000.0 + 300.0j
    expected = band_power_va(v * np.exp(0.3j), np.full(v.size, s0), 1.0, 0.95, 1.05)
    g, dg = band.gain(v)
    np.testing.assert_allclose(s0 * g, expected, rtol=1e-12)
    h = 1e-7
    away = np.all(np.abs(v[:, None] - np.array([0.5, 0.95, 1.05])) > 2 * h, axis=1)
    numeric = (band.gain(v + h)[0] - band.gain(v - h)[0]) / (2 * h)
    np.testing.assert_allclose(dg[away], numeric[away], rtol=1e-6, atol=1e-8)


def test_disturbance_band_is_constant_power_then_impedance() -> None:
    v = np.array([0.01, 0.35, 0.69, 0.7, 0.8, 1.0, 1.5])
    g, dg = DISTURBANCE_BAND.gain(v)
    below = v < DISTURBANCE_VMINPU
    np.testing.assert_allclose(g[below], (v[below] / 0.7) ** 2, rtol=1e-15)
    np.testing.assert_allclose(dg[below], 2 * v[below] / 0.49, rtol=1e-15)
    assert g[~below].tolist() == [1.0] * 4 and dg[~below].tolist() == [0.0] * 4
    with pytest.raises(ValueError, match="vlowpu < vminpu"):
        Band(0.5, 1.05, 0.5)


# ----------------------------------------------------------------------------- three-phase faults
def test_a_fault_at_the_end_of_a_line_is_the_thevenin_divider() -> None:
    """A 20 kV external grid at 1 pu, a 4 km line (0.16 + j0.12 ohm/km, no capacitance) and a
    three-phase fault of 1 ohm at its end, with a 1 MW + 0.3 Mvar load there: the load is below
    0.7 pu, so the admittance drawing its power at 0.7 pu, and the bus voltage is
    ``E / (1 + Z_line (1 / r + Y_load))``."""
    net = pp.create_empty_network(sn_mva=1.0)
    a, b = pp.create_bus(net, 20.0, name="A"), pp.create_bus(net, 20.0, name="B")
    pp.create_ext_grid(net, a, vm_pu=1.0)
    pp.create_line_from_parameters(net, a, b, 4.0, 0.16, 0.12, 0.0, 0.4)
    pp.create_load(net, b, p_mw=1.0, q_mvar=0.3)
    grid = PandapowerGrid(net, "two-bus", GridSpec(pandapower="two.json"), [])
    grid.apply(ApplyFault(name="f", bus1="B", phases=3, r_ohm=1.0), 0.0)
    state = grid.solve(0.0, {}, 0.1)
    z_line = 4.0 * (0.16 + 0.12j)
    y_load = (1.0 - 0.3j) / (DISTURBANCE_VMINPU * 20.0) ** 2  # S: conj(S) / U^2 at 0.7 pu
    expected = abs(1.0 / (1.0 + z_line * (1.0 / 1.0 + y_load)))
    assert expected < DISTURBANCE_VMINPU
    assert state.voltage("B.a") == pytest.approx(expected, abs=1e-12)
    # no fault: the constant-power load again (runpp)
    grid.apply(ClearFault(name="f"), 0.1)
    ref = copy.deepcopy(grid.net)
    run_pandapower(ref)
    assert grid.solve(0.1, {}, 0.1).voltage("B.a") == pytest.approx(ref.res_bus.at[b, "vm_pu"], abs=1e-10)


@pytest.mark.parametrize(
    ("bus", "r_ohm", "runpp_finds_it"), [("MV3", 0.5, True), ("MV5", 2.0, True), ("MV1", 0.2, False)]
)
def test_fault_profile_solves_pandapowers_equations_with_a_shunt_and_impedance_loads(
    bus: str, r_ohm: float, runpp_finds_it: bool
) -> None:
    """A fault on a meshed MV net with a 2 MW site at MV4, against pandapower's own model of the
    net with the fault as a shunt of ``vn_kv^2 / r`` MW and every load (and the static generator)
    below 0.7 pu an impedance: its ``Ybus`` is the backend's, the backend's voltages meet its
    equations (current mismatch under 1e-9 pu at every bus), each load is on the side of 0.7 pu
    its model says, and runpp started near them lands on them (within 1e-6 pu, loading 0.01 %).
    For the fault at the transformer's own bus MV1, runpp's Newton walks off to a spurious
    solution of the power equations, buses at nearly 0 V drawing tens of pu of current that no
    branch brings: the backend's is the one that meets Kirchhoff's law."""
    grid = meshed_grid(Site("dc1", "MV4"))
    loads = {"dc1": site_state("dc1", 2.0)}
    before = grid.solve(0.0, loads, 0.1)
    pre = reference(grid, {"dc1": ("MV4", 2.0)}, {}, {})
    run_pandapower(pre)
    check_voltages(grid, before, pre)
    grid.apply(ApplyFault(name="f1", bus1=bus, phases=3, r_ohm=r_ohm), 0.1)
    state = grid.solve(0.1, loads, 0.1)
    vm = voltages(grid, state)
    low = {b for b, v in vm.items() if v < DISTURBANCE_VMINPU}
    assert low  # the low-voltage model is in play
    net = reference(grid, {"dc1": ("MV4", 2.0)}, {bus: r_ohm}, vm)
    impedance = set(net.load.bus[net.load.const_z_p_percent == 100].astype(int))
    assert impedance == low & set(net.load.bus.astype(int))
    ybus = pandapower_case(net)["Ybus"]  # the fault as pandapower's shunt
    np.testing.assert_allclose((ybus - grid.case.ybus).toarray(), 0.0, atol=1e-12 * abs(ybus).max())
    ours = grid.results_net(loads, 0.1)
    v = backend_v(grid, loads, 0.1)
    np.testing.assert_allclose(np.abs(v[[grid.case.pp_bus[b] for b in vm]]), list(vm.values()), rtol=0, atol=1e-12)
    assert np.max(current_mismatch(net, v)) < 1e-9
    ref = runpp_from(net, ours)
    if runpp_finds_it:
        check_voltages(grid, state, ref)
        check_loading(grid, state, ref)
    else:
        assert np.max(current_mismatch(net, internal_v(ref))) > 1.0
    # cleared, the constant-power solution again
    grid.apply(ClearFault(name="f1"), 0.2)
    check_voltages(grid, grid.solve(0.2, loads, 0.1), pre)


def test_two_faults_add_and_clear_one_by_one() -> None:
    grid = meshed_grid()
    one = ApplyFault(name="a", bus1="MV3", phases=3, r_ohm=1.0)
    grid.apply(one, 0.0)
    v_one = grid.solve(0.0, {}, 0.1).v_pu.copy()
    grid.apply(ApplyFault(name="b", bus1="MV3.1.2.3", phases=3, r_ohm=1.0), 0.1)
    both = grid.solve(0.1, {}, 0.1)
    single = meshed_grid()
    single.apply(ApplyFault(name="half", bus1="MV3", phases=3, r_ohm=0.5), 0.0)  # 1 ohm || 1 ohm
    np.testing.assert_allclose(both.v_pu, single.solve(0.0, {}, 0.1).v_pu, atol=1e-12)
    grid.apply(ClearFault(name="b"), 0.2)
    np.testing.assert_allclose(grid.solve(0.2, {}, 0.1).v_pu, v_one, atol=1e-12)


def test_fault_sensitivity_matches_finite_differences_of_the_solution() -> None:
    """dV/dP at the site during a fault (loads near the fault impedances, the site's own bus below
    0.7 pu too) equals central differences of the backend's solved voltages."""
    grid = meshed_grid(Site("dc1", "MV3"))
    grid.apply(ApplyFault(name="f", bus1="MV4", phases=3, r_ohm=1.0), 0.0)
    mw, h = 2.0, 0.01
    state = grid.solve(0.0, {"dc1": site_state("dc1", mw)}, 0.1)
    assert state.voltage("MV3.a") < DISTURBANCE_VMINPU
    sens = grid.voltage_sensitivity("dc1")[:, 0]
    up = grid.solve(0.1, {"dc1": site_state("dc1", mw + h)}, 0.1).v_pu
    down = grid.solve(0.2, {"dc1": site_state("dc1", mw - h)}, 0.1).v_pu
    numeric = (up - down) / (2 * h * 1e6)  # per watt of the site's total
    np.testing.assert_allclose(sens, numeric, atol=1e-4 * np.max(np.abs(numeric)))
    assert np.max(np.abs(numeric)) > 0


def test_results_net_of_a_fault_is_a_solution_runpp_keeps() -> None:
    grid = meshed_grid(Site("dc1", "MV4"))
    grid.apply(ApplyFault(name="f", bus1="MV2", phases=3, r_ohm=0.5), 0.0)
    loads = {"dc1": site_state("dc1", 2.0)}
    out = grid.results_net(loads, 0.0)
    shunt = out.shunt[out.shunt.name == "openg2g:fault:f"]
    assert shunt.p_mw.item() == pytest.approx(20.0**2 / 0.5)
    own = out.load[out.load.name != "openg2g:dc1"]
    low = (out.res_bus.vm_pu[own.bus] < DISTURBANCE_VMINPU).to_numpy()
    assert low.any() and (own.scaling[low] < 1).all() and (own.scaling[~low] == 1).all()
    again = runpp_from(out, out)
    np.testing.assert_allclose(again.res_bus.vm_pu, out.res_bus.vm_pu, atol=1e-9)
    np.testing.assert_allclose(again.res_line.loading_percent, out.res_line.loading_percent, atol=1e-6)
    assert np.max(current_mismatch(out, internal_v(again))) < 1e-6  # runpp's tolerance


def test_unbalanced_and_impossible_faults_are_refused() -> None:
    grid = meshed_grid()
    refused = {
        "single line-to-ground fault is unbalanced": ApplyFault(name="f", bus1="MV3.1"),
        "double line-to-ground fault is unbalanced": ApplyFault(name="f", bus1="MV3.1.2", phases=2),
        "between phases of one bus is unbalanced": ApplyFault(name="f", bus1="MV3.1", bus2="MV3.2"),
        "from bus1 to bus2 is not modelled": ApplyFault(name="f", bus1="MV3", phases=3, bus2="MV4"),
        "unknown bus 'MV9'": ApplyFault(name="f", bus1="MV9", phases=3),
        r"nodes \[4\] are not phase conductors": ApplyFault(name="f", bus1="MV3.1.2.4", phases=3),
        r"names nodes \[1, 2\] for phases=3": ApplyFault(name="f", bus1="MV3.1.2", phases=3),
        "r_ohm must be above 0": ApplyFault(name="f", bus1="MV3", phases=3, r_ohm=0.0),
        "holds its voltage at the setpoint of external grid 0": ApplyFault(name="f", bus1="HV", phases=3),
    }
    for needle, command in refused.items():
        with pytest.raises(CommandError, match=needle) as err:
            grid.apply(command, 0.0)
        assert "net meshed" in str(err.value)
        if "unbalanced" in needle:
            assert "no negative or zero sequence" in str(err.value) and "phase-frame grid" in str(err.value)
    grid.apply(ApplyFault(name="f", bus1="MV3", phases=3), 0.0)
    with pytest.raises(CommandError, match="already in place"):
        grid.apply(ApplyFault(name="f", bus1="MV2", phases=3), 0.0)
    with pytest.raises(CommandError, match=r"no fault 'g' in place on net meshed \(in place: f\)"):
        grid.apply(ClearFault(name="g"), 0.0)


def test_a_fault_at_a_generator_bus_is_refused() -> None:
    net = meshed_net()
    pp.create_gen(net, 3, p_mw=1.0, vm_pu=1.0)  # MV3 a PV bus
    grid = PandapowerGrid(net, "meshed", GridSpec(pandapower="meshed.json"), [])
    with pytest.raises(CommandError, match="MV3' holds its voltage at the setpoint of generator 0"):
        grid.apply(ApplyFault(name="f", bus1="MV3", phases=3), 0.0)


# ----------------------------------------------------------------------------- source sags
def test_a_sag_above_the_band_is_runpp_at_that_source_voltage() -> None:
    grid = meshed_grid(Site("dc1", "MV4"))
    loads = {"dc1": site_state("dc1", 2.0)}
    grid.apply(SetSourceVoltage(v_pu=(0.9, 0.9, 0.9)), 0.0)
    state = grid.solve(0.0, loads, 0.1)
    ref = reference(grid, {"dc1": ("MV4", 2.0)}, {}, {})
    ref.ext_grid["vm_pu"] = 0.9
    run_pandapower(ref)
    check_voltages(grid, state, ref)
    check_loading(grid, state, ref)
    assert sum(state.p_sub_w) == pytest.approx(ref.res_ext_grid.p_mw.sum() * 1e6, rel=1e-9)


def test_a_deep_sag_turns_every_injection_into_an_impedance() -> None:
    """The source at 0.4 pu: every bus below 0.7 pu, so every injection is an impedance and the
    voltages are the linear network's (pandapower's Ybus and impedance loads, solved directly);
    the sag's end gives back the undisturbed solution, and a reset its bits."""
    grid = meshed_grid(Site("dc1", "MV4"))
    loads = {"dc1": site_state("dc1", 2.0)}
    undisturbed = grid.solve(0.0, loads, 0.1)
    grid.apply(SetSourceVoltage(v_pu=(0.4,)), 0.1)
    state = grid.solve(0.1, loads, 0.1)
    vm = voltages(grid, state)
    assert max(vm.values()) < DISTURBANCE_VMINPU
    ref = reference(grid, {"dc1": ("MV4", 2.0)}, {}, vm)
    assert (ref.load.const_z_p_percent == 100).all()
    ref.ext_grid["vm_pu"] = 0.4
    v = backend_v(grid, loads, 0.1)
    assert np.max(current_mismatch(ref, v)) < 1e-9
    # the linear network's solution: pandapower's Ybus, each load its admittance at 1 pu
    case = pandapower_case(ref)
    pq, slack = case["pq"], case["ref"]
    y_load = -np.conj(makeSbus(case["baseMVA"], case["bus"], case["gen"], vm=np.ones(len(v))))
    a = (case["Ybus"] + sp.diags(y_load)).tocsc()[pq][:, pq]
    linear = spsolve(a, -(case["Ybus"][pq][:, slack] @ case["V"][slack]))
    np.testing.assert_allclose(v[pq], linear, rtol=0, atol=1e-10)
    grid.apply(SetSourceVoltage(v_pu=(1.02,)), 0.2)  # the net's own: the sag is over
    np.testing.assert_allclose(grid.solve(0.2, loads, 0.1).v_pu, undisturbed.v_pu, rtol=0, atol=1e-10)
    grid.reset(0)
    assert grid.solve(0.0, loads, 0.1).v_pu.tolist() == undisturbed.v_pu.tolist()


def test_unequal_or_out_of_range_sags_are_refused() -> None:
    grid = meshed_grid()
    for v_pu, needle in (
        ((0.5, 1.0, 1.0), "the phases differ.*phase-frame grid"),
        ((0.9, 0.9), "one value or three"),
        ((0.0,), "above 0 and at most 2 pu"),
        ((2.5,), "above 0 and at most 2 pu"),
    ):
        with pytest.raises(CommandError, match=needle):
            grid.apply(SetSourceVoltage(v_pu=v_pu), 0.0)


# ----------------------------------------------------------------------------- line outages
def runpp_with(grid: PandapowerGrid, site_bus: str, mw: float, out: dict[str, bool]) -> object:
    """runpp on the net of ``grid`` with a constant-power site and branches out of or in service
    (closing their switches)."""
    net = reference(grid, {"dc1": (site_bus, mw)}, {}, {})
    for name, on in out.items():
        kind, index = name.split(".")
        table = "line" if kind == "line" else "trafo"
        net[table].at[int(index), "in_service"] = on
        if on:
            net.switch.loc[(net.switch.element == int(index)) & (net.switch.et == table[0]), "closed"] = True
    run_pandapower(net)
    return net


def test_line_outages_equal_runpp_with_the_line_out() -> None:
    grid = meshed_grid(Site("dc1", "MV3"))
    loads = {"dc1": site_state("dc1", 2.0)}
    base = grid.solve(0.0, loads, 0.1)
    grid.apply(SetLineInService(line="line.1", in_service=False), 0.1)  # MV2-MV3: the mesh carries MV3
    state = grid.solve(0.1, loads, 0.1)
    ref = runpp_with(grid, "MV3", 2.0, {"line.1": False})
    check_voltages(grid, state, ref)
    check_loading(grid, state, ref)
    assert grid.unsupplied_sites() == frozenset() and state.energized.all()
    assert state.branch_loading_pct[state.branches.names.index("line.1")] == 0.0
    # and the tie closed (its open switch too)
    grid.apply(SetLineInService(line="LINE.5", in_service=True), 0.2)
    check_voltages(grid, grid.solve(0.2, loads, 0.1), runpp_with(grid, "MV3", 2.0, {"line.1": False, "line.5": True}))
    # reclosed: the net as loaded again
    grid.apply(SetLineInService(line="line.1", in_service=True), 0.3)
    grid.apply(SetLineInService(line="line.5", in_service=False), 0.3)
    np.testing.assert_allclose(grid.solve(0.3, loads, 0.1).v_pu, base.v_pu, atol=1e-10)


def test_an_islanded_site_is_unsupplied_and_its_buses_read_zero() -> None:
    """MV3 and MV4 cut off (lines MV2-MV3 and MV4-MV5 out): the site at MV3 is unsupplied, draws
    nothing, and the island's bus-phases read 0 pu with energized False; the rest equals runpp."""
    grid = meshed_grid(Site("dc1", "MV3"))
    grid.apply(SetLineInService(line="line.1", in_service=False), 0.0)
    grid.apply(SetLineInService(line="line.3", in_service=False), 0.0)
    assert grid.unsupplied_sites() == frozenset({"dc1"})
    state = grid.solve(0.0, {"dc1": site_state("dc1", 0.0)}, 0.1)
    dead = {bp for bp, live in zip(state.bus_phases, state.energized) if not live}
    assert dead == {f"MV{i}.{p}" for i in (3, 4) for p in "abc"}
    assert all(state.voltage(bp) == 0.0 for bp in dead)
    ref = runpp_with(grid, "MV3", 0.0, {"line.1": False, "line.3": False})
    assert ref.res_bus.vm_pu.isna().sum() == 2
    check_voltages(grid, state, ref)
    check_loading(grid, state, ref)
    # a load handed for the cut-off site is not drawn, and its sensitivity is zero
    assert grid.solve(0.1, {"dc1": site_state("dc1", 5.0)}, 0.1).v_pu.tolist() == state.v_pu.tolist()
    assert not grid.voltage_sensitivity("dc1").any() and not grid.loading_sensitivity("MV4").any()
    grid.apply(SetLineInService(line="line.3", in_service=True), 0.2)
    assert grid.unsupplied_sites() == frozenset()


def test_a_transformer_outage_cuts_off_everything_below_it() -> None:
    grid = meshed_grid(Site("dc1", "MV2"))
    grid.apply(SetLineInService(line="transformer.0", in_service=False), 0.0)
    assert grid.unsupplied_sites() == frozenset({"dc1"})
    state = grid.solve(0.0, {"dc1": site_state("dc1", 1.0)}, 0.1)
    assert state.converged and not state.energized.any() and not state.v_pu.any()
    assert sum(state.p_sub_w) == 0.0 and not state.branch_current_a.any()


def test_unknown_branches_are_refused() -> None:
    grid = meshed_grid()
    for name in ("line.9", "trafo.0", "MV1-MV2", "switch.0"):
        with pytest.raises(CommandError, match=f"unknown line or transformer '{name}' on net meshed.*7 in all"):
            grid.apply(SetLineInService(line=name, in_service=False), 0.0)


def test_a_run_after_reset_repeats_the_disturbed_one_bit_for_bit() -> None:
    grid = meshed_grid(Site("dc1", "MV3"))
    commands = {
        1: SetLineInService(line="line.1", in_service=False),
        2: ApplyFault(name="f", bus1="MV5", phases=3, r_ohm=0.2),
        3: SetSourceVoltage(v_pu=(0.8,)),
        4: ClearFault(name="f"),
        5: SetLoadScale(scale=1.2),
        6: SetLineInService(line="line.1", in_service=True),
    }

    def run() -> list[list[float]]:
        grid.reset(0)
        out = []
        for k in range(8):
            if k in commands:
                grid.apply(commands[k], 0.1 * k)
            state = grid.solve(0.1 * k, {"dc1": site_state("dc1", 1.0 + 0.1 * k)}, 0.1)
            out.append([*state.v_pu, *state.p_sub_w, *state.branch_current_a])
        return out

    assert run() == run()


# ----------------------------------------------------------------------------- opendss sites
def test_an_opendss_site_below_its_band_draws_the_feeders_model_one_power() -> None:
    """A 6 MW site with load_model opendss at MV4 sits below its vminpu 0.99: it draws what the
    feeder's model-1 kernel gives at its solved voltage, and runpp with that constant power at
    MV4 gives the same voltages; a constant-power site of 6 MW draws all of it."""
    site = Site("dc1", "MV4", load_model="opendss", vminpu=0.99, vmaxpu=1.05)
    grid = meshed_grid(site)
    loads = {"dc1": site_state("dc1", 6.0)}
    state = grid.solve(0.0, loads, 0.1)
    v = state.voltage("MV4.a")
    assert v < 0.99
    s0 = 6e6 * (1 + 1j * math.tan(math.acos(PF)))
    drawn = band_power_va(np.array([v + 0j]), np.array([s0]), 1.0, 0.99, 1.05)[0]
    assert abs(drawn) < abs(s0)
    net = copy.deepcopy(grid.net)
    pp.create_load(net, grid.names.bus("MV4"), p_mw=drawn.real / 1e6, q_mvar=drawn.imag / 1e6)
    run_pandapower(net)
    check_voltages(grid, state, net)
    constant = meshed_grid(Site("dc1", "MV4"))
    assert constant.solve(0.0, loads, 0.1).voltage("MV4.a") < v


# ----------------------------------------------------------------------------- a real net, and a run
@pytest.mark.slow
def test_fault_on_the_simbench_hv_net_equals_runpp() -> None:
    """The transmission scenario's net (SimBench 1-HV-urban--0-no_sw, 110 kV, 82 buses, loads and
    static generators) with a 30 MW campus at HV2 Bus 243 and a 1 ohm fault at HV2 Bus 71: the
    backend's voltages meet pandapower's equations of the impedance-load net, and runpp on it,
    started from the pre-fault solution, gives the same voltages and loadings."""
    pytest.importorskip("simbench")
    from openg2g.grid.nets.source import load_net

    net = load_net("1-HV-urban--0-no_sw")
    spec = GridSpec(pandapower="1-HV-urban--0-no_sw")
    grid = PandapowerGrid(net, "simbench", spec, [Site("dc1", "HV2 Bus 243")])
    loads = {"dc1": site_state("dc1", 30.0)}
    before = grid.solve(0.0, loads, 0.1)
    pre = grid.results_net(loads, 0.0)
    grid.apply(ApplyFault(name="f", bus1="HV2 Bus 71", phases=3, r_ohm=1.0), 0.1)
    state = grid.solve(0.1, loads, 0.1)
    vm = voltages(grid, state)
    assert min(vm.values()) < 0.1 and max(vm.values()) > DISTURBANCE_VMINPU
    faulted = reference(grid, {"dc1": ("HV2 Bus 243", 30.0)}, {"HV2 Bus 71": 1.0}, vm)
    assert np.max(current_mismatch(faulted, backend_v(grid, loads, 0.1))) < 1e-9
    ref = runpp_from(faulted, pre, off=0.0)  # from the pre-fault solution
    assert np.max(current_mismatch(faulted, internal_v(ref))) < 1e-6
    check_voltages(grid, state, ref)
    check_loading(grid, state, ref)
    grid.apply(ClearFault(name="f"), 0.2)
    np.testing.assert_allclose(grid.solve(0.2, loads, 0.1).v_pu, before.v_pu, atol=1e-10)


@pytest.mark.slow
def test_a_run_with_a_fault_and_an_outage_on_the_cigre_net(tmp_path: Path) -> None:
    """cigre_mv_ofo without its controller: a 1 ohm fault at Bus 13 from 5 s to 5.2 s pulls the
    site's Bus 14 under 0.2 pu at the grid steps 5.0 and 5.1 s (an event at t acts on the step
    ending at t); transformer 1 (feeding Bus 12-14) out from 10 s to 15 s cuts the site off
    (events rows, 5 s unsupplied, no power drawn, Bus 14 at 0 pu), and after it the run goes on."""
    from openg2g.scenario.run import run_scenario

    events = (
        "events=[{t_s: 5, command: apply_fault, name: f1, bus1: Bus 13, phases: 3, r_ohm: 1.0},"
        " {t_s: 5.2, command: clear_fault, name: f1},"
        " {t_s: 10, command: set_line_in_service, line: transformer.1, in_service: false},"
        " {t_s: 15, command: set_line_in_service, line: transformer.1, in_service: true}]"
    )
    base = ("duration_s=20", "controllers=[]", "outputs.plots=false", "outputs.voltages=all")
    summary = run_scenario("cigre_mv_ofo", tmp_path, (*base, events)).summary
    assert summary["site_unsupplied_s"] == {"dc1": pytest.approx(5.0)}
    ev = pd.read_parquet(tmp_path / "events")
    assert ev.command.tolist() == [
        "apply_fault",
        "clear_fault",
        "set_line_in_service",
        "supply_lost",
        "set_line_in_service",
        "supply_restored",
    ]
    assert ev.t_s.tolist() == [5.0, 5.2, 10.0, 10.0, 15.0, 15.0]
    dc = pd.read_parquet(tmp_path / "datacenter")
    tenths = np.rint(dc.t_s.to_numpy() * 10)
    cut = (tenths >= 100) & (tenths < 150)
    assert (dc.power_w[cut] == 0).all() and (dc.power_w[~cut] > 0).all()
    v = pd.read_parquet(tmp_path / "grid_voltages")
    bus14 = v[v.bus_phase == "Bus 14.a"].set_index("t_s").v_pu
    tenths = np.rint(bus14.index.to_numpy() * 10)
    assert (bus14[(tenths >= 50) & (tenths < 52)] < 0.2).all()  # the steps at 5.0 and 5.1 s
    assert (bus14[(tenths >= 100) & (tenths < 150)] == 0).all()
    assert (bus14[(tenths < 50) | ((tenths >= 52) & (tenths < 100)) | (tenths >= 150)] > 0.9).all()
