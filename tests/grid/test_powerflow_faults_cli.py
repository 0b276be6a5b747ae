"""``openg2g powerflow FEEDER --fault "bus1=... phases=... r=..."``: the faulted voltages, as a
table and as JSON, equal to FeederGrid's own solution through the same faults; a bad spec is
refused naming the property."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from openg2g.cli.main import main
from openg2g.core.commands import ApplyFault
from openg2g.grid.config import GridSpec
from openg2g.grid.feeder.backend import FeederGrid


def test_json_gives_the_grids_faulted_voltages(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "powerflow",
        "ieee13",
        "--controls",
        "off",
        "--fault",
        "bus1=671.1 phases=1 r=0.01",
        "--fault",
        "bus1=675.2 bus2=675.3",
        "--json",
    ]
    assert main(argv) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["controls"] == "off"
    out = printed["v_pu"]
    grid = FeederGrid.from_spec(GridSpec(feeder="ieee13"), [], Path("."))
    grid.apply(ApplyFault(name="a", bus1="671.1", r_ohm=0.01), 0.0)
    grid.apply(ApplyFault(name="b", bus1="675.2", bus2="675.3"), 0.0)
    state = grid.solve(0.0, {}, 0.0)
    for bp, v in zip(state.bus_phases, state.v_pu):
        assert out[bp] == pytest.approx(float(v), abs=1e-9)
    assert out["671.a"] < 0.05 and out["675.b"] == pytest.approx(out["675.c"], abs=1e-3)


def test_table_names_the_faults(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["powerflow", "ieee13", "--fault", "bus1=671 phases=3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "faults: fault1 bus1=671 phases=3" in lines
    assert lines[0].startswith("feeder ieee13 (exact); controls static")
    row = next(line.split() for line in lines if line.split()[:1] == ["671"])
    assert row[1] == "4.160" and all(float(v) < 1e-3 for v in row[2:])  # its base kV, then phases a, b, c


@pytest.mark.parametrize(
    "spec,needle",
    [
        ("bus1=671.1 phases=x", "error: --fault 'bus1=671.1 phases=x': phases: 'x' is not a whole number 1 to 3"),
        ("bus1=671.1 r=-2", "r: '-2' is not a resistance in ohm"),
        ("bus1=671.1 gmatrix=1", "gmatrix: not a property taken here (properties: bus1, bus2, phases, r)"),
        ("phases=2", "bus1: missing"),
        ("bus1=999.1", "error: --fault 'bus1=999.1': apply_fault 'fault1': bus1: unknown bus '999' on feeder ieee13"),
        ("bus1=671.4", "bus1: bus 671 has no node 4"),
    ],
)
def test_a_bad_fault_is_refused_naming_the_property(spec: str, needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["powerflow", "ieee13", "--fault", spec]) == 2
    captured = capsys.readouterr()
    assert needle in captured.err and captured.out == "" and "Traceback" not in captured.err


def test_a_constant_power_datacenter_at_a_bolted_fault_is_an_error_naming_both(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["powerflow", "ieee13", "--dc", "671=1", "--fault", "bus1=671.1"]) == 2
    err = capsys.readouterr().err
    assert "fault fault1 (bus1=671.1 phases=1 r=0.0001)" in err and "site dc0 (bus 671" in err


def test_the_controls_settle_before_the_fault_and_are_held_through_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["powerflow", "ieee13", "--fault", "bus1=671 phases=3", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    grid = FeederGrid.from_spec(GridSpec(feeder="ieee13"), [], Path("."))
    settled = grid.settle(0.0, {})
    assert printed["taps"] == {bank: list(t) for bank, t in grid.taps().items()}  # the settled taps
    grid.apply(ApplyFault(name="f", bus1="671", phases=3), 0.0)
    solution = grid.node_solution(0.0, {})
    assert settled.iterations == printed["control_iterations"]
    for name, v, base in zip(solution.nodes.names, solution.v_v, solution.nodes.v_base_v):
        assert printed["v_pu"][name] == pytest.approx(abs(v) / base, abs=1e-9)
