"""Trained policies on disk: the Stable-Baselines3 zip plus a JSON file of the env settings beside it.

``<name>.zip`` is the SB3 model; ``<name>.json`` (:class:`PolicyMeta`) records the algorithm, the
:class:`~openg2g.envs.config.EnvConfig` the policy was trained with, and the layout it saw (feature
names, controlled models, shapes). The ``rl_policy`` controller rebuilds the same
:class:`~openg2g.envs.spaces.SpaceLayout` from a scenario's context and the saved settings, and
refuses a scenario whose spaces differ.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field, ValidationError

from openg2g.core.config import ConfigModel
from openg2g.core.errors import ControllerError
from openg2g.core.paths import bundled_policies_dir
from openg2g.envs.config import EnvConfig

if TYPE_CHECKING:
    from stable_baselines3.common.base_class import BaseAlgorithm

__all__ = ["ALGOS", "PolicyMeta", "algo_class", "load_policy", "policy_paths", "resolve_policy", "save_policy"]

FORMAT = "openg2g-policy-1"

ALGOS = ("ppo", "a2c", "sac", "td3")
"""Stable-Baselines3 algorithms the CLI trains and the controller loads (sac, td3: box actions only)."""


class PolicyMeta(ConfigModel):
    """What is saved beside a policy's zip."""

    format: str = Field(FORMAT, description="File format tag.")
    algo: str = Field(description="Stable-Baselines3 algorithm (ppo, a2c, sac, td3).")
    scenario: str = Field(description="Scenario the policy was trained on (path or bundled name).")
    overrides: list[str] = Field(default_factory=list, description="Scenario overrides used in training.")
    env: EnvConfig = Field(description="Env settings; observation and action define the spaces.")
    layout: dict[str, Any] = Field(default_factory=dict, description="Feature names, controlled models, shapes.")
    timesteps: int = Field(0, ge=0, description="Environment steps trained.")


def algo_class(algo: str) -> type[BaseAlgorithm]:
    """The SB3 class of an algorithm name.

    :raises ControllerError: an unknown name (the message lists the valid ones).
    """
    import stable_baselines3 as sb3

    classes: dict[str, type[BaseAlgorithm]] = {"ppo": sb3.PPO, "a2c": sb3.A2C, "sac": sb3.SAC, "td3": sb3.TD3}
    if algo not in classes:
        raise ControllerError(f"unknown algorithm {algo!r}; valid: {', '.join(classes)}")
    return classes[algo]


def policy_paths(path: str | Path) -> tuple[Path, Path]:
    """``(zip, json)`` paths of a policy given as ``name``, ``name.zip`` or ``name.json``."""
    p = Path(path)
    stem = p.with_suffix("") if p.suffix in (".zip", ".json") else p
    return stem.with_name(stem.name + ".zip"), stem.with_name(stem.name + ".json")


def resolve_policy(path: str | Path) -> Path:
    """The zip of a policy given by path, or by name among the bundled policies
    (:func:`~openg2g.core.paths.bundled_policies_dir`).

    :raises ControllerError: neither exists (the message names both places looked at).
    """
    zip_path, _ = policy_paths(path)
    if zip_path.is_file():
        return zip_path
    bundled, _ = policy_paths(bundled_policies_dir() / Path(path).name)
    if bundled.is_file():
        return bundled
    raise ControllerError(f"policy {str(path)!r} not found (looked for {zip_path.resolve()} and {bundled})")


def save_policy(model: Any, path: str | Path, meta: PolicyMeta) -> Path:
    """Write ``<path>.zip`` (the SB3 model) and ``<path>.json`` (``meta``); return the zip path."""
    zip_path, json_path = policy_paths(path)
    zip_path.parent.mkdir(parents=True, exist_ok=True)
    model.save(str(zip_path))
    json_path.write_text(json.dumps(meta.model_dump(mode="json"), indent=2) + "\n")
    return zip_path


def read_meta(path: str | Path) -> PolicyMeta:
    """The :class:`PolicyMeta` saved beside a policy.

    :raises ControllerError: the JSON file is missing or invalid.
    """
    zip_path, json_path = policy_paths(path)
    try:
        return PolicyMeta.model_validate(json.loads(json_path.read_text()))
    except FileNotFoundError:
        raise ControllerError(f"{zip_path}: no {json_path.name} beside it (env settings of the policy)") from None
    except (json.JSONDecodeError, ValidationError) as exc:
        raise ControllerError(f"{json_path}: not a valid policy settings file: {exc}") from None


def load_policy(path: str | Path, device: str = "cpu") -> tuple[Any, PolicyMeta]:
    """Load a saved policy: ``(sb3_model, meta)``.

    :raises ControllerError: missing files, unknown algorithm, or a zip SB3 cannot read.
    """
    zip_path = resolve_policy(path)
    meta = read_meta(zip_path)
    cls = algo_class(meta.algo)
    try:
        model = cls.load(str(zip_path), device=device)
    except Exception as exc:  # SB3 raises many kinds on a bad zip
        raise ControllerError(f"{zip_path}: cannot load {meta.algo} policy: {type(exc).__name__}: {exc}") from exc
    return model, meta
