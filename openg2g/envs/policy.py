"""Trained policies on disk: the Stable-Baselines3 zip plus a JSON file of the env settings beside it.

``<name>.zip`` is the SB3 model; ``<name>.json`` (:class:`PolicyMeta`) records the algorithm, the
:class:`~openg2g.envs.config.EnvConfig` the policy was trained with, and the layout it saw (feature
names, controlled models, shapes). The ``rl_policy`` controller rebuilds the same
:class:`~openg2g.envs.spaces.SpaceLayout` from a scenario's context and the saved settings, and
refuses a scenario whose spaces differ.

**Nothing is unpickled.** SB3 keeps what JSON cannot hold in the zip's ``data`` entry as
cloudpickle blobs (``:serialized:``), which would run any code they carry when read. The blobs of
a policy ``openg2g train`` writes are all known, and :func:`load_policy` hands SB3 each one's value
instead (SB3's ``custom_objects``), so it reads none: the spaces are rebuilt from the settings file
(:func:`~openg2g.envs.spaces.make_spaces`), the policy class is the algorithm's ``MlpPolicy``,
``policy_kwargs`` are read from the JSON copy SB3 keeps beside the blob (its optimizer and
activation classes among torch's own), and the training state (last observation, episode buffers,
rollout or replay buffer class, schedules, train frequency) takes the algorithm's defaults: a
loaded policy acts, it does not go on training. The network weights are tensors, which SB3 reads
with torch's ``weights_only`` loader. A zip holding any other blob is refused unless the caller
says it is trusted (``trust_pickle``).
"""

from __future__ import annotations

import inspect
import json
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field, ValidationError

from openg2g.core.config import ConfigModel
from openg2g.core.errors import ControllerError
from openg2g.core.jsontext import json_text
from openg2g.core.paths import bundled_policies_dir
from openg2g.envs.config import EnvConfig

if TYPE_CHECKING:
    from stable_baselines3.common.base_class import BaseAlgorithm

__all__ = [
    "ALGOS",
    "TRAINING_STATE",
    "PolicyMeta",
    "algo_class",
    "load_policy",
    "policy_paths",
    "resolve_policy",
    "save_policy",
]

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
    json_path.write_text(json_text(meta.model_dump(mode="json"), str(json_path)) + "\n")
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


TRAINING_STATE = (
    "_last_obs",
    "_last_episode_starts",
    "_last_original_obs",
    "ep_info_buffer",
    "ep_success_buffer",
    "rollout_buffer_class",
    "replay_buffer_class",
    "lr_schedule",
    "clip_range",
    "train_freq",
)
"""Blobs of a saved model that only training reads: loaded as the algorithm's defaults (the
constructor's, else None; ``lr_schedule`` is rebuilt from the saved ``learning_rate``)."""

_TORCH_CLASSES = {
    "optimizer": ("Adam", "AdamW", "RMSprop", "SGD"),
    "activation": ("ReLU", "Tanh", "LeakyReLU", "ELU", "GELU", "SiLU", "Sigmoid"),
}
"""torch classes a policy's ``policy_kwargs`` may name (``torch.optim.<name>``, ``torch.nn.<name>``)."""


def load_policy(path: str | Path, device: str = "cpu", trust_pickle: bool = False) -> tuple[Any, PolicyMeta]:
    """Load a saved policy: ``(sb3_model, meta)``, unpickling nothing (module docstring).

    :param trust_pickle: let SB3 unpickle the blobs this module cannot stand in for; only for a
        file you trust, since a pickle runs any code it carries.
    :raises ControllerError: missing files, unknown algorithm, a zip SB3 cannot read, or (without
        ``trust_pickle``) a zip holding a blob that is not a known one.
    """
    zip_path = resolve_policy(path)
    meta = read_meta(zip_path)
    cls = algo_class(meta.algo)
    custom = None if trust_pickle else _stand_ins(zip_path, meta, cls)
    try:
        model = cls.load(str(zip_path), device=device, custom_objects=custom)
    except Exception as exc:  # SB3 raises many kinds on a bad zip
        raise ControllerError(f"{zip_path}: cannot load {meta.algo} policy: {type(exc).__name__}: {exc}") from exc
    return model, meta


def _stand_ins(zip_path: Path, meta: PolicyMeta, cls: type[BaseAlgorithm]) -> dict[str, Any]:
    """A value for every pickled blob of the zip's ``data`` entry, so SB3 unpickles none.

    :raises ControllerError: the zip cannot be read, or holds a blob that is not a known one.
    """
    try:
        with zipfile.ZipFile(zip_path) as archive:
            data = json.loads(archive.read("data"))
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as exc:
        raise ControllerError(f"{zip_path}: not a Stable-Baselines3 policy zip ({type(exc).__name__}: {exc})") from None
    if not isinstance(data, dict):
        raise ControllerError(f"{zip_path}: its data entry is not a JSON object")
    blobs = {k: v for k, v in data.items() if isinstance(v, dict) and ":serialized:" in v}
    defaults = inspect.signature(cls.__init__).parameters
    custom: dict[str, Any] = {}
    unknown: list[str] = []
    for key, blob in blobs.items():
        if key in ("observation_space", "action_space"):
            custom.update(zip(("observation_space", "action_space"), _meta_spaces(zip_path, meta)))
        elif key == "policy_class":
            custom[key] = cls.policy_aliases["MlpPolicy"]
        elif key in TRAINING_STATE:
            custom[key] = defaults[key].default if key in defaults else None
        elif key == "policy_kwargs" and (kwargs := _policy_kwargs(blob)) is not None:
            custom[key] = kwargs
        else:
            unknown.append(key)
    if unknown:
        raise ControllerError(
            f"{zip_path}: its data entry holds pickled {', '.join(sorted(unknown))}, which openg2g cannot read "
            "without unpickling, and a pickle runs any code it carries; if you trust this file, set trust_pickle: "
            "true in the rl_policy controller's params (openg2g evaluate --trust-pickle)"
        )
    return custom


def _meta_spaces(zip_path: Path, meta: PolicyMeta) -> tuple[Any, Any]:
    """The observation and action spaces the settings file gives (as the training env built them).

    :raises ControllerError: the settings file records no layout (observation shape, controlled models).
    """
    from openg2g.envs.spaces import make_spaces

    shape, controlled = meta.layout.get("observation_shape"), meta.layout.get("controlled")
    if not (isinstance(shape, list) and len(shape) == 1 and isinstance(shape[0], int) and isinstance(controlled, list)):
        raise ControllerError(
            f"{policy_paths(zip_path)[1]}: layout.observation_shape and layout.controlled are needed to rebuild the "
            "policy's spaces without unpickling them"
        )
    return make_spaces(meta.env.observation.clip, shape[0], meta.env.action, len(controlled))


def _policy_kwargs(blob: dict[str, Any]) -> dict[str, Any] | None:
    """``policy_kwargs`` from the JSON copy SB3 keeps beside its blob: JSON values as they are, class
    names among :data:`_TORCH_CLASSES` as those classes; None if anything else is in it."""
    import torch

    if blob.get(":type:") != str(dict):
        return None
    known = {str(getattr(torch.optim, n)): getattr(torch.optim, n) for n in _TORCH_CLASSES["optimizer"]}
    known |= {str(getattr(torch.nn, n)): getattr(torch.nn, n) for n in _TORCH_CLASSES["activation"]}
    kwargs: dict[str, Any] = {}
    for name, value in blob.items():
        if name in (":type:", ":serialized:"):
            continue
        if isinstance(value, str):
            if value not in known:
                return None
            value = known[value]
        kwargs[name] = value
    return kwargs
