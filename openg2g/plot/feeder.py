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

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Literal

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from openg2g.plot.style import new_figure, styled, voltage_cmap, voltage_colorbar, voltage_norm
from openg2g.plot.timeline import titled

if TYPE_CHECKING:
    from openg2g.grid.feeder.library import Feeder

__all__ = [
    "EDGE_STYLE",
    "bus_voltages",
    "edge_segments",
    "feeder_tables",
    "layout",
    "marker_scale",
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


def layout(buses: pd.DataFrame, edges: pd.DataFrame, source: str | None = None) -> dict[str, tuple[float, float]]:
    """Bus -> drawing position: a bus's own coordinates, else a place found from the topology
    (:func:`openg2g.plot.placement.place_buses`: between the buses with coordinates it lies
    between, fanned out from the one it hangs off, or a tidy tree from ``source`` where a part of
    the grid has none). Deterministic, linear in the number of buses.

    :param buses: ``bus``, ``x``, ``y`` (NaN where unknown).
    :param edges: ``from_bus``, ``to_bus``.
    :param source: the bus the grid is fed from (:attr:`openg2g.grid.topology.Topology.source`);
        ``None``: the first bus.
    """
    from openg2g.plot.placement import place_buses

    return place_buses(buses, edges, source)


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


def marker_scale(n_buses: int) -> tuple[float, float]:
    """How big a map of ``n_buses`` draws its buses and branches, so 3,000-10,000 buses stay
    apart: a bus's marker area (pt², 70 up to 430 buses, then falling as one over the count, to 5)
    and a factor on the branch widths of :data:`EDGE_STYLE` (1 up to 300 buses, then one over the
    square root of the count, to 0.25)."""
    n = max(n_buses, 1)
    return float(np.clip(30_000 / n, 5.0, 70.0)), float(np.clip(math.sqrt(300 / n), 0.25, 1.0))


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

    Buses without coordinates are placed from the topology (:func:`layout`) and the figure says
    how many. The colour scale (:func:`openg2g.plot.style.voltage_norm`) is centred on the band
    between the limits, which are marked on the colour bar, and reaches the data's extremes
    beyond them in saturated colours; the buses furthest from the band's centre are drawn on top.

    :param buses: ``bus``, ``x``, ``y`` (see :func:`feeder_tables`; NaN coordinates are placed by
        :func:`layout`).
    :param edges: ``from_bus``, ``to_bus`` and optionally ``kind`` (:data:`EDGE_STYLE`'s) and
        ``in_service`` (out-of-service branches are drawn faint).
    :param voltages: bus -> voltage (pu), e.g. from :func:`bus_voltages`; buses without a value are
        grey. ``None`` draws the topology only.
    :param v_min_pu: lower limit (pu), at a fixed point of the colour scale; ``None`` uses the
        data's minimum.
    :param v_max_pu: upper limit (pu); ``None`` uses the data's maximum.
    :param highlight: buses to ring and name in the legend (datacenter sites).
    :param labels: write bus names (default: when the feeder has at most 60 buses).
    :param title: axes title.
    :return: figure with the map axes (and a colour-bar axes when ``voltages`` is given).
    """
    xy = layout(buses, edges)
    names = list(xy)
    area, width = marker_scale(len(names))
    outline = 0.5 if len(names) <= 500 else 0.0  # at a few points across, an outline would hide the colour
    with styled(**{"axes.grid": False}):
        fig = new_figure(figsize=(8, 7) if len(names) <= 500 else (10, 9))
        ax = fig.axes[0]
        kinds = _draw_edges(ax, edges, xy, width)
        x = np.array([xy[b][0] for b in names])
        y = np.array([xy[b][1] for b in names])
        if voltages is not None:
            v = np.array([float(voltages.get(b, np.nan)) for b in names])
            norm = voltage_norm(v, v_min_pu, v_max_pu)
            on_top = np.argsort(np.nan_to_num(np.abs(np.ma.filled(norm(v), np.nan) - 0.5), nan=-1.0), kind="stable")
            sc = ax.scatter(
                x[on_top],
                y[on_top],
                c=v[on_top],
                cmap=voltage_cmap(),
                norm=norm,
                s=area,
                edgecolors="k",
                linewidths=outline,
                zorder=2,
                plotnonfinite=True,
            )
            voltage_colorbar(fig, ax, sc, norm, v_min_pu is not None and v_max_pu is not None)
        else:
            ax.scatter(x, y, c="#969696", s=area * 0.6, edgecolors="k", linewidths=outline, zorder=2)
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
        placed = int(
            (~(np.isfinite(buses["x"].to_numpy(dtype=float)) & np.isfinite(buses["y"].to_numpy(dtype=float)))).sum()
        )
        if placed:
            ax.text(
                0.0,
                0.0,
                f"{placed:,} of {len(names):,} buses placed from the topology (the file gives them no coordinates)",
                transform=ax.transAxes,
                fontsize=8,
                color="#525252",
            )
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


def _draw_edges(ax: Axes, edges: pd.DataFrame, xy: Mapping[str, tuple[float, float]], width: float = 1.0) -> pd.Series:
    """Draw the branches between buses that have coordinates, faint when out of service, their
    widths times ``width``; returns each branch's kind (``line`` when ``edges`` has no ``kind``
    column)."""
    for (kind, live), segs in edge_segments(edges, xy).items():
        label = kind if live else f"{kind} (open)"
        style = {**EDGE_STYLE[kind], "linewidths": float(EDGE_STYLE[kind]["linewidths"]) * width}  # type: ignore[arg-type]
        ax.add_collection(LineCollection(segs, zorder=1, alpha=1.0 if live else 0.25, label=label, **style))
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
        kv = _bus_kv(buses).get(str(bus), math.nan)
        level = f" ({kv:.4g} kV)" if math.isfinite(kv) else ""
        title += f"\nworst: {worst.at[bus, 'bus_phase']}{level} {worst.at[bus, 'v_pu']:.4f} pu at t={worst.at[bus, 't_s']:g} s"
    return plot_feeder_map(
        buses,
        edges,
        worst["v_pu"],
        v_min_pu=v_min_pu,
        v_max_pu=v_max_pu,
        highlight=sites,
        title=titled(run, title),
    )


def _bus_kv(buses: pd.DataFrame) -> dict[str, float]:
    """Bus -> base voltage (kV line to line) from the ``kv`` column; empty without one."""
    if "kv" not in buses:
        return {}
    return dict(zip(buses["bus"].astype(str), buses["kv"].to_numpy(dtype=float)))
