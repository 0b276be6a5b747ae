"""Feeder maps: the one-line diagram at its bus coordinates, buses coloured by voltage.

The plot reads two small tables, ``buses`` (``bus``, ``x``, ``y``) and ``edges`` (``from_bus``,
``to_bus``, ``kind``), that :func:`feeder_tables` extracts from a loaded feeder, and a voltage per
bus that :func:`bus_voltages` reduces from a run's ``grid_voltages`` table.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Literal

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from openg2g.plot.style import new_figure, styled, voltage_cmap, voltage_norm

if TYPE_CHECKING:
    from openg2g.grid.feeder.library import Feeder

__all__ = ["EDGE_STYLE", "bus_voltages", "feeder_tables", "plot_feeder_map"]

EDGE_STYLE: dict[str, dict[str, object]] = {
    "line": {"colors": "#525252", "linewidths": 1.6, "linestyles": "solid"},
    "switch": {"colors": "#525252", "linewidths": 1.0, "linestyles": "dotted"},
    "transformer": {"colors": "#8c6d31", "linewidths": 2.2, "linestyles": "dashed"},
}
"""How each kind of branch is drawn."""


def feeder_tables(feeder: Feeder) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The drawing tables of a feeder (from :func:`openg2g.grid.feeder.library.load_feeder`).

    :return: ``buses`` (``bus``, ``x``, ``y``, ``phases``; buses without coordinates are left out)
        and ``edges`` (``name``, ``from_bus``, ``to_bus``, ``kind`` in line/switch/transformer,
        ``in_service``; regulator banks of single-phase units appear once).
    """
    buses = pd.DataFrame(
        [
            {"bus": bus, "x": float(xy[0]), "y": float(xy[1]), "phases": "".join(feeder.bus_phases.get(bus, ()))}
            for bus, xy in feeder.coords.items()
        ],
        columns=["bus", "x", "y", "phases"],
    )
    rows = [
        {
            "name": ln.name,
            "from_bus": ln.bus1,
            "to_bus": ln.bus2,
            "kind": "switch" if ln.switch else "line",
            "in_service": bool(ln.in_service),
        }
        for ln in feeder.model.lines
    ]
    seen: set[tuple[str, str]] = set()
    for t in feeder.model.transformers:
        pair = (t.windings[0].bus, t.windings[1].bus)
        if pair in seen:
            continue
        seen.add(pair)
        rows.append(
            {
                "name": t.bank or t.name,
                "from_bus": pair[0],
                "to_bus": pair[1],
                "kind": "transformer",
                "in_service": True,
            }
        )
    edges = pd.DataFrame(rows, columns=["name", "from_bus", "to_bus", "kind", "in_service"])
    return buses, edges


def bus_voltages(
    grid_voltages: pd.DataFrame,
    t_s: float | None = None,
    how: Literal["min", "max", "mean"] = "min",
) -> pd.Series:
    """One voltage per bus from the ``grid_voltages`` table.

    :param grid_voltages: rows ``t_s``, ``bus_phase`` (``"671.a"``), ``v_pu``.
    :param t_s: the grid step at or just before this time; ``None`` reduces over the whole run.
    :param how: reduction over the bus's phases (and over time when ``t_s`` is ``None``): ``min``
        gives each bus's worst undervoltage.
    :return: series bus -> voltage (pu).
    :raises ValueError: ``t_s`` is before the first grid step.
    """
    frame = grid_voltages
    if t_s is not None:
        times = np.sort(frame["t_s"].unique())
        at = times[times <= t_s + 1e-9]
        if at.size == 0:
            raise ValueError(f"no grid step at or before t_s={t_s} (first is {times[0] if times.size else None})")
        frame = frame[frame["t_s"] == at[-1]]
    bus = frame["bus_phase"].astype(str).str.rsplit(".", n=1).str[0]
    return frame.groupby(bus.to_numpy())["v_pu"].agg(how).rename("v_pu")


def plot_feeder_map(
    buses: pd.DataFrame,
    edges: pd.DataFrame,
    voltages: Mapping[str, float] | pd.Series | None = None,
    v_min_pu: float | None = 0.95,
    v_max_pu: float | None = 1.05,
    highlight: Iterable[str] = (),
    labels: bool | None = None,
    title: str = "Feeder voltages",
) -> Figure:
    """The feeder drawn at its bus coordinates, each bus coloured by its voltage.

    :param buses: ``bus``, ``x``, ``y`` (see :func:`feeder_tables`).
    :param edges: ``from_bus``, ``to_bus`` and optionally ``kind`` (line/switch/transformer) and
        ``in_service`` (out-of-service branches are drawn faint).
    :param voltages: bus -> voltage (pu), e.g. from :func:`bus_voltages`; buses without a value are
        grey. ``None`` draws the topology only.
    :param v_min_pu: bottom of the colour scale (pu); ``None`` uses the data's minimum.
    :param v_max_pu: top of the colour scale (pu); ``None`` uses the data's maximum.
    :param highlight: buses to ring and name in the legend (datacenter sites).
    :param labels: write bus names (default: when the feeder has at most 60 buses).
    :param title: axes title.
    :return: figure with the map axes (and a colour-bar axes when ``voltages`` is given).
    """
    xy = {str(r.bus): (float(r.x), float(r.y)) for r in buses.itertuples(index=False)}
    with styled(**{"axes.grid": False}):
        fig = new_figure(figsize=(8, 7))
        ax = fig.axes[0]
        kinds = _draw_edges(ax, edges, xy)
        names = list(xy)
        x = np.array([xy[b][0] for b in names])
        y = np.array([xy[b][1] for b in names])
        if voltages is not None:
            v = np.array([float(voltages.get(b, np.nan)) for b in names])
            norm = voltage_norm(v, v_min_pu, v_max_pu)
            sc = ax.scatter(
                x,
                y,
                c=v,
                cmap=voltage_cmap(),
                norm=norm,
                s=70,
                edgecolors="k",
                linewidths=0.5,
                zorder=2,
                plotnonfinite=True,
            )
            extend = "both" if v_min_pu is not None and v_max_pu is not None else "neither"
            fig.colorbar(sc, ax=ax, label="voltage (pu)", extend=extend, shrink=0.8)
        else:
            ax.scatter(x, y, c="#969696", s=40, edgecolors="k", linewidths=0.5, zorder=2)
        marked = [b for b in highlight if b in xy]
        if marked:
            ax.scatter(
                [xy[b][0] for b in marked],
                [xy[b][1] for b in marked],
                s=260,
                facecolors="none",
                edgecolors=HIGHLIGHT_COLOR,
                linewidths=2,
                zorder=3,
                label="datacenter " + ", ".join(marked),
            )
        if labels if labels is not None else len(names) <= 60:
            for b, bx, by in zip(names, x, y):
                ax.annotate(b, (bx, by), textcoords="offset points", xytext=(5, 5), fontsize=7, zorder=4)
        ax.set_aspect("equal", adjustable="datalim")
        ax.autoscale_view()
        ax.set_xticks([])
        ax.set_yticks([])
        for spine in ax.spines.values():
            spine.set_visible(False)
        ax.set_title(title)
        _legend(ax, kinds, marked)
        fig.tight_layout()
    return fig


HIGHLIGHT_COLOR = "#e7298a"
"""Ring colour of highlighted (datacenter) buses."""


def _draw_edges(ax: Axes, edges: pd.DataFrame, xy: Mapping[str, tuple[float, float]]) -> pd.Series:
    """Draw the branches between buses that have coordinates, faint when out of service; returns
    each branch's kind (``line`` when ``edges`` has no ``kind`` column)."""
    kinds = edges["kind"] if "kind" in edges else pd.Series("line", index=edges.index)
    in_service = edges["in_service"] if "in_service" in edges else pd.Series(True, index=edges.index)
    for kind, style in EDGE_STYLE.items():
        for live in (True, False):
            mask = (kinds == kind) & (in_service.astype(bool) == live)
            segs = [
                [xy[str(a)], xy[str(b)]]
                for a, b in zip(edges.loc[mask, "from_bus"], edges.loc[mask, "to_bus"])
                if str(a) in xy and str(b) in xy
            ]
            if segs:
                label = kind if live else f"{kind} (open)"
                ax.add_collection(LineCollection(segs, zorder=1, alpha=1.0 if live else 0.25, label=label, **style))
    return kinds


def _legend(ax: Axes, kinds: pd.Series, marked: Sequence[str]) -> None:
    """A legend of the branch kinds present and the highlighted buses (none when both are absent)."""
    handles = [
        Line2D([], [], color=str(EDGE_STYLE[k]["colors"]), ls=str(EDGE_STYLE[k]["linestyles"]), label=k)
        for k in EDGE_STYLE
        if (kinds == k).any()
    ]
    if marked:
        handles.append(
            Line2D(
                [],
                [],
                marker="o",
                ls="",
                markerfacecolor="none",
                markeredgecolor=HIGHLIGHT_COLOR,
                markersize=10,
                label="datacenter " + ", ".join(marked),
            )
        )
    if handles:
        ax.legend(handles=handles, loc="best", fontsize=8)
