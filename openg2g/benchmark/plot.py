"""The leaderboard as a figure: per score, a bar per controller at its mean with a whisker up to its worst case."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from openg2g.benchmark.spec import SCORES
from openg2g.core.atomic import replace_atomically
from openg2g.plot.style import new_figure, styled

__all__ = ["plot_leaderboard"]


def plot_leaderboard(board: pd.DataFrame, *, title: str = "", path: Path | None = None) -> Figure:
    """One panel per score of :data:`~openg2g.benchmark.spec.SCORES`, controllers in leaderboard order.

    :param board: a leaderboard (:func:`openg2g.benchmark.run.leaderboard`).
    :param path: where to save the figure (PNG), if given.
    """
    labels = [f"{name} ({n} cases)" for name, n in zip(board["controller"], board["n_cases"])]
    y = np.arange(len(labels))
    with styled(**{"axes.grid.axis": "x"}):
        fig = new_figure(1, len(SCORES), figsize=(3.4 * len(SCORES), 0.4 * len(labels) + 1.6))
        for ax, (col, label) in zip(fig.axes, SCORES.items()):
            mean = board[f"{col}_mean"].astype(float).to_numpy()
            worst = board[f"{col}_worst"].astype(float).to_numpy()
            whisker = np.vstack([np.zeros_like(mean), np.nan_to_num(worst - mean)])
            ax.barh(y, np.nan_to_num(mean), xerr=whisker, color="#4c72b0", ecolor="#333333", capsize=3)
            if not np.nanmax(np.abs(np.nan_to_num(worst)), initial=0.0) > 0:
                ax.set_xlim(0, 1)  # all zero (no tap operations): an axis from 0, not around it
            ax.set_yticks(y, labels if ax is fig.axes[0] else [""] * len(labels), fontsize=8)
            ax.invert_yaxis()
            ax.set_xlabel(label, fontsize=8)
        fig.suptitle(f"{title}: mean over cases, whisker to the worst case" if title else "", fontsize=10)
        fig.tight_layout()
    if path is not None:
        with replace_atomically(path) as tmp:
            fig.savefig(tmp, dpi=130, bbox_inches="tight")
    return fig
