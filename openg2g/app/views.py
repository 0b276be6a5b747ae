"""The page and its figures: Dash components and plotly figures built from :mod:`openg2g.app.data`.

Nothing here reads a file: each function takes what the data layer (:mod:`openg2g.app.data`,
:mod:`openg2g.app.studies`) returned. The page is one column of sections (runs, the open runs over
time, the feeder at the slider's time, runs compared, hosting capacity, siting, load loss,
leaderboard, what-if); the
voltage map and the hosting-capacity map are both drawn by :func:`bus_map_figure`. Element ids are
strings written where each element is built (``"runs-table"``), the same strings the callbacks and
the browser tests name; the constants below are what the study sections say without a study, and
the page's colours and box styles.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
import plotly.colors
import plotly.graph_objects as go
from _plotly_utils.utils import to_typed_array_spec
from dash import Patch, dcc, html
from dash.dash_table.DataTable import DataTable
from plotly.subplots import make_subplots

from openg2g.app.data import KEY_FIGURES, BusVoltages, Comparison, MapState, RunEntry
from openg2g.app.studies import (
    BENCHMARK,
    HOSTED,
    HOSTING,
    LOAD_LOSS,
    SITING,
    SITING_FIGURE,
    HostingMap,
    Leaderboard,
    LoadLossStudy,
    SitingMap,
)
from openg2g.app.timeline import FIT, PLAY_TICK_S, SPEEDS
from openg2g.app.whatif import KEEP
from openg2g.plot.compare import METRICS, Metric
from openg2g.plot.compare_runs import SERIES
from openg2g.plot.feeder import EDGE_STYLE, HIGHLIGHT_COLOR
from openg2g.plot.overview import Panel, deadline_of
from openg2g.plot.style import PHASE_COLORS, voltage_colorscale, voltage_norm
from openg2g.plot.timeline import Marks

__all__ = [
    "NO_STUDY",
    "BusColors",
    "building_text",
    "bus_map_figure",
    "cases_table",
    "compare_figure",
    "compare_table",
    "compare_warning",
    "empty_figure",
    "hosting_figure",
    "hosting_table",
    "jobs_list",
    "leaderboard_table",
    "line_colors",
    "load_loss_bars_figure",
    "load_loss_frequency_figure",
    "load_loss_table",
    "map_figure",
    "page",
    "profile_figure",
    "run_group",
    "runs_hint",
    "runs_rows",
    "series_figure",
    "siting_figure",
    "siting_table",
    "worst_list",
]

NO_STUDY = {
    HOSTING: "no hosting-capacity study in the runs folder (openg2g study hosting-capacity ... --out RUNS_DIR/NAME)",
    SITING: "no siting study in the runs folder (openg2g study siting STUDY.yaml --out RUNS_DIR/NAME)",
    BENCHMARK: "no benchmark in the runs folder (openg2g benchmark SUITE.yaml --out RUNS_DIR/NAME)",
    LOAD_LOSS: "no load-loss study in the runs folder (openg2g study load-loss STUDY.yaml --out RUNS_DIR/NAME)",
}
"""What the study sections say while the runs folder has no study of their kind."""

CAPACITY_SCALE = "Viridis"
"""Colour scale of the hosting-capacity map (MW)."""

CURSOR_COLOR = "#e7298a"
"""Colour of the time cursor on the time panels and a bus's chart (the slider's time)."""

EVENT_COLOR = "#7f7f7f"
TRAINING_COLOR = "rgba(253, 180, 98, 0.25)"
EVENT_NAMES = 40
"""The most events named on the time panels: more names overlap into an unreadable band (and
plotly measures each), so beyond it the events are drawn as lines only and counted above the panels."""
LIMIT_COLOR = "#d62728"
EDGE_COLORS = {str(kind): str(style["colors"]) for kind, style in EDGE_STYLE.items()}
EDGE_DASH = {"line": "solid", "switch": "dot", "transformer": "dash", "regulator": "dashdot", "reactor": "solid"}

MODEL_PANELS = ("batch", "itl", "throughput")
"""The time panels with one line per model (named ``site/model``), each model in its own colour."""

LINE_COLORS = tuple(plotly.colors.qualitative.Dark24)
"""The colours of the models in the time panels and of the runs in Compare, in order."""

ROW: dict[str, Any] = {"display": "flex", "flexWrap": "wrap", "gap": "8px", "alignItems": "center"}
"""A row of controls, wrapping onto more lines on a narrow screen (a phone: 390 px)."""
PANELS: dict[str, Any] = {"display": "flex", "flexWrap": "wrap"}
"""Figures side by side, one above the other where the screen is too narrow for both."""
CHOICE: dict[str, Any] = {"width": "360px", "maxWidth": "calc(100vw - 80px)"}
"""A dropdown: 360 px, narrower on a phone."""

BOX: dict[str, Any] = {"border": "1px solid #ddd", "borderRadius": "4px", "padding": "8px", "margin": "8px 0"}
MESSAGE: dict[str, Any] = {"color": "#b30000", "whiteSpace": "pre-wrap", "margin": "4px 0"}
STATUS: dict[str, Any] = {**MESSAGE, "color": "#555"}
"""A status line: news (a run queued), not an error."""


INDEX = """<!DOCTYPE html>
<html lang="en">
    <head>
        {%metas%}
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>{%title%}</title>
        {%favicon%}
        {%css%}
    </head>
    <body>
        {%app_entry%}
        <footer>
            {%config%}
            {%scripts%}
            {%renderer%}
            <script>
            // the table's tick boxes and the slider are drawn by their components without a name:
            // named here for screen readers, again whenever the table or the slider is redrawn (any
            // change to the page, plotly's drawing too: so the names are read as text, which needs
            // no layout, not as innerText, which would lay the page out in the middle of a drawing)
            new MutationObserver(() => {
                for (const row of document.querySelectorAll("#runs-table tbody tr")) {
                    const box = row.querySelector("input[type=checkbox]");
                    const run = row.querySelector("td[data-dash-column=run]");
                    const name = run ? "select run " + run.textContent.trim() : "";
                    if (box && name && box.getAttribute("aria-label") !== name) box.setAttribute("aria-label", name);
                }
                for (const el of document.querySelectorAll("#time-slider [role=slider], #time-slider input")) {
                    if (!el.getAttribute("aria-label")) el.setAttribute("aria-label", "time of the run (s)");
                }
            }).observe(document.body, {subtree: true, childList: true, characterData: true});
            // the slider's time on the time panels and a bus's chart: a line over the plot, not a
            // plotly shape (a shape moved makes Dash's graph hand plotly the whole figure again: a
            // quarter of a second on a day's panels for each slider move), placed again after each
            // drawing, zoom or resize; data-t holds the time it shows, empty while hidden
            window.timeCursor = (function () {
                const at = {};
                function place(gd) {
                    const box = gd.querySelector(".svg-container");
                    if (!box) return;
                    let line = box.querySelector(":scope > .time-cursor");
                    if (!line) {
                        line = document.createElement("div");
                        line.className = "time-cursor";
                        line.style.cssText = "position: absolute; width: 2px; pointer-events: none; background: CURSOR_COLOR";
                        box.appendChild(line);
                    }
                    const t = at[gd.parentElement.id];
                    const drawn = gd._fullLayout;
                    const xa = drawn && drawn.xaxis;
                    const range = xa && xa.range ? [Math.min(...xa.range), Math.max(...xa.range)] : null;
                    const shown = typeof t === "number" && range && xa.visible !== false && gd.data && gd.data.length > 0
                        && t >= range[0] && t <= range[1];
                    line.style.display = shown ? "" : "none";
                    line.dataset.t = shown ? String(t) : "";
                    if (shown) {
                        line.style.left = (xa._offset + xa.l2p(t) - 1) + "px";
                        line.style.top = drawn._size.t + "px";
                        line.style.height = drawn._size.h + "px";
                    }
                }
                return function (graphId, t) {
                    at[graphId] = t;
                    const gd = document.querySelector("#" + graphId + " .js-plotly-plot");
                    if (!gd || !gd.on) return;
                    if (!gd.timeCursorBound) {
                        gd.timeCursorBound = true;
                        for (const drawing of ["plotly_afterplot", "plotly_relayout"]) gd.on(drawing, () => place(gd));
                    }
                    place(gd);
                };
            })();
            // Dash's graphs ask plotly to fit their box again whenever the box changes size, and a
            // new figure of another height changes it: plotly then draws the figure a second time
            // at the size it has just drawn (a quarter of a second for a run's time panels). A
            // resize to the size already drawn (within plotly's own 1 px) is skipped; a real one
            // (the window resized) is drawn.
            (function skipSameSizeResize() {
                if (!window.Plotly) return setTimeout(skipSameSizeResize, 20);
                const resize = Plotly.Plots.resize;
                Plotly.Plots.resize = function (gd) {
                    const el = typeof gd === "string" ? document.getElementById(gd) : gd;
                    const drawn = el && el._fullLayout;
                    if (drawn) {
                        const box = window.getComputedStyle(el);
                        const same = (a, b) => Math.abs(parseFloat(a) - b) <= 1;
                        if (same(box.width, drawn.width) && same(box.height, drawn.height)) return Promise.resolve(el);
                    }
                    return resize.call(this, gd);
                };
            })();
            </script>
        </footer>
    </body>
</html>""".replace("CURSOR_COLOR", CURSOR_COLOR)
"""The page's HTML around the app: Dash's own, with the page's language, a viewport for phones,
the names of the components' unnamed inputs and the time cursor."""


def empty_figure(text: str = "") -> go.Figure:
    """A blank figure with a centred note (what to do to see something)."""
    fig = go.Figure()
    fig.update_layout(
        xaxis={"visible": False},
        yaxis={"visible": False},
        height=200,
        margin={"l": 10, "r": 10, "t": 10, "b": 10},
        annotations=[{"text": text, "showarrow": False, "xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5}]
        if text
        else [],
    )
    return fig


def _fmt(value: float, scale: float = 1.0) -> str:
    return "" if value is None or not math.isfinite(value) else f"{value * scale:.4g}"


ENDED_EARLY = ("failed", "interrupted", "stopped")
"""Statuses of a run that ended before its duration: its progress and figures are not the run's."""


RUN_GROUPS = ("run", "what-if", "study")
"""The runs table's groups, in the table's order: a planner's own runs first, then the app's
what-ifs (``whatif/``), then the runs of the studies in the folder (often hundreds)."""

WHATIF_FOLDER = "whatif/"
"""Where the app writes its what-if runs, under the runs folder."""


def run_group(run_id: str, studies: Sequence[str]) -> str:
    """The :data:`RUN_GROUPS` entry of a run: ``study`` inside a study's folder (``"."``: the runs
    folder is the study), ``what-if`` under ``whatif/``, else ``run``."""
    if any(s == "." or run_id.startswith(f"{s}/") for s in studies):
        return "study"
    return "what-if" if run_id.startswith(WHATIF_FOLDER) else "run"


def runs_rows(entries: Sequence[RunEntry], studies: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Rows of the runs table, grouped (:data:`RUN_GROUPS`), by run id within a group: group, run
    id, status, scenario, progress, the key figures and why a run ended early; a run that failed
    shows its status where its progress was and no figures (a run that collapsed at 0.1 s has a
    violation integral of 0 over what it ran, not a good run).

    :param studies: the study folders' ids (:func:`openg2g.app.studies.list_studies`).
    """
    rows = []
    for e in sorted(entries, key=lambda e: (RUN_GROUPS.index(run_group(e.run_id, studies)), e.run_id)):
        row: dict[str, Any] = {
            "id": e.run_id,
            "group": run_group(e.run_id, studies),
            "run": e.run_id,
            "status": e.status,
            "scenario": e.scenario,
            "reason": e.error,
        }
        early = e.status in ENDED_EARLY
        done = e.sim_time_s / e.duration_s if e.duration_s and math.isfinite(e.duration_s) else math.nan
        if early:
            row["progress"] = e.status
        else:
            row["progress"] = f"{100 * done:.0f}%" if math.isfinite(done) else ""
        for key in KEY_FIGURES:
            meta = METRICS.get(key, Metric(key))
            row[key] = "" if early else _fmt(e.figures.get(key, math.nan), meta.scale)
        rows.append(row)
    return rows


def runs_hint(n_runs: int, runs_dir: str) -> str:
    """What the runs section says above its table: how to make a run while the folder has none."""
    if n_runs:
        return ""
    return (
        f"no runs in {runs_dir} yet: make one with `openg2g run ieee13_ofo --out {runs_dir}/ieee13_ofo` "
        "(it appears here within two seconds), or start a what-if below"
    )


def _runs_table() -> DataTable:
    names = {n: n for n in ("group", "run", "status", "scenario", "progress")}
    names.update({k: METRICS.get(k, Metric(k)).label for k in KEY_FIGURES})
    names["reason"] = "why it ended early"
    columns: list[Any] = [{"name": label, "id": key} for key, label in names.items()]
    return DataTable(
        id="runs-table",
        columns=columns,
        data=[],
        row_selectable="multi",
        selected_rows=[],
        sort_action="native",
        filter_action="native",  # a box under each header: text in it keeps the rows that contain it
        filter_options={"case": "insensitive", "placeholder_text": "filter"},
        page_size=15,
        style_table={"overflowX": "auto"},  # a narrow screen scrolls the table, not the page
        style_cell={"fontFamily": "sans-serif", "fontSize": "13px", "textAlign": "left", "padding": "2px 6px"},
        style_cell_conditional=[
            {"if": {"column_id": "reason"}, "whiteSpace": "normal", "maxWidth": "320px", "color": MESSAGE["color"]}
        ],
        style_header={"fontWeight": "bold"},
    )


def _section(title: str, *children: Any, **kw: Any) -> html.Section:
    return html.Section([html.H3(title, style={"margin": "4px 0"}), *children], style=BOX, **kw)


def _training_inputs() -> html.Div:
    """The what-if's training job of the first site: on or off, GPUs, start and end (s)."""
    return html.Div(
        [
            dcc.Checklist([{"label": " training job", "value": "on"}], [], id="wi-training", inline=True),
            " GPUs ",
            dcc.Input(id="wi-training-gpus", type="number", min=1, step=1),
            " start (s) ",
            dcc.Input(id="wi-training-start", type="number", min=0, step=0.1),
            " end (s) ",
            dcc.Input(id="wi-training-end", type="number", min=0, step=0.1),
        ]
    )


def _table(table_id: str, **kw: Any) -> DataTable:
    """A study table: sorted on the server (``sort_action="custom"``, :func:`openg2g.app.studies.sort_rows`)."""
    return DataTable(
        id=table_id,
        columns=[],
        data=[],
        sort_action="custom",
        sort_mode="single",
        sort_by=[],
        page_size=20,
        style_cell={"fontFamily": "sans-serif", "fontSize": "13px", "textAlign": "left", "padding": "2px 6px"},
        style_header={"fontWeight": "bold"},
        style_table={"overflowX": "auto"},
        css=[{"selector": "td p", "rule": "margin: 0"}],  # markdown cells (run links) as tall as the others
        **kw,
    )


def _study_map_section(title: str, prefix: str, kind: str, section_id: str) -> html.Section:
    """A study shown on the feeder: its study and controller choices, a message line, the map
    (``<prefix>-map``) and the table (``<prefix>-table``)."""
    return _section(
        title,
        html.Div(
            [
                html.Label(["study ", dcc.Dropdown(id=f"{prefix}-study", clearable=False, style=CHOICE)]),
                html.Label(
                    [
                        "controller ",
                        dcc.Dropdown(id=f"{prefix}-controller", clearable=False, style={**CHOICE, "width": "200px"}),
                    ]
                ),
            ],
            style=ROW,
        ),
        html.Div(id=f"{prefix}-message", role="alert", style=MESSAGE),
        dcc.Graph(id=f"{prefix}-map", figure=empty_figure(NO_STUDY[kind]), config={"displaylogo": False}),
        _table(f"{prefix}-table"),
        id=section_id,
    )


def _load_loss_section() -> html.Section:
    """A load-loss study: its choice, a message line, a note (the limits), the MW lost per setting
    (``ll-bars``), the frequency against the MW lost (``ll-frequency``) and the table (``ll-table``)."""
    return _section(
        "Load loss",
        html.Label(["study ", dcc.Dropdown(id="ll-study", clearable=False, style=CHOICE)]),
        html.Div(id="ll-message", role="alert", style=MESSAGE),
        html.Div(id="ll-note", style={"color": "#555", "margin": "4px 0"}),
        html.Div(
            [
                dcc.Graph(
                    id="ll-bars",
                    figure=empty_figure(NO_STUDY[LOAD_LOSS]),
                    config={"displaylogo": False},
                    style={"flex": "1 1 320px"},
                ),
                dcc.Graph(
                    id="ll-frequency", figure=empty_figure(), config={"displaylogo": False}, style={"flex": "1 1 320px"}
                ),
            ],
            style=PANELS,
        ),
        _table("ll-table", markdown_options={"link_target": "_self"}),
        id="load-loss",
    )


def _leaderboard_section() -> html.Section:
    return _section(
        "Leaderboard",
        html.Label(["benchmark ", dcc.Dropdown(id="lb-study", clearable=False, style=CHOICE)]),
        html.Div(id="lb-message", role="alert", style=MESSAGE),
        html.Div(id="lb-note", style={"color": "#555", "margin": "4px 0"}),
        _table("lb-table"),
        html.H4("per case (click a run to open it above)", style={"margin": "8px 0 4px"}),
        _table("lb-cases", markdown_options={"link_target": "_self"}),
        id="leaderboard",
    )


def _tour_panel() -> html.Div:
    """The guided tour's panel (:mod:`openg2g.app.tour`), fixed at the window's bottom right,
    hidden until the tour starts."""
    buttons = [
        html.Button(label, id=f"tour-{action}", n_clicks=0, style={"marginRight": "6px"})
        for action, label in (("back", "◀ back"), ("next", "next ▶"), ("close", "close"))
    ]
    return html.Div(
        [
            html.H4(id="tour-title", style={"margin": "0 0 4px"}),
            html.P(id="tour-text", style={"margin": "0 0 8px"}),
            html.Div(buttons),
            dcc.Store(id="tour-step"),
            html.Div(id="tour-at", hidden=True),  # the section outlined (the browser's answer)
        ],
        id="tour",
        role="dialog",
        **{"aria-label": "guided tour"},  # type: ignore[arg-type]  # dash takes aria-* as keywords
        hidden=True,
        style={
            "position": "fixed",
            "right": "12px",
            "bottom": "12px",
            "maxWidth": "min(360px, calc(100vw - 24px))",
            "background": "white",
            "border": "2px solid #e7298a",
            "borderRadius": "6px",
            "padding": "10px",
            "boxShadow": "0 2px 10px rgba(0, 0, 0, 0.25)",
            "zIndex": 1000,
        },
    )


def _first_choice(scenarios: Sequence[str]) -> str | None:
    """The what-if form's starting scenario: the IEEE 13 case without control, the README's first."""
    return "ieee13_none" if "ieee13_none" in scenarios else (scenarios[0] if scenarios else None)


def building_text(run_id: str, done: int, parts: int) -> str:
    """What the page says while a run's overview is computed (a run without the file
    ``openg2g run`` writes beside its tables: from an older version, or written elsewhere)."""
    return f"building the overview of {run_id}: {done} of {parts} parts"


def page(scenarios: Sequence[str], controllers: Sequence[str], allow_code: bool, runs_dir: str) -> html.Div:
    """The whole page.

    :param scenarios: bundled scenario names for the what-if form.
    :param controllers: the form's controller choices.
    :param allow_code: show the free ``key=value`` field.
    :param runs_dir: the runs folder, shown in the header.
    """
    whatif_fields: list[Any] = [
        html.Label(["scenario ", dcc.Dropdown(scenarios, _first_choice(scenarios), id="wi-scenario", clearable=False)]),
        html.Label(["datacenter bus ", dcc.Input(id="wi-bus", type="text", debounce=True)]),
        html.Div(id="wi-models"),
        _training_inputs(),
        html.Label(["tap mode ", dcc.Dropdown([KEEP], KEEP, id="wi-taps", clearable=False)]),
        html.Label(
            ["controller ", dcc.Dropdown(list(controllers), controllers[0], id="wi-controller", clearable=False)]
        ),
        html.Label(
            [
                "controller parameters (YAML mapping, e.g. {setpoint: 0.96, kp: 2.0}; blank: its defaults) ",
                dcc.Input(id="wi-params", type="text", debounce=True, style={"width": "100%"}),
            ]
        ),
        html.Label(["duration (s) ", dcc.Input(id="wi-duration", type="number", min=0.1, step=0.1)]),
    ]
    if allow_code:
        whatif_fields.append(
            html.Label(
                ["more --set lines (key=value, may name code) ", dcc.Textarea(id="wi-extra", style={"width": "100%"})]
            )
        )
    return html.Div(
        [
            html.H2("openg2g runs"),
            html.Div(
                [
                    html.Span(f"runs folder: {runs_dir}", style={"color": "#555"}),
                    html.Button("guided tour", id="tour-start", n_clicks=0, style={"marginLeft": "12px"}),
                ]
            ),
            _tour_panel(),
            dcc.Interval(id="runs-refresh", interval=2000),
            dcc.Store(id="runs-revision"),  # the ticked runs' rows: a running run's views follow it
            dcc.Location(id="url", refresh=False),
            dcc.Store(id="link-request"),
            _section(
                "Runs",
                html.Div(
                    "Select one run to open it, two or more to compare them; type in a column's "
                    "filter box to keep the rows that contain the text (e.g. run in group)."
                ),
                html.Div(id="runs-hint", role="status", style=STATUS),
                _runs_table(),
                id="runs",
            ),
            _section(
                "Over time",
                html.Div(id="series-message", role="alert", style=MESSAGE),
                html.Div(id="overview-status", role="status", style={"color": "#555"}),
                dcc.Interval(id="overview-tick", interval=400, disabled=True),
                dcc.Graph(id="series-graph", figure=empty_figure("select a run above"), config={"displaylogo": False}),
                id="series",
            ),
            _section(
                "Feeder",
                html.Div(
                    [
                        html.Label(["run ", dcc.Dropdown(id="map-run", clearable=False, style=CHOICE)]),
                        html.Button("◀ previous", id="step-back", n_clicks=0, title="the grid step before"),
                        html.Button("play", id="play", n_clicks=0),
                        html.Button("next ▶", id="step-next", n_clicks=0, title="the grid step after"),
                        html.Button(
                            "worst step",
                            id="jump-worst",
                            n_clicks=0,
                            title="the grid step nearest to or furthest beyond a voltage limit",
                        ),
                        html.Label(
                            [
                                "speed ",
                                dcc.Dropdown(
                                    id="play-speed",
                                    options=[{"label": label, "value": value} for value, label in SPEEDS.items()],
                                    value=FIT,
                                    clearable=False,
                                    style={"width": "220px"},
                                ),
                            ]
                        ),
                        html.Span(id="time-label", style={"marginLeft": "12px", "fontWeight": "bold"}),
                        html.A("link to this run and time", id="view-link", href="", style={"marginLeft": "12px"}),
                    ],
                    style=ROW,
                ),
                html.Div(id="link-message", role="alert", style=MESSAGE),
                dcc.Slider(id="time-slider", min=0, max=0, value=0, marks=None, updatemode="mouseup"),
                dcc.Interval(id="play-tick", interval=round(PLAY_TICK_S * 1000), disabled=True),
                dcc.Store(id="map-drawn"),  # which run and traces the map and profile hold (MapState.drawing_key)
                html.Div(id="map-message", role="alert", style=MESSAGE),
                html.Div(
                    [
                        dcc.Graph(id="map-graph", figure=empty_figure(), style={"flex": "3 1 320px"}),
                        html.Div([html.H4("worst bus-phases"), html.Div(id="worst-list")], style={"flex": "1 1 200px"}),
                    ],
                    style=PANELS,
                ),
                dcc.Graph(id="profile-graph", figure=empty_figure()),
                html.Div(id="bus-message", role="alert", style=MESSAGE),
                html.Div(id="cursor-at", hidden=True),  # the clientside cursors' (empty) answer
                html.Div(BUS_HINT, style={"color": "#555"}),
                dcc.Graph(id="bus-graph", figure=empty_figure(), style=HIDDEN),
                id="feeder",
            ),
            _section(
                "Compare",
                html.Label(["baseline ", dcc.Dropdown(id="baseline", clearable=False, style=CHOICE)]),
                html.Div(id="compare-message", role="alert", style=MESSAGE),
                html.Div(id="compare-table"),
                dcc.Graph(id="compare-graph", figure=empty_figure("select two or more runs")),
                id="compare",
            ),
            _study_map_section("Hosting capacity", "hc", HOSTING, "hosting"),
            _study_map_section("Siting", "st", SITING, "siting"),
            _load_loss_section(),
            _leaderboard_section(),
            _section(
                "What if",
                html.Div(whatif_fields, style={"display": "grid", "gap": "6px", "maxWidth": "640px"}),
                html.Div(
                    [
                        html.Button("run", id="wi-run", n_clicks=0),
                        html.Button("download YAML", id="wi-download", n_clicks=0),
                    ],
                    style={**ROW, "margin": "6px 0"},
                ),
                dcc.Download(id="wi-yaml"),
                dcc.Store(id="wi-jobs-seen"),
                html.Div(id="wi-status", role="status", style=STATUS),
                html.Div(id="wi-errors", role="alert", style=MESSAGE),
                html.Div(id="wi-jobs"),
                id="whatif",
            ),
        ],
        style={"fontFamily": "sans-serif", "maxWidth": "1300px", "margin": "0 auto", "padding": "0 12px"},
    )


def model_inputs(models: Sequence[tuple[str, int, int]]) -> list[Any]:
    """One row per model of the what-if's first site: replicas and batch size, starting at the
    scenario's values."""
    rows: list[Any] = []
    for k, (name, replicas, batch) in enumerate(models):
        rows.append(
            html.Div(
                [
                    html.Span(name, style={"width": "180px", "display": "inline-block"}),
                    " replicas ",
                    dcc.Input(id={"type": "wi-replicas", "index": k}, type="number", value=replicas, min=0, step=1),
                    " batch size ",
                    dcc.Input(id={"type": "wi-batch", "index": k}, type="number", value=batch, min=1, step=1),
                ]
            )
        )
    return rows


def _time_line(t_s: float, line: dict[str, Any]) -> dict[str, Any]:
    """A vertical line at ``t_s`` (s) down the whole figure, across every panel."""
    return {"type": "line", "xref": "x", "yref": "paper", "x0": t_s, "x1": t_s, "y0": 0, "y1": 1, "line": line}


@lru_cache(maxsize=16)
def _subplots_layout(rows: int) -> str:
    """The layout (JSON) of ``rows`` panels stacked on one shared time axis, as plotly's
    ``make_subplots`` lays them out (its default template included); built once per count."""
    fig = make_subplots(rows=rows, cols=1, shared_xaxes=True, vertical_spacing=0.012)
    return json.dumps(fig.to_plotly_json()["layout"])


def _axis(letter: str, row: int) -> str:
    """Plotly's name of a panel's axis as a trace or shape refers to it: ``x``, ``x2``..."""
    return letter if row == 1 else f"{letter}{row}"


def _array(values: Any) -> Any:
    """An array as plotly.js reads it (base64 typed arrays, what a validated figure sends)."""
    return to_typed_array_spec(np.asarray(values))


def line_colors(names: Sequence[str]) -> dict[str, str]:
    """Name -> colour of :data:`LINE_COLORS`, in the order of ``names`` (cycling past the last)."""
    return {name: LINE_COLORS[k % len(LINE_COLORS)] for k, name in enumerate(names)}


def _legend(row: int) -> str:
    """Plotly's name of the legend beside panel ``row`` (``legend``, ``legend2``...): one legend per
    panel, so that each names the lines drawn beside it."""
    return "legend" if row == 1 else f"legend{row}"


def _series_margin(names: Sequence[str], categories: Sequence[str]) -> dict[str, Any]:
    """The time panels' margins (px), wide enough for the longest tick label of a panel of named
    rows (``categories``, 8 px text) on the left and the longest legend entry (``names``, 9 px) on
    the right, and fixed (``autoexpand`` off).

    Fixed because plotly draws a figure whose labels may push its margins twice, measuring the
    labels in between: two thirds of a second more for a run's panels in Chromium. The widths
    are an upper estimate of the labels' average character width (4.6 and 5.3 px), so a label
    fits, a little room to spare."""
    longest_row = max(map(len, categories), default=0)
    longest_name = max(map(len, names), default=0)
    return {
        "l": max(70, 40 + math.ceil(4.6 * longest_row)),
        "r": 75 + math.ceil(5.3 * longest_name),
        "t": 20,
        "b": 40,
        "autoexpand": False,
    }


def _series_marks(marks: Marks, rows: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The shapes (a training span shaded on every panel, an event a dotted line down the whole
    figure) and the annotations (an event's name, up to :data:`EVENT_NAMES` events) of a run's marks.

    An event is one line across every panel, not one per panel: plotly draws and lays out each
    shape on its own, and a day's run with a few hundred events took seconds to draw that way."""
    shapes: list[dict[str, Any]] = []
    for start, end, _label in marks.spans:
        shapes += [
            {
                "fillcolor": TRAINING_COLOR,
                "layer": "below",
                "line": {"width": 0},
                "type": "rect",
                "x0": start,
                "x1": end,
                "xref": _axis("x", row),
                "y0": 0,
                "y1": 1,
                "yref": f"{_axis('y', row)} domain",
            }
            for row in range(1, rows + 1)
        ]
    shapes += [_time_line(t, {"color": EVENT_COLOR, "dash": "dot", "width": 1}) for t, _label in marks.events]
    if len(marks.events) > EVENT_NAMES:
        count = f"{len(marks.events)} events (dotted lines; names drawn for up to {EVENT_NAMES})"
        return shapes, [
            {
                "font": {"size": 9},
                "showarrow": False,
                "text": count,
                "x": 0,
                "xref": "paper",
                "xanchor": "left",
                "y": 1.0,
                "yanchor": "bottom",
                "yref": "paper",
            }
        ]
    notes = [
        {"font": {"size": 9}, "showarrow": False, "text": label, "textangle": -90, "x": t, "y": 1.0, "yref": "paper"}
        for t, label in marks.events
    ]
    return shapes, notes


def series_figure(
    runs: Sequence[tuple[str, list[Panel], Marks]],
    t_range: tuple[float, float] | None = None,
) -> dict[str, Any] | go.Figure:
    """The open runs over time: one panel per quantity any run has, all on one time axis (zooming
    one zooms all), the runs told apart by line dash when more than one is open; a legend beside each
    panel, each model in one colour across the model panels, its ITL deadline dashed in that colour.

    Built as plotly's figure dictionary, not through ``plotly.graph_objects``: validating each of
    a few hundred properties took most of a second per draw, and the figure is the same.

    The slider's time is drawn over it by the page (:data:`INDEX`'s ``timeCursor``), not in it.

    :param runs: ``(run id, panels, marks)`` per open run; the first run's marks are drawn.
    :param t_range: the zoomed range (s) to keep.
    """
    keys: list[str] = []
    labels: dict[str, Panel] = {}
    categories: dict[str, dict[str, int]] = {}
    for _, panels, _ in runs:
        for p in panels:
            if p.key not in labels:
                keys.append(p.key)
                labels[p.key] = p
            names = categories.setdefault(p.key, {})
            for name in p.categories:
                names.setdefault(name, len(names))
    if not keys:
        return empty_figure("the selected runs have no tables yet")
    model_color = line_colors(
        sorted({line.name for _, panels, _ in runs for p in panels if p.key in MODEL_PANELS for line in p.lines})
    )
    layout: dict[str, Any] = json.loads(_subplots_layout(len(keys)))
    data: list[dict[str, Any]] = []
    levels: list[dict[str, Any]] = []
    dashes = ["solid", "dash", "dot", "dashdot", "longdash"]
    for k, (run_id, panels, _) in enumerate(runs):
        prefix = f"{run_id}: " if len(runs) > 1 else ""
        for p in panels:
            row = keys.index(p.key) + 1
            for line in p.lines:
                trace: dict[str, Any] = {
                    "hovertemplate": f"{prefix}{line.name}<br>t=%{{x:g}} s<br>%{{y:.4g}}<extra></extra>",
                    "legendgroup": f"{run_id}/{line.name}",  # a model hidden in one panel is hidden in all
                    "name": prefix + line.name,
                    "legend": _legend(row),
                    "x": _array(line.t_s),
                    "y": _array(line.y),
                    "type": "scatter",
                    "xaxis": _axis("x", row),
                    "yaxis": _axis("y", row),
                }
                if line.dash == "markers":
                    # each run indexes its own actuators: placed on the rows of every open run's actuators
                    text = [p.categories[int(i)] for i in line.y]
                    trace["hovertemplate"] = f"{prefix}{line.name}: %{{text}}<br>t=%{{x:g}} s<extra></extra>"
                    trace.update(
                        mode="markers",
                        marker={"size": 6},
                        text=text,
                        y=_array([categories[p.key][name] for name in text]),
                    )
                else:
                    style: dict[str, Any] = {"width": 1, "dash": line.dash if k == 0 else dashes[k % len(dashes)]}
                    color = model_color.get(line.name, "") if p.key in MODEL_PANELS else line.color
                    if color:
                        style["color"] = color
                    if line.step:
                        style["shape"] = "hv"
                    trace.update(mode="lines", line=style)
                data.append(trace)
            levels += [
                {
                    # a deadline in its model's colour, every other level (limits, ratings) red
                    "line": {
                        "color": model_color.get(deadline_of(label) or "", LIMIT_COLOR),
                        "dash": "dash",
                        "width": 1,
                    },
                    "name": label,
                    "type": "line",
                    "x0": 0,
                    "x1": 1,
                    "xref": f"{_axis('x', row)} domain",
                    "y0": value,
                    "y1": value,
                    "yref": _axis("y", row),
                }
                for value, label in p.levels
            ]
    for row, key in enumerate(keys, start=1):
        panel = labels[key]
        yaxis = layout[f"yaxis{row if row > 1 else ''}"]
        yaxis["title"] = {"font": {"size": 10}, "text": panel.ylabel}
        if panel.log2:
            yaxis.update(type="log", dtick=math.log10(2))
        if categories[key]:
            rows = list(categories[key])
            yaxis.update(tickfont={"size": 8}, tickvals=list(range(len(rows))), ticktext=rows)
    for row in range(1, len(keys) + 1):
        domain = layout[f"yaxis{row if row > 1 else ''}"]["domain"]
        layout[_legend(row)] = {"x": 1.01, "xanchor": "left", "y": domain[1], "yanchor": "top", "font": {"size": 9}}
    marks, notes = _series_marks(runs[0][2], len(keys))
    layout["shapes"] = [*levels, *marks]
    if notes:
        layout["annotations"] = notes
    layout.update(
        margin=_series_margin([str(t["name"]) for t in data], [c for key in keys for c in categories[key]]),
        height=150 * len(keys) + 80,
        showlegend=True,
        hovermode="closest",
        uirevision="series",
    )
    layout[f"xaxis{len(keys) if len(keys) > 1 else ''}"]["title"] = {"text": "time (s)"}
    if t_range is not None:
        for row in range(1, len(keys) + 1):
            layout[f"xaxis{row if row > 1 else ''}"]["range"] = list(t_range)
    return {"data": data, "layout": layout}


def _coordinates(positions: dict[str, tuple[float, float]], buses: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """The buses' ``x`` and ``y`` as arrays: sent to the browser as typed arrays, not number by
    number (a third of the ieee8500 map's build and its JSON)."""
    xy = np.array([positions[b] for b in buses], dtype=float).reshape(-1, 2)
    return xy[:, 0], xy[:, 1]


def _segments_xy(segments: list[list[tuple[float, float]]]) -> tuple[np.ndarray, np.ndarray]:
    """One line's ``x`` and ``y`` drawing ``segments`` (each ``[(x1, y1), (x2, y2)]``): each
    segment's two ends, then a NaN, which is a gap in the line."""
    ends = np.full((len(segments), 3, 2), np.nan)
    if segments:
        ends[:, :2] = np.asarray(segments, dtype=float)
    return ends[:, :, 0].ravel(), ends[:, :, 1].ravel()


def _edge_trace(kind: str, live: bool, segments: list[list[tuple[float, float]]], gl: bool) -> go.Scatter:
    x, y = _segments_xy(segments)
    return (go.Scattergl if gl else go.Scatter)(
        x=x,
        y=y,
        mode="lines",
        name=kind if live else f"{kind} (open)",
        line={"color": EDGE_COLORS[kind], "dash": EDGE_DASH[kind], "width": 1.6 if kind != "switch" else 1.0},
        opacity=1.0 if live else 0.25,
        hoverinfo="skip",
    )


@dataclass(frozen=True)
class BusColors:
    """What a feeder map colours its buses by.

    :param values: bus -> value (buses without one are drawn by ``missing``).
    :param hover: bus -> text after the bus name on hover.
    :param colorscale: a plotly colour scale: a name, or ``(position, colour)`` stops.
    :param cmin: the scale's low end, in the values' unit.
    :param cmax: the scale's high end.
    :param unit: the colour bar's title.
    :param name: the legend name of the coloured buses.
    :param missing: bus -> why it has no value (``not monitored``, ``infeasible``...): one grey
        trace per reason, each its own marker, so no such bus reads as a value; buses in neither
        ``values`` nor ``missing`` are drawn as in ``missing_default``.
    :param missing_default: the reason of buses in neither mapping.
    """

    values: dict[str, float]
    hover: dict[str, str]
    colorscale: str | list[tuple[float, str]]
    cmin: float
    cmax: float
    unit: str
    name: str
    missing: dict[str, str] = field(default_factory=dict)
    missing_default: str = "not monitored"


GL_POINTS = 1000
"""Markers in a plot beyond which it draws them, and its lines, with WebGL (plotly's ``scattergl``):
as SVG, the ieee8500 map's 3,700 buses and its profile took the browser about 3 s per time moved;
with SVG lines under WebGL markers, a change of colours redrew the lines (0.2-0.3 s a figure),
all in WebGL 0.02-0.04 s."""


def points_trace(count: int) -> type[go.Scatter | go.Scattergl]:
    """The trace class for a plot of ``count`` markers: SVG up to :data:`GL_POINTS`, WebGL beyond."""
    return go.Scattergl if count > GL_POINTS else go.Scatter


MISSING_SYMBOLS = ("circle", "x", "diamond", "square", "triangle-up")
"""Marker of each reason a bus has no value on a map, in the order the reasons first appear."""


def bus_map_figure(
    positions: dict[str, tuple[float, float]],
    segments: dict[tuple[str, bool], list[list[tuple[float, float]]]],
    colors: BusColors,
    sites: Sequence[str],
    title: str,
    uirevision: str,
    ringed_as: str = "datacenter",
    overlays: Sequence[Any] = (),
) -> go.Figure:
    """A feeder map: its branches, each bus coloured by ``colors`` (grey with a reason where it has
    no value), the buses ``sites`` ringed (named ``ringed_as`` and the buses in the legend: the
    datacenter buses of a run, the best placement of a siting study); ``overlays`` (traces) drawn
    over the branches and under the buses."""
    fig = go.Figure()
    names = list(positions)
    points = points_trace(len(names))
    for (kind, live), segs in segments.items():
        fig.add_trace(_edge_trace(kind, live, segs, points is go.Scattergl))
    fig.add_traces(list(overlays))
    known = [b for b in names if b in colors.values and math.isfinite(colors.values[b])]
    has_value = set(known)
    # the buses without a value first: drawn under the coloured ones, which hover then finds
    reasons: dict[str, list[str]] = {}
    for b in names:
        if b not in has_value:
            reasons.setdefault(colors.missing.get(b, colors.missing_default), []).append(b)
    for k, (reason, buses) in enumerate(reasons.items()):
        x, y = _coordinates(positions, buses)
        fig.add_trace(
            points(
                x=x,
                y=y,
                mode="markers",
                text=buses,
                customdata=[colors.hover.get(b, "") for b in buses],
                hovertemplate=f"bus %{{text}}: {reason}<br>%{{customdata}}<extra></extra>",
                marker={
                    "size": 7 if reason == colors.missing_default else 11,
                    "symbol": MISSING_SYMBOLS[k % len(MISSING_SYMBOLS)],
                    "color": "#d9d9d9" if reason == colors.missing_default else "#737373",
                    "line": {"color": "black", "width": 0.5},
                },
                name=reason,
            )
        )
    x, y = _coordinates(positions, known)
    fig.add_trace(
        points(
            x=x,
            y=y,
            mode="markers+text" if len(names) <= 60 else "markers",
            text=known,
            textposition="top right",
            textfont={"size": 9},
            customdata=[colors.hover.get(b, "") for b in known],
            hovertemplate="bus %{text}<br>%{customdata}<extra></extra>",
            uid="buses",
            marker={
                "size": 12,
                "color": np.array([colors.values[b] for b in known], dtype=float),
                "colorscale": colors.colorscale,
                "cmin": colors.cmin,
                "cmax": colors.cmax,
                "colorbar": {"title": {"text": colors.unit}},
                "line": {"color": "black", "width": 0.5},
            },
            name=colors.name,
        )
    )
    ringed = [b for b in sites if b in positions]
    if ringed:
        fig.add_trace(
            points(
                x=[positions[b][0] for b in ringed],
                y=[positions[b][1] for b in ringed],
                text=ringed,  # a click on the ring chooses its bus
                mode="markers",
                marker={"size": 24, "symbol": "circle-open", "color": HIGHLIGHT_COLOR, "line": {"width": 2.5}},
                name=f"{ringed_as} " + ", ".join(ringed),
                hoverinfo="name",
            )
        )
    fig.update_layout(
        title={"text": title, "font": {"size": 13}},
        xaxis={"visible": False},
        yaxis={"visible": False, "scaleanchor": "x"},
        height=560,
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
        legend={"orientation": "h", "y": -0.02},
        uirevision=uirevision,
    )
    return fig


def map_figure(state: MapState, v_min_pu: float, v_max_pu: float, run_id: str) -> go.Figure:
    """The feeder at one grid step, each bus coloured by its worst bus-phase voltage (the colour
    scale of the run plots, :func:`openg2g.plot.style.voltage_norm`: light inside the limits,
    saturated beyond them, out to the step's extremes), a bus beyond a limit also ringed in the
    limit colour (named with the count in the legend), datacenter buses ringed, per-phase values
    on hover."""
    phases: dict[str, list[str]] = {}
    for bus_phase, v_pu in state.bus_phase_v_pu.items():
        bus, phase = bus_phase.rsplit(".", 1)
        phases.setdefault(bus, []).append(f"{phase} {v_pu:.4f}")
    hover = {b: ", ".join(texts) + " pu" for b, texts in phases.items()}
    norm = voltage_norm(list(state.bus_v_pu.values()), v_min_pu, v_max_pu)
    volts, _ = norm.knots()
    colors = BusColors(
        values=state.bus_v_pu,
        hover=hover,
        colorscale=voltage_colorscale(norm),
        cmin=volts[0],
        cmax=volts[-1],
        unit="pu",
        name="bus voltage",
    )
    fig = bus_map_figure(
        state.positions,
        state.segments,
        colors,
        state.sites,
        f"{run_id}: voltage at t = {state.t_s:g} s",
        run_id,
        overlays=loading_traces(state),
    )
    beyond = {
        b: f"{v:.4f} pu, {'below' if v < v_min_pu else 'above'} {v_min_pu if v < v_min_pu else v_max_pu:g}"
        for b, v in state.bus_v_pu.items()
        if b in state.positions and (v < v_min_pu or v > v_max_pu)
    }
    x, y = _coordinates(state.positions, list(beyond))
    # drawn at every step, empty inside the limits, so that every step of a run has the same traces
    fig.add_trace(
        points_trace(len(state.positions))(
            x=x,
            y=y,
            mode="markers",
            text=list(beyond),
            customdata=list(beyond.values()),
            hovertemplate="bus %{text}: beyond a limit<br>%{customdata}<extra></extra>",
            marker={"size": 19, "symbol": "circle-open", "color": LIMIT_COLOR, "line": {"width": 3}},
            name=f"beyond a limit ({len(beyond)} bus{'es' if len(beyond) > 1 else ''})",
            showlegend=bool(beyond),
            uid="beyond",
        )
    )
    return fig


LOADING_BINS = (
    (0.0, 50.0, "#dadaeb", 1.5),
    (50.0, 80.0, "#9e9ac8", 3.0),
    (80.0, 100.0, "#6a51a3", 4.5),
    (100.0, math.inf, "#3f007d", 7.0),
)
"""Branch loading on the feeder map (% of the normal rating): ``(from, to, colour, line width)``,
purples so that no loading reads as a voltage colour, wider as it rises."""


def _loading_label(low: float, high: float) -> str:
    return f"over {low:g} %" if math.isinf(high) else f"{low:g}-{high:g} %"


def loading_traces(state: MapState) -> list[go.Scatter | go.Scattergl]:
    """The step's branch loading over the map's branches, one line trace per band of
    :data:`LOADING_BINS` (every band drawn, empty ones out of the legend, so that every step of a
    run has the same traces); none for a run without branch loading."""
    if state.loading.empty:
        return []
    drawn = state.loading[
        state.loading["from_bus"].isin(state.positions) & state.loading["to_bus"].isin(state.positions)
    ]
    pct = drawn["loading_pct"].to_numpy(dtype=float)
    line = points_trace(len(state.positions))
    traces = []
    for k, (low, high, color, width) in enumerate(LOADING_BINS):
        band = drawn[(pct >= low) & (pct < high)]
        x, y = _segments_xy(
            [[state.positions[a], state.positions[b]] for a, b in zip(band["from_bus"], band["to_bus"])]
        )
        traces.append(
            line(
                x=x,
                y=y,
                mode="lines",
                line={"color": color, "width": width},
                name=f"loading {_loading_label(low, high)} ({len(band)})",
                showlegend=not band.empty,
                hoverinfo="skip",
                uid=f"loading {k}",
            )
        )
    return traces


MAP_VARYING = {
    "buses": ("marker", "customdata"),
    "beyond": ("x", "y", "text", "customdata", "name", "showlegend"),
    **{f"loading {k}": ("x", "y", "name", "showlegend") for k in range(len(LOADING_BINS))},
}
"""What changes from one step of a run to the next on its feeder map (trace ``uid`` -> its
properties): the buses' colours, scale and hover values, the ring of buses beyond a limit and
the branches in each loading band."""

PROFILE_VARYING = {f"{kind} {ph}": ("y",) for ph in PHASE_COLORS for kind in ("branches", "buses")}
"""What changes from one step of a run to the next on its voltage profile: the voltages."""


def time_patch(fig: go.Figure, varying: Mapping[str, Sequence[str]]) -> Patch:
    """The patch that turns a figure of the same run at another step, with the same traces
    (:meth:`~openg2g.app.data.MapState.drawing_key`), into ``fig``: the properties ``varying``
    names (trace ``uid`` -> top-level properties) and the title. The rest (branches, positions,
    axes, zoom) stays in the browser: on ieee8500 a move then sends about a tenth of the figures
    and the browser redraws instead of drawing anew."""
    patch = Patch()
    for i, trace in enumerate(fig.to_plotly_json()["data"]):
        for prop in varying.get(trace.get("uid", ""), ()):
            patch["data"][i][prop] = trace.get(prop)
    patch["layout"]["title"]["text"] = fig.layout.title.text
    return patch


def profile_figure(state: MapState, v_min_pu: float, v_max_pu: float) -> go.Figure:
    """Voltage per phase against the distance from the source at the map's time, branches as
    segments, the limits dashed."""
    fig = go.Figure()
    placed = state.profile[state.profile["distance_km"].notna()]
    points = points_trace(len(placed))
    for ph, color in PHASE_COLORS.items():
        rows = placed[placed["phase"] == ph]
        if rows.empty:
            continue
        x, y = _segments_xy(state.profile_segments.get(ph, []))
        fig.add_trace(
            points(
                x=x,
                y=y,
                mode="lines",
                line={"color": color, "width": 1},
                hoverinfo="skip",
                showlegend=False,
                uid=f"branches {ph}",
            )
        )
        fig.add_trace(
            points(
                x=rows["distance_km"],
                y=rows["v_pu"],
                mode="markers",
                marker={"color": color, "size": 6},
                text=rows["bus"],
                name=f"phase {ph}",
                hovertemplate="%{text}." + ph + "<br>%{x:.3f} km<br>%{y:.4f} pu<extra></extra>",
                uid=f"buses {ph}",
            )
        )
    return _voltage_plot(
        fig,
        (v_min_pu, v_max_pu),
        f"voltage profile at t = {state.t_s:g} s",
        "distance from the source along the feeder (km)",
        360,
        "profile",
    )


def _voltage_plot(
    fig: go.Figure, limits_pu: tuple[float, float], title: str, x_title: str, height: int, uirevision: str
) -> go.Figure:
    """``fig`` as a voltage plot: the limits (pu) dashed, its title, axes and size.

    The margins are fixed (``autoexpand`` off), wide enough for the axis titles and the legend of
    three phases at the plot's right edge: a legend or title that pushes a margin makes plotly lay
    the figure out again, a third more time for a feeder's profile in Chromium (45 of 140-190 ms)."""
    for value in limits_pu:
        fig.add_hline(y=value, line={"color": LIMIT_COLOR, "dash": "dash", "width": 1})
    fig.update_layout(
        title={"text": title, "font": {"size": 13}},
        xaxis_title=x_title,
        yaxis_title="voltage (pu)",
        height=height,
        legend={"x": 1.0, "xanchor": "left"},
        margin={"l": 62, "r": 100, "t": 40, "b": 55, "autoexpand": False},
        uirevision=uirevision,
    )
    return fig


BUS_HINT = "click a bus on the map: its voltage per phase over the run, charted here"

HIDDEN = {"display": "none"}
"""The style of a plot not drawn yet (the bus chart before a bus is clicked)."""


def bus_figure(series: BusVoltages, v_min_pu: float, v_max_pu: float) -> go.Figure:
    """One bus's voltage per phase over the run, the limits dashed, and in the title how long it
    spent beyond a limit and its worst voltage (the slider's time drawn over it by the page, as on
    the time panels)."""
    fig = go.Figure()
    for ph, (t, v) in series.phases.items():
        fig.add_trace(
            go.Scatter(
                x=_array(t),
                y=_array(v),
                mode="lines",
                name=f"phase {ph}",
                line={"color": PHASE_COLORS[ph], "width": 1.2},
                hovertemplate=f"{series.bus}.{ph}<br>%{{x:g}} s<br>%{{y:.4f}} pu<extra></extra>",
            )
        )
    beyond = (
        f"beyond a limit at {series.steps_beyond:,} of {series.steps:,} grid steps ({series.seconds_beyond:g} s)"
        if series.steps_beyond
        else f"inside the limits at all {series.steps:,} grid steps"
    )
    worst = f"worst {series.bus}.{series.worst_phase} {series.worst_v_pu:.4f} pu at t = {series.worst_t_s:g} s"
    return _voltage_plot(fig, (v_min_pu, v_max_pu), f"bus {series.bus}: {beyond}; {worst}", "time (s)", 300, series.bus)


def loading_list(state: MapState, count: int = 5) -> html.Div | None:
    """The ``count`` most loaded branches at the map's time (``None`` for a run without branch
    loading), and the recorded branches the map has no place for."""
    if state.loading.empty and not state.unplaced:
        return None
    items = [
        html.Li(
            f"{r.branch} ({r.from_bus} - {r.to_bus}): {r.loading_pct:.1f} %"
            + (" of the default rating" if r.rating_default else ""),
            style={"color": "#3f007d", "fontWeight": "bold"} if r.loading_pct >= 100.0 else {},
        )
        for r in state.loading.head(count).itertuples(index=False)
    ]
    children: list[Any] = [html.H4("most loaded branches (% of rating)"), html.Ol(items, id="loaded-items")]
    if state.unplaced:
        children.append(html.P(f"not on the map: {', '.join(state.unplaced)}", style={"fontSize": "12px"}))
    return html.Div(children)


def worst_list(state: MapState) -> html.Ol:
    """The bus-phases nearest to (or beyond) the limits at the map's time."""
    return html.Ol(
        [
            html.Li(
                f"{r.bus_phase}: {r.v_pu:.4f} pu ({'inside' if r.margin_pu >= 0 else 'OUTSIDE'} by {abs(r.margin_pu):.4f})",
                style={"color": "#b30000"} if r.margin_pu < 0 else {},
            )
            for r in state.worst.itertuples(index=False)
        ],
        id="worst-items",
    )


def compare_table(comparison: Comparison) -> html.Table:
    """The compared figures per run, with the change against the baseline (difference and %; no
    change for a run of another length than the baseline's, :func:`compare_warning`)."""
    unlike = comparison.unlike_baseline()
    keys = list(comparison.summaries.columns)
    header = html.Tr([html.Th("run"), *(html.Th(METRICS.get(k, Metric(k)).label) for k in keys)])
    rows = []
    for label, summary in comparison.summaries.iterrows():
        cells = [html.Td(f"{label} (baseline)" if label == comparison.baseline else str(label))]
        for key in keys:
            meta = METRICS.get(key, Metric(key))
            value = summary[key]
            text = _fmt(float(value), meta.scale) if isinstance(value, (int, float)) else ""
            if label != comparison.baseline and label in comparison.deltas.index and label not in unlike:
                delta = float(comparison.deltas.at[label, key])
                pct = float(comparison.deltas.at[label, f"{key}_pct"])
                if math.isfinite(delta):
                    text += f" ({delta * meta.scale:+.3g}" + (f", {pct:+.1f}%" if math.isfinite(pct) else "") + ")"
            cells.append(html.Td(text))
        rows.append(html.Tr(cells))
    return html.Table([html.Thead(header), html.Tbody(rows)], id="compare-rows", style={"fontSize": "13px"})


def compare_warning(comparison: Comparison) -> str:
    """What Compare says when runs cover other lengths of time than the baseline (``""`` when
    none does): their changes would read the length (a 5 s run against a 20 s one: -75 % of
    everything summed over time), so none is shown."""
    unlike = comparison.unlike_baseline()
    if not unlike:
        return ""
    lengths = ", ".join(f"{label} {comparison.lengths_s[label]:g} s" for label in unlike)
    return (
        f"runs of another length than the baseline {comparison.baseline} "
        f"({comparison.lengths_s[comparison.baseline]:g} s): {lengths}; their changes are not shown"
    )


def compare_figure(comparison: Comparison) -> go.Figure:
    """The runs over time, one panel per quantity, the baseline in black, each other run in one
    colour across the panels."""
    keys = [k for k in SERIES if k in comparison.curves]
    if not keys:
        return empty_figure("no run has a grid, datacenter or models table")
    fig = make_subplots(rows=len(keys), cols=1, shared_xaxes=True, vertical_spacing=0.03)
    others = [label for label in comparison.summaries.index if label != comparison.baseline]
    run_color = line_colors([str(label) for label in others])
    for row, key in enumerate(keys, start=1):
        for label, (t, y) in comparison.curves[key].items():
            base = label == comparison.baseline
            fig.add_trace(
                go.Scatter(
                    x=t,
                    y=y,
                    mode="lines",
                    name=f"{label} (baseline)" if base else label,
                    legendgroup=label,
                    showlegend=row == 1,
                    line={"color": "black", "width": 1.5} if base else {"color": run_color.get(str(label)), "width": 1},
                ),
                row=row,
                col=1,
            )
        fig.update_yaxes(title_text=SERIES[key].label, title_font={"size": 9}, row=row, col=1)
    fig.update_layout(height=180 * len(keys) + 80, margin={"l": 70, "r": 20, "t": 20, "b": 40}, uirevision="compare")
    fig.update_xaxes(title_text="time (s)", row=len(keys), col=1)
    return fig


def jobs_list(jobs: Sequence[tuple[int, str, str, float, str]]) -> html.Ul:
    """The what-if runs: ``(job id, run id, state, progress 0-1, message)`` each, a cancel button
    on those queued or running, an ``open`` button (ticking its run) on those complete."""
    items = []
    for job_id, run_id, state, done, message in jobs:
        parts: list[Any] = [f"#{job_id} {run_id}: {state}"]
        if state == "running":
            parts.append(html.Progress(value=f"{done:.3f}", max="1", style={"marginLeft": "8px"}))
            parts.append(f" {100 * done:.0f}%")
        if state in ("queued", "running"):
            parts.append(
                html.Button(
                    "cancel", id={"type": "wi-cancel", "index": job_id}, n_clicks=0, style={"marginLeft": "8px"}
                )
            )
        if state == "complete":
            parts.append(
                html.Button("open", id={"type": "wi-open", "index": run_id}, n_clicks=0, style={"marginLeft": "8px"})
            )
        if message:
            parts.append(html.Div(message, style=MESSAGE))
        items.append(html.Li(parts, className=f"job job-{state}"))
    return html.Ul(items, id="wi-job-items")


def _sig(value: Any) -> float | None:
    """A number to four significant digits for a table cell (sortable), ``None`` for none."""
    if value is None or isinstance(value, str):
        return None
    number = float(value)
    return float(f"{number:.4g}") if math.isfinite(number) else None


def hosting_figure(hmap: HostingMap) -> go.Figure:
    """One controller's hosting capacity on the feeder: each studied bus coloured by the peak MW it
    hosts, its limiting constraint on hover; a bus where no size is hosted drawn grey and named by
    its state (``infeasible``, ``not converged``, ``error``), never as 0 MW."""
    values = hmap.capacity_mw()
    hover = {}
    for row in hmap.rows.itertuples(index=False):
        head = f"{row.capacity_mw:.3g} MW peak ({row.capacity_gpus} GPUs)" if row.state == HOSTED else row.state
        hover[row.bus] = f"{head}<br>limit: {row.limit}" if row.limit else head
    colors = BusColors(
        values=values,
        hover=hover,
        colorscale=CAPACITY_SCALE,
        cmin=0.0,
        cmax=max([*values.values(), 1e-3]),
        unit="MW",
        name="hosted MW (peak)",
        missing=hmap.unhosted(),
        missing_default="not studied",
    )
    title = f"{hmap.study_id}: hosting capacity with controller {hmap.controller} (MW peak)"
    return bus_map_figure(hmap.positions, hmap.segments, colors, (), title, f"hosting/{hmap.study_id}")


HOSTING_COLUMNS = {
    "bus": "bus",
    "state": "state",
    "capacity_mw": "hosted (MW peak)",
    "capacity_gpus": "GPUs",
    "min_mw": "smallest hosted (MW peak)",
    "limit": "limiting constraint",
    "n_runs": "runs",
}
"""The hosting table's columns (id -> header)."""


def hosting_table(hmap: HostingMap) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The hosting table's ``(columns, rows)``: one row per studied bus, no MW where none is hosted."""
    columns = [
        {"name": label, "id": key, "type": "numeric" if key in ("capacity_mw", "min_mw", "n_runs") else "text"}
        for key, label in HOSTING_COLUMNS.items()
    ]
    rows = []
    for record in hmap.rows.to_dict("records"):
        row = {key: record[key] for key in HOSTING_COLUMNS}
        row["capacity_mw"] = _sig(record["capacity_mw"])
        row["min_mw"] = _sig(record["min_mw"])
        rows.append(row)
    return columns, rows


def siting_figure(smap: SitingMap) -> go.Figure:
    """One controller's siting study on the feeder: each bus where the whole site was placed
    coloured by the run's violation integral (lower is better), its rank and figures on hover; a
    placement whose run did not complete drawn grey and named by its status; the best placement's
    buses ringed."""
    values = smap.figure_by_bus()
    hover = {}
    for row in smap.rows[smap.rows["kind"] == "single"].itertuples(index=False):
        hover[row.buses[0]] = (
            f"#{row.rank}: violation {row.violation_integral_pu_s:.4g} pu.s, "
            f"throughput {row.mean_throughput_tok_s / 1e6:.4g} M tok/s, lowest {row.v_min_pu:.4f} pu"
        )
    colors = BusColors(
        values=values,
        hover=hover,
        colorscale="Magma_r",
        cmin=0.0,
        cmax=max([*values.values(), 1e-3]),
        unit="pu.s",
        name="violation integral, site on the bus",
        missing=smap.unplaced(),
        missing_default="not a candidate",
    )
    best = smap.best()
    title = f"{smap.study_id}: siting with controller {smap.controller} (violation integral, pu.s)"
    ringed_as = "best placement" + (" (split)" if len(best) > 1 else "")
    return bus_map_figure(smap.positions, smap.segments, colors, best, title, f"siting/{smap.study_id}", ringed_as)


SITING_COLUMNS = {
    "rank": "rank",
    "placement": "placement",
    "kind": "kind",
    "status": "status",
    SITING_FIGURE: "violation (pu.s)",
    "mean_throughput_tok_s": "throughput (M tok/s)",
    "v_min_pu": "lowest voltage (pu)",
    "run_id": "run",
}
"""The siting table's columns (id -> header)."""


def siting_table(smap: SitingMap) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The siting table's ``(columns, rows)``: every placement of the controller in rank order."""
    numeric = ("rank", SITING_FIGURE, "mean_throughput_tok_s", "v_min_pu")
    columns = [
        {"name": label, "id": key, "type": "numeric" if key in numeric else "text"}
        for key, label in SITING_COLUMNS.items()
    ]
    rows = []
    for record in smap.rows.to_dict("records"):
        row = {key: record[key] for key in SITING_COLUMNS}
        row[SITING_FIGURE] = _sig(record[SITING_FIGURE])
        row["mean_throughput_tok_s"] = _sig(record["mean_throughput_tok_s"] / 1e6)
        row["v_min_pu"] = _sig(record["v_min_pu"])
        rows.append(row)
    return columns, rows


def load_loss_bars_figure(study: LoadLossStudy) -> go.Figure:
    """MW lost per setting at the base size, one bar stacked by site, the sites' loss at once as a
    black tick, and, from a search, the largest loss within the limits as a red diamond (``>=``
    when the search was capped)."""
    fig = go.Figure()
    names = list(study.settings["setting"])
    for site in dict.fromkeys(study.sites["site"]):
        rows = study.sites[study.sites["site"] == site].set_index("setting")
        heights = [float(rows.at[n, "mw_lost"]) if n in rows.index else 0.0 for n in names]
        fig.add_bar(x=names, y=heights, name=site, hovertemplate=f"{site}: %{{y:,.1f}} MW<extra></extra>")
    fig.add_scatter(
        x=names,
        y=list(study.settings["load_lost_mw"]),
        mode="markers",
        name="lost at once",
        marker={"symbol": "line-ew", "size": 40, "line": {"width": 3, "color": "black"}},
        hovertemplate="lost at once: %{y:,.1f} MW<extra></extra>",
    )
    if study.searched:
        capped = study.settings["holdable_capped"]
        fig.add_scatter(
            x=names,
            y=list(study.settings["holdable_mw"]),
            mode="markers+text",
            name="largest loss within the limits",
            marker={"symbol": "diamond", "size": 11, "color": LIMIT_COLOR},
            text=[("\u2265" if c else "") + _fmt(v) + " MW" for v, c in zip(study.settings["holdable_mw"], capped)],
            textposition="middle right",
            hovertemplate="within the limits: %{text}<extra></extra>",
        )
    fig.update_layout(
        barmode="stack",
        title=f"{study.study_id}: MW lost per setting",
        xaxis_title="ride-through setting",
        yaxis_title="MW lost",
        height=420,
        margin={"l": 60, "r": 20, "t": 50, "b": 50},
        legend={"font": {"size": 10}},
    )
    return fig


def load_loss_frequency_figure(study: LoadLossStudy) -> go.Figure:
    """The frequency zenith (the nadir, for a study that only limits it) against the MW lost of
    every complete run, one series per setting, a run beyond any limit hollow; the limit dashed."""
    nadir = "f_min_hz" in study.limits and "f_max_hz" not in study.limits
    column, word = ("frequency_nadir_hz", "nadir") if nadir else ("frequency_zenith_hz", "zenith")
    fig = go.Figure()
    for setting in dict.fromkeys(study.points["setting"]):
        rows = study.points[study.points["setting"] == setting].sort_values("load_lost_mw")
        fig.add_scatter(
            x=list(rows["load_lost_mw"]),
            y=list(rows[column]),
            mode="lines+markers",
            name=setting,
            marker={"size": 9, "symbol": ["circle" if ok else "circle-open" for ok in rows["within_limits"]]},
            line={"width": 1},
            customdata=list(rows["multiplier"]),
            hovertemplate=f"{setting} x%{{customdata:g}}: %{{x:,.1f}} MW lost, {word} %{{y:.4f}} Hz<extra></extra>",
        )
    limit = study.limits.get("f_min_hz" if nadir else "f_max_hz")
    if limit is not None:
        fig.add_hline(y=limit, line={"color": LIMIT_COLOR, "dash": "dash"}, annotation_text=f"limit {limit:g} Hz")
    fig.update_layout(
        title=f"frequency {word} against the MW lost (hollow: beyond a limit)",
        xaxis_title="MW lost at once",
        yaxis_title=f"frequency {word} (Hz)",
        height=420,
        margin={"l": 60, "r": 20, "t": 50, "b": 50},
        legend={"font": {"size": 10}},
    )
    return fig


LOAD_LOSS_COLUMNS = {
    "setting": "setting",
    "status": "status",
    "mw_before": "MW before",
    "load_lost_mw": "MW lost at once",
    "holdable_mw": "largest loss within the limits (MW)",
    "holdable_multiplier": "at multiplier",
    "frequency_zenith_hz": "zenith (Hz)",
    "frequency_nadir_hz": "nadir (Hz)",
    "frequency_rocof_hz_s": "RoCoF (Hz/s)",
    "v_min_pu": "lowest voltage after (pu)",
    "v_max_pu": "highest voltage after (pu)",
    "within_limits": "within limits",
    "broken_limits": "limits broken",
    "run": "run",
}
"""The load-loss table's columns (id -> header); the search's two only for a study with one."""

DECIMALS_4 = ("frequency_zenith_hz", "frequency_nadir_hz", "v_min_pu", "v_max_pu")
"""The load-loss table's columns shown to four decimals (Hz, pu), the others to four digits."""


def load_loss_table(study: LoadLossStudy) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    """The load-loss table's ``(columns, rows, note)``: one row per setting with its run folder as
    a link to the runs view, and a note naming the limits and where the voltages count from."""
    keys = [k for k in LOAD_LOSS_COLUMNS if study.searched or not k.startswith("holdable")]
    text = ("setting", "status", "holdable_mw", "within_limits", "broken_limits", "run")
    columns: list[dict[str, Any]] = [
        {"name": LOAD_LOSS_COLUMNS[k], "id": k}
        | ({"presentation": "markdown"} if k == "run" else {})
        | ({} if k in text else {"type": "numeric"})
        for k in keys
    ]
    rows = []
    for record in study.settings.to_dict("records"):
        row: dict[str, Any] = {"id": record["run"] or record["setting"]}
        for key in keys:
            value = record[key]
            if key in ("setting", "status", "broken_limits"):
                row[key] = value
            elif key in DECIMALS_4:  # frequencies and voltages: their limits are a few parts in 10^4 away
                row[key] = round(float(value), 4) if math.isfinite(float(value)) else None
            else:
                row[key] = _sig(value)
        row["within_limits"] = "yes" if record["within_limits"] else "no"
        if study.searched:
            # a capped search gives a lower bound: shown as text, sorted by its number (the _ twin)
            held = row["_holdable_mw"] = row["holdable_mw"]
            at_least = "\u2265" if record["holdable_capped"] else ""
            row["holdable_mw"] = "" if held is None else f"{at_least}{held:g}"
        row["run"] = f"[{record['run']}](#runs)" if record["run"] else ""
        rows.append(row)
    units = {"f_min_hz": "Hz", "f_max_hz": "Hz", "v_min_pu": "pu", "v_max_pu": "pu"}
    limits = ", ".join(f"{name[:5].replace('_', ' ')} {v:g} {units[name]}" for name, v in study.limits.items())
    note = (
        f"{study.study_id}: limits {limits}; the frequency over the whole run, the voltages after the "
        f"last disturbance (from {study.voltages_from_s:g} s on)."
    )
    return columns, rows, note


SCORE_NAMES = {
    "violation_integral_pu_s": "violation (pu.s)",
    "violation_time_s": "violation (s)",
    "throughput_loss_pct": "throughput loss (%)",
    "itl_deadline_miss_pct": "ITL misses (%)",
    "n_tap_changes": "tap operations",
}
"""Headers of the benchmark's scores (a score not named here is headed by its column name)."""


def leaderboard_table(board: Leaderboard) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    """The leaderboard's ``(columns, rows, note)``: in the file's ranking order, a shared rank as
    ``=2`` (sorted by position), then mean and worst of each score over the controller's cases."""
    shared = f"{board.n_shared} shared cases" if board.n_shared is not None else "shared cases"
    columns: list[dict[str, Any]] = [
        {"name": "rank", "id": "rank"},
        {"name": "controller", "id": "controller"},
        {"name": "cases", "id": "n_cases", "type": "numeric"},
        {"name": f"violation (pu.s), {shared}", "id": "violation_shared", "type": "numeric"},
    ]
    for key in board.scores:
        columns.append({"name": f"{SCORE_NAMES.get(key, key)} mean", "id": f"{key}_mean", "type": "numeric"})
        columns.append({"name": "worst", "id": f"{key}_worst", "type": "numeric"})
    rows = []
    for position, record in enumerate(board.board.to_dict("records")):
        row: dict[str, Any] = {
            "id": str(record["controller"]),
            "rank": record["rank_text"],
            "_rank": position,
            "controller": record["label"],
            "n_cases": int(record["n_cases"]),
            "violation_shared": _sig(record["violation_integral_pu_s_shared"]),
        }
        for key in board.scores:
            row[f"{key}_mean"] = _sig(record.get(f"{key}_mean"))
            row[f"{key}_worst"] = _sig(record.get(f"{key}_worst"))
        rows.append(row)
    note = (
        f"{board.study_id}: ranked by the mean violation integral over the {shared} (those every controller "
        "completed), then throughput loss, then ITL misses; a controller with non-converged runs ranks after "
        "the others; empty: no complete, converged run. Lower is better for every score."
    )
    return columns, rows, note


def cases_table(board: Leaderboard) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The benchmark's per-case figures ``(columns, rows)``: one row per run, its run folder as a
    link to the runs view (empty where the folder is not there)."""
    columns: list[dict[str, Any]] = [
        {"name": "case", "id": "case"},
        {"name": "controller", "id": "controller"},
        {"name": "status", "id": "status"},
        *({"name": SCORE_NAMES.get(key, key), "id": key, "type": "numeric"} for key in board.scores),
        {"name": "run", "id": "run", "presentation": "markdown"},
    ]
    rows = []
    for record in board.cases.to_dict("records"):
        row: dict[str, Any] = {
            "id": record["run"] or f"{record['case']}-{record['controller']}",
            "case": str(record["case"]),
            "controller": str(record["controller"]),
            "status": str(record["status"]),
            "run": f"[{record['run']}](#runs)" if record["run"] else "",
        }
        for key in board.scores:
            row[key] = _sig(record.get(key))
        rows.append(row)
    return columns, rows
