"""What a training run is given, and the one home of every default: :class:`TrainOptions`.

``openg2g train``'s options (their help is made from these fields' descriptions and defaults),
:func:`~openg2g.envs.training.train_policy`'s keyword arguments and :class:`TrainSettings` take
their defaults from :class:`TrainOptions` (:func:`option_default`), so a default changed here
changes all three. The module imports neither torch nor Stable-Baselines3, so that the command
line reads it when it builds its parser.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, ValidationInfo, field_validator

from openg2g.core.config import ConfigModel, field_path
from openg2g.core.errors import ScenarioError
from openg2g.core.limits import MAX_PROCESSES_PER_CPU, bound_text, max_processes

__all__ = ["MAX_LAYER_UNITS", "TrainOptions", "TrainSettings", "option_default"]

MAX_LAYER_UNITS = 4096
"""Widest hidden layer accepted (units): the policies here use 64, and a layer of 4096 already holds
16.8 M weights towards the next one; a larger one only exhausts memory."""


class TrainOptions(ConfigModel):
    """Every number and choice a training run is given (``openg2g train``'s options,
    :func:`~openg2g.envs.training.train_policy`'s arguments and :class:`TrainSettings`), checked
    together before anything starts: each field's bounds, and what the algorithm needs of them.

    The sizes are counts of env steps; ``seed`` is numpy's and torch's (an unsigned 32-bit value).
    The defaults are sized for short control episodes on 2 cores.
    """

    algo: Literal["ppo", "a2c", "sac", "td3"] = Field(
        "ppo", description="The Stable-Baselines3 algorithm; sac and td3 need the env's action=box."
    )
    steps: int = Field(100_000, ge=1, description="Total env steps over all envs, resumed ones included.")
    n_envs: int = Field(
        1, ge=1, description=f"Parallel envs, in subprocesses when > 1; at most {MAX_PROCESSES_PER_CPU} per CPU."
    )
    seed: int = Field(
        0, ge=0, le=2**32 - 1, description="Seed of the algorithm and the envs' variation draws, 0 to 2**32-1."
    )
    checkpoint_every: int = Field(10_000, ge=1, description="Env steps between checkpoints.")
    eval_episodes: int = Field(
        4, ge=0, description="Held-out episodes scored at the end, at most the env's n_eval; 0: none."
    )
    eval_every: int = Field(
        0,
        ge=0,
        description="Env steps between scores of the policy on the validation variations, each appended to "
        "evaluations.npz and the best model kept as best_model.zip; 0: none, since each evaluation pauses "
        "training for its validation episodes.",
    )
    val_episodes: int = Field(
        4,
        ge=1,
        le=100,  # each is a whole episode run between updates; more only stalls training
        description="Validation episodes scored at each periodic evaluation, 1 to 100.",
    )
    n_steps: int = Field(256, ge=1, description="PPO/A2C rollout steps per env.")
    batch_size: int = Field(64, ge=1, description="PPO/SAC/TD3 minibatch size, in samples.")
    learning_rate: float = Field(
        3e-4, ge=0, description="Learning rate, the optimizer's step size, >= 0; 0 holds the weights."
    )
    gamma: float = Field(
        0.95,
        ge=0,
        le=1,
        description="Discount per control step, 0 to 1: a horizon of about 1 / (1 - gamma) control periods.",
    )
    net_arch: tuple[Annotated[int, Field(ge=1, le=MAX_LAYER_UNITS)], ...] = Field(
        (64, 64),
        description=f"Hidden layer sizes of the policy and value networks, 1 to {MAX_LAYER_UNITS} units each; "
        "none: a linear policy.",
    )
    ent_coef: float = Field(0.0, ge=0, description="PPO/A2C entropy bonus, >= 0.")
    normalize_reward: bool = Field(
        True, description="Scale the training rewards by a running estimate of the return's standard deviation."
    )
    critic_warmup: int = Field(
        0,
        ge=0,
        description="PPO/A2C: env steps at the start of a run that train the value network alone, the policy's "
        "weights held, e.g. after starting from a saved policy's weights.",
    )

    @field_validator("n_envs")
    @classmethod
    def _bounded_envs(cls, v: int) -> int:
        if v > max_processes():
            raise ValueError(f"{v} envs are more than this machine runs usefully: {bound_text()}")
        return v

    # SB3's PPO normalizes advantages over each minibatch and each rollout: one sample gives NaN
    @field_validator("n_steps")
    @classmethod
    def _ppo_rollout(cls, v: int, info: ValidationInfo) -> int:
        n_envs = info.data.get("n_envs", 1)
        if info.data.get("algo") == "ppo" and v * n_envs < 2:
            raise ValueError(f"ppo needs rollouts of at least 2 steps over all envs, got {v} x {n_envs} envs")
        return v

    @field_validator("batch_size")
    @classmethod
    def _ppo_minibatch(cls, v: int, info: ValidationInfo) -> int:
        if info.data.get("algo") == "ppo" and v < 2:
            raise ValueError(f"ppo needs minibatches of at least 2 samples, got {v}")
        return v

    @field_validator("critic_warmup")
    @classmethod
    def _has_a_critic(cls, v: int, info: ValidationInfo) -> int:
        algo = info.data.get("algo")
        if v and algo not in ("ppo", "a2c"):
            raise ValueError(f"needs an actor-critic algorithm (ppo, a2c); {algo} has none to hold")
        return v

    def settings(self) -> TrainSettings:
        """The algorithm's hyper-parameters among these options."""
        return TrainSettings(**{k: getattr(self, k) for k in TrainSettings.__dataclass_fields__})

    @classmethod
    def of(cls, settings: TrainSettings, **run: Any) -> TrainOptions:
        """The options of a run given as :func:`~openg2g.envs.training.train_policy`'s arguments
        ``run`` and ``settings``.

        :raises ScenarioError: one ``(field, message)`` per problem.
        """
        try:
            return cls(**run, **{k: getattr(settings, k) for k in TrainSettings.__dataclass_fields__})
        except ValidationError as exc:
            raise ScenarioError([(field_path(e["loc"]), e["msg"]) for e in exc.errors()]) from None


def option_default(name: str) -> Any:
    """The default of the :class:`TrainOptions` field ``name``.

    :raises KeyError: no field has that name.
    """
    return TrainOptions.model_fields[name].default


@dataclass(frozen=True)
class TrainSettings:
    """Algorithm hyper-parameters: the :class:`TrainOptions` fields of the same names (their
    meaning, bounds and defaults are there), checked when a run starts.

    ``normalize_reward`` wraps the training envs in SB3's ``VecNormalize`` for rewards only: it helps
    the value function when per-step rewards reach tens. Observations are never normalized, so a
    saved policy needs nothing but its zip. ``critic_warmup`` counts env steps over all envs (see
    :class:`~openg2g.envs.training.CriticWarmup`).
    """

    n_steps: int = option_default("n_steps")
    batch_size: int = option_default("batch_size")
    learning_rate: float = option_default("learning_rate")
    gamma: float = option_default("gamma")
    net_arch: tuple[int, ...] = option_default("net_arch")
    ent_coef: float = option_default("ent_coef")
    normalize_reward: bool = option_default("normalize_reward")
    critic_warmup: int = option_default("critic_warmup")

    def algo_kwargs(self, algo: str) -> dict[str, Any]:
        """Keyword arguments for the SB3 constructor of ``algo``."""
        kwargs: dict[str, Any] = {
            "learning_rate": self.learning_rate,
            "gamma": self.gamma,
            "policy_kwargs": {"net_arch": list(self.net_arch)},
        }
        if algo == "ppo":
            kwargs.update(n_steps=self.n_steps, batch_size=self.batch_size, ent_coef=self.ent_coef)
        elif algo == "a2c":
            kwargs.update(n_steps=self.n_steps, ent_coef=self.ent_coef)
        else:
            kwargs.update(batch_size=self.batch_size)
        return kwargs
