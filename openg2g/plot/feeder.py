"""Feeder maps: the one-line diagram at its bus coordinates, buses coloured by voltage.

The plot reads two small tables, ``buses`` (``bus``, ``x``, ``y``) and ``edges`` (``from_bus``,
``to_bus``, ``kind``), that :func:`feeder_tables` extracts from a loaded feeder (or
:func:`openg2g.grid.kinds.grid_topology` from any grid), and a voltage per bus that
:func:`bus_voltages` reduces from rows of a run's ``grid_voltages`` table or :func:`worst_bus_voltages`
from its per-bus-phase extremes (:mod:`openg2g.plot.extremes`).
Buses without coordinates (a pandapower net without geodata) are placed by a graph layout
(:func:`layout`) around those that have them.
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
from openg2g.plot.timeline import titled

if TYPE_CHECKING:
    from openg2g.grid.feeder.library import Feeder

__all__ = [
    "EDGE_STYLE",
    "bus_voltages",
    "edge_segments",
    "feeder_tables",
    "layout",
    "plot_feeder_map",
    "plot_worst_voltage_map",
    "worst_bus_voltages",
]

EDGE_STYLE: dict[str, dict[str, object]] = {
    "line": {"colors": "#525252", "linewidths": 1.6, "linestyles": "solid"},
    "switch": {"colors": "#525252", "linewidths": 1.0, "linestyles": "dotted"},
    "transformer": {"colors": "#8c6d31", "linewidths": 2.2, "linestyles": "dashed"},
    "regulator": {"colors": "#6a3d9a", "linewidths": 2.2, "linestyles": "dashdot"},
    "reactor": {"colors": "#d95f02", "linewidths": 2.6, "linestyles": "solid"},
}
"""How each kind of branch is drawn."""


def feeder_tables(feeder: Feeder) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The drawing tables of a feeder (from :func:`openg2g.grid.feeder.library.load_feeder`).

    :return: ``buses`` (:data:`openg2g.grid.topology.BUS_COLUMNS`; buses without coordinates are
        left out) and ``edges`` (:data:`openg2g.grid.topology.EDGE_COLUMNS`; regulator banks of
        single-phase units appear once).
    """
    from openg2g.grid.topology import feeder_topology

    topology = feeder_topology(feeder)
    buses = topology.buses.dropna(subset=["x", "y"]).reset_index(drop=True)
    return buses, topology.edges


def layout(buses: pd.DataFrame, edges: pd.DataFrame) -> dict[str, tuple[float, float]]:
    """Bus -> drawing position: a bus's own coordinates, else a place found by a graph layout.

    With no coordinates at all the buses get a Kamada-Kawai layout (a spring layout above 300
    buses, where Kamada-Kawai's cost grows with the square); with some, the others are placed by a
    spring layout that holds the known ones fixed. Seeded, so a run always gets the same picture.

    :param buses: ``bus``, ``x``, ``y`` (NaN where unknown).
    :param edges: ``from_bus``, ``to_bus``.
    """
    known = {
        str(r.bus): (float(r.x), float(r.y))
        for r in buses.itertuples(index=False)
        if np.isfinite(float(r.x)) and np.isfinite(float(r.y))
    }
    names = [str(b) for b in buses["bus"]]
    if len(known) == len(names):
        return known
    import networkx as nx

    graph = nx.Graph()
    graph.add_nodes_from(names)
    graph.add_edges_from((str(a), str(b)) for a, b in zip(edges["from_bus"], edges["to_bus"]))
    if not known:
        placed = nx.kamada_kawai_layout(graph) if len(names) <= 300 else nx.spring_layout(graph, seed=0)
    else:
        placed = nx.spring_layout(graph, pos=known, fixed=list(known), seed=0)
    return {b: (float(placed[b][0]), float(placed[b][1])) for b in names}


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

    :param buses: ``bus``, ``x``, ``y`` (see :func:`feeder_tables`; NaN coordinates are placed by
        :func:`layout`).
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
    xy = layout(buses, edges)
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
    for (kind, live), segs in edge_segments(edges, xy).items():
        label = kind if live else f"{kind} (open)"
        ax.add_collection(LineCollection(segs, zorder=1, alpha=1.0 if live else 0.25, label=label, **EDGE_STYLE[kind]))
    return edges["kind"] if "kind" in edges else pd.Series("line", index=edges.index)


def edge_segments(
    edges: pd.DataFrame, xy: Mapping[str, tuple[float, float]]
) -> dict[tuple[str, bool], list[list[tuple[float, float]]]]:
    """The branches as drawing segments, grouped by kind and service.

    :param edges: ``from_bus``, ``to_bus`` and optionally ``kind`` and ``in_service``.
    :param xy: bus -> drawing position (:func:`layout`); a branch to a bus without one is left out.
    :return: ``(kind, in_service)`` -> ``[[(x1, y1), (x2, y2)], ...]``, in :data:`EDGE_STYLE`
        order, in service first; only groups that have a segment.
    """
    kinds = edges["kind"] if "kind" in edges else pd.Series("line", index=edges.index)
    in_service = edges["in_service"] if "in_service" in edges else pd.Series(True, index=edges.index)
    groups: dict[tuple[str, bool], list[list[tuple[float, float]]]] = {}
    for kind in EDGE_STYLE:
        for live in (True, False):
            mask = (kinds == kind) & (in_service.astype(bool) == live)
            segs = [
                [xy[str(a)], xy[str(b)]]
                for a, b in zip(edges.loc[mask, "from_bus"], edges.loc[mask, "to_bus"])
                if str(a) in xy and str(b) in xy
            ]
            if segs:
                groups[(kind, live)] = segs
    return groups


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


def worst_bus_voltages(extremes: pd.DataFrame, v_min_pu: float, v_max_pu: float) -> pd.DataFrame:
    """Each bus's worst voltage over the run: of its bus-phases' lowest and highest values, the
    one nearer to (or further beyond) its limit.

    :param extremes: each bus-phase's extremes (:data:`openg2g.plot.extremes.EXTREME_COLUMNS`:
        :func:`~openg2g.plot.extremes.bus_phase_extremes` of a run folder, or
        :func:`~openg2g.plot.extremes.extremes_of` rows in memory).
    :param v_min_pu: lower voltage limit (pu).
    :param v_max_pu: upper voltage limit (pu).
    :return: frame indexed by bus with ``v_pu`` (pu), ``bus_phase`` and ``t_s`` (s) where it
        occurred, and ``margin_pu`` (pu: distance inside the band, negative outside), in feeder
        order; a tie goes to the lower voltage, then to the bus-phase first in the table.
    """
    frame = extremes.dropna(subset=["v_min_pu"])
    bus_phase = frame["bus_phase"].astype(str).to_numpy()
    low_margin = frame["v_min_pu"].to_numpy(dtype=float) - v_min_pu
    high_margin = v_max_pu - frame["v_max_pu"].to_numpy(dtype=float)
    pick_low = low_margin <= high_margin
    per_phase = pd.DataFrame(
        {
            "bus": pd.Series(bus_phase).str.rsplit(".", n=1).str[0].to_numpy(),
            "v_pu": np.where(pick_low, frame["v_min_pu"], frame["v_max_pu"]),
            "bus_phase": bus_phase,
            "t_s": np.where(pick_low, frame["t_min_s"], frame["t_max_s"]),
            "margin_pu": np.where(pick_low, low_margin, high_margin),
        }
    )
    worst = per_phase.loc[per_phase.groupby("bus", sort=False)["margin_pu"].idxmin()]
    return worst.set_index("bus")


def plot_worst_voltage_map(
    buses: pd.DataFrame,
    edges: pd.DataFrame,
    extremes: pd.DataFrame,
    v_min_pu: float,
    v_max_pu: float,
    sites: Iterable[str] = (),
    run: str = "",
) -> Figure:
    """The feeder map with each bus coloured by its worst voltage over the run
    (:func:`worst_bus_voltages`), the worst bus of all named in the title.

    :param buses: ``bus``, ``x``, ``y`` (NaN coordinates are placed by :func:`layout`).
    :param edges: ``from_bus``, ``to_bus``, ``kind``, ``in_service``.
    :param extremes: each bus-phase's extremes over the run (:func:`openg2g.plot.extremes.bus_phase_extremes`).
    :param v_min_pu: lower voltage limit (pu), the bottom of the colour scale.
    :param v_max_pu: upper voltage limit (pu), the top of the colour scale.
    :param sites: datacenter buses, ringed.
    :param run: the run's name, in the title.
    """
    worst = worst_bus_voltages(extremes, v_min_pu, v_max_pu)
    title = "Worst voltage of each bus over the run"
    if not worst.empty:
        bus = worst["margin_pu"].idxmin()
        title += f"\nworst: {worst.at[bus, 'bus_phase']} {worst.at[bus, 'v_pu']:.4f} pu at t={worst.at[bus, 't_s']:g} s"
    return plot_feeder_map(
        buses,
        edges,
        worst["v_pu"],
        v_min_pu=v_min_pu,
        v_max_pu=v_max_pu,
        highlight=sites,
        title=titled(run, title),
    )
