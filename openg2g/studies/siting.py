"""Datacenter siting: the same site placed on each candidate bus (or split over two), ranked.

Placements are ranked per controller by voltage-violation integral (lowest first), then by mean
throughput (highest first), then by the lowest voltage seen (highest first). A pair placement splits every model's replicas (and the non-GPU
load) into halves, ``<site>_a`` on the first bus (rounded up, keeping any training job) and
``<site>_b`` on the second; events aimed at the site go to both halves.

``OUT/``
  ``siting.parquet``   one row per placement and controller, with rank
  ``siting_single.png`` violation integral of single placements on the feeder map
  ``siting_pairs.png``  violation integral per pair of buses (when pairs are studied)
  ``siting_ranking.png`` ranked bars of violation integral and throughput
  ``runs/<placement>-<controller>/`` each run's outputs
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

import pandas as pd

from openg2g.studies.common import (
    BaseScenario,
    Topology,
    controller_override,
    deep,
    make_task,
    safe_id,
    study_buses,
)
from openg2g.studies.spec import SitingSpec
from openg2g.sweep.engines import Engine
from openg2g.sweep.runner import execute_tasks, not_converged, results_table, write_parquet_atomic
from openg2g.sweep.spec import SweepError
from openg2g.sweep.tasks import RunFn, RunTask, run_scenario_files

__all__ = ["rank_placements", "run_siting", "siting_settings", "split_site"]


def split_site(site: dict[str, Any], bus_a: str, bus_b: str) -> list[dict[str, Any]]:
    """Two half sites from one site spec (as data): replicas split rounding up on the first."""
    a, b = deep(site), deep(site)
    a["name"], b["name"] = f"{site['name']}_a", f"{site['name']}_b"
    a["bus"], b["bus"] = str(bus_a), str(bus_b)
    for ma, mb in zip(a["models"], b["models"]):
        r = int(ma.get("replicas", 0))
        ma["replicas"], mb["replicas"] = math.ceil(r / 2), r // 2
    load = float(site.get("base_load_kw_per_phase", 0.0))
    a["base_load_kw_per_phase"] = b["base_load_kw_per_phase"] = load / 2
    for half in (a, b):
        half["gpu_capacity"] = None
    b["training"] = None
    return [a, b]


def _split_events(events: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    out = []
    for e in events:
        if e.get("site") == name:
            for suffix in ("_a", "_b"):
                out.append({**e, "site": name + suffix})
        elif e.get("to_site") == name:
            out.append({**e, "to_site": name + "_a"})
        else:
            out.append(e)
    return out


def siting_settings(
    base: BaseScenario, site_index: int, buses: tuple[str, ...], controllers: list[dict[str, Any]]
) -> dict[str, Any]:
    """Overrides placing the site on one bus, or split over two."""
    settings: dict[str, Any] = {"controllers": controllers}
    events = base.events_within()
    if len(buses) == 1:
        settings[f"datacenters.{site_index}.bus"] = str(buses[0])
        settings["events"] = events
        return settings
    sites = deep(base.data["datacenters"])
    name = sites[site_index]["name"]
    sites[site_index : site_index + 1] = split_site(sites[site_index], *buses)
    settings["datacenters"] = sites
    settings["events"] = _split_events(events, name)
    return settings


def rank_placements(table: pd.DataFrame) -> pd.DataFrame:
    """Sort per controller by violation integral (ascending), then throughput (descending), then
    lowest voltage (descending, the margin left); add ``rank``. Runs that did not complete, or
    whose grid steps did not all converge (:func:`~openg2g.sweep.runner.not_converged`), rank last.
    """
    df = table.copy()
    df["_bad"] = (df["status"] != "complete") | not_converged(df)
    keys = ["controller", "_bad", "violation_integral_pu_s", "mean_throughput_tok_s", "v_min_pu"]
    keys = [k for k in keys if k in df.columns]
    df = df.sort_values(
        keys,
        ascending=[k != "mean_throughput_tok_s" and k != "v_min_pu" for k in keys],
        kind="stable",
        na_position="last",
    )
    df["rank"] = df.groupby("controller").cumcount() + 1
    return df.drop(columns="_bad").reset_index(drop=True)


def run_siting(
    base: BaseScenario,
    spec: SitingSpec,
    out_dir: Path,
    engine: Engine,
    *,
    topology: Topology | None = None,
    run_fn: RunFn = run_scenario_files,
    progress: bool = False,
) -> pd.DataFrame:
    """Run (or resume) a siting study and write its table and plots; returns the ranked table.

    :raises SweepError: no candidates, or the base scenario has no such site.
    """
    if spec.duration_s is not None:
        base = base.with_duration(spec.duration_s)
    site_index = base.site_index(spec.site)
    candidates = study_buses(
        spec.candidates if isinstance(spec.candidates, list) else None,
        topology,
        "candidates",
        "list the candidate buses (the feeder's topology is not available)",
    )
    placements: list[tuple[str, ...]] = []
    if spec.singles:
        placements += [(b,) for b in candidates]
    if spec.pairs:
        placements += list(itertools.combinations(candidates, 2))
    if not placements:
        raise SweepError([("candidates", "nothing to place: need singles, or pairs with two or more candidates")])
    runs_dir = Path(out_dir) / "runs"
    tasks: list[RunTask] = []
    for ctrl in spec.controllers:
        controllers = controller_override(ctrl, base.path)
        for buses in placements:
            kind = "single" if len(buses) == 1 else "pair"
            run_id = f"{kind}-{'-'.join(safe_id(b) for b in buses)}-{safe_id(ctrl)}"
            params = {
                "placement": "+".join(buses),
                "kind": kind,
                "bus_a": buses[0],
                "bus_b": buses[1] if len(buses) > 1 else None,
                "controller": ctrl,
            }
            tasks.append(
                make_task(
                    base,
                    run_id,
                    len(tasks),
                    params,
                    siting_settings(base, site_index, buses, controllers),
                    runs_dir,
                    run_fn,
                )
            )
    records, reused = execute_tasks(tasks, engine, progress=progress, desc=spec.name)
    table = rank_placements(results_table(tasks, records, reused))
    out = Path(out_dir)
    write_parquet_atomic(table, out / "siting.parquet")
    _plots(table, topology, candidates, spec, out)
    return table


def _plots(table: pd.DataFrame, topology: Topology | None, candidates: list[str], spec: SitingSpec, out: Path) -> None:
    from openg2g.studies.plots import plot_bus_values, plot_pair_matrix, plot_ranking

    ok = table[table["status"] == "complete"]
    if ok.empty or "violation_integral_pu_s" not in ok:
        return
    singles = ok[ok["kind"] == "single"].rename(columns={"bus_a": "bus"})
    if topology is not None and not singles.empty:
        plot_bus_values(
            topology,
            singles,
            value="violation_integral_pu_s",
            panel="controller",
            label="violation integral (pu.s)",
            title=f"{spec.name}: site on one bus",
            path=out / "siting_single.png",
            cmap="magma_r",
        )
    pairs = ok[ok["kind"] == "pair"]
    if not pairs.empty:
        plot_pair_matrix(
            ok,
            value="violation_integral_pu_s",
            buses=candidates,
            panel="controller",
            label="violation integral (pu.s)",
            title=f"{spec.name}: site split over two buses (diagonal: whole site on one bus)",
            path=out / "siting_pairs.png",
        )
    labelled = ok.assign(label=ok["controller"] + ": #" + ok["rank"].astype(str) + " " + ok["placement"])
    values = [c for c in ("violation_integral_pu_s", "mean_throughput_tok_s", "v_min_pu") if c in labelled]
    plot_ranking(
        labelled,
        label_column="label",
        values=values,
        title=f"{spec.name}: placements ranked per controller",
        path=out / "siting_ranking.png",
        limit=80,
    )
