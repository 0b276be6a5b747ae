"""``openg2g compare DIR DIR...``: side-by-side summary table of finished runs.

Each run is labelled by its scenario name, or by its folder when several runs share a scenario
name; ``--json`` prints one object keyed by those labels.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from openg2g.cli.table import format_table
from openg2g.core.errors import G2GError

__all__ = ["labelled_summaries", "read_summary", "register"]


def read_summary(run_dir: Path) -> dict[str, Any]:
    """The ``summary.json`` of a run directory, as a mapping.

    :raises G2GError: no such file, unreadable, not UTF-8 JSON, or not a JSON object.
    """
    path = Path(run_dir) / "summary.json"
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        raise G2GError(f"{run_dir}: no summary.json (is this a run output directory?)") from None
    except OSError as exc:
        raise G2GError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise G2GError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise G2GError(f"{path}: not valid JSON ({exc})") from None
    except RecursionError:
        raise G2GError(f"{path}: nested too deeply to read") from None
    if not isinstance(data, dict):
        raise G2GError(f"{path}: expected a JSON object of run figures, got a JSON {type(data).__name__}")
    return data


def labelled_summaries(run_dirs: Sequence[str | Path]) -> list[tuple[str, dict[str, Any]]]:
    """``(label, summary)`` per run directory, every label distinct.

    A run is labelled by its scenario name; runs sharing a scenario name (two runs of one
    scenario, e.g. with different ``--set``) are labelled by their folder as given instead. An
    unfinished run's label ends in ``[status]``.

    :raises G2GError: see :func:`read_summary`.
    """
    summaries = [read_summary(Path(d)) for d in run_dirs]
    names = [str(s.get("scenario", Path(d).name)) for d, s in zip(run_dirs, summaries)]
    labels = [name if names.count(name) == 1 else str(d) for name, d in zip(names, run_dirs)]
    seen: dict[str, int] = {}
    rows = []
    for label, summary in zip(labels, summaries):
        seen[label] = seen.get(label, 0) + 1
        if seen[label] > 1:  # the same folder given twice
            label += f" #{seen[label]}"
        status = summary.get("status", "complete")
        if status != "complete":
            label += f" [{status}]"
        rows.append((label, summary))
    return rows


def _compare(args: argparse.Namespace) -> int:
    rows = labelled_summaries(args.dirs)
    if args.json:
        print(json.dumps(dict(rows), indent=2))
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
