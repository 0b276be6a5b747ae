"""Rule-based batch control: one measured batch size down on a voltage problem, one up on margin.

At each control step, with ``v`` the voltages of the zone (``buses``, default all monitored):

* **Undervoltage** (``min v < v_min + trigger_margin_pu``): every model at the controlled sites
  steps *down* one measured batch size (less power, voltage rises).
* **Overvoltage** (``max v > v_max - trigger_margin_pu``): every model steps *up* one size (more
  load pulls the voltage down), subject to the latency guard.
* **Margin** (``min v > v_min + release_margin_pu`` and ``max v < v_max - release_margin_pu``):
  models below their initial batch size step back *up* one size, subject to the latency guard.

Latency guard: a model never steps up when its observed ITL exceeds ``latency_guard`` x deadline,
nor onto a batch size whose measured ITL exceeds ``latency_guard`` x deadline; a model whose
observed ITL exceeds its deadline steps down one size whatever the voltage. After any change a
model holds for ``hold_s`` seconds (hysteresis against chattering).
"""

from __future__ import annotations

from pydantic import Field, model_validator

from openg2g.core.commands import Actuator, Command, SetBatchSize
from openg2g.core.interfaces import ControlContext, ModelInfo
from openg2g.core.state import ModelState, Observation

from ._base import ConfiguredController, ControllerConfig
from ._budget import ChangeBudget
from ._sites import model_actuators, site_models
from .curves import step_batch

__all__ = ["RuleBasedController"]


class RuleBasedController(ConfiguredController):
    """Steps batch sizes along the measured grid from voltage and latency rules."""

    name = "rule_based"

    class Config(ControllerConfig):
        """Parameters of :class:`RuleBasedController`."""

        sites: list[str] | None = Field(None, description="Sites to act on; None = all.")
        buses: list[str] | None = Field(None, description="Zone buses whose voltages count; None = all monitored.")
        trigger_margin_pu: float = Field(
            0.0, ge=0, description="Act when the voltage is within this distance of a limit, or beyond (pu)."
        )
        release_margin_pu: float = Field(
            0.01, ge=0, description="Step back up only when every voltage is this far inside the limits (pu)."
        )
        latency_guard: float = Field(
            1.0, gt=0, description="Fraction of the ITL deadline that stepping up must respect (1 = the deadline)."
        )
        hold_s: float = Field(5.0, ge=0, description="Minimum time between two changes of one model (s).")
        max_changes_per_min: int | None = Field(
            10, gt=0, description="At most this many changes of one model in any 60 s; None: no budget."
        )
        restore_to_initial: bool = Field(
            True, description="On margin, step up only as far as the initial batch size (else up to the largest)."
        )

        @model_validator(mode="after")
        def _margins(self) -> RuleBasedController.Config:
            if self.release_margin_pu < self.trigger_margin_pu:
                raise ValueError(
                    f"release_margin_pu ({self.release_margin_pu}) must be >= trigger_margin_pu "
                    f"({self.trigger_margin_pu}) for hysteresis"
                )
            return self

    config: Config

    def reset(self, context: ControlContext, seed: int) -> None:
        super().reset(context, seed)
        self._last_change_s: dict[tuple[str, str], float] = {}
        self._budget = ChangeBudget(self.config.max_changes_per_min)
        self._batch: dict[tuple[str, str], int] = {
            (s, m): info.initial_batch_size for s in self._sites for m, info in context.sites[s].models.items()
        }

    def actuators(self) -> tuple[Actuator, ...]:
        return model_actuators("batch_size", site_models(self.context, self._sites))

    def _up_allowed(self, info: ModelInfo, state: ModelState | None, target: int) -> bool:
        if info.itl_deadline_s is None:
            return True
        limit = self.config.latency_guard * info.itl_deadline_s
        if state is not None and state.replicas > 0 and state.itl_s > limit:
            return False
        return info.itl_s[info.batch_sizes.index(target)] <= limit

    def step(self, observation: Observation) -> list[Command]:
        cfg = self.config
        v = observation.grid.v_pu[self._zone]
        if v.size == 0:
            return []
        v_lo, v_hi = float(v.min()), float(v.max())
        under = v_lo < observation.v_min_pu + cfg.trigger_margin_pu
        over = v_hi > observation.v_max_pu - cfg.trigger_margin_pu
        margin = (
            v_lo > observation.v_min_pu + cfg.release_margin_pu and v_hi < observation.v_max_pu - cfg.release_margin_pu
        )
        out: list[Command] = []
        for site in self._sites:
            dc = observation.datacenters.get(site)
            for model, info in self.context.sites[site].models.items():
                key = (site, model)
                if observation.t_s - self._last_change_s.get(key, -float("inf")) < cfg.hold_s - 1e-9:
                    continue
                if not self._budget.allows(key, observation.t_s):
                    continue
                state = dc.models.get(model) if dc is not None else None
                current = state.batch_size if state is not None else self._batch[key]
                late = (
                    state is not None
                    and info.itl_deadline_s is not None
                    and state.replicas > 0
                    and state.itl_s > info.itl_deadline_s
                )
                target = current
                if under or late:
                    target = step_batch(current, info.batch_sizes, -1)
                elif over:
                    up = step_batch(current, info.batch_sizes, +1)
                    target = up if self._up_allowed(info, state, up) else current
                elif margin:
                    ceiling = info.initial_batch_size if cfg.restore_to_initial else max(info.batch_sizes)
                    up = step_batch(current, info.batch_sizes, +1)
                    if up <= ceiling and self._up_allowed(info, state, up):
                        target = up
                if target != current:
                    out.append(SetBatchSize(site=site, model=model, batch_size=target))
                    self._batch[key] = target
                    self._last_change_s[key] = observation.t_s
                    self._budget.spend(key, observation.t_s)
        return out
