"""FeederGrid behaviour: batch = step-by-step, sensitivity = finite difference, commands,
storage, PV, profiles, regulators in auto mode, outages, non-convergence, an analytic check."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from openg2g.core.commands import (
    SetBatchSize,
    SetCapacitor,
    SetLineInService,
    SetLoadScale,
    SetPVScale,
    SetRegulatorMode,
    SetStoragePower,
    SetTaps,
)
from openg2g.core.errors import CommandError, PowerFlowError, ScenarioError, UnknownNameError
from openg2g.core.state import DatacenterState
from openg2g.grid.feeder.backend import FeederGrid
from openg2g.grid.feeder.library import load_feeder
from openg2g.grid.feeder.operating_point import OperatingPoint
from openg2g.scenario.schema import EventSpec, GridSpec, ModelSpec, RegulatorSpec, SiteSpec

PF = 0.95


def site(name: str = "dc", bus: str = "671", pf: float = PF) -> SiteSpec:
    return SiteSpec(
        name=name, bus=bus, power_factor=pf, models=[ModelSpec(model="m", gpus_per_replica=1, replicas=1, batch_size=1)]
    )


def dc(p_w_per_phase, name: str = "dc", pf: float = PF) -> DatacenterState:
    p = np.broadcast_to(np.asarray(p_w_per_phase, dtype=float), (3,))
    return DatacenterState(name, 0.0, p, p * np.tan(np.arccos(pf)), {})


def og13(**kw) -> FeederGrid:
    spec = GridSpec(feeder="openg2g-ieee13", regulators={"reg1": RegulatorSpec(taps=[14, 6, 15])}, **kw)
    return FeederGrid.from_spec(spec, [site()], Path("."))


def test_monitored_bus_phases() -> None:
    g = og13()
    assert not any(bp.startswith("sourcebus.") for bp in g.bus_phases())
    assert "671.a" in g.bus_phases() and "611.c" in g.bus_phases() and "611.a" not in g.bus_phases()
    g2 = og13(monitored_buses=["671", "675"])
    assert g2.bus_phases() == ("671.a", "671.b", "671.c", "675.a", "675.b", "675.c")


@pytest.mark.parametrize("feeder,bus", [("openg2g-ieee13", "671"), ("ieee123", "67")])
def test_batch_equals_step_by_step(feeder: str, bus: str) -> None:
    spec = GridSpec(feeder=feeder)
    rng = np.random.default_rng(0)
    loads = [{"dc": dc(rng.uniform(2e5, 1e6, 3))} for _ in range(25)]
    t = [0.1 * i for i in range(25)]
    a = FeederGrid.from_spec(spec, [site(bus=bus)], Path("."))
    b = FeederGrid.from_spec(spec, [site(bus=bus)], Path("."))
    assert a.can_batch()
    batch = a.solve_batch(t, loads, 0.1)
    steps = [b.solve(ti, ld, 0.1) for ti, ld in zip(t, loads)]
    for x, y in zip(batch, steps):
        assert x.bus_phases is y.bus_phases or x.bus_phases == y.bus_phases
        np.testing.assert_allclose(x.v_pu, y.v_pu, atol=1e-8)
        np.testing.assert_allclose(x.p_sub_w, y.p_sub_w, rtol=1e-7)
        assert x.losses_w == pytest.approx(y.losses_w, rel=1e-6)


def test_sensitivity_matches_finite_difference() -> None:
    g = og13()
    base = np.array([8e5, 1e6, 9e5])
    s0 = g.solve(0.0, {"dc": dc(base)}, 1.0)
    sens = g.voltage_sensitivity("dc")
    assert sens.shape == (len(g.bus_phases()), 3) and not sens.flags.writeable
    assert np.array_equal(sens, g.voltage_sensitivity("671"))
    dp = 1e4
    for k in range(3):
        hi, lo = base.copy(), base.copy()
        hi[k] += dp
        lo[k] -= dp
        fd = (g.solve(0.0, {"dc": dc(hi)}, 1.0).v_pu - g.solve(0.0, {"dc": dc(lo)}, 1.0).v_pu) / (2 * dp)
        np.testing.assert_allclose(sens[:, k], fd, atol=1e-3 * np.abs(fd).max())
    assert s0.converged
    # dV/dP is negative at the site's own phases
    i = [g.bus_phases().index(f"671.{p}") for p in "abc"]
    assert np.all(np.diag(sens[i]) < 0)


def test_sensitivities_of_all_sites_at_once_equal_each_alone() -> None:
    """The first call computes every site's sensitivity in one solve; each equals the one
    computed by itself (one right-hand side each) at the same operating point."""
    sites = [site("a", "671", 0.95), site("b", "675", 0.9)]
    spec = GridSpec(feeder="openg2g-ieee13", regulators={"reg1": RegulatorSpec(taps=[14, 6, 15])})
    loads = {"a": dc(8e5, "a", 0.95), "b": dc(4e5, "b", 0.9)}
    both = FeederGrid.from_spec(spec, sites, Path("."))
    both.solve(0.0, loads, 1.0)
    sens_b = both.voltage_sensitivity("b")
    point = both._operating_point()
    assert set(point._voltage) == {("671", 0.95), ("675", 0.9)}  # "a" came with "b"
    for name, target in (("a", ("671", 0.95)), ("b", ("675", 0.9))):
        alone = OperatingPoint(point.network, point.loads, both._nodes, both._mon_idx, both._flows, both._switching, {})
        np.testing.assert_allclose(
            both.voltage_sensitivity(name), alone.voltage_sensitivity(target), rtol=1e-12, atol=1e-18
        )
        assert set(alone._voltage) == {target}
    assert not np.allclose(both.voltage_sensitivity("a"), sens_b)


def test_an_operating_point_is_linearized_once_and_dropped_when_it_changes() -> None:
    """The same point answers every request from one linearization; a new solve, a tap change
    or a capacitor switched makes a new one."""
    g = og13()
    g.solve(0.0, {"dc": dc(1e6)}, 1.0)
    first = g._operating_point()
    s1 = g.voltage_sensitivity("dc")
    assert g.voltage_sensitivity("dc") is s1 and g._operating_point() is first
    g.apply(SetTaps("reg1", (0, 0, 0)), 1.0)
    assert g._operating_point() is not first  # same loads, another network
    second = g._operating_point()
    g.solve(1.0, {"dc": dc(1e6)}, 1.0)
    assert g._operating_point() is not second  # another solve
    withcaps = FeederGrid.from_spec(GridSpec(feeder="ieee13"), [site()], Path("."))
    withcaps.solve(0.0, {"dc": dc(1e6)}, 1.0)
    third = withcaps._operating_point()
    withcaps.apply(SetCapacitor("cap1", False), 1.0)
    assert withcaps._operating_point() is not third


def test_sensitivity_refreshed_after_tap_change() -> None:
    g = og13()
    g.solve(0.0, {"dc": dc(1e6)}, 1.0)
    s_a = g.voltage_sensitivity("dc")
    g.apply(SetTaps("reg1", (0, 0, 0)), 1.0)
    g.solve(1.0, {"dc": dc(1e6)}, 1.0)
    assert not np.allclose(s_a, g.voltage_sensitivity("dc"), rtol=1e-3, atol=0.0)


def test_taps_commands() -> None:
    g = og13()
    v0 = g.solve(0.0, {"dc": dc(1e6)}, 1.0).voltage("671.a")
    g.apply(SetTaps("reg1", (16, 6, 15)), 1.0)
    s = g.solve(1.0, {"dc": dc(1e6)}, 1.0)
    assert s.taps["reg1"] == (16, 6, 15) and s.voltage("671.a") > v0 + 0.005
    with pytest.raises(CommandError, match="3 taps|phases a, b, c"):
        g.apply(SetTaps("reg1", (1, 2)), 1.0)
    with pytest.raises(CommandError, match=r"outside \[-16, 16\]"):
        g.apply(SetTaps("reg1", (1, 2, 17)), 1.0)
    with pytest.raises(CommandError, match="unknown regulator bank"):
        g.apply(SetTaps("reg9", (1, 2, 3)), 1.0)
    with pytest.raises(CommandError):
        g.apply(SetRegulatorMode("reg1", "manual"), 1.0)
    with pytest.raises(CommandError, match="the grid backend does not handle SetBatchSize"):
        g.apply(SetBatchSize(site="dc", model="m", batch_size=8), 1.0)
    g.reset(0)
    assert g.taps()["reg1"] == (14, 6, 15)


def test_capacitor_and_line_commands() -> None:
    g = FeederGrid.from_spec(GridSpec(feeder="ieee13"), [], Path("."))
    on = g.solve(0.0, {}, 1.0).voltage("675.a")
    g.apply(SetCapacitor("Cap1", False), 1.0)
    off = g.solve(1.0, {}, 1.0).voltage("675.a")
    assert on - off > 0.01
    with pytest.raises(CommandError, match="unknown capacitor"):
        g.apply(SetCapacitor("cap9", True), 1.0)
    g.apply(SetLineInService("671692", False), 2.0)
    s = g.solve(2.0, {}, 1.0)
    assert s.voltage("675.a") == 0.0 and s.voltage("671.a") > 0.9
    with pytest.raises(CommandError, match="unknown line"):
        g.apply(SetLineInService("nope", False), 2.0)


def test_sites_cut_off_by_a_line() -> None:
    """A line out of service cuts off the buses beyond it: the sites there are reported without
    supply, the state marks those bus-phases de-energized (reading 0 pu); closing it restores both."""
    sites = [site("near", bus="671"), site("far", bus="675")]
    g = FeederGrid.from_spec(GridSpec(feeder="openg2g-ieee13"), sites, Path("."))
    loads = {"near": dc(2e5, "near"), "far": dc(2e5, "far")}
    before = g.solve(0.0, loads, 1.0)
    assert g.unsupplied_sites() == frozenset()
    assert before.energized is not None and before.energized.all() and not before.energized.flags.writeable
    g.apply(SetLineInService("692675", False), 1.0)
    assert g.unsupplied_sites() == {"far"}
    cut = g.solve(1.0, loads, 1.0)
    assert cut.energized is not None
    dead = {bp for bp, live in zip(cut.bus_phases, cut.energized) if not live}
    assert dead == {"675.a", "675.b", "675.c"}
    assert all(cut.voltage(bp) == 0.0 for bp in dead) and cut.voltage("692.a") > 0.9
    g.apply(SetLineInService("692675", True), 2.0)
    assert g.unsupplied_sites() == frozenset()
    assert g.solve(2.0, loads, 1.0).energized.all()


def test_load_scale() -> None:
    g = FeederGrid.from_spec(GridSpec(feeder="ieee13", load_scale=0.5), [], Path("."))
    half = g.solve(0.0, {}, 1.0)
    g.apply(SetLoadScale(1.0), 1.0)
    full = g.solve(1.0, {}, 1.0)
    assert full.p_sub_w.sum() > 1.8 * half.p_sub_w.sum() * 0.9
    g.apply(SetLoadScale(0.0, load="671"), 2.0)
    assert g.solve(2.0, {}, 1.0).p_sub_w.sum() < full.p_sub_w.sum() - 1e6
    with pytest.raises(CommandError):
        g.apply(SetLoadScale(-1.0), 3.0)
    with pytest.raises(CommandError, match="unknown load"):
        g.apply(SetLoadScale(1.0, load="999"), 3.0)


def test_storage_soc_and_limits() -> None:
    spec = GridSpec(
        feeder="openg2g-ieee13",
        storage=[{"name": "b1", "bus": "675", "kw": 500, "kwh": 1000, "soc0": 0.5, "efficiency": 0.9}],
    )
    g = FeederGrid.from_spec(spec, [], Path("."))
    assert g.storages() == ("b1",) and not g.can_batch()
    base = g.solve(0.0, {}, 0.0)
    g.apply(SetStoragePower("b1", 180e3, 0.0), 0.0)
    s = g.solve(3600.0, {}, 3600.0)  # one hour at 180 kW discharge: 200 kWh out of the cells
    assert g._batteries["b1"].soc == pytest.approx(0.5 - 180.0 / 0.9 / 1000.0)
    assert s.p_sub_w.sum() < base.p_sub_w.sum() - 1.7e5
    g.apply(SetStoragePower("b1", -300e3, 0.0), 3600.0)
    g.solve(7200.0, {}, 3600.0)  # one hour charging at 300 kW: 270 kWh into the cells
    assert g._batteries["b1"].soc == pytest.approx(0.3 + 300.0 * 0.9 / 1000.0)
    g.apply(SetStoragePower("b1", -500e3, 0.0), 7200.0)
    for k in range(5):
        g.solve(7200.0 + 3600.0 * (k + 1), {}, 3600.0)
    assert g._batteries["b1"].soc == pytest.approx(0.9) and g._batteries["b1"].p_w == 0.0
    with pytest.raises(CommandError, match="exceeds"):
        g.apply(SetStoragePower("b1", 400e3, 400e3), 0.0)
    with pytest.raises(CommandError, match="unknown battery"):
        g.apply(SetStoragePower("b2", 1.0), 0.0)


def test_pv_profile_and_extra_load(tmp_path: Path) -> None:
    (tmp_path / "sun.csv").write_text("t_s,scale\n0,0\n100,1\n")
    (tmp_path / "ld.csv").write_text("t_s,scale\n0,1\n100,0\n")
    spec = GridSpec(
        feeder="openg2g-ieee13",
        pv=[{"name": "pv1", "bus": "675", "kw": 900, "profile": "sun.csv"}],
        extra_loads=[{"name": "x1", "bus": "680", "kw_per_phase": 200, "profile": "ld.csv"}],
    )
    g = FeederGrid.from_spec(spec, [], tmp_path)
    dark = g.solve(0.0, {}, 1.0)
    noon = g.solve(100.0, {}, 1.0)
    assert noon.voltage("675.a") > dark.voltage("675.a") + 0.005
    assert noon.p_sub_w.sum() < dark.p_sub_w.sum() - 1.4e6
    g.apply(SetPVScale(0.0), 101.0)
    assert g.solve(101.0, {}, 1.0).voltage("675.a") < noon.voltage("675.a")
    with pytest.raises(CommandError):
        g.apply(SetPVScale(1.5), 101.0)
    with pytest.raises(ScenarioError, match="profile"):
        FeederGrid.from_spec(spec, [], tmp_path / "missing")


def test_auto_regulator_waits_for_delay_then_moves_every_tapdelay() -> None:
    """OpenDSS's time mode: low from t = 10 s, the first move falls due at 10 + 30 s and shows in
    that step's state; later moves follow every tapdelay (2 s), one per 10 s step here."""
    spec = GridSpec(
        feeder="openg2g-ieee13", regulators={"reg1": RegulatorSpec(taps=[0, 0, 0], mode="auto", delay_s=30.0)}
    )
    g = FeederGrid.from_spec(spec, [site()], Path("."))
    assert not g.can_batch()
    taps = [g.solve(10.0 * i, {"dc": dc(1e6)}, 10.0).taps["reg1"] for i in range(1, 8)]
    assert taps[:3] == [(0, 0, 0)] * 3  # taps in force at t = 10, 20, 30 s
    assert taps[3:] == [(1, 1, 1), (2, 2, 2), (3, 3, 3), (4, 4, 4)]  # t = 40, 50, 60, 70 s
    g.apply(SetRegulatorMode("reg1", "fixed"), 80.0)
    frozen = g.solve(80.0, {"dc": dc(1e6)}, 10.0).taps["reg1"]
    assert g.solve(200.0, {"dc": dc(1e6)}, 120.0).taps["reg1"] == frozen


def test_feeder_regcontrol_delay_is_the_default_and_the_scenario_overrides_it() -> None:
    """The RegControl delay of the feeder file times the moves unless the scenario sets delay_s."""
    base = load_feeder("openg2g-ieee13")
    slow = [dataclasses.replace(rc, delay_s=30.0) for rc in base.model.regcontrols]
    feeder = dataclasses.replace(base, model=dataclasses.replace(base.model, regcontrols=slow), _net=None)

    def first_move_s(spec: RegulatorSpec) -> float:
        g = FeederGrid(feeder, GridSpec(feeder="openg2g-ieee13", regulators={"reg1": spec}), [site()], Path("."))
        for i in range(1, 8):
            if g.solve(10.0 * i, {"dc": dc(1e6)}, 10.0).taps["reg1"] != (0, 0, 0):
                return 10.0 * i
        raise AssertionError("no tap move in 70 s")

    # low from the first solve (t = 10 s): the move falls due at 10 s + delay
    assert first_move_s(RegulatorSpec(taps=[0, 0, 0], mode="auto")) == 40.0
    assert first_move_s(RegulatorSpec(taps=[0, 0, 0], mode="auto", delay_s=10.0)) == 20.0


def test_storage_power_is_in_watts_and_the_old_names_are_refused() -> None:
    with pytest.raises(CommandError, match=r"SetStoragePower: field 'p_kw' was renamed to p_w, in W"):
        SetStoragePower(name="b1", p_kw=100.0)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match=r"set_storage_power: field 'q_kvar' was renamed to q_var"):
        EventSpec.model_validate({"t_s": 1, "command": "set_storage_power", "name": "b1", "p_w": 0, "q_kvar": 5})
    spec = GridSpec(feeder="openg2g-ieee13", storage=[{"name": "b1", "bus": "675", "kw": 500, "kwh": 1000}])
    g = FeederGrid.from_spec(spec, [], Path("."))
    idle = g.solve(0.0, {}, 0.0).p_sub_w.sum()
    g.apply(SetStoragePower(name="b1", p_w=500e3), 0.0)  # the full rating, discharging
    assert idle - g.solve(1.0, {}, 1.0).p_sub_w.sum() == pytest.approx(500e3, rel=0.05)  # less losses
    with pytest.raises(CommandError, match=r"\|500001.0 W \+ j0.0 var\| exceeds the 500000 W rating"):
        g.apply(SetStoragePower(name="b1", p_w=500001.0), 1.0)


def test_load_for_an_unknown_site_names_it_and_the_sites() -> None:
    g = og13(on_nonconvergence="flag")  # a wrong name is not a power flow failure, even in flag mode
    with pytest.raises(UnknownNameError, match=r"load for unknown site 'dc2' \(sites: dc\)"):
        g.solve(0.0, {"dc2": dc(1e6, name="dc2")}, 1.0)


def test_nonconvergence() -> None:
    g = og13()
    with pytest.raises(PowerFlowError, match=r"t=5.0 s.*openg2g-ieee13.*dc@671"):
        g.solve(5.0, {"dc": dc(3e8)}, 1.0)
    flag = og13(on_nonconvergence="flag")
    bad = flag.solve(5.0, {"dc": dc(3e8)}, 1.0)
    assert bad.converged is False and np.isnan(bad.v_pu).all()
    assert flag.solve(6.0, {"dc": dc(1e6)}, 1.0).converged is True


def test_bad_spec_raises_scenario_error() -> None:
    with pytest.raises(ScenarioError, match="datacenters.0.bus"):
        FeederGrid.from_spec(GridSpec(feeder="ieee13"), [site(bus="611")], Path("."))


TWO_BUS = """\
New Circuit.two basekv=12.47 pu=1.0 bus1=src r1=0 x1=1e-6 r0=0 x0=1e-6
New Line.l1 Bus1=src Bus2=b2 phases=3 r1=0.8 x1=1.6 r0=0.8 x0=1.6 c1=0 c0=0 length=1
New Load.ld Bus1=b2 phases=3 conn=wye kV=12.47 kW=3000 kvar=1000 model=2
Set VoltageBases=[12.47]
"""


def test_analytic_two_bus_voltage_drop(tmp_path: Path) -> None:
    """Constant-impedance load behind a decoupled line: V = E Zload / (Zload + Zline)."""
    (tmp_path / "two.dss").write_text(TWO_BUS)
    g = FeederGrid.from_spec(GridSpec(feeder="two.dss"), [], tmp_path)  # relative to base_dir
    s = g.solve(0.0, {}, 1.0)
    v_ph = 12.47e3 / np.sqrt(3)
    z_load = v_ph**2 / np.conj((3e6 + 1j * 1e6) / 3)  # per phase, from S = |V|^2 / conj(Z)
    expect = abs(z_load / (z_load + (0.8 + 1.6j)))
    assert s.voltage("b2.a") == pytest.approx(expect, abs=1e-6)
    p_load = 3 * (expect * v_ph) ** 2 * np.real(1 / np.conj(z_load))
    assert s.p_sub_w.sum() - s.losses_w == pytest.approx(p_load, rel=1e-6)


def test_tap_change_in_place_equals_fresh_build() -> None:
    """SetTaps updates the compiled network in place (low-rank update); the result equals a
    backend built with those taps from the start."""
    taps = {"reg1": (3, 3, 3), "reg2": (-2,), "reg3": (4, 1), "reg4": (8, 1, 5)}
    g = FeederGrid.from_spec(GridSpec(feeder="ieee123"), [site(bus="67")], Path("."))
    g.solve(0.0, {"dc": dc(5e5)}, 1.0)
    for bank, t in taps.items():
        g.apply(SetTaps(bank, t), 1.0)
    moved = g.solve(1.0, {"dc": dc(5e5)}, 1.0)
    spec = GridSpec(feeder="ieee123", regulators={b: RegulatorSpec(taps=list(t)) for b, t in taps.items()})
    fresh = FeederGrid.from_spec(spec, [site(bus="67")], Path(".")).solve(1.0, {"dc": dc(5e5)}, 1.0)
    assert moved.taps == fresh.taps
    np.testing.assert_allclose(moved.v_pu, fresh.v_pu, atol=1e-6)  # 610 (floating delta) is the loosest


def test_sensitivity_at_a_bus_without_a_site() -> None:
    g = og13()
    g.solve(0.0, {"dc": dc(1e6)}, 1.0)
    sens = g.voltage_sensitivity("675")
    i = [g.bus_phases().index(f"675.{p}") for p in "abc"]
    assert sens.shape == (len(g.bus_phases()), 3) and np.all(np.diag(sens[i]) < 0)
    with pytest.raises(KeyError):
        g.voltage_sensitivity("611")


def test_tap_range_override() -> None:
    spec = GridSpec(feeder="openg2g-ieee13", regulators={"reg1": RegulatorSpec(min_tap=2, max_tap=10, taps=[5, 5, 5])})
    g = FeederGrid.from_spec(spec, [site()], Path("."))
    assert (g.regulators()["reg1"].min_tap, g.regulators()["reg1"].max_tap) == (2, 10)
    with pytest.raises(CommandError, match=r"outside \[2, 10\]"):
        g.apply(SetTaps("reg1", (11, 5, 5)), 0.0)
    g.apply(SetTaps("reg1", (10, 2, 10)), 0.0)
    auto = GridSpec(
        feeder="openg2g-ieee13", regulators={"reg1": RegulatorSpec(mode="auto", delay_s=0.0, max_tap=3, taps=[0, 0, 0])}
    )
    g = FeederGrid.from_spec(auto, [site()], Path("."))
    for i in range(20):
        taps = g.solve(float(i), {"dc": dc(1e6)}, 1.0).taps["reg1"]
    assert max(taps) == 3


def test_ganged_bank_takes_one_tap() -> None:
    """IEEE 123's reg1 is one three-phase transformer (one tap); IEEE 13's reg1 is three
    single-phase units (a tap each)."""
    g = FeederGrid.from_spec(GridSpec(feeder="ieee123"), [], Path("."))
    with pytest.raises(CommandError, match=r"set_taps reg1: taps \[1, 2, 3\] differ per phase.*ganged"):
        g.apply(SetTaps("reg1", (1, 2, 3)), 0.0)
    g.apply(SetTaps("reg1", (2, 2, 2)), 0.0)
    assert g.solve(0.0, {}, 1.0).taps["reg1"] == (2, 2, 2)
    with pytest.raises(ScenarioError, match=r"grid.regulators.reg1.taps: taps \[1, 2, 3\] differ per phase"):
        FeederGrid.from_spec(
            GridSpec(feeder="ieee123", regulators={"reg1": RegulatorSpec(taps=[1, 2, 3])}), [], Path(".")
        )
    og = og13()
    og.apply(SetTaps("reg1", (1, 2, 3)), 0.0)
    assert og.solve(0.0, {"dc": dc(1e6)}, 1.0).taps["reg1"] == (1, 2, 3)


def test_monitored_min_kv_leaves_out_lower_voltage_levels() -> None:
    """IEEE 13's only 480 V bus (634, behind XFM1) is monitored at every level and not at 4.16 kV
    and up; every 4.16 kV bus-phase stays."""
    every = FeederGrid.from_spec(GridSpec(feeder="ieee13", monitored_levels="all"), [], Path(".")).bus_phases()
    primary = FeederGrid.from_spec(GridSpec(feeder="ieee13", monitored_min_kv=4.16), [], Path(".")).bus_phases()
    assert {bp.split(".")[0] for bp in set(every) - set(primary)} == {"634"}
    assert primary == tuple(bp for bp in every if not bp.startswith("634."))
