"""Trained policies on disk: the Stable-Baselines3 zip plus a JSON file of the env settings beside it.

``<name>.zip`` is the SB3 model; ``<name>.json`` (:class:`PolicyMeta`) records the algorithm, the
:class:`~openg2g.envs.config.EnvConfig` the policy was trained with, and the layout it saw (feature
names, controlled models, shapes). The ``rl_policy`` controller rebuilds the same
:class:`~openg2g.envs.spaces.SpaceLayout` from a scenario's context and the saved settings, and
refuses a scenario whose spaces differ.

Any Stable-Baselines3 zip is accepted (PPO, A2C, SAC, TD3, DQN, as its spaces allow): without
a JSON file beside it the settings are inferred (:func:`policy_meta`: the algorithm from the zip,
the default env settings with the zip's kind of action), and ``openg2g policy wrap`` writes one
(:func:`wrap_policy`) for a policy trained with other env settings. A policy trained on
observations normalized by SB3's ``VecNormalize`` needs that wrapper's statistics
(``vecnormalize.pkl``, :func:`observation_normalization`), which are applied to each observation
as ``VecNormalize`` does; the zip does not record whether the wrapper normalized observations or
rewards only, so a zip trained under one is refused until told which.

**Nothing is unpickled.** SB3 keeps what JSON cannot hold in the zip's ``data`` entry as
cloudpickle blobs (``:serialized:``), which would run any code they carry when read. The blobs of
a policy ``openg2g train`` writes are all known, and :func:`load_policy` hands SB3 each one's value
instead (SB3's ``custom_objects``), so it reads none: the spaces are read from the zip by
:func:`~openg2g.envs.safe_pickle.load_restricted` (numpy arrays and inert records only), the policy
class is one of the algorithm's own (``MlpPolicy``, ``CnnPolicy``, ``MultiInputPolicy``),
``policy_kwargs`` are read from the JSON copy SB3 keeps beside the blob (its optimizer and
activation classes among torch's own), and the training state (last observation, episode buffers,
rollout or replay buffer class, schedules, train frequency) takes the algorithm's defaults: a
loaded policy acts, it does not go on training. The network weights are tensors, which SB3 reads
with torch's ``weights_only`` loader. A zip holding any other blob is refused unless the caller
says it is trusted (``trust_pickle``). ``vecnormalize.pkl`` is a pickle too, read by the same
restricted reader: its statistics are numpy arrays, so it needs no trust.
"""

from __future__ import annotations

import base64
import inspect
import json
import os
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from gymnasium import spaces
from pydantic import Field, ValidationError

from openg2g.core.atomic import replace_atomically, write_json_atomic
from openg2g.core.config import ConfigModel
from openg2g.core.errors import ControllerError
from openg2g.core.paths import bundled_policies_dir
from openg2g.envs.config import EnvConfig
from openg2g.envs.rl_extra import require_sb3
from openg2g.envs.safe_pickle import Pickled, load_restricted, rebuild_space

if TYPE_CHECKING:
    from stable_baselines3.common.base_class import BaseAlgorithm

__all__ = [
    "ALGOS",
    "DEPLOY_ALGOS",
    "TRAINING_STATE",
    "ObsNormalization",
    "PolicyMeta",
    "algo_class",
    "load_policy",
    "observation_normalization",
    "policy_meta",
    "policy_paths",
    "resolve_policy",
    "save_policy",
    "statistics_beside",
    "trained_in_vecnormalize",
    "wrap_policy",
]

FORMAT = "openg2g-policy-1"

ALGOS = ("ppo", "a2c", "sac", "td3")
"""Stable-Baselines3 algorithms the CLI trains (sac, td3: box actions only)."""

DEPLOY_ALGOS = (*ALGOS, "dqn")
"""Algorithms the controller loads (dqn acts on a ``Discrete`` space, which no openg2g env has)."""


class PolicyMeta(ConfigModel):
    """What is saved beside a policy's zip."""

    format: str = Field(FORMAT, description="File format tag.")
    algo: str = Field(description="Stable-Baselines3 algorithm (ppo, a2c, sac, td3, dqn).")
    scenario: str = Field(description="Scenario the policy was trained on (path or bundled name).")
    overrides: list[str] = Field(default_factory=list, description="Scenario overrides used in training.")
    env: EnvConfig = Field(description="Env settings; observation and action define the spaces.")
    layout: dict[str, Any] = Field(
        default_factory=dict,
        description="Feature names, controlled models, shapes; actions: each action family's entries and values.",
    )
    timesteps: int = Field(0, ge=0, description="Environment steps trained.")
    vecnormalize: str | None = Field(
        None,
        description=(
            "SB3 VecNormalize statistics (a vecnormalize.pkl) applied to the policy's observations, as a path "
            "relative to this file's folder; null: the policy takes raw observations."
        ),
    )


def algo_class(algo: str) -> type[BaseAlgorithm]:
    """The SB3 class of an algorithm name.

    :raises ControllerError: an unknown name (the message lists the valid ones).
    :raises G2GError: stable-baselines3 is not installed (:func:`~openg2g.envs.rl_extra.require_sb3`).
    """
    require_sb3(f"an SB3 policy ({algo})")
    import stable_baselines3 as sb3

    classes: dict[str, type[BaseAlgorithm]] = {
        "ppo": sb3.PPO, "a2c": sb3.A2C, "sac": sb3.SAC, "td3": sb3.TD3, "dqn": sb3.DQN,
    }  # fmt: skip
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
    with replace_atomically(zip_path) as tmp:
        model.save(str(tmp))
    write_json_atomic(json_path, meta.model_dump(mode="json"))
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
    "action_noise",
    "exploration_schedule",
)
"""Blobs of a saved model that only training reads: loaded as the algorithm's defaults (the
constructor's, else None; ``lr_schedule`` is rebuilt from the saved ``learning_rate``)."""

_TORCH_CLASSES = {
    "optimizer": ("Adam", "AdamW", "RMSprop", "SGD"),
    "activation": ("ReLU", "Tanh", "LeakyReLU", "ELU", "GELU", "SiLU", "Sigmoid"),
}
"""torch classes a policy's ``policy_kwargs`` may name (``torch.optim.<name>``, ``torch.nn.<name>``)."""


def policy_meta(path: str | Path) -> PolicyMeta:
    """The settings of a policy: its JSON file, or inferred from the zip when there is none (the
    algorithm from the zip's contents, the default :class:`EnvConfig` with the zip's kind of action,
    no layout, raw observations).

    :raises ControllerError: an invalid JSON file, or (inferring) a zip that is not an SB3 model.
    """
    zip_path, json_path = policy_paths(path)
    if json_path.is_file():
        return read_meta(zip_path)
    data = _zip_data(zip_path)
    _, action_space = _zip_spaces(zip_path, data)
    action = "discrete" if isinstance(action_space, spaces.MultiDiscrete) else "box"
    timesteps = data.get("num_timesteps")
    return PolicyMeta(
        algo=_infer_algo(zip_path, data), scenario="", env=EnvConfig(action=action),
        timesteps=timesteps if isinstance(timesteps, int) and timesteps >= 0 else 0,
    )  # fmt: skip


def load_policy(path: str | Path, device: str = "cpu", trust_pickle: bool = False) -> tuple[Any, PolicyMeta]:
    """Load a saved policy: ``(sb3_model, meta)``, unpickling nothing (module docstring).

    :param trust_pickle: let SB3 unpickle the blobs this module cannot stand in for; only for a
        file you trust, since a pickle runs any code it carries.
    :raises ControllerError: missing files, unknown algorithm, a zip SB3 cannot read, or (without
        ``trust_pickle``) a zip holding a blob that is not a known one.
    """
    zip_path = resolve_policy(path)
    meta = policy_meta(zip_path)
    cls = algo_class(meta.algo)
    custom = None if trust_pickle else _stand_ins(zip_path, cls, meta)
    try:
        model = cls.load(str(zip_path), device=device, custom_objects=custom)
    except Exception as exc:  # SB3 raises many kinds on a bad zip
        raise ControllerError(f"{zip_path}: cannot load {meta.algo} policy: {type(exc).__name__}: {exc}") from exc
    return model, meta


def _zip_data(zip_path: Path) -> dict[str, Any]:
    """The ``data`` entry of an SB3 zip (JSON; pickled values stay base64 blobs).

    :raises ControllerError: not a zip with a JSON object as its data entry.
    """
    try:
        with zipfile.ZipFile(zip_path) as archive:
            data = json.loads(archive.read("data"))
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as exc:
        raise ControllerError(f"{zip_path}: not a Stable-Baselines3 policy zip ({type(exc).__name__}: {exc})") from None
    if not isinstance(data, dict):
        raise ControllerError(f"{zip_path}: its data entry is not a JSON object")
    return data


def _blob(zip_path: Path, data: dict[str, Any], key: str, classes: dict[str, Any] | None = None) -> Any:
    """The value of a pickled entry of ``data``, read without running code (None if absent or null)."""
    value = data.get(key)
    if not (isinstance(value, dict) and isinstance(value.get(":serialized:"), str)):
        return None
    try:
        raw = base64.b64decode(value[":serialized:"])
    except ValueError as exc:
        raise ControllerError(f"{zip_path}: its {key} is not base64: {exc}") from None
    return load_restricted(raw, f"{zip_path} ({key})", classes)


def _zip_spaces(zip_path: Path, data: dict[str, Any]) -> tuple[Any, Any]:
    """The observation and action spaces saved in the zip."""
    found = []
    for key in ("observation_space", "action_space"):
        record = _blob(zip_path, data, key)
        if record is None:
            raise ControllerError(f"{zip_path}: its data entry holds no {key}")
        found.append(rebuild_space(record, f"{zip_path} ({key})"))
    return found[0], found[1]


_CONTRIB_POLICIES = {
    # MaskablePPO's policy is PPO's actor-critic network with masks applied when sampling: the
    # weights load into PPO's, and the env's layout remaps what a mask would forbid anyway
    "sb3_contrib.common.maskable.policies": "ppo",
}
"""sb3-contrib policy modules whose zips load as one of :data:`DEPLOY_ALGOS`."""

_STATEFUL_POLICIES = {
    "sb3_contrib.common.recurrent.policies": (
        "RecurrentPPO, whose LSTM state is carried from step to step, which the rl_policy controller does not do"
    ),
}
"""sb3-contrib policy modules the controller cannot deploy, and why."""


def _infer_algo(zip_path: Path, data: dict[str, Any]) -> str:
    """The algorithm that saved a zip: from its policy class's module, PPO and A2C (which share
    ``ActorCriticPolicy``) told apart by PPO's ``n_epochs``; sb3-contrib's MaskablePPO as PPO.

    :raises ControllerError: a policy class of none of :data:`DEPLOY_ALGOS` (a RecurrentPPO zip
        says why it cannot be deployed).
    """
    policy_class = data.get("policy_class")
    module = policy_class.get("__module__") if isinstance(policy_class, dict) else None
    for algo in ("sac", "td3", "dqn"):
        if module == f"stable_baselines3.{algo}.policies":
            return algo
    if module == "stable_baselines3.common.policies":
        return "ppo" if "n_epochs" in data else "a2c"
    if module in _CONTRIB_POLICIES:
        return _CONTRIB_POLICIES[module]
    if module in _STATEFUL_POLICIES:
        raise ControllerError(f"{zip_path}: a policy of {_STATEFUL_POLICIES[module]}")
    raise ControllerError(
        f"{zip_path}: cannot tell its algorithm (policy class module {module!r}); openg2g loads "
        f"{', '.join(DEPLOY_ALGOS)} and sb3-contrib's MaskablePPO: write its settings with openg2g policy wrap --algo"
    )


def _stand_ins(zip_path: Path, cls: type[BaseAlgorithm], meta: PolicyMeta) -> dict[str, Any]:
    """A value for every pickled blob of the zip's ``data`` entry, so SB3 unpickles none.

    :raises ControllerError: the zip cannot be read, or holds a blob that is not a known one.
    """
    data = _zip_data(zip_path)
    blobs = {k: v for k, v in data.items() if isinstance(v, dict) and ":serialized:" in v}
    defaults = inspect.signature(cls.__init__).parameters
    policies = {f"{c.__module__}.{c.__qualname__}": c for c in cls.policy_aliases.values()}
    custom: dict[str, Any] = {}
    unknown: list[str] = []
    for key, blob in blobs.items():
        if key in ("observation_space", "action_space"):
            custom.update(zip(("observation_space", "action_space"), _spaces(zip_path, data, meta)))
        elif key == "policy_class":  # the algorithm's own class the blob names, else its MlpPolicy
            named = _safe_blob(zip_path, data, key, policies)
            custom[key] = named if named in policies.values() else cls.policy_aliases["MlpPolicy"]
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


def _spaces(zip_path: Path, data: dict[str, Any], meta: PolicyMeta) -> tuple[Any, Any]:
    """The policy's spaces: rebuilt from its settings file's layout when that has one (as the
    training env built them; the zip's copies are not read), else read from the zip."""
    from openg2g.envs.spaces import make_spaces

    shape, controlled = meta.layout.get("observation_shape"), meta.layout.get("controlled")
    families = meta.layout.get("actions")
    if isinstance(shape, list) and len(shape) == 1 and isinstance(shape[0], int) and isinstance(controlled, list):
        n_actions = (
            sum(len(f.get("entries", [])) for f in families if isinstance(f, dict))
            if isinstance(families, list)
            else len(controlled)
        )
        return make_spaces(meta.env.observation.clip, shape[0], meta.env.action, n_actions)
    return _zip_spaces(zip_path, data)


def _safe_blob(zip_path: Path, data: dict[str, Any], key: str, classes: dict[str, Any]) -> Any:
    """:func:`_blob`, or None where it cannot be read without running code."""
    try:
        return _blob(zip_path, data, key, classes)
    except ControllerError:
        return None


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


@dataclass(frozen=True)
class ObsNormalization:
    """The observation statistics of an SB3 ``VecNormalize`` (``vecnormalize.pkl``), applied as
    ``VecNormalize.normalize_obs`` does: ``clip((obs - mean) / sqrt(var + epsilon), -clip_obs,
    clip_obs)`` as float32.

    :ivar mean: running mean of each observation feature (the features' units).
    :ivar var: running variance of each feature.
    :ivar epsilon: added to the variance (avoids a division by zero).
    :ivar clip_obs: bound of the normalized values.
    :ivar source: the file read.
    """

    mean: np.ndarray
    var: np.ndarray
    epsilon: float
    clip_obs: float
    source: Path

    def apply(self, obs: np.ndarray) -> np.ndarray:
        """The normalized observation (float32)."""
        scaled = (obs - self.mean) / np.sqrt(self.var + self.epsilon)
        return np.clip(scaled, -self.clip_obs, self.clip_obs).astype(np.float32)


def read_vecnormalize(path: str | Path, observation_space: spaces.Space) -> ObsNormalization | None:
    """The observation statistics saved by ``VecNormalize.save``, read without running code
    (:mod:`openg2g.envs.safe_pickle`); None when that wrapper normalized rewards only.

    :param observation_space: the policy's; the statistics must have its shape.
    :raises ControllerError: the file is missing, not a saved ``VecNormalize``, or its statistics
        have another shape than the policy's observations.
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ControllerError(f"vecnormalize {path}: cannot read it: {exc.strerror or exc}") from None
    saved = load_restricted(raw, path)
    if not (isinstance(saved, Pickled) and saved.name.endswith(".VecNormalize")):
        raise ControllerError(f"{path}: not a saved VecNormalize (found {saved!r})")
    if not saved.field("norm_obs"):
        return None
    rms = saved.field("obs_rms")
    mean, var = (rms.field("mean"), rms.field("var")) if isinstance(rms, Pickled) else (None, None)
    if not (isinstance(mean, np.ndarray) and isinstance(var, np.ndarray) and mean.shape == var.shape):
        raise ControllerError(f"{path}: obs_rms holds no mean and variance of one shape (a Dict observation?)")
    if mean.shape != observation_space.shape:
        raise ControllerError(
            f"{path}: its statistics are for observations of shape {mean.shape}, the policy takes "
            f"{observation_space.shape}"
        )
    epsilon, clip_obs = saved.field("epsilon"), saved.field("clip_obs")
    if not (isinstance(epsilon, float) and isinstance(clip_obs, float) and epsilon >= 0 and clip_obs > 0):
        raise ControllerError(f"{path}: epsilon {epsilon!r} and clip_obs {clip_obs!r} must be numbers >= 0 and > 0")
    return ObsNormalization(mean, var, epsilon, clip_obs, path)


def trained_in_vecnormalize(zip_path: Path, algo: str) -> bool | None:
    """Whether the model in the zip was trained in SB3's ``VecNormalize`` wrapper, where the zip
    can say: an on-policy model (PPO, A2C) keeps the observations from before the wrapper
    (``_last_original_obs``) only when trained in it. An off-policy model (SAC, TD3, DQN) keeps
    them always, so its zip cannot say: ``None``. Neither says whether the wrapper normalized the
    observations or only the rewards.

    :param algo: the zip's algorithm (one of :data:`DEPLOY_ALGOS`).
    """
    if algo not in ("ppo", "a2c"):
        return None
    return _zip_data(zip_path).get("_last_original_obs") is not None


def statistics_beside(zip_path: Path) -> Path | None:
    """``VecNormalize`` statistics saved beside a zip: ``vecnormalize.pkl`` in its folder, or in the
    folder named after it (rl-zoo's ``logs/ALGO/ENV_1/ENV/vecnormalize.pkl`` beside ``ENV.zip``)."""
    for candidate in (zip_path.parent / "vecnormalize.pkl", zip_path.parent / zip_path.stem / "vecnormalize.pkl"):
        if candidate.is_file():
            return candidate
    return None


def _default_statistics(zip_path: Path, algo: str, ask: str) -> str:
    """The statistics a zip given without any is deployed with: those saved beside it, else
    ``"none"`` (raw observations) unless the zip shows it was trained in ``VecNormalize``.

    :param ask: how the caller names the missing setting, for the message.
    :raises ControllerError: the zip was trained in ``VecNormalize`` and no statistics are beside it.
    """
    found = statistics_beside(zip_path)
    if found is not None:
        return str(found)
    if trained_in_vecnormalize(zip_path, algo):
        raise ControllerError(
            f"{zip_path} was trained under SB3's VecNormalize (it keeps the observations from before the wrapper) "
            f"and no vecnormalize.pkl is beside it: give the statistics ({ask} path/to/vecnormalize.pkl), or "
            f"{ask} none if it normalized rewards only"
        )
    return "none"


def observation_normalization(
    zip_path: Path, given: str | None, observation_space: spaces.Space
) -> ObsNormalization | None:
    """The observation normalization a deployed policy needs.

    :param given: ``vecnormalize`` of the ``rl_policy`` params: a path to the statistics, ``"none"``
        (raw observations), or None: what the policy's JSON file says (:attr:`PolicyMeta.vecnormalize`),
        and without one, the statistics saved beside the zip (:func:`statistics_beside`), else raw
        observations unless the zip shows it was trained in ``VecNormalize`` (:func:`trained_in_vecnormalize`).
    :raises ControllerError: None given for a zip trained in ``VecNormalize`` with neither a JSON
        file nor statistics beside it, or statistics that cannot be read or do not fit
        (:func:`read_vecnormalize`).
    """
    _, json_path = policy_paths(zip_path)
    if given is None and json_path.is_file():
        saved = read_meta(zip_path).vecnormalize
        given = str(json_path.parent / saved) if saved is not None else "none"
    if given is None:
        given = _default_statistics(
            zip_path, _infer_algo(zip_path, _zip_data(zip_path)), "rl_policy param vecnormalize:"
        )
    if given == "none":
        return None
    return read_vecnormalize(given, observation_space)


def wrap_policy(
    model: str | Path,
    scenario: str,
    overrides: Sequence[str] = (),
    env_config: dict[str, Any] | None = None,
    vecnormalize: str | None = None,
    algo: str | None = None,
    force: bool = False,
) -> Path:
    """Write the settings file (:class:`PolicyMeta`) of an SB3 zip trained outside ``openg2g
    train``, after checking that the scenario's spaces are the model's (``openg2g policy wrap``).

    :param scenario: scenario path, bundled name or ``"toy"``, with ``overrides``.
    :param env_config: :class:`EnvConfig` fields; ``action`` defaults to the zip's kind of action.
    :param vecnormalize: the ``VecNormalize`` statistics the model was trained with, or ``"none"``;
        ``None``: those saved beside the zip (:func:`statistics_beside`), else raw observations unless
        the zip shows it was trained in ``VecNormalize``. Stored relative to the settings file, and
        not at all when they normalized rewards only.
    :param algo: one of :data:`DEPLOY_ALGOS`; default inferred from the zip.
    :param force: replace an existing settings file.
    :return: the settings file's path.
    :raises ControllerError: no such zip, a settings file already there (without ``force``), spaces
        that differ from the scenario's (named), or normalization missing or unfit.
    :raises ScenarioError: the scenario or the env settings are invalid.
    """
    from openg2g.envs.env import make_env

    zip_path, json_path = policy_paths(model)
    if not zip_path.is_file():
        raise ControllerError(f"{zip_path}: no such file")
    if json_path.is_file() and not force:
        raise ControllerError(f"{json_path} exists (the policy's settings); give --force to replace it")
    data = _zip_data(zip_path)
    observation_space, action_space = _zip_spaces(zip_path, data)
    algo = algo or _infer_algo(zip_path, data)
    algo_class(algo)
    fields = {"action": "discrete" if isinstance(action_space, spaces.MultiDiscrete) else "box", **(env_config or {})}
    try:
        cfg = EnvConfig.model_validate(fields)
    except ValidationError as exc:
        raise ControllerError(f"--env: {exc}") from None
    env = make_env(scenario, tuple(overrides), **cfg.model_dump(mode="json"))
    try:
        layout = env.layout
        layout.check_spaces(observation_space, action_space, f"policy {zip_path}")
    finally:
        env.close()
    if vecnormalize is None:
        vecnormalize = _default_statistics(zip_path, algo, "--vecnormalize")
    stored = None
    if vecnormalize != "none" and read_vecnormalize(vecnormalize, observation_space) is not None:
        stored = os.path.relpath(Path(vecnormalize).resolve(), json_path.resolve().parent)
    timesteps = data.get("num_timesteps")
    meta = PolicyMeta(
        algo=algo, scenario=scenario, overrides=list(overrides), env=cfg, layout=layout.describe(),
        timesteps=timesteps if isinstance(timesteps, int) and timesteps >= 0 else 0, vecnormalize=stored,
    )  # fmt: skip
    json_path.write_text(json.dumps(meta.model_dump(mode="json"), indent=2) + "\n")
    return json_path
