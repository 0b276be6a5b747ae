"""Exact simulation time: integer ticks of one base period, so long runs never drift.

simpy's clock counts ticks (integers). The tick is the greatest common divisor of every period,
delay and event time in the scenario, all exact rationals; ``t_s = ticks * tick_s`` is computed
from integers each time, never accumulated.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from fractions import Fraction

import numpy as np

__all__ = ["Clock", "fraction_gcd"]

_EXACT_INT = 2**53  # integers below this are exact in a float64


def fraction_gcd(values: Iterable[Fraction]) -> Fraction:
    """Largest rational ``g`` such that every value is a whole multiple of ``g`` (zeros ignored)."""
    nonzero = [Fraction(v) for v in values if v != 0]
    if not nonzero:
        raise ValueError("need at least one non-zero time")
    denominator = math.lcm(*(v.denominator for v in nonzero))
    numerator = math.gcd(*(v.numerator * (denominator // v.denominator) for v in nonzero))
    return Fraction(numerator, denominator)


class Clock:
    """Conversion between seconds and integer ticks of ``tick_s``."""

    def __init__(self, times_s: Iterable[Fraction]):
        self.tick_s: Fraction = fraction_gcd(times_s)
        # the tick's integers, read at every conversion (Fraction's properties cost a call each)
        self._numerator = self.tick_s.numerator
        self._denominator = self.tick_s.denominator

    def ticks(self, t_s: Fraction) -> int:
        """Whole number of ticks in ``t_s``; raises if ``t_s`` is not on the tick grid."""
        exact = t_s if type(t_s) is Fraction else Fraction(t_s)
        # t_s / tick_s in integers, without building the Fraction quotient
        n, rest = divmod(exact.numerator * self._denominator, exact.denominator * self._numerator)
        if rest:
            raise ValueError(f"{t_s} s is not a whole number of {self.tick_s} s ticks")
        return n

    def seconds(self, ticks: int) -> float:
        """Time in seconds of a tick count, rounded once from the exact rational."""
        # int / int is correctly rounded in Python: the same float as float(ticks * tick_s)
        return ticks * self._numerator / self._denominator

    def seconds_of(self, ticks: np.ndarray) -> np.ndarray:
        """:meth:`seconds` of many tick counts at once (the same floats, bit for bit)."""
        products = np.asarray(ticks, dtype=np.int64) * self._numerator
        if products.size and int(np.abs(products).max()) >= _EXACT_INT:  # not exact as a float64
            return np.array([self.seconds(int(k)) for k in np.asarray(ticks).ravel()]).reshape(products.shape)
        # both operands are exact in float64, and IEEE division rounds the quotient once
        return products.astype(np.float64) / float(self._denominator)
