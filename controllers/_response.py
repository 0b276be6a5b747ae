"""How fast a model's power follows a cut of its batch size, learned from the decay a controller sees.

A larger batch fills within a few decode iterations; a smaller one waits for the running requests
to finish, so after a cut the replica power ``p`` approaches the new batch's mean ``P`` as
``p(t) - P = (p(t_cmd) - P) exp(-(t - t_cmd) / tau)`` with ``tau`` the requests' residual decode
time: residual tokens times the ITL of the batch in force when the cut came. :class:`DrainTime`
holds that token count per model (its prior, then a running geometric mean of what the observed
decays imply: ``T`` after the cut, ``tau = T / ln(x_0 / x)`` with ``x = p - P`` and ``x_0`` its
value at the cut), and turns it into ``tau`` for the batch in force. The ratio holds whatever
mixture of older batches the power still carries, as long as no command came since the cut:
every earlier weight decays with the same ``tau``. It is read from the cut, not from one control
step to the next: a step's ratio of a slow drain lies within the power noise of 1.
"""

from __future__ import annotations

import math

__all__ = ["DrainTime"]

_MIN_DEVIATION = 0.05
"""A cut counts only if it moved the power this fraction of ``P`` or more (smaller, the replicas'
power noise swamps the ratio)."""

_RATIO_RANGE = (0.1, 0.7)
"""Ratios ``x / x_0`` read: above, the decay has hardly begun (the noise decides); below, it has
nearly ended (the same)."""


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

    def observe(self, elapsed_s: float, dev_cut_w: float, dev_w: float, mean_w: float, itl_s: float) -> bool:
        """Fold in how far a cut's decay has come; return whether it counted.

        :param elapsed_s: time since the cut (s), no command since.
        :param dev_cut_w: ``p - P`` at the cut, just before it took effect (W per replica).
        :param dev_w: ``p - P`` now (W per replica).
        :param mean_w: ``P``, the new batch's mean power (W per replica).
        :param itl_s: ITL of the batch in force when the cut came (s).
        """
        if not (elapsed_s > 0 and itl_s > 0 and mean_w > 0) or abs(dev_cut_w) < _MIN_DEVIATION * mean_w:
            return False
        ratio = dev_w / dev_cut_w
        if not _RATIO_RANGE[0] < ratio < _RATIO_RANGE[1]:
            return False
        tokens = elapsed_s / -math.log(ratio) / itl_s
        self.log_tokens += self.rate * (math.log(tokens) - self.log_tokens)
        return True
