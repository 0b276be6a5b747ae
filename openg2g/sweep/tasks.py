"""One run of a sweep: what a worker receives, what it writes, and what it returns.

A worker runs :func:`execute_task`, which never raises for a bad run: an invalid scenario
comes back with status ``invalid`` and the validation problems, a failed run with status
``failed`` and the error. Each run directory holds

``run.json``      the task (run id, parameters, overrides, fingerprint), written first
``summary.json``  the engine's summary, or one written here for ``invalid`` / lost runs
``scenario.yaml`` the scenario as run (overrides applied), for valid runs
(everything else the engine writes)
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from openg2g.core.atomic import write_json_atomic
from openg2g.core.errors import ScenarioError

__all__ = [
    "COMPLETE",
    "RunFn",
    "RunTask",
    "completed_record",
    "execute_task",
    "lost_record",
    "refuse_replacing",
    "replaced_run",
    "run_scenario_files",
]

COMPLETE = "complete"

RunFn = Callable[[str, tuple[str, ...], Path], Mapping[str, Any]]
"""``run_fn(scenario_path, overrides, out_dir) -> summary``; raises :class:`ScenarioError` if invalid."""


def run_scenario_files(scenario: str, overrides: tuple[str, ...], out_dir: Path) -> Mapping[str, Any]:
    """The default run function: load, validate and run a scenario with overrides into ``out_dir``
    (which keeps the scenario as run, ``scenario.yaml``)."""
    from openg2g.scenario.loader import load_scenario
    from openg2g.scenario.preflight import check_start
    from openg2g.scenario.run import run_scenario

    loaded = load_scenario(scenario, overrides)
    check_start(loaded)  # a bad event or controller parameter makes the run invalid, not failed mid-run
    return run_scenario(loaded, out_dir).summary


@dataclass(frozen=True)
class RunTask:
    """Everything a worker needs for one run (picklable; paths are absolute strings).

    :param run_id: directory name under the sweep output folder.
    :param index: position in the expansion.
    :param params: the varied parameters of this run.
    :param scenario: base scenario file.
    :param overrides: fixed overrides, then the parameters', as ``dotted.key=value``.
    :param out_dir: this run's output directory.
    :param fingerprint: hash of base scenario bytes and overrides; a finished run counts as
        done on a rerun only if its fingerprint matches.
    :param run_fn: module-level function doing the run (tests and benchmarks pass a toy).
    """

    run_id: str
    index: int
    params: Mapping[str, Any]
    scenario: str
    overrides: tuple[str, ...]
    out_dir: str
    fingerprint: str
    run_fn: RunFn = field(default=run_scenario_files, compare=False)

    def meta(self) -> dict[str, Any]:
        """The ``run.json`` contents."""
        meta = asdict(self)
        meta.pop("run_fn")
        meta["overrides"] = list(self.overrides)
        meta["params"] = dict(self.params)
        return meta


def _peak_site_power_mw(out_dir: Path) -> float | None:
    """Largest total datacenter power over the run (MW), from the ``datacenter`` table."""
    table = out_dir / "datacenter"
    if not table.is_dir() or not any(table.glob("*.parquet")):
        return None
    import pandas as pd

    df = pd.read_parquet(table, columns=["t_s", "power_w"])
    if df.empty:
        return None
    return float(df.groupby("t_s")["power_w"].sum().max()) / 1e6


def _record(task: RunTask, status: str, error: str | None, summary: Mapping[str, Any]) -> dict[str, Any]:
    return {"run_id": task.run_id, "index": task.index, "status": status, "error": error, "summary": dict(summary)}


def execute_task(task: RunTask) -> dict[str, Any]:
    """Run one task in a fresh directory and return its record; errors are data, not exceptions.

    :return: ``{"run_id", "index", "status", "error", "summary"}``; status is ``complete``,
        ``invalid`` (validation problems in ``error``) or ``failed``.
    """
    out = Path(task.out_dir)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    write_json_atomic(out / "run.json", task.meta())
    try:
        summary = dict(task.run_fn(task.scenario, task.overrides, out))
    except ScenarioError as exc:
        error = "; ".join(f"{loc}: {msg}" for loc, msg in exc.problems)
        write_json_atomic(out / "summary.json", {"status": "invalid", "error": error})
        return _record(task, "invalid", error, {})
    except Exception as exc:  # noqa: BLE001 - a failed run is a result of the sweep
        error = f"{type(exc).__name__}: {exc}"
        summary_path = out / "summary.json"
        summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
        summary.update(status="failed", error=error)
        write_json_atomic(summary_path, summary)
        return _record(task, "failed", error, summary)
    peak = _peak_site_power_mw(out)
    if peak is not None:
        summary["dc_peak_mw"] = peak
    status = str(summary.get("status", COMPLETE))
    summary["status"] = status
    write_json_atomic(out / "summary.json", summary)
    return _record(task, status, summary.get("error"), summary)


def lost_record(task: RunTask, error: str) -> dict[str, Any]:
    """Record (and write to ``summary.json``) a run whose worker died or was lost."""
    out = Path(task.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / "run.json", task.meta())
    write_json_atomic(out / "summary.json", {"status": "failed", "error": error})
    return _record(task, "failed", error, {})


def replaced_run(task: RunTask) -> str | None:
    """The complete run of other inputs (another fingerprint) that running ``task`` would replace,
    described for a message, or ``None``."""
    earlier = _earlier_run(task)
    if earlier is None or earlier[0] == task.fingerprint or earlier[1].get("status") != COMPLETE:
        return None
    summary = earlier[1]
    return f"{task.run_id} (violation integral {summary.get('violation_integral_pu_s')} pu.s)"


def refuse_replacing(tasks: Sequence[RunTask], where: Path) -> None:
    """Stop before any run if one of ``tasks`` would replace a complete run of other inputs.

    :raises ScenarioError: naming how many and the first few.
    """
    replaced = [r for r in map(replaced_run, tasks) if r is not None]
    if replaced:
        shown = ", ".join(replaced[:3]) + (f" and {len(replaced) - 3} more" if len(replaced) > 3 else "")
        problem = (
            f"{len(replaced)} complete runs were made from other inputs and would be replaced: {shown}; "
            "give --overwrite to replace them, or another folder"
        )
        raise ScenarioError([(str(where), problem)])


def completed_record(task: RunTask) -> dict[str, Any] | None:
    """The record of an earlier complete run of this exact task, or None if it must run."""
    earlier = _earlier_run(task)
    if earlier is None or earlier[0] != task.fingerprint or earlier[1].get("status") != COMPLETE:
        return None
    return _record(task, COMPLETE, None, earlier[1])


def _earlier_run(task: RunTask) -> tuple[object, dict[str, Any]] | None:
    """The fingerprint and summary of the run in ``task``'s folder, or None if there is none readable."""
    out = Path(task.out_dir)
    try:
        meta = json.loads((out / "run.json").read_text())
        summary = json.loads((out / "summary.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or not isinstance(summary, dict):
        return None
    return meta.get("fingerprint"), summary
