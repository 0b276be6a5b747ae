"""Study results the app shows beside the runs: hosting-capacity, siting and load-loss studies, leaderboards.

Both are found by the files their commands write (no Dash, no plotly here):

- a folder with ``hosting_capacity.parquet`` holds ``openg2g study hosting-capacity`` output
  (:mod:`openg2g.studies.hosting`: one row per bus and controller). :func:`hosting_map` turns the
  rows of one controller into MW per bus for the feeder map: the hosted peak (``capacity_peak_mw``)
  where some size is hosted, no number where none is (:data:`INFEASIBLE`, :data:`NOT_CONVERGED`,
  :data:`FAILED`), so such a bus never reads as 0 MW. The feeder is the one of the study's own
  runs (``runs/<bus>-<controller>-k<blocks>/``), drawn as the voltage map draws it.
- a folder with ``siting.parquet`` holds ``openg2g study siting`` output
  (:mod:`openg2g.studies.siting`: one row per placement, a bus or a pair, and controller, ranked).
  :func:`siting_map` shows it as a hosting study is shown: the study's figure (the violation
  integral the ranking starts from) per bus of a single placement on the same feeder map, the
  best placement's buses marked, every placement of the controller in a table in rank order.
- a folder with ``load_loss.parquet``, ``load_loss_sites.parquet`` and ``evaluations.parquet``
  holds ``openg2g study load-loss`` output (:mod:`openg2g.studies.load_loss`: one row per
  ride-through setting, per setting and site, and per run, the search's included).
  :func:`read_load_loss` reads them for the MW lost per setting stacked by site beside the largest
  loss within the limits, and the frequency extreme against the MW lost of every run; a setting's
  run folder (``runs/<setting>-base``) is named when it is there, to open it in the runs view.
- a folder with ``leaderboard.csv`` and ``cases.parquet`` holds ``openg2g benchmark`` output
  (:mod:`openg2g.benchmark.run`). :func:`read_leaderboard` keeps the file's ranking order (a
  controller with non-converged runs is already ranked after the others) and writes a shared rank
  ``=3``, as ``leaderboard.md`` does; its cases name their run folders (``runs/<case>-<controller>``)
  when they are there, to open them in the runs view.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from openg2g.app.data import AppError, folder_inside, folders_under, is_run, resolve_run
from openg2g.plot.feeder import edge_segments
from openg2g.plot.hosting import baseline_warnings
from openg2g.plot.run import RunData

__all__ = [
    "BENCHMARK",
    "FAILED",
    "HOSTED",
    "HOSTING",
    "INFEASIBLE",
    "LOAD_LOSS",
    "NOT_CONVERGED",
    "SITING",
    "HostingMap",
    "Leaderboard",
    "LoadLossStudy",
    "SitingMap",
    "StudyEntry",
    "StudyMap",
    "hosting_map",
    "hosting_rows",
    "list_studies",
    "read_leaderboard",
    "read_load_loss",
    "resolve_study",
    "siting_map",
    "siting_rows",
    "sort_rows",
]

HOSTING = "hosting_capacity"
"""Study kind: ``openg2g study hosting-capacity`` output."""

BENCHMARK = "benchmark"
"""Study kind: ``openg2g benchmark`` output."""

SITING = "siting"
"""Study kind: ``openg2g study siting`` output."""

LOAD_LOSS = "load_loss"
"""Study kind: ``openg2g study load-loss`` output."""

StudyKind = Literal["hosting_capacity", "benchmark", "siting", "load_loss"]

MARKERS: dict[str, tuple[str, ...]] = {
    HOSTING: ("hosting_capacity.parquet",),
    BENCHMARK: ("leaderboard.csv", "cases.parquet"),
    SITING: ("siting.parquet",),
    LOAD_LOSS: ("load_loss.parquet", "load_loss_sites.parquet", "evaluations.parquet"),
}
"""The files that make a folder a study of each kind."""

HOSTED = "hosted"
"""Bus state: some size is hosted; its MW is the largest hosted size's peak."""

INFEASIBLE = "infeasible"
"""Bus state: no size is hosted (the feeder breaks a limit without the site, or the over-voltage
floor lies above the largest size free of the growing limits)."""

NOT_CONVERGED = "not converged"
"""Bus state: no size is hosted because the first size tried failed (a run that did not complete,
or grid steps that did not converge)."""

FAILED = "error"
"""Bus state: the search stopped on an error (an invalid run, limits not monotone in size)."""


@dataclass(frozen=True)
class StudyEntry:
    """A study folder under the runs folder.

    :param study_id: its path relative to the runs folder (``"."`` for the folder itself).
    :param kind: :data:`HOSTING`, :data:`BENCHMARK`, :data:`SITING` or :data:`LOAD_LOSS`.
    """

    study_id: str
    kind: StudyKind


_KINDS: tuple[StudyKind, ...] = ("hosting_capacity", "benchmark", "siting", "load_loss")


def _kind(folder: Path) -> StudyKind | None:
    for kind in _KINDS:
        if all((folder / name).is_file() for name in MARKERS[kind]):
            return kind
    return None


def list_studies(root: Path) -> list[StudyEntry]:
    """The study folders under ``root`` (itself included), at most :data:`MAX_DEPTH` deep, sorted by
    id; run folders, hidden folders and symbolic links are not entered.

    :raises AppError: ``root`` is not a folder.
    """
    root = Path(root).resolve()
    # a study's runs/ are its own, and a run's sub-folders are its tables
    folders = folders_under(root, lambda f: _kind(f) is None and not is_run(f))
    found = [StudyEntry(f.relative_to(root).as_posix(), kind) for f in folders if (kind := _kind(f)) is not None]
    return sorted(found, key=lambda e: e.study_id)


def resolve_study(root: Path, study_id: str, kind: str) -> Path:
    """The folder of a study id, refused when it is not a study of ``kind`` inside ``root``.

    :raises AppError: the id leaves ``root`` or names no such study.
    """
    root = Path(root).resolve()
    folder = folder_inside(root, study_id, "study")
    if not folder.is_dir() or _kind(folder) != kind:
        files = " and ".join(MARKERS[kind]) if kind in MARKERS else "?"
        raise AppError(f"no {kind.replace('_', ' ')} study {study_id!r} in the runs folder (no {files})")
    return folder


def _run_id(study_id: str, name: str) -> str:
    return f"runs/{name}" if study_id == "." else f"{study_id}/runs/{name}"


def _run_links(root: Path, study_id: str, run_ids: pd.Series) -> list[str]:
    """Each of a study's runs as the app opens it (its id under the runs folder), ``""`` for one
    whose folder is not there (removed, or never written)."""
    out = []
    for run_id in run_ids.astype(str):
        full = _run_id(study_id, run_id)
        try:
            resolve_run(root, full)
        except AppError:
            full = ""
        out.append(full)
    return out


def _text(value: Any) -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


def _where(limit: Any, element: Any) -> str:
    limit, element = _text(limit), _text(element)
    return f"{limit} at {element}" if limit and element else limit


def _state_and_limit(row: pd.Series) -> tuple[str, str]:
    """A hosting row's state and its limiting constraint in words."""
    error = _text(row.get("error"))
    if error:
        return FAILED, error
    binding = _where(row.get("binding_limit"), row.get("binding_element"))
    lower = _where(row.get("lower_limit"), row.get("lower_element"))
    if int(row["capacity_blocks"]) > 0 and not bool(row.get("empty_range")):
        if bool(row.get("capped")):
            return HOSTED, "none up to the study's max_mw (the search stopped there)"
        return HOSTED, binding + (f"; {lower} sets the smallest size" if lower else "")
    if "failed" in _text(row.get("binding_limit")).split("+"):
        return NOT_CONVERGED, "the first size tried did not complete or converge"
    baseline = _where(row.get("baseline_limits"), row.get("baseline_element"))
    failing = row.get("first_failing_blocks")
    if baseline and pd.notna(failing) and int(failing) == 0:
        return INFEASIBLE, f"the feeder breaks {baseline} without the site"
    if bool(row.get("empty_range")):
        return (
            INFEASIBLE,
            f"{lower or 'over-voltage'} needs a larger site than {binding or 'the growing limits'} allows",
        )
    return INFEASIBLE, binding or "no size hosted"


def hosting_rows(table: pd.DataFrame) -> pd.DataFrame:
    """A hosting-capacity table in the app's terms, one row per bus and controller in the table's
    order: ``bus``, ``controller``, ``state`` (:data:`HOSTED`, :data:`INFEASIBLE`,
    :data:`NOT_CONVERGED`, :data:`FAILED`), ``capacity_mw`` (the hosted size's peak, MW; NaN unless
    hosted), ``capacity_gpus`` (None unless hosted), ``min_mw`` (the smallest hosted size's peak,
    MW; NaN unless hosted), ``limit`` (the limiting constraint in words) and ``n_runs``."""
    rows = []
    for _, row in table.iterrows():
        state, limit = _state_and_limit(row)
        hosted = state == HOSTED
        rows.append(
            {
                "bus": str(row["bus"]),
                "controller": str(row["controller"]),
                "state": state,
                "capacity_mw": float(row["capacity_peak_mw"]) if hosted else math.nan,
                "capacity_gpus": int(row["capacity_gpus"]) if hosted else None,
                "min_mw": float(row["min_peak_mw"]) if hosted else math.nan,
                "limit": limit,
                "n_runs": int(row["n_runs"]),
            }
        )
    columns = ["bus", "controller", "state", "capacity_mw", "capacity_gpus", "min_mw", "limit", "n_runs"]
    return pd.DataFrame(rows, columns=columns)


@dataclass(frozen=True)
class StudyMap:
    """One controller's rows of a study, with the feeder they are drawn on.

    :param study_id: the study.
    :param controller: the controller shown.
    :param controllers: every controller of the study, in its order.
    :param rows: the study's rows of ``controller`` in the app's terms.
    :param positions: bus -> drawing position.
    :param segments: ``(kind, in_service)`` -> branch segments, as on the voltage map.
    :param run_id: the study run whose feeder is drawn.
    """

    study_id: str
    controller: str
    controllers: tuple[str, ...]
    rows: pd.DataFrame
    positions: dict[str, tuple[float, float]]
    segments: dict[tuple[str, bool], list[list[tuple[float, float]]]]
    run_id: str


@dataclass(frozen=True)
class HostingMap(StudyMap):
    """One controller's hosting capacity on the feeder; ``rows`` are :func:`hosting_rows`.

    :param warning: why the controller's capacity is bounded before any site is placed (the
        feeder without it already breaks a limit, as ``openg2g study hosting-capacity`` warns), or
        ``""``.
    """

    warning: str = ""

    def capacity_mw(self) -> dict[str, float]:
        """Bus -> hosted MW (peak) of the buses where some size is hosted."""
        hosted = self.rows[self.rows["state"] == HOSTED]
        return dict(zip(hosted["bus"], hosted["capacity_mw"].astype(float)))

    def unhosted(self) -> dict[str, str]:
        """Bus -> state of the studied buses where no size is hosted."""
        others = self.rows[self.rows["state"] != HOSTED]
        return dict(zip(others["bus"], others["state"]))


def study_run(root: Path, study_id: str, kind: str = HOSTING) -> str:
    """The run id of the first run folder of a study (its ``runs/`` sub-folder), to read the feeder.

    :param kind: the study's kind (:data:`HOSTING` or :data:`SITING`).
    :raises AppError: not a study of ``kind``, or it has no run folder.
    """
    folder = resolve_study(root, study_id, kind) / "runs"
    names = sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []
    for name in names:
        run_id = _run_id(study_id, name)
        try:
            resolve_run(root, run_id)
        except AppError:
            continue
        return run_id
    what = kind.replace("_", " ")
    raise AppError(f"{what} study {study_id!r} has no run folder under runs/ to draw its feeder from")


def hosting_map(
    root: Path,
    study_id: str,
    controller: str | None,
    run: RunData,
    positions: dict[str, tuple[float, float]],
) -> HostingMap:
    """The hosting capacity of one controller of a study on its feeder.

    :param controller: one of the study's controllers; ``None`` for its first.
    :param run: one of the study's runs (:func:`study_run`), whose feeder is drawn.
    :param positions: bus -> drawing position of that feeder.
    :raises AppError: not a hosting study, a controller it does not have, or a run without a
        readable feeder.
    """
    table = pd.read_parquet(resolve_study(root, study_id, HOSTING) / "hosting_capacity.parquet")
    fields = _study_map(root, study_id, f"hosting study {study_id!r}", hosting_rows(table), controller, run, positions)
    warnings = baseline_warnings(table) if "baseline_limits" in table else {}
    return HostingMap(**fields, warning=warnings.get(fields["controller"], ""))


def _study_map(
    root: Path,
    study_id: str,
    study: str,
    rows: pd.DataFrame,
    controller: str | None,
    run: RunData,
    positions: dict[str, tuple[float, float]],
) -> dict[str, Any]:
    """The fields of a :class:`StudyMap` of ``rows`` (a study's rows in the app's terms; ``study``
    names it in messages).

    :raises AppError: a controller the study does not have, or a run without a readable feeder.
    """
    chosen, controllers = _controller(rows, controller, study)
    if isinstance(run.topology, str):
        raise AppError(f"no feeder map: {run.topology}")
    return {
        "study_id": study_id,
        "controller": chosen,
        "controllers": controllers,
        "rows": rows[rows["controller"] == chosen].reset_index(drop=True),
        "positions": positions,
        "segments": edge_segments(run.topology.edges, positions),
        "run_id": run.out_dir.relative_to(Path(root).resolve()).as_posix(),
    }


SITING_FIGURE = "violation_integral_pu_s"
"""The siting figure the map colours single placements by (pu.s; lower is better): the first key
of the study's ranking (:func:`openg2g.studies.siting.rank_placements`)."""


def siting_rows(table: pd.DataFrame) -> pd.DataFrame:
    """A siting table in the app's terms, in rank order per controller: ``controller``, ``rank``,
    ``placement`` (a bus, or ``a+b`` for the site split over two), ``kind`` (``single``, ``pair``),
    ``buses`` (the placement's buses, a tuple), ``status`` (the run's; ``not converged`` for a
    complete run with grid steps that did not converge), ``violation_integral_pu_s`` (pu.s),
    ``mean_throughput_tok_s`` (tok/s), ``v_min_pu`` (pu) and ``run_id`` (the run's folder under
    the study's ``runs/``); a figure the table lacks is NaN."""
    frame = table.sort_values(["rank"], kind="stable")
    nonconverged = frame["nonconverged_steps"] if "nonconverged_steps" in frame else pd.Series(0, index=frame.index)
    status = [
        "not converged" if st == "complete" and pd.notna(n) and n > 0 else str(st)
        for st, n in zip(frame["status"], nonconverged)
    ]
    rows = pd.DataFrame(
        {
            "controller": frame["controller"].astype(str),
            "rank": frame["rank"].astype(int),
            "placement": frame["placement"].astype(str),
            "kind": frame["kind"].astype(str),
            "buses": [tuple(str(b) for b in (a, b) if _text(b)) for a, b in zip(frame["bus_a"], frame["bus_b"])],
            "status": status,
        }
    )
    for column in (SITING_FIGURE, "mean_throughput_tok_s", "v_min_pu"):
        values = frame[column] if column in frame else pd.Series(math.nan, index=frame.index)
        rows[column] = pd.to_numeric(values, errors="coerce").astype(float).to_numpy()
    rows["run_id"] = frame["run_id"].astype(str).to_numpy()
    return rows.reset_index(drop=True)


@dataclass(frozen=True)
class SitingMap(StudyMap):
    """One controller's siting study on the feeder; ``rows`` are :func:`siting_rows`, in rank order."""

    def figure_by_bus(self) -> dict[str, float]:
        """Bus -> violation integral (pu.s) of the whole site on that bus (complete runs only)."""
        singles = self.rows[(self.rows["kind"] == "single") & (self.rows["status"] == "complete")]
        return {b[0]: float(v) for b, v in zip(singles["buses"], singles[SITING_FIGURE]) if math.isfinite(v)}

    def unplaced(self) -> dict[str, str]:
        """Bus -> the run's status of the single placements that did not complete."""
        singles = self.rows[(self.rows["kind"] == "single") & (self.rows["status"] != "complete")]
        return {b[0]: str(st) for b, st in zip(singles["buses"], singles["status"])}

    def best(self) -> tuple[str, ...]:
        """The buses of the controller's first-ranked placement that completed (empty if none did)."""
        done = self.rows[self.rows["status"] == "complete"]
        return tuple(done["buses"].iloc[0]) if not done.empty else ()


def siting_map(
    root: Path,
    study_id: str,
    controller: str | None,
    run: RunData,
    positions: dict[str, tuple[float, float]],
) -> SitingMap:
    """One controller's placements of a siting study on its feeder.

    :param controller: one of the study's controllers; ``None`` for its first.
    :param run: one of the study's runs (:func:`study_run`), whose feeder is drawn.
    :param positions: bus -> drawing position of that feeder.
    :raises AppError: not a siting study, a controller it does not have, or a run without a
        readable feeder.
    """
    rows = siting_rows(pd.read_parquet(resolve_study(root, study_id, SITING) / "siting.parquet"))
    return SitingMap(**_study_map(root, study_id, f"siting study {study_id!r}", rows, controller, run, positions))


def _controller(rows: pd.DataFrame, controller: str | None, study: str) -> tuple[str, tuple[str, ...]]:
    """The controller asked for (``None``: the study's first) and every controller of the study.

    :raises AppError: the study has no rows, or not that controller.
    """
    controllers = tuple(dict.fromkeys(rows["controller"]))
    if not controllers:
        raise AppError(f"{study} has no rows")
    chosen = controller or controllers[0]
    if chosen not in controllers:
        raise AppError(f"{study} has no controller {chosen!r}; it has {', '.join(controllers)}")
    return chosen, controllers


LOAD_LOSS_LIMITS = {
    "f_min_hz": "limit_f_min_hz",
    "f_max_hz": "limit_f_max_hz",
    "v_min_pu": "limit_v_min_pu",
    "v_max_pu": "limit_v_max_pu",
}
"""The limits of a load-loss study (name -> its column in ``load_loss.parquet``; NaN: not judged)."""


@dataclass(frozen=True)
class LoadLossStudy:
    """A load-loss study as the app shows it.

    :param study_id: the study folder.
    :param settings: one row per setting in the study's order: ``setting``, ``status``,
        ``mw_before``, ``load_lost_mw`` (MW; the sites' draw before the first disturbance and the
        most lost at once), ``holdable_mw`` (the largest loss within the limits, MW; NaN without a
        search or when none was within them), ``holdable_multiplier``, ``holdable_capped``,
        ``frequency_zenith_hz``, ``frequency_nadir_hz``, ``frequency_rocof_hz_s``, ``v_min_pu``,
        ``v_max_pu`` (after the last disturbance), ``within_limits``, ``broken_limits`` (``""``
        for none) and ``run`` (the run id of the setting's base-size run, ``""`` when its folder is
        not there).
    :param sites: one row per setting and site: ``setting``, ``site``, ``mw_lost`` (MW; 0 for a
        site without a ride-through, which has no figure), ``blocks_transferred``,
        ``blocks_tripped``, ``ups_energy_kwh``, ``tokens_not_served``.
    :param points: every complete run of the study (``evaluations.parquet``): ``setting``,
        ``multiplier``, ``load_lost_mw``, ``frequency_zenith_hz``, ``frequency_nadir_hz``,
        ``within_limits``.
    :param limits: the limits judged (``f_min_hz``, ``f_max_hz``, ``v_min_pu``, ``v_max_pu`` -> value).
    :param voltages_from_s: when the voltages count from (s).
    :param searched: whether the study searched the largest loss within the limits (``holdable``).
    """

    study_id: str
    settings: pd.DataFrame
    sites: pd.DataFrame
    points: pd.DataFrame
    limits: dict[str, float]
    voltages_from_s: float
    searched: bool


def _numbers(frame: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """``columns`` of ``frame`` as floats (NaN where missing or not a number)."""
    return pd.DataFrame(
        {c: pd.to_numeric(frame[c], errors="coerce") if c in frame else math.nan for c in columns}, index=frame.index
    ).astype(float)


def read_load_loss(root: Path, study_id: str) -> LoadLossStudy:
    """A load-loss study's settings, sites and runs (:class:`LoadLossStudy`).

    :raises AppError: not a load-loss study.
    """
    folder = resolve_study(root, study_id, LOAD_LOSS)
    table = pd.read_parquet(folder / "load_loss.parquet")
    figures = [
        "mw_before",
        "load_lost_mw",
        "holdable_mw",
        "holdable_multiplier",
        "frequency_zenith_hz",
        "frequency_nadir_hz",
        "frequency_rocof_hz_s",
        "v_min_pu",
        "v_max_pu",
    ]
    settings = pd.DataFrame({"setting": table["setting"].astype(str), "status": table["status"].astype(str)})
    settings = settings.join(_numbers(table, figures))
    settings["holdable_capped"] = (
        table["holdable_capped"].fillna(False).astype(bool) if "holdable_capped" in table else False
    )
    settings["within_limits"] = table["within_limits"].astype(bool)
    settings["broken_limits"] = [_text(b) for b in table["broken_limits"]]
    settings["run"] = _run_links(root, study_id, table["run_id"])
    raw_sites = pd.read_parquet(folder / "load_loss_sites.parquet")
    sites = pd.DataFrame({"setting": raw_sites["setting"].astype(str), "site": raw_sites["site"].astype(str)})
    sites = sites.join(
        _numbers(raw_sites, ["mw_lost", "blocks_transferred", "blocks_tripped", "ups_energy_kwh", "tokens_not_served"])
    )
    sites["mw_lost"] = sites["mw_lost"].fillna(0.0)
    runs_table = pd.read_parquet(folder / "evaluations.parquet")
    runs_table = runs_table[runs_table["status"] == "complete"]
    columns = ["multiplier", "load_lost_mw", "frequency_zenith_hz", "frequency_nadir_hz"]
    points = pd.DataFrame({"setting": runs_table["setting"].astype(str)}).join(_numbers(runs_table, columns))
    points["within_limits"] = runs_table["within_limits"].astype(bool)
    first = table.iloc[0]  # the limits are the study's, the same on every row
    limits = {name: float(first[c]) for name, c in LOAD_LOSS_LIMITS.items() if c in table and pd.notna(first[c])}
    start = float(first["voltages_from_s"])
    return LoadLossStudy(
        study_id=study_id,
        settings=settings.reset_index(drop=True),
        sites=sites.reset_index(drop=True),
        points=points.reset_index(drop=True),
        limits=limits,
        voltages_from_s=start,
        searched="holdable_mw" in table,
    )


@dataclass(frozen=True)
class Leaderboard:
    """A benchmark's leaderboard and its cases.

    :param study_id: the benchmark folder.
    :param board: ``leaderboard.csv`` in its order (the ranking), with ``rank_text`` (``=3`` for a
        shared rank) and ``label`` (the controller, marked ``[n incomplete]``, ``[n not converged]``).
    :param cases: ``cases.parquet`` with ``run`` (the run id of its folder, ``""`` when the folder
        is not there).
    :param n_shared: cases every ranked controller completed (the ranking's cases), from the
        leaderboard's header; ``None`` when unknown.
    :param scores: the per-run scores, as the leaderboard has them (each with ``<score>_mean`` and
        ``<score>_worst`` columns; lower is better for each).
    """

    study_id: str
    board: pd.DataFrame
    cases: pd.DataFrame
    n_shared: int | None
    scores: tuple[str, ...]


def _label(row: pd.Series) -> str:
    name = str(row["controller"])
    if int(row["n_incomplete"]):
        name += f" [{int(row['n_incomplete'])} incomplete]"
    if int(row["n_nonconverged"]):
        name += f" [{int(row['n_nonconverged'])} not converged]"
    return name


def _n_shared(markdown: Path) -> int | None:
    """The number of shared cases in ``leaderboard.md``'s header (``violation pu.s, N shared cases``)."""
    try:
        header = markdown.read_text(encoding="utf-8").splitlines()[0]
    except (OSError, IndexError):
        return None
    for cell in header.split("|"):
        words = cell.strip().split()
        if len(words) == 5 and words[3:] == ["shared", "cases"] and words[2].isdigit():
            return int(words[2])
    return None


def read_leaderboard(root: Path, study_id: str) -> Leaderboard:
    """A benchmark's leaderboard (``leaderboard.csv``, in its ranking order) and cases.

    :raises AppError: not a benchmark folder.
    """
    folder = resolve_study(root, study_id, BENCHMARK)
    board = pd.read_csv(folder / "leaderboard.csv")
    board["rank_text"] = [f"={r}" if bool(t) else str(r) for r, t in zip(board["rank"], board["tied"])]
    board["label"] = [_label(row) for _, row in board.iterrows()]
    cases = pd.read_parquet(folder / "cases.parquet")
    cases = cases.assign(run=_run_links(root, study_id, cases["run_id"]))
    scores = tuple(
        c.removesuffix("_mean") for c in board.columns if c.endswith("_mean") and f"{c[:-5]}_worst" in board.columns
    )
    return Leaderboard(study_id, board, cases, _n_shared(folder / "leaderboard.md"), scores)


def sort_rows(rows: Sequence[dict[str, Any]], sort_by: Sequence[dict[str, str]]) -> list[dict[str, Any]]:
    """Table rows sorted as a table header asks (``[{"column_id": ..., "direction": "asc"|"desc"}]``,
    the first the main key); a column ``c`` with a ``_c`` twin sorts by the twin (the rank text
    ``=3`` by its position), and empty cells go last either way.
    """
    out = list(rows)
    for key in reversed(list(sort_by)):
        column = key["column_id"]
        twin = f"_{column}"
        desc = key.get("direction") == "desc"

        def value(row: dict[str, Any], column: str = column, twin: str = twin) -> Any:
            return row.get(twin, row.get(column))

        filled = [r for r in out if value(r) not in (None, "") and value(r) == value(r)]
        empty = [r for r in out if not (value(r) not in (None, "") and value(r) == value(r))]
        out = sorted(filled, key=value, reverse=desc) + empty
    return out
