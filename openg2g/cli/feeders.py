"""``openg2g feeders``: list the bundled feeders, or rebuild them from the OpenDSS sources."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from openg2g.core.errors import G2GError

__all__ = ["register"]


def _run(args: argparse.Namespace) -> int:
    from openg2g.grid.feeder.build import build_feeders
    from openg2g.grid.feeder.library import list_feeders, load_feeder

    try:
        if args.action == "build":
            if args.source is None:
                raise G2GError("feeders build needs --source DIR (the OpenDSS sources, e.g. the IEEE feeders folder)")
            for path in build_feeders(Path(args.source)):
                print(path)
            return 0
        for name in list_feeders():
            f = load_feeder(name)
            print(
                f"{name:16s} buses={len(f.bus_phases):4d} lines={len(f.lines):4d} "
                f"regulators={','.join(f.regulators) or '-'} capacitors={','.join(f.capacitors) or '-'}"
            )
        return 0
    except G2GError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``feeders list`` / ``feeders build --source DIR``."""
    p = subparsers.add_parser("feeders", help="list bundled feeders or rebuild them from OpenDSS sources")
    p.add_argument("action", choices=["list", "build"], nargs="?", default="list")
    p.add_argument(
        "--source",
        help="folder with the OpenDSS feeder sources (required for build)",
    )
    p.set_defaults(func=_run)
