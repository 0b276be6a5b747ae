"""Largest integer size that passes a monotone test: gallop up from a first guess, then bisect.

The test ``ok(k)`` must be monotone: True up to some size and False beyond it; ``ok(0)`` is
taken as True without being evaluated. :class:`MaxSearch` is step-wise (``propose`` /
``record``) so many searches can advance in lockstep, each round being one batch of runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["MaxSearch", "bisect_max"]


@dataclass
class MaxSearch:
    """Search for the largest ``k`` in ``[0, k_max]`` with ``ok(k)``.

    :param first: the first size tried (clipped to ``[1, k_max]``).
    :param k_max: the largest size considered; may be lowered after the first result.
    :param lo: largest size known to pass (0 = none tried passed).
    :param hi: smallest size known to fail (None = none failed yet).
    :param history: ``(k, ok)`` of every evaluation, in order.
    """

    first: int
    k_max: int
    lo: int = 0
    hi: int | None = None
    history: list[tuple[int, bool]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.k_max < 1:
            raise ValueError(f"k_max must be >= 1, got {self.k_max}")

    @property
    def done(self) -> bool:
        """True once the answer is known."""
        return self.propose() is None

    @property
    def capped(self) -> bool:
        """True if even ``k_max`` passed (the answer is a lower bound)."""
        return self.lo >= self.k_max

    def propose(self) -> int | None:
        """The next size to evaluate, or None when done."""
        if not self.history:
            return max(1, min(self.first, self.k_max))
        if self.hi is None:
            return None if self.lo >= self.k_max else min(2 * self.lo, self.k_max)
        if self.hi - self.lo <= 1:
            return None
        return (self.lo + self.hi) // 2

    def record(self, k: int, ok: bool) -> None:
        """Enter the result of evaluating size ``k``."""
        self.history.append((k, ok))
        if ok:
            self.lo = max(self.lo, k)
        else:
            self.hi = k if self.hi is None else min(self.hi, k)
        if self.hi is not None and self.hi <= self.lo:
            raise ValueError(f"ok is not monotone: passed at {self.lo} but failed at {self.hi}")


def bisect_max(ok: Callable[[int], bool], k_max: int, first: int = 1) -> MaxSearch:
    """Run a :class:`MaxSearch` to the end with ``ok`` evaluated one size at a time.

    :return: the finished search; the answer is ``.lo`` (``.capped`` if it is ``k_max``).
    """
    search = MaxSearch(first=first, k_max=k_max)
    while (k := search.propose()) is not None:
        search.record(k, ok(k))
    return search
