"""``openg2g benchmark SUITE.yaml``: every controller of a suite on every case, scored into a leaderboard.

Each case (a reference scenario or a seeded variation of it) runs once per controller and once
with no control (``none``, the throughput baseline). The leaderboard gives per controller the
mean and the worst case of the violation integral (pu.s), the violation time (s), the throughput
lost against the same case without control (%), the ITL deadline misses (%) and the regulator tap
operations. Outputs go to OUT (default runs/<suite>): runs/<case>-<controller>/, cases.parquet
and cases.csv (one row per run), leaderboard.csv, leaderboard.md and leaderboard.png; the tables
are rewritten after every finished run, so a killed suite keeps them. Rerunning the same command
skips complete runs; replacing complete runs (a changed controller or case) or another command's
outputs needs --overwrite. OUT is locked while the suite runs. The suite is checked in full before anything runs (format:
docs/benchmark.md; example: scenarios/benchmark_ieee.yaml).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from openg2g.cli.outdir import add_overwrite_option
from openg2g.cli.sweep import add_engine_options, interrupted

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["format_leaderboard", "register"]


def format_leaderboard(board: pd.DataFrame) -> str:
    """The leaderboard as an aligned text table (the cells of :func:`~openg2g.benchmark.run.leaderboard_cells`)."""
    from openg2g.benchmark.run import leaderboard_cells

    lines = leaderboard_cells(board)
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    return "\n".join(
        "  ".join(c.rjust(w) if i > 1 else c.ljust(w) for i, (c, w) in enumerate(zip(line, widths))) for line in lines
    )


def _benchmark(args: argparse.Namespace) -> int:
    # imported here: pandas, pyarrow and matplotlib are needed only once a suite runs
    from openg2g.benchmark.run import run_benchmark
    from openg2g.benchmark.spec import check_suite, load_suite, select_suite
    from openg2g.cli.outdir import default_out_dir, prepare_out_dir, stop_cleanly_on_signals
    from openg2g.sweep.engines import make_engine

    stop_cleanly_on_signals()
    suite = select_suite(load_suite(args.suite, args.set, check=False), args.cases, args.controllers)
    retries = suite.spec.retries if args.retries is None else args.retries
    engine = make_engine(args.engine, args.workers, retries, args.address)
    out = prepare_out_dir(
        args.out if args.out is not None else default_out_dir(suite.spec.suite, "suite"),
        command="benchmark",
        name=suite.spec.suite,
        overwrite=args.overwrite,
        resume=True,
    )
    check_suite(suite)  # the slow check last: a bad option is reported at once
    print(
        f"{suite.spec.suite}: {len(suite.cases)} cases x ({len(suite.spec.controllers)} controllers + no control) "
        f"= {suite.n_runs()} runs -> {out}",
        file=sys.stderr,
    )
    try:
        result = run_benchmark(
            suite, out, engine, progress=not args.no_progress, plot=not args.no_plot, overwrite=args.overwrite
        )
    except KeyboardInterrupt:
        return interrupted(out)
    print(format_leaderboard(result.leaderboard))
    print("\nmean (worst) over each controller's cases; throughput loss against the same case without control")
    bad = result.cases[result.cases["status"] != "complete"]
    for _, row in bad.head(10).iterrows():
        print(f"{row['run_id']}: {row['status']}: {row['error']}", file=sys.stderr)
    print(f"{len(result.cases)} runs ({result.n_incomplete()} incomplete; {result.n_reused} reused from earlier)")
    print(f"leaderboard: {out / 'leaderboard.csv'}; per case: {out / 'cases.parquet'}")
    return 0 if result.n_incomplete() == 0 else 1


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``benchmark`` sub-command."""
    p = subparsers.add_parser(
        "benchmark",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("suite", help="benchmark suite YAML file, or a bundled suite's name (e.g. benchmark_ieee)")
    p.add_argument("--out", help="output folder (default runs/<suite>; reused to resume)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override the scenario of every run, applied last (repeatable), e.g. duration_s=60",
    )
    add_engine_options(p)
    p.add_argument(
        "--cases",
        nargs="+",
        metavar="PATTERN",
        help="run only these case groups or case ids (shell patterns, e.g. ieee13_tap 'ieee123*' ieee13_tap-v3)",
    )
    p.add_argument(
        "--controllers",
        nargs="+",
        metavar="PATTERN",
        help="run only these controllers (shell patterns; the no-control baseline always runs)",
    )
    p.add_argument("--retries", type=int, help="re-attempts of a run whose worker died (default: the suite's)")
    p.add_argument("--no-plot", action="store_true", help="do not draw leaderboard.png")
    add_overwrite_option(p, "a rerun of the same suite that replaces no complete run")
    p.set_defaults(func=_benchmark)
