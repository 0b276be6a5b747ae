"""Hosting capacity: per bus, the range of datacenter sizes the feeder hosts within voltage and thermal limits.

The datacenter is the base scenario's site, scaled in *blocks*: one block is the site's model
mix reduced by the greatest common divisor of its replica counts (the ieee13 site, 720/180/90/
480/210 replicas, is 30 blocks of 24/6/3/16/7 replicas = 160 GPUs). A site of ``k`` blocks has
``k`` times each block's replicas and ``k / k_base`` times the base non-GPU load; the training
job is removed and ``gpu_capacity`` follows the models. Each run is the base scenario shortened
to ``duration_s`` (events after it dropped), the site moved to the bus and the controller set.

The limits split by how they move with the site. Under-voltage and branch overload grow with it
(as does a run that fails): they give the *largest* size that passes. Over-voltage shrinks as the
site grows (a light feeder sits high in the band): it gives the *smallest* size that passes. A
size is hosted when the run completes, its under-voltage part and its over-voltage part of the
violation integral are each at most ``tolerance_pu_s`` (so the whole integral is at most twice
it; a summary without the split counts its whole integral as a growing limit), and (with
``thermal``, the default) the overload integral of its lines and transformers is at most
``overload_tolerance_pct_s`` (0: no branch above its normal rating).

Per controller the feeder is first run without the site (0 blocks). If that run already breaks a
limit the table says so (``baseline_limits``, ``baseline_violation_pu_s``): over-voltage there
only raises the smallest size, a growing limit means no size is hosted. Then per (bus,
controller) a :class:`~openg2g.studies.search.RangeSearch` gallops up from the base size and
bisects both ends: ``min_blocks``, the smallest size free of over-voltage, and the largest size
free of the growing limits. The hosted range is ``[min_blocks, capacity_blocks]``; when the ends
cross it is empty (``empty_range``, capacity 0) and ``min_blocks`` and ``first_failing_blocks``
still say where each limit sets in. ``binding_limit`` names only the growing limits the first size
above the capacity broke (``undervoltage``, ``thermal``, ``voltage``, ``failed``, joined by
``+``) and ``binding_element`` where (the bus-phase of Vmin, the most loaded branch): shrinking
the site cannot fix over-voltage, so it never binds the capacity; it is ``lower_limit`` (with
``lower_element``, the bus-phase of Vmax) when it sets the smallest size.

With a controller the first seconds of a run, before it acts, would decide the answer; violations
before ``settle_s`` (default :data:`DEFAULT_SETTLE_S` with a controller, 0 without) are not counted:
the runs set the scenario's ``outputs.metrics_start_s``, so each run's summary says which window
its figures cover, and the table has the ``settle_s`` of each controller.

All searches advance in lockstep, one batch of runs per round, on any sweep engine, and finished
runs are reused when the study is run again.

``OUT/``
  ``hosting_capacity.parquet``  one row per (bus, controller)
  ``evaluations.parquet``       every run: bus, controller, blocks, status, figures
  ``hosting_capacity.png``      capacity on the feeder map, one panel per controller
  ``hosting_capacity_bars.png`` capacity per bus, one bar per controller
  ``runs/<bus>-<controller>-k<blocks>/``  each run's outputs (``baseline-<controller>-k00000/``
  the feeder without the site)
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
from openg2g.studies.search import RangeSearch
from openg2g.sweep.engines import Engine
from openg2g.sweep.runner import NONCONVERGED, execute_tasks, results_table, write_parquet_atomic
from openg2g.sweep.spec import SweepError
from openg2g.sweep.tasks import COMPLETE, RunFn, RunTask, run_scenario_files

__all__ = [
    "DEFAULT_SETTLE_S",
    "GROWING_LIMITS",
    "HostingConfig",
    "ModelMix",
    "broken_limits",
    "hosting_settings",
    "model_mix",
    "run_hosting_capacity",
]

DEFAULT_SETTLE_S = 10.0
"""Settling window (s) of a study with a controller: ten of the bundled controllers' 1 s control
steps. Measured on ieee13 with 30 blocks at bus 675: OFO lifts Vmin from 0.945 pu (first 5 s) to
the 0.95 pu limit by 10 s, then holds it there; the site's violation starts with its first sample,
before any controller has acted."""

GROWING_LIMITS = frozenset({"undervoltage", "voltage", "thermal", "failed"})
"""Limits a larger site breaks more (a summary without the voltage split counts as growing)."""


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
    :param settle_s: violations before this time (s) are not counted; None = 0 without a
        controller and :data:`DEFAULT_SETTLE_S` with one.
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
    settle_s: float | None = None

    def __post_init__(self) -> None:
        if not (math.isfinite(self.tolerance_pu_s) and self.tolerance_pu_s >= 0):
            raise SweepError([("--tolerance-pu-s", f"must be >= 0 pu.s, got {self.tolerance_pu_s}")])
        if not (math.isfinite(self.overload_tolerance_pct_s) and self.overload_tolerance_pct_s >= 0):
            raise SweepError([("--overload-tolerance-pct-s", f"must be >= 0 %.s, got {self.overload_tolerance_pct_s}")])
        if not (math.isfinite(self.duration_s) and self.duration_s > 0):
            raise SweepError([("--duration-s", f"must be > 0 s, got {self.duration_s}")])
        if not (math.isfinite(self.max_mw) and self.max_mw > 0):
            raise SweepError([("--max-mw", f"must be > 0 MW, got {self.max_mw}")])
        if self.settle_s is not None and not (math.isfinite(self.settle_s) and 0 <= self.settle_s < self.duration_s):
            raise SweepError(
                [("--settle-s", f"must be >= 0 s and below duration_s ({self.duration_s:g} s), got {self.settle_s}")]
            )
        if self.settle_s is None and any(c != "none" for c in self.controllers) and self.duration_s <= DEFAULT_SETTLE_S:
            why = f"leaves nothing after a controller's default {DEFAULT_SETTLE_S:g} s settling window; give --settle-s"
            raise SweepError([("--duration-s", f"{self.duration_s:g} s {why}")])
        if not self.controllers:
            raise SweepError([("--controller", "give at least one controller (none for no controller)")])

    def settle_for(self, controller: str) -> float:
        """The settling window (s) of runs with ``controller``."""
        if self.settle_s is not None:
            return self.settle_s
        return 0.0 if controller == "none" else DEFAULT_SETTLE_S


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
    base: BaseScenario,
    site_index: int,
    mix: ModelMix,
    blocks: int,
    bus: str,
    controllers: list[dict[str, Any]],
    settle_s: float = 0.0,
) -> dict[str, Any]:
    """Overrides for one run: shortened, site on ``bus`` at ``blocks`` blocks, given controllers,
    figures counted from ``settle_s`` (no override at 0, so such runs are the scenario's own)."""
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
    if settle_s:
        settings["outputs.metrics_start_s"] = settle_s
    return settings


@dataclass
class _Search:
    bus: str
    controller: str
    search: RangeSearch
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

    ``limit`` is ``failed`` (the run did not complete, or some of its grid steps did not converge:
    its voltage figures then cover the converged steps only), ``undervoltage`` or ``overvoltage`` (that
    part of the violation integral is above ``tolerance_pu_s``, with the bus-phase of Vmin or
    Vmax; ``voltage``, unnamed, when the summary does not split the integral and the whole is
    above it) or ``thermal`` (the overload integral is above ``overload_tolerance_pct_s``, with
    the most loaded branch).
    """
    summary = record.get("summary") or {}
    if record["status"] != COMPLETE or summary.get("violation_integral_pu_s") is None or summary.get(NONCONVERGED):
        return [("failed", None)]
    broken: list[tuple[str, str | None]] = []
    if all(summary.get(part) is None for _, part, _ in _VOLTAGE_PARTS):
        if float(summary["violation_integral_pu_s"]) > config.tolerance_pu_s + 1e-12:
            broken.append(("voltage", None))
    else:
        broken += [
            (limit, summary.get(where))
            for limit, part, where in _VOLTAGE_PARTS
            if float(summary.get(part) or 0.0) > config.tolerance_pu_s + 1e-12
        ]
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
    searches = [_Search(bus, ctrl, RangeSearch.new(first, 10**6)) for ctrl in config.controllers for bus in buses]
    base_bus = str(base.data["datacenters"][site_index]["bus"])
    out = Path(out_dir)
    runs_dir = out / "runs"
    all_tasks: list[RunTask] = []
    all_records: dict[str, dict[str, Any]] = {}
    reused_all: set[str] = set()

    def task(name: str, bus: str, controller: str, k: int, index: int) -> RunTask:
        params = {"bus": bus, "controller": controller, "blocks": k, "gpus": k * mix.gpus_per_block}
        settings = hosting_settings(
            base, site_index, mix, k, bus, controllers[controller], config.settle_for(controller)
        )
        return make_task(base, f"{name}-{safe_id(controller)}-k{k:05d}", index, params, settings, runs_dir, run_fn)

    # round 1: the feeder without the site, once per controller, shared by its searches
    batch = [
        ([s for s in searches if s.controller == c], task("baseline", base_bus, c, 0, i))
        for i, c in enumerate(config.controllers)
    ]
    round_no = 0
    with engine:
        while batch:
            round_no += 1
            tasks = [t for _, t in batch]
            desc = "hosting capacity, without the site" if round_no == 1 else f"hosting capacity, round {round_no}"
            records, reused = execute_tasks(tasks, engine, progress=progress, desc=desc)
            all_tasks += tasks
            all_records.update(records)
            reused_all |= reused
            for targets, t in batch:
                for s in targets:
                    _advance(s, int(t.params["blocks"]), records[t.run_id], config)
            proposals = [(s, k) for s in searches if not s.error for k in s.search.propose()]
            batch = [
                ([s], task(safe_id(s.bus), s.bus, s.controller, k, len(all_tasks) + n))
                for n, (s, k) in enumerate(proposals)
            ]
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
    bounds the search at ``config.max_mw``. An invalid run, or results that are not monotone in
    size, end the search with the reason."""
    if record["status"] == "invalid":
        s.error = record["error"]
        return
    s.runs[k] = record
    limits = {limit for limit, _ in broken_limits(record, config)}
    try:
        s.search.record(k, grows_ok=not limits & GROWING_LIMITS, shrinks_ok="overvoltage" not in limits)
    except ValueError as exc:
        s.error = f"limits not monotone in the site's size ({exc})"
        return
    peak = record["summary"].get("dc_peak_mw")
    if not s.sized and peak:
        s.search.set_k_max(min(s.search.upper.k_max, math.floor(config.max_mw * k / float(peak))))
        s.sized = True


def _figures(record: Mapping[str, Any] | None, columns: Mapping[str, str]) -> dict[str, Any]:
    """Table column -> the run's summary figure named beside it (NaN without a run or a figure)."""
    summary = (record or {}).get("summary") or {}
    return {column: summary.get(key, float("nan")) for column, key in columns.items()}


def _same(*keys: str, prefix: str = "") -> dict[str, str]:
    """Columns named as the summary figures, after ``prefix``."""
    return {f"{prefix}{key}": key for key in keys}


def _joined(broken: Sequence[tuple[str, str | None]]) -> tuple[str | None, str | None]:
    """``("undervoltage+thermal", "611.c+line.x")`` for the table, None when nothing is broken."""
    limits = "+".join(limit for limit, _ in broken) or None
    elements = "+".join(e or "?" for limit, e in broken if limit != "failed") or None
    return limits, elements


def _row(s: _Search, mix: ModelMix, config: HostingConfig) -> dict[str, Any]:
    search = s.search
    bounds = search.bounds
    low = search.lower.hi  # known even when the range is empty
    cap = search.upper.lo if bounds is not None else 0
    # the first size that broke a growing limit: above the capacity, or the empty feeder itself
    above = 0 if search.nothing_grows_ok else search.upper.hi
    failing = s.runs.get(above) if above is not None else None
    binding = _joined([b for b in broken_limits(failing, config) if b[0] in GROWING_LIMITS] if failing else [])
    below = s.runs.get(search.lower.lo) if search.lower.lo is not None else None
    lower = _joined([b for b in broken_limits(below, config) if b[0] == "overvoltage"] if below else [])
    baseline = s.runs.get(0)
    base_limits = _joined(broken_limits(baseline, config) if baseline else [])
    at = s.runs.get(cap) if bounds is not None else None

    def peak(k: int | None) -> float:
        """The site's peak (MW) at ``k`` blocks: 0 without a site, NaN when not known."""
        if k == 0:
            return 0.0
        return float(_figures(s.runs.get(k) if k is not None else None, _same("dc_peak_mw"))["dc_peak_mw"])

    energy = _figures(at, _same("energy_mwh"))["energy_mwh"]
    return {
        "bus": s.bus,
        "controller": s.controller,
        "settle_s": config.settle_for(s.controller),
        "capacity_blocks": cap,
        "capacity_gpus": cap * mix.gpus_per_block,
        "capacity_peak_mw": peak(cap),
        "capacity_mean_mw": 0.0 if cap == 0 else energy / (config.duration_s / 3600.0),
        "min_blocks": low,
        "min_gpus": None if low is None else low * mix.gpus_per_block,
        "min_peak_mw": peak(low),
        "empty_range": bounds is None and s.error is None,
        **_figures(at, _same("violation_integral_pu_s", "v_min_pu", "v_max_pu")),
        "first_failing_blocks": above,
        "first_failing_peak_mw": peak(above),
        **_figures(failing, _same("violation_integral_pu_s", "max_loading_pct", prefix="first_failing_")),
        "binding_limit": binding[0],
        "binding_element": binding[1],
        "lower_limit": lower[0],
        "lower_element": lower[1],
        "baseline_limits": base_limits[0],
        "baseline_element": base_limits[1],
        **_figures(
            baseline,
            {
                "baseline_violation_pu_s": "violation_integral_pu_s",
                "baseline_overload_pct_s": "overload_integral_pct_s",
            },
        ),
        **_figures(at, _same("max_loading_pct")),
        "capped": bounds is not None and search.upper.capped,
        "n_runs": len(s.runs),
        "tolerance_pu_s": config.tolerance_pu_s,
        "overload_tolerance_pct_s": config.overload_tolerance_pct_s if config.thermal else None,
        "model_mix": mix.describe(),
        "error": s.error,
    }
