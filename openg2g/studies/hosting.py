"""Hosting capacity: per bus, the largest datacenter the feeder hosts within voltage and thermal limits.

The datacenter is the base scenario's site, scaled in *blocks*: one block is the site's model
mix reduced by the greatest common divisor of its replica counts (the ieee13 site, 720/180/90/
480/210 replicas, is 30 blocks of 24/6/3/16/7 replicas = 160 GPUs). A site of ``k`` blocks has
``k`` times each block's replicas and ``k / k_base`` times the base non-GPU load; the training
job is removed and ``gpu_capacity`` follows the models. Each run is the base scenario shortened
to ``duration_s`` (events after it dropped), the site moved to the bus and the controller set.

A size passes when the run completes with a voltage-violation integral of at most
``tolerance_pu_s`` and (with ``thermal``, the default) an overload integral of its lines and
transformers of at most ``overload_tolerance_pct_s`` (0: no branch above its normal rating). The
table names what the first failing size broke (``binding_limit``: ``undervoltage``,
``overvoltage``, ``thermal``, several joined by ``+``, or ``failed`` for a run that did not
complete) and where (``binding_element``: the bus-phase of the worst voltage, the most loaded
branch). Per (bus, controller) the largest passing size is found by galloping up from
the base size and bisecting (:class:`~openg2g.studies.search.MaxSearch`); all searches advance in
lockstep, one batch of runs per round, on any sweep engine, and finished runs are reused when the
study is run again.

``OUT/``
  ``hosting_capacity.parquet``  one row per (bus, controller)
  ``evaluations.parquet``       every run: bus, controller, blocks, status, figures
  ``hosting_capacity.png``      capacity on the feeder map, one panel per controller
  ``hosting_capacity_bars.png`` capacity per bus, one bar per controller
  ``runs/<bus>-<controller>-k<blocks>/``  each run's outputs
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import reduce
from pathlib import Path
from typing import Any

import pandas as pd

from openg2g.studies.common import (
    BaseScenario,
    Topology,
    controller_override,
    make_task,
    safe_id,
    study_buses,
)
from openg2g.studies.search import MaxSearch
from openg2g.sweep.engines import Engine
from openg2g.sweep.runner import execute_tasks, results_table, write_parquet_atomic
from openg2g.sweep.spec import SweepError
from openg2g.sweep.tasks import COMPLETE, RunFn, RunTask, run_scenario_files

__all__ = ["HostingConfig", "ModelMix", "broken_limits", "hosting_settings", "model_mix", "run_hosting_capacity"]


@dataclass(frozen=True)
class HostingConfig:
    """Settings of a hosting-capacity study.

    :param buses: candidate buses; None = every three-phase bus off the source side.
    :param controllers: controller choices (``none`` = no controller); each gives a column.
    :param tolerance_pu_s: largest violation integral (pu.s) that still counts as hosted.
    :param thermal: also require the branch loading limit (for a grid that reports branches).
    :param overload_tolerance_pct_s: largest overload integral (%.s) that still counts as hosted.
    :param duration_s: simulated time of each run (s).
    :param max_mw: largest site considered (MW of peak facility power, estimated from the
        first run of each search).
    :param site: name of the base scenario's site to scale (None = the first).
    :param first_blocks: first size tried (None = the base scenario's size).
    :param mix: replicas per block of the site's models (None = the site's own counts over
        their greatest common divisor).
    """

    buses: Sequence[str] | None = None
    controllers: Sequence[str] = ("none", "ofo")
    tolerance_pu_s: float = 0.0
    thermal: bool = True
    overload_tolerance_pct_s: float = 0.0
    duration_s: float = 60.0
    max_mw: float = 30.0
    site: str | None = None
    first_blocks: int | None = None
    mix: Mapping[str, int] | None = None

    def __post_init__(self) -> None:
        if not (math.isfinite(self.tolerance_pu_s) and self.tolerance_pu_s >= 0):
            raise SweepError([("--tolerance-pu-s", f"must be >= 0 pu.s, got {self.tolerance_pu_s}")])
        if not (math.isfinite(self.overload_tolerance_pct_s) and self.overload_tolerance_pct_s >= 0):
            raise SweepError([("--overload-tolerance-pct-s", f"must be >= 0 %.s, got {self.overload_tolerance_pct_s}")])
        if not (math.isfinite(self.duration_s) and self.duration_s > 0):
            raise SweepError([("--duration-s", f"must be > 0 s, got {self.duration_s}")])
        if not (math.isfinite(self.max_mw) and self.max_mw > 0):
            raise SweepError([("--max-mw", f"must be > 0 MW, got {self.max_mw}")])
        if not self.controllers:
            raise SweepError([("--controller", "give at least one controller (none for no controller)")])


@dataclass(frozen=True)
class ModelMix:
    """One block of a site: replicas per model, GPUs, and the base site's size in blocks."""

    replicas: dict[str, int]
    gpus_per_replica: dict[str, int]
    base_blocks: int
    base_load_kw_per_phase: float = 0.0

    @property
    def gpus_per_block(self) -> int:
        """GPUs in one block."""
        return sum(self.replicas[m] * self.gpus_per_replica[m] for m in self.replicas)

    def describe(self) -> str:
        """``"24x Llama-3.1-8B (1 GPU) + ..."`` for titles and tables."""
        return " + ".join(f"{n}x {m} ({self.gpus_per_replica[m]} GPU)" for m, n in self.replicas.items() if n)


def model_mix(site: dict[str, Any], block: Mapping[str, int] | None = None) -> ModelMix:
    """The block of a site spec (as data).

    :param block: replicas per block of some of the site's models (the others get none); None
        divides the site's replica counts by their greatest common divisor.
    :return: the block; ``base_blocks`` is the base site's size in blocks (by GPUs, at least 1),
        and the non-GPU load is shared out per block in the same proportion.
    :raises SweepError: no replicas to scale, or ``block`` names a model the site does not serve.
    """
    models = site.get("models") or []
    gpus = {m["model"]: int(m.get("gpus_per_replica", 1)) for m in models}
    counts = {m["model"]: int(m.get("replicas", 0)) for m in models}
    if block is not None:
        unknown = sorted(set(block) - set(gpus))
        if unknown:
            raise SweepError(
                [("mix", f"models {unknown} are not served at site {site.get('name')!r}; it serves {sorted(gpus)}")]
            )
        if any(n < 0 for n in block.values()) or not any(block.values()):
            raise SweepError([("mix", f"replicas per block must be >= 0 and not all 0, got {dict(block)}")])
        replicas = {m: int(block.get(m, 0)) for m in gpus}
        per_block = sum(replicas[m] * gpus[m] for m in gpus)
        base_blocks = max(1, round(sum(counts[m] * gpus[m] for m in gpus) / per_block))
    else:
        g = reduce(math.gcd, [c for c in counts.values() if c > 0], 0)
        if g == 0:
            raise SweepError([("datacenters", f"site {site.get('name')!r} has no replicas to scale")])
        replicas = {m: c // g for m, c in counts.items()}
        base_blocks = g
    return ModelMix(
        replicas=replicas,
        gpus_per_replica=gpus,
        base_blocks=base_blocks,
        base_load_kw_per_phase=float(site.get("base_load_kw_per_phase", 0.0)) / base_blocks,
    )


def hosting_settings(
    base: BaseScenario, site_index: int, mix: ModelMix, blocks: int, bus: str, controllers: list[dict[str, Any]]
) -> dict[str, Any]:
    """Overrides for one run: shortened, site on ``bus`` at ``blocks`` blocks, given controllers."""
    i = site_index
    site = base.data["datacenters"][i]
    settings: dict[str, Any] = {f"datacenters.{i}.bus": str(bus)}
    for j, m in enumerate(site["models"]):
        settings[f"datacenters.{i}.models.{j}.replicas"] = blocks * mix.replicas[m["model"]]
    settings[f"datacenters.{i}.gpu_capacity"] = None
    settings[f"datacenters.{i}.training"] = None
    settings[f"datacenters.{i}.base_load_kw_per_phase"] = blocks * mix.base_load_kw_per_phase
    settings["events"] = base.events_within()
    settings["controllers"] = controllers
    return settings


@dataclass
class _Search:
    bus: str
    controller: str
    search: MaxSearch
    error: str | None = None
    runs: dict[int, dict[str, Any]] = field(default_factory=dict)  # blocks -> run record
    sized: bool = False


_VOLTAGE_PARTS = (
    ("undervoltage", "undervoltage_integral_pu_s", "v_min_bus_phase"),
    ("overvoltage", "overvoltage_integral_pu_s", "v_max_bus_phase"),
)
"""Each side of the band: its name, its part of the violation integral and where its extreme is."""


def broken_limits(record: Mapping[str, Any], config: HostingConfig) -> list[tuple[str, str | None]]:
    """The limits a run broke, as ``(limit, element)`` pairs; empty when the size is hosted.

    ``limit`` is ``failed`` (the run did not complete), ``undervoltage`` or ``overvoltage`` (the
    violation integral is above ``tolerance_pu_s``; each part that contributes, with the bus-phase
    of Vmin or Vmax; ``voltage`` when the summary does not split the integral) or ``thermal`` (the overload integral is above ``overload_tolerance_pct_s``,
    with the most loaded branch).
    """
    summary = record.get("summary") or {}
    if record["status"] != COMPLETE or summary.get("violation_integral_pu_s") is None:
        return [("failed", None)]
    broken: list[tuple[str, str | None]] = []
    if float(summary["violation_integral_pu_s"]) > config.tolerance_pu_s + 1e-12:
        parts = [
            (limit, summary.get(where))
            for limit, part, where in _VOLTAGE_PARTS
            if float(summary.get(part) or 0.0) > 0.0
        ]
        broken += parts or [("voltage", None)]
    overload = summary.get("overload_integral_pct_s")
    if config.thermal and overload is not None and float(overload) > config.overload_tolerance_pct_s + 1e-12:
        broken.append(("thermal", summary.get("max_loading_branch")))
    return broken


def run_hosting_capacity(
    base: BaseScenario,
    config: HostingConfig,
    out_dir: Path,
    engine: Engine,
    *,
    topology: Topology | None = None,
    run_fn: RunFn = run_scenario_files,
    progress: bool = False,
) -> pd.DataFrame:
    """Run the study (resuming earlier runs) and write its tables; returns the capacity table.

    :param base: base scenario with the study's fixed overrides (``duration_s`` is set here).
    :param topology: the feeder's topology (needed when ``config.buses`` is None, and for plots).
    :raises SweepError: no buses to study, or the base scenario has no site to scale.
    """
    base = base.with_duration(config.duration_s)
    site_index = base.site_index(config.site)
    mix = model_mix(base.data["datacenters"][site_index], config.mix)
    buses = study_buses(config.buses, topology, "--buses", "give the buses (the feeder's topology is not available)")
    if not buses:
        raise SweepError([("--buses", "no three-phase buses to study")])
    first = config.first_blocks or mix.base_blocks
    controllers = {c: controller_override(c, base.path) for c in config.controllers}
    searches = [_Search(bus, ctrl, MaxSearch(first=first, k_max=10**6)) for ctrl in config.controllers for bus in buses]
    out = Path(out_dir)
    runs_dir = out / "runs"
    all_tasks: list[RunTask] = []
    all_records: dict[str, dict[str, Any]] = {}
    reused_all: set[str] = set()
    round_no = 0
    with engine:
        while True:
            batch: list[tuple[_Search, int, RunTask]] = []
            for s in searches:
                k = None if s.error else s.search.propose()
                if k is None:
                    continue
                run_id = f"{safe_id(s.bus)}-{safe_id(s.controller)}-k{k:05d}"
                params = {"bus": s.bus, "controller": s.controller, "blocks": k, "gpus": k * mix.gpus_per_block}
                settings = hosting_settings(base, site_index, mix, k, s.bus, controllers[s.controller])
                task = make_task(base, run_id, len(all_tasks) + len(batch), params, settings, runs_dir, run_fn)
                batch.append((s, k, task))
            if not batch:
                break
            round_no += 1
            tasks = [t for _, _, t in batch]
            records, reused = execute_tasks(
                tasks, engine, progress=progress, desc=f"hosting capacity, round {round_no}"
            )
            all_tasks += tasks
            all_records.update(records)
            reused_all |= reused
            for s, k, task in batch:
                _advance(s, k, records[task.run_id], config)
    evaluations = results_table(all_tasks, all_records, reused_all)
    table = pd.DataFrame([_row(s, mix, config) for s in searches])
    out.mkdir(parents=True, exist_ok=True)
    write_parquet_atomic(evaluations, out / "evaluations.parquet")
    write_parquet_atomic(table, out / "hosting_capacity.parquet")
    _plot(table, topology, config, out)
    return table


def _plot(table: pd.DataFrame, topology: Topology | None, config: HostingConfig, out: Path) -> None:
    """The capacity per bus as bars, and on the feeder map when the topology is known."""
    if table.empty:
        return
    from openg2g.studies.plots import plot_bus_values, plot_grouped_bars

    title = f"hosting capacity, tolerance {config.tolerance_pu_s:g} pu.s, {config.duration_s:g} s runs"
    plot_grouped_bars(
        table,
        category="bus",
        value="capacity_peak_mw",
        group="controller",
        label="hosting capacity (MW peak)",
        title=title,
        path=out / "hosting_capacity_bars.png",
    )
    if topology is not None:
        plot_bus_values(
            topology,
            table,
            value="capacity_peak_mw",
            panel="controller",
            label="hosting capacity (MW peak)",
            title=f"{topology.name}: {title}",
            path=out / "hosting_capacity.png",
        )


def _advance(s: _Search, k: int, record: dict[str, Any], config: HostingConfig) -> None:
    """Take the run of ``k`` blocks into its search; the first run that reports its peak power
    bounds the search at ``config.max_mw``. An invalid run ends the search with its error."""
    if record["status"] == "invalid":
        s.error = record["error"]
        return
    s.runs[k] = record
    s.search.record(k, not broken_limits(record, config))
    peak = record["summary"].get("dc_peak_mw")
    if not s.sized and peak:
        s.search.k_max = max(1, min(s.search.k_max, math.floor(config.max_mw * k / float(peak))), s.search.lo)
        s.sized = True


def _row(s: _Search, mix: ModelMix, config: HostingConfig) -> dict[str, Any]:
    lo, hi = s.search.lo, s.search.hi
    at = s.runs[lo]["summary"] if lo in s.runs else {}
    above = (s.runs[hi]["summary"] or {}) if hi in s.runs else {}
    broken = broken_limits(s.runs[hi], config) if hi in s.runs else []
    hours = config.duration_s / 3600.0
    return {
        "bus": s.bus,
        "controller": s.controller,
        "capacity_blocks": lo,
        "capacity_gpus": lo * mix.gpus_per_block,
        "capacity_peak_mw": at.get("dc_peak_mw", 0.0 if lo == 0 else float("nan")),
        "capacity_mean_mw": at["energy_mwh"] / hours if "energy_mwh" in at else (0.0 if lo == 0 else float("nan")),
        "violation_integral_pu_s": at.get("violation_integral_pu_s", float("nan")),
        "v_min_pu": at.get("v_min_pu", float("nan")),
        "first_failing_blocks": hi,
        "first_failing_peak_mw": above.get("dc_peak_mw", float("nan")),
        "first_failing_violation_pu_s": above.get("violation_integral_pu_s", float("nan")),
        "first_failing_max_loading_pct": above.get("max_loading_pct", float("nan")),
        "binding_limit": "+".join(limit for limit, _ in broken) or None,
        "binding_element": "+".join(e or "?" for limit, e in broken if limit != "failed") or None,
        "max_loading_pct": at.get("max_loading_pct", float("nan")),
        "capped": s.search.capped,
        "n_runs": len(s.search.history),
        "tolerance_pu_s": config.tolerance_pu_s,
        "overload_tolerance_pct_s": config.overload_tolerance_pct_s if config.thermal else None,
        "model_mix": mix.describe(),
        "error": s.error,
    }
