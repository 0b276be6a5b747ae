"""pandapower nets as grids (``grid.pandapower``): the balanced backend against pandapower's own
``runpp`` on the same net and loads, its sensitivity against finite differences of ``runpp``, and
every bad input refused with a message naming the field."""

from __future__ import annotations

import copy
import functools
import json
import math
from pathlib import Path

import numpy as np
import pandapower as pp
import pandas as pd
import pytest
from pydantic import ValidationError

from openg2g.core.commands import SetLoadScale, SetTaps
from openg2g.core.errors import CommandError, FeederError, PowerFlowError, ScenarioError
from openg2g.core.state import DatacenterState
from openg2g.grid import validate_grid
from openg2g.grid.config import SiteConnection as Site
from openg2g.grid.nets.balanced import PandapowerGrid
from openg2g.grid.nets.case import run_pandapower
from openg2g.grid.nets.source import BusNames, load_net
from openg2g.scenario.schema import GridSpec

V_TOL_PU = 1e-6
LOADING_TOL_PCT = 0.01


@functools.cache
def _loaded(name: str) -> object:
    return load_net(name)


def net_of(name: str) -> object:
    """A fresh copy of a pandapower.networks net (each is built once per session)."""
    return copy.deepcopy(_loaded(name))


def site_state(name: str, mw: float, pf: float = 0.95, t_s: float = 0.0) -> DatacenterState:
    """A balanced site drawing ``mw`` MW in all at power factor ``pf``."""
    p = np.full(3, mw * 1e6 / 3)
    return DatacenterState(name, t_s, p, p * math.tan(math.acos(pf)), {})


# (network, DC bus, DC MW): a transmission case, a medium-voltage benchmark and a real MV grid
CASES = [("case118", "59", 200.0), ("create_cigre_network_mv", "Bus 14", 3.0), ("mv_oberrhein", "Bus 50", 3.0)]


SLOW_CASES = {"mv_oberrhein"}
"""Cases whose net takes seconds to build: in CI's full run, not in the fast path."""


@pytest.fixture(
    scope="module",
    params=[pytest.param(c, marks=pytest.mark.slow) if c[0] in SLOW_CASES else c for c in CASES],
    ids=[c[0] for c in CASES],
)
def case(request: pytest.FixtureRequest) -> tuple[str, str, float, object]:
    name, bus, mw = request.param
    return name, bus, mw, net_of(name)


def runpp_with_site(net: object, bus: str, mw: float, pf: float = 0.95) -> object:
    """A copy of ``net`` with a constant-power load at ``bus`` and runpp's results."""
    net = copy.deepcopy(net)
    q = mw * math.tan(math.acos(pf))
    if mw:
        pp.create_load(net, BusNames(net).bus(bus), p_mw=mw, q_mvar=q)
    run_pandapower(net)
    return net


def check_against_runpp(grid: PandapowerGrid, state: object, reference: object) -> None:
    """Voltages within 1e-6 pu and line/transformer loading within 0.01 % of runpp's."""
    names = grid.names
    by_name = dict(zip(state.bus_phases, state.v_pu))
    for bus, label in zip(names.index, names.names):
        if f"{label}.a" in by_name:
            expected = reference.res_bus.at[bus, "vm_pu"]
            assert [by_name[f"{label}.{p}"] for p in "abc"] == pytest.approx([expected] * 3, abs=V_TOL_PU), label
    loading = dict(zip(state.branches.names, state.branch_loading_pct))
    for idx in reference.line.index:
        expected = reference.res_line.at[idx, "loading_percent"]
        assert loading[f"line.{idx}"] == pytest.approx(expected if np.isfinite(expected) else 0.0, abs=LOADING_TOL_PCT)
    for idx in reference.trafo.index:
        expected = reference.res_trafo.at[idx, "loading_percent"]
        assert loading[f"transformer.{idx}"] == pytest.approx(expected, abs=LOADING_TOL_PCT)


def test_voltages_and_loading_match_runpp(case: tuple[str, str, float, object]) -> None:
    name, bus, mw, net = case
    grid = PandapowerGrid(net, name, GridSpec(pandapower=name), [Site("dc1", bus)])
    state = grid.solve(0.0, {"dc1": site_state("dc1", mw)}, 0.1)
    check_against_runpp(grid, state, runpp_with_site(net, bus, mw))
    # and the net's own loads alone (no site load given)
    check_against_runpp(grid, grid.solve(0.1, {}, 0.1), runpp_with_site(net, bus, 0.0))


@pytest.mark.slow
def test_batch_equals_runpp_at_every_step(case: tuple[str, str, float, object]) -> None:
    name, bus, mw, net = case
    grid = PandapowerGrid(net, name, GridSpec(pandapower=name), [Site("dc1", bus)])
    levels = [0.2, 1.0, 0.6, 1.3]
    states = grid.solve_batch([0.1 * k for k in range(4)], [{"dc1": site_state("dc1", mw * x)} for x in levels], 0.1)
    for state, x in zip(states, levels):
        check_against_runpp(grid, state, runpp_with_site(net, bus, mw * x))


@pytest.mark.slow
def test_a_run_after_reset_repeats_the_first_bit_for_bit() -> None:
    grid = PandapowerGrid(
        net_of("mv_oberrhein"), "oberrhein", GridSpec(pandapower="mv_oberrhein"), [Site("dc1", "Bus 50")]
    )
    loads = [{"dc1": site_state("dc1", x)} for x in (1.0, 2.5, 3.0, 1.5)]

    def run() -> list[np.ndarray]:
        grid.reset(0)
        out = [grid.solve(0.0, loads[0], 0.1).v_pu, grid.voltage_sensitivity("dc1")]
        return [*out, *(s.v_pu for s in grid.solve_batch([0.1, 0.2, 0.3], loads[1:], 0.1))]

    first, second = run(), run()
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow
def test_json_round_trip_gives_the_same_grid(tmp_path: Path) -> None:
    net = net_of("create_cigre_network_mv")
    pp.to_json(net, str(tmp_path / "cigre.json"))
    sites = [Site("dc1", "Bus 14")]
    named = PandapowerGrid.from_spec(GridSpec(pandapower="create_cigre_network_mv"), sites, None)
    from_file = PandapowerGrid.from_spec(GridSpec(pandapower="cigre.json"), sites, tmp_path)
    loads = {"dc1": site_state("dc1", 2.0)}
    a, b = named.solve(0.0, loads, 0.1), from_file.solve(0.0, loads, 0.1)
    assert a.bus_phases == b.bus_phases
    np.testing.assert_allclose(b.v_pu, a.v_pu, rtol=0, atol=1e-12)
    check_against_runpp(from_file, b, runpp_with_site(net, "Bus 14", 2.0))


@pytest.mark.slow
def test_substation_power_and_losses_balance() -> None:
    """The external grid supplies the loads plus the losses (runpp's res_ext_grid and pl_mw)."""
    net = net_of("mv_oberrhein")
    grid = PandapowerGrid(net, "mv_oberrhein", GridSpec(pandapower="mv_oberrhein"), [Site("dc1", "Bus 50")])
    state = grid.solve(0.0, {"dc1": site_state("dc1", 3.0)}, 0.1)
    ref = runpp_with_site(net, "Bus 50", 3.0)
    assert state.p_sub_w.sum() == pytest.approx(ref.res_ext_grid.p_mw.sum() * 1e6, rel=1e-7)
    losses_mw = ref.res_line.pl_mw.sum() + ref.res_trafo.pl_mw.sum()
    assert state.losses_w == pytest.approx(losses_mw * 1e6, rel=1e-6)


@pytest.mark.parametrize("name,bus,mw", [("case118", "59", 200.0), ("create_cigre_network_mv", "Bus 14", 2.0)])
def test_sensitivity_matches_finite_differences_of_runpp(name: str, bus: str, mw: float) -> None:
    net = net_of(name)
    grid = PandapowerGrid(net, name, GridSpec(pandapower=name), [Site("dc1", bus)])
    grid.solve(0.0, {"dc1": site_state("dc1", mw)}, 0.1)
    sens = grid.voltage_sensitivity("dc1")
    assert sens.shape == (len(grid.bus_phases()), 3)
    np.testing.assert_array_equal(sens[:, 0], sens[:, 2])
    step_mw = mw * 1e-3
    up, down = runpp_with_site(net, bus, mw + step_mw), runpp_with_site(net, bus, mw - step_mw)
    fd = (up.res_bus.vm_pu - down.res_bus.vm_pu) / (2 * step_mw * 1e6)  # pu per W of the total
    label = dict(zip(grid.names.names, grid.names.index))
    expected = np.array([fd[label[bp.rsplit(".", 1)[0]]] for bp in grid.bus_phases()])
    scale = np.abs(expected).max()
    assert scale > 0
    np.testing.assert_allclose(sens[:, 0], expected, rtol=0, atol=1e-4 * scale)
    own = sens[grid.bus_phases().index(f"{bus}.a"), 0]
    if grid.case.pp_bus[grid.names.bus(bus)] in grid.case.pq:
        assert own < 0  # drawing power lowers the site's voltage
    else:
        assert own == 0  # a generator holds it (case118 bus 59)


def test_load_scale_scales_the_nets_own_loads() -> None:
    net = net_of("create_cigre_network_mv")
    grid = PandapowerGrid(net, "cigre", GridSpec(pandapower="create_cigre_network_mv", load_scale=1.5), [])
    scaled = copy.deepcopy(net)
    scaled.load["scaling"] *= 1.5
    run_pandapower(scaled)
    check_against_runpp(grid, grid.solve(0.0, {}, 0.1), scaled)
    grid.apply(SetLoadScale(scale=1.0), 0.1)
    check_against_runpp(grid, grid.solve(0.1, {}, 0.1), runpp_with_site(net, "Bus 1", 0.0))
    with pytest.raises(CommandError, match="does not handle SetTaps"):
        grid.apply(SetTaps(bank="reg1", taps=(1, 1, 1)), 0.2)


def test_source_pu_sets_the_external_grid_voltage() -> None:
    net = net_of("create_cigre_network_mv")
    grid = PandapowerGrid(net, "cigre", GridSpec(pandapower="create_cigre_network_mv", source_pu=1.0), [])
    ref = copy.deepcopy(net)
    ref.ext_grid["vm_pu"] = 1.0
    run_pandapower(ref)
    check_against_runpp(grid, grid.solve(0.0, {}, 0.1), ref)


# ----------------------------------------------------------------------------- bus names
def test_buses_named_by_name_or_else_by_index() -> None:
    net = net_of("create_cigre_network_mv")
    assert BusNames(net).bus("bus 14") == 14 and BusNames(net).by_name
    net.bus.loc[3, "name"] = "Bus 2"  # a repeated name: every bus goes by its index
    names = BusNames(net)
    assert not names.by_name and names.bus("14") == 14 and names.bus("Bus 14") is None
    assert BusNames(net_of("case118")).bus("59") == 58  # MATPOWER bus numbers


# ----------------------------------------------------------------------------- bad input
def test_exactly_one_of_feeder_and_pandapower() -> None:
    with pytest.raises(ValidationError, match="exactly one of feeder"):
        GridSpec(feeder="ieee13", pandapower="case118")
    with pytest.raises(ValidationError, match="exactly one of feeder"):
        GridSpec()
    assert "pandapower" not in GridSpec(feeder="ieee13").model_dump()  # feeder scenarios hash as before


def test_unknown_network_name_suggests_close_ones() -> None:
    with pytest.raises(FeederError, match=r"unknown network 'case11'.*did you mean case118"):
        load_net("case11")


def test_a_path_without_a_net_ending_is_refused(tmp_path: Path) -> None:
    (tmp_path / "nets").mkdir()
    (tmp_path / "nets" / "net.txt").write_text("x")
    [(field, msg)] = validate_grid(GridSpec(pandapower="nets/net.txt"), [], tmp_path)
    assert field == "grid.pandapower" and "must end in .json" in msg


@pytest.mark.parametrize(
    "filename,content,needle",
    [
        ("not_a_net.json", json.dumps({"a": 1}), "not a pandapower net"),
        ("garbage.json", "this is not json", "is not a pandapower net"),
        ("garbage.p", "not a pickle", "is not a pandapower net"),
        ("net.txt", "x", "unknown network 'net.txt'"),  # neither a path nor a net file ending: a name
    ],
)
def test_a_file_that_is_not_a_net_is_refused(tmp_path: Path, filename: str, content: str, needle: str) -> None:
    (tmp_path / filename).write_text(content)
    problems = validate_grid(GridSpec(pandapower=filename, trust_pickle=True), [], tmp_path)
    assert len(problems) == 1 and problems[0][0] == "grid.pandapower"
    assert needle in problems[0][1] and filename in problems[0][1]


def test_missing_file_is_refused(tmp_path: Path) -> None:
    [(field, msg)] = validate_grid(GridSpec(pandapower="nets/none.json"), [], tmp_path)
    assert field == "grid.pandapower" and "no such file" in msg


def test_net_without_an_external_grid_is_refused(tmp_path: Path) -> None:
    net = net_of("create_cigre_network_mv")
    net.ext_grid["in_service"] = False
    pp.to_json(net, str(tmp_path / "islanded.json"))
    [(field, msg)] = validate_grid(GridSpec(pandapower="islanded.json"), [], tmp_path)
    assert field == "grid.pandapower" and "no in-service external grid" in msg


def test_voltage_dependent_loads_are_refused(tmp_path: Path) -> None:
    net = net_of("create_cigre_network_mv")
    net.load.loc[net.load.index[0], "const_z_p_percent"] = 50.0
    pp.to_json(net, str(tmp_path / "zip.json"))
    [(field, msg)] = validate_grid(GridSpec(pandapower="zip.json"), [], tmp_path)
    assert field == "grid.pandapower" and "constant-impedance" in msg


@pytest.mark.slow
def test_unknown_site_and_monitored_buses_are_refused() -> None:
    spec = GridSpec(pandapower="create_cigre_network_mv", monitored_buses=["Bus 99"])
    problems = dict(validate_grid(spec, [Site("dc1", "Bus 14"), Site("dc2", "Bus 42")]))
    assert set(problems) == {"datacenters.1.bus", "grid.monitored_buses.0"}
    assert "unknown bus 'Bus 42'" in problems["datacenters.1.bus"] and "by bus.name" in problems["datacenters.1.bus"]
    with pytest.raises(ScenarioError, match="datacenters.1.bus"):
        PandapowerGrid.from_spec(spec, [Site("dc1", "Bus 14"), Site("dc2", "Bus 42")], None)


def test_feeder_options_are_refused_on_a_net() -> None:
    spec = GridSpec(
        pandapower="create_cigre_network_mv",
        capacitors={"c1": True},
        capacitor_control="auto",
        solver="pandapower",
        initial_controls="static",
    )
    problems = dict(validate_grid(spec, []))
    assert set(problems) == {"grid.capacitors", "grid.capacitor_control", "grid.solver", "grid.initial_controls"}
    assert problems["grid.initial_controls"] == "a balanced pandapower net has no controls to settle (give stated)"


@pytest.mark.slow
def test_divergence_names_time_site_and_load() -> None:
    net = net_of("create_cigre_network_mv")
    grid = PandapowerGrid(net, "cigre", GridSpec(pandapower="create_cigre_network_mv"), [Site("dc1", "Bus 14")])
    with pytest.raises(PowerFlowError, match=r"t=2.5 s on net cigre.*dc1@Bus 14=400.000 MW.*load scale 1") as err:
        grid.solve(2.5, {"dc1": site_state("dc1", 400.0, t_s=2.5)}, 0.1)
    share = float(str(err.value).split("carries at most ")[1].split("%")[0]) / 100
    # the site converges just below the share reported, and not much above it
    assert grid.solve(2.6, {"dc1": site_state("dc1", 400.0 * (share - 0.002))}, 0.1).converged
    with pytest.raises(PowerFlowError):
        grid.solve(2.7, {"dc1": site_state("dc1", 400.0 * (share + 0.01))}, 0.1)
    flagged = PandapowerGrid(
        net, "cigre", GridSpec(pandapower="create_cigre_network_mv", on_nonconvergence="flag"), [Site("dc1", "Bus 14")]
    )
    states = flagged.solve_batch([0.0, 0.1], [{"dc1": site_state("dc1", 1.0)}, {"dc1": site_state("dc1", 400.0)}], 0.1)
    assert states[0].converged and not states[1].converged and np.isnan(states[1].v_pu).all()


# ----------------------------------------------------------------------------- results as a net
def check_results_equal_runpp(net: object) -> None:
    """The result tables of ``net`` equal those runpp computes on a copy of it."""
    ref = copy.deepcopy(net)
    run_pandapower(ref)
    np.testing.assert_allclose(net.res_bus.vm_pu, ref.res_bus.vm_pu, rtol=0, atol=V_TOL_PU)
    np.testing.assert_allclose(net.res_bus.va_degree, ref.res_bus.va_degree, rtol=0, atol=1e-5)
    for table, cols in (
        ("res_line", ["p_from_mw", "q_to_mvar", "pl_mw", "i_ka", "vm_to_pu"]),
        ("res_trafo", ["p_hv_mw", "q_lv_mvar", "i_lv_ka", "vm_hv_pu"]),
    ):
        for col in cols:
            np.testing.assert_allclose(getattr(net, table)[col], getattr(ref, table)[col], rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(
            getattr(net, table).loading_percent, getattr(ref, table).loading_percent, rtol=0, atol=LOADING_TOL_PCT
        )


def test_results_net_equals_runpp_on_its_own_loads() -> None:
    net = net_of("case118")
    grid = PandapowerGrid(net, "case118", GridSpec(pandapower="case118", load_scale=0.9), [Site("dc1", "59")])
    out = grid.results_net({"dc1": site_state("dc1", 200.0)})
    assert out.load.loc[out.load.name == "openg2g:dc1", "p_mw"].item() == pytest.approx(200.0)
    check_results_equal_runpp(out)


@pytest.mark.slow
def test_a_run_on_a_net_and_its_results_net(tmp_path: Path) -> None:
    """The bundled cigre_mv_ofo scenario runs end to end (OFO acting on the net's sensitivity), and
    the net of one of its steps equals runpp on that step's loads."""
    from openg2g.cli.main import main
    from openg2g.scenario.net_results import to_pandapower_results

    out = tmp_path / "run"
    argv = ["run", "cigre_mv_ofo", "--set", "duration_s=30", "--set", "outputs.plots=false"]
    assert main([*argv, "--out", str(out), "--no-progress"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["max_loading_pct"] > 100  # the benchmark's HV/MV transformer 0 is loaded past its rating
    assert summary["max_loading_branch"] == "transformer.0"
    commands = pd.read_parquet(out / "commands")
    assert len(commands) > 0  # OFO changed batch sizes
    net = to_pandapower_results(out, 12.0)
    dc = pd.read_parquet(out / "datacenter")
    drawn = dc.loc[(dc.t_s > 11.9) & (dc.t_s <= 12.0 + 1e-9), "power_w"].mean()
    assert net.load.loc[net.load.name == "openg2g:dc1", "p_mw"].item() == pytest.approx(drawn / 1e6, rel=1e-12)
    check_results_equal_runpp(net)
    with pytest.raises(ScenarioError, match="not a grid step"):
        to_pandapower_results(out, 12.05)


# ----------------------------------------------------------------------------- CLI
@pytest.mark.slow
def test_powerflow_cli_on_a_named_net(capsys: pytest.CaptureFixture[str]) -> None:
    from openg2g.cli.main import main

    assert main(["powerflow", "case118", "--dc", "59=200@0.95", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["kind"], out["solver"], out["controls"], out["taps"]) == ("pandapower net", "balanced", "off", {})
    v = out["v_pu"]
    ref = runpp_with_site(net_of("case118"), "59", 200.0)
    assert v["118.a"] == pytest.approx(ref.res_bus.at[117, "vm_pu"], abs=1e-6)
    assert v["75.c"] == pytest.approx(ref.res_bus.at[74, "vm_pu"], abs=1e-6)
    assert main(["powerflow", "case118", "--dc", "59=200"]) == 0
    table = capsys.readouterr().out
    assert "pandapower net case118 (balanced)" in table and "most loaded branches (5 of 186" in table


@pytest.mark.slow
def test_powerflow_cli_on_a_net_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from openg2g.cli.main import main

    pp.to_json(net_of("create_cigre_network_mv"), str(tmp_path / "cigre.json"))
    assert main(["powerflow", str(tmp_path / "cigre.json"), "--dc", "Bus 14=2", "--json"]) == 0
    v = json.loads(capsys.readouterr().out)["v_pu"]
    ref = runpp_with_site(net_of("create_cigre_network_mv"), "Bus 14", 2.0)
    assert v["Bus 14.b"] == pytest.approx(ref.res_bus.at[14, "vm_pu"], abs=1e-6)
    assert main(["powerflow", str(tmp_path / "cigre.json"), "--dc", "Bus 99=2"]) == 2
    assert "--dc Bus 99=2: unknown bus 'Bus 99'" in capsys.readouterr().err


# ----------------------------------------------------------------------------- site transformers
def test_a_site_behind_its_own_step_up_transformer() -> None:
    """A 300 MW campus at case118 bus 59 (138 kV) through a 400 MVA, 138/34.5 kV transformer:
    equal to runpp on the net with that transformer and the load on its LV side."""
    net = net_of("case118")
    spec = GridSpec(
        pandapower="case118",
        site_transformers={"dc1": {"sn_mva": 400, "vn_lv_kv": 34.5, "vk_percent": 12, "vkr_percent": 0.3}},
    )
    grid = PandapowerGrid(net, "case118", spec, [Site("dc1", "59")])
    state = grid.solve(0.0, {"dc1": site_state("dc1", 300.0)}, 0.1)
    ref = copy.deepcopy(net)
    lv = pp.create_bus(ref, vn_kv=34.5, name="openg2g:dc1")
    pp.create_transformer_from_parameters(ref, 58, lv, 400, 138.0, 34.5, 0.3, 12, 0.0, 0.0)
    pp.create_load(ref, lv, p_mw=300.0, q_mvar=300.0 * math.tan(math.acos(0.95)))
    run_pandapower(ref)
    check_against_runpp(grid, state, ref)
    v_lv = state.voltage("openg2g:dc1.a")
    assert v_lv == pytest.approx(ref.res_bus.at[lv, "vm_pu"], abs=V_TOL_PU) and v_lv < state.voltage("59.a")
    loading = dict(zip(state.branches.names, state.branch_loading_pct))
    new_trafo = ref.trafo.index[-1]
    assert loading[f"transformer.{new_trafo}"] == pytest.approx(
        ref.res_trafo.at[new_trafo, "loading_percent"], abs=0.01
    )
    # the site's own bus is behind the transformer: its voltage now moves with the site's power
    assert grid.voltage_sensitivity("dc1")[grid.bus_phases().index("openg2g:dc1.a"), 0] < 0


def test_site_transformers_are_refused_on_feeders_and_for_unknown_sites() -> None:
    t = {"sn_mva": 10, "vn_lv_kv": 0.4, "vk_percent": 6, "vkr_percent": 1}
    feeder = GridSpec(feeder="ieee13", site_transformers={"dc1": t})
    assert ("grid.site_transformers", "available on pandapower nets only (grid.pandapower)") in validate_grid(
        feeder, [Site("dc1", "671")]
    )
    net = GridSpec(pandapower="create_cigre_network_mv", site_transformers={"dcx": t})
    [(field, msg)] = validate_grid(net, [Site("dc1", "Bus 14")])
    assert field == "grid.site_transformers.dcx" and "no datacenter site 'dcx'" in msg
    with pytest.raises(ValidationError, match="vkr_percent <= vk_percent"):
        GridSpec(pandapower="case118", site_transformers={"dc1": {**t, "vkr_percent": 7}})


def test_a_solution_on_the_lower_branch_is_not_converged() -> None:
    """10 MW at Bus 14 of the CIGRE MV net has two power-flow solutions: Vmin 0.80 pu and, from a
    warm start left by a collapsed step, a lower-branch one at Vmin 0.23 pu. Under half the source
    voltage (:data:`LOWER_BRANCH_PU`) no load is on its upper branch: flagged, never accepted."""
    from openg2g.grid.nets.balanced import LOWER_BRANCH_PU

    net = net_of("create_cigre_network_mv")
    spec = GridSpec(pandapower="create_cigre_network_mv", on_nonconvergence="flag")
    grid = PandapowerGrid(net, "cigre", spec, [Site("dc1", "Bus 14")])
    load = {"dc1": site_state("dc1", 10.0)}
    upper = grid.solve(0.0, load, 0.1)
    assert upper.converged and 0.80 < float(np.min(upper.v_pu)) < 0.81
    s_spec = grid.injections([0.1], [load])
    start = grid.case.solve(s_spec).v[:, 0].copy()
    start[grid.case.pp_bus[grid.names.bus("Bus 14")]] = 0.2  # the site's bus left collapsed
    lower = grid.case.solve(s_spec, start)
    assert lower.converged[0] and np.abs(lower.v).min() < LOWER_BRANCH_PU
    grid._v_last = start  # the warm start a collapsed step leaves
    assert not grid.solve(0.1, load, 0.1).converged
