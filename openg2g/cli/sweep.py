"""``openg2g sweep SWEEP.yaml --out DIR``: run every parameter point of a sweep file, resumably.

The first run is checked in full before anything runs (as ``openg2g validate`` does), so a base
scenario that cannot run is one error, not a table of invalid runs. Each run writes to DIR/<run-id>/; DIR/results.parquet has one row per run (parameters, status,
error and every summary figure). Rerunning the same command skips complete runs and retries the
rest; a rerun that would replace complete runs (the sweep or its base scenario changed) or write
into another command's folder needs --overwrite. DIR is locked while the sweep runs. ``--engine ray --address HOST:PORT`` runs on a Ray cluster (DIR on a shared file system).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from openg2g.cli.outdir import add_overwrite_option
from openg2g.sweep.engines import ENGINES

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["add_engine_options", "interrupted", "print_results", "register"]

_SHOW = ("violation_integral_pu_s", "v_min_pu", "v_max_pu", "mean_throughput_tok_s", "energy_mwh")


def add_engine_options(p: argparse.ArgumentParser) -> None:
    """Add ``--workers``, ``--engine``, ``--address`` and ``--no-progress`` (sweeps and studies)."""
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="runs at a time (default 1; at most 4 per CPU); with --address the cluster's CPUs decide",
    )
    p.add_argument(
        "--engine", choices=list(ENGINES), default="local", help="local process pool (default), ray, or serial"
    )
    p.add_argument("--address", help="Ray cluster address (host:port or ray://host:port); with --engine ray")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def interrupted(out: Path) -> int:
    """Say on stderr how to resume the runs into ``out`` after Ctrl-C; returns the exit status 130."""
    print(f"interrupted; rerun the same command to resume ({out})", file=sys.stderr)
    return 130


def print_results(table: pd.DataFrame, param_names: list[str], limit: int = 40) -> None:
    """Print the first ``limit`` rows of a results table: id, parameters, status, key figures."""
    import pandas as pd

    from openg2g.sweep.runner import NONCONVERGED, not_converged

    failing = not_converged(table)
    shown = [*_SHOW, NONCONVERGED] if failing.any() else list(_SHOW)
    cols = ["run_id", *param_names, "status", *(c for c in shown if c in table.columns)]
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(table[cols].head(limit).to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    if len(table) > limit:
        print(f"... {len(table) - limit} more rows")
    bad = table[table["status"] != "complete"]
    for _, row in bad.head(10).iterrows():
        print(f"{row['run_id']}: {row['status']}: {row['error']}", file=sys.stderr)
    for _, row in table[failing].head(10).iterrows():
        print(
            f"{row['run_id']}: {int(row[NONCONVERGED])} of {int(row['grid_steps'])} grid steps did not converge: "
            "its voltage figures cover the converged steps only",
            file=sys.stderr,
        )


def _sweep(args: argparse.Namespace) -> int:
    # imported here, not at the top: pandas and pyarrow are needed only once a sweep runs
    from openg2g.cli.outdir import prepare_out_dir, stop_cleanly_on_signals
    from openg2g.sweep.runner import check_first_run, run_sweep
    from openg2g.sweep.spec import load_sweep

    stop_cleanly_on_signals()
    loaded = load_sweep(args.sweep, args.set)
    out = prepare_out_dir(args.out, command="sweep", name=loaded.spec.name, overwrite=args.overwrite, resume=True)
    check_first_run(loaded)  # the slow check last: a bad option is reported at once
    try:
        result = run_sweep(
            loaded,
            out,
            engine=args.engine,
            workers=args.workers,
            address=args.address,
            retries=args.retries,
            progress=not args.no_progress,
            overwrite=args.overwrite,
        )
    except KeyboardInterrupt:
        return interrupted(out)
    print_results(result.table, loaded.spec.parameter_names())
    counts = ", ".join(f"{n} {s}" for s, n in sorted(result.counts().items()))
    print(f"\n{len(result.table)} runs ({counts}; {result.n_reused} reused from earlier)")
    print(f"results: {out / 'results.parquet'}")
    return 0 if result.counts().get("complete", 0) == len(result.table) else 1


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``sweep`` sub-command."""
    p = subparsers.add_parser("sweep", description=__doc__)
    p.add_argument("sweep", help="sweep YAML file, or a bundled sweep's name (e.g. sweep_ieee13_taps)")
    p.add_argument("--out", required=True, help="output folder (reused to resume)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override the base scenario of every run, after the sweep file's set (repeatable)",
    )
    add_engine_options(p)
    p.add_argument("--retries", type=int, help="re-attempts of a run whose worker died (default: the sweep file's)")
    add_overwrite_option(p, "a rerun of the same sweep that replaces no complete run")
    p.set_defaults(func=_sweep)
