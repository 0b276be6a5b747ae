"""``openg2g validate SCENARIO...``: check scenario files without running them (exit 2 on problems)."""

from __future__ import annotations

import argparse
import sys

from openg2g.core.errors import ScenarioError
from openg2g.scenario.loader import load_scenario

__all__ = ["register"]


def _validate(args: argparse.Namespace) -> int:
    failed = 0
    for name in args.scenarios:
        try:
            loaded = load_scenario(name, args.set)
        except ScenarioError as exc:
            failed += 1
            for loc, msg in exc.problems:
                print(f"{loc}: {msg}", file=sys.stderr)
            continue
        print(f"{loaded.path}: ok ({loaded.scenario.name}, sha256 {loaded.sha256[:12]})")
    return 2 if failed else 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``validate`` sub-command."""
    p = subparsers.add_parser("validate", help="validate scenario files", description=__doc__)
    p.add_argument("scenarios", nargs="+", help="scenario files or bundled scenario names")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override before validating")
    p.set_defaults(func=_validate)
