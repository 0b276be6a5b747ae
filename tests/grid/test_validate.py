"""validate_grid: every problem as (field path, message), never raising."""

from __future__ import annotations

from openg2g.grid import validate_grid
from openg2g.scenario.schema import GridSpec, ModelSpec, RegulatorSpec, SiteSpec


def site(bus: str) -> SiteSpec:
    return SiteSpec(name="s", bus=bus, models=[ModelSpec(model="m", gpus_per_replica=1, replicas=1, batch_size=1)])


def test_valid() -> None:
    spec = GridSpec(feeder="ieee13", regulators={"reg1": RegulatorSpec(taps=[10, 8, 11])}, capacitors={"cap1": False})
    assert validate_grid(spec, [site("671")]) == []


def test_unknown_feeder_lists_valid_names() -> None:
    [(path, msg)] = validate_grid(GridSpec(feeder="ieee14"), [])
    assert path == "grid.feeder" and "ieee13" in msg and "openg2g-ieee123" in msg


def test_site_bus_problems() -> None:
    probs = dict(validate_grid(GridSpec(feeder="ieee13"), [site("671"), site("999"), site("611")]))
    assert "datacenters.1.bus" in probs and "unknown bus '999'" in probs["datacenters.1.bus"]
    assert "671" in probs["datacenters.1.bus"]  # lists valid three-phase buses
    assert "datacenters.2.bus" in probs and "three-phase" in probs["datacenters.2.bus"]
    assert "datacenters.0.bus" not in probs


def test_element_buses() -> None:
    spec = GridSpec(
        feeder="ieee13",
        pv=[{"name": "p", "bus": "nope", "kw": 10}, {"name": "q", "bus": "611", "kw": 10, "phases": ["a"]}],
        storage=[{"name": "b", "bus": "nope", "kw": 10, "kwh": 10}],
        extra_loads=[{"name": "x", "bus": "nope", "kw_per_phase": 1}],
        monitored_buses=["671", "nope"],
    )
    probs = dict(validate_grid(spec, []))
    assert set(probs) == {
        "grid.pv.0.bus",
        "grid.pv.1.bus",
        "grid.storage.0.bus",
        "grid.extra_loads.0.bus",
        "grid.monitored_buses.1",
    }
    assert "missing a" in probs["grid.pv.1.bus"]


def test_regulator_and_capacitor_problems() -> None:
    spec = GridSpec(
        feeder="ieee13",
        regulators={"reg9": RegulatorSpec(), "reg1": RegulatorSpec(taps=[10, 8, 17, 1])},
        capacitors={"cap9": True},
    )
    probs = validate_grid(spec, [])
    paths = [p for p, _ in probs]
    assert "grid.regulators.reg9" in paths and "grid.capacitors.cap9" in paths
    msgs = [m for p, m in probs if p == "grid.regulators.reg1.taps"]
    assert any("4 taps given" in m for m in msgs) and any("out of range [-16, 16]" in m for m in msgs)
    assert any("banks are reg1" in m for p, m in probs if p == "grid.regulators.reg9")
    assert any("cap1" in m for p, m in probs if p == "grid.capacitors.cap9")


def test_single_phase_bank_tap_count() -> None:
    spec = GridSpec(
        feeder="ieee123", regulators={"reg2": RegulatorSpec(taps=[1, 2, 3]), "reg3": RegulatorSpec(taps=[1, 2])}
    )
    probs = validate_grid(spec, [])
    assert [p for p, _ in probs] == ["grid.regulators.reg2.taps"]


def test_tap_range_override_problems() -> None:
    # a scenario may state a regulator's own range, wider or narrower than the 32-step default
    spec = GridSpec(feeder="ieee13", regulators={"reg1": RegulatorSpec(min_tap=-20, max_tap=4, taps=[5, 0, 0])})
    probs = dict(validate_grid(spec, []))
    assert list(probs) == ["grid.regulators.reg1.taps"]
    assert "out of range [-20, 4]" in probs["grid.regulators.reg1.taps"]
    wide = GridSpec(feeder="ieee13", regulators={"reg1": RegulatorSpec(max_tap=17, taps=[16, 6, 17])})
    assert validate_grid(wide, []) == []
