"""Per-bus-phase voltages over time, from the ``grid_voltages`` table."""

from __future__ import annotations

from typing import Literal

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from openg2g.plot.style import new_figure, styled, voltage_cmap, voltage_colorbar, voltage_norm

__all__ = ["plot_voltage_heatmap", "voltage_matrix"]


def _bus_phase_order(grid_voltages: pd.DataFrame) -> list[str]:
    col = grid_voltages["bus_phase"]
    present = set(col.astype(str).unique())
    if isinstance(col.dtype, pd.CategoricalDtype):
        # the feeder's order (the table stores the monitored bus-phases as categories)
        return [str(c) for c in col.cat.categories if str(c) in present]
    return sorted(present)


def voltage_matrix(
    grid_voltages: pd.DataFrame,
    max_time_bins: int | None = 600,
    agg: Literal["min", "max", "mean"] = "min",
) -> pd.DataFrame:
    """The voltages as a matrix: one row per time (or time bin), one column per bus-phase.

    :param grid_voltages: rows ``t_s``, ``bus_phase``, ``v_pu`` (the run's ``grid_voltages`` table).
    :param max_time_bins: at most this many rows; longer runs are cut into equal bins of
        consecutive grid steps, each reduced with ``agg`` and labelled with its first time.
        ``None`` keeps every step.
    :param agg: reduction within a bin (``min`` keeps every undervoltage visible).
    :return: frame indexed by ``t_s`` (s), columns the bus-phases in feeder order.
    :raises ValueError: a required column is missing.
    """
    missing = {"t_s", "bus_phase", "v_pu"} - set(grid_voltages.columns)
    if missing:
        raise ValueError(f"grid_voltages table lacks columns {sorted(missing)}")
    order = _bus_phase_order(grid_voltages)
    frame = grid_voltages.assign(bus_phase=grid_voltages["bus_phase"].astype(str))
    wide = frame.pivot_table(index="t_s", columns="bus_phase", values="v_pu", aggfunc="mean", dropna=False)
    wide = wide.reindex(columns=order).sort_index()
    if max_time_bins is not None and len(wide) > max_time_bins:
        size = int(np.ceil(len(wide) / max_time_bins))
        groups = np.arange(len(wide)) // size
        starts = wide.index.to_numpy()[::size]
        wide = wide.groupby(groups).agg(agg)
        wide.index = pd.Index(starts, name="t_s")
    wide.columns.name = "bus_phase"
    return wide


def plot_voltage_heatmap(
    grid_voltages: pd.DataFrame,
    v_min_pu: float | None = None,
    v_max_pu: float | None = None,
    max_time_bins: int | None = 600,
    agg: Literal["min", "max", "mean"] = "min",
    max_labels: int = 60,
) -> Figure:
    """Heatmap of every monitored bus-phase's voltage over time.

    Time runs along x, bus-phases along y (feeder order, top to bottom); the colour scale spans
    ``[v_min_pu, v_max_pu]`` when both are given (values outside saturate, marked by the colour
    bar's arrows), else the data's range. Missing values are grey.

    :param grid_voltages: the run's ``grid_voltages`` table (``t_s``, ``bus_phase``, ``v_pu``).
    :param v_min_pu: lower voltage limit (pu), the bottom of the colour scale.
    :param v_max_pu: upper voltage limit (pu), the top of the colour scale.
    :param max_time_bins: see :func:`voltage_matrix`.
    :param agg: see :func:`voltage_matrix`.
    :param max_labels: label at most this many bus-phases on the y axis.
    :return: figure with the heatmap axes and a colour-bar axes.
    """
    wide = voltage_matrix(grid_voltages, max_time_bins=max_time_bins, agg=agg)
    values = wide.to_numpy(dtype=float).T  # bus-phase x time
    t = wide.index.to_numpy(dtype=float)
    if t.size > 1:
        step = float(np.median(np.diff(t)))
        edges = np.append(t, t[-1] + step)
    else:
        edges = np.array([t[0] - 0.5, t[0] + 0.5]) if t.size else np.array([0.0, 1.0])
    n_bp = values.shape[0]
    height = min(12.0, max(3.0, 0.16 * min(n_bp, max_labels) + 1.5))
    with styled(**{"axes.grid": False}):
        fig = new_figure(figsize=(10, height))
        ax = fig.axes[0]
        norm = voltage_norm(values, v_min_pu, v_max_pu)
        mesh = ax.pcolormesh(
            edges, np.arange(n_bp + 1), np.ma.masked_invalid(values), cmap=voltage_cmap(), norm=norm, shading="flat"
        )
        ax.set_ylim(n_bp, 0)
        stride = max(1, int(np.ceil(n_bp / max_labels)))
        ticks = np.arange(0, n_bp, stride)
        ax.set_yticks(ticks + 0.5)
        ax.set_yticklabels([wide.columns[i] for i in ticks], fontsize=7)
        ax.set_xlabel("time (s)")
        ax.set_ylabel("bus-phase")
        title = "Voltage per bus-phase"
        n_times = int(grid_voltages["t_s"].nunique())
        if len(wide) < n_times:
            title += f" ({agg} over bins of {int(np.ceil(n_times / len(wide)))} grid steps)"
        ax.set_title(title)
        voltage_colorbar(fig, ax, mesh, norm, v_min_pu is not None and v_max_pu is not None)
        fig.tight_layout()
    return fig
