"""Gallop-and-bisect searches for the largest, the smallest and the range of passing sizes, on hand-checkable functions."""

from __future__ import annotations

import pytest

from openg2g.studies.search import MaxSearch, MinSearch, bisect_max, find_range


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


def test_min_search_gallops_then_bisects_down_to_the_smallest_passing_size():
    search = MinSearch(first=4, k_max=1000)
    while (k := search.propose()) is not None:
        search.record(k, k >= 11)
    # 0 first, gallop 4, 8, 16 (passes), then bisect (8, 16): 12, 10, 11
    assert search.hi == 11 and search.lo == 10
    assert [k for k, _ in search.history] == [0, 4, 8, 16, 12, 10, 11]


@pytest.mark.parametrize(
    "k_a, k_b, expected",
    [
        (9, 23, (9, 23)),  # over-voltage below 9, under-voltage above 23
        (0, 23, (0, 23)),  # the empty feeder is within limits
        (9, 9, (9, 9)),  # a single size passes
        (24, 23, None),  # the ends cross: nothing passes
        (1001, 2000, None),  # over-voltage up to the largest size considered
    ],
)
def test_range_of_a_non_monotone_pass_pattern(k_a, k_b, expected):
    search = find_range(lambda k: k <= k_b, lambda k: k >= k_a, k_max=1000, first=4)
    assert search.bounds == expected and search.empty == (expected is None)
    passing = [k for k, _ in search.lower.history if k_a <= k <= k_b]
    assert all(expected[0] <= k <= expected[1] for k in passing) if expected else not passing


def test_a_range_search_stops_at_zero_when_the_growing_test_fails_there():
    search = find_range(lambda k: False, lambda k: True, k_max=100, first=4)
    assert search.empty and search.nothing_grows_ok and search.bounds is None


def test_a_contradiction_is_refused():
    search = MinSearch(first=1, k_max=10)
    search.record(5, True)
    with pytest.raises(ValueError, match="not monotone"):
        search.record(7, False)
