"""Training and scoring policies with Stable-Baselines3 (what ``openg2g train`` runs).

:func:`train_policy` trains on vectorized copies of :class:`~openg2g.envs.env.G2GEnv` (subprocesses
when ``n_envs > 1``), logs SB3's figures to CSV, saves a checkpoint (zip + JSON) every
``checkpoint_every`` steps, resumes from the latest checkpoint on request, and at the end writes
``policy.zip``/``policy.json`` and scores the policy against a uniformly random one on the env's
held-out evaluation set (:func:`score_policy`).

Output folder::

    <out>/policy.zip, policy.json     final policy (load with the rl_policy controller)
    <out>/checkpoints/model_<N>_steps.zip/.json
    <out>/logs/progress.csv           SB3 logger (one folder per resumed segment: logs_from_<N>/)
    <out>/monitor.csv                 one row per finished training episode (reward, length)
    <out>/train.json                  arguments, timing, evaluation figures
"""

from __future__ import annotations

import functools
import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from openg2g.core.errors import G2GError
from openg2g.envs.config import EnvConfig
from openg2g.envs.env import G2GEnv, make_env
from openg2g.envs.policy import FORMAT, PolicyMeta, algo_class, read_meta, save_policy

__all__ = ["TrainResult", "TrainSettings", "latest_checkpoint", "score_policy", "train_policy"]

_CHECKPOINT = re.compile(r"model_(\d+)_steps\.zip$")


@dataclass(frozen=True)
class TrainSettings:
    """Algorithm hyper-parameters (defaults sized for short control episodes on 2 cores).

    :param n_steps: PPO/A2C rollout length per env (steps).
    :param batch_size: PPO/SAC/TD3 minibatch size.
    :param learning_rate: optimizer step size.
    :param gamma: discount per control step (0.95: a horizon of about 20 control periods).
    :param net_arch: hidden layer sizes of policy and value networks.
    :param ent_coef: PPO/A2C entropy bonus.
    :param normalize_reward: divide training rewards by a running estimate of the return's standard
        deviation (SB3 ``VecNormalize``, rewards only): helps the value function when per-step rewards
        reach tens. Observations are never normalized, so a saved policy needs nothing but its zip.
    """

    n_steps: int = 256
    batch_size: int = 64
    learning_rate: float = 3e-4
    gamma: float = 0.95
    net_arch: tuple[int, ...] = (64, 64)
    ent_coef: float = 0.0
    normalize_reward: bool = True

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


@dataclass
class TrainResult:
    """What :func:`train_policy` returns (also written to ``train.json``)."""

    policy: Path
    timesteps: int
    wall_time_s: float
    evaluation: dict[str, Any] = field(default_factory=dict)


def latest_checkpoint(folder: Path) -> tuple[Path, int] | None:
    """The checkpoint zip with the most steps in ``folder`` and its step count, or ``None``."""
    best: tuple[Path, int] | None = None
    if folder.is_dir():
        for p in folder.iterdir():
            m = _CHECKPOINT.search(p.name)
            if m and p.with_suffix(".json").is_file() and (best is None or int(m.group(1)) > best[1]):
                best = (p, int(m.group(1)))
    return best


def score_policy(
    env: G2GEnv, act: Callable[[np.ndarray], Any], episodes: int | None = None
) -> tuple[float, list[float]]:
    """Mean total reward of ``act`` over the env's held-out evaluation variations.

    :param act: observation -> action.
    :param episodes: how many held-out variations (default all ``config.n_eval``).
    :return: ``(mean, per-episode totals)``.
    """
    n = env.config.n_eval if episodes is None else min(episodes, env.config.n_eval)
    totals = []
    for k in range(n):
        obs, _ = env.reset(seed=k, options={"eval_index": k})
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(act(obs))
            total += float(reward)
            done = terminated or truncated
        totals.append(total)
    return float(np.mean(totals)), totals


def _make_vec_env(
    factory: Callable[[], G2GEnv], n_envs: int, seed: int, monitor: Path, normalize_reward: bool, gamma: float
):
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecMonitor, VecNormalize

    fns: list[Callable[[], gym.Env]] = [factory] * n_envs
    vec = SubprocVecEnv(fns) if n_envs > 1 else DummyVecEnv(fns)
    vec.seed(seed)
    monitored = VecMonitor(vec, filename=str(monitor))  # raw rewards in monitor.csv and ep_rew_mean
    if normalize_reward:
        return VecNormalize(monitored, norm_obs=False, norm_reward=True, gamma=gamma)
    return monitored


def train_policy(
    scenario: str | Path,
    out: Path,
    *,
    algo: str = "ppo",
    steps: int = 100_000,
    n_envs: int = 1,
    seed: int = 0,
    overrides: Sequence[str] = (),
    env_config: EnvConfig | Mapping[str, Any] | None = None,
    settings: TrainSettings = TrainSettings(),
    resume: bool = False,
    checkpoint_every: int = 10_000,
    eval_episodes: int = 4,
    progress: bool = True,
    log: Callable[[str], None] = print,
) -> TrainResult:
    """Train a policy on a scenario and save it with its env settings.

    :param scenario: scenario path or bundled name (``"toy"`` for the analytic toy case).
    :param out: output folder (see module doc).
    :param algo: ppo, a2c, sac or td3 (sac, td3 need ``action="box"``).
    :param steps: total environment steps (over all envs), including those of a resumed run.
    :param n_envs: parallel environments (subprocesses when > 1).
    :param overrides: scenario ``dotted.key=value`` overrides.
    :param env_config: :class:`EnvConfig` or its fields.
    :param resume: continue from the latest checkpoint in ``out/checkpoints`` (fresh if none).
    :param checkpoint_every: steps between checkpoints.
    :param eval_episodes: held-out episodes to score the final policy and a random one on (0: skip).
    :raises G2GError: bad arguments (unknown algorithm, continuous-only algorithm with discrete actions).
    """
    import torch
    from stable_baselines3.common.callbacks import BaseCallback, CallbackList
    from stable_baselines3.common.logger import configure

    cls = algo_class(algo)
    cfg = env_config if isinstance(env_config, EnvConfig) else EnvConfig.model_validate(dict(env_config or {}))
    if algo in ("sac", "td3") and cfg.action != "box":
        raise G2GError(f"{algo} needs continuous actions: set the env's action to 'box' (got {cfg.action!r})")
    if steps <= 0 or n_envs <= 0 or checkpoint_every <= 0:
        raise G2GError(f"steps, n_envs and checkpoint_every must be > 0, got {steps}, {n_envs}, {checkpoint_every}")
    torch.set_num_threads(1)
    out = Path(out)
    ckpt_dir = out / "checkpoints"
    out.mkdir(parents=True, exist_ok=True)
    env_kwargs = cfg.model_dump(mode="json")
    factory = functools.partial(make_env, str(scenario), tuple(overrides), **env_kwargs)
    probe = factory()  # validates scenario and config before any subprocess starts
    layout = probe.layout.describe()
    meta = PolicyMeta(
        format=FORMAT, timesteps=0, algo=algo, scenario=str(scenario), overrides=list(overrides), env=cfg, layout=layout
    )

    start = latest_checkpoint(ckpt_dir) if resume else None
    if start:
        saved = read_meta(start[0])
        if (saved.algo, saved.env, saved.scenario, saved.overrides) != (algo, cfg, str(scenario), list(overrides)):
            raise G2GError(
                f"{start[0]} was trained with algo {saved.algo!r} on {saved.scenario!r} {saved.overrides} and env "
                f"settings {saved.env.model_dump(mode='json')}; resume with the same scenario, --set, --env and --algo"
            )
    done_steps = start[1] if start else 0
    suffix = f"_from_{done_steps}" if start else ""
    vec = _make_vec_env(
        factory, n_envs, seed + done_steps, out / f"monitor{suffix}.csv", settings.normalize_reward, settings.gamma
    )
    if start:
        model = cls.load(str(start[0]), env=vec, device="cpu")
        log(f"resuming from {start[0]} ({done_steps} steps)")
    else:
        if resume:
            log(f"no checkpoint in {ckpt_dir}; starting fresh")
        model = cls("MlpPolicy", vec, seed=seed, device="cpu", verbose=0, **settings.algo_kwargs(algo))
    model.set_logger(configure(str(out / f"logs{suffix}"), ["csv"]))

    class _Checkpoint(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.next_at = (done_steps // checkpoint_every + 1) * checkpoint_every

        def _on_step(self) -> bool:
            if self.num_timesteps >= self.next_at:
                path = ckpt_dir / f"model_{self.num_timesteps}_steps"
                save_policy(self.model, path, meta.model_copy(update={"timesteps": self.num_timesteps}))
                self.next_at += checkpoint_every
            return True

    class _Progress(BaseCallback):
        def _on_training_start(self) -> None:
            from tqdm import tqdm  # type: ignore[import-untyped]

            self.bar = tqdm(
                total=steps, initial=done_steps, unit="step", desc=f"train {algo}", dynamic_ncols=True, mininterval=2.0
            )

        def _on_step(self) -> bool:
            self.bar.update(self.num_timesteps - self.bar.n)
            buf = self.model.ep_info_buffer
            if buf and self.n_calls % 50 == 0:
                self.bar.set_postfix(ep_reward=f"{np.mean([e['r'] for e in buf]):.2f}", refresh=False)
            return True

        def _on_training_end(self) -> None:
            self.bar.close()

    callbacks: list[BaseCallback] = [_Checkpoint()]
    if progress:
        callbacks.append(_Progress())
    t0 = time.perf_counter()
    remaining = steps - done_steps
    try:
        if remaining > 0:
            model.learn(total_timesteps=remaining, callback=CallbackList(callbacks), reset_num_timesteps=start is None)
    except KeyboardInterrupt:
        # keep what was learned: --resume continues from here
        path = ckpt_dir / f"model_{model.num_timesteps}_steps"
        save_policy(model, path, meta.model_copy(update={"timesteps": int(model.num_timesteps)}))
        log(f"interrupted at {model.num_timesteps} steps; saved {path}.zip")
        raise
    finally:
        try:
            vec.close()
        except (EOFError, ConnectionError, BrokenPipeError):  # workers already gone (Ctrl-C reaches them too)
            pass
    wall = time.perf_counter() - t0
    meta = meta.model_copy(update={"timesteps": int(model.num_timesteps)})
    policy = save_policy(model, out / "policy", meta)
    evaluation: dict[str, Any] = {}
    if eval_episodes > 0:
        policy_mean, policy_eps = score_policy(probe, lambda o: model.predict(o, deterministic=True)[0], eval_episodes)
        space = probe.action_space
        space.seed(seed)
        random_mean, random_eps = score_policy(probe, lambda o: space.sample(), eval_episodes)
        evaluation = {
            "episodes": len(policy_eps),
            "policy_mean_reward": policy_mean,
            "random_mean_reward": random_mean,
            "policy_rewards": policy_eps,
            "random_rewards": random_eps,
        }
        message = f"held-out mean episode reward: policy {policy_mean:.3f}, random {random_mean:.3f}"
        if cfg.action == "discrete":  # also the do-nothing policy: every model stays at its batch size
            stay = np.ones(len(probe.layout.controlled), dtype=np.int64)
            hold_mean, hold_eps = score_policy(probe, lambda o: stay, eval_episodes)
            evaluation.update(hold_mean_reward=hold_mean, hold_rewards=hold_eps)
            message += f", hold {hold_mean:.3f}"
        log(f"{message} ({len(policy_eps)} episodes)")
    result = TrainResult(policy, int(model.num_timesteps), wall, evaluation)
    record = {
        "scenario": str(scenario),
        "overrides": list(overrides),
        "algo": algo,
        "steps": steps,
        "n_envs": n_envs,
        "seed": seed,
        "resumed_from": done_steps,
        "settings": {k: list(v) if isinstance(v, tuple) else v for k, v in settings.__dict__.items()},
        "env": env_kwargs,
        "timesteps": result.timesteps,
        "wall_time_s": wall,
        "steps_per_s": (result.timesteps - done_steps) / wall if wall > 0 else None,
        "evaluation": evaluation,
        "policy": str(policy),
    }
    (out / "train.json").write_text(json.dumps(record, indent=2) + "\n")
    return result
