"""Regulator taps over time, from the ``grid`` table's ``tap_<bank>_<phase>`` columns."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from openg2g.plot.overview import tap_columns_of
from openg2g.plot.style import new_figure, styled
from openg2g.plot.timeline import Marks, changes, mark, titled

__all__ = ["plot_taps", "tap_columns"]


def tap_columns(grid: pd.DataFrame) -> dict[str, dict[str, str]]:
    """Regulator bank -> phase (the column's suffix, a letter or a unit index) -> tap column.

    :param grid: the run's ``grid`` table.
    :return: empty when the grid has no regulators.
    """
    return tap_columns_of(grid.columns)


def plot_taps(grid: pd.DataFrame, marks: Marks | None = None, run: str = "") -> Figure:
    """Tap position of each regulator bank and phase over time, one axes per bank (step plots).

    :param grid: the run's ``grid`` table (``t_s`` and the tap columns).
    :param marks: events and training windows to mark (:func:`openg2g.plot.timeline.run_marks`).
    :param run: the run's name, in the title.
    :raises ValueError: the table has no tap column.
    """
    banks = tap_columns(grid)
    if not banks:
        raise ValueError("the grid table has no tap columns (the grid has no regulators)")
    with styled():
        fig = new_figure(nrows=len(banks), figsize=(9, 2.4 * len(banks) + 0.8), sharex=True)
        for ax, (bank, columns) in zip(fig.axes, banks.items()):
            for phase, column in columns.items():
                t, taps = changes(grid["t_s"], grid[column])
                ax.plot(t, taps, drawstyle="steps-post", lw=1.0, label=f"phase {phase}")
            mark(ax, marks)
            ax.set_ylabel(f"{bank} tap (step)")
            ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7)
        fig.axes[0].set_title(titled(run, "Regulator taps"))
        fig.axes[-1].set_xlabel("time (s)")
        fig.tight_layout()
    return fig
