"""A disturbed run in one figure: what the sites drew, the voltages, the blocks and the frequency.

Panels, on one time axis (each drawn when the run has its table):

1. each site's grid draw (MW, ``datacenter`` table), the load a fault takes off and a return puts back;
2. the lowest and highest monitored voltage (pu, ``grid`` table) with the scenario's limits;
3. per site with a ride-through, the share of its load on the grid and the stored energy left in
   its UPS (``ride_through`` table: blocks weighted by their fractions, from the run's scenario);
4. the bulk system's frequency (Hz, ``frequency`` table).

The instants of the disturbances' commands are marked on every panel.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from openg2g.plot.style import LIMIT_STYLE, new_figure, styled
from openg2g.plot.timeline import EVENT_STYLE, envelope, titled

__all__ = ["block_fractions", "disturbance_times", "plot_disturbance"]


def disturbance_times(events: pd.DataFrame) -> list[float]:
    """The times of the disturbances' commands in a run's ``events`` table (its rows whose
    fields name a ``disturbance``), each once."""
    if events.empty or "disturbance" not in events:
        return []
    return sorted({float(t) for t, d in zip(events["t_s"], events["disturbance"]) if isinstance(d, str)})


def block_fractions(scenario: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """Site -> block -> its share of the site's load, from the scenario as run."""
    out: dict[str, dict[str, float]] = {}
    for site in scenario.get("datacenters") or []:
        ride = site.get("ride_through")
        if ride:
            out[str(site["name"])] = {str(b["name"]): float(b["fraction"]) for b in ride["blocks"]}
    return out


def _site_share(
    ride_through: pd.DataFrame, fractions: Mapping[str, float], column: str
) -> tuple[np.ndarray, np.ndarray]:
    """Per step, the blocks' ``column`` weighted by their fractions (``sum f x / sum f``)."""
    weights = ride_through["block"].astype(str).map(fractions).to_numpy(dtype=float)
    frame = pd.DataFrame(
        {
            "t_s": ride_through["t_s"].to_numpy(),
            "w": weights,
            "wx": weights * ride_through[column].to_numpy(dtype=float),
        }
    )
    grouped = frame.groupby("t_s", sort=True)[["w", "wx"]].sum()
    return grouped.index.to_numpy(dtype=float), (grouped["wx"] / grouped["w"]).to_numpy()


def plot_disturbance(
    datacenter: pd.DataFrame,
    grid: pd.DataFrame,
    ride_through: pd.DataFrame,
    frequency: pd.DataFrame,
    events: pd.DataFrame,
    scenario: Mapping[str, Any],
    v_min_pu: float,
    v_max_pu: float,
    run: str = "",
) -> Figure:
    """The figure of the module docstring; an empty table leaves its panel out."""
    panels = [
        name
        for name, table in (("draw", datacenter), ("voltage", grid), ("blocks", ride_through), ("frequency", frequency))
        if not table.empty
    ]
    times = disturbance_times(events)
    with styled():
        fig = new_figure(len(panels), 1, figsize=(9.0, 2.3 * len(panels) + 0.6), sharex=True)
        axes = dict(zip(panels, fig.axes))
        if "draw" in axes:
            ax = axes["draw"]
            for site, df in datacenter.groupby("site", observed=True):
                t, p = envelope(df["t_s"], df["power_w"].to_numpy(dtype=float) / 1e6)
                ax.plot(t, p, lw=0.9, label=str(site))
            ax.set_ylabel("grid draw (MW)")
            ax.legend(loc="best", fontsize=7, ncol=3)
        if "voltage" in axes:
            ax = axes["voltage"]
            for column, label in (("v_min_pu", "lowest"), ("v_max_pu", "highest")):
                t, v = envelope(grid["t_s"], grid[column].to_numpy(dtype=float))
                ax.plot(t, v, lw=0.8, label=f"{label} monitored")
            for limit in (v_min_pu, v_max_pu):
                ax.axhline(limit, **LIMIT_STYLE)
            ax.set_ylabel("voltage (pu)")
            ax.legend(loc="best", fontsize=7)
        if "blocks" in axes:
            ax = axes["blocks"]
            fractions = block_fractions(scenario)
            for site, df in ride_through.groupby("site", observed=True):
                share = fractions.get(str(site))
                if not share:
                    continue
                t, g = _site_share(df, share, "grid_fraction")
                (line,) = ax.plot(t, g, lw=1.0, label=f"{site} on the grid")
                energy = df.groupby("t_s", sort=True)["ups_energy_kwh"].sum(min_count=1)
                if energy.notna().any():
                    full = float(energy.iloc[0])
                    ax.plot(
                        energy.index.to_numpy(dtype=float),
                        energy.to_numpy(dtype=float) / full,
                        lw=0.8,
                        ls="--",
                        color=line.get_color(),
                        label=f"{site} UPS energy",
                    )
            ax.set_ylim(-0.05, 1.05)
            ax.set_ylabel("share (of load / of UPS)")
            ax.legend(loc="best", fontsize=7, ncol=2)
        if "frequency" in axes:
            ax = axes["frequency"]
            t, f = envelope(frequency["t_s"], frequency["f_hz"].to_numpy(dtype=float))
            ax.plot(t, f, lw=1.0, color="#444444")
            ax.set_ylabel("frequency (Hz)")
        for ax in fig.axes:
            for k, t0 in enumerate(times):
                ax.axvline(t0, **EVENT_STYLE, label="_")
        fig.axes[-1].set_xlabel("time (s)")
        fig.axes[0].set_title(titled(run, "Disturbances: grid draw, voltages, blocks, frequency"))
        fig.tight_layout()
    return fig
