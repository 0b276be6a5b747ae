"""Switching of every bundled stock-controller case: batch changes, reversals and the most changes
of one model in any 60 s, beside the case's violation integral, throughput and ITL misses.

Runs each scenario through the CLI (plots off, voltages as an envelope), once as it is and once
with every controller's commands delayed (``--delay-s``, default 2 s: ``controllers.N.delay_s``),
one run at a time, and prints one Markdown row per run::

    python bench/switching.py                        # every case with mpc, joint, pid, ofo or rule_based
    python bench/switching.py --only ieee13_pid --json rows.json

``--root`` runs another checkout's code (a git worktree of an older commit), so a before/after
table is two runs of this script. Asserts nothing; the figures are ``summary.json``'s
(:mod:`openg2g.record.metrics`).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
_KINDS = {"mpc", "joint", "pid", "ofo", "rule_based"}
_FIGURES = (
    "violation_integral_pu_s",
    "mean_throughput_tok_s",
    "itl_deadline_miss_fraction",
    "n_batch_changes",
    "n_batch_reversals",
    "max_batch_changes_per_min",
    "max_batch_reversals_per_min",
)


def controller_kinds(name: str) -> list[str]:
    """The kinds of the controllers the scenario lists, in order (each gets the delay)."""
    data = yaml.safe_load((ROOT / "scenarios" / f"{name}.yaml").read_text())
    return [str(c.get("kind")) for c in data.get("controllers") or []]


def stock_cases() -> list[str]:
    """The bundled single-run scenarios with a stock batch or voltage controller (live ones need servers)."""
    return [
        p.stem
        for p in sorted((ROOT / "scenarios").glob("*.yaml"))
        if not p.stem.startswith(("live_", "sweep_", "study_", "benchmark_"))
        and _KINDS.intersection(controller_kinds(p.stem))
    ]


def run_case(name: str, delay_s: float, root: Path, duration_s: float | None) -> dict[str, object]:
    """One run's switching and reference figures (``error``: the last line of stderr when it failed)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        cmd = [sys.executable, "-m", "openg2g", "run", name, "--out", str(out), "--no-progress"]
        cmd += ["--set", "outputs.plots=false", "--set", "outputs.voltages=envelope"]
        if duration_s is not None:
            cmd += ["--set", f"duration_s={duration_s}"]
        for i in range(len(controller_kinds(name)) if delay_s else 0):
            cmd += ["--set", f"controllers.{i}.delay_s={delay_s}"]
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True, cwd=root)
        row: dict[str, object] = {"case": name, "delay_s": delay_s}
        if proc.returncode != 0:
            return {**row, "error": (proc.stderr.strip().splitlines() or ["?"])[-1]}
        summary = json.loads((out / "summary.json").read_text())
        return {**row, **{k: summary.get(k) for k in _FIGURES}}


def markdown_row(row: dict[str, object]) -> str:
    """``| case | delay | viol. | throughput | misses | changes | reversals | max/min | rev./min |``."""
    if "error" in row:
        return f"| {row['case']} | {row['delay_s']:g} | failed: {row['error']} |"
    cells = [
        f"{row['violation_integral_pu_s']:.4f}",
        f"{row['mean_throughput_tok_s']:,.0f}",
        f"{row['itl_deadline_miss_fraction']:.2%}",
        *(str(row[k]) for k in _FIGURES[3:]),
    ]
    return f"| {row['case']} | {row['delay_s']:g} | " + " | ".join(cells) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", default=None, help="scenario names (default: every stock case)")
    parser.add_argument("--delay-s", type=float, default=2.0, help="the delayed run's command delay (s); 0: none")
    parser.add_argument("--root", type=Path, default=ROOT, help="checkout whose code runs (default: this one)")
    parser.add_argument("--duration-s", type=float, default=None, help="shorten every run to this many seconds")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows to this JSON file")
    args = parser.parse_args()
    print(
        "| case | delay (s) | viol. (pu.s) | tok/s | ITL misses | changes | reversals | max changes/min | max rev./min |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    rows = []
    for name in args.only or stock_cases():
        for delay_s in (0.0, args.delay_s) if args.delay_s else (0.0,):
            rows.append(run_case(name, delay_s, args.root, args.duration_s))
            print(markdown_row(rows[-1]), flush=True)
            if args.json is not None:
                args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
