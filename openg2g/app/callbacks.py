"""What the page does when the user acts: the Dash callbacks between :mod:`openg2g.app.views` and
:mod:`openg2g.app.data` / :mod:`openg2g.app.whatif`.

A request the app cannot serve (a run outside the runs folder, a what-if that does not validate,
a table that cannot be read) is answered with its message in the section's message line; nothing
of Python's traceback reaches the page (the app runs with Dash's debug mode off).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import dash
from dash import ALL, Input, Output, State, ctx, no_update

from openg2g.app import views
from openg2g.app.data import (
    AppError,
    RunStore,
    bus_voltages,
    compare,
    list_runs,
    map_at,
    run_marks_in,
)
from openg2g.app.studies import (
    BENCHMARK,
    HOSTING,
    LOAD_LOSS,
    SITING,
    HostingMap,
    hosting_map,
    list_studies,
    read_leaderboard,
    read_load_loss,
    siting_map,
    sort_rows,
    study_run,
)
from openg2g.app.timeline import (
    link_search,
    nearest_step,
    next_play_time,
    read_link,
    slider_settings,
    stepped,
    worst_step,
)
from openg2g.app.tour import TOUR, tour_move
from openg2g.app.whatif import (
    KEEP,
    RunQueue,
    WhatIf,
    form_models,
    form_values,
    parse_extra,
    parse_params,
    scenario_form,
    scenario_yaml,
    tap_choices,
)
from openg2g.core.errors import G2GError, ScenarioError
from openg2g.plot.overview_tables import run_panels
from openg2g.plot.run import RunData

__all__ = ["register"]

SERVED_ERRORS = (G2GError, ValueError, OSError, KeyError)
"""Errors shown to the user as a message: bad input, a run folder that cannot be read."""

T = TypeVar("T")

POLL_OVERVIEW = [(Output("overview-tick", "disabled"), False, True)]
"""While a callback that may compute a run's overview runs, the page asks every 0.4 s how far it is."""

_RANGE = re.compile(r"^xaxis\d*\.range\[(?P<end>[01])\]$")
_RANGE_LIST = re.compile(r"^xaxis\d*\.range$")
_AUTORANGE = re.compile(r"^xaxis\d*\.autorange$")


def message(exc: BaseException) -> str:
    """The text a page shows for an error: a scenario's problems one per line, else the error's
    own message."""
    if isinstance(exc, ScenarioError):
        return "\n".join(f"{loc}: {msg}" for loc, msg in exc.problems)
    if isinstance(exc, KeyError) and not isinstance(exc, G2GError):
        return f"missing column or entry {exc}"
    return str(exc)


def x_range(relayout: dict[str, Any] | None) -> tuple[float, float] | None | str:
    """The time range a zoom asked for: ``(start, end)`` (s), ``None`` for the whole run
    (autorange), ``"same"`` when the event did not touch the time axis."""
    if not relayout:
        return "same"
    ends: dict[str, float] = {}
    for key, value in relayout.items():
        if _AUTORANGE.match(key) and value:
            return None
        if _RANGE_LIST.match(key) and isinstance(value, list) and len(value) == 2:
            return (float(value[0]), float(value[1]))
        found = _RANGE.match(key)
        if found:
            ends[found["end"]] = float(value)
    if "0" in ends and "1" in ends:
        return (ends["0"], ends["1"])
    return "same"


def _only(prop_id: str) -> bool:
    """Whether ``prop_id`` (``"component-id.property"``) alone triggered the running callback."""
    return set(ctx.triggered_prop_ids) == {prop_id}


def clicked_bus(click: dict[str, Any] | None) -> str | None:
    """The bus of a click on a feeder map (``clickData``: every bus marker's ``text`` is its bus),
    ``None`` for a click on nothing named."""
    points = (click or {}).get("points") or []
    text = points[0].get("text") if points else None
    return str(text) if text else None


def _shown(fn: Callable[[], T], fallback: Callable[[str], T]) -> T:
    try:
        return fn()
    except SERVED_ERRORS as exc:
        return fallback(message(exc))


def register(app: dash.Dash, store: RunStore, queue: RunQueue, allow_code: bool) -> None:
    """Attach every callback of the page to ``app``.

    :param store: the runs folder's open runs.
    :param queue: the what-if run queue.
    :param allow_code: whether free ``key=value`` lines are taken.
    """
    root = store.root

    @app.callback(
        Output("runs-table", "data"),
        Output("runs-table", "selected_rows"),
        Output("runs-hint", "children"),
        Input("runs-refresh", "n_intervals"),
        State("runs-table", "data"),
        State("runs-table", "selected_row_ids"),
        State("runs-table", "selected_rows"),
    )
    def refresh_runs(_: Any, old: list[dict[str, Any]] | None, ids: list[str] | None, rows: list[int] | None) -> Any:
        data = views.runs_rows(list_runs(root), [e.study_id for e in list_studies(root)])
        if data == old and data:  # an empty folder keeps answering: the hint is its first paint
            return no_update, no_update, no_update
        # selection follows the runs, not the row numbers, when a new run joins the list
        index = {r["id"]: k for k, r in enumerate(data)}
        selected = [index[i] for i in ids or [] if i in index]
        return data, (no_update if selected == (rows or []) else selected), views.runs_hint(len(data), str(root))

    @app.callback(
        Output("runs-revision", "data"),
        Input("runs-table", "data"),
        Input("runs-table", "selected_row_ids"),
        State("runs-revision", "data"),
    )
    def follow_runs(rows: list[dict[str, Any]] | None, ids: list[str] | None, held: str | None) -> Any:
        # the ticked runs' rows as the table last read them: a running run's progress, or its end,
        # changes them, and the views drawn from it are drawn again
        ticked = set(ids or [])
        revision = json.dumps([r for r in rows or [] if r.get("id") in ticked], sort_keys=True, default=str)
        # a new tick always answers: the views waiting on this store would not draw on no_update
        return no_update if revision == held and _only("runs-table.data") else revision

    @app.callback(
        Output("map-run", "options"),
        Output("map-run", "value"),
        Output("baseline", "options"),
        Output("baseline", "value"),
        Input("runs-table", "selected_row_ids"),
        State("map-run", "value"),
        State("baseline", "value"),
    )
    def choose(ids: list[str] | None, current: str | None, baseline: str | None) -> Any:
        ids = list(ids or [])
        keep = current if current in ids else (ids[0] if ids else None)
        keep_base = baseline if baseline in ids else (ids[0] if ids else None)
        return ids, keep, ids, keep_base

    def _times(run_id: str | None) -> Any:
        """The run's grid step times (s); ``None`` for no run or one without a grid step yet."""
        if not run_id:
            return None
        times = store.overview(store.get(run_id)).grid_times_s
        return times if times.size else None

    def _worst_time(run: RunData) -> float | None:
        """The time (s) of the run's worst grid step (:func:`~openg2g.app.timeline.worst_step`)."""
        assert run.v_min_pu is not None and run.v_max_pu is not None
        return worst_step(store.overview(run), run.v_min_pu, run.v_max_pu)

    @app.callback(
        Output("series-graph", "figure"),
        Output("series-message", "children"),
        Input("runs-revision", "data"),
        Input("series-graph", "relayoutData"),
        State("runs-table", "selected_row_ids"),
        running=POLL_OVERVIEW,
    )
    def draw_series(_revision: Any, relayout: dict[str, Any] | None, ids: list[str] | None) -> Any:
        # not waiting for the slider (its cursor is the page's): asked with the map, a round trip
        # sooner than after the slider
        if not ids:
            return views.empty_figure("select a run above"), ""
        zoom = x_range(relayout) if ctx.triggered_id == "series-graph" else None
        if zoom == "same":
            return no_update, no_update
        t_range = zoom if isinstance(zoom, tuple) else None

        def build() -> Any:
            runs = []
            for rid in ids:
                run = store.get(rid)
                whole = store.overview(run)  # the first paint reads only this file beside the run
                panels = whole.panels if t_range is None else run_panels(run, t_range)
                runs.append((rid, panels, run_marks_in(whole.marks, t_range)))
            return views.series_figure(runs, t_range), ""

        return _shown(build, lambda text: (views.empty_figure(), text))

    @app.callback(
        Output("overview-status", "children"),
        Input("overview-tick", "n_intervals"),
        Input("overview-tick", "disabled"),
        State("runs-table", "selected_row_ids"),
    )
    def overview_status(_: Any, idle: bool, ids: list[str] | None) -> str:
        if idle:
            return ""
        shown = []
        for run_id in ids or []:
            try:
                progress = store.building(run_id)
            except AppError:
                continue  # a run gone or refused: the panels' own message says so
            if progress is not None:
                shown.append(views.building_text(run_id, *progress))
        return "; ".join(shown)

    def _start(run_id: str, times: Any, link: dict[str, Any] | None) -> float:
        """Where the slider of a newly chosen run starts (s): the grid step nearest the page
        link's time when the link names this run, else the run's first step."""
        link_t = link.get("t") if link is not None and link.get("run") == run_id else None
        return float(times[0] if link_t is None else times[nearest_step(times, float(link_t))])

    MAP_NONE = (views.empty_figure(), views.empty_figure(), None, "", "", "", None)
    SLIDER_NONE = (0, 0, None, 0, None)

    def _map_outputs(run_id: str, run: RunData, t_s: float, drawn: str | None) -> tuple[Any, ...]:
        """The feeder map, profile, worst and loading lists, time label, link, message and
        drawing key of ``run_id`` at its grid step ``t_s`` (s); only the step's values when the
        browser holds the run's traces (``drawn``)."""
        assert run.v_min_pu is not None and run.v_max_pu is not None
        state = map_at(run, t_s, store.positions(run), times=store.overview(run).grid_times_s)
        feeder = views.map_figure(state, run.v_min_pu, run.v_max_pu, run_id)
        profile = views.profile_figure(state, run.v_min_pu, run.v_max_pu)
        key = f"{run_id}/{state.drawing_key()}"
        if key == drawn:  # the browser holds this run's traces: only the step's values travel
            feeder = views.time_patch(feeder, views.MAP_VARYING)
            profile = views.time_patch(profile, views.PROFILE_VARYING)
        lists = [views.worst_list(state), views.loading_list(state)]
        return feeder, profile, lists, f"t = {state.t_s:g} s", link_search(run_id, state.t_s), "", key

    @app.callback(
        Output("time-slider", "min"),
        Output("time-slider", "max"),
        Output("time-slider", "step"),
        Output("time-slider", "value"),
        Output("time-slider", "marks"),
        Output("link-request", "data", allow_duplicate=True),
        Output("map-graph", "figure"),
        Output("profile-graph", "figure"),
        Output("worst-list", "children"),
        Output("time-label", "children"),
        Output("view-link", "href"),
        Output("map-message", "children"),
        Output("map-drawn", "data"),
        Input("map-run", "value"),
        Input("runs-revision", "data"),
        Input("time-slider", "value"),
        State("link-request", "data"),
        State("map-drawn", "data"),
        running=POLL_OVERVIEW,  # the first to ask for a newly selected run's overview
        prevent_initial_call="initial_duplicate",
    )
    def slider_and_map(
        run_id: str | None, _revision: Any, value_s: float | None, link: dict[str, Any] | None, drawn: str | None
    ) -> Any:
        # one callback, so that a newly chosen run's map is asked with its slider, not after it
        moved = _only("time-slider.value")  # the slider moved within the run: only the map follows
        grown = _only("runs-revision.data")  # the run grew: the slider's range follows, it stays put
        # a link's time is taken by its run's slider, once: the link is then spent
        spent = None if link is not None and link.get("run") == run_id and not moved else no_update
        keep = (no_update,) * len(SLIDER_NONE)
        hold = (no_update,) * len(MAP_NONE)
        if not run_id:
            return (*SLIDER_NONE, spent, *(MAP_NONE if drawn is not None else hold))

        def build() -> Any:
            run = store.get(run_id)
            times = store.overview(run).grid_times_s
            if times.size == 0:
                raise AppError(f"run {run_id!r} has no grid steps yet")
            if moved:
                t_s = float(times[nearest_step(times, float(value_s or 0.0))])
                return (*keep, spent, *_map_outputs(run_id, run, t_s, drawn))
            at = slider_settings(times, _worst_time(run))
            if grown:
                return at.minimum, at.maximum, at.step, no_update, at.marks, spent, *hold
            start = _start(run_id, times, link)
            return at.minimum, at.maximum, at.step, start, at.marks, spent, *_map_outputs(run_id, run, start, drawn)

        def failed(text: str) -> Any:
            return (*(keep if moved else SLIDER_NONE), spent, *MAP_NONE[:5], text, None)

        return _shown(build, failed)

    @app.callback(
        Output("bus-graph", "figure"),
        Output("bus-graph", "style"),
        Output("bus-message", "children"),
        Input("map-graph", "clickData"),
        Input("map-run", "value"),
        prevent_initial_call=True,
    )
    def draw_bus(click: dict[str, Any] | None, run_id: str | None) -> Any:
        # another run: its buses are chosen anew (the chart hidden till then: a plot less to paint per move)
        if ctx.triggered_id == "map-run" or not run_id:
            return views.empty_figure(), views.HIDDEN, ""
        bus = clicked_bus(click)
        if bus is None:
            return no_update, no_update, no_update

        def build() -> Any:
            run = store.get(run_id)
            assert run.v_min_pu is not None and run.v_max_pu is not None
            return views.bus_figure(bus_voltages(run, bus), run.v_min_pu, run.v_max_pu), {}, ""

        return _shown(build, lambda text: (views.empty_figure(), views.HIDDEN, text))

    @app.callback(
        Output("tour", "hidden"),
        Output("tour-title", "children"),
        Output("tour-text", "children"),
        Output("tour-step", "data"),
        Input("tour-start", "n_clicks"),
        Input("tour-next", "n_clicks"),
        Input("tour-back", "n_clicks"),
        Input("tour-close", "n_clicks"),
        State("tour-step", "data"),
        prevent_initial_call=True,
    )
    def tour(*clicks_and_step: Any) -> Any:
        held = clicks_and_step[-1]
        step = tour_move(str(ctx.triggered_id).removeprefix("tour-"), held["step"] if held else None)
        if step is None:
            return True, "", "", None
        stop = TOUR[step]
        return False, f"{step + 1} of {len(TOUR)}: {stop.title}", stop.text, {"step": step, "section": stop.section}

    # the tour's stop scrolled to and outlined, the outline taken off the stop before
    app.clientside_callback(
        """function(at) {
            document.querySelectorAll('.tour-here').forEach(el => {
                el.classList.remove('tour-here'); el.style.outline = ''; });
            if (!at) { return ''; }
            const el = document.getElementById(at.section);
            if (el) {
                el.classList.add('tour-here');
                el.style.outline = '3px solid #e7298a';
                el.scrollIntoView({block: 'start'});
            }
            return at.section;
        }""",
        Output("tour-at", "children"),
        Input("tour-step", "data"),
    )

    # the time panels' and a bus chart's cursors follow the slider in the browser
    app.clientside_callback(
        """function(value) {
            window.timeCursor('series-graph', value);
            window.timeCursor('bus-graph', value);
            return window.dash_clientside.no_update;
        }""",
        Output("cursor-at", "children"),
        Input("time-slider", "value"),
        prevent_initial_call=True,
    )

    # the address bar follows the view without a page load or a history entry per slider move
    app.clientside_callback(
        """function(href) {
            const url = new URL(window.location.href);
            url.search = href || "";
            window.history.replaceState(window.history.state, "", url);
            return href ? url.href : "";
        }""",
        Output("view-link", "title"),
        Input("view-link", "href"),
    )

    @app.callback(
        Output("link-request", "data"),
        Output("link-message", "children"),
        Input("url", "search"),
    )
    def read_page_link(search: str | None) -> Any:
        # the page's own address: read as the page opens (the view then rewrites it in place)
        try:
            found = read_link(search)
        except ValueError as exc:
            return None, str(exc)
        if found is None:
            return None, no_update
        return {"run": found[0], "t": found[1]}, no_update

    @app.callback(
        Output("runs-table", "selected_rows", allow_duplicate=True),
        Output("runs-table", "selected_row_ids", allow_duplicate=True),
        Output("link-message", "children", allow_duplicate=True),
        Output("link-request", "data", allow_duplicate=True),
        Input("link-request", "data"),
        Input("runs-table", "data"),
        State("runs-table", "selected_rows"),
        prevent_initial_call=True,
    )
    def follow_link(link: dict[str, Any] | None, runs: list[dict[str, Any]] | None, selected: list[int] | None) -> Any:
        if link is None or not runs:  # no link, or the runs not listed yet
            return no_update, no_update, no_update, no_update
        rows, ids, text = _tick(str(link["run"]), runs, selected)
        if text:
            return no_update, no_update, f"the link's {text}", None
        return rows, ids, no_update, no_update

    @app.callback(
        Output("play-tick", "disabled"),
        Output("play", "children"),
        Input("play", "n_clicks"),
        State("play-tick", "disabled"),
        prevent_initial_call=True,
    )
    def toggle_play(_: int, disabled: bool) -> Any:
        return (False, "pause") if disabled else (True, "play")

    @app.callback(
        Output("time-slider", "value", allow_duplicate=True),
        Input("play-tick", "n_intervals"),
        State("time-slider", "value"),
        State("play-speed", "value"),
        State("map-run", "value"),
        prevent_initial_call=True,
    )
    def play(_: int, value_s: float | None, speed: str, run_id: str | None) -> Any:
        def build() -> Any:
            times = _times(run_id)
            return no_update if times is None else next_play_time(times, float(value_s or 0.0), speed)

        return _shown(build, lambda _text: no_update)

    @app.callback(
        Output("time-slider", "value", allow_duplicate=True),
        Input("step-back", "n_clicks"),
        Input("step-next", "n_clicks"),
        Input("jump-worst", "n_clicks"),
        State("time-slider", "value"),
        State("map-run", "value"),
        prevent_initial_call=True,
    )
    def move_time(_back: int, _next: int, _worst: int, value_s: float | None, run_id: str | None) -> Any:
        def build() -> Any:
            times = _times(run_id)
            if times is None:
                return no_update
            if ctx.triggered_id == "jump-worst":
                worst = _worst_time(store.get(run_id or ""))
                return no_update if worst is None else worst
            return stepped(times, float(value_s or 0.0), -1 if ctx.triggered_id == "step-back" else 1)

        return _shown(build, lambda _text: no_update)

    @app.callback(
        Output("compare-table", "children"),
        Output("compare-graph", "figure"),
        Output("compare-message", "children"),
        Input("runs-table", "selected_row_ids"),
        Input("baseline", "value"),
        Input("runs-revision", "data"),
    )
    def draw_compare(ids: list[str] | None, baseline: str | None, _revision: Any) -> Any:
        ids = list(ids or [])
        if len(ids) < 2 or baseline not in ids:
            return None, views.empty_figure("select two or more runs"), ""

        def build() -> Any:
            comparison = compare(root, ids, str(baseline))
            return views.compare_table(comparison), views.compare_figure(comparison), views.compare_warning(comparison)

        return _shown(build, lambda text: (None, views.empty_figure(), text))

    _register_studies(app, store)
    _register_whatif(app, queue, allow_code)


def _register_studies(app: dash.Dash, store: RunStore) -> None:
    """The hosting-capacity, siting, load-loss and leaderboard sections, and the links of the
    leaderboard and the load-loss table to the runs view."""
    root = store.root

    shown_kinds = (HOSTING, BENCHMARK, SITING, LOAD_LOSS)
    prefixes = ("hc", "lb", "st", "ll")

    @app.callback(
        *[Output(f"{prefix}-study", prop) for prefix in prefixes for prop in ("options", "value")],
        Input("runs-refresh", "n_intervals"),
        *[State(f"{prefix}-study", prop) for prefix in prefixes for prop in ("options", "value")],
    )
    def find_studies(_: Any, *shown: Any) -> Any:
        studies = list_studies(root)
        out: list[Any] = []
        for k, kind in enumerate(shown_kinds):
            old, current = shown[2 * k], shown[2 * k + 1]
            ids = [e.study_id for e in studies if e.kind == kind]
            if ids == (old or []):
                out += [no_update, no_update]
                continue
            out += [ids, current if current in ids else (ids[0] if ids else None)]
        return tuple(out)

    def feeder_of(study_id: str, kind: str) -> tuple[RunData, dict[str, tuple[float, float]]]:
        """The run a study's feeder is drawn from, and its bus positions."""
        run = store.get(study_run(root, study_id, kind))
        positions = store.positions(run)
        if positions is None:
            raise AppError(f"no feeder map: {run.topology}")
        return run, positions

    def study_map(
        prefix: str, kind: str, build_map: Callable[..., Any], table: Callable[..., Any], figure: Callable[..., Any]
    ) -> None:
        """The callback drawing a map study's section (ids ``<prefix>-...``): its map, table and controllers."""

        @app.callback(
            Output(f"{prefix}-map", "figure"),
            Output(f"{prefix}-table", "columns"),
            Output(f"{prefix}-table", "data"),
            Output(f"{prefix}-controller", "options"),
            Output(f"{prefix}-controller", "value"),
            Output(f"{prefix}-message", "children"),
            Input(f"{prefix}-study", "value"),
            Input(f"{prefix}-controller", "value"),
            Input(f"{prefix}-table", "sort_by"),
        )
        def draw(study_id: str | None, controller: str | None, sort_by: list[dict[str, str]] | None) -> Any:
            if not study_id:
                return views.empty_figure(views.NO_STUDY[kind]), [], [], [], None, ""
            chosen = controller if ctx.triggered_id != f"{prefix}-study" else None

            def build() -> Any:
                shown = build_map(root, study_id, chosen, *feeder_of(study_id, kind))
                columns, rows = table(shown)
                rows = sort_rows(rows, sort_by or [])
                # a hosting study bounded before any site is placed says so, as its command warned
                warning = shown.warning if isinstance(shown, HostingMap) else ""
                return figure(shown), columns, rows, list(shown.controllers), shown.controller, warning

            return _shown(build, lambda text: (views.empty_figure(), [], [], [], None, text))

    study_map("hc", HOSTING, hosting_map, views.hosting_table, views.hosting_figure)
    study_map("st", SITING, siting_map, views.siting_table, views.siting_figure)

    @app.callback(
        Output("lb-table", "columns"),
        Output("lb-table", "data"),
        Output("lb-note", "children"),
        Output("lb-cases", "columns"),
        Output("lb-cases", "data"),
        Output("lb-message", "children"),
        Input("lb-study", "value"),
        Input("lb-table", "sort_by"),
        Input("lb-cases", "sort_by"),
    )
    def draw_leaderboard(
        study_id: str | None, board_sort: list[dict[str, str]] | None, cases_sort: list[dict[str, str]] | None
    ) -> Any:
        if not study_id:
            return [], [], views.NO_STUDY[BENCHMARK], [], [], ""

        def build() -> Any:
            board = read_leaderboard(root, study_id)
            columns, rows, note = views.leaderboard_table(board)
            case_columns, case_rows = views.cases_table(board)
            return (
                columns,
                sort_rows(rows, board_sort or []),
                note,
                case_columns,
                sort_rows(case_rows, cases_sort or []),
                "",
            )

        return _shown(build, lambda text: ([], [], "", [], [], text))

    @app.callback(
        Output("ll-bars", "figure"),
        Output("ll-frequency", "figure"),
        Output("ll-table", "columns"),
        Output("ll-table", "data"),
        Output("ll-note", "children"),
        Output("ll-message", "children"),
        Input("ll-study", "value"),
        Input("ll-table", "sort_by"),
    )
    def draw_load_loss(study_id: str | None, sort_by: list[dict[str, str]] | None) -> Any:
        if not study_id:
            return views.empty_figure(views.NO_STUDY[LOAD_LOSS]), views.empty_figure(), [], [], "", ""

        def build() -> Any:
            study = read_load_loss(root, study_id)
            columns, rows, note = views.load_loss_table(study)
            bars, frequency = views.load_loss_bars_figure(study), views.load_loss_frequency_figure(study)
            return bars, frequency, columns, sort_rows(rows, sort_by or []), note, ""

        return _shown(build, lambda text: (views.empty_figure(), views.empty_figure(), [], [], "", text))

    def open_run_from(table: str, message: str) -> None:
        """A click on a table's ``run`` cell ticks that run in the runs view (its row id is the run id)."""

        @app.callback(
            Output("runs-table", "selected_rows", allow_duplicate=True),
            Output("runs-table", "selected_row_ids", allow_duplicate=True),
            Output(message, "children", allow_duplicate=True),
            Input(table, "active_cell"),
            State("runs-table", "data"),
            State("runs-table", "selected_rows"),
            prevent_initial_call=True,
        )
        def open_run(cell: dict[str, Any] | None, runs: list[dict[str, Any]] | None, selected: list[int] | None) -> Any:
            if not cell or cell.get("column_id") != "run":
                return no_update, no_update, no_update
            return _tick(str(cell.get("row_id") or ""), runs, selected)

    open_run_from("lb-cases", "lb-message")
    open_run_from("ll-table", "ll-message")


def _tick(run_id: str, runs: list[dict[str, Any]] | None, selected: list[int] | None) -> tuple[Any, Any, str]:
    """The runs table's ``(selected_rows, selected_row_ids, message)`` with ``run_id`` ticked as
    well (its row id is the run id); unchanged, and a message, for a run not in the table."""
    ids = [r["id"] for r in runs or []]
    if run_id not in ids:
        return no_update, no_update, f"no run folder {run_id!r} in the runs view"
    rows = sorted({*(selected or []), ids.index(run_id)})
    # both: a selection set by a callback does not update the table's derived ids, which the views follow
    return rows, [ids[k] for k in rows], ""


FORM_FIELDS = (
    "scenario",
    "bus",
    "replicas",
    "batch_sizes",
    "controller",
    "params",
    "duration_s",
    "training",
    "training_gpus",
    "training_start_s",
    "training_end_s",
    "taps",
    "extra",
)
"""The :class:`openg2g.app.whatif.FormValues` fields of the what-if form's inputs, in the order of
the callbacks' states (``extra`` only with ``allow_code``)."""


def _whatif(fields: Sequence[Any]) -> WhatIf:
    """The what-if of the form's fields (:data:`FORM_FIELDS`), checked for their types first.

    :raises ScenarioError: a field of the wrong type, more model values than the scenario's first
        site has models, or a value the form cannot read.
    """
    values = form_values(FORM_FIELDS[: len(fields)], fields)
    form = scenario_form(values.scenario)
    for name, given in (("replicas", values.replicas), ("batch_sizes", values.batch_sizes)):
        if len(given) > len(form.models):
            raise ScenarioError(
                [(name, f"{len(given)} values for the {len(form.models)} models of the scenario's first site")]
            )
    bus_text = (values.bus or "").strip()
    job = _training_fields(
        form.training,
        "on" in (values.training or []),
        (values.training_gpus, values.training_start_s, values.training_end_s),
    )
    return WhatIf(
        scenario=values.scenario,
        bus=bus_text if bus_text and bus_text != form.bus else None,
        replicas={k: n for k, n in form_models(values.replicas).items() if n != form.models[k][1]},
        batch_sizes={k: b for k, b in form_models(values.batch_sizes).items() if b != form.models[k][2]},
        controller=values.controller or KEEP,
        params=parse_params(values.params or ""),
        duration_s=values.duration_s if values.duration_s not in (None, form.duration_s) else None,
        extra=parse_extra(values.extra or ""),
        training=job[0],
        training_gpus=job[1],
        training_start_s=job[2],
        training_end_s=job[3],
        taps=values.taps or KEEP,
    )


def _number(value: float | None) -> float | None:
    """A number input's value, a whole number as ``int`` (GPUs)."""
    return int(value) if value is not None and value.is_integer() else value


def _training_fields(
    scenario_job: tuple[int, float, float] | None, on: bool, values: tuple[float | None, float | None, float | None]
) -> tuple[bool | None, float | None, float | None, float | None]:
    """``(training, gpus, start_s, end_s)`` of a what-if from the form: only what differs from
    the scenario's job (all three for a job the scenario does not have)."""
    if not on:
        return (False if scenario_job is not None else None), None, None, None
    numbers = [_number(v) for v in values]
    if scenario_job is None:
        return True, numbers[0], numbers[1], numbers[2]
    changed = [n if n is not None and n != old else None for n, old in zip(numbers, scenario_job)]
    return (True if any(c is not None for c in changed) else None), changed[0], changed[1], changed[2]


def _register_whatif(app: dash.Dash, queue: RunQueue, allow_code: bool) -> None:
    form_state = [
        State("wi-scenario", "value"),
        State("wi-bus", "value"),
        State({"type": "wi-replicas", "index": ALL}, "value"),
        State({"type": "wi-batch", "index": ALL}, "value"),
        State("wi-controller", "value"),
        State("wi-params", "value"),
        State("wi-duration", "value"),
        State("wi-training", "value"),
        State("wi-training-gpus", "value"),
        State("wi-training-start", "value"),
        State("wi-training-end", "value"),
        State("wi-taps", "value"),
    ]
    if allow_code:
        form_state.append(State("wi-extra", "value"))

    @app.callback(
        Output("wi-models", "children"),
        Output("wi-bus", "value"),
        Output("wi-duration", "value"),
        Output("wi-controller", "value"),
        Output("wi-errors", "children"),
        Input("wi-scenario", "value"),
    )
    def fill_form(scenario: str | None) -> Any:
        if not scenario:
            return [], "", None, KEEP, ""

        def build() -> Any:
            form = scenario_form(scenario)
            return views.model_inputs(form.models), form.bus, form.duration_s, KEEP, ""

        return _shown(build, lambda text: ([], "", None, KEEP, text))

    @app.callback(
        Output("wi-training", "value"),
        Output("wi-training-gpus", "value"),
        Output("wi-training-start", "value"),
        Output("wi-training-end", "value"),
        Output("wi-taps", "options"),
        Output("wi-taps", "value"),
        Input("wi-scenario", "value"),
    )
    def fill_training_and_taps(scenario: str | None) -> Any:
        empty: tuple[Any, ...] = ([], None, None, None, [KEEP], KEEP)
        if not scenario:
            return empty

        def build() -> Any:
            form = scenario_form(scenario)
            job = form.training
            on = ["on"] if job is not None else []
            gpus, start_s, end_s = job if job is not None else (None, None, None)
            return on, gpus, start_s, end_s, tap_choices(form), KEEP

        return _shown(build, lambda _text: empty)

    @app.callback(
        Output("wi-status", "children", allow_duplicate=True),
        Output("wi-errors", "children", allow_duplicate=True),
        Input("wi-run", "n_clicks"),
        *form_state,
        prevent_initial_call=True,
    )
    def submit(_: int, *fields: Any) -> Any:
        """A what-if queued is news (the status line), one refused an error (the message line)."""

        def build() -> tuple[str, str]:
            job = queue.submit(_whatif(fields), allow_code)
            return f"queued as #{job.job_id}: {job.run_id}", ""

        return _shown(build, lambda text: ("", text))

    @app.callback(
        Output("wi-yaml", "data"),
        Output("wi-errors", "children", allow_duplicate=True),
        Input("wi-download", "n_clicks"),
        *form_state,
        prevent_initial_call=True,
    )
    def download(_: int, *fields: Any) -> Any:
        def build() -> Any:
            whatif = _whatif(fields)
            text = scenario_yaml(whatif, allow_code)
            return {"content": text, "filename": f"{whatif.scenario}_whatif.yaml"}, ""

        return _shown(build, lambda text: (no_update, text))

    @app.callback(
        Output("wi-jobs", "children"),
        Output("wi-jobs-seen", "data"),
        Input("runs-refresh", "n_intervals"),
        State("wi-jobs-seen", "data"),
    )
    def show_jobs(_: Any, seen: str | None) -> Any:
        jobs = [(j.job_id, j.run_id, j.state, queue.progress(j), j.message) for j in queue.jobs()]
        signature = repr(jobs)
        if signature == seen:
            return no_update, no_update
        return views.jobs_list(jobs), signature

    @app.callback(
        Output("wi-status", "children", allow_duplicate=True),
        Input({"type": "wi-cancel", "index": ALL}, "n_clicks"),
        prevent_initial_call=True,
    )
    def cancel(clicks: list[int]) -> Any:
        trigger = ctx.triggered_id
        if not isinstance(trigger, dict) or not any(c for c in clicks or []):
            return no_update
        if not ctx.triggered or not ctx.triggered[0]["value"]:
            return no_update  # a list redrawn with fresh buttons, not a click
        return _shown(lambda: f"cancelled #{queue.cancel(int(trigger['index'])).job_id}", lambda text: text)

    @app.callback(
        Output("runs-table", "selected_rows", allow_duplicate=True),
        Output("runs-table", "selected_row_ids", allow_duplicate=True),
        Output("wi-errors", "children", allow_duplicate=True),
        Input({"type": "wi-open", "index": ALL}, "n_clicks"),
        State("runs-table", "data"),
        State("runs-table", "selected_rows"),
        prevent_initial_call=True,
    )
    def open_finished(clicks: list[int], runs: list[dict[str, Any]] | None, selected: list[int] | None) -> Any:
        """A finished what-if's ``open`` ticks its run in the runs view."""
        trigger = ctx.triggered_id
        if not isinstance(trigger, dict) or not ctx.triggered or not ctx.triggered[0]["value"]:
            return no_update, no_update, no_update  # a list redrawn with fresh buttons, not a click
        return _tick(str(trigger["index"]), runs, selected)
