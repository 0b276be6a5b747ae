"""Write the OpenG2G reference study's synthetic PV and load profiles as ``t_s,scale`` CSV files.

Source
------
The reference study (arXiv 2605.05519; code: gpu2grid/openg2g 0.2.0, Apache-2.0) drives its PV
plants and time-varying extra loads with the closed-form classes ``SyntheticPV`` and ``SyntheticLoad``.
These are *synthetic* shapes chosen by the study's authors for demonstration: they are not irradiance
or load measurements. This script re-implements the shapes from their mathematical description (see
``PROVENANCE.md``) and samples them so our scenarios can use them through the ordinary ``profile:``
field of a PV plant or an extra load.

Shapes
------
Time ``t`` is simulation time in seconds over one hour, ``0 <= t <= 3600``. The output ``scale`` is
dimensionless: a multiplier of the element's rating ("peak" kW in the reference study, which is a
scale, not a maximum: values reach about 1.35). Two helpers:

* smooth bump, 1 at ``c``, 0 from ``|t - c| >= w`` on::

      B(t; c, w) = (1 - ((t - c) / w)^2)^2   if |t - c| < w,   else 0

* irregular fluctuation around 1 (five incommensurate periods, in seconds)::

      F(t; s) = 1 + 0.06 sin(2 pi t / 173   + s)
                  + 0.05 sin(2 pi t / 97.3  + 2.3 s)
                  + 0.04 sin(2 pi t / 251.7 + 0.7 s)
                  + 0.03 sin(2 pi t / 41.9  + 4.1 s)
                  + 0.02 sin(2 pi t / 317.3 + 1.9 s)

PV (trend or ramp, times a cloud factor floored at 0.05, times a fluctuation)::

    pv0 = (0.85 - 0.30 t / 3600)         * max(1 - 0.55 B(t;600,120)  - 0.40 B(t;2100,180), 0.05) * F(t; 0.3)
    pv1 = (0.55 + 0.40 B(t;1200,900))    * max(1 - 0.60 B(t;1680,240) - 0.25 B(t;2400,150), 0.05) * F(t; 2.1)
    pv2 = (0.30 + 0.65 min(1, t / 900))  * max(1 - 0.70 B(t;2700,300) - 0.30 B(t;1200,100), 0.05) * F(t; 9.4)

Loads, with ``G_i(t) = 1 + 0.06 sin(2 pi t / (130 + 37 i) + 1.4 i)``::

    load0 = (0.15 + 0.85 B(t;2280,1400) + 0.20 B(t;2280,180))                          * G_0
    load1 = (0.10 + 0.50 B(t;1500,600)  + 0.80 B(t;2880,500))                          * G_1
    load2 = (0.80 - 0.55 B(t;1800,1200) + 0.70 B(t;2520,400))                          * G_2
    load3 = (0.10 + 0.90 B(t;3120,800))                                                * G_3
    load4 = (0.10 + 0.60 B(t;1080,300)  + 0.75 B(t;2100,350) + 0.90 B(t;3300,300))     * G_4

Every value is clipped at ``>= 0``.

Output
------
``reference_pv{0,1,2}.csv`` and ``reference_load{0..4}.csv``, header ``t_s,scale``, one row every
0.5 s from 0 to 3600 s inclusive (7201 rows), ``t_s`` with one decimal and ``scale`` with six. The
output is deterministic (rerunning gives byte-identical files). Readers interpolate linearly and hold
the end values outside [0, 3600] s.

Usage::

    python scenarios/profiles/make_reference_profiles.py [OUT_DIR]

``OUT_DIR`` defaults to the directory of this script.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

__all__ = ["DT_S", "HORIZON_S", "PROFILES", "bump", "fluctuation", "main", "sample_times", "write_profiles"]

FloatArray = NDArray[np.float64]

HORIZON_S = 3600.0
"""Length of the reference study's hour (s); the PV0 trend is shaped over it."""

DT_S = 0.5
"""Sampling step of the written CSV files (s)."""


def bump(t: FloatArray, center_s: float, half_width_s: float) -> FloatArray:
    """Smooth bump ``(1 - x^2)^2`` with ``x = (t - center) / half_width``, 0 where ``|x| >= 1``."""
    x = (t - center_s) / half_width_s
    return np.where(np.abs(x) < 1.0, (1.0 - x * x) ** 2, 0.0)


def fluctuation(t: FloatArray, seed: float) -> FloatArray:
    """Irregular fluctuation around 1 (about +-20 %): five sines with incommensurate periods (s)."""
    terms = (  # (amplitude, period in s, phase per unit seed)
        (0.06, 173.0, 1.0),
        (0.05, 97.3, 2.3),
        (0.04, 251.7, 0.7),
        (0.03, 41.9, 4.1),
        (0.02, 317.3, 1.9),
    )
    out = np.ones_like(t)
    for amplitude, period_s, phase in terms:
        out = out + amplitude * np.sin(2.0 * np.pi * t / period_s + phase * seed)
    return out


def _load_fluctuation(t: FloatArray, i: int) -> FloatArray:
    """Single-sine fluctuation of load ``i``: period ``130 + 37 i`` s, phase ``1.4 i``, amplitude 6 %."""
    return 1.0 + 0.06 * np.sin(2.0 * np.pi * t / (130.0 + 37.0 * i) + 1.4 * i)


def _cloud(t: FloatArray, dips: Sequence[tuple[float, float, float]]) -> FloatArray:
    """Cloud factor ``1 - sum(depth * B(t; c, w))`` floored at 0.05; ``dips`` holds ``(depth, c, w)``."""
    c = np.ones_like(t)
    for depth, center_s, half_width_s in dips:
        c = c - depth * bump(t, center_s, half_width_s)
    return np.maximum(c, 0.05)


def _pv0(t: FloatArray) -> FloatArray:
    trend = 0.85 - 0.30 * (t / HORIZON_S)
    return trend * _cloud(t, [(0.55, 600.0, 120.0), (0.40, 2100.0, 180.0)]) * fluctuation(t, 0.3)


def _pv1(t: FloatArray) -> FloatArray:
    ramp = 0.55 + 0.40 * bump(t, 1200.0, 900.0)
    return ramp * _cloud(t, [(0.60, 1680.0, 240.0), (0.25, 2400.0, 150.0)]) * fluctuation(t, 2.1)


def _pv2(t: FloatArray) -> FloatArray:
    ramp = 0.30 + 0.65 * np.minimum(1.0, t / 900.0)
    return ramp * _cloud(t, [(0.70, 2700.0, 300.0), (0.30, 1200.0, 100.0)]) * fluctuation(t, 9.4)


def _load0(t: FloatArray) -> FloatArray:
    return (0.15 + 0.85 * bump(t, 2280.0, 1400.0) + 0.20 * bump(t, 2280.0, 180.0)) * _load_fluctuation(t, 0)


def _load1(t: FloatArray) -> FloatArray:
    return (0.10 + 0.50 * bump(t, 1500.0, 600.0) + 0.80 * bump(t, 2880.0, 500.0)) * _load_fluctuation(t, 1)


def _load2(t: FloatArray) -> FloatArray:
    return (0.80 - 0.55 * bump(t, 1800.0, 1200.0) + 0.70 * bump(t, 2520.0, 400.0)) * _load_fluctuation(t, 2)


def _load3(t: FloatArray) -> FloatArray:
    return (0.10 + 0.90 * bump(t, 3120.0, 800.0)) * _load_fluctuation(t, 3)


def _load4(t: FloatArray) -> FloatArray:
    base = 0.10 + 0.60 * bump(t, 1080.0, 300.0) + 0.75 * bump(t, 2100.0, 350.0) + 0.90 * bump(t, 3300.0, 300.0)
    return base * _load_fluctuation(t, 4)


PROFILES: dict[str, Callable[[FloatArray], FloatArray]] = {
    "reference_pv0": _pv0,
    "reference_pv1": _pv1,
    "reference_pv2": _pv2,
    "reference_load0": _load0,
    "reference_load1": _load1,
    "reference_load2": _load2,
    "reference_load3": _load3,
    "reference_load4": _load4,
}
"""File stem -> exact shape (scale before clipping) as a function of time in seconds."""


def sample_times() -> FloatArray:
    """The sample times (s): 0, 0.5, ..., 3600, exact in binary floating point."""
    n = round(HORIZON_S / DT_S)
    return np.arange(n + 1, dtype=np.float64) * DT_S


def write_profiles(out_dir: Path) -> list[Path]:
    """Write every profile in :data:`PROFILES` to ``out_dir/<stem>.csv``; return the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    t = sample_times()
    written: list[Path] = []
    for stem, shape in PROFILES.items():
        scale = np.maximum(shape(t), 0.0) + 0.0  # clip at 0; "+ 0.0" turns a -0.0 into 0.0
        lines = ["t_s,scale"] + [f"{ti:.1f},{si:.6f}" for ti, si in zip(t.tolist(), scale.tolist())]
        path = out_dir / f"{stem}.csv"
        path.write_bytes(("\n".join(lines) + "\n").encode("ascii"))
        written.append(path)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``make_reference_profiles.py [OUT_DIR]`` (default: this script's directory)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help") for a in args):
        print(__doc__)
        return 0
    if len(args) > 1:
        print("usage: make_reference_profiles.py [OUT_DIR]", file=sys.stderr)
        return 2
    out_dir = Path(args[0]) if args else Path(__file__).resolve().parent
    for path in write_profiles(out_dir):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
