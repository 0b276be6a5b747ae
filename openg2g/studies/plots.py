"""Study plots drawn from study tables, most on the feeder map (bus coordinates from the feeder).

Each function takes a tidy table (and, for maps, a :class:`~openg2g.studies.common.Topology`),
builds a pyplot-free figure in the shared openg2g style (:mod:`openg2g.plot.style`), writes a PNG
when given a path, and returns the figure.

The maps do not use :func:`openg2g.plot.feeder.plot_feeder_map`: that draws one voltage-coloured
map on a figure of its own, while these draw several panels, each bus coloured by a study figure
(MW, pu.s) on a shared scale and labelled with its value.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection
from matplotlib.colors import Normalize
from matplotlib.figure import Figure

from openg2g.core.atomic import replace_atomically
from openg2g.plot.style import new_figure, styled
from openg2g.studies.common import Topology

__all__ = [
    "draw_feeder",
    "plot_bus_values",
    "plot_frequency_against_loss",
    "plot_grouped_bars",
    "plot_loss_by_setting",
    "plot_operating_voltages",
    "plot_pair_matrix",
    "plot_plants",
    "plot_ranking",
]


def draw_feeder(ax: Axes, topology: Topology) -> None:
    """The feeder's branches as grey lines and its buses as small dots, without axes."""
    xy = topology.coords
    segments = [[xy[b1], xy[b2]] for b1, b2 in topology.edges if b1 in xy and b2 in xy]
    ax.add_collection(LineCollection(segments, colors="0.7", linewidths=1.2, zorder=1))
    if xy:
        pts = np.array(list(xy.values()))
        ax.scatter(pts[:, 0], pts[:, 1], s=6, color="0.5", zorder=2)
    ax.set_aspect("equal", adjustable="datalim")
    ax.autoscale_view()
    ax.set_xticks([])
    ax.set_yticks([])
    for side in ax.spines.values():
        side.set_visible(False)


def _panels(table: pd.DataFrame, panel: str | None) -> list[tuple[object, pd.DataFrame]]:
    """``(key, rows)`` per distinct value of ``panel`` in order of appearance; ``[(None, table)]`` without one."""
    if panel is None:
        return [(None, table)]
    return [(key, table[table[panel] == key]) for key in dict.fromkeys(table[panel])]


def _finite_norm(values: Iterable[float]) -> Normalize:
    """Colour scale over the finite ``values`` (0 to 1 when there are none)."""
    arr = np.asarray(list(values), dtype=float)
    arr = arr[np.isfinite(arr)]
    return Normalize(vmin=float(arr.min()) if arr.size else 0.0, vmax=float(arr.max()) if arr.size else 1.0)


def _finish_panels(
    fig: Figure, panel: str | None, keys: Sequence[object], mappable: object, label: str, title: str
) -> None:
    """Panel titles, one colour bar for all panels, and the figure title."""
    axes = fig.axes[: len(keys)]
    for ax, key in zip(axes, keys):
        if key is not None:
            ax.set_title(f"{panel}: {key}", fontsize=10)
    if mappable is not None:
        fig.colorbar(mappable, ax=axes, label=label, shrink=0.8)  # type: ignore[arg-type]
    if title:
        fig.suptitle(title, fontsize=11)


def _save(fig: Figure, path: Path | None) -> Figure:
    if path is not None:
        with replace_atomically(path) as tmp:
            fig.savefig(tmp, dpi=130, bbox_inches="tight")
    return fig


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

    Buses without a finite value get a red edge and ``-``; a ``capped`` row is labelled ``>=``.

    :param table: rows with a ``bus`` column and the ``value`` column.
    """
    panels = _panels(table, panel)
    norm = _finite_norm(table[value])
    size, font = (220, 7) if table["bus"].nunique() <= 12 else (90, 5)
    mappable = None
    with styled(**{"axes.grid": False}):
        fig = new_figure(1, len(panels), figsize=(5.2 * len(panels) + 1, 5.2))
        for ax, (_, rows) in zip(fig.axes, panels):
            draw_feeder(ax, topology)
            rows = rows[rows["bus"].astype(str).isin(list(topology.coords))]
            if rows.empty:
                continue
            buses = rows["bus"].astype(str).tolist()
            v = pd.to_numeric(rows[value], errors="coerce").to_numpy(dtype=float)
            ok = np.isfinite(v)
            x, y = np.array([topology.coords[b] for b in buses]).T
            mappable = ax.scatter(
                x,
                y,
                c=np.where(ok, v, norm.vmin),
                cmap=cmap,
                norm=norm,
                s=size,
                zorder=3,
                edgecolors=["k" if good else "r" for good in ok],
                linewidths=0.8,
            )
            capped = rows["capped"].astype(bool) if "capped" in rows else [False] * len(rows)
            for bus, bx, by, vi, is_capped in zip(buses, x, y, v, capped):
                at_least = "\u2265" if is_capped else ""
                text = f"{bus}\n{at_least}{vi:.3g}" if np.isfinite(vi) else f"{bus}\n-"
                ax.annotate(
                    text, (bx, by), fontsize=font, ha="center", va="bottom", xytext=(0, 6), textcoords="offset points"
                )
        _finish_panels(fig, panel, [key for key, _ in panels], mappable, label, title)
    return _save(fig, path)


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
    panels = _panels(table, panel)
    n = len(buses)
    pos = {b: i for i, b in enumerate(buses)}
    norm = _finite_norm(table[value])
    image = None
    with styled(**{"axes.grid": False}):
        fig = new_figure(1, len(panels), figsize=(0.5 * n * len(panels) + 3, 0.5 * n + 2))
        for ax, (_, rows) in zip(fig.axes, panels):
            grid = np.full((n, n), np.nan)
            for _, row in rows.iterrows():
                a = pos.get(str(row["bus_a"]))
                b = a if pd.isna(row.get("bus_b")) else pos.get(str(row["bus_b"]))
                if a is not None and b is not None:
                    grid[a, b] = grid[b, a] = float(row[value])
            image = ax.imshow(grid, cmap=cmap, norm=norm)
            ax.set_xticks(range(n), buses, rotation=90, fontsize=8)
            ax.set_yticks(range(n), buses, fontsize=8)
        _finish_panels(fig, panel, [key for key, _ in panels], image, label, title)
    return _save(fig, path)


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
    labels = rows[label_column].astype(str).tolist()
    with styled(**{"axes.grid.axis": "x"}):
        fig = new_figure(1, len(values), figsize=(4.5 * len(values), 0.35 * len(rows) + 1.5))
        for ax, col in zip(fig.axes, values):
            vals = rows[col].astype(float)
            ax.barh(range(len(rows)), vals, color="#4c72b0")
            if col.startswith("v_") and vals.notna().any():
                span = float(vals.max() - vals.min()) or 0.01
                ax.set_xlim(float(vals.min()) - 0.1 * span, float(vals.max()) + 0.1 * span)
            ax.set_yticks(range(len(rows)), labels, fontsize=8)
            ax.invert_yaxis()
            ax.set_xlabel(col)
        if title:
            fig.suptitle(title, fontsize=11)
        fig.tight_layout()
    return _save(fig, path)


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
    keys = table[group].astype(str)
    groups = list(dict.fromkeys(keys))
    width = 0.8 / max(1, len(groups))
    x = np.arange(len(cats))
    with styled(**{"axes.grid.axis": "y"}):
        fig = new_figure(figsize=(max(6.0, 0.45 * len(cats) * max(1, len(groups)) + 2), 4))
        ax = fig.axes[0]
        for i, g in enumerate(groups):
            rows = table[keys == g]
            by_category = dict(zip(rows[category].astype(str), rows[value]))
            heights = [float(by_category.get(c, np.nan)) for c in cats]
            ax.bar(x + (i - (len(groups) - 1) / 2) * width, heights, width, label=f"{group}: {g}")
        ax.set_xticks(x, cats, rotation=90 if len(cats) > 12 else 0, fontsize=8)
        ax.set_xlabel(category)
        ax.set_ylabel(label or value)
        ax.legend(fontsize=8)
        if title:
            ax.set_title(title, fontsize=10)
        fig.tight_layout()
    return _save(fig, path)


def plot_plants(topology: Topology, table: pd.DataFrame, *, title: str = "", path: Path | None = None) -> Figure:
    """The candidate buses on the feeder map, chosen plants as discs of area proportional to kW.

    :param table: one row per candidate with ``bus``, ``chosen`` and ``kw``.
    """
    rows = table[table["bus"].astype(str).isin(list(topology.coords))]
    chosen = rows[rows["chosen"].astype(bool)]
    largest = float(chosen["kw"].max()) if not chosen.empty else 1.0

    def area(kw: float) -> float:
        """Disc area (points^2) of a plant: one scale for the map and the legend."""
        return 40.0 + 900.0 * kw / largest

    with styled(**{"axes.grid": False}):
        fig = new_figure(figsize=(7.5, 6.5))
        ax = fig.axes[0]
        draw_feeder(ax, topology)
        if not rows.empty:
            x, y = np.array([topology.coords[b] for b in rows["bus"].astype(str)]).T
            ax.scatter(x, y, s=40, facecolors="none", edgecolors="#4c72b0", linewidths=1.0, zorder=3, label="candidate")
        for bus, kw in zip(chosen["bus"].astype(str), chosen["kw"]):
            bx, by = topology.coords[bus]
            ax.scatter([bx], [by], s=area(kw), color="#dd8452", alpha=0.85, edgecolors="k", linewidths=0.8, zorder=4)
            ax.annotate(
                f"{bus}\n{kw:,.0f} kW",
                (bx, by),
                fontsize=8,
                ha="center",
                va="bottom",
                xytext=(0, np.sqrt(area(kw)) / 2 + 3),  # just above the disc (its diameter is sqrt(area) points)
                textcoords="offset points",
            )
        for kw in sorted({largest, largest / 2, largest / 4}) if not chosen.empty else []:
            ax.scatter([], [], s=area(kw), color="#dd8452", alpha=0.85, edgecolors="k", label=f"{kw:,.0f} kW")
        ax.legend(loc="best", fontsize=8, labelspacing=2.2, handletextpad=1.6, borderpad=1.2)
        if title:
            ax.set_title(title, fontsize=11)
    return _save(fig, path)


def plot_operating_voltages(
    points: pd.DataFrame, *, limits: tuple[float, float], title: str = "", path: Path | None = None
) -> Figure:
    """Highest and lowest voltage at each operating point (by hour of the day): without PV, with the
    plan in the linear model, and with the plan in the validation run when there is one; the
    PV availability on a second axis.

    :param points: one row per operating point with ``hour``, ``availability`` and
        ``v_max_<case>_pu`` / ``v_min_<case>_pu`` for the cases present.
    """
    cases = [
        ("no_pv", "without PV", "0.4", "-"),
        ("plan_linear", "plan, linear model", "#dd8452", "--"),
        ("plan_run", "plan, validation run", "#c44e52", "-"),
    ]
    with styled():
        fig = new_figure(figsize=(8, 4.5))
        ax = fig.axes[0]
        sun = ax.twinx()
        # each point stands for an equal share of the day: one bar per share
        sun.bar(points["hour"], points["availability"], width=24.0 / len(points), color="#f2c14e", alpha=0.3, lw=0)
        sun.set_ylabel("PV availability (fraction of kW)")
        sun.set_ylim(0, max(1.0, float(points["availability"].max())) * 1.05)
        sun.grid(False)
        for case, label, color, style in cases:
            if f"v_max_{case}_pu" not in points:
                continue
            ax.plot(
                points["hour"], points[f"v_max_{case}_pu"], style, color=color, marker="o", ms=3, label=f"max, {label}"
            )
            ax.plot(
                points["hour"],
                points[f"v_min_{case}_pu"],
                style,
                color=color,
                marker="v",
                ms=3,
                lw=0.8,
                label=f"min, {label}",
            )
        for limit in limits:
            ax.axhline(limit, color="k", lw=0.8, ls=":")
        ax.set_zorder(sun.get_zorder() + 1)
        ax.patch.set_visible(False)
        ax.set_xlabel("hour of the represented day (h)")
        ax.set_ylabel("voltage (pu)")
        ax.set_xlim(0, 24)
        ax.legend(fontsize=7, ncols=3, loc="upper center", bbox_to_anchor=(0.5, -0.15))
        if title:
            ax.set_title(title, fontsize=10)
        fig.tight_layout()
    return _save(fig, path)


def plot_loss_by_setting(
    sites: pd.DataFrame, settings: pd.DataFrame, *, title: str = "", path: Path | None = None
) -> Figure:
    """MW lost per setting, one bar stacked by site, against the holdable figure.

    :param sites: one row per setting and site with ``setting``, ``site``, ``mw_lost`` (MW; the
        site's largest loss at once; NaN counts as none).
    :param settings: one row per setting with ``setting``, ``load_lost_mw`` (the sites' loss at
        once, drawn as a black tick: less than the stack when the sites did not leave together) and,
        from a search, ``holdable_mw`` (the largest loss within the limits, a red diamond; ``>=``
        when ``holdable_capped``).
    """
    names = list(dict.fromkeys(settings["setting"].astype(str)))
    x = np.arange(len(names))
    with styled(**{"axes.grid.axis": "y"}):
        fig = new_figure(figsize=(max(6.0, 1.3 * len(names) + 3), 4.5))
        ax = fig.axes[0]
        bottom = np.zeros(len(names))
        for site in dict.fromkeys(sites["site"].astype(str)):
            rows = sites[sites["site"].astype(str) == site]
            by_setting = dict(zip(rows["setting"].astype(str), pd.to_numeric(rows["mw_lost"], errors="coerce")))
            heights = np.nan_to_num(np.array([float(by_setting.get(n, np.nan)) for n in names]))
            ax.bar(x, heights, 0.6, bottom=bottom, label=site)
            bottom += heights
        lost = pd.to_numeric(settings["load_lost_mw"], errors="coerce").to_numpy(dtype=float)
        ax.scatter(x, lost, marker="_", s=900, color="k", linewidths=2, zorder=4, label="lost at once")
        if "holdable_mw" in settings:
            holdable = pd.to_numeric(settings["holdable_mw"], errors="coerce").to_numpy(dtype=float)
            ax.scatter(x, holdable, marker="D", s=50, color="#c44e52", zorder=5, label="largest loss within the limits")
            capped = settings["holdable_capped"].astype(bool) if "holdable_capped" in settings else [False] * len(x)
            for xi, value, is_capped in zip(x, holdable, capped):
                if np.isfinite(value):
                    at_least = "\u2265" if is_capped else ""
                    ax.annotate(
                        f"{at_least}{value:,.0f} MW",
                        (xi, value),
                        fontsize=8,
                        xytext=(8, 0),
                        textcoords="offset points",
                        va="center",
                    )
        ax.set_xticks(x, names, fontsize=9)
        ax.set_xlabel("ride-through setting")
        ax.set_ylabel("MW lost")
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        if title:
            ax.set_title(title, fontsize=10)
        fig.tight_layout()
    return _save(fig, path)


def plot_frequency_against_loss(
    points: pd.DataFrame,
    *,
    frequency: str = "frequency_zenith_hz",
    limit: float | None = None,
    title: str = "",
    path: Path | None = None,
) -> Figure:
    """A frequency extreme against the MW lost, one series per setting, the limit as a dashed line.

    :param points: one row per run with ``setting``, ``load_lost_mw`` (MW), the ``frequency``
        column (Hz) and ``within_limits`` (a run beyond a limit, any limit, is drawn hollow).
    :param limit: the frequency limit (Hz); None draws none.
    """
    with styled():
        fig = new_figure(figsize=(7.5, 4.5))
        ax = fig.axes[0]
        for k, setting in enumerate(dict.fromkeys(points["setting"].astype(str))):
            rows = points[points["setting"].astype(str) == setting].sort_values("load_lost_mw")
            color = f"C{k % 10}"
            x = pd.to_numeric(rows["load_lost_mw"], errors="coerce").to_numpy(dtype=float)
            y = pd.to_numeric(rows[frequency], errors="coerce").to_numpy(dtype=float)
            ok = rows["within_limits"].astype(bool).to_numpy() if "within_limits" in rows else np.ones(len(x), bool)
            ax.plot(x, y, color=color, lw=0.8, alpha=0.6)
            ax.scatter(x[ok], y[ok], color=color, s=28, zorder=3, label=setting)
            ax.scatter(x[~ok], y[~ok], facecolors="none", edgecolors=color, s=28, zorder=3)
        if limit is not None:
            ax.axhline(limit, color="k", lw=0.9, ls="--", label=f"limit {limit:g} Hz")
        ax.set_xlabel("MW lost at once")
        ax.set_ylabel(f"frequency {'nadir' if 'nadir' in frequency else 'zenith'} (Hz)")
        ax.legend(fontsize=8, loc="best", title="filled: within every limit", title_fontsize=8)
        if title:
            ax.set_title(title, fontsize=10)
        fig.tight_layout()
    return _save(fig, path)
