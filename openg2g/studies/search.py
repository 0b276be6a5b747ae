"""Integer size searches over monotone tests: gallop up from a first guess, then bisect.

:class:`MaxSearch` finds the largest size passing a test that holds up to some size and fails
beyond it (``ok(0)`` is taken as True without being evaluated); :class:`MinSearch` mirrors it for a
test that fails below some size and holds from it (``ok(0)`` is evaluated first).
:class:`RangeSearch` runs both on the same evaluations to find the sizes passing two such tests
at once, ``[MinSearch answer, MaxSearch answer]`` (empty when they cross). All are step-wise (``propose`` / ``record``) so many searches can advance in lockstep, each
round being one batch of runs.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["MaxSearch", "MinSearch", "RangeSearch", "bisect_max", "find_range"]


@dataclass
class _SizeSearch(ABC):
    """What both searches share: sizes in ``[0, k_max]``, the first one tried, the answer known
    once nothing is left to propose."""

    first: int
    k_max: int

    def __post_init__(self) -> None:
        if self.k_max < 1:
            raise ValueError(f"k_max must be >= 1, got {self.k_max}")

    @property
    def done(self) -> bool:
        """True once the answer is known."""
        return self.propose() is None

    @abstractmethod
    def propose(self) -> int | None:
        """The next size to evaluate, or None when done."""


@dataclass
class MaxSearch(_SizeSearch):
    """Search for the largest ``k`` in ``[0, k_max]`` with ``ok(k)``.

    :param first: the first size tried (clipped to ``[1, k_max]``).
    :param k_max: the largest size considered; may be lowered after the first result.
    :param lo: largest size known to pass (0 = none tried passed).
    :param hi: smallest size known to fail (None = none failed yet).
    :param history: ``(k, ok)`` of every evaluation, in order.
    """

    lo: int = 0
    hi: int | None = None
    history: list[tuple[int, bool]] = field(default_factory=list)

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


@dataclass
class MinSearch(_SizeSearch):
    """Search for the smallest ``k`` in ``[0, k_max]`` with ``ok(k)``, for ``ok`` False below
    some size and True from it: try 0, then gallop up from ``first`` and bisect.

    :param first: the first size tried after 0 (clipped to ``[1, k_max]``).
    :param k_max: the largest size considered; may be lowered after the first result.
    :param lo: largest size known to fail (None = none failed yet).
    :param hi: smallest size known to pass (None = none passed yet).
    :param history: ``(k, ok)`` of every evaluation, in order.
    """

    lo: int | None = None
    hi: int | None = None
    history: list[tuple[int, bool]] = field(default_factory=list)

    @property
    def exhausted(self) -> bool:
        """True if even ``k_max`` failed (no size up to it passes)."""
        return self.lo is not None and self.lo >= self.k_max

    def propose(self) -> int | None:
        """The next size to evaluate, or None when done."""
        if self.hi is None:
            if self.lo is None:
                return 0
            if self.lo >= self.k_max:
                return None
            return max(1, min(max(2 * self.lo, self.first), self.k_max))
        below = -1 if self.lo is None else self.lo  # 0 not tried yet: it may pass
        return None if self.hi - below <= 1 else (below + self.hi) // 2

    def record(self, k: int, ok: bool) -> None:
        """Enter the result of evaluating size ``k``."""
        self.history.append((k, ok))
        if ok:
            self.hi = k if self.hi is None else min(self.hi, k)
        else:
            self.lo = k if self.lo is None else max(self.lo, k)
        if self.hi is not None and self.lo is not None and self.hi <= self.lo:
            raise ValueError(f"ok is not monotone: failed at {self.lo} but passed at {self.hi}")


@dataclass
class RangeSearch:
    """The sizes in ``[0, k_max]`` passing two monotone tests evaluated on the same runs:
    ``grows_ok`` (True up to some size, e.g. no under-voltage) and ``shrinks_ok`` (True from some
    size, e.g. no over-voltage). The range is ``[lower.hi, upper.lo]``, empty when they cross.

    :param upper: the search on ``grows_ok``.
    :param lower: the search on ``shrinks_ok``.
    :param nothing_grows_ok: True once ``grows_ok(0)`` failed (no size passes).
    """

    upper: MaxSearch
    lower: MinSearch
    nothing_grows_ok: bool = False

    @classmethod
    def new(cls, first: int, k_max: int) -> RangeSearch:
        """A search that tries ``first`` after 0, up to ``k_max``."""
        return cls(MaxSearch(first=first, k_max=k_max), MinSearch(first=first, k_max=k_max))

    @property
    def empty(self) -> bool:
        """True when no size passes both tests (as far as evaluated)."""
        if self.nothing_grows_ok or self.lower.exhausted:
            return True
        lo, hi = self.lower.lo, self.upper.hi
        # every size <= lo fails shrinks_ok and every size >= hi fails grows_ok
        return lo is not None and hi is not None and lo + 1 >= hi

    @property
    def bounds(self) -> tuple[int, int] | None:
        """``(smallest, largest)`` size passing both (known once done), None when empty."""
        if self.empty or self.lower.hi is None:
            return None
        return self.lower.hi, self.upper.lo

    def set_k_max(self, k_max: int) -> None:
        """Lower the largest size considered (never below a size already known to pass)."""
        self.upper.k_max = self.lower.k_max = max(1, k_max, self.upper.lo)

    def propose(self) -> list[int]:
        """The sizes to evaluate next (ascending, distinct), empty when done.

        Both ends are searched to the end even when the range is empty, so that each is known
        (how far apart the limits are); only a failed ``grows_ok(0)`` leaves no upper end to find.
        """
        upper = None if self.nothing_grows_ok else self.upper.propose()
        return sorted({k for k in (upper, self.lower.propose()) if k is not None})

    def record(self, k: int, grows_ok: bool, shrinks_ok: bool) -> None:
        """Enter both tests' results at size ``k``.

        :raises ValueError: a result contradicts monotonicity.
        """
        self.lower.record(k, shrinks_ok)
        if k == 0:
            self.nothing_grows_ok = not grows_ok
        else:
            self.upper.record(k, grows_ok)


def bisect_max(ok: Callable[[int], bool], k_max: int, first: int = 1) -> MaxSearch:
    """Run a :class:`MaxSearch` to the end with ``ok`` evaluated one size at a time.

    :return: the finished search; the answer is ``.lo`` (``.capped`` if it is ``k_max``).
    """
    search = MaxSearch(first=first, k_max=k_max)
    while (k := search.propose()) is not None:
        search.record(k, ok(k))
    return search


def find_range(
    grows_ok: Callable[[int], bool], shrinks_ok: Callable[[int], bool], k_max: int, first: int = 1
) -> RangeSearch:
    """Run a :class:`RangeSearch` to the end, evaluating both tests at each proposed size.

    :return: the finished search; the answer is ``.bounds`` (None: no size passes both).
    """
    search = RangeSearch.new(first, k_max)
    while batch := search.propose():
        for k in batch:
            search.record(k, grows_ok(k), shrinks_ok(k))
    return search
