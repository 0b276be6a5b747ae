"""``openg2g compare DIR DIR...``: side-by-side summary table of finished runs."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from openg2g.cli.table import format_table
from openg2g.core.errors import G2GError

__all__ = ["read_summary", "register"]


def read_summary(run_dir: Path) -> dict:
    """The ``summary.json`` of a run directory."""
    path = Path(run_dir) / "summary.json"
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise G2GError(f"{run_dir}: no summary.json (is this a run output directory?)") from None
    except json.JSONDecodeError as exc:
        raise G2GError(f"{path}: not valid JSON ({exc})") from None


def _compare(args: argparse.Namespace) -> int:
    rows = []
    for run_dir in args.dirs:
        summary = read_summary(Path(run_dir))
        label = summary.get("scenario", Path(run_dir).name)
        if summary.get("status") != "complete":
            label += f" [{summary.get('status')}]"
        rows.append((label, summary))
    if args.json:
        print(json.dumps({label: s for label, s in rows}, indent=2))
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
