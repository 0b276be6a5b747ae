"""Runs side by side over time: voltage violation, datacenter power, throughput and ITL misses.

Each run's curves come from its tables (:func:`run_series`); :func:`plot_run_comparison` draws
one axes per quantity, one line per run, the baseline in black.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from openg2g.plot.run import read_table
from openg2g.plot.style import new_figure, styled
from openg2g.plot.timeline import envelope

__all__ = ["SERIES", "Series", "plot_run_comparison", "run_series"]


class Series(NamedTuple):
    """How a compared quantity is drawn: axis label and display scale."""

    label: str
    scale: float = 1.0


SERIES: dict[str, Series] = {
    "violation_pu": Series("voltage violation (pu, summed over bus-phases)"),
    "power_w": Series("datacenter power (MW)", 1e-6),
    "throughput_tok_s": Series("throughput (million tok/s)", 1e-6),
    "itl_miss_fraction": Series("ITL deadline misses (%)", 100.0),
}
"""The quantities compared over time, in the order drawn."""


def run_series(run_dir: Path) -> dict[str, pd.Series]:
    """A run's curves indexed by time (s), each present when the run has its table:
    ``violation_pu`` (grid: distance outside the limits summed over bus-phases, pu), ``power_w``
    (all sites' facility power, W), ``throughput_tok_s`` (all models, tok/s),
    ``itl_miss_fraction`` (token-weighted over models, as the summary's figure)."""
    out: dict[str, pd.Series] = {}
    grid = read_table(run_dir, "grid")
    if not grid.empty:
        out["violation_pu"] = grid.set_index("t_s")["violation_pu"].sort_index()
    datacenter = read_table(run_dir, "datacenter")
    if not datacenter.empty:
        out["power_w"] = datacenter.groupby("t_s")["power_w"].sum()
    models = read_table(run_dir, "models")
    if not models.empty:
        tokens = models["throughput_tok_s"].fillna(0.0)
        missed = (models["deadline_miss_fraction"] * tokens).fillna(0.0)
        by_t = pd.DataFrame({"t_s": models["t_s"], "tokens": tokens, "missed": missed}).groupby("t_s").sum()
        out["throughput_tok_s"] = by_t["tokens"]
        with np.errstate(invalid="ignore", divide="ignore"):
            out["itl_miss_fraction"] = by_t["missed"] / by_t["tokens"].where(by_t["tokens"] > 0)
    return out


def plot_run_comparison(runs: Mapping[str, Mapping[str, pd.Series]], baseline: str | None = None) -> Figure:
    """One axes per quantity of :data:`SERIES` some run has, one line per run (thinned for
    drawing without losing an extreme), sharing the time axis.

    :param runs: run label -> its curves (:func:`run_series`).
    :param baseline: label of the baseline run, drawn in black.
    :raises ValueError: no run has any curve.
    """
    present = [key for key in SERIES if any(key in curves for curves in runs.values())]
    if not present:
        raise ValueError("no run has a grid, datacenter or models table to compare")
    with styled():
        fig = new_figure(nrows=len(present), figsize=(10, 2.3 * len(present) + 1.0), sharex=True)
        for ax, key in zip(fig.axes, present):
            meta = SERIES[key]
            for label, curves in runs.items():
                if key not in curves:
                    continue
                curve = curves[key]
                t, y = envelope(curve.index.to_numpy(dtype=float), curve.to_numpy(dtype=float) * meta.scale)
                style = {"color": "k", "lw": 1.1, "zorder": 3} if label == baseline else {"lw": 0.8}
                ax.plot(t, y, label=f"{label} (baseline)" if label == baseline else label, **style)
            ax.set_ylabel(meta.label, fontsize=8)
        fig.axes[0].legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7)
        fig.axes[0].set_title("Runs compared: " + ", ".join(runs))
        fig.axes[-1].set_xlabel("time (s)")
        fig.tight_layout()
    return fig
