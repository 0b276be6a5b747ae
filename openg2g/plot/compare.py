"""Comparing runs: their summaries as one table, and a bar chart per metric.

Rows come from ``summary.json`` files (:func:`read_summaries`), from
:func:`openg2g.engine.run_scenario` results (``result.summary``), or from any mapping of the same
keys; the label of a run is the mapping key, the ``label`` entry, or the ``scenario`` entry.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple, TypeAlias

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from openg2g.core.errors import G2GError
from openg2g.plot.style import new_figure, styled

__all__ = [
    "DEFAULT_METRICS",
    "METRICS",
    "Metric",
    "Rows",
    "baseline_deltas",
    "plot_comparison",
    "read_summaries",
    "summary_frame",
]


class Metric(NamedTuple):
    """How a summary figure is shown: axis label, display scale, and which way is better."""

    label: str
    scale: float = 1.0
    lower_is_better: bool | None = True


METRICS: dict[str, Metric] = {
    "violation_integral_pu_s": Metric("voltage violation integral (pu·s)"),
    "violation_time_s": Metric("time in violation (s)"),
    "v_min_pu": Metric("lowest voltage (pu)", 1.0, False),
    "v_max_pu": Metric("highest voltage (pu)", 1.0, True),
    "mean_throughput_tok_s": Metric("mean throughput (million tok/s)", 1e-6, False),
    "itl_deadline_miss_fraction": Metric("ITL deadline misses (%)", 100.0),
    "n_batch_changes": Metric("batch-size changes"),
    "n_batch_reversals": Metric("batch-size reversals"),
    "max_batch_changes_per_min": Metric("most batch changes of one model in 60 s"),
    "max_batch_reversals_per_min": Metric("most batch reversals of one model in 60 s"),
    "n_commands": Metric("commands sent"),
    "energy_mwh": Metric("energy (MWh)", 1.0, None),
    "wall_time_s": Metric("wall time (s)"),
}
"""Known summary keys and how to show them (unknown keys are shown as they are)."""

DEFAULT_METRICS: tuple[str, ...] = (
    "violation_integral_pu_s",
    "mean_throughput_tok_s",
    "itl_deadline_miss_fraction",
    "n_batch_changes",
)
"""The figures :func:`plot_comparison` shows unless told otherwise."""

Rows: TypeAlias = "pd.DataFrame | Mapping[str, Mapping[str, Any]] | Sequence[Mapping[str, Any]] | Sequence[tuple[str, Mapping[str, Any]]]"
"""Run summaries: a frame (one row per run), ``{label: summary}``, summaries, or ``(label, summary)`` pairs."""


def read_summary(run_dir: Path) -> dict[str, Any]:
    """The ``summary.json`` of a run directory, as a mapping.

    :raises G2GError: no such file, unreadable, not UTF-8 JSON, or not a JSON object.
    """
    path = Path(run_dir) / "summary.json"
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        raise G2GError(f"{run_dir}: no summary.json (is this a run output directory?)") from None
    except OSError as exc:
        raise G2GError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise G2GError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise G2GError(f"{path}: not valid JSON ({exc})") from None
    except RecursionError:
        raise G2GError(f"{path}: nested too deeply to read") from None
    if not isinstance(data, dict):
        raise G2GError(f"{path}: expected a JSON object of run figures, got a JSON {type(data).__name__}")
    return data


def read_summaries(run_dirs: Iterable[str | Path]) -> list[tuple[str, dict[str, Any]]]:
    """``(label, summary)`` per run directory, every label distinct.

    A run is labelled by its scenario name; runs sharing a scenario name (two runs of one
    scenario, e.g. with different ``--set``) are labelled by their folder as given instead. An
    unfinished run's label ends in ``[status]``.

    :raises G2GError: see :func:`read_summary`.
    """
    run_dirs = list(run_dirs)
    summaries = [read_summary(Path(d)) for d in run_dirs]
    names = [str(s.get("scenario", Path(d).name)) for d, s in zip(run_dirs, summaries)]
    labels = [name if names.count(name) == 1 else str(d) for name, d in zip(names, run_dirs)]
    seen: dict[str, int] = {}
    rows = []
    for label, summary in zip(labels, summaries):
        seen[label] = seen.get(label, 0) + 1
        if seen[label] > 1:  # the same folder given twice
            label += f" #{seen[label]}"
        status = summary.get("status", "complete")
        if status != "complete":
            label += f" [{status}]"
        rows.append((label, summary))
    return rows


def summary_frame(rows: Rows) -> pd.DataFrame:
    """The runs as one frame: index the run labels, one column per summary key.

    :raises ValueError: two runs have the same label, or a row has no label.
    """
    if isinstance(rows, pd.DataFrame):
        return rows.copy()
    pairs: list[tuple[str, Mapping[str, Any]]] = []
    items: Iterable[Any] = rows.items() if isinstance(rows, Mapping) else rows
    for i, item in enumerate(items):
        if isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], Mapping):
            pairs.append((str(item[0]), item[1]))
        elif isinstance(item, Mapping):
            label = item.get("label", item.get("scenario"))
            if label is None:
                raise ValueError(f"row {i} has neither a 'label' nor a 'scenario' entry")
            pairs.append((str(label), item))
        else:
            raise ValueError(f"row {i} is {type(item).__name__}; expected a summary mapping or (label, summary)")
    labels = [label for label, _ in pairs]
    dup = sorted({x for x in labels if labels.count(x) > 1})
    if dup:
        raise ValueError(f"runs with the same label: {dup}; give each a distinct 'label'")
    frame = pd.DataFrame(
        [{k: v for k, v in s.items() if k != "label"} for _, s in pairs], index=pd.Index(labels, name="run")
    )
    return frame


def plot_comparison(
    rows: Rows,
    metrics: Sequence[str] = DEFAULT_METRICS,
    ncols: int | None = None,
    highlight: str | None = None,
) -> Figure:
    """One horizontal bar chart per metric, one bar per run, value written at each bar.

    :param rows: run summaries (see :data:`Rows`).
    :param metrics: summary keys to show, one axes each (see :data:`METRICS` for labels/scales).
    :param ncols: axes per row (default: all in one row up to 4).
    :param highlight: label of a run to draw in a contrasting colour (e.g. your controller).
    :return: figure with one axes per metric, titled by the metric.
    :raises KeyError: no run reports one of ``metrics``.
    """
    frame = summary_frame(rows)
    for m in metrics:
        if m not in frame.columns:
            raise KeyError(f"no run reports {m!r}; available: {sorted(frame.columns)}")
    n = len(metrics)
    ncols = ncols or min(n, 4)
    nrows = int(np.ceil(n / ncols))
    labels = [str(x) for x in frame.index]
    with styled(**{"axes.grid": False}):
        fig = new_figure(nrows, ncols, figsize=(3.4 * ncols + 1.2, 0.35 * len(labels) * nrows + 1.6 * nrows))
        axes = fig.axes
        for ax, m in zip(axes, metrics):
            meta = METRICS.get(m, Metric(m, 1.0, None))
            values = pd.to_numeric(frame[m], errors="coerce").to_numpy(dtype=float) * meta.scale
            colors = ["#e7298a" if lab == highlight else "#4c72b0" for lab in labels]
            y = np.arange(len(labels))
            ax.barh(y, np.nan_to_num(values), color=colors)
            ax.set_yticks(y)
            ax.set_yticklabels(labels if ax in axes[::ncols] else [""] * len(labels), fontsize=8)
            ax.invert_yaxis()
            arrow = "" if meta.lower_is_better is None else (" ↓ better" if meta.lower_is_better else " ↑ better")
            ax.set_title(meta.label + arrow, fontsize=9)
            finite = values[np.isfinite(values)]
            span = float(np.max(np.abs(finite))) if finite.size else 1.0
            for yi, v in zip(y, values):
                ax.annotate(
                    "n/a" if not np.isfinite(v) else f"{v:.3g}",
                    (0 if not np.isfinite(v) else v, yi),
                    textcoords="offset points",
                    xytext=(3, 0),
                    va="center",
                    fontsize=7,
                )
            ax.set_xlim(min(0.0, float(finite.min()) if finite.size else 0.0), (span or 1.0) * 1.25)
            ax.grid(axis="x", alpha=0.3)
        for ax in axes[n:]:
            ax.set_visible(False)
        fig.tight_layout()
    return fig


def baseline_deltas(rows: Rows, baseline: str, keys: Sequence[str]) -> pd.DataFrame:
    """Each run's change against the baseline run, per summary figure.

    :param rows: run summaries (see :data:`Rows`), the baseline among them.
    :param baseline: the baseline run's label.
    :param keys: summary keys to compare (a key that is not a number in a run gives NaN there).
    :return: one row per run other than the baseline; per key, ``<key>`` the difference
        (run minus baseline, in the key's unit) and ``<key>_pct`` that difference in percent of
        the baseline's magnitude (NaN where the baseline is 0).
    :raises ValueError: no run has the baseline's label.
    """
    frame = summary_frame(rows)
    if baseline not in frame.index:
        raise ValueError(f"no run labelled {baseline!r}; runs: {list(frame.index)}")
    columns = {}
    for key in keys:
        values = pd.to_numeric(frame[key], errors="coerce") if key in frame else pd.Series(np.nan, frame.index)
        base = float(values[baseline])
        delta = values - base
        columns[key] = delta
        columns[f"{key}_pct"] = delta / abs(base) * 100.0 if base != 0 else delta * np.nan
    return pd.DataFrame(columns, index=frame.index).drop(index=baseline)
