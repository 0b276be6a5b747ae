"""Generators that hold their voltage (OpenDSS generator model 3): a closed form on a two-bus
feeder (inside the kvar limits and held at one), voltage sensitivities against finite
differences, and OpenDSS's own solution of small circuits with the generator free, at its
``maxkvar``, at its ``minkvar``, in delta and on one phase (IEEE 30 is in
``test_opendss_collection.py``)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from openg2g.core.commands import SetLineInService
from openg2g.core.errors import FeederError
from openg2g.core.state import DatacenterState
from openg2g.grid.config import GridSpec
from openg2g.grid.feeder.backend import SPARSE_MIN_NODES, FeederGrid
from openg2g.grid.feeder.crosscheck import ConstantPowerSite, crosscheck
from openg2g.grid.feeder.library import feeder_from_model
from openg2g.grid.feeder.model import FeederModel, LineModel, RegulatedGeneratorModel, SourceModel
from openg2g.grid.feeder.opendss import read_opendss

KV = 12.47
E_V = KV * 1000.0 / math.sqrt(3.0)
X_OHM = 2.0 + 0.1  # the line's reactance and the source's, per phase
P_W = 1e6  # per phase


def _two_bus(v_pu: float, kvar_max: float, loaded_bus: bool = False) -> FeederModel:
    """A stiff-but-not-ideal source (0.1 ohm reactance, no coupling between phases) and a 2 ohm
    reactance per phase to bus ``g``, where a generator delivers 1 MW per phase holding ``v_pu``;
    with ``loaded_bus``, a bus ``ld`` behind a further line for a site."""
    diag = [[X_OHM - 0.1 if i == j else 0.0 for j in range(3)] for i in range(3)]
    zero = [[0.0] * 3 for _ in range(3)]
    lines = [LineModel("l1", "src", "g", ("a", "b", "c"), ("a", "b", "c"), zero, diag, zero, 1.0)]
    buses = {"src": KV, "g": KV}
    if loaded_bus:
        r = [[0.3 if i == j else 0.0 for j in range(3)] for i in range(3)]
        lines.append(LineModel("l2", "g", "ld", ("a", "b", "c"), ("a", "b", "c"), r, diag, zero, 1.0))
        buses["ld"] = KV
    return FeederModel(
        name="two",
        source=SourceModel(bus="src", base_kv=KV, v_pu=1.0, angle_deg=0.0, z1_ohm=[0.0, 0.1], z0_ohm=[0.0, 0.1]),
        bus_kv=buses,
        bus_phases={b: ("a", "b", "c") for b in buses},
        lines=lines,
        regulated_generators=[
            RegulatedGeneratorModel(
                name="generator.g",
                bus="g",
                phases=("a", "b", "c"),
                conn="wye",
                kv=KV,
                kw=3 * P_W / 1000.0,
                n_phases=3,
                v_pu=v_pu,
                kvar_min=-5000.0,
                kvar_max=kvar_max,
            )
        ],
    )


def _grid(model: FeederModel, sites: tuple[ConstantPowerSite, ...] = ()) -> FeederGrid:
    return FeederGrid(feeder_from_model(model), GridSpec(feeder="two"), list(sites), Path("."))


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_a_generator_inside_its_limits_holds_its_voltage(sparse: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Per phase, E = V - jX I with I = conj((P + jQ) / V): at |V| = Vt the angle is
    sin(d) = X P / (E Vt) and Q = Vt (Vt - E cos(d)) / X."""
    if sparse:
        monkeypatch.setattr("openg2g.grid.feeder.backend.SPARSE_MIN_NODES", 0)
    assert SPARSE_MIN_NODES > 0
    vt = 1.03 * E_V
    delta = math.asin(X_OHM * P_W / (E_V * vt))
    q = vt * (vt - E_V * math.cos(delta)) / X_OHM
    grid = _grid(_two_bus(1.03, kvar_max=5000.0))
    solution = grid.node_solution(0.0, {})
    v_g = solution.v_v[[solution.nodes.index[("g", p)] for p in "abc"]]
    np.testing.assert_allclose(np.abs(v_g), vt, rtol=1e-9)
    np.testing.assert_allclose(np.angle(v_g[0]), delta, atol=1e-9)
    assert grid._regulated is not None
    assert grid._regulated.q_var[0] == pytest.approx(q, rel=1e-6)  # dQ/dV is 3.5 kvar/V here
    assert not grid._regulated.held[0]


def test_a_generator_at_its_kvar_limit_lets_the_voltage_go() -> None:
    """With Q held at a maxkvar below what 1.03 pu needs, |V| solves
    (V^2 - X Q)^2 + (X P)^2 = E^2 V^2 (its larger root), below the target."""
    grid = _grid(_two_bus(1.03, kvar_max=1500.0))
    q = 1500e3 / 3
    coeffs = [1.0, 0.0, -(2 * X_OHM * q + E_V**2), 0.0, (X_OHM * q) ** 2 + (X_OHM * P_W) ** 2]
    v_expected = max(r.real for r in np.roots(coeffs) if abs(r.imag) < 1e-9 and r.real > 0)
    solution = grid.node_solution(0.0, {})
    v_g = solution.v_v[[solution.nodes.index[("g", p)] for p in "abc"]]
    np.testing.assert_allclose(np.abs(v_g), v_expected, rtol=1e-9)
    assert v_expected < 1.03 * E_V
    assert grid._regulated is not None
    assert grid._regulated.q_var[0] == q and grid._regulated.held[0]


def test_a_generator_cut_off_from_the_source_holds_nothing() -> None:
    """Its line opened, the generator's bus is de-energized: the power flow solves (it is not
    iterated on), the bus reads 0 V, and closing the line brings back its voltage at target."""
    grid = _grid(_two_bus(1.03, kvar_max=5000.0))
    grid.apply(SetLineInService(line="l1", in_service=False), 0.0)
    state = grid.solve(0.0, {}, 1.0)
    assert state.converged and np.all(state.v_pu[[grid.bus_phases().index(f"g.{p}") for p in "abc"]] == 0.0)
    assert grid._regulated is not None and grid._regulated.held[0]
    grid.apply(SetLineInService(line="l1", in_service=True), 1.0)
    state = grid.solve(1.0, {}, 1.0)
    np.testing.assert_allclose(state.v_pu[[grid.bus_phases().index(f"g.{p}") for p in "abc"]], 1.03, rtol=1e-9)
    assert not grid._regulated.held[0]


@pytest.mark.slow
@pytest.mark.parametrize("kvar_max", [5000.0, 1500.0], ids=["free", "held"])
def test_voltage_sensitivity_with_a_regulating_generator_is_the_finite_difference(kvar_max: float) -> None:
    """A site beyond the generator's bus: dV/dP from the linearization, the generator's reactive
    power responding while it is free and held at its limit, equals central differences of solves
    (the generator at ``g`` then keeps its bus's mean voltage, so dV/dP there is ~0)."""
    site = ConstantPowerSite("dc", "ld", 0.95)
    grid = _grid(_two_bus(1.03, kvar_max, loaded_bus=True), (site,))
    base = np.array([4e5, 5e5, 3e5])

    def solve(p: np.ndarray) -> np.ndarray:
        q = p * math.tan(math.acos(0.95))
        return grid.solve(0.0, {"dc": DatacenterState("dc", 0.0, p, q, {})}, 1.0).v_pu

    solve(base)
    sens = grid.voltage_sensitivity("dc").copy()
    free = kvar_max == 5000.0
    assert grid._regulated is not None and grid._regulated.held[0] != free
    dp = 1e4
    g_rows = [grid.bus_phases().index(f"g.{p}") for p in "abc"]
    for k in range(3):
        hi, lo = base.copy(), base.copy()
        hi[k] += dp
        lo[k] -= dp
        fd = (solve(hi) - solve(lo)) / (2 * dp)
        np.testing.assert_allclose(sens[:, k], fd, atol=1e-3 * np.abs(fd).max())
        if free:
            assert abs(sens[g_rows, k].mean()) < 1e-6 * np.abs(fd).max()


CIRCUIT = """\
Clear
New Circuit.pv basekv=12.47 pu=1.0 bus1=src MVAsc3=200 MVAsc1=180
New Line.l1 bus1=src bus2=g phases=3 r1=0.5 x1=1.2 r0=1.5 x0=3.6 c1=0 c0=0 length=3 units=km
New Line.l2 bus1=g bus2=ld phases=3 r1=0.5 x1=1.2 r0=1.5 x0=3.6 c1=0 c0=0 length=2 units=km
New Load.l bus1=ld phases=3 kV=12.47 kW=3000 kvar=1500 model=1
New Load.ub bus1=ld.1 phases=1 kV=7.2 kW=400 kvar=100 model=1
{generator}
Set VoltageBases=[12.47]
CalcVoltageBases
Solve
"""

GENERATORS = {
    "free": ("bus1=g phases=3 kV=12.47 kW=1500 Vpu=1.0 maxkvar=5000 minkvar=-5000", None),
    "at_maxkvar": ("bus1=g phases=3 kV=12.47 kW=1500 Vpu=1.02 maxkvar=1000 minkvar=-5000", 1000.0),
    "at_minkvar": ("bus1=g phases=3 kV=12.47 kW=1500 Vpu=0.9 maxkvar=5000 minkvar=-500", -500.0),
    "delta": ("bus1=g phases=3 kV=12.47 kW=1500 Vpu=1.0 maxkvar=5000 minkvar=-5000 conn=delta", None),
    "one_phase": ("bus1=g.2 phases=1 kV=7.2 kW=300 Vpu=1.0 maxkvar=3000 minkvar=-3000", None),
}
"""The generator of each case (model 3) and the kvar limit OpenDSS holds it at (None: free)."""


def _opendss_kvar(path: Path) -> float:
    """The reactive power OpenDSS's snapshot gives generator g1 (kvar), solved to 1e-10."""
    from openg2g.grid.feeder.opendss import engine

    with engine(path) as ctx:
        ctx.Text.Command = "set tolerance=1e-10 maxiterations=1000"
        ctx.ActiveCircuit.Solution.Solve()
        ctx.ActiveCircuit.Generators.Name = "g1"
        return float(ctx.ActiveCircuit.Generators.kvar)


@pytest.mark.parametrize(
    "case", [pytest.param(c, marks=[] if c == "at_maxkvar" else [pytest.mark.slow]) for c in GENERATORS]
)
def test_every_node_matches_opendss_with_a_model_3_generator(case: str, tmp_path: Path) -> None:
    generator, limit = GENERATORS[case]
    path = tmp_path / f"{case}.dss"
    path.write_text(CIRCUIT.format(generator=f"New Generator.g1 {generator} model=3"))
    model = read_opendss(path)
    assert [g.name for g in model.regulated_generators] == ["generator.g1"] and not model.generators
    check = crosscheck(path, feeder=feeder_from_model(model))
    assert check.max_dv_pu < 1e-8, check
    kvar = _opendss_kvar(path)
    if limit is not None:  # OpenDSS holds it at the limit too, and so does openg2g
        assert kvar == pytest.approx(limit, rel=1e-12)
        grid = FeederGrid(feeder_from_model(model), GridSpec(feeder=str(path)), [], tmp_path)
        grid.node_solution(0.0, {})
        assert grid._regulated is not None and grid._regulated.held[0]
        assert grid._regulated.q_var[0] * model.regulated_generators[0].n_phases / 1000.0 == limit


@pytest.mark.slow
def test_a_model_3_generator_with_limits_that_exclude_each_other_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bad.dss"
    path.write_text(CIRCUIT.format(generator="New Generator.g1 bus1=g kV=12.47 kW=100 model=3 maxkvar=-10 minkvar=10"))
    with pytest.raises(FeederError, match=r"bad\.dss: .*generator\.g1: Minkvar=10 \(must be at most Maxkvar=-10\)"):
        read_opendss(path)
