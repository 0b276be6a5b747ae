"""Substation active and reactive power per phase, from the ``grid`` table."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from openg2g.core.state import PHASES
from openg2g.plot.style import PHASE_COLORS, new_figure, styled
from openg2g.plot.timeline import Marks, envelope, mark, titled

__all__ = ["plot_substation_power"]


def plot_substation_power(grid: pd.DataFrame, marks: Marks | None = None, run: str = "") -> Figure:
    """Power drawn from the substation per phase: P (MW) above, Q (Mvar) below.

    :param grid: the run's ``grid`` table (``t_s``, ``p_sub_<ph>_w``, ``q_sub_<ph>_var``).
    :param marks: events and training windows to mark.
    :param run: the run's name, in the title.
    """
    with styled():
        fig = new_figure(nrows=2, figsize=(9, 5.5), sharex=True)
        p_ax, q_ax = fig.axes
        for ph in PHASES:
            p_ax.plot(*_mega(grid, f"p_sub_{ph}_w"), color=PHASE_COLORS[ph], lw=0.8, label=f"phase {ph}")
            q_ax.plot(*_mega(grid, f"q_sub_{ph}_var"), color=PHASE_COLORS[ph], lw=0.8, label=f"phase {ph}")
        for ax in (p_ax, q_ax):
            mark(ax, marks)
            ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7)
        p_ax.set_ylabel("active power (MW)")
        q_ax.set_ylabel("reactive power (Mvar)")
        q_ax.set_xlabel("time (s)")
        p_ax.set_title(titled(run, "Substation power per phase"))
        fig.tight_layout()
    return fig


def _mega(grid: pd.DataFrame, column: str) -> tuple[np.ndarray, np.ndarray]:
    """A column in millions (W -> MW, var -> Mvar), thinned for drawing."""
    return envelope(grid["t_s"], grid[column].to_numpy(dtype=float) / 1e6)
