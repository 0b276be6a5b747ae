"""Pictures of the env's present state for Gymnasium's render modes (``ansi`` and ``rgb_array``).

Both draw the latest :class:`~openg2g.core.state.Observation` through the env's
:class:`~openg2g.envs.spaces.SpaceLayout`:

- ``ansi`` (:func:`render_text`): a few lines of text: time and step, the lowest and highest
  monitored voltage against the band, each site's power, and per model its batch size, ITL and
  replicas;
- ``rgb_array`` (:func:`render_frame`): a ``FRAME_SHAPE`` RGB image (uint8). Left two thirds: one
  bar per monitored bus-phase, in layout order, up to its voltage (green inside the band, red
  outside; grey lines at the band limits; the axis spans the band plus half its width on each
  side). Right third: one bar per controlled model up to the rank of its batch size among its
  measured sizes (empty at the smallest, full at the largest).
"""

from __future__ import annotations

import numpy as np

from openg2g.core.state import Observation
from openg2g.envs.spaces import SpaceLayout

__all__ = ["FRAME_SHAPE", "RENDER_MODES", "render_frame", "render_text"]

RENDER_MODES = ("ansi", "rgb_array")
"""Render modes :class:`~openg2g.envs.env.G2GEnv` supports (Gymnasium's ``metadata["render_modes"]``)."""

FRAME_SHAPE = (240, 360, 3)
"""Height, width and channels of an ``rgb_array`` frame (pixels)."""

_MARGIN = 8
_WHITE = (255, 255, 255)
_GREY = (150, 150, 150)
_LIGHT = (225, 225, 225)
_GREEN = (46, 160, 67)
_RED = (214, 39, 40)
_BLUE = (31, 119, 180)


def render_text(layout: SpaceLayout, observation: Observation, step: int, steps: int) -> str:
    """The ``ansi`` rendering: the state at ``observation.t_s`` as text (lines end with ``\\n``).

    :param step: env steps taken in the episode.
    :param steps: steps in the episode.
    """
    v = np.asarray(observation.grid.v_pu, dtype=float)
    lo, hi = observation.v_min_pu, observation.v_max_pu
    lines = [f"t = {observation.t_s:g} s, step {step} of {steps}"]
    finite = np.isfinite(v)
    if finite.any():
        i_min = int(np.nanargmin(np.where(finite, v, np.nan)))
        i_max = int(np.nanargmax(np.where(finite, v, np.nan)))
        outside = int(np.sum(finite & ((v < lo) | (v > hi))))
        lines.append(
            f"voltage {v[i_min]:.4f} pu ({layout.bus_phases[i_min]}) to {v[i_max]:.4f} pu "
            f"({layout.bus_phases[i_max]}), band [{lo:g}, {hi:g}] pu, {outside} of {len(v)} bus-phases outside"
        )
    for site in layout.sites:
        state = observation.datacenters.get(site)
        if state is not None:
            lines.append(
                f"site {site}: {float(np.sum(state.p_w)) / 1e3:.1f} kW (training {state.training_power_w / 1e3:.1f} kW)"
            )
    for slot in layout.slots:
        state = observation.datacenters.get(slot.site)
        m = state.models.get(slot.model) if state is not None else None
        if m is not None:
            deadline = f" (deadline {m.itl_deadline_s * 1e3:.1f} ms)" if m.itl_deadline_s else ""
            lines.append(
                f"{slot.key}: batch {m.batch_size}, ITL {m.itl_s * 1e3:.1f} ms{deadline}, {m.replicas:g} replicas"
            )
    return "\n".join(lines) + "\n"


def _bars(frame: np.ndarray, x0: int, x1: int, heights: np.ndarray, colours: list[tuple[int, int, int]]) -> None:
    """Draw bars of ``heights`` (fractions of the plot height, clipped to [0, 1]) side by side in ``[x0, x1)``."""
    top, bottom = _MARGIN, frame.shape[0] - _MARGIN
    edges = np.linspace(x0, x1, len(heights) + 1).astype(int)
    for k, (h, colour) in enumerate(zip(np.clip(heights, 0.0, 1.0), colours)):
        left, right = edges[k], max(edges[k + 1] - 1, edges[k] + 1)  # one-pixel gap where there is room
        frame[bottom - round(h * (bottom - top)) : bottom, left:right] = colour


def render_frame(layout: SpaceLayout, observation: Observation) -> np.ndarray:
    """The ``rgb_array`` rendering: a ``FRAME_SHAPE`` uint8 image (see module doc)."""
    frame = np.full(FRAME_SHAPE, _WHITE, dtype=np.uint8)
    height, width = FRAME_SHAPE[:2]
    split = 2 * width // 3
    top, bottom = _MARGIN, height - _MARGIN

    # voltages: a column per bus-phase; when there are more bus-phases than pixels, each column
    # shows the one farthest from the band centre so that no violation is hidden
    lo, hi = observation.v_min_pu, observation.v_max_pu
    half = 0.5 * (hi - lo)
    axis_lo, axis_hi = lo - half, hi + half
    v = np.nan_to_num(np.asarray(observation.grid.v_pu, dtype=float), nan=axis_lo)
    groups = np.array_split(np.arange(len(v)), min(len(v), split - 2 * _MARGIN))
    shown = np.array([v[g][np.argmax(np.abs(v[g] - 0.5 * (lo + hi)))] for g in groups])
    colours = [_GREEN if lo <= x <= hi else _RED for x in shown]
    _bars(frame, _MARGIN, split - _MARGIN, (shown - axis_lo) / (axis_hi - axis_lo), colours)
    for limit in (lo, hi):
        y = bottom - round((limit - axis_lo) / (axis_hi - axis_lo) * (bottom - top))
        frame[y, _MARGIN : split - _MARGIN] = _GREY

    # batch sizes: the full range in light grey, the present size in blue
    n = len(layout.controlled)
    index = layout.batch.current_index(observation)
    position = np.array([i / (len(s.batch_sizes) - 1) for i, s in zip(index, layout.controlled)])
    _bars(frame, split + _MARGIN, width - _MARGIN, np.ones(n), [_LIGHT] * n)
    _bars(frame, split + _MARGIN, width - _MARGIN, position, [_BLUE] * n)
    return frame
