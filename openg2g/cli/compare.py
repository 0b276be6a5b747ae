"""``openg2g compare DIR DIR...``: side-by-side summary table of finished runs.

Each run is labelled by its scenario name, or by its folder when several runs share a scenario
name; ``--json`` prints one object keyed by those labels.
"""

from __future__ import annotations

import argparse

from openg2g.cli.table import format_table
from openg2g.core.jsontext import json_text

__all__ = ["register"]


def _compare(args: argparse.Namespace) -> int:
    from openg2g.plot.compare import read_summaries  # pandas and matplotlib only when comparing

    rows = read_summaries(args.dirs)
    if args.json:
        print(json_text(dict(rows), "compare --json"))
    else:
        print(format_table(rows, markdown=args.markdown))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``compare`` sub-command."""
    p = subparsers.add_parser("compare", help="compare run summaries side by side", description=__doc__)
    p.add_argument("dirs", nargs="+", help="run output directories")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--markdown", action="store_true", help="Markdown table")
    fmt.add_argument("--json", action="store_true", help="JSON object keyed by run")
    p.set_defaults(func=_compare)
