"""Run a sweep: plan the runs, skip those already complete, execute the rest, collect one table.

``OUT/``
  ``sweep.json``        the validated sweep file and its base scenario
  ``<run-id>/``         each run's outputs (``run.json``, ``summary.json``, tables)
  ``results.parquet``   one row per run: run_id, index, each parameter, status, error, reused,
                        and every summary figure (rewritten as runs finish, so it is current
                        even if the sweep is killed)
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from openg2g.core.atomic import replace_atomically, write_json_atomic
from openg2g.core.errors import ScenarioError
from openg2g.core.progress import progress_bar
from openg2g.sweep.engines import Engine, make_engine
from openg2g.sweep.expand import expand_block, expand_parameters, point_overrides, run_ids
from openg2g.sweep.spec import LoadedSweep, load_sweep
from openg2g.sweep.tasks import COMPLETE, RunFn, RunTask, completed_record, refuse_replacing, run_scenario_files

__all__ = [
    "NONCONVERGED",
    "SweepResult",
    "check_first_run",
    "execute_tasks",
    "fingerprint",
    "not_converged",
    "plan_sweep",
    "results_table",
    "run_sweep",
    "write_parquet_atomic",
]

_DROP_SUMMARY = ("status", "error")

NONCONVERGED = "nonconverged_steps"
"""The summary figure (and table column) counting a run's grid steps that did not converge."""


def not_converged(table: pd.DataFrame) -> pd.Series:
    """Per row of a results table, True for a complete run some of whose grid steps did not
    converge (``grid.on_nonconvergence: flag``). Its voltage figures cover the converged steps
    only (a feeder in voltage collapse looks nearly free of violations), so every table that ranks
    runs counts it as a failure, after every fully converged run."""
    if NONCONVERGED not in table.columns:
        return pd.Series(False, index=table.index)
    steps = pd.to_numeric(table[NONCONVERGED], errors="coerce").fillna(0)
    return (table["status"] == COMPLETE) & (steps > 0)


def check_first_run(loaded: LoadedSweep) -> None:
    """Load and start the sweep's first run as a run would (``openg2g validate`` and ``openg2g sweep``,
    before anything runs): a base scenario that cannot run at all (a controller file that fails to
    import, a feeder that cannot be read) is one input error, not a table of invalid runs.

    :raises ScenarioError: the first run's problems, each naming the scenario file and field and
        saying it is the first run of this sweep.
    """
    from openg2g.scenario.loader import load_scenario
    from openg2g.scenario.preflight import check_start

    spec = loaded.spec
    first = {k: v for block in spec.parameters for k, v in expand_block(block)[0].items()}
    try:
        check_start(load_scenario(loaded.base_path, [*spec.set, *point_overrides(first)]))
    except ScenarioError as exc:
        raise ScenarioError([(f"{loc} (first run of sweep {loaded.path})", msg) for loc, msg in exc.problems]) from None


@dataclass
class SweepResult:
    """What :func:`run_sweep` returns.

    :param table: the results table (as in ``results.parquet``), one row per run in index order.
    :param out_dir: the sweep output folder.
    :param n_reused: runs found complete from an earlier invocation and not run again.
    """

    table: pd.DataFrame
    out_dir: Path
    n_reused: int

    def counts(self) -> dict[str, int]:
        """Number of runs per status."""
        return {str(k): int(v) for k, v in self.table["status"].value_counts().items()}


def fingerprint(base_sha256: str, overrides: Sequence[str]) -> str:
    """Hash of a run's inputs: the base scenario's bytes and its overrides in order."""
    return hashlib.sha256("\n".join([base_sha256, *overrides]).encode()).hexdigest()


def plan_sweep(loaded: LoadedSweep, out_dir: Path, run_fn: RunFn = run_scenario_files) -> list[RunTask]:
    """Every run of a sweep, in expansion order."""
    spec = loaded.spec
    fixed = ([] if spec.plots else ["outputs.plots=false"]) + list(spec.set)
    points = expand_parameters(spec.parameters)
    out_dir = Path(out_dir).resolve()
    tasks = []
    for index, (run_id, point) in enumerate(zip(run_ids(points), points)):
        overrides = tuple(fixed + point_overrides(point))
        tasks.append(
            RunTask(
                run_id=run_id,
                index=index,
                params=point,
                scenario=str(loaded.base_path),
                overrides=overrides,
                out_dir=str(out_dir / run_id),
                fingerprint=fingerprint(loaded.base_sha256, overrides),
                run_fn=run_fn,
            )
        )
    return tasks


def _arrow_safe(df: pd.DataFrame) -> pd.DataFrame:
    """Columns pyarrow cannot store as one type (mixed str/number, lists) become text."""
    out = df.copy()
    for col in out.columns:
        try:
            pa.array(out[col], from_pandas=True)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            out[col] = out[col].map(
                lambda v: v if v is None else json.dumps(v) if isinstance(v, (list, dict)) else str(v)
            )
    return out


def results_table(
    tasks: Sequence[RunTask], records: Mapping[str, Mapping[str, Any]], reused: set[str] | None = None
) -> pd.DataFrame:
    """One row per task that has a record: ids, parameters, status, error, reused, summary figures."""
    reused = reused or set()
    param_names: list[str] = []
    for task in tasks:
        param_names += [k for k in task.params if k not in param_names]
    rows = []
    for task in tasks:
        record = records.get(task.run_id)
        if record is None:
            continue
        row: dict[str, Any] = {"run_id": task.run_id, "index": task.index}
        row.update({name: task.params.get(name) for name in param_names})
        row.update(status=record["status"], error=record.get("error"), reused=task.run_id in reused)
        for key, value in record.get("summary", {}).items():
            if (
                key not in row
                and key not in _DROP_SUMMARY
                and (value is None or isinstance(value, (int, float, str, bool)))
            ):
                row[key] = value
        rows.append(row)
    df = pd.DataFrame(rows)
    if df.empty:
        df = pd.DataFrame(columns=["run_id", "index", *param_names, "status", "error", "reused"])
    return _arrow_safe(df)


def write_parquet_atomic(df: pd.DataFrame, path: Path) -> None:
    """Write a table to parquet through a temporary file and rename (:mod:`openg2g.core.atomic`)."""
    with replace_atomically(path) as tmp:
        pq.write_table(pa.Table.from_pandas(df, preserve_index=False), tmp)


def execute_tasks(
    tasks: Sequence[RunTask],
    engine: Engine,
    *,
    progress: bool = False,
    desc: str = "runs",
    on_update: Callable[[dict[str, dict[str, Any]], set[str]], None] | None = None,
) -> tuple[dict[str, dict[str, Any]], set[str]]:
    """Run the tasks not already complete; returns ``(records by run id, ids reused)``.

    :param on_update: called with the records so far after each run (and once at the start).
    """
    records: dict[str, dict[str, Any]] = {}
    reused: set[str] = set()
    todo = []
    for task in tasks:
        record = completed_record(task)
        if record is None:
            todo.append(task)
        else:
            records[task.run_id] = record
            reused.add(task.run_id)
    if on_update is not None:
        on_update(records, reused)
    bar = None
    if progress and todo:
        bar = progress_bar(total=len(todo), desc=desc, unit="run")
        if reused:
            bar.write(f"{len(reused)} of {len(tasks)} runs already complete; running {len(todo)}")
    counts: dict[str, int] = {}

    def on_record(record: dict[str, Any]) -> None:
        records[record["run_id"]] = record
        counts[record["status"]] = counts.get(record["status"], 0) + 1
        if bar is not None:
            bar.update(1)
            bar.set_postfix(counts, refresh=False)
        if on_update is not None:
            on_update(records, reused)

    try:
        if todo:
            engine.map(todo, on_record)
    finally:
        if bar is not None:
            bar.close()
    return records, reused


def run_sweep(
    sweep: str | Path | LoadedSweep,
    out_dir: str | Path,
    *,
    engine: str | Engine = "local",
    workers: int = 1,
    address: str | None = None,
    retries: int | None = None,
    progress: bool = False,
    run_fn: RunFn = run_scenario_files,
    write_every_s: float = 5.0,
    overwrite: bool = False,
) -> SweepResult:
    """Run (or resume) a sweep into ``out_dir``.

    :param sweep: a sweep file or an already loaded one.
    :param engine: ``local``, ``ray``, ``serial`` or an :class:`Engine`.
    :param workers: runs at a time (local pool size; CPUs of a new local Ray instance).
    :param address: Ray cluster address (engine ``ray`` only).
    :param retries: re-attempts after a worker death; default the sweep file's ``retries``.
    :param progress: progress bar with ETA on stderr.
    :param run_fn: the function doing one run (default: the co-simulation engine).
    :param write_every_s: minimum wall time between rewrites of ``results.parquet`` while running.
    :param overwrite: rerun runs whose folder holds a complete run of other inputs (else refuse).
    :raises SweepError: the sweep file is invalid.
    :raises ScenarioError: without ``overwrite``, complete runs of other inputs would be replaced.
    :raises G2GError: the engine cannot start (e.g. unreachable Ray address).
    """
    loaded = sweep if isinstance(sweep, LoadedSweep) else load_sweep(sweep)
    out = Path(out_dir)
    runner = (
        engine
        if isinstance(engine, Engine)
        else make_engine(engine, workers, loaded.spec.retries if retries is None else retries, address)
    )
    tasks = plan_sweep(loaded, out, run_fn)
    if not overwrite:
        refuse_replacing(tasks, out)
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(
        out / "sweep.json",
        {
            "sweep_file": str(loaded.path),
            "base_scenario": str(loaded.base_path),
            "n_runs": len(tasks),
            "spec": loaded.spec.model_dump(mode="json"),
        },
    )
    results_path = out / "results.parquet"
    last_write = 0.0
    seen_records: dict[str, dict[str, Any]] = {}
    seen_reused: set[str] = set()

    def on_update(records: dict[str, dict[str, Any]], reused: set[str]) -> None:
        nonlocal last_write, seen_records, seen_reused
        seen_records, seen_reused = records, reused
        now = time.monotonic()
        if now - last_write >= write_every_s:
            write_parquet_atomic(results_table(tasks, records, reused), results_path)
            last_write = now

    try:
        execute_tasks(tasks, runner, progress=progress, desc=loaded.spec.name, on_update=on_update)
    finally:
        table = results_table(tasks, seen_records, seen_reused)
        write_parquet_atomic(table, results_path)
    return SweepResult(table=table, out_dir=out, n_reused=len(seen_reused))
