"""``openg2g traces``: list, build and import power-trace libraries.

- ``openg2g traces list [--json] [--library DIR]``: one row per (model, GPUs per replica, batch).
- ``openg2g traces build --source DATA --out DIR``: build a library from the ML.ENERGY data folder.
- ``openg2g traces import FILE... --library DIR --model M --gpus G --batch B [--format tsv|nvidia-smi|zeus]``:
  check, resample to 0.1 s and add a replica's raw power log (``zeus``: one ``Time,Power`` CSV per
  GPU, power in mW, as Zeus's power monitor writes them).

Errors print one message on stderr and exit with status 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from openg2g.core.errors import TraceError
from openg2g.core.jsontext import json_text

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``traces`` sub-command group (``list``, ``build``, ``import``)."""
    p = subparsers.add_parser("traces", description=__doc__)
    sub = p.add_subparsers(dest="traces_command", metavar="ACTION", required=True)

    lst = sub.add_parser("list", help="list the configurations of a trace library")
    lst.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    lst.add_argument("--library", type=Path, default=None, help="library folder (default: the bundled one)")
    lst.set_defaults(func=_guard(_list))

    build = sub.add_parser("build", help="build a library from the ML.ENERGY data")
    build.add_argument(
        "--source", type=Path, required=True, help="folder with mlenergy-h100-traces/ and mlenergy-leaderboard/"
    )
    build.add_argument("--out", type=Path, required=True, help="library folder to write")
    build.set_defaults(func=_guard(_build))

    imp = sub.add_parser("import", help="add a raw power log to a library")
    imp.add_argument("file", type=Path, nargs="+", help="raw power log (zeus: one log per GPU of the replica)")
    imp.add_argument("--library", type=Path, required=True, help="library folder (created if missing)")
    imp.add_argument("--model", required=True, help="model name")
    imp.add_argument("--gpus", type=int, required=True, help="GPUs per replica the log sums over")
    imp.add_argument("--batch", type=int, required=True, help="batch size (max_num_seqs) of the run")
    imp.add_argument("--format", choices=("tsv", "nvidia-smi", "zeus"), default="tsv", help="log format (default tsv)")
    imp.set_defaults(func=_guard(_import))


def _guard(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        try:
            return func(args)
        except (TraceError, OSError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2

    return run


def _rows(library: Path | None) -> list[dict[str, object]]:
    from openg2g.datacenter.library import TraceLibrary

    lib = TraceLibrary.load(library)
    return [
        {
            "model": c.model,
            "gpus": c.gpus,
            "batch": c.batch,
            "mean_power_w": round(c.mean_power_w, 1),
            "median_itl_s": c.median_itl_s,
            "p99_itl_s": c.p99_itl_s,
            "throughput_tok_s": c.throughput_tok_s,
            "duration_s": c.duration_s,
            "source": c.source,
        }
        for c in lib.configs()
    ]


def _fmt(value: object, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _list(args: argparse.Namespace) -> int:
    rows = _rows(args.library)
    if args.json:
        print(json_text(rows, "traces list --json", indent=1))
        return 0
    header = f"{'model':<18}{'gpus':>5}{'batch':>6}{'power (W)':>11}{'med ITL (s)':>12}{'p99 ITL (s)':>12}"
    header += f"{'tok/s':>9}{'dur (s)':>9}  source"
    print(header)
    for r in rows:
        print(
            f"{r['model']!s:<18}{r['gpus']!s:>5}{r['batch']!s:>6}{_fmt(r['mean_power_w'], '.1f'):>11}"
            f"{_fmt(r['median_itl_s'], '.4f'):>12}{_fmt(r['p99_itl_s'], '.4f'):>12}"
            f"{_fmt(r['throughput_tok_s'], ',.0f'):>9}{_fmt(r['duration_s'], '.1f'):>9}  {r['source']}"
        )
    return 0


def _build(args: argparse.Namespace) -> int:
    from openg2g.datacenter.build import build_library

    configs = build_library(args.source, args.out)
    print(f"wrote {len(configs)} configurations to {args.out}")
    return 0


def _import(args: argparse.Namespace) -> int:
    from openg2g.datacenter.build import import_trace

    cfg = import_trace(args.file, args.library, args.model, args.gpus, args.batch, args.format)
    print(
        f"imported {', '.join(str(f) for f in args.file)} as {cfg.model} on {cfg.gpus} GPUs at batch {cfg.batch}: "
        f"{cfg.samples} samples ({cfg.duration_s:.1f} s), mean {cfg.mean_power_w:.1f} W into {args.library}"
    )
    return 0
