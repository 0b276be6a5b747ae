"""Configuration of the Gymnasium environment: observation, action, reward, episodes.

Everything is a frozen pydantic model with unknown keys rejected, so a typo in
``G2GEnv.from_scenario(..., rewrad={...})`` or in a saved policy's JSON is an error, not ignored.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from openg2g.core.config import ConfigModel
from openg2g.envs.actions import ActionSpec, default_actions
from openg2g.envs.terms import RewardTermSpec, TermSpec
from openg2g.envs.variations import VariationSpec

__all__ = ["EnvConfig", "ObsConfig", "RewardWeights"]


class ObsConfig(ConfigModel):
    """What the observation vector holds (see :class:`openg2g.envs.spaces.SpaceLayout`).

    Voltages are normalized to the scenario's band: ``(v - mid) / half`` with ``mid``, ``half`` the
    centre and half-width of ``[v_min_pu, v_max_pu]``, so the limits sit at -1 and +1.
    """

    voltages: Literal["bus_phases", "zones"] = Field(
        "zones", description="bus_phases: one feature per monitored bus-phase; zones: min/max/mean per zone."
    )
    zones: dict[str, list[str]] | None = Field(
        None, description="Zone name -> buses (zones mode); None = one zone holding every monitored bus."
    )
    branch_loading: bool = Field(
        False,
        description="One feature: the most loaded line or transformer's current as a fraction of its rating "
        "(0 when the grid reports no branches).",
    )
    site_power: bool = Field(True, description="Per site: facility power and training power, as fractions of nominal.")
    clip: float = Field(10.0, gt=0, description="Every feature is clipped to [-clip, clip] (the Box bounds).")


class RewardWeights(ConfigModel):
    """Weights of the reward terms; each step's reward is

    ``- voltage * V - overload * O + throughput * T - latency * L - switching * S - failure * F`` with

    - ``V``: voltage violation (pu) summed over monitored bus-phases, averaged over the step;
    - ``O``: overload, the loading above 100 % of the grid's lines and transformers as a fraction
      of their ratings, summed over branches and averaged over the step (0 for a grid that
      reports no branches);
    - ``T``: served tokens over the step as a fraction of the scenario's maximum (every model at
      its largest batch with its configured replicas), in [0, 1];
    - ``L``: fraction of the step's tokens whose inter-token latency missed the deadline, in [0, 1];
    - ``S``: commands sent by the agent this step, divided by the settings its action families
      command (the controlled models with the default batch-size action);
    - ``F``: 1 on the step where the simulation failed (power flow did not converge), else 0.
    """

    voltage: float = Field(100.0, ge=0, description="Per pu of summed violation.")
    overload: float = Field(0.0, ge=0, description="Per unit of summed overload fraction.")
    throughput: float = Field(1.0, ge=0, description="Per unit of throughput fraction.")
    latency: float = Field(1.0, ge=0, description="Per unit of deadline-miss fraction.")
    switching: float = Field(0.05, ge=0, description="Per command per commanded setting (e.g. controlled model).")
    failure: float = Field(10.0, ge=0, description="Once, when the simulation fails.")


class EnvConfig(ConfigModel):
    """Everything that shapes a :class:`~openg2g.envs.env.G2GEnv` besides the scenario itself."""

    observation: ObsConfig = Field(default_factory=lambda: ObsConfig.model_validate({}))
    action: Literal["discrete", "box"] = Field(
        "discrete",
        description="discrete: per controlled model {down, stay, up} one measured batch size "
        "(MultiDiscrete); box: per model a log2 batch target in [-1, 1] projected to the nearest measured size. "
        "The same for every family of actions: per entry down/stay/up one step, or a target in [-1, 1].",
    )
    actions: list[ActionSpec] = Field(
        default_factory=default_actions,
        min_length=1,
        description="Action families, their entries concatenated in this order (openg2g.envs.actions): batch, "
        "power_cap, replicas, taps, storage, each at most once; default batch sizes alone.",
    )
    reward: RewardWeights = Field(default_factory=lambda: RewardWeights.model_validate({}))
    reward_terms: list[RewardTermSpec] = Field(
        default_factory=list,
        description="Further reward terms (openg2g.envs.terms): each adds weight * its value to the step's reward.",
    )
    observation_terms: list[TermSpec] = Field(
        default_factory=list,
        description="Further observation features (openg2g.envs.terms), after the built-in ones; rl_policy "
        "rebuilds them in deployment.",
    )
    miss_budget: float | None = Field(
        None,
        gt=0,
        le=1,
        description="Per-model ITL deadline-miss budget (fraction of tokens): the agent can only choose batch "
        "sizes whose steady-state miss fraction, as the site reports it, is at most this (action masking, see "
        "openg2g.envs.actions); None = every measured batch size.",
    )
    reward_baseline: Literal["none", "no_control"] = Field(
        "none",
        description="none: the reward as defined; no_control: minus the reward, over the same step, of the "
        "episode's variation run without agent commands (a variance reduction for training: the best policy "
        "is unchanged, see openg2g.envs.env).",
    )
    episode_steps: int | None = Field(
        None, gt=0, description="Control steps per episode; None = the whole scenario (duration / control period)."
    )
    variations: VariationSpec | None = Field(
        default_factory=lambda: VariationSpec.model_validate({}),
        description="Randomized scenario variations per episode; None = as written.",
    )
    mode: Literal["train", "eval"] = Field(
        "train", description="train: a fresh variation each reset; eval: cycle through the held-out set."
    )
    n_eval: int = Field(8, gt=0, description="Size of the held-out evaluation set.")
    eval_seed: int = Field(20_251, ge=0, description="Seed of the held-out evaluation set.")
    keep_controllers: bool = Field(
        False, description="Run the scenario's own controllers beside the agent (default: the agent alone)."
    )

    @model_validator(mode="after")
    def _one_of_each(self) -> EnvConfig:
        kinds = [a.kind for a in self.actions]
        twice = sorted({k for k in kinds if kinds.count(k) > 1})
        if twice:
            raise ValueError(f"actions: each family at most once (two would write one setting); repeated: {twice}")
        return self

    @model_validator(mode="after")
    def _zones(self) -> EnvConfig:
        if self.observation.zones is not None and not self.observation.zones:
            raise ValueError("observation.zones must name at least one zone (or be null)")
        return self
