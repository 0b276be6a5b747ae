"""Asymmetric pandapower nets (``grid.pandapower`` with asymmetric loads) converted to the phase
frame: voltages, angles, line currents and substation power against pandapower's own
``runpp_3ph`` on the same net and loads, and every element that is not converted refused with a
message naming the table and row.

``runpp_3ph`` stops on mismatches in pu of the net's ``sn_mva``; the European LV feeder ships with
100 MVA, where that leaves about 4e-6 pu. Its reference runs here at ``sn_mva`` 1 (the same
physics: every pandapower quantity is in MW, kV and ohm) and is iterated from its own result
until it no longer moves (:func:`runpp_3ph_converged`).
"""

from __future__ import annotations

import copy
import functools
import itertools
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandapower as pp
import pandapower.networks as pn
import pytest

from openg2g.core.errors import FeederError, ScenarioError
from openg2g.core.state import PHASES, DatacenterState
from openg2g.grid import validate_grid
from openg2g.grid.config import SiteConnection as Site
from openg2g.grid.feeder.backend import FeederGrid
from openg2g.grid.feeder.network import Switching as SwitchState
from openg2g.grid.feeder.network import load_ports, node_index
from openg2g.grid.feeder.solver import CompiledNetwork
from openg2g.grid.kinds import build_grid
from openg2g.grid.nets.asymmetric import asymmetric_grid, feeder_model, is_asymmetric
from openg2g.grid.nets.source import BusNames, quiet_pandapower
from openg2g.scenario.schema import GridSpec
from tests.sampling import sampled

V_TOL_PU = 1e-6
ANGLE_TOL_DEG = math.degrees(1e-6)  # 1e-6 pu of phase displacement
CURRENT_TOL = 1e-3  # relative, on line currents
CURRENT_ATOL_A = (
    5e-4  # dead-end lines: their ~0 A is a voltage difference across a 1 m cable, 1e-10 pu there is ~0.05 mA
)
EU_DC_BUS, EU_DC_KW = "639", 30.0


def site_state(name: str, kw: float, pf: float = 0.95) -> DatacenterState:
    """A balanced site drawing ``kw`` kW in all at power factor ``pf``."""
    p = np.full(3, kw * 1e3 / 3)
    return DatacenterState(name, 0.0, p, p * math.tan(math.acos(pf)), {})


def runpp_3ph_converged(net: Any) -> None:
    """``runpp_3ph``, iterated from its own result until no voltage moves by 1e-10 pu."""
    cols = [f"vm_{p}_pu" for p in PHASES]
    with quiet_pandapower():
        pp.runpp_3ph(net, numba=False)
        for _ in range(10):
            before = net.res_bus_3ph[cols].to_numpy().copy()
            pp.runpp_3ph(net, init="results", numba=False)
            if np.nanmax(np.abs(net.res_bus_3ph[cols].to_numpy() - before)) < 1e-10:
                return
    raise AssertionError("runpp_3ph did not settle")


def small_net(vector_group: str = "Dyn", shift_degree: float = 30.0, tap_pos: int = 0) -> Any:
    """A hand-made asymmetric LV feeder: 11 kV grid, 400 kVA transformer, three cable sections
    (with charging), wye and delta asymmetric loads, a balanced load and a single-phase PV."""
    net = pp.create_empty_network(sn_mva=1.0, f_hz=50.0)
    buses = [pp.create_bus(net, 11.0, name="MV")] + [pp.create_bus(net, 0.4, name=f"LV{i}") for i in range(4)]
    pp.create_ext_grid(
        net, buses[0], vm_pu=1.02, va_degree=5.0, s_sc_max_mva=100.0, rx_max=0.2, x0x_max=1.2, r0x0_max=0.3
    )
    pp.create_transformer_from_parameters(
        net, buses[0], buses[1], sn_mva=0.4, vn_hv_kv=11.0, vn_lv_kv=0.42, vk_percent=4.5, vkr_percent=1.2,
        pfe_kw=0.0, i0_percent=0.0, shift_degree=shift_degree, vector_group=vector_group, vk0_percent=4.2,
        vkr0_percent=1.1, mag0_percent=80.0, mag0_rx=0.2, si0_hv_partial=0.85, tap_side="hv",
        tap_changer_type="Ratio", tap_pos=tap_pos, tap_neutral=0, tap_step_percent=2.5, tap_min=-2, tap_max=2,
    )  # fmt: skip
    for a, b in itertools.pairwise(buses[1:]):
        pp.create_line_from_parameters(
            net, a, b, length_km=0.15, r_ohm_per_km=0.2, x_ohm_per_km=0.08, c_nf_per_km=250.0, max_i_ka=0.3,
            r0_ohm_per_km=0.8, x0_ohm_per_km=0.3, c0_nf_per_km=120.0,
        )  # fmt: skip
    pp.create_asymmetric_load(net, buses[4], p_a_mw=0.03, q_a_mvar=0.01, p_b_mw=0.01, q_b_mvar=0.002, p_c_mw=0.02)
    pp.create_asymmetric_load(net, buses[2], p_a_mw=0.01, q_a_mvar=0.003, p_b_mw=0.02, q_b_mvar=0.004, type="delta")
    pp.create_load(net, buses[3], p_mw=0.012, q_mvar=0.004)
    pp.create_asymmetric_sgen(net, buses[3], p_b_mw=0.005)
    return net


@functools.cache
def _eu(scenario: str) -> Any:
    with quiet_pandapower():
        net = pn.ieee_european_lv_asymmetric(scenario)
    net.sn_mva = 1.0
    return net


def eu_net(scenario: str = "on_peak_566") -> Any:
    """A fresh copy of the IEEE European LV test feeder (built once per session)."""
    return copy.deepcopy(_eu(scenario))


def phase_solution(net: Any) -> tuple[dict[tuple[str, str], complex], Any, np.ndarray]:
    """Node voltages (pu, complex) of the converted net solved by the phase-frame solver, keyed
    ``(bus index as text, phase)``, the model, and the source's power per phase (VA)."""
    model = feeder_model(net, "test")
    nodes = node_index(model)
    ports = load_ports(model, nodes)
    cn = CompiledNetwork(model, nodes, ports, np.zeros(0, dtype=int), SwitchState.initial(model))
    sol = cn.solve(np.ones((len(ports.from_node), 1)), np.zeros((0, 1), dtype=complex))
    assert sol.converged
    names = BusNames(net)
    v = {}
    for i, name in zip(names.index, names.names):
        for p in PHASES:
            k = nodes.index.get((name.lower(), p))
            if k is not None:
                v[(str(i), p)] = complex(sol.v[k, 0] / nodes.v_base_v[k])
    return v, model, sol.s_sub_va[:, 0]


def assert_voltages_match(net: Any, v: dict[tuple[str, str], complex]) -> None:
    """Magnitudes within :data:`V_TOL_PU` and angles within :data:`ANGLE_TOL_DEG` of ``res_bus_3ph``."""
    res = net.res_bus_3ph
    for (i, p), vk in v.items():
        ref_m, ref_a = res.at[int(i), f"vm_{p}_pu"], res.at[int(i), f"va_{p}_degree"]
        assert abs(abs(vk) - ref_m) < V_TOL_PU, (i, p, abs(vk), ref_m)
        assert abs((math.degrees(np.angle(vk)) - ref_a + 180.0) % 360.0 - 180.0) < ANGLE_TOL_DEG, (i, p)


def assert_line_currents_match(net: Any, state: Any) -> None:
    """Every line's sending-end phase currents within :data:`CURRENT_TOL` of ``res_line_3ph``."""
    b = state.branches
    for j, name in enumerate(b.names):
        if not name.startswith("line."):
            continue
        rows = np.flatnonzero(b.branch == j)
        ref = net.res_line_3ph.loc[int(name.split(".")[1]), [f"i_{p}_from_ka" for p in b.phase[rows[0] : rows[-1] + 1]]]
        ref_a = np.nan_to_num(ref.to_numpy(float)) * 1000.0
        assert np.allclose(state.branch_current_a[rows], ref_a, rtol=CURRENT_TOL, atol=CURRENT_ATOL_A), (name, ref_a)


def spec_of(label: str, **kw: Any) -> GridSpec:
    return GridSpec(pandapower=label, **kw)


SMALL_CASES = {
    "Dyn1": {},
    "Dyn5": {"shift_degree": 150.0},
    "Dyn9": {"shift_degree": 270.0},
    "YNyn0": {"vector_group": "YNyn", "shift_degree": 0.0},
    "Dyn1-tap+2": {"tap_pos": 2},
}


@pytest.mark.parametrize("case", sampled(SMALL_CASES, len(SMALL_CASES), list(SMALL_CASES)))
def test_small_net_matches_runpp_3ph(case: str) -> None:
    net = small_net(**SMALL_CASES[case])
    runpp_3ph_converged(net)
    v, _, s_sub = phase_solution(net)
    assert len(v) == 3 * len(net.bus)
    assert_voltages_match(net, v)
    # the total: runpp_3ph's per-phase split takes the negative-sequence source admittance out of
    # the zero-sequence network, off where zero-sequence current reaches the source (YNyn here)
    p_ref = net.res_ext_grid_3ph.loc[0, [f"p_{p}_mw" for p in PHASES]].to_numpy(float).sum() * 1e6
    assert s_sub.real.sum() == pytest.approx(p_ref, rel=1e-6)


@pytest.mark.slow
def test_small_net_with_a_site_through_the_backend(tmp_path: Path) -> None:
    """The scenario path: a net file, a DC site at a named bus; the same load added to the net
    as a balanced load for runpp_3ph; voltages, line currents and substation power agree."""
    net = small_net()
    path = tmp_path / "lv.json"
    pp.to_json(net, str(path))
    grid = build_grid(spec_of("lv.json"), [Site("dc", "LV3")], tmp_path)
    assert isinstance(grid, FeederGrid)
    state = grid.solve(0.0, {"dc": site_state("dc", 45.0)}, 1.0)
    ref = copy.deepcopy(net)
    pp.create_load(ref, BusNames(ref).bus("LV3"), p_mw=0.045, q_mvar=0.045 * math.tan(math.acos(0.95)))
    runpp_3ph_converged(ref)
    for bp, vm in zip(state.bus_phases, state.v_pu):
        bus, p = bp.rsplit(".", 1)
        assert abs(vm - ref.res_bus_3ph.at[BusNames(ref).bus(bus), f"vm_{p}_pu"]) < V_TOL_PU, bp
    assert_line_currents_match(ref, state)
    p_ref = ref.res_ext_grid_3ph.loc[0, [f"p_{p}_mw" for p in PHASES]].to_numpy(float) * 1e6
    assert np.allclose(state.p_sub_w, p_ref, rtol=1e-6)


def test_switches_and_out_of_service() -> None:
    """A closed bus-bus switch joins two buses, an open line switch and an out-of-service line
    carry nothing: the same as runpp_3ph."""
    net = small_net()
    extra = pp.create_bus(net, 0.4, name="LV3b")
    pp.create_switch(net, BusNames(net).bus("LV3"), extra, et="b", closed=True)
    pp.create_asymmetric_load(net, extra, p_c_mw=0.004)
    spare = pp.create_line_from_parameters(
        net, 2, 4, length_km=0.2, r_ohm_per_km=0.2, x_ohm_per_km=0.08, c_nf_per_km=0.0, max_i_ka=0.3,
        r0_ohm_per_km=0.8, x0_ohm_per_km=0.3, c0_nf_per_km=0.0,
    )  # fmt: skip
    pp.create_switch(net, 4, spare, et="l", closed=False)
    net.line.loc[1, "in_service"] = False
    pp.create_line_from_parameters(
        net, 2, 3, length_km=0.3, r_ohm_per_km=0.2, x_ohm_per_km=0.08, c_nf_per_km=0.0, max_i_ka=0.3,
        r0_ohm_per_km=0.8, x0_ohm_per_km=0.3, c0_nf_per_km=0.0,
    )  # fmt: skip
    with quiet_pandapower():
        pp.runpp_3ph(net, numba=False)  # not iterated on: init="results" fails on open line switches (pandapower 3.5)
    v, model, _ = phase_solution(net)
    assert "lv3b" not in model.bus_kv  # joined into LV3
    assert_voltages_match(net, v)
    assert abs(v[(str(BusNames(net).bus("LV3")), "c")]) == pytest.approx(
        net.res_bus_3ph.at[extra, "vm_c_pu"], abs=V_TOL_PU
    )
    assert not {ln.name: ln.in_service for ln in model.lines}[str(spare)]


@pytest.mark.slow
def test_european_lv_feeder_with_a_site() -> None:
    """IEEE European LV test feeder (906 LV buses, 55 single-phase loads) with a 30 kW edge site:
    every bus-phase, every line current and the substation power against runpp_3ph."""
    net = eu_net()
    assert is_asymmetric(net)
    grid = asymmetric_grid(net, spec_of("ieee_european_lv_asymmetric"), [Site("edge", EU_DC_BUS)], Path("."))
    state = grid.solve(0.0, {"edge": site_state("edge", EU_DC_KW)}, 1.0)
    ref = eu_net()
    q_mvar = EU_DC_KW / 1e3 * math.tan(math.acos(0.95))
    pp.create_load(ref, BusNames(ref).bus(EU_DC_BUS), p_mw=EU_DC_KW / 1e3, q_mvar=q_mvar)
    runpp_3ph_converged(ref)
    names = BusNames(ref)
    worst = max(
        abs(vm - ref.res_bus_3ph.at[names.bus(bp.rsplit(".", 1)[0]), f"vm_{bp[-1]}_pu"])
        for bp, vm in zip(state.bus_phases, state.v_pu)
    )
    assert worst < V_TOL_PU
    assert len(state.bus_phases) == 3 * (len(ref.bus) - 1)  # every bus but the MV source bus
    assert_line_currents_match(ref, state)
    p_ref = ref.res_ext_grid_3ph.loc[0, [f"p_{p}_mw" for p in PHASES]].to_numpy(float) * 1e6
    assert np.allclose(state.p_sub_w, p_ref, rtol=1e-6)
    sens = grid.voltage_sensitivity("edge")
    assert sens.shape == (len(state.bus_phases), 3) and (sens < 0).any()


@pytest.mark.slow
@pytest.mark.parametrize("scenario", ["on_peak_566", "off_peak_1", "off_peak_1440"])
def test_european_lv_feeder_angles(scenario: str) -> None:
    net = eu_net(scenario)
    runpp_3ph_converged(net)
    v, _, _ = phase_solution(net)
    assert_voltages_match(net, v)


# ----------------------------------------------------------------------------- refused input
def refused(net: Any) -> str:
    with pytest.raises(FeederError) as err:
        feeder_model(net, "bad.json")
    return str(err.value)


@pytest.mark.slow
def test_unsupported_elements_are_refused() -> None:
    net = small_net()
    pp.create_gen(net, 3, p_mw=0.01, vm_pu=1.0)
    msg = refused(net)
    assert "'bad.json'" in msg and "gen row 0" in msg and "voltage-controlled generator" in msg

    net = small_net(vector_group="YNd", shift_degree=30.0)
    assert "trafo row 0" in (msg := refused(net)) and "'YNd'" in msg

    net = small_net()
    net.trafo.loc[0, "pfe_kw"] = 1.0
    assert "pfe_kw" in refused(net)

    net = small_net()
    pp.create_sgen(net, 3, p_mw=0.01, type="PV")
    assert "sgen row" in (msg := refused(net)) and "'PV'" in msg


@pytest.mark.slow
@pytest.mark.parametrize(
    ("table", "column", "expected"),
    [
        ("line", "r0_ohm_per_km", "line row 0: r0_ohm_per_km is missing"),
        ("trafo", "vk0_percent", "trafo row 0: vk0_percent is missing"),
        ("ext_grid", "s_sc_max_mva", "ext_grid row 0: s_sc_max_mva is missing"),
    ],
)
def test_missing_zero_sequence_data_is_refused(table: str, column: str, expected: str) -> None:
    net = small_net()
    net[table].loc[0, column] = np.nan
    msg = refused(net)
    assert expected in msg and "runpp_3ph needs" in msg


@pytest.mark.slow
def test_scenario_checks_on_an_asymmetric_net(tmp_path: Path) -> None:
    pp.to_json(small_net(), str(tmp_path / "lv.json"))
    step_up = {"sn_mva": 1, "vn_lv_kv": 0.4, "vk_percent": 6, "vkr_percent": 1}
    spec = spec_of("lv.json", solver="pandapower", site_transformers={"dc": step_up})
    problems = dict(validate_grid(spec, [Site("dc", "nowhere")], tmp_path))
    assert "unknown bus 'nowhere'" in problems["datacenters.0.bus"]
    assert "phase-frame solver" in problems["grid.solver"]
    assert "balanced pandapower nets only" in problems["grid.site_transformers"]
    with pytest.raises(ScenarioError):
        build_grid(spec_of("lv.json"), [Site("dc", "nowhere")], tmp_path)
    net = small_net()
    pp.create_shunt(net, 3, q_mvar=0.01)
    pp.to_json(net, str(tmp_path / "shunt.json"))
    problems = dict(validate_grid(spec_of("shunt.json"), [Site("dc", "LV3")], tmp_path))
    assert "shunt row 0" in problems["grid.pandapower"]


@pytest.mark.slow
def test_the_bundled_edge_scenario_runs(tmp_path: Path) -> None:
    """``scenarios/eu_lv_edge_none.yaml`` runs on the converted European LV feeder, and its
    results net carries the site and runpp_3ph's tables (tests/grid/test_pp3ph_results.py)."""
    import json

    from openg2g.cli.main import main
    from openg2g.scenario.net_results import to_pandapower_results

    out = tmp_path / "run"
    argv = ["run", "eu_lv_edge_none", "--set", "duration_s=10", "--set", "outputs.plots=false"]
    assert main([*argv, "--out", str(out), "--no-progress"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "complete" and summary["nonconverged_steps"] == 0
    assert summary["grid_steps"] == 10
    net = to_pandapower_results(out, 5.0)
    assert (net.asymmetric_load["name"] == "openg2g:edge").sum() == 1
    assert net.res_bus_3ph["vm_a_pu"].notna().sum() == len(net.bus) and len(net.res_line_3ph) == len(net.line)


def test_the_converted_model_round_trips_through_json() -> None:
    """The zero-sequence admittances and the source's negative-sequence impedance survive
    ``to_dict``/``from_dict`` (a converted net can be saved as a feeder artifact)."""
    import json

    from openg2g.grid.feeder.model import FeederModel

    model = feeder_model(small_net(vector_group="YNyn", shift_degree=0.0), "lv")
    assert model.zero_sequence and model.source.z2_ohm is not None
    assert FeederModel.from_dict(json.loads(json.dumps(model.to_dict()))) == model
