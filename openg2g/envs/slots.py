"""One (site, model) pair of the RL spaces: :class:`ModelSlot`, what the observation layout
(:mod:`openg2g.envs.spaces`) and the batch-size actions (:mod:`openg2g.envs.actions`) both read."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ModelSlot"]


@dataclass(frozen=True)
class ModelSlot:
    """One (site, model) pair of the layout and the constants that normalize its features.

    :ivar batch_sizes: the model's measured batch sizes, ascending.
    :ivar replicas_ref: the replicas its features are fractions of (the configured, at least 1).
    :ivar power_ref_w: its nominal power (W): its largest measured power times ``replicas_ref``,
        at least 1 W.
    :ivar itl_ref_s: the ITL its features are fractions of (s): its deadline, else the ITL at its
        largest batch, else 1 s.
    """

    site: str
    model: str
    batch_sizes: tuple[int, ...]
    replicas_ref: float
    power_ref_w: float
    itl_ref_s: float

    @property
    def controllable(self) -> bool:
        """True when the model has at least two measured batch sizes."""
        return len(self.batch_sizes) >= 2

    @property
    def key(self) -> str:
        """``"<site>/<model>"``."""
        return f"{self.site}/{self.model}"
