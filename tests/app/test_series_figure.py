"""The time panels' figure (``views.series_figure``): how a run's events and its labels are laid out."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("dash")

from openg2g.app import views
from openg2g.plot.overview import Line, Panel
from openg2g.plot.timeline import Marks

T = np.array([0.0, 10.0, 20.0])
PANELS = [
    Panel("dc_power", "datacenter P (MW)", [Line("dc1 a", T, np.array([1.0, 1.2, 1.1]))]),
    Panel("voltage", "voltage (pu)", [Line("lowest bus-phase", T, np.array([0.96, 0.95, 0.97]))]),
    Panel(
        "commands",
        "commands",
        [Line("ofo", T, np.array([0.0, 1.0, 0.0]), dash="markers")],
        categories=("set_batch_size dc1/Qwen3-235B-A22B", "set_taps reg1"),
    ),
]


def _figure(events: int, spans: int = 0) -> dict:
    marks = Marks(
        events=tuple((float(k), f"event {k}") for k in range(events)),
        spans=tuple((float(k), k + 0.5, "training") for k in range(spans)),
    )
    figure = views.series_figure([("run", PANELS, marks)])
    assert isinstance(figure, dict)
    return figure


def test_each_event_is_one_line_down_every_panel_and_named_above() -> None:
    layout = _figure(events=3, spans=1)["layout"]
    events = [s for s in layout["shapes"] if s.get("line", {}).get("dash") == "dot"]
    # one shape per event, across the whole figure, not one per panel (three panels here)
    assert [(s["x0"], s["xref"], s["yref"], s["y0"], s["y1"]) for s in events] == [
        (float(k), "x", "paper", 0, 1) for k in range(3)
    ]
    spans = [s for s in layout["shapes"] if s["type"] == "rect"]
    assert [s["yref"] for s in spans] == ["y domain", "y2 domain", "y3 domain"]  # a span shaded in each panel
    assert [a["text"] for a in layout["annotations"]] == ["event 0", "event 1", "event 2"]


def test_past_the_named_count_events_are_counted_not_named() -> None:
    named = _figure(events=views.EVENT_NAMES)["layout"]
    assert len(named["annotations"]) == views.EVENT_NAMES
    many = _figure(events=views.EVENT_NAMES + 1)["layout"]
    assert [a["text"] for a in many["annotations"]] == [
        f"{views.EVENT_NAMES + 1} events (dotted lines; names drawn for up to {views.EVENT_NAMES})"
    ]
    assert sum(s.get("line", {}).get("dash") == "dot" for s in many["shapes"]) == views.EVENT_NAMES + 1


def test_the_margins_are_fixed_and_grow_with_the_longest_labels() -> None:
    margin = _figure(events=0)["layout"]["margin"]
    assert margin["autoexpand"] is False  # plotly draws once, not again after measuring its labels
    longest_row = len("set_batch_size dc1/Qwen3-235B-A22B")
    longest_name = len("lowest bus-phase")
    assert margin["l"] == 40 + int(np.ceil(4.6 * longest_row))
    assert margin["r"] == 75 + int(np.ceil(5.3 * longest_name))
    short = views.series_figure([("run", PANELS[:1], Marks())])
    assert isinstance(short, dict) and short["layout"]["margin"]["l"] == 70  # never under the axis title's room
