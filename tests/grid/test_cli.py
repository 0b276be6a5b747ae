"""``openg2g powerflow`` and ``openg2g feeders`` through the top-level CLI."""

from __future__ import annotations

import argparse
import json

import pytest

from openg2g.cli import feeders as feeders_cli
from openg2g.cli import powerflow as powerflow_cli


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    powerflow_cli.register(sub)
    feeders_cli.register(sub)
    args = parser.parse_args(argv)
    return args.func(args)


def test_powerflow_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["powerflow", "ieee13", "--taps", "reg1=10,8,11", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["671.a"] == pytest.approx(0.9900, abs=0.002)
    assert out["671.b"] == pytest.approx(1.0529, abs=0.002)
    assert all(k.rsplit(".", 1)[1] in "abc" for k in out)


def test_powerflow_dc_lowers_voltage(capsys: pytest.CaptureFixture[str]) -> None:
    run(["powerflow", "openg2g-ieee13", "--taps", "reg1=14,6,15", "--json"])
    base = json.loads(capsys.readouterr().out)
    run(["powerflow", "openg2g-ieee13", "--taps", "reg1=14,6,15", "--dc", "671=3@0.95", "--json"])
    loaded = json.loads(capsys.readouterr().out)
    assert all(loaded[f"671.{p}"] < base[f"671.{p}"] - 0.01 for p in "abc")


def test_powerflow_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["powerflow", "ieee13"]) == 0
    out = capsys.readouterr().out
    assert "671" in out and "substation P" in out


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
    assert "671.a" in json.loads(capsys.readouterr().out)
    assert main(["powerflow", "ieee13", "--dc", "999=1"]) == 2
    assert "unknown bus" in capsys.readouterr().err
