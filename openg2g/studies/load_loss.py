"""Load loss: per ride-through setting, the MW a disturbance takes off the grid, and the largest
simultaneous loss the system holds within its frequency and voltage limits.

The question grid operators ask first of a region of datacenters (NERC's review of the January 2025
Virginia incident, ERCOT's large-load ride-through work): when a fault comes, how many MW trip or
transfer to backup under each ride-through setting, and how large a loss at once can the system
stand. Each **setting** (:class:`~openg2g.studies.spec.RideThroughSetting`) gives every site (or the
listed ones) a ``ride_through``, or keeps the base scenario's own; each setting's run is the base
scenario (its ``disturbances`` as they are) with that ride-through, its figures from the run's
summary (:mod:`openg2g.engine.load_loss`, the ride-through events, the bulk system's frequency).

**Limits** (:class:`~openg2g.studies.spec.LoadLossLimits`). A run is within them when it completes
with every grid step converged, its frequency nadir is at least ``f_min_hz`` and its zenith at most
``f_max_hz`` (over the whole run), and its lowest and highest monitored bus-phase voltage *after the
last disturbance* are within ``v_min_pu`` and ``v_max_pu``: every run sets ``outputs.metrics_start_s``
to the end of the last disturbance (its last clearing, reclose or sag point) plus
``voltage_after_s``, so the summary's ``v_min_pu`` and ``v_max_pu`` count from there. The voltages
during a fault are what the ride-through curves judge, not the limits. A bus-phase cut off by a
line left open reads 0 pu, below any ``v_min_pu``. A run in which some site's ride-through acts
before the first disturbance (its steady voltage is outside its curves: a site too large for its
transformer sags below its UPS window) breaks ``before_disturbance``: it measures no loss at the
disturbance.

**Holdable loss** (:class:`~openg2g.studies.spec.HoldableSearch`). Per setting, every site's load is
multiplied by ``m``: each model's replicas and the training job's GPUs rounded half up, the
non-GPU base load, ``gpu_capacity`` (rounded up, at least the GPUs in use) and ``pool_replicas``
alike; the ride-through blocks, their UPS energy and chargers, the events and the rest of the grid
stay as they are (a larger site's UPS lasts proportionally less, which changes its UPS energy and
tokens not served, not the MW it takes off the grid). The multipliers searched are
``multiplier_min`` to ``multiplier_max`` in equal steps no wider than ``tolerance``; a
:class:`~openg2g.studies.search.MaxSearch` tries the step nearest 1 first, gallops up and bisects
to the largest ``m`` whose run is within every limit (``holdable_multiplier``). The figure,
``holdable_mw``, is the largest ``load_lost_mw`` of the search's runs within every limit: **the
largest load the system loses at once within its limits** under the setting, beside what the
setting loses at the base size (``load_lost_mw``). The search assumes the limits break more as the
sites grow (a larger loss lifts the zenith; a heavier system sags lower), and then the figure is
the loss at ``holdable_multiplier``; ``loss_monotone`` says whether the MW lost did grow with the
multiplier (the zenith also depends on when the sites leave: sites leaving one after another lift
it less than the same MW at once). A run within the limits above one beyond them ends the search
with ``holdable_error``. A search capped at ``multiplier_max`` (``holdable_capped``) gives a lower
bound; none within the limits down to ``multiplier_min`` leaves ``holdable_mw`` NaN. The run at
``m = 1`` is the setting's own run.

Every run is kept under ``runs/``; a rerun of the same study reuses the complete ones (their
inputs' fingerprints match) and the searches take the same steps, so an interrupted study resumes.

``OUT/``
  ``load_loss.parquet``          one row per setting (columns: :func:`setting_row`)
  ``load_loss_sites.parquet``    one row per setting and site (columns: :func:`site_rows`)
  ``evaluations.parquet``        every run: setting, multiplier, status, summary figures, limits broken
  ``load_loss.png``              MW lost per setting stacked by site, the simultaneous loss and the holdable figure
  ``load_loss_frequency.png``    the frequency zenith (nadir) against MW lost of every run, the limit drawn
  ``runs/<setting>-base/``       each setting's run at the base size
  ``runs/<setting>-m<m>/``       each search run (``m`` to four decimals)
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import ValidationError

from openg2g.core.config import field_path
from openg2g.core.errors import ScenarioError
from openg2g.scenario.disturbances import DisturbanceSpec, plan
from openg2g.studies.common import BaseScenario, make_task
from openg2g.studies.search import MaxSearch
from openg2g.studies.spec import HoldableSearch, LoadLossLimits, LoadLossSpec, RideThroughSetting
from openg2g.sweep.engines import Engine
from openg2g.sweep.runner import NONCONVERGED, execute_tasks, results_table, write_parquet_atomic
from openg2g.sweep.spec import SweepError
from openg2g.sweep.tasks import COMPLETE, RunFn, RunTask, run_scenario_files

__all__ = [
    "LoadLossResult",
    "broken_limits",
    "check_settings",
    "check_study",
    "disturbances_end_s",
    "ride_through_settings",
    "run_load_loss",
    "scale_settings",
    "search_multipliers",
    "setting_row",
    "site_rows",
]


def disturbances_end_s(base: BaseScenario) -> Fraction:
    """When the base scenario's last disturbance ends: its last clearing, reclose or sag point (s).

    :raises SweepError: the base scenario has no disturbances, or they do not validate (each
        problem naming the base file and field).
    """
    raw = base.data.get("disturbances")
    if not raw:
        raise SweepError([(f"{base.path}: disturbances", "the base scenario has no disturbances to study")])
    try:
        spec = DisturbanceSpec.model_validate(raw)
    except ValidationError as exc:
        raise SweepError(
            [(f"{base.path}: disturbances.{field_path(e['loc'])}", e["msg"]) for e in exc.errors()]
        ) from None
    # the records do not depend on the grid period; the window step always divides itself
    records = plan(spec, spec.window.step_s, base.duration_s).records
    return max(r.end_s for r in records)


def _frequency_f0_hz(base: BaseScenario) -> float | None:
    """The nominal frequency of the base scenario's ``grid.frequency`` (Hz), None without one."""
    from openg2g.grid.frequency import SystemFrequencySpec

    grid = base.data.get("grid")
    raw = grid.get("frequency") if isinstance(grid, dict) else None
    if raw is None:
        return None
    try:
        return float(SystemFrequencySpec.model_validate(raw).f0_hz)
    except ValidationError:
        return float("nan")  # the scenario's own validation reports it, with the run


def _scaled(count: int, multiplier: float) -> int:
    """``count * multiplier`` rounded half up (the same on every platform, unlike ``round``)."""
    return math.floor(count * multiplier + 0.5)


def check_study(spec: LoadLossSpec, base: BaseScenario) -> list[tuple[str, str]]:
    """Problems of a load-loss study on its base scenario, as ``(field, message)``.

    Checks: the base has sites and disturbances; frequency limits have a ``grid.frequency`` and
    lie on either side of its nominal frequency; the runs last past the point voltages count from;
    each setting's sites exist; at ``multiplier_min`` every model keeps a replica and the training
    job a GPU. Disturbances that do not validate are left to the scenario's own validation.
    """
    problems: list[tuple[str, str]] = []
    sites = [s.get("name") for s in base.data.get("datacenters") or [] if isinstance(s, dict)]
    if not sites:
        problems.append(("base", f"{base.path} has no datacenter site: there is no load to lose"))
    if not base.data.get("disturbances"):
        problems.append(("base", f"{base.path} has no disturbances: a load-loss study needs at least one"))
    else:
        try:
            start = disturbances_end_s(base) + spec.limits.voltage_after_s
        except SweepError:
            start = None
        try:
            duration = base.duration_s
        except ValueError:
            duration = None  # a bad duration: the scenario's own validation reports it
        if start is not None and duration is not None and start >= duration:
            problems.append(
                (
                    "limits.voltage_after_s",
                    (
                        f"voltages would count from {float(start):g} s (the last disturbance's end plus "
                        f"voltage_after_s), but the runs end at {float(duration):g} s: lengthen duration_s (set)"
                    ),
                )
            )
    limits = spec.limits
    f0 = _frequency_f0_hz(base)
    for name, value in (("f_min_hz", limits.f_min_hz), ("f_max_hz", limits.f_max_hz)):
        if value is None:
            continue
        if f0 is None:
            problems.append(
                (f"limits.{name}", f"{base.path} has no grid.frequency: without it the runs have no frequency to judge")
            )
        elif math.isfinite(f0) and (value >= f0 if name == "f_min_hz" else value <= f0):
            side = "below" if name == "f_min_hz" else "above"
            problems.append((f"limits.{name}", f"{value:g} Hz is not {side} the nominal {f0:g} Hz of grid.frequency"))
    for name, setting in spec.settings.items():
        for i, site in enumerate(setting.sites or []):
            if site not in sites:
                problems.append((f"settings.{name}.sites.{i}", f"no site {site!r} in {base.path}; sites: {sites}"))
    if spec.holdable is not None:
        problems += _smallest_size(base, spec.holdable)
    return problems


def _smallest_size(base: BaseScenario, holdable: HoldableSearch) -> list[tuple[str, str]]:
    """A problem per model (and training job) that ``multiplier_min`` rounds to nothing."""
    m = holdable.multiplier_min
    out = []
    for site in base.data.get("datacenters") or []:
        counts = [(f"model {mod.get('model')!r}", int(mod.get("replicas", 0))) for mod in site.get("models") or []]
        if site.get("training"):
            counts.append(("training job", int(site["training"].get("gpus", 0))))
        for what, n in counts:
            if n > 0 and _scaled(n, m) < 1:
                out.append(
                    (
                        "holdable.multiplier_min",
                        (
                            f"{m:g} leaves the {what} of site {site.get('name')!r} ({n}) with none: "
                            f"give at least {0.5 / n:.3g}"
                        ),
                    )
                )
    return out


def ride_through_settings(base: BaseScenario, setting: RideThroughSetting) -> dict[str, Any]:
    """Overrides giving the setting's ``ride_through`` to its sites (none for ``{}``)."""
    if setting.own:
        return {}
    value = None if setting.ride_through is None else setting.ride_through.model_dump(mode="json")
    out: dict[str, Any] = {}
    for i, site in enumerate(base.data["datacenters"]):
        if setting.sites is None or site.get("name") in setting.sites:
            out[f"datacenters.{i}.ride_through"] = value
    return out


def scale_settings(base: BaseScenario, multiplier: float) -> dict[str, Any]:
    """Overrides making every site ``multiplier`` times its size (module docstring); none at 1."""
    if multiplier == 1.0:
        return {}
    out: dict[str, Any] = {}
    for i, site in enumerate(base.data["datacenters"]):
        used = 0
        for j, model in enumerate(site.get("models") or []):
            replicas = _scaled(int(model.get("replicas", 0)), multiplier)
            out[f"datacenters.{i}.models.{j}.replicas"] = replicas
            used += replicas * int(model.get("gpus_per_replica", 1))
        out[f"datacenters.{i}.base_load_kw_per_phase"] = multiplier * float(site.get("base_load_kw_per_phase", 0.0))
        if site.get("training"):
            gpus = _scaled(int(site["training"]["gpus"]), multiplier)
            out[f"datacenters.{i}.training.gpus"] = gpus
            used += gpus
        if site.get("gpu_capacity") is not None:
            out[f"datacenters.{i}.gpu_capacity"] = max(used, math.ceil(multiplier * int(site["gpu_capacity"]) - 1e-9))
        if site.get("pool_replicas"):
            scaled = {name: _scaled(int(n), multiplier) for name, n in site["pool_replicas"].items()}
            out[f"datacenters.{i}.pool_replicas"] = scaled
    return out


def search_multipliers(holdable: HoldableSearch) -> tuple[float, ...]:
    """The multipliers a search tries, ascending: ``multiplier_min`` to ``multiplier_max`` in equal
    steps no wider than ``tolerance`` (rounded to 1e-10, so that the step at 1 is exactly 1)."""
    lo, hi = holdable.multiplier_min, holdable.multiplier_max
    n = math.ceil((hi - lo) / holdable.tolerance - 1e-9)
    return tuple(round(lo + (hi - lo) * k / n, 10) for k in range(n + 1))


FLUCTUATION = 0.01
"""A fall in MW lost of up to this fraction of the draw before, from one multiplier to a larger one,
still counts as growing (``loss_monotone``): a replayed site's own fluctuation over a few seconds
is a fraction of a percent of its power (:mod:`openg2g.engine.load_loss`)."""

LIMIT_FIGURES = {
    "f_min": "frequency_nadir_hz",
    "f_max": "frequency_zenith_hz",
    "v_min": "v_min_pu",
    "v_max": "v_max_pu",
}
"""Each limit and the summary figure it judges."""


def _first_disturbance_s(summary: Mapping[str, Any]) -> float | None:
    """When the run's first disturbance started (s), None when it has none."""
    starts = [float(d["start_s"]) for d in summary.get("disturbances") or [] if isinstance(d, dict)]
    return min(starts, default=None)


def _first_left_s(ride: Mapping[str, Any] | None) -> float | None:
    """When a site's first ride-through event started (its first block left the grid, s)."""
    events = (ride or {}).get("events") or []
    return min((float(e["start_s"]) for e in events), default=None)


def broken_limits(record: Mapping[str, Any], limits: LoadLossLimits) -> list[str]:
    """The limits a run broke, empty when it is within them: ``failed`` (it did not complete, some
    grid step did not converge, or a judged figure is missing), ``before_disturbance`` (a site's
    ride-through acted before the first disturbance: its steady voltage or frequency is outside its
    curves, as a site too large for its feeder sags below its UPS window, so the run measures no
    loss at the disturbance), ``f_min`` (nadir below), ``f_max`` (zenith above), ``v_min``,
    ``v_max`` (the voltages after the last disturbance)."""
    summary = record.get("summary") or {}
    if record.get("status") != COMPLETE or summary.get(NONCONVERGED):
        return ["failed"]
    broken = []
    first = _first_disturbance_s(summary)
    left = [_first_left_s(ride) for ride in (summary.get("ride_through") or {}).values()]
    if first is not None and any(t is not None and t < first for t in left):
        broken.append("before_disturbance")
    for name, limit in limits.given().items():
        value = summary.get(LIMIT_FIGURES[name])
        if value is None or not math.isfinite(float(value)):
            return ["failed"]
        if (float(value) < limit) if name in ("f_min", "v_min") else (float(value) > limit):
            broken.append(name)
    return broken


def _joined(broken: Sequence[str]) -> str | None:
    return "+".join(broken) or None


@dataclass
class _Search:
    """One setting's search: its multipliers (the search's size ``k`` is the ``k``-th, from 1)."""

    setting: str
    multipliers: tuple[float, ...]
    search: MaxSearch
    runs: dict[int, dict[str, Any]] = field(default_factory=dict)
    error: str | None = None

    def multiplier(self, k: int) -> float:
        return self.multipliers[k - 1]


def _first_step(multipliers: Sequence[float]) -> int:
    """The search's size (from 1) whose multiplier is nearest 1 (the lower on a tie)."""
    return 1 + min(range(len(multipliers)), key=lambda i: (abs(multipliers[i] - 1.0), i))


def _advance(s: _Search, k: int, record: dict[str, Any], limits: LoadLossLimits) -> None:
    """Take the run at size ``k`` into its search; an invalid run, or results that are not
    monotone in size, end the search with the reason."""
    if record["status"] == "invalid":
        s.error = f"the run at multiplier {s.multiplier(k):g} is invalid: {record['error']}"
        return
    s.runs[k] = record
    try:
        s.search.record(k, not broken_limits(record, limits))
    except ValueError as exc:
        s.error = f"limits not monotone in the sites' size ({exc})"


@dataclass(frozen=True)
class LoadLossResult:
    """What :func:`run_load_loss` wrote.

    :param table: one row per setting (``load_loss.parquet``).
    :param sites: one row per setting and site (``load_loss_sites.parquet``).
    :param evaluations: every run (``evaluations.parquet``).
    """

    table: pd.DataFrame
    sites: pd.DataFrame
    evaluations: pd.DataFrame


def _metrics_start(base: BaseScenario, limits: LoadLossLimits) -> dict[str, Any]:
    start = disturbances_end_s(base) + limits.voltage_after_s
    return {"outputs.metrics_start_s": str(start)} if start else {}


def check_settings(base: BaseScenario, spec: LoadLossSpec, where: str) -> None:
    """Load and start the base scenario with each setting, as its run would, before any run
    (``openg2g validate`` and the study): a ride-through the scenario refuses (a bus the grid does
    not report, a nominal frequency unlike the grid's) is one input error, not a row of invalid runs.

    :param where: how problems name the settings, e.g. ``"study.yaml: settings"``.
    :raises ScenarioError: the first failing setting's problems, naming ``where``, the setting, the
        scenario file and field.
    """
    from openg2g.scenario.loader import load_scenario
    from openg2g.scenario.preflight import check_start
    from openg2g.sweep.expand import encode_value

    start = _metrics_start(base, spec.limits)
    for name, setting in spec.settings.items():
        overrides = {**ride_through_settings(base, setting), **start}
        try:
            check_start(
                load_scenario(base.path, [*base.fixed, *(f"{k}={encode_value(v)}" for k, v in overrides.items())])
            )
        except ScenarioError as exc:
            raise ScenarioError([(f"{where}.{name}: {loc}", msg) for loc, msg in exc.problems]) from None


def run_load_loss(
    base: BaseScenario,
    spec: LoadLossSpec,
    out_dir: Path,
    engine: Engine,
    *,
    run_fn: RunFn = run_scenario_files,
    progress: bool = False,
) -> LoadLossResult:
    """Run (or resume) a load-loss study and write its tables and plots.

    :param base: the base scenario with the study's fixed overrides.
    :raises SweepError: the base scenario has no sites or no disturbances.
    """
    base.site_index(None)  # the base has sites
    start = _metrics_start(base, spec.limits)
    out = Path(out_dir)
    runs_dir = out / "runs"
    limits = spec.limits
    multipliers = search_multipliers(spec.holdable) if spec.holdable is not None else ()
    searches = [
        _Search(name, multipliers, MaxSearch(first=_first_step(multipliers), k_max=len(multipliers)))
        for name in spec.settings
        if spec.holdable is not None
    ]
    tasks: dict[str, RunTask] = {}
    records: dict[str, dict[str, Any]] = {}
    reused: set[str] = set()
    searched: set[str] = set()

    def task(setting: str, multiplier: float) -> RunTask:
        run_id = f"{setting}-base" if multiplier == 1.0 else f"{setting}-m{multiplier:.4f}"
        if run_id not in tasks:
            settings = {
                **ride_through_settings(base, spec.settings[setting]),
                **scale_settings(base, multiplier),
                **start,
            }
            params = {"setting": setting, "multiplier": multiplier, "base_size": multiplier == 1.0}
            tasks[run_id] = make_task(base, run_id, len(tasks), params, settings, runs_dir, run_fn)
        return tasks[run_id]

    batch = [task(name, 1.0) for name in spec.settings]
    round_no = 0
    with engine:
        while True:
            proposals = [(s, k) for s in searches if not s.error and (k := s.search.propose()) is not None]
            wanted = [*batch, *(task(s.setting, s.multiplier(k)) for s, k in proposals)]
            todo = list({t.run_id: t for t in wanted if t.run_id not in records}.values())
            if not todo and not proposals:
                break
            if todo:
                round_no += 1
                desc = f"{spec.name}, settings" if round_no == 1 else f"{spec.name}, search round {round_no}"
                done, again = execute_tasks(todo, engine, progress=progress, desc=desc)
                records.update(done)
                reused |= again
            for s, k in proposals:
                t = task(s.setting, s.multiplier(k))
                searched.add(t.run_id)
                _advance(s, k, records[t.run_id], limits)
            batch = []
    ordered = sorted(tasks.values(), key=lambda t: t.index)
    evaluations = results_table(ordered, records, reused)
    evaluations["searched"] = evaluations["run_id"].isin(searched)
    evaluations["within_limits"] = [not broken_limits(records[t.run_id], limits) for t in ordered]
    evaluations["broken_limits"] = [_joined(broken_limits(records[t.run_id], limits)) for t in ordered]
    names = [str(s["name"]) for s in base.data["datacenters"]]
    by_setting = {s.setting: s for s in searches}
    rows, site_table = [], []
    for name in spec.settings:
        record = records[tasks[f"{name}-base"].run_id]
        row = setting_row(name, record, names, limits)
        rows.append({**row, **_holdable(by_setting.get(name), spec.holdable, limits)})
        site_table += site_rows(name, record, names)
    table = pd.DataFrame(rows)
    sites = pd.DataFrame(site_table)
    out.mkdir(parents=True, exist_ok=True)
    write_parquet_atomic(evaluations, out / "evaluations.parquet")
    write_parquet_atomic(sites, out / "load_loss_sites.parquet")
    write_parquet_atomic(table, out / "load_loss.parquet")
    _plot(table, sites, evaluations, spec, out)
    return LoadLossResult(table, sites, evaluations)


def _summary_float(summary: Mapping[str, Any], key: str) -> float:
    value = summary.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else float("nan")


def _mw_before(summary: Mapping[str, Any]) -> float:
    """The sites' draw just before the first disturbance (MW; NaN when the run has none)."""
    disturbances = [d for d in summary.get("disturbances") or [] if isinstance(d, dict)]
    first = min(disturbances, key=lambda d: float(d["start_s"]), default=None)
    before = first.get("load_before_mw") if first is not None else None
    return float(before) if before is not None else float("nan")


def _site_figures(ride: Mapping[str, Any] | None) -> dict[str, Any]:
    """A site's ride-through figures over the run (NaN, for a site without a ride-through)."""
    if ride is None:
        nan = float("nan")
        return {
            "ride_through": False,
            "first_left_at_s": nan,
            "events": 0,
            "mw_lost": nan,
            "blocks_transferred": 0,
            "blocks_tripped": 0,
            "transferred": None,
            "tripped": None,
            "ups_energy_kwh": nan,
            "energy_not_served_kwh": nan,
            "tokens_not_served": nan,
            "time_to_full_return_s": nan,
        }
    events = list(ride.get("events") or [])

    def names(key: str) -> str | None:
        return "+".join(dict.fromkeys(b for e in events for b in e.get(key) or [])) or None

    if not events:
        back = 0.0
    elif events[-1].get("time_to_full_return_s") is None:
        back = float("nan")
    else:
        last = events[-1]
        back = float(last["start_s"]) + float(last["time_to_full_return_s"]) - float(events[0]["start_s"])
    left = _first_left_s(ride)
    return {
        "ride_through": True,
        "first_left_at_s": float("nan") if left is None else left,
        "events": len(events),
        "mw_lost": max((float(e["mw_lost"]) for e in events), default=0.0),
        "blocks_transferred": sum(len(e.get("blocks_transferred") or []) for e in events),
        "blocks_tripped": sum(len(e.get("blocks_tripped") or []) for e in events),
        "transferred": names("blocks_transferred"),
        "tripped": names("blocks_tripped"),
        "ups_energy_kwh": _summary_float(ride, "ups_drawn_kwh"),
        "energy_not_served_kwh": _summary_float(ride, "not_served_kwh"),
        "tokens_not_served": _summary_float(ride, "tokens_not_served"),
        "time_to_full_return_s": back,
    }


def site_rows(setting: str, record: Mapping[str, Any], sites: Sequence[str]) -> list[dict[str, Any]]:
    """One row per site of a setting's run: ``setting``, ``site``, ``ride_through`` (whether it has
    one; the figures below are NaN without), ``first_left_at_s`` (when its first block left the
    grid, s; NaN if none did), ``events`` (ride-through events: first block leaving to every block
    back), ``mw_lost`` (the most the site took off the grid at once, over its
    events, MW), ``blocks_transferred``, ``blocks_tripped`` (block departures to UPS and trips,
    counted over the events), ``transferred``, ``tripped`` (those blocks' names, ``+``-joined),
    ``ups_energy_kwh`` (drawn from the UPS storage over the run), ``energy_not_served_kwh``,
    ``tokens_not_served`` (over the run), ``time_to_full_return_s`` (from the first block leaving
    to every block drawing its full load again; 0 for a site that never left, NaN when some block
    was not back by the end of the run)."""
    ride = (record.get("summary") or {}).get("ride_through") or {}
    return [{"setting": setting, "site": site, **_site_figures(ride.get(site))} for site in sites]


SITE_COLUMNS = ("mw_lost", "blocks_transferred", "blocks_tripped")
"""The per-site figures a setting's row carries as ``site.<name>.<figure>`` (:func:`site_rows`)."""

SETTING_FIGURES = (
    "load_lost_mw",
    "load_lowest_at_s",
    "frequency_zenith_hz",
    "frequency_zenith_at_s",
    "frequency_nadir_hz",
    "frequency_nadir_at_s",
    "frequency_rocof_hz_s",
    "frequency_settling_hz",
    "v_min_pu",
    "v_max_pu",
)
"""The summary figures a setting's row copies (NaN where the run has none)."""


def setting_row(
    setting: str, record: Mapping[str, Any], sites: Sequence[str], limits: LoadLossLimits
) -> dict[str, Any]:
    """A setting's row of ``load_loss.parquet`` from its run at the base size: ``setting``,
    ``run_id``, ``status``, ``error``, ``mw_before`` (the sites' draw just before the first
    disturbance, MW), ``load_lost_mw`` (the largest drop below it, all disturbances together,
    MW) and ``load_lowest_at_s``; per disturbance ``disturbance.<name>.mw_before`` and
    ``disturbance.<name>.lost_mw`` (MW); per site ``site.<name>.mw_lost``,
    ``site.<name>.blocks_transferred`` and ``site.<name>.blocks_tripped`` (:func:`site_rows` has
    the rest); the sites' totals ``blocks_transferred``,
    ``blocks_tripped``, ``ups_energy_kwh``, ``tokens_not_served`` and ``time_to_full_return_s``
    (the latest site's; NaN when one was not back); the frequency's zenith, nadir (Hz, and when,
    s), RoCoF (Hz/s) and settling (Hz); ``v_min_pu``, ``v_max_pu`` and where
    (``v_min_bus_phase``, ``v_max_bus_phase``) from ``voltages_from_s`` on; ``within_limits``,
    ``broken_limits`` (:func:`broken_limits`, ``+``-joined) and the limits (``limit_f_min_hz``,
    ``limit_f_max_hz``, ``limit_v_min_pu``, ``limit_v_max_pu``; NaN when not judged)."""
    summary = record.get("summary") or {}
    disturbances = [d for d in summary.get("disturbances") or [] if isinstance(d, dict)]
    per_site = [_site_figures((summary.get("ride_through") or {}).get(site)) for site in sites]
    tracked = [f for f in per_site if f["ride_through"]]
    broken = broken_limits(record, limits)
    row: dict[str, Any] = {
        "setting": setting,
        "run_id": record["run_id"],
        "status": record["status"],
        "error": record.get("error"),
        "mw_before": _mw_before(summary),
    }
    row.update({key: _summary_float(summary, key) for key in SETTING_FIGURES[:2]})
    for d in disturbances:
        before = d.get("load_before_mw")
        row[f"disturbance.{d['name']}.mw_before"] = float(before) if before is not None else float("nan")
        row[f"disturbance.{d['name']}.lost_mw"] = float(d["load_lost_mw"])
    for site, figures in zip(sites, per_site):
        for key in SITE_COLUMNS:
            row[f"site.{site}.{key}"] = figures[key]
    row["blocks_transferred"] = sum(f["blocks_transferred"] for f in tracked)
    row["blocks_tripped"] = sum(f["blocks_tripped"] for f in tracked)
    for key in ("ups_energy_kwh", "tokens_not_served"):
        row[key] = math.fsum(f[key] for f in tracked) if tracked else float("nan")
    backs = [f["time_to_full_return_s"] for f in tracked]
    row["time_to_full_return_s"] = float("nan") if not backs or any(math.isnan(b) for b in backs) else max(backs)
    row.update({key: _summary_float(summary, key) for key in SETTING_FIGURES[2:]})
    row["v_min_bus_phase"] = summary.get("v_min_bus_phase")
    row["v_max_bus_phase"] = summary.get("v_max_bus_phase")
    row["voltages_from_s"] = _summary_float(summary, "metrics_start_s") if "metrics_start_s" in summary else 0.0
    row["within_limits"] = not broken
    row["broken_limits"] = _joined(broken)
    given = limits.given()
    for name, unit in (("f_min", "hz"), ("f_max", "hz"), ("v_min", "pu"), ("v_max", "pu")):
        row[f"limit_{name}_{unit}"] = given.get(name, float("nan"))
    return row


def _holdable(s: _Search | None, holdable: HoldableSearch | None, limits: LoadLossLimits) -> dict[str, Any]:
    """A setting's holdable figures (none without a search).

    ``holdable_multiplier``: the largest multiplier within every limit (the search's answer; NaN
    when even ``multiplier_min`` breaks one). ``holdable_mw``: the largest MW lost of the search's
    runs within every limit, with that run's ``holdable_mw_multiplier``, draw before
    (``holdable_mw_before``, MW) and frequency extremes (Hz): the run at ``holdable_multiplier`` when
    the MW lost grows with the multiplier, as the search assumes; ``loss_monotone`` says whether
    it did over the search's complete runs (a setting whose sites leave at other times, or not at
    all, at another size does not). ``beyond_multiplier``: the first multiplier beyond the limits
    (NaN when capped), its loss ``beyond_mw`` and the limits it broke ``beyond_limits``.
    ``holdable_capped``: even ``multiplier_max`` is within the limits (a lower bound).
    ``holdable_runs``, ``holdable_error`` and the search's ``holdable_tolerance``."""
    if s is None or holdable is None:
        return {}
    lo, hi = s.search.lo, s.search.hi
    beyond = s.runs.get(hi) if hi is not None else None
    within = [k for k in sorted(s.runs) if not broken_limits(s.runs[k], limits)]
    lost = {k: _summary_float(r.get("summary") or {}, "load_lost_mw") for k, r in s.runs.items()}
    best = max(within, key=lambda k: (lost[k], k), default=None)
    at = (s.runs[best].get("summary") or {}) if best is not None else {}
    done = [
        (lost[k], _mw_before(s.runs[k].get("summary") or {})) for k in sorted(s.runs) if s.runs[k]["status"] == COMPLETE
    ]
    monotone = all(b >= a - FLUCTUATION * before for (a, _), (b, before) in itertools.pairwise(done))
    nan = float("nan")
    return {
        "holdable_multiplier": s.multiplier(lo) if lo else nan,
        "holdable_mw": _summary_float(at, "load_lost_mw"),
        "holdable_mw_multiplier": s.multiplier(best) if best is not None else nan,
        "holdable_mw_before": _mw_before(at),
        "holdable_frequency_zenith_hz": _summary_float(at, "frequency_zenith_hz"),
        "holdable_frequency_nadir_hz": _summary_float(at, "frequency_nadir_hz"),
        "loss_monotone": monotone,
        "beyond_multiplier": s.multiplier(hi) if hi is not None else nan,
        "beyond_mw": _summary_float((beyond or {}).get("summary") or {}, "load_lost_mw"),
        "beyond_limits": _joined(broken_limits(beyond, limits)) if beyond is not None else None,
        "holdable_capped": s.error is None and s.search.capped,
        "holdable_runs": len(s.runs),
        "holdable_error": s.error,
        "holdable_tolerance": holdable.tolerance,
    }


def _plot(table: pd.DataFrame, sites: pd.DataFrame, evaluations: pd.DataFrame, spec: LoadLossSpec, out: Path) -> None:
    """MW lost per setting stacked by site against the holdable figure, and the frequency extreme
    against MW lost of every complete run with its limit."""
    from openg2g.studies.plots import plot_frequency_against_loss, plot_loss_by_setting

    if table.empty:
        return
    plot_loss_by_setting(
        sites,
        table,
        title=f"{spec.name}: MW lost at the base size, and the largest loss within the limits",
        path=out / "load_loss.png",
    )
    done = evaluations[evaluations["status"] == COMPLETE]
    limits = spec.limits
    nadir = limits.f_min_hz is not None and limits.f_max_hz is None
    figure = "frequency_nadir_hz" if nadir else "frequency_zenith_hz"
    if done.empty or figure not in done or "load_lost_mw" not in done:
        return
    plot_frequency_against_loss(
        done,
        frequency=figure,
        limit=limits.f_min_hz if nadir else limits.f_max_hz,
        title=f"{spec.name}: frequency {'nadir' if nadir else 'zenith'} against the MW lost, every run",
        path=out / "load_loss_frequency.png",
    )
