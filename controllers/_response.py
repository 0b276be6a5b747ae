"""How fast a model's power follows a cut of its batch size, learned from the decay a controller sees.

A larger batch fills within a few decode iterations; a smaller one waits for the running requests
to finish, so after a cut the replica power ``p`` approaches the new batch's mean ``P`` as
``p(t) - P = (p(t_cmd) - P) exp(-(t - t_cmd) / tau)`` with ``tau`` the requests' residual decode
time: residual tokens times the ITL of the batch in force when the cut came. :class:`DrainTime`
holds that token count per model (its prior, then a running geometric mean of what the observed
decays imply: two observations ``dt`` apart give ``tau = dt / ln(x_prev / x)``, ``x = p - P``), and
turns it into ``tau`` for the batch in force. The ratio holds whatever mixture of older batches
the power still carries, as long as no command came in between: every earlier weight decays with
the same ``tau``.
"""

from __future__ import annotations

import math

__all__ = ["DrainTime"]

_MIN_DEVIATION = 0.05
"""A pair of observations counts only while the power is this fraction of ``P`` or more away from it
(closer, the replicas' power noise swamps the ratio)."""

_RATIO_RANGE = (0.02, 0.98)
"""Ratios ``x / x_prev`` outside this range are noise or a transition that has already ended."""


class DrainTime:
    """Residual decode tokens of one model's requests, learned from the power decay after cuts.

    :param tokens: prior residual tokens per request (half the mean output length is the mean
        residual of requests caught at a random point).
    :param rate: weight of a new observation in the running mean of ``log(tokens)`` (0-1].
    :param floor_s: least time constant returned (s): the response to a larger batch.
    """

    def __init__(self, tokens: float, rate: float, floor_s: float) -> None:
        if tokens <= 0 or not 0 < rate <= 1 or floor_s <= 0:
            raise ValueError(f"need tokens > 0, 0 < rate <= 1, floor_s > 0; got {tokens}, {rate}, {floor_s}")
        self.log_tokens = math.log(tokens)
        self.rate = rate
        self.floor_s = floor_s

    @property
    def tokens(self) -> float:
        """Current estimate of the residual tokens per request."""
        return math.exp(self.log_tokens)

    def tau_s(self, itl_s: float) -> float:
        """Time constant (s) of the power after a cut from a batch whose ITL is ``itl_s`` (s)."""
        return max(self.floor_s, self.tokens * itl_s)

    def observe(self, dt_s: float, dev_prev_w: float, dev_w: float, mean_w: float, itl_s: float) -> bool:
        """Fold in one interval of a cut's decay; return whether it counted.

        :param dt_s: time between the two observations (s), no command in between.
        :param dev_prev_w: ``p - P`` at the first (W per replica; at the cut: just before it).
        :param dev_w: ``p - P`` at the second (W per replica).
        :param mean_w: ``P``, the new batch's mean power (W per replica).
        :param itl_s: ITL of the batch in force when the cut came (s).
        """
        if not (dt_s > 0 and itl_s > 0 and mean_w > 0) or abs(dev_prev_w) < _MIN_DEVIATION * mean_w:
            return False
        ratio = dev_w / dev_prev_w
        if not _RATIO_RANGE[0] < ratio < _RATIO_RANGE[1]:
            return False
        tokens = dt_s / -math.log(ratio) / itl_s
        self.log_tokens += self.rate * (math.log(tokens) - self.log_tokens)
        return True
