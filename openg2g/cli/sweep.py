"""``openg2g sweep SWEEP.yaml --out DIR``: run every parameter point of a sweep file, resumably.

Each run writes to DIR/<run-id>/; DIR/results.parquet has one row per run (parameters, status,
error and every summary figure). Rerunning the same command skips complete runs and retries the
rest. ``--engine ray --address HOST:PORT`` runs on a Ray cluster (DIR on a shared file system).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from openg2g.sweep.engines import ENGINES
from openg2g.sweep.runner import run_sweep
from openg2g.sweep.spec import load_sweep

__all__ = ["print_results", "register"]

_SHOW = ("violation_integral_pu_s", "v_min_pu", "v_max_pu", "mean_throughput_tok_s", "energy_mwh")


def print_results(table, param_names: list[str], limit: int = 40) -> None:  # type: ignore[no-untyped-def]
    """Print the first ``limit`` rows of a results table: id, parameters, status, key figures."""
    cols = ["run_id", *param_names, "status", *(c for c in _SHOW if c in table.columns)]
    with __import__("pandas").option_context("display.width", 200, "display.max_columns", 20):
        print(table[cols].head(limit).to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    if len(table) > limit:
        print(f"... {len(table) - limit} more rows")
    bad = table[table["status"] != "complete"]
    for _, row in bad.head(10).iterrows():
        print(f"{row['run_id']}: {row['status']}: {row['error']}", file=sys.stderr)


def _sweep(args: argparse.Namespace) -> int:
    loaded = load_sweep(args.sweep)
    out = Path(args.out)
    try:
        result = run_sweep(
            loaded,
            out,
            engine=args.engine,
            workers=args.workers,
            address=args.address,
            retries=args.retries,
            progress=not args.no_progress,
        )
    except KeyboardInterrupt:
        print(f"interrupted; rerun the same command to resume ({out})", file=sys.stderr)
        return 130
    print_results(result.table, loaded.spec.parameter_names())
    counts = ", ".join(f"{n} {s}" for s, n in sorted(result.counts().items()))
    print(f"\n{len(result.table)} runs ({counts}; {result.n_reused} reused from earlier)")
    print(f"results: {out / 'results.parquet'}")
    return 0 if result.counts().get("complete", 0) == len(result.table) else 1


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``sweep`` sub-command."""
    p = subparsers.add_parser("sweep", help="run a parameter sweep over a scenario", description=__doc__)
    p.add_argument("sweep", help="sweep YAML file (see scenarios/sweep_*.yaml)")
    p.add_argument("--out", required=True, help="output folder (reused to resume)")
    p.add_argument(
        "--workers", type=int, default=1, help="runs at a time (default 1); with --address the cluster's CPUs decide"
    )
    p.add_argument(
        "--engine", choices=[e for e in ENGINES], default="local", help="local process pool (default), ray, or serial"
    )
    p.add_argument("--address", help="Ray cluster address (host:port or ray://host:port); with --engine ray")
    p.add_argument("--retries", type=int, help="re-attempts of a run whose worker died (default: the sweep file's)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=_sweep)
