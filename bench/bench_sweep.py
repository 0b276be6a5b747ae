"""Sweep throughput and engine agreement.

1. Runs/minute of a 200-run sweep of short real runs (bundled ``ieee13_none``, ``--duration-s``
   simulated seconds each, no events, voltage envelope only) on ``--workers`` local processes.
2. The same for the analytic toy run function (the sweep machinery's own overhead).
3. Local pool vs Ray (a local instance with ``--workers`` CPUs) on the first ``--ray-runs`` runs:
   the results tables must be equal apart from wall time.

Run: ``python bench/bench_sweep.py [--runs 200] [--workers 2] [--duration-s 5] [--no-ray]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import tempfile
import time
from pathlib import Path

import pandas as pd
import yaml

from openg2g.sweep import run_sweep
from openg2g.testing import toy_run


def sweep_file(directory: Path, runs: int, duration_s: float, base: str = "ieee13_none", tag: str = "real") -> Path:
    """A sweep of ``runs`` seeded random draws of the feeder load level and the site's bus
    (for the toy base, of the toy's MW)."""
    params = (
        {"toy.mw": {"uniform": [0.5, 3.0]}}
        if tag == "toy"
        else {"grid.load_scale": {"uniform": [0.7, 1.3]}, "datacenters.0.bus": {"choice": ["671", "675", "692", "680"]}}
    )
    spec = {
        "name": f"bench_{runs}",
        "base": base,
        "set": [f"duration_s={duration_s}"] + ([] if tag == "toy" else ["events=[]", "outputs.voltages=envelope"]),
        "parameters": [{"random": {"n": runs, "seed": 2026, "params": params}}],
    }
    path = directory / f"sweep_{tag}_{runs}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def timed(label: str, **kwargs) -> pd.DataFrame:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    result = run_sweep(**kwargs)
    wall = time.perf_counter() - start
    n = len(result.table)
    ok = int((result.table["status"] == "complete").sum())
    print(f"{label}: {n} runs ({ok} complete) in {wall:.1f} s = {60 * n / wall:.1f} runs/minute")
    return result.table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--duration-s", type=float, default=5.0, help="simulated seconds per real run")
    parser.add_argument("--ray-runs", type=int, default=20, help="runs in the local-vs-ray comparison")
    parser.add_argument("--no-ray", action="store_true", help="skip the Ray comparison")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        path = sweep_file(tmp_path, args.runs, args.duration_s)
        print(f"ieee13_none, {args.duration_s:g} s simulated per run, {args.workers} local workers")
        timed("real runs, local", sweep=path, out_dir=tmp_path / "local", workers=args.workers)

        toy_base = tmp_path / "toy.yaml"
        toy_base.write_text(yaml.safe_dump({"name": "toy", "duration_s": 60, "toy": {"mw": 1.0}}))
        toy = sweep_file(tmp_path, args.runs, 60, base=str(toy_base), tag="toy")
        timed(
            "toy runs, local (machinery overhead)",
            sweep=toy,
            out_dir=tmp_path / "toy",
            workers=args.workers,
            run_fn=toy_run,
        )

        if args.no_ray:
            return
        if importlib.util.find_spec("ray") is None:
            print("ray: not installed (pip install 'openg2g-cosim[ray]'), comparison skipped")
            return
        small = sweep_file(tmp_path, args.ray_runs, args.duration_s, tag="cmp")
        local = timed(
            "real runs, local (comparison)", sweep=small, out_dir=tmp_path / "cmp_local", workers=args.workers
        )
        on_ray = timed(
            "real runs, ray (comparison)", sweep=small, out_dir=tmp_path / "cmp_ray", engine="ray", workers=args.workers
        )
        volatile = ["wall_time_s", "scenario_file"]
        try:
            pd.testing.assert_frame_equal(local.drop(columns=volatile), on_ray.drop(columns=volatile), check_exact=True)
            figures = [c for c in local.columns if c not in volatile and pd.api.types.is_float_dtype(local[c])]
            print(f"local vs ray: tables equal ({len(local)} rows, {len(figures)} float columns compared exactly)")
        except AssertionError as exc:
            print(f"local vs ray: DIFFERENT\n{exc}")
            raise SystemExit(1) from None


if __name__ == "__main__":
    main()
