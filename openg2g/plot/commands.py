"""The controller command timeline: one row per actuator, from the ``commands`` and ``events`` tables.

A command's actuator is its kind and the names it targets (its text fields: site and model,
bank, battery...); its value is its first numeric field (a list, such as a bank's taps, gives one
line per entry; a boolean reads 0/1; ``None``, such as a power cap lifted, is a gap). Each value is
drawn as a step from the command's effective time to the next command on the same actuator (or
the run's end), with a marker at every command; scenario events that are commands join the row
of their actuator with a different marker.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from openg2g.plot.overview import command_rows
from openg2g.plot.style import new_figure, styled
from openg2g.plot.timeline import Marks, mark, titled

__all__ = ["MAX_ROWS", "command_records", "command_series", "plot_command_timeline"]

MAX_ROWS = 16
"""Actuators drawn at most (those with the most commands; the title says how many are left out)."""

SERIES_COLUMNS = ["actuator", "series", "t_s", "value", "source"]


def command_series(commands: pd.DataFrame, events: pd.DataFrame | None = None) -> pd.DataFrame:
    """The commands (and scenario events) as one row per actuator, series and time
    (:func:`openg2g.plot.overview.command_rows` of the tables' rows).

    :param commands: the run's ``commands`` table (``t_effective_s``, ``source``, ``command``,
        ``fields`` as JSON).
    :param events: the run's ``events`` table (``t_s``, ``command``, ``fields``); its supply
        changes carry no value and are left to the event marks.
    :return: columns ``actuator`` (``"set_batch_size dc1/Llama-3.1-8B"``), ``series``
        (``"batch_size"``, ``"taps[0]"``), ``t_s`` (s, when the command takes effect), ``value``,
        ``source`` (the controller, or ``event``), in time order.
    """
    return pd.DataFrame(command_rows(command_records(commands, events)), columns=SERIES_COLUMNS)


def command_records(commands: pd.DataFrame, events: pd.DataFrame | None = None) -> list[tuple[float, str, str, Any]]:
    """The ``(t_s, source, command, fields)`` of the ``commands`` table's rows (at their
    effective time), then of the ``events`` table's (source ``event``)."""
    records: list[tuple[float, str, str, Any]] = []
    if not commands.empty:
        records += zip(commands["t_effective_s"], commands["source"], commands["command"], commands["fields"])
    if events is not None and not events.empty:
        records += zip(events["t_s"], ["event"] * len(events), events["command"], events["fields"])
    return records


def plot_command_timeline(
    commands: pd.DataFrame,
    events: pd.DataFrame | None = None,
    end_s: float | None = None,
    marks: Marks | None = None,
    run: str = "",
) -> Figure:
    """One axes per actuator: each commanded value as a step line, a marker at every command.

    :param commands: the run's ``commands`` table.
    :param events: the run's ``events`` table (scenario events drawn as triangles).
    :param end_s: the run's end (s), where the last step ends; default the last command.
    :param marks: events and training windows to mark.
    :param run: the run's name, in the title.
    :raises ValueError: no command carries a value.
    """
    series = command_series(commands, events)
    if series.empty:
        raise ValueError("no command with a value to draw")
    counts = series.groupby("actuator", sort=False).size().sort_values(ascending=False, kind="stable")
    shown = sorted(counts.index[:MAX_ROWS], key=str)
    end = float(series["t_s"].max()) if end_s is None else float(end_s)
    with styled():
        fig = new_figure(nrows=len(shown), figsize=(9, 1.35 * len(shown) + 1.2), sharex=True)
        for ax, actuator in zip(fig.axes, shown):
            rows = series[series["actuator"] == actuator]
            for name, s in rows.groupby("series", sort=False):
                t = np.append(s["t_s"].to_numpy(dtype=float), end)
                v = s["value"].to_numpy(dtype=float)
                (line,) = ax.plot(t, np.append(v, v[-1]), drawstyle="steps-post", lw=1.0, label=str(name))
                by_controller = (s["source"] != "event").to_numpy()
                ax.plot(t[:-1][by_controller], v[by_controller], "o", ms=2.5, color=line.get_color())
                ax.plot(t[:-1][~by_controller], v[~by_controller], "v", ms=5, color=line.get_color())
            mark(ax, marks)
            ax.set_ylabel(actuator.replace(" ", "\n", 1), fontsize=7, rotation=0, ha="right", va="center")
            if rows["series"].nunique() > 1:
                ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=6)
        title = "Commands per actuator (dots: controller, triangles: scenario events)"
        if len(counts) > len(shown):
            title += f"; {len(shown)} of {len(counts)} actuators, those with the most commands"
        fig.axes[0].set_title(titled(run, title), fontsize=9)
        fig.axes[-1].set_xlabel("time (s)")
        fig.axes[-1].set_xlim(left=min(0.0, float(series["t_s"].min())), right=end)
        fig.tight_layout()
    return fig
