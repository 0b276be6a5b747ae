"""Branch loading over time: the most loaded lines and transformers, from ``grid_branches``."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from openg2g.plot.style import LIMIT_STYLE, new_figure, styled
from openg2g.plot.timeline import Marks, envelope, mark, titled

__all__ = ["plot_branch_loading", "worst_branches"]


def worst_branches(grid_branches: pd.DataFrame, n: int = 5) -> tuple[pd.DataFrame, dict[str, bool]]:
    """The ``n`` branches with the highest loading over the run, each as its most loaded
    conductor's loading at every grid step.

    :param grid_branches: the run's ``grid_branches`` table (``t_s``, ``branch``, ``loading_pct``,
        ``rating_default``).
    :param n: how many branches.
    :return: a frame indexed by ``t_s`` (s), one column per branch (loading, %) from the highest
        peak down; and per branch whether its rating is OpenDSS's default (the file sets none).
    :raises ValueError: ``n`` is below 1.
    """
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    frame = grid_branches.assign(branch=grid_branches["branch"].astype(str))
    peaks = frame.groupby("branch")["loading_pct"].max().dropna().sort_values(ascending=False, kind="stable")
    chosen = list(peaks.index[:n])
    rows = frame[frame["branch"].isin(chosen)]
    wide = rows.groupby(["t_s", "branch"])["loading_pct"].max().unstack("branch").sort_index()
    default = rows.groupby("branch")["rating_default"].any() if "rating_default" in rows else None
    flags = {b: bool(default[b]) if default is not None else False for b in chosen}
    return wide.reindex(columns=chosen), flags


def plot_branch_loading(grid_branches: pd.DataFrame, n: int = 5, marks: Marks | None = None, run: str = "") -> Figure:
    """Loading of the ``n`` most loaded branches over time (%), with the 100% normal rating.

    A branch rated by OpenDSS's default (no rating in the feeder file) says so in the legend:
    its loading is against a rating nobody chose.

    :param grid_branches: the run's ``grid_branches`` table.
    :param n: how many branches (see :func:`worst_branches`).
    :param marks: events and training windows to mark.
    :param run: the run's name, in the title.
    """
    wide, default = worst_branches(grid_branches, n)
    t = wide.index.to_numpy(dtype=float)
    with styled():
        fig = new_figure(figsize=(9, 4.5))
        ax = fig.axes[0]
        for branch in wide.columns:
            suffix = " (default rating)" if default[branch] else ""
            ax.plot(*envelope(t, wide[branch]), lw=0.9, label=f"{branch}{suffix}")
        ax.axhline(100.0, **{**LIMIT_STYLE, "label": "normal rating (100%)"})
        mark(ax, marks)
        ax.set_xlabel("time (s)")
        ax.set_ylabel("loading of the most loaded conductor (%)")
        ax.set_title(titled(run, f"Branch loading: the {len(wide.columns)} most loaded branches"))
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7)
        fig.tight_layout()
    return fig
