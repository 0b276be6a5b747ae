"""``openg2g feeders``: list the bundled feeders, rebuild them from the OpenDSS sources, or check an
OpenDSS file against OpenDSS itself."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from openg2g.core.errors import G2GError

if TYPE_CHECKING:
    from openg2g.grid.feeder.crosscheck import Controls

__all__ = ["register"]


def _check(path: str, dc: list[str], controls: Controls) -> None:
    """Print openg2g's solution of ``path`` beside OpenDSS's, as given and with each ``--dc`` load,
    at the state ``controls`` names."""
    from openg2g.cli.powerflow import parse_dc
    from openg2g.grid.feeder.crosscheck import crosscheck

    loads = [parse_dc(text) for text in dc]
    state = (
        "OpenDSS's default solve (controlmode=static): the controls settled by each"
        if controls == "static"
        else "the file's taps, capacitor and switch states (controlmode=off)"
    )
    print(f"{path}: openg2g against OpenDSS at {state}; every node, |V_openg2g - V_OpenDSS| in pu of its bus base")
    for bus, mw, pf in [(None, 0.0, 0.95), *loads]:
        check = crosscheck(path, bus, mw, pf, controls=controls)
        load = f"datacenter {mw:g} MW at {bus} (pf {pf:g})" if bus is not None else "as the file gives it"
        print(f"  {load}: {check.nodes} nodes, max |dV| {check.max_dv_pu:.2e} pu at {check.worst}")
        if controls == "static":
            taps = ", ".join(f"{b}={list(t)}" for b, t in check.taps.items()) or "no regulators"
            agree = "; ".join(check.differences) or "the same taps, capacitor and switch states"
            print(
                f"    settled in {check.iterations} control iteration(s) (OpenDSS: {check.opendss_iterations}); "
                f"taps {taps}; {agree}"
            )


def _run(args: argparse.Namespace) -> int:
    from openg2g.grid.feeder.build import build_feeders
    from openg2g.grid.feeder.library import list_feeders, load_feeder

    try:
        if args.action == "build":
            if args.source is None:
                raise G2GError("feeders build needs --source DIR (the source data folder, shared/data)")
            for path in build_feeders(Path(args.source)):
                print(path)
            return 0
        if args.action == "check":
            if args.file is None:
                raise G2GError("feeders check needs an OpenDSS file: openg2g feeders check FILE [--dc BUS=MW]")
            _check(args.file, args.dc, args.controls)
            return 0
        for name in list_feeders():
            f = load_feeder(name)
            print(
                f"{name:16s} buses={len(f.bus_phases):5d} lines={len(f.lines):5d} "
                f"regulators={','.join(f.regulators) or '-'} capacitors={','.join(f.capacitors) or '-'}"
            )
        return 0
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except G2GError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``feeders list`` / ``feeders build --source DIR`` / ``feeders check FILE [--dc BUS=MW]
    [--controls static|off]``."""
    p = subparsers.add_parser("feeders")
    p.add_argument("action", choices=["list", "build", "check"], nargs="?", default="list")
    p.add_argument("file", nargs="?", help="check: the OpenDSS file")
    p.add_argument("--source", help="build: the source data folder (shared/data)")
    p.add_argument(
        "--dc",
        action="append",
        default=[],
        metavar="BUS=MW[@PF]",
        help="check: also with a datacenter of MW at three-phase BUS (repeatable)",
    )
    p.add_argument(
        "--controls",
        choices=["static", "off"],
        default="static",
        help="check: compare at the state OpenDSS's default solve reaches, the controls settled (static, default), "
        "or at the file's taps, capacitor and switch states (off)",
    )
    p.set_defaults(func=_run)
