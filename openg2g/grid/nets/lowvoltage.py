"""How a balanced net's specified injections follow their bus voltage outside a band (OpenDSS load model 1).

A balanced net's loads, static generators and datacenter sites are constant-power injections:
pandapower's model, and the right one while voltages stay near nominal. At a faulted bus or under a
deep source sag the voltage falls towards 0, where a constant power would need an unbounded
current, and the power flow has no solution. OpenDSS's load model 1 leaves its constant power
outside a band (:class:`~openg2g.grid.feeder.ports.LoadKernel`), and so does a datacenter site with
``load_model: opendss`` on a feeder: the scheduled power ``S0`` inside ``[vminpu, vmaxpu]``, and
below ``vminpu`` a current whose magnitude falls linearly from the one drawing ``S0`` at ``vminpu``
to the nominal admittance's at ``vlowpu``, the nominal admittance (``S0`` at 1 pu) below
``vlowpu``; above ``vmaxpu`` the admittance drawing ``S0`` at ``vmaxpu``.
On a balanced bus of voltage magnitude ``v`` (pu) that is the power ``S0 g(v)`` with a real gain
(:meth:`Band.gain`):

- ``g = 1`` for ``vminpu <= v <= vmaxpu``;
- ``g = v (vlowpu + k (v - vlowpu))``, ``k = (1/vminpu - vlowpu) / (vminpu - vlowpu)``, for
  ``vlowpu < v < vminpu`` (so ``g(vminpu) = 1``, ``g(vlowpu) = vlowpu^2``);
- ``g = v^2`` for ``v <= vlowpu``;
- ``g = (v / vmaxpu)^2`` for ``v > vmaxpu``.

With ``vlowpu = 0`` the middle piece is ``(v / vminpu)^2``: a constant impedance below ``vminpu``,
the one drawing ``S0`` there (:data:`DISTURBANCE_BAND`). :class:`VoltageDependence` holds the
injections that follow such a band, per bus and operating point, and gives the power flow the
correction to its constant-power mismatch and its derivative. Where every voltage is inside its
band the correction is absent (None), not zero: the constant-power equations are solved exactly
as without it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from openg2g.grid.feeder.ports import OPENDSS_VLOWPU

__all__ = ["DISTURBANCE_BAND", "DISTURBANCE_VMINPU", "Band", "VoltageDependence", "site_band"]

DISTURBANCE_VMINPU = 0.7
"""Voltage (pu) below which, while a fault or a source sag is in force on a balanced net, every
constant-power injection (the net's loads, static generators, storage and wards' constant part, the
sites with ``load_model: constant_power``) is the constant admittance drawing its power at this
voltage. 0.7 pu is where transmission power-flow programs conventionally turn constant-power loads
into voltage-dependent ones (PSS/E's ``PQBRAK``); no bundled scenario runs a bus that low."""


@dataclass(frozen=True)
class Band:
    """The constant-power band of an OpenDSS model-1 injection (see the module docstring).

    :param vminpu: below this the injection turns voltage-dependent (pu).
    :param vmaxpu: above this it is a constant admittance (pu); ``inf`` for none.
    :param vlowpu: below this it is its nominal admittance (pu); 0 makes everything below
        ``vminpu`` the admittance drawing the scheduled power at ``vminpu``.
    """

    vminpu: float
    vmaxpu: float
    vlowpu: float

    def __post_init__(self) -> None:
        if not (0.0 <= self.vlowpu < self.vminpu <= 1.0 <= self.vmaxpu):
            raise ValueError(
                f"Band: need 0 <= vlowpu < vminpu <= 1 <= vmaxpu, got {self.vlowpu}, {self.vminpu}, {self.vmaxpu}"
            )

    def outside(self, vm: np.ndarray) -> np.ndarray:
        """Where the voltage magnitudes ``vm`` (pu) leave the band (boolean, shape of ``vm``)."""
        return (vm < self.vminpu) | (vm > self.vmaxpu)

    def gain(self, vm: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The power drawn per unit of the scheduled power at voltage magnitudes ``vm`` (pu), and
        its derivative w.r.t. ``vm`` (per pu): ``g`` and ``dg/dv`` of the module docstring."""
        vm = np.asarray(vm, dtype=float)
        k = (1.0 / self.vminpu - self.vlowpu) / (self.vminpu - self.vlowpu)
        mid = self.vlowpu + k * (vm - self.vlowpu)
        g = np.select(
            [vm <= self.vlowpu, vm < self.vminpu, vm <= self.vmaxpu], [vm * vm, vm * mid, 1.0], (vm / self.vmaxpu) ** 2
        )
        dg = np.select(
            [vm <= self.vlowpu, vm < self.vminpu, vm <= self.vmaxpu],
            [2.0 * vm, mid + k * vm, 0.0],
            2.0 * vm / self.vmaxpu**2,
        )
        return g, dg


DISTURBANCE_BAND = Band(DISTURBANCE_VMINPU, math.inf, 0.0)
"""The band of every constant-power injection while a disturbance is in force: constant power
down to :data:`DISTURBANCE_VMINPU`, a constant impedance below, none above."""


def site_band(vminpu: float, vmaxpu: float) -> Band:
    """The band of a datacenter site with ``load_model: opendss`` and this ``vminpu``/``vmaxpu``
    (pu): as on a feeder, with OpenDSS's ``vlowpu``."""
    return Band(vminpu, vmaxpu, OPENDSS_VLOWPU)


class VoltageDependence:
    """Specified bus injections that follow their bus voltage, each part with its band.

    :param parts: ``(s, band)`` pairs: ``s`` the part's scheduled injections (pu, negative =
        drawn), ``(n_bus, K)`` for ``K`` operating points (or ``(n_bus,)`` for one), the part of
        the specified injections that follows ``band``. Every part has the same shape.
    """

    def __init__(self, parts: Sequence[tuple[np.ndarray, Band]]) -> None:
        self.parts = tuple(parts)

    def columns(self, cols: np.ndarray | slice) -> VoltageDependence:
        """The operating points ``cols`` only."""
        return VoltageDependence([(s[:, cols], band) for s, band in self.parts])

    def column(self, j: int) -> VoltageDependence:
        """Operating point ``j`` only, one-dimensional."""
        return VoltageDependence([(s[:, j], band) for s, band in self.parts])

    def scaled(self, factor: float) -> VoltageDependence:
        """Every part times ``factor``."""
        return VoltageDependence([(s * factor, band) for s, band in self.parts])

    def plus(self, other: VoltageDependence) -> VoltageDependence:
        """The parts of both (the injections of both at once)."""
        return VoltageDependence([*self.parts, *other.parts])

    def correction(self, vm: np.ndarray) -> np.ndarray | None:
        """What the injections drawn at voltage magnitudes ``vm`` (pu, shape of a part) differ by
        from the scheduled ones (pu): ``sum of s (g(vm) - 1)``; None where no injection leaves its band."""
        out: np.ndarray | None = None
        for s, band in self.parts:
            away = band.outside(vm) & (s != 0)
            if not away.any():
                continue
            g, _ = band.gain(vm[away])
            term = np.zeros_like(s)
            term[away] = s[away] * (g - 1.0)
            out = term if out is None else out + term
        return out

    def slope(self, vm: np.ndarray) -> np.ndarray | None:
        """``sum of s dg/dv`` (pu per pu) at voltage magnitudes ``vm`` (pu, shape of a part): the
        derivative of the injections w.r.t. their bus voltage magnitude; None where every
        injection is inside its band (and so constant)."""
        out: np.ndarray | None = None
        for s, band in self.parts:
            away = band.outside(vm) & (s != 0)
            if not away.any():
                continue
            _, dg = band.gain(vm[away])
            term = np.zeros_like(s)
            term[away] = s[away] * dg
            out = term if out is None else out + term
        return out
