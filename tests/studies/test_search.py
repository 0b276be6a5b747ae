"""Gallop-and-bisect search for the largest passing size, on hand-checkable monotone functions."""

from __future__ import annotations

import pytest

from openg2g.studies.search import MaxSearch, bisect_max


def test_finds_largest_passing_integer_and_its_evaluations():
    calls = []

    def ok(k):
        calls.append(k)
        return 0.37 * k <= 10.0  # passes up to 27 (9.99), fails from 28 (10.36)

    search = bisect_max(ok, k_max=1000, first=4)
    assert search.lo == 27 and search.hi == 28 and not search.capped
    # gallop 4, 8, 16, 32 (fails), then bisect (16, 32): 24, 28, 26, 27
    assert calls == [4, 8, 16, 32, 24, 28, 26, 27]


def test_first_guess_too_large_bisects_down():
    search = bisect_max(lambda k: k <= 3, k_max=100, first=50)
    assert search.lo == 3 and [k for k, _ in search.history] == [50, 25, 12, 6, 3, 4]


def test_nothing_passes_gives_zero():
    search = bisect_max(lambda k: False, k_max=100, first=1)
    assert search.lo == 0 and search.hi == 1 and len(search.history) == 1


def test_everything_passes_is_capped_at_k_max():
    search = bisect_max(lambda k: True, k_max=40, first=3)
    assert search.lo == 40 and search.capped
    assert [k for k, _ in search.history] == [3, 6, 12, 24, 40]


@pytest.mark.parametrize("threshold", [1, 2, 5, 17, 63, 64, 65, 99])
def test_agrees_with_exhaustive_search(threshold):
    assert bisect_max(lambda k: k <= threshold, k_max=99, first=7).lo == threshold


def test_k_max_must_be_positive():
    with pytest.raises(ValueError):
        MaxSearch(first=1, k_max=0)
