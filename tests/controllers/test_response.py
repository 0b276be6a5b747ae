"""The drain time learned from a cut's observed power decay."""

from __future__ import annotations

import math

import pytest

from openg2g.controllers._response import DrainTime


def test_an_exact_decay_gives_its_tokens_and_the_mean_is_geometric():
    drain = DrainTime(tokens=100.0, rate=0.5, floor_s=1.0)
    itl_s, tau_s = 0.04, 12.0  # 300 tokens at 40 ms
    assert drain.observe(6.0, 500.0, 500.0 * math.exp(-6.0 / tau_s), mean_w=2000.0, itl_s=itl_s)
    assert drain.tokens == pytest.approx(math.sqrt(100.0 * 300.0))
    assert drain.tau_s(itl_s) == pytest.approx(drain.tokens * itl_s)
    assert drain.tau_s(1e-4) == 1.0  # never faster than a fill


@pytest.mark.parametrize(
    ("dev_prev_w", "dev_w"),
    [(50.0, 20.0), (500.0, 400.0), (500.0, 40.0), (500.0, -100.0), (-500.0, 200.0)],
    ids=["within-noise", "hardly-begun", "nearly-ended", "overshoot", "sign-flip"],
)
def test_intervals_that_tell_nothing_are_ignored(dev_prev_w, dev_w):
    drain = DrainTime(tokens=100.0, rate=1.0, floor_s=1.0)
    assert not drain.observe(5.0, dev_prev_w, dev_w, mean_w=2000.0, itl_s=0.04)
    assert drain.tokens == pytest.approx(100.0)


def test_bad_parameters_are_refused():
    with pytest.raises(ValueError, match="tokens > 0"):
        DrainTime(tokens=0.0, rate=0.5, floor_s=1.0)
