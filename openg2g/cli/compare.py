"""``openg2g compare DIR DIR... [--baseline DIR] [--plot [PNG]]``: side-by-side summary table of
finished runs.

Each run is labelled by its scenario name, or by its folder when several runs share a scenario
name; ``--json`` prints one object keyed by those labels. ``--baseline DIR`` adds that run (first)
and a second table: each other run's change against it, per figure, in the figure's unit and in
percent of the baseline's value. ``--plot`` draws the runs over time (voltage violation,
datacenter power, throughput, ITL misses; the baseline in black) to ``comparison.png`` or the
file named.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from openg2g.cli.table import delta_columns, format_deltas, format_table
from openg2g.core.jsontext import json_text

__all__ = ["register"]


def _compare(args: argparse.Namespace) -> int:
    # pandas and matplotlib only when comparing
    from openg2g.plot.compare import baseline_deltas, read_summaries

    dirs = list(args.dirs)
    if args.baseline is not None:
        dirs = [args.baseline, *(d for d in dirs if Path(d).resolve() != Path(args.baseline).resolve())]
    rows = read_summaries(dirs)
    baseline = rows[0][0] if args.baseline is not None else None
    deltas: dict[str, dict[str, float | None]] = {}
    if baseline is not None:
        frame = baseline_deltas(rows, baseline, [k for k, _, _ in delta_columns()])
        # JSON has no NaN: a figure the run or the baseline lacks (or a baseline of 0, for %) is null
        deltas = {
            str(label): {k: (float(v) if math.isfinite(v) else None) for k, v in row.items()}
            for label, row in frame.iterrows()
        }
    if args.json:
        runs = dict(rows)
        print(
            json_text(
                runs if baseline is None else {"runs": runs, "baseline": baseline, "deltas": deltas}, "compare --json"
            )
        )
    else:
        print(format_table(rows, markdown=args.markdown))
        if baseline is not None:
            print()
            print(format_deltas(deltas, baseline, markdown=args.markdown))
    if args.plot is not None:
        from openg2g.plot.compare_runs import plot_run_comparison, run_series
        from openg2g.plot.run import save_png

        series = {label: run_series(Path(d)) for (label, _), d in zip(rows, dirs)}
        path = Path(args.plot)
        save_png(plot_run_comparison(series, baseline), path)
        print(f"\ncomparison plot: {path}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``compare`` sub-command."""
    p = subparsers.add_parser(
        "compare",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("dirs", nargs="+", help="run output directories")
    p.add_argument("--baseline", metavar="DIR", help="run to compare the others against (changes and percent)")
    p.add_argument(
        "--plot",
        nargs="?",
        const="comparison.png",
        metavar="PNG",
        help="draw the runs over time to this PNG (default comparison.png)",
    )
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--markdown", action="store_true", help="Markdown table")
    fmt.add_argument("--json", action="store_true", help="JSON object keyed by run")
    p.set_defaults(func=_compare)
