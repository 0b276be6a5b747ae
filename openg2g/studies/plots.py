"""Study plots drawn from study tables on the feeder map (bus coordinates from the feeder).

Each function takes a tidy table and a :class:`~openg2g.studies.common.Topology`, writes a PNG
when given a path, and returns the figure.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.colors import Normalize
from matplotlib.figure import Figure

from openg2g.studies.common import Topology

__all__ = ["draw_feeder", "plot_bus_values", "plot_grouped_bars", "plot_pair_matrix", "plot_ranking"]


def draw_feeder(ax: plt.Axes, topology: Topology, label_buses: bool = False) -> None:
    """The feeder's branches as grey lines and its buses as small dots."""
    xy = topology.coords
    for b1, b2 in topology.edges:
        if b1 in xy and b2 in xy:
            ax.plot([xy[b1][0], xy[b2][0]], [xy[b1][1], xy[b2][1]], color="0.7", lw=1.2, zorder=1)
    if xy:
        pts = np.array(list(xy.values()))
        ax.scatter(pts[:, 0], pts[:, 1], s=6, color="0.5", zorder=2)
    if label_buses:
        for bus, (x, y) in xy.items():
            ax.annotate(bus, (x, y), fontsize=6, color="0.4", xytext=(2, 2), textcoords="offset points")
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_xticks([])
    ax.set_yticks([])
    for side in ax.spines.values():
        side.set_visible(False)


def plot_bus_values(
    topology: Topology,
    table: pd.DataFrame,
    *,
    value: str,
    panel: str | None = None,
    label: str = "",
    title: str = "",
    path: Path | None = None,
    cmap: str = "viridis",
) -> Figure:
    """One map per value of ``panel`` (e.g. controller), each studied bus coloured by ``value``.

    :param table: rows with a ``bus`` column and the ``value`` column.
    """
    panels = list(dict.fromkeys(table[panel])) if panel else [None]
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels) + 1, 5.2), squeeze=False)
    finite = table[value].astype(float).replace([np.inf, -np.inf], np.nan).dropna()
    norm = Normalize(vmin=float(finite.min()) if len(finite) else 0.0, vmax=float(finite.max()) if len(finite) else 1.0)
    mappable = None
    n_buses = table["bus"].nunique()
    size, font = (220, 7) if n_buses <= 12 else (90, 5)
    for ax, key in zip(axes[0], panels):
        draw_feeder(ax, topology)
        rows = table if key is None else table[table[panel] == key]
        for _, row in rows.iterrows():
            bus = str(row["bus"])
            if bus not in topology.coords:
                continue
            x, y = topology.coords[bus]
            v = float(row[value]) if pd.notna(row[value]) else np.nan
            mappable = ax.scatter(
                [x],
                [y],
                c=[v if np.isfinite(v) else norm.vmin],
                cmap=cmap,
                norm=norm,
                s=size,
                zorder=3,
                edgecolors="k" if np.isfinite(v) else "r",
                linewidths=0.8,
            )
            at_least = "\u2265" if bool(row.get("capped", False)) else ""
            text = f"{bus}\n{at_least}{v:.3g}" if np.isfinite(v) else f"{bus}\n-"
            ax.annotate(
                text, (x, y), fontsize=font, ha="center", va="bottom", xytext=(0, 6), textcoords="offset points"
            )
        if key is not None:
            ax.set_title(f"{panel}: {key}", fontsize=10)
    if mappable is not None:
        fig.colorbar(mappable, ax=axes[0].tolist(), label=label, shrink=0.8)
    if title:
        fig.suptitle(title, fontsize=11)
    if path is not None:
        fig.savefig(path, dpi=130, bbox_inches="tight")
        plt.close(fig)
    return fig


def plot_pair_matrix(
    table: pd.DataFrame,
    *,
    value: str,
    buses: Sequence[str],
    panel: str | None = None,
    label: str = "",
    title: str = "",
    path: Path | None = None,
    cmap: str = "magma_r",
) -> Figure:
    """Heat map of ``value`` for each pair of buses (rows with ``bus_a``, ``bus_b``); symmetric.

    Rows without ``bus_b`` (a single bus) fill the diagonal.
    """
    panels = list(dict.fromkeys(table[panel])) if panel else [None]
    n = len(buses)
    fig, axes = plt.subplots(1, len(panels), figsize=(0.5 * n * len(panels) + 3, 0.5 * n + 2), squeeze=False)
    pos = {b: i for i, b in enumerate(buses)}
    vals = table[value].astype(float)
    norm = Normalize(
        vmin=float(np.nanmin(vals)) if len(vals) else 0.0, vmax=float(np.nanmax(vals)) if len(vals) else 1.0
    )
    image = None
    for ax, key in zip(axes[0], panels):
        grid = np.full((n, n), np.nan)
        rows = table if key is None else table[table[panel] == key]
        for _, row in rows.iterrows():
            a = pos.get(str(row["bus_a"]))
            b = a if row.get("bus_b") is None or pd.isna(row.get("bus_b")) else pos.get(str(row["bus_b"]))
            if a is not None and b is not None:
                grid[a, b] = grid[b, a] = float(row[value])
        image = ax.imshow(grid, cmap=cmap, norm=norm)
        ax.set_xticks(range(n), buses, rotation=90, fontsize=8)
        ax.set_yticks(range(n), buses, fontsize=8)
        if key is not None:
            ax.set_title(f"{panel}: {key}", fontsize=10)
    if image is not None:
        fig.colorbar(image, ax=axes[0].tolist(), label=label, shrink=0.8)
    if title:
        fig.suptitle(title, fontsize=11)
    if path is not None:
        fig.savefig(path, dpi=130, bbox_inches="tight")
        plt.close(fig)
    return fig


def plot_ranking(
    table: pd.DataFrame,
    *,
    label_column: str,
    values: Sequence[str],
    title: str = "",
    path: Path | None = None,
    limit: int = 20,
) -> Figure:
    """Horizontal bars of each of ``values`` for the first ``limit`` rows (already ranked)."""
    rows = table.head(limit)
    fig, axes = plt.subplots(1, len(values), figsize=(4.5 * len(values), 0.35 * len(rows) + 1.5), squeeze=False)
    labels = rows[label_column].astype(str).tolist()
    for ax, col in zip(axes[0], values):
        vals = rows[col].astype(float)
        ax.barh(range(len(rows)), vals, color="#4c72b0")
        if col.startswith("v_") and vals.notna().any():
            span = float(vals.max() - vals.min()) or 0.01
            ax.set_xlim(float(vals.min()) - 0.1 * span, float(vals.max()) + 0.1 * span)
        ax.set_yticks(range(len(rows)), labels, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel(col)
        ax.grid(axis="x", alpha=0.3)
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=130, bbox_inches="tight")
        plt.close(fig)
    return fig


def plot_grouped_bars(
    table: pd.DataFrame,
    *,
    category: str,
    value: str,
    group: str,
    label: str = "",
    title: str = "",
    path: Path | None = None,
) -> Figure:
    """Bars of ``value`` per ``category`` (e.g. bus), one bar per ``group`` (e.g. controller)."""
    cats = list(dict.fromkeys(table[category].astype(str)))
    groups = list(dict.fromkeys(table[group].astype(str)))
    width = 0.8 / max(1, len(groups))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.45 * len(cats) * max(1, len(groups)) + 2), 4))
    x = np.arange(len(cats))
    for i, g in enumerate(groups):
        rows = table[table[group].astype(str) == g].set_index(
            table[category].astype(str)[table[group].astype(str) == g]
        )
        heights = [float(rows[value].get(c, np.nan)) for c in cats]
        ax.bar(x + (i - (len(groups) - 1) / 2) * width, heights, width, label=f"{group}: {g}")
    ax.set_xticks(x, cats, rotation=90 if len(cats) > 12 else 0, fontsize=8)
    ax.set_xlabel(category)
    ax.set_ylabel(label or value)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=130, bbox_inches="tight")
        plt.close(fig)
    return fig
