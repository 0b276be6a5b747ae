"""Datacenter power broken down by served model, from the ``models`` table."""

from __future__ import annotations

from typing import Literal

import pandas as pd
from matplotlib.figure import Figure

from openg2g.plot.style import new_figure, styled

__all__ = ["plot_model_power"]


def plot_model_power(
    models: pd.DataFrame,
    kind: Literal["stack", "line"] = "stack",
    datacenter: pd.DataFrame | None = None,
) -> Figure:
    """GPU power of each served model over time (MW), one axes per site.

    :param models: the run's ``models`` table (``t_s``, ``site``, ``model``, ``power_w``).
    :param kind: ``stack`` stacks the models (the top edge is the site's GPU power of inference);
        ``line`` draws one line per model.
    :param datacenter: the run's ``datacenter`` table; when given, each site's facility power
        (``power_w``: GPUs, overhead and training) is drawn as a black line for reference.
    :return: figure with one axes per site, sharing the time axis.
    :raises ValueError: a required column is missing or ``kind`` is unknown.
    """
    missing = {"t_s", "site", "model", "power_w"} - set(models.columns)
    if missing:
        raise ValueError(f"models table lacks columns {sorted(missing)}")
    if kind not in ("stack", "line"):
        raise ValueError(f"kind must be 'stack' or 'line', got {kind!r}")
    sites = [str(s) for s in pd.unique(models["site"].astype(str))]
    with styled():
        fig = new_figure(nrows=max(1, len(sites)), figsize=(9, 3.2 * max(1, len(sites)) + 0.6), sharex=True)
        axes = fig.axes
        for ax, site in zip(axes, sites):
            df = models[models["site"].astype(str) == site]
            wide = df.pivot_table(
                index="t_s", columns="model", values="power_w", aggfunc="sum", observed=True
            ).sort_index()
            wide.columns = [str(c) for c in wide.columns]
            t = wide.index.to_numpy(dtype=float)
            if kind == "stack":
                ax.stackplot(
                    t,
                    *(wide[c].fillna(0.0).to_numpy() / 1e6 for c in wide.columns),
                    labels=list(wide.columns),
                    alpha=0.85,
                )
            else:
                for c in wide.columns:
                    ax.plot(t, wide[c].to_numpy() / 1e6, lw=0.9, label=c)
            if datacenter is not None and not datacenter.empty:
                dc = datacenter[datacenter["site"].astype(str) == site].sort_values("t_s")
                ax.plot(dc["t_s"], dc["power_w"] / 1e6, color="k", lw=0.8, label="facility total")
            ax.set_ylabel("power (MW)")
            ax.set_title(f"{site}: GPU power per model" + (" (stacked)" if kind == "stack" else ""))
            ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7)
            if kind == "stack":
                ax.set_ylim(bottom=0.0)
        axes[-1].set_xlabel("time (s)")
        if not sites:
            axes[0].set_title("no models")
        fig.tight_layout()
    return fig
