"""The voltage profile along the feeder at the run's worst instant.

Each bus-phase's voltage is drawn against the bus's distance from the source along the
in-service branches (km of line, :func:`openg2g.grid.topology.distance_from_source_km`), each
branch a segment between its two buses per phase they share, as in OpenDSS's profile plot. The
figure says how many bus-phases it leaves out for want of a path distance, and how many lines
were given without a length unit (counted as km, as OpenDSS does). The
instant is the grid step whose lowest or highest bus-phase voltage comes nearest to (or goes
furthest beyond) its limit (:func:`worst_instant`), read from the ``grid`` table.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure

from openg2g.core.state import PHASES
from openg2g.grid.topology import Topology, distance_from_source_km
from openg2g.plot.style import LIMIT_STYLE, PHASE_COLORS, new_figure, styled
from openg2g.plot.timeline import titled

__all__ = ["plot_voltage_profile", "profile_segments", "voltage_profile", "worst_instant"]


def worst_instant(grid: pd.DataFrame, v_min_pu: float, v_max_pu: float) -> float:
    """The time (s) of the grid step with the smallest margin to the voltage limits: the least of
    ``v_min_pu(t) - v_min_pu`` and ``v_max_pu - v_max_pu(t)`` over steps (the first on a tie).

    :param grid: the run's ``grid`` table (``t_s``, ``v_min_pu``, ``v_max_pu``).
    :raises ValueError: no step has a voltage (none converged).
    """
    margin = np.fmin(
        grid["v_min_pu"].to_numpy(dtype=float) - v_min_pu, v_max_pu - grid["v_max_pu"].to_numpy(dtype=float)
    )
    if not np.isfinite(margin).any():
        raise ValueError("no grid step has a voltage (none converged)")
    return float(grid["t_s"].to_numpy(dtype=float)[np.nanargmin(margin)])


def voltage_profile(grid_voltages: pd.DataFrame, topology: Topology, t_s: float) -> pd.DataFrame:
    """Every bus-phase's voltage at one grid step, with its bus's distance from the source.

    :param grid_voltages: the run's ``grid_voltages`` table.
    :param topology: the grid's topology (:func:`openg2g.grid.kinds.grid_topology`).
    :param t_s: the grid step (s), exactly as in the table.
    :return: columns ``bus``, ``phase``, ``distance_km`` (km; NaN off every in-service path),
        ``v_pu`` (pu).
    :raises ValueError: the table has no row at ``t_s``.
    """
    at = grid_voltages[grid_voltages["t_s"] == t_s]
    if at.empty:
        raise ValueError(f"grid_voltages has no row at t_s={t_s}")
    parts = at["bus_phase"].astype(str).str.rsplit(".", n=1)
    distance = distance_from_source_km(topology)
    bus = parts.str[0].to_numpy()
    return pd.DataFrame(
        {
            "bus": bus,
            "phase": parts.str[1].to_numpy(),
            "distance_km": distance.reindex(bus).to_numpy(),
            "v_pu": at["v_pu"].to_numpy(dtype=float),
        }
    )


def profile_segments(rows: pd.DataFrame, edges: pd.DataFrame) -> list[list[tuple[float, float]]]:
    """The branches of one phase's profile as segments ``[(km, pu), (km, pu)]``.

    :param rows: one phase's rows of :func:`voltage_profile` (``bus``, ``distance_km``, ``v_pu``).
    :param edges: the branches to draw (``from_bus``, ``to_bus``), usually the in-service ones; a
        branch is drawn when both its buses have a row.
    """
    point = {str(b): (float(d), float(v)) for b, d, v in zip(rows["bus"], rows["distance_km"], rows["v_pu"])}
    return [
        [point[str(a)], point[str(b)]]
        for a, b in zip(edges["from_bus"], edges["to_bus"])
        if str(a) in point and str(b) in point
    ]


def plot_voltage_profile(
    profile: pd.DataFrame,
    topology: Topology,
    v_min_pu: float,
    v_max_pu: float,
    t_s: float,
    run: str = "",
) -> Figure:
    """Voltage per phase against distance from the source (:func:`voltage_profile`), branches
    drawn as segments, the limits as dashed lines.

    :param profile: the frame :func:`voltage_profile` returns.
    :param topology: the grid's topology (its edges are the segments).
    :param v_min_pu: lower voltage limit (pu).
    :param v_max_pu: upper voltage limit (pu).
    :param t_s: the instant drawn (s), in the title.
    :param run: the run's name, in the title.
    """
    live = topology.edges[topology.edges["in_service"].astype(bool)]
    with styled():
        fig = new_figure(figsize=(9, 4.5))
        ax = fig.axes[0]
        for ph in PHASES:
            rows = profile[(profile["phase"] == ph) & profile["distance_km"].notna()]
            if rows.empty:
                continue
            segments = profile_segments(rows, live)
            color = PHASE_COLORS[ph]
            ax.add_collection(LineCollection(segments, colors=color, linewidths=0.9, alpha=0.8))
            ax.plot(rows["distance_km"], rows["v_pu"], "o", ms=3, color=color, label=f"phase {ph}")
        ax.axhline(v_min_pu, **LIMIT_STYLE, label=f"limits {v_min_pu:g}/{v_max_pu:g} pu")
        ax.axhline(v_max_pu, **LIMIT_STYLE)
        ax.autoscale_view()
        missing = int(profile["distance_km"].isna().sum())
        if missing:
            ax.text(
                0.5,
                0.02 if missing < len(profile) else 0.5,
                f"{missing:,} of {len(profile):,} bus-phases have no path distance from the source and are not drawn",
                transform=ax.transAxes,
                ha="center",
                fontsize=8,
                color="#b30000",
            )
        unitless = int(live["unit_unknown"].astype(bool).sum()) if "unit_unknown" in live else 0
        ax.set_xlabel(
            "distance from the source along the feeder (km of line"
            + (f"; {unitless:,} lines given without a unit counted as km, as OpenDSS does)" if unitless else ")")
        )
        ax.set_ylabel("voltage (pu)")
        ax.set_title(titled(run, f"Voltage profile at the worst instant, t={t_s:g} s"))
        ax.legend(loc="best", fontsize=8)
        fig.tight_layout()
    return fig
