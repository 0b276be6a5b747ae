"""``openg2g run SCENARIO``: run a scenario file, write outputs, print the summary table."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from openg2g.cli.table import format_table
from openg2g.engine.simulation import run_scenario
from openg2g.scenario.loader import load_scenario

__all__ = ["register"]


def _stop_on_sigterm(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # `kill` ends the run like Ctrl-C: outputs flushed, summary says interrupted


def _run(args: argparse.Namespace) -> int:
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    loaded = load_scenario(args.scenario, args.set)
    out_dir = Path(args.out) if args.out else Path("runs") / loaded.scenario.name
    try:
        result = run_scenario(loaded, out_dir, progress=not args.no_progress)
    except KeyboardInterrupt:
        print(f"interrupted; partial outputs kept in {out_dir}", file=sys.stderr)
        return 130
    print(format_table([(loaded.scenario.name, result.summary)]))
    print(f"\noutputs: {out_dir}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``run`` sub-command."""
    p = subparsers.add_parser("run", help="run a scenario file", description=__doc__)
    p.add_argument("scenario", help="scenario YAML file, or the name of a bundled scenario (e.g. ieee13_ofo)")
    p.add_argument("--out", help="output directory (default runs/<scenario name>)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a scenario field, e.g. --set duration_s=600 --set datacenters.0.bus=675 (repeatable)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=_run)
