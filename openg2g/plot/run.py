"""Plots of one run, drawn from its output tables (never from simulator objects).

Each function takes tidy tables (as written to the run directory) and returns a matplotlib
figure; :func:`plot_run` writes the standard set of PNGs next to the tables.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pandas as pd
import yaml
from matplotlib.figure import Figure

from openg2g.core.atomic import replace_atomically
from openg2g.plot.style import LIMIT_STYLE, PHASE_COLORS, new_figure, styled

__all__ = [
    "branch_loading_envelope",
    "itl_deadlines",
    "plot_batch_sizes",
    "plot_dc_power",
    "plot_latency",
    "plot_run",
    "plot_voltage_envelope",
    "read_table",
]


def read_table(out_dir: Path, name: str) -> pd.DataFrame:
    """Read one output table (a directory of parquet parts); empty frame if it has no rows."""
    path = Path(out_dir) / name
    if not path.is_dir() or not any(path.glob("part-*.parquet")):
        return pd.DataFrame()
    return pd.read_parquet(path)


def plot_dc_power(datacenter: pd.DataFrame) -> Figure:
    """Facility power per phase (MW) for each site over time."""
    with styled():
        fig = new_figure()
        ax = fig.axes[0]
        for site, df in datacenter.groupby("site", observed=True):
            for ph, color in PHASE_COLORS.items():
                ax.plot(df["t_s"], df[f"p_{ph}_w"] / 1e6, color=color, lw=0.8, label=f"{site} phase {ph}")
        ax.set_xlabel("time (s)")
        ax.set_ylabel("active power (MW)")
        ax.set_title("Datacenter power per phase")
        ax.legend(loc="best", fontsize=8)
        fig.tight_layout()
    return fig


def branch_loading_envelope(grid_branches: pd.DataFrame) -> pd.DataFrame:
    """Per grid step, the highest conductor loading and the branch it is on.

    :param grid_branches: the run's ``grid_branches`` table (``t_s``, ``branch``, ``loading_pct``).
    :return: frame with columns ``t_s`` (s), ``max_loading_pct`` (%), ``branch``, in time order.
    """
    frame = grid_branches.dropna(subset=["loading_pct"])
    worst = frame.loc[frame.groupby("t_s")["loading_pct"].idxmax(), ["t_s", "loading_pct", "branch"]]
    worst = worst.rename(columns={"loading_pct": "max_loading_pct"})
    return worst.assign(branch=worst["branch"].astype(str)).sort_values("t_s").reset_index(drop=True)


def plot_voltage_envelope(
    grid: pd.DataFrame, v_min_pu: float, v_max_pu: float, grid_branches: pd.DataFrame | None = None
) -> Figure:
    """Lowest, highest and mean bus-phase voltage over time, with the limits; with the run's
    ``grid_branches`` table, a second panel beside it (below, same time axis) shows the highest
    branch loading at each step, the 100% line and the branch where the run's maximum occurred."""
    loading = branch_loading_envelope(grid_branches) if grid_branches is not None and not grid_branches.empty else None
    with styled():
        fig = new_figure(nrows=2 if loading is not None else 1, sharex=True)
        ax = fig.axes[0]
        ax.fill_between(grid["t_s"], grid["v_min_pu"], grid["v_max_pu"], color="#9ecae1", alpha=0.5, label="min-max")
        ax.plot(grid["t_s"], grid["v_min_pu"], color="#08519c", lw=0.8, label="lowest bus-phase")
        ax.plot(grid["t_s"], grid["v_max_pu"], color="#3182bd", lw=0.8, label="highest bus-phase")
        ax.axhline(v_min_pu, **LIMIT_STYLE, label=f"limits {v_min_pu:g}/{v_max_pu:g} pu")
        ax.axhline(v_max_pu, **LIMIT_STYLE)
        ax.set_ylabel("voltage (pu)")
        ax.set_title("Voltage envelope" + (" and branch loading" if loading is not None else ""))
        ax.legend(loc="best", fontsize=8)
        if loading is not None and not loading.empty:
            lx = fig.axes[1]
            peak = loading.loc[loading["max_loading_pct"].idxmax()]
            lx.plot(loading["t_s"], loading["max_loading_pct"], color="#6a3d9a", lw=0.8, label="most loaded branch")
            lx.axhline(100.0, **{**LIMIT_STYLE, "label": "normal rating"})
            peak_label = f"max {peak['max_loading_pct']:.1f}% ({peak['branch']})"
            lx.plot([peak["t_s"]], [peak["max_loading_pct"]], "o", color="#6a3d9a", ms=4, label=peak_label)
            lx.set_ylabel("loading (%)")
            lx.legend(loc="best", fontsize=8)
        fig.axes[-1].set_xlabel("time (s)")
        fig.tight_layout()
    return fig


def _per_model(
    models: pd.DataFrame,
    column: str,
    ylabel: str,
    title: str,
    log2: bool = False,
    levels: Mapping[tuple[str, str], float] | None = None,
    level_label: str = "",
) -> Figure:
    """One line per (site, model); ``levels`` adds a dashed line of the same colour per (site, model),
    shown once in the legend as ``level_label``."""
    with styled():
        fig = new_figure()
        ax = fig.axes[0]
        for (site, model), df in models.groupby(["site", "model"], observed=True):
            (line,) = ax.plot(df["t_s"], df[column], lw=0.8, label=f"{site}/{model}")
            level = (levels or {}).get((str(site), str(model)))
            if level is not None:  # one legend entry for all levels: the colour says whose it is
                labelled = any(ln.get_label() == level_label for ln in ax.get_lines())
                ax.axhline(level, color=line.get_color(), ls="--", lw=0.8, label="_" if labelled else level_label)
        if log2:
            ax.set_yscale("log", base=2)
        ax.set_xlabel("time (s)")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.legend(loc="best", fontsize=7)
        fig.tight_layout()
    return fig


def plot_batch_sizes(models: pd.DataFrame) -> Figure:
    """Batch size of each model over time (log2 axis)."""
    return _per_model(models, "batch_size", "batch size (max_num_seqs)", "Batch size per model", log2=True)


def plot_latency(models: pd.DataFrame, deadlines_s: Mapping[tuple[str, str], float] | None = None) -> Figure:
    """Mean inter-token latency of each model over time (ms), with its ITL deadline as a dashed line.

    :param deadlines_s: ``(site, model)`` -> ITL deadline (s); models without one get no line.
    """
    frame = models.assign(itl_ms=models["itl_s"] * 1e3)
    levels = {key: d * 1e3 for key, d in (deadlines_s or {}).items()}
    return _per_model(
        frame,
        "itl_ms",
        "inter-token latency (ms)",
        "Inter-token latency per model",
        levels=levels,
        level_label="ITL deadline (dashed, model colour)",
    )


def itl_deadlines(out_dir: Path) -> dict[tuple[str, str], float]:
    """``(site, model)`` -> ITL deadline (s) from the run's ``scenario.yaml``; empty without one."""
    path = Path(out_dir) / "scenario.yaml"
    if not path.is_file():
        return {}
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return {
        (str(site["name"]), str(m["model"])): float(m["itl_deadline_s"])
        for site in data.get("datacenters") or []
        for m in site.get("models") or []
        if m.get("itl_deadline_s") is not None
    }


def plot_run(out_dir: Path, v_min_pu: float, v_max_pu: float) -> list[Path]:
    """Write ``dc_power.png``, ``voltage_envelope.png`` (with branch loading when the run wrote
    ``grid_branches``), ``batch_sizes.png``, ``latency.png``.

    The latency plot draws each model's ITL deadline when the run folder keeps its scenario
    (``scenario.yaml``, written by ``openg2g run`` and sweeps).
    """
    out_dir = Path(out_dir)
    datacenter, grid, models, branches = (
        read_table(out_dir, n) for n in ("datacenter", "grid", "models", "grid_branches")
    )
    figures: dict[str, Figure] = {}
    if not datacenter.empty:
        figures["dc_power.png"] = plot_dc_power(datacenter)
    if not grid.empty:
        figures["voltage_envelope.png"] = plot_voltage_envelope(grid, v_min_pu, v_max_pu, branches)
    if not models.empty:
        figures["batch_sizes.png"] = plot_batch_sizes(models)
        figures["latency.png"] = plot_latency(models, itl_deadlines(out_dir))
    written = []
    for name, fig in figures.items():
        with replace_atomically(out_dir / name) as tmp:
            fig.savefig(tmp, dpi=110)
        written.append(out_dir / name)
    return written
