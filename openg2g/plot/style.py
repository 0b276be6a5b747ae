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
from matplotlib.axes import Axes
from matplotlib.cm import ScalarMappable
from matplotlib.colorbar import Colorbar
from matplotlib.colors import Colormap, LinearSegmentedColormap, Normalize
from matplotlib.figure import Figure

from openg2g.plot.colors import PHASE_COLORS

__all__ = [
    "LIMIT_POINTS",
    "LIMIT_STYLE",
    "MISSING_COLOR",
    "OUT_OF_BAND_MARGIN",
    "PHASE_COLORS",
    "STYLE",
    "VOLTAGE_CMAP",
    "VOLTAGE_STOPS",
    "LimitNorm",
    "new_figure",
    "show",
    "styled",
    "voltage_cmap",
    "voltage_colorbar",
    "voltage_colorscale",
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

VOLTAGE_CMAP = "openg2g_voltage"
"""Name of the voltage colour map (:func:`voltage_cmap`)."""

LIMIT_POINTS = (0.2, 0.8)
"""Where the lower and upper voltage limits sit on the voltage colour scale (0 is its bottom, 1
its top): the band between them takes the middle 60 %, whatever the data."""

VOLTAGE_STOPS: tuple[tuple[float, str], ...] = (
    (0.0, "#3f0010"),
    (LIMIT_POINTS[0], "#d7191c"),
    (LIMIT_POINTS[0], "#fdae61"),
    (0.5, "#a6d96a"),
    (LIMIT_POINTS[1], "#9ed4e6"),
    (LIMIT_POINTS[1], "#2c7bb6"),
    (1.0, "#0b1f4d"),
)
"""The voltage colour map as ``(position, colour)`` stops: inside the band light, from orange at
the lower limit through green mid-band to light blue at the upper; beyond a limit saturated and
darkening with the distance, red below and blue above. A limit is a jump (two stops at one
position), so a bus just outside never looks like one just inside."""

OUT_OF_BAND_MARGIN = 0.25
"""The least reach of the scale beyond each limit, as a fraction of the band's width (pu): the
out-of-band colours are on the colour bar even when no bus is out of band."""

MISSING_COLOR = "#d9d9d9"
"""Colour of a bus with no voltage (no such phase, not monitored, not solved)."""


class LimitNorm(Normalize):
    """A voltage scale linear in three pieces: ``[vmin, v_min_pu]`` to ``[0, 0.2]``, the band to
    ``[0.2, 0.8]`` and ``[v_max_pu, vmax]`` to ``[0.8, 1]`` (:data:`LIMIT_POINTS`), so the limits
    are fixed points of the colour bar and the band's centre its middle.

    :param v_min_pu: lower limit (pu).
    :param v_max_pu: upper limit (pu), above ``v_min_pu``.
    :param vmin: bottom of the scale (pu), below ``v_min_pu``.
    :param vmax: top of the scale (pu), above ``v_max_pu``.
    """

    def __init__(self, v_min_pu: float, v_max_pu: float, vmin: float, vmax: float) -> None:
        super().__init__(vmin=vmin, vmax=vmax, clip=True)
        self.v_min_pu, self.v_max_pu = v_min_pu, v_max_pu

    def knots(self) -> tuple[list[float], list[float]]:
        """The pieces' ends: voltages (pu) and their positions on the scale."""
        assert self.vmin is not None and self.vmax is not None
        return [self.vmin, self.v_min_pu, self.v_max_pu, self.vmax], [0.0, *LIMIT_POINTS, 1.0]

    def __call__(self, value: Any, clip: bool | None = None) -> Any:
        import numpy as np

        volts, points = self.knots()
        data: np.ma.MaskedArray = np.ma.masked_invalid(np.ma.asarray(value, dtype=float))
        out = np.ma.masked_array(np.interp(data.filled(volts[0]), volts, points), mask=np.ma.getmaskarray(data))
        return out if np.ndim(value) else out[()]

    def inverse(self, value: Any) -> Any:
        import numpy as np

        volts, points = self.knots()
        return np.interp(np.asarray(value, dtype=float), points, volts)


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


def voltage_norm(values: Any = None, v_min_pu: float | None = None, v_max_pu: float | None = None) -> LimitNorm:
    """Colour scale of voltages, centred on the band between the limits (:class:`LimitNorm`) and
    reaching beyond each limit to the data's extreme, or :data:`OUT_OF_BAND_MARGIN` of the band's
    width where the data stays inside: nothing in the data is clipped to a limit's colour.

    :param values: voltages (pu); NaN ignored.
    :param v_min_pu: lower limit (pu), e.g. the scenario's; ``None``: the data's minimum.
    :param v_max_pu: upper limit (pu); ``None``: the data's maximum.
    """
    import numpy as np

    arr = np.asarray(values if values is not None else [], dtype=float).ravel()
    arr = arr[np.isfinite(arr)]
    data_lo, data_hi = (float(arr.min()), float(arr.max())) if arr.size else (0.95, 1.05)
    lo = data_lo if v_min_pu is None else float(v_min_pu)
    hi = data_hi if v_max_pu is None else float(v_max_pu)
    if not hi > lo:
        lo, hi = lo - 0.005, hi + 0.005
    margin = OUT_OF_BAND_MARGIN * (hi - lo)
    return LimitNorm(lo, hi, min(data_lo, lo - margin), max(data_hi, hi + margin))


def voltage_cmap() -> Colormap:
    """The voltage colour map (:data:`VOLTAGE_STOPS`), grey for missing values."""
    # 1000 entries: each limit's position times 1000 is a whole entry, so the jump is at the limit
    # itself (a colour map looks a value up by its entry, not its exact position)
    return LinearSegmentedColormap.from_list(VOLTAGE_CMAP, list(VOLTAGE_STOPS), N=1000).with_extremes(bad=MISSING_COLOR)


def voltage_colorscale(norm: LimitNorm) -> list[tuple[float, str]]:
    """The voltage colour map as a plotly colour scale over ``[norm.vmin, norm.vmax]`` (linear in
    pu, as plotly's are): the same colours as :func:`voltage_cmap` under ``norm``.

    :param norm: the scale (:func:`voltage_norm`).
    """
    assert norm.vmin is not None and norm.vmax is not None
    lo, hi = norm.vmin, norm.vmax
    return [(float((norm.inverse(p) - lo) / (hi - lo)), color) for p, color in VOLTAGE_STOPS]


def voltage_colorbar(fig: Figure, ax: Axes, mappable: ScalarMappable, norm: LimitNorm, limits: bool = True) -> Colorbar:
    """The voltage colour bar of ``mappable`` (drawn with ``norm``), ticked at its ends, the limits
    and the band's centre, the limits drawn across it in :data:`LIMIT_STYLE`'s colour when they
    are limits (not the data's range).

    :param fig: the figure.
    :param ax: the axes the bar sits beside.
    :param mappable: what the bar is of (a scatter, a mesh).
    :param norm: its colour scale (:func:`voltage_norm`).
    :param limits: True when ``norm``'s band ends are the scenario's limits.
    """
    bar = fig.colorbar(mappable, ax=ax, label="voltage (pu)", shrink=0.8)
    volts, _ = norm.knots()
    ticks = [*volts[:2], (volts[1] + volts[2]) / 2, *volts[2:]]
    bar.set_ticks(ticks, labels=[f"{t:.3f}" for t in ticks])
    if limits:
        for limit in volts[1:3]:
            bar.ax.axhline(limit, color=LIMIT_STYLE["color"], ls=LIMIT_STYLE["ls"], lw=1.5)
    return bar


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
