"""Run a benchmark suite through the sweep engines and score the controllers.

``OUT/``
  ``benchmark.json``     the validated suite and its cases
  ``runs/<case>-<controller>/``  each run's outputs (``none`` is the case without control)
  ``cases.parquet``, ``cases.csv``  one row per case and controller: status, the summary
                         figures, throughput loss against the same case's baseline (%), ITL misses (%)
  ``leaderboard.csv``    one row per controller: mean and worst over its cases of each score
  ``leaderboard.md``     the same as a Markdown table, ``mean (worst)`` per score
  ``leaderboard.png``    the leaderboard as bars (mean) with whiskers up to the worst case

A rerun of the same suite into the same folder skips runs already complete (same scenario bytes
and overrides), as ``openg2g sweep`` does. The tables are rewritten (each through a temporary file
and a rename) after every run that finishes, so a suite killed by any signal keeps them for the
runs that finished.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from openg2g.benchmark.spec import BASELINE, SCORES, LoadedSuite, controllers_override
from openg2g.core.atomic import replace_atomically, write_json_atomic, write_text_atomic
from openg2g.sweep.engines import Engine
from openg2g.sweep.expand import encode_value
from openg2g.sweep.runner import (
    NONCONVERGED,
    execute_tasks,
    fingerprint,
    not_converged,
    results_table,
    write_parquet_atomic,
)
from openg2g.sweep.tasks import COMPLETE, RunFn, RunTask, refuse_replacing, run_scenario_files

__all__ = [
    "RANK_KEYS",
    "SCORES",
    "BenchmarkResult",
    "case_table",
    "leaderboard",
    "leaderboard_cells",
    "leaderboard_markdown",
    "plan_benchmark",
    "run_benchmark",
]

_SHORT = {
    "violation_integral_pu_s": "violation pu.s",
    "violation_time_s": "violation s",
    "throughput_loss_pct": "tput loss %",
    "itl_deadline_miss_pct": "ITL miss %",
    "n_tap_changes": "tap ops",
}


@dataclass
class BenchmarkResult:
    """What :func:`run_benchmark` returns.

    :param cases: the per-case table (as in ``cases.parquet``).
    :param leaderboard: the leaderboard (as in ``leaderboard.csv``).
    :param out_dir: the output folder.
    :param n_reused: runs found complete from an earlier invocation and not run again.
    """

    cases: pd.DataFrame
    leaderboard: pd.DataFrame
    out_dir: Path
    n_reused: int

    def n_incomplete(self) -> int:
        """Runs that did not complete (failed, invalid or lost)."""
        return int((self.cases["status"] != COMPLETE).sum())


def plan_benchmark(suite: LoadedSuite, out_dir: Path, run_fn: RunFn = run_scenario_files) -> list[RunTask]:
    """Every run of the suite: per case, the baseline and then each controller that applies."""
    runs_dir = Path(out_dir).resolve() / "runs"
    tasks: list[RunTask] = []
    for case in suite.cases:
        variation = ", ".join(f"{k}={encode_value(v)}" for k, v in case.params.items())
        for name, block in suite.controllers[case.case_id].items():
            overrides = ("outputs.plots=false", *case.overrides, controllers_override(block))
            run_id = f"{case.case_id}-{name}"
            tasks.append(
                RunTask(
                    run_id=run_id,
                    index=len(tasks),
                    params={
                        "case": case.case_id,
                        "group": case.group,
                        "controller": name,
                        "controller_source": suite.sources[case.case_id][name],
                        "variation": variation,
                    },
                    scenario=str(case.scenario),
                    overrides=overrides,
                    out_dir=str(runs_dir / run_id),
                    fingerprint=fingerprint(case.scenario_sha256, overrides),
                    run_fn=run_fn,
                )
            )
    return tasks


def case_table(results: pd.DataFrame) -> pd.DataFrame:
    """Add the benchmark's scores to a results table (one row per run).

    ``throughput_loss_pct`` is ``100 * (1 - throughput / throughput of the same case's baseline)``
    (NaN when either run is incomplete); ``itl_deadline_miss_pct`` is the fraction of tokens over
    their deadline in %. ``nonconverged_steps`` counts each run's grid steps that did not
    converge; the scores of a run with any are NaN, as for a run that did not complete (its
    violation figures cover the converged steps only).
    """
    df = results.copy()
    for col in ("mean_throughput_tok_s", "itl_deadline_miss_fraction", *SCORES):
        if col not in df.columns:
            df[col] = np.nan
    if NONCONVERGED not in df.columns:
        df[NONCONVERGED] = np.nan
    complete = df["status"] == COMPLETE
    base = df[complete & (df["controller"] == BASELINE)].set_index("case")["mean_throughput_tok_s"]
    baseline = df["case"].map(base).astype(float)
    throughput = df["mean_throughput_tok_s"].where(complete).astype(float)
    df["throughput_loss_pct"] = 100.0 * (1.0 - throughput / baseline.where(baseline > 0))
    df["itl_deadline_miss_pct"] = 100.0 * df["itl_deadline_miss_fraction"].where(complete).astype(float)
    scored = complete & ~not_converged(df)
    for col in SCORES:
        df[col] = df[col].where(scored).astype(float)
    return df


RANK_KEYS = ("violation_integral_pu_s_shared", "throughput_loss_pct_shared", "itl_deadline_miss_pct_shared")
"""The leaderboard's ranking, in order: means over the cases every controller completed."""


def leaderboard(cases: pd.DataFrame, controllers: list[str]) -> pd.DataFrame:
    """One row for the baseline and each of ``controllers``, ranked on the cases they all share.

    Columns: ``rank``, ``controller``, ``n_cases`` (cases it ran on), ``n_incomplete``,
    ``n_nonconverged`` (complete runs with grid steps that did not converge),
    ``violation_integral_pu_s_shared`` (its mean violation integral over the *shared* cases: those
    that every listed controller and the baseline without a non-converged run completed with every
    step converged; a controller limited to some case groups would otherwise be compared on easier
    or harder cases), then
    ``<score>_mean`` and ``<score>_worst`` (the largest, every score being lower-is-better) over all
    its complete, converged runs, and :data:`RANK_KEYS`' other shared means. A controller with a
    non-converged run is a failure: it ranks after every controller without one. Among each, the
    ranking compares only figures over the same cases: the shared violation integral, then the
    shared throughput loss, then the shared ITL misses (a mean over each controller's own cases
    would set a controller limited to easy cases above one that ran them all). Controllers equal on
    all of them share a rank (``1, 1, 3``) and are marked ``tied``; listed in the order of
    ``controllers``, the baseline first. The number of shared cases is ``board.attrs["n_shared"]``.
    """
    names = [BASELINE, *controllers]
    failing = not_converged(cases)
    done_all = cases[(cases["status"] == COMPLETE) & ~failing]
    per_case = done_all.groupby("case")["controller"].agg(set)
    contenders = set(names) - set(cases.loc[failing, "controller"])  # a failure ranks after them anyway
    shared = sorted(c for c, ran in per_case.items() if contenders <= ran)
    rows = []
    for name in names:
        mine = cases["controller"] == name
        runs = cases[mine]
        done = cases[mine & (cases["status"] == COMPLETE) & ~failing]
        on_shared = done[done["case"].isin(shared)]
        row: dict[str, Any] = {
            "controller": name,
            "n_cases": len(runs),
            "n_incomplete": int((runs["status"] != COMPLETE).sum()),
            "n_nonconverged": int(failing[mine].sum()),
        }
        for key in RANK_KEYS:
            values = on_shared[key.removesuffix("_shared")].dropna()
            row[key] = float(values.mean()) if len(values) else np.nan
        for col in SCORES:
            values = done[col].dropna()
            row[f"{col}_mean"] = float(values.mean()) if len(values) else np.nan
            row[f"{col}_worst"] = float(values.max()) if len(values) else np.nan
        rows.append(row)
    board = pd.DataFrame(rows)
    board["_failed"] = board["n_nonconverged"] > 0
    keys = ["_failed", *RANK_KEYS]
    board = board.sort_values(keys, kind="stable", na_position="last").reset_index(drop=True)
    # equal on every key (NaN equal to NaN: neither has a figure on the shared cases) -> one rank
    same_as_above = board[keys].fillna(np.inf).eq(board[keys].fillna(np.inf).shift()).all(axis=1)
    first = pd.Series(np.where(same_as_above, np.nan, np.arange(1, len(board) + 1))).ffill()
    board.insert(0, "rank", first.astype(int))
    board["tied"] = board["rank"].duplicated(keep=False)
    board = board.drop(columns="_failed")
    board.attrs["n_shared"] = len(shared)
    return board


def leaderboard_cells(board: pd.DataFrame) -> list[list[str]]:
    """The leaderboard as text cells, header first: rank, controller, cases, the violation integral
    on the shared cases (the ranking), then ``mean (worst)`` per score.

    A rank shared with another controller reads ``=2``. A controller with runs that did not
    complete is marked ``[n incomplete]``, one with runs whose
    grid steps did not all converge ``[n not converged]``; a score without any complete, converged
    run is ``-``.
    """
    shared = f"violation pu.s, {board.attrs.get('n_shared', '?')} shared cases"
    lines = [["rank", "controller", "cases", shared, *(f"{_SHORT[col]} mean (worst)" for col in SCORES)]]
    for _, row in board.iterrows():
        name = str(row["controller"]) + (f" [{row['n_incomplete']} incomplete]" if row["n_incomplete"] else "")
        name += f" [{row['n_nonconverged']} not converged]" if row["n_nonconverged"] else ""
        on_shared = float(row["violation_integral_pu_s_shared"])
        cells = [
            f"={row['rank']}" if row["tied"] else str(row["rank"]),
            name,
            str(row["n_cases"]),
            "-" if math.isnan(on_shared) else f"{on_shared:.4g}",
        ]
        for col in SCORES:
            mean, worst = float(row[f"{col}_mean"]), float(row[f"{col}_worst"])
            cells.append("-" if math.isnan(mean) else f"{mean:.4g} ({worst:.4g})")
        lines.append(cells)
    return lines


def leaderboard_markdown(board: pd.DataFrame) -> str:
    """The leaderboard as a Markdown table (``leaderboard.md``, for a README)."""
    lines = leaderboard_cells(board)
    rows = [lines[0], ["---"] * len(lines[0]), *lines[1:]]
    return "".join("| " + " | ".join(row) + " |\n" for row in rows)


def _write_tables(
    tasks: list[RunTask], records: dict[str, dict[str, Any]], reused: set[str], out: Path, controllers: list[str]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    cases = case_table(results_table(tasks, records, reused))
    board = leaderboard(cases, controllers)
    write_parquet_atomic(cases, out / "cases.parquet")
    with replace_atomically(out / "cases.csv") as tmp:
        cases.to_csv(tmp, index=False)
    with replace_atomically(out / "leaderboard.csv") as tmp:
        board.to_csv(tmp, index=False)
    write_text_atomic(out / "leaderboard.md", leaderboard_markdown(board))
    return cases, board


def run_benchmark(
    suite: LoadedSuite,
    out_dir: str | Path,
    engine: Engine,
    *,
    progress: bool = False,
    plot: bool = True,
    run_fn: RunFn = run_scenario_files,
    overwrite: bool = False,
) -> BenchmarkResult:
    """Run (or resume) every run of ``suite`` into ``out_dir`` and write the tables and the plot.

    :param engine: a sweep engine (:func:`openg2g.sweep.engines.make_engine`).
    :param progress: progress bar with ETA on stderr.
    :param plot: write ``leaderboard.png``.
    :param run_fn: the function doing one run (default: the co-simulation engine).
    :param overwrite: rerun runs whose folder holds a complete run of other inputs (else refuse).
    :raises ScenarioError: without ``overwrite``, complete runs of other inputs would be replaced.
    """
    out = Path(out_dir)
    tasks = plan_benchmark(suite, out, run_fn)
    if not overwrite:
        refuse_replacing(tasks, out)
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(
        out / "benchmark.json",
        {
            "suite_file": str(suite.path),
            "n_cases": len(suite.cases),
            "n_runs": len(tasks),
            "cases": [
                {"case": c.case_id, "group": c.group, "scenario": str(c.scenario), "overrides": list(c.overrides)}
                for c in suite.cases
            ],
            "spec": suite.spec.model_dump(mode="json"),
        },
    )
    names = [c.name for c in suite.spec.controllers]
    records: dict[str, dict[str, Any]] = {}
    reused: set[str] = set()

    def keep(so_far: dict[str, dict[str, Any]], found: set[str]) -> None:
        # the tables after every finished run: a suite killed by SIGKILL still has them
        nonlocal records, reused
        records, reused = so_far, found
        _write_tables(tasks, records, reused, out, names)

    try:
        execute_tasks(tasks, engine, progress=progress, desc=suite.spec.suite, on_update=keep)
    finally:  # and once more at the end, also when interrupted (a run may have been recorded since)
        cases, board = _write_tables(tasks, records, reused, out, names)
    if plot:
        from openg2g.benchmark.plot import plot_leaderboard

        plot_leaderboard(board, title=suite.spec.suite, path=out / "leaderboard.png")
    return BenchmarkResult(cases=cases, leaderboard=board, out_dir=out, n_reused=len(reused))
