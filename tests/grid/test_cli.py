"""``openg2g powerflow`` and ``openg2g feeders`` through the top-level CLI."""

from __future__ import annotations

import argparse
import json

import pytest

from openg2g.cli import feeders as feeders_cli
from openg2g.cli import powerflow as powerflow_cli
from openg2g.grid.feeder.library import load_feeder


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    powerflow_cli.register(sub)
    feeders_cli.register(sub)
    args = parser.parse_args(argv)
    return args.func(args)


def test_powerflow_json(capsys: pytest.CaptureFixture[str]) -> None:
    """The published IEEE 13 taps held by --taps reproduce the published voltages; every node of the
    feeder is in the output, the source side included."""
    assert run(["powerflow", "ieee13", "--taps", "reg1=10,8,11", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["controls"], out["control_iterations"], out["taps"]) == ("static", 1, {"reg1": [10, 8, 11]})
    assert out["v_pu"]["671.a"] == pytest.approx(0.9900, abs=0.002)
    assert out["v_pu"]["671.b"] == pytest.approx(1.0529, abs=0.002)
    feeder = load_feeder("ieee13")
    assert list(out["v_pu"]) == [f"{b}.{n}" for b, nodes in feeder.model.bus_phases.items() for n in nodes]
    assert out["v_pu"]["sourcebus.a"] == pytest.approx(1.0, abs=1e-4)


def test_powerflow_settles_the_regulators_as_opendss_does(capsys: pytest.CaptureFixture[str]) -> None:
    """By default the RegControls of the published IEEE 13 settle as OpenDSS's Solve lets them
    (controlmode=static): taps 9, 6, 9 in 3 control iterations (DSS C-API 0.14.5); --controls off
    holds the file's taps (0, 0, 0)."""
    assert run(["powerflow", "ieee13", "--json"]) == 0
    settled = json.loads(capsys.readouterr().out)
    assert (settled["controls"], settled["control_iterations"]) == ("static", 3)
    assert settled["taps"] == {"reg1": [9, 6, 9]}
    assert settled["capacitors"] == {"cap1": True, "cap2": True} and settled["switches"] == {}
    assert run(["powerflow", "ieee13", "--controls", "off", "--json"]) == 0
    held = json.loads(capsys.readouterr().out)
    assert (held["controls"], held["control_iterations"], held["taps"]) == ("off", None, {"reg1": [0, 0, 0]})
    assert settled["v_pu"]["rg60.a"] == pytest.approx(held["v_pu"]["rg60.a"] * (1 + 9 * 0.00625), abs=2e-3)


def test_powerflow_dc_lowers_voltage(capsys: pytest.CaptureFixture[str]) -> None:
    run(["powerflow", "openg2g-ieee13", "--taps", "reg1=14,6,15", "--json"])
    base = json.loads(capsys.readouterr().out)["v_pu"]
    run(["powerflow", "openg2g-ieee13", "--taps", "reg1=14,6,15", "--dc", "671=3@0.95", "--json"])
    loaded = json.loads(capsys.readouterr().out)["v_pu"]
    assert all(loaded[f"671.{p}"] < base[f"671.{p}"] - 0.01 for p in "abc")


def test_powerflow_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["powerflow", "ieee13"]) == 0
    out = capsys.readouterr().out
    assert "controls static: settled in 3 control iteration(s)" in out and "taps: reg1=[9, 6, 9]" in out
    assert " sourcebus " in out and "671" in out and "substation P" in out
    assert run(["powerflow", "ieee13", "--taps", "reg1=10,8,11", "--controls", "off"]) == 0
    out = capsys.readouterr().out
    assert "controls off: the taps, capacitor and switch states the file leaves" in out
    assert "taps: reg1=[10, 8, 11] (held)" in out


def test_powerflow_gives_each_bus_its_base_kv(capsys: pytest.CaptureFixture[str]) -> None:
    """IEEE 13: the 4.16 kV feeder, the 115 kV source side and the 0.48 kV secondary of XFM1 (634)."""
    assert run(["powerflow", "ieee13"]) == 0
    rows = {line.split()[0]: line.split()[1] for line in capsys.readouterr().out.splitlines() if line.strip()}
    assert rows["bus"] == "kV"
    assert (rows["671"], rows["634"], rows["sourcebus"]) == ("4.160", "0.480", "115.000")
    assert run(["powerflow", "ieee13", "--json"]) == 0
    bus_kv = json.loads(capsys.readouterr().out)["bus_kv"]
    assert (bus_kv["671"], bus_kv["634"], bus_kv["sourcebus"]) == pytest.approx((4.16, 0.48, 115.0))
    assert list(bus_kv) == list(load_feeder("ieee13").model.bus_phases)  # every bus, in the table's order


@pytest.mark.slow
def test_powerflow_gives_a_pandapower_nets_vn_kv(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["powerflow", "create_cigre_network_mv", "--json"]) == 0
    bus_kv = json.loads(capsys.readouterr().out)["bus_kv"]
    assert (bus_kv["Bus 0"], bus_kv["Bus 14"]) == (110.0, 20.0)  # the HV grid side and feeder 2's end


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["powerflow", "ieee13", "--dc", "999=3"], "unknown bus '999'"),
        (["powerflow", "ieee13", "--dc", "611=3"], "three-phase"),
        (["powerflow", "ieee13", "--taps", "reg1=10,8"], "one tap per phase"),
        (["powerflow", "ieee13", "--taps", "reg1=10,8,30"], "out of range"),
        (["powerflow", "ieee13", "--taps", "reg1=a,b,c"], "integer steps"),
        (["powerflow", "ieee14"], "bundled feeders are"),
        pytest.param(
            ["powerflow", "ieee123", "--dc", "300=6"],
            "voltage collapse at t=0.0 s on feeder ieee123",
            marks=pytest.mark.slow,  # the collapse search solves many load levels
        ),
        (["powerflow", "ieee123", "--taps", "reg1=1,2,3"], "differ per phase"),
        (["powerflow", "no_such_feeder.txt"], "no_such_feeder.txt"),
        (["powerflow", "ieee13", "--max-control-iterations", "0"], "--max-control-iterations 0: give at least 1"),
        (["powerflow", "ieee13", "--max-control-iterations", "3"], "have not settled in 3 control iterations"),
    ],
)
def test_powerflow_errors(argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(argv) == 2
    captured = capsys.readouterr()
    assert needle in captured.err and captured.out == "" and "Traceback" not in captured.err


def test_feeders_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["feeders", "list"]) == 0
    assert "openg2g-ieee123" in capsys.readouterr().out


def test_through_openg2g_main(capsys: pytest.CaptureFixture[str]) -> None:
    from openg2g.cli.main import main

    assert main(["powerflow", "openg2g-ieee13", "--dc", "671=3", "--json"]) == 0
    assert "671.a" in json.loads(capsys.readouterr().out)["v_pu"]
    assert main(["powerflow", "ieee13", "--dc", "999=1"]) == 2
    assert "unknown bus" in capsys.readouterr().err
