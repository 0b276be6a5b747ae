"""The look shared by every openg2g plot: one rc style, phase colours and the voltage colour map.

Plot functions build :class:`matplotlib.figure.Figure` objects directly (no pyplot state), inside
:func:`styled`, so a notebook or a script that draws hundreds of figures leaks nothing and the
caller decides whether to show, save or close them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import matplotlib as mpl
from matplotlib.colors import Colormap, Normalize
from matplotlib.figure import Figure

from openg2g.plot.colors import PHASE_COLORS

__all__ = [
    "LIMIT_STYLE",
    "PHASE_COLORS",
    "STYLE",
    "VOLTAGE_CMAP",
    "new_figure",
    "show",
    "styled",
    "voltage_cmap",
    "voltage_norm",
]

STYLE: dict[str, Any] = {
    "figure.figsize": (9, 4),
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "legend.fontsize": 8,
}
"""rc parameters every openg2g figure is drawn with."""

LIMIT_STYLE: dict[str, Any] = {"color": "#d62728", "ls": "--", "lw": 1}
"""Line style of voltage limits."""

VOLTAGE_CMAP = "RdYlBu"
"""Colour map of voltage magnitudes: red is low, blue is high."""


@contextmanager
def styled(**overrides: Any) -> Iterator[None]:
    """Context in which figures get the openg2g style (``overrides`` are extra rc parameters)."""
    rc: dict[str, Any] = {**STYLE, **overrides}
    with mpl.rc_context(rc):  # type: ignore[arg-type]
        yield


def new_figure(nrows: int = 1, ncols: int = 1, figsize: tuple[float, float] | None = None, **subplot_kw: Any) -> Figure:
    """A pyplot-free figure with ``nrows x ncols`` axes (call inside :func:`styled`)."""
    fig = Figure(figsize=figsize or mpl.rcParams["figure.figsize"])
    fig.subplots(nrows, ncols, squeeze=False, **subplot_kw)
    return fig


def voltage_norm(values: Any = None, v_min_pu: float | None = None, v_max_pu: float | None = None) -> Normalize:
    """Colour scale of voltages: the limits when given, else the finite range of ``values``.

    :param values: voltages (pu) used when a limit is missing.
    :param v_min_pu: lower end of the scale (pu), e.g. the scenario's lower limit.
    :param v_max_pu: upper end of the scale (pu).
    """
    import numpy as np

    lo, hi = v_min_pu, v_max_pu
    if lo is None or hi is None:
        arr = np.asarray(values if values is not None else [], dtype=float)
        arr = arr[np.isfinite(arr)]
        data_lo, data_hi = (float(arr.min()), float(arr.max())) if arr.size else (0.95, 1.05)
        lo = data_lo if lo is None else lo
        hi = data_hi if hi is None else hi
    if not hi > lo:
        lo, hi = lo - 0.005, hi + 0.005
    return Normalize(vmin=lo, vmax=hi)


def voltage_cmap() -> Colormap:
    """The voltage colour map, with grey for missing values (no such phase, or not solved)."""
    return mpl.colormaps[VOLTAGE_CMAP].with_extremes(bad="#d9d9d9")


def show(fig: Figure, dpi: int = 100) -> None:
    """Display a figure once in a notebook, whatever the matplotlib backend, and release it.

    The figure is rendered to PNG and shown with IPython's ``display`` (so it does not depend on
    ``%matplotlib inline``), then closed in pyplot if pyplot manages it (so it is not shown a second
    time at the end of the cell). Outside IPython it does nothing but the closing.

    :param fig: the figure to show.
    :param dpi: resolution of the PNG.
    """
    import io
    import sys

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    if "IPython" in sys.modules:
        from IPython.display import Image, display

        display(Image(data=buf.getvalue(), format="png"))
    if "matplotlib.pyplot" in sys.modules:
        import matplotlib.pyplot as plt

        plt.close(fig)
