"""Plain-text and Markdown tables of run summaries (shared by ``run`` and ``compare``)."""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from openg2g.core.limits import CAP_CALIBRATED_MIN_W

__all__ = [
    "NONCONVERGED_COLUMN",
    "RATING_NOTE",
    "SUMMARY_COLUMNS",
    "UNCALIBRATED_CAPS_COLUMN",
    "delta_columns",
    "format_deltas",
    "format_table",
    "print_plot_report",
]

SUMMARY_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("violation_integral_pu_s", "viol. integral (pu.s)", "{:.4f}"),
    ("undervoltage_integral_pu_s", "under (pu.s)", "{:.4f}"),
    ("overvoltage_integral_pu_s", "over (pu.s)", "{:.4f}"),
    ("violation_time_s", "viol. time (s)", "{:.1f}"),
    ("v_min_pu", "Vmin (pu)", "{:.4f}"),
    ("v_max_pu", "Vmax (pu)", "{:.4f}"),
    ("max_loading_pct", "max loading (%)", "{:.1f}"),
    ("max_loading_branch", "worst branch", "{}"),  # "*": rated at OpenDSS's default (RATING_NOTE)
    ("overload_integral_pct_s", "overload (%.s)", "{:.1f}"),
    ("mean_throughput_tok_s", "throughput (tok/s)", "{:,.0f}"),
    ("itl_deadline_miss_fraction", "ITL misses (%)", "{:.2%}"),
    ("n_batch_changes", "batch changes", "{:d}"),
    ("n_batch_reversals", "reversals", "{:d}"),
    ("max_batch_changes_per_min", "max changes/min", "{:d}"),
    ("energy_mwh", "energy (MWh)", "{:.3f}"),
    ("wall_time_s", "wall (s)", "{:.1f}"),
)
"""(summary key, header, format) of the columns shown for each run."""


def _cell(value: Any, fmt: str) -> str:
    if value is None:
        return "-"
    try:
        return fmt.format(value).replace("%", "") if fmt.endswith("%}") else fmt.format(value)
    except (ValueError, TypeError):
        return str(value)


NONCONVERGED_COLUMN = ("nonconverged_steps", "non-conv. steps", "{:d}")
"""Shown after the voltage columns when any run has grid steps that did not converge: the voltage
figures then cover only the steps that did."""


UNCALIBRATED_CAPS_COLUMN = ("power_caps_below_calibration", f"caps < {CAP_CALIBRATED_MIN_W:g} W", "{:d}")
"""Shown last when any run set power caps below the range the power-cap model is calibrated on
(:data:`openg2g.core.limits.CAP_CALIBRATED_MIN_W`): its throughput and latency figures then rest on
an extrapolation."""


RATING_NOTE = (
    "* rated at OpenDSS's default (400 A a line): the feeder file gives no rating; set one in grid.branch_ratings"
)
"""Said under a table whose worst branch is marked ``*`` (as ``openg2g powerflow`` marks default ratings)."""


def _marked(summary: Mapping[str, Any]) -> Mapping[str, Any]:
    """``summary`` with its worst branch marked ``*`` when that branch's rating is a default."""
    if summary.get("max_loading_rating") != "default":
        return summary
    return {**summary, "max_loading_branch": f"{summary['max_loading_branch']}*"}


def _figure(summary: Mapping[str, Any], key: str, fmt: str) -> str:
    """The cell of ``summary[key]``: ``n/a`` for a figure the run could not compute (named in its
    ``unavailable_figures``), ``-`` for one it does not have (no branches, no grid steps)."""
    if key in summary.get("unavailable_figures", {}):
        return "n/a"
    return _cell(summary.get(key), fmt)


def format_table(rows: Sequence[tuple[str, Mapping[str, Any]]], markdown: bool = False) -> str:
    """One row per ``(label, summary)``; Markdown (for the README) or aligned plain text. A worst
    branch rated at OpenDSS's default is marked ``*``, with :data:`RATING_NOTE` below the table; a
    figure the run could not compute reads ``n/a``."""
    note = [RATING_NOTE] if any(s.get("max_loading_rating") == "default" for _, s in rows) else []
    rows = [(label, _marked(s)) for label, s in rows]
    columns = list(SUMMARY_COLUMNS)
    if any(s.get("nonconverged_steps") for _, s in rows):
        columns.insert(6, NONCONVERGED_COLUMN)
    if any(s.get("power_caps_below_calibration") for _, s in rows):
        columns.append(UNCALIBRATED_CAPS_COLUMN)
    headers = ["run", *(h for _, h, _ in columns)]
    body = [[label, *(_figure(s, k, f) for k, _, f in columns)] for label, s in rows]
    return _layout(headers, body, markdown, note)


def _layout(headers: Sequence[str], body: Sequence[Sequence[str]], markdown: bool, note: Sequence[str] = ()) -> str:
    """Header and rows as Markdown or as aligned plain text (first column left, others right), then
    the ``note`` lines."""
    if markdown:
        lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in body]
        return "\n".join([*lines, *("", *note)] if note else lines)
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *body)]
    fmt_row = lambda r: "  ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(r, widths)))
    return "\n".join([fmt_row(headers), fmt_row(["-" * w for w in widths]), *map(fmt_row, body), *note])


def delta_columns() -> list[tuple[str, str, str]]:
    """The columns of :data:`SUMMARY_COLUMNS` that are numbers (a difference means something)."""
    return [(k, h, f) for k, h, f in SUMMARY_COLUMNS if f != "{}"]


def format_deltas(deltas: Mapping[str, Mapping[str, Any]], baseline: str, markdown: bool = False) -> str:
    """The change of each run against the baseline: per column of :func:`delta_columns`, the
    difference in the column's unit, signed, and in percent of the baseline (``n/a`` where the
    baseline is 0).

    :param deltas: run label -> ``{key: difference, key_pct: percent}``
        (:func:`openg2g.plot.compare.baseline_deltas`).
    :param baseline: the baseline run's label, in the first header.
    """

    def cell(delta: Any, pct: Any, fmt: str) -> str:
        if delta is None or not math.isfinite(delta):  # a figure the run or the baseline lacks
            return "-"
        share = "n/a" if pct is None or not math.isfinite(pct) else f"{pct:+.1f}%"
        if fmt.endswith("d}"):  # a count: the difference of two counts is whole
            delta = round(delta)
        return f"{_cell(delta, fmt.replace('{:', '{:+'))} ({share})"

    columns = delta_columns()
    headers = [f"change vs {baseline}", *(h for _, h, _ in columns)]
    body = [[label, *(cell(d.get(k), d.get(f"{k}_pct"), f) for k, _, f in columns)] for label, d in deltas.items()]
    return _layout(headers, body, markdown)


def print_plot_report(plots: Mapping[str, Any] | None) -> None:
    """The ``plots`` entry of a summary for the terminal: how many were written, and each figure
    skipped (with why), failed or not drawn on stderr; nothing when the run drew no plots."""
    if not plots:
        return
    written = plots.get("written", [])
    print(f"\nplots: {len(written)} written ({', '.join(written) or 'none'})")
    for name, why in plots.get("skipped", {}).items():
        print(f"plot {name} skipped: {why}", file=sys.stderr)
    for name, why in plots.get("failed", {}).items():
        print(f"warning: plot {name} failed: {why}", file=sys.stderr)
    for name in plots.get("not_drawn", []):
        print(f"warning: plot {name} not drawn", file=sys.stderr)
