"""Training and scoring policies with Stable-Baselines3 (what ``openg2g train`` runs).

:func:`train_policy` trains on vectorized copies of :class:`~openg2g.envs.env.G2GEnv` (subprocesses
when ``n_envs > 1``), logs SB3's figures to CSV (and TensorBoard on request), saves a checkpoint
every ``checkpoint_every`` steps, continues a run on request (see :mod:`openg2g.envs.training_run`
for the folder and what a resumed segment keeps), on request scores the policy every ``eval_every``
steps on the env's validation set and keeps the best (:class:`PeriodicEvaluation`), and at the end
writes ``policy.zip``/``policy.json`` (with ``vecnormalize.pkl``) and scores the policy against a
uniformly random one on the env's held-out evaluation set (:func:`score_policy`).

Two fixed sets of variations, drawn from ``EnvConfig.eval_seed`` on separate streams
(:class:`~openg2g.envs.variations.ScenarioGenerator`): the *validation* set chooses the run's best
model; the *held-out* set reports the final policy, chosen on nothing.
"""

from __future__ import annotations

import functools
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import gymnasium as gym
import numpy as np
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback, CallbackList, ProgressBarCallback
from stable_baselines3.common.logger import CSVOutputFormat, Logger
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.utils import configure_logger
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv, VecNormalize

from openg2g.core.errors import G2GError, OutputError, ScenarioError
from openg2g.core.interrupts import STOP_SIGNALS
from openg2g.core.progress import progress_bar
from openg2g.envs.config import EnvConfig
from openg2g.envs.env import G2GEnv, make_env
from openg2g.envs.policy import FORMAT, PolicyMeta, algo_class, load_policy, read_meta, save_policy
from openg2g.envs.train_options import TrainOptions, TrainSettings, option_default
from openg2g.envs.training_run import (
    BEST_MODEL,
    BEST_VECNORMALIZE,
    CHECKPOINT_PREFIX,
    EVALUATIONS,
    RUN_FILES,
    VECNORMALIZE,
    Checkpoints,
    ContinuedCSV,
    Evaluations,
    TrainRecord,
    check_checkpoint,
    latest_checkpoint,
    load_checkpoint,
    load_normalization,
    monitor,
    normalization_path,
    save_normalization,
)
from openg2g.envs.variations import Variation

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = [
    "CriticWarmup",
    "PeriodicEvaluation",
    "TrainOptions",
    "TrainResult",
    "TrainSettings",
    "TrainingInterrupted",
    "require_tensorboard",
    "score_policy",
    "train_policy",
]

WORKER_EXIT_S = 10.0
"""Seconds a terminated env worker is given to exit before it is killed."""

_DEFAULT_SETTINGS = TrainSettings()
"""The hyper-parameters of a run given none (a frozen value, so one serves as every call's default)."""


@dataclass
class TrainResult:
    """What :func:`train_policy` returns (also written to ``train.json``)."""

    policy: Path
    timesteps: int
    wall_time_s: float
    evaluation: dict[str, Any] = field(default_factory=dict)


def score_policy(
    env: G2GEnv, act: Callable[[np.ndarray], Any], episodes: int | None = None
) -> tuple[float, list[float]]:
    """Mean total reward of ``act`` over the env's held-out evaluation variations.

    :param act: observation -> action.
    :param episodes: how many held-out variations (default all ``config.n_eval``).
    :return: ``(mean, per-episode totals)``.
    """
    n = env.config.n_eval if episodes is None else min(episodes, env.config.n_eval)
    totals = [_episode(env, act, k, {"eval_index": k})[0] for k in range(n)]
    return float(np.mean(totals)), totals


class _EpisodeStopped(Exception):
    """Training is stopping: the episode under way was left unfinished."""


def _episode(
    env: G2GEnv,
    act: Callable[[np.ndarray], Any],
    seed: int,
    options: dict[str, Any],
    stopped: Callable[[], bool] = lambda: False,
) -> tuple[float, int]:
    """``(total reward, env steps)`` of one episode of ``act`` from ``env.reset(seed, options)``.

    :raises _EpisodeStopped: ``stopped()``, asked before every step, turned true.
    """
    obs, _ = env.reset(seed=seed, options=options)
    total, length, done = 0.0, 0, False
    while not done:
        if stopped():
            raise _EpisodeStopped
        obs, reward, terminated, truncated, _ = env.step(act(obs))
        total += float(reward)
        length += 1
        done = terminated or truncated
    return total, length


def _greedy(model: BaseAlgorithm) -> Callable[[np.ndarray], Any]:
    """``model``'s deterministic action for an observation (the env's raw one: training normalizes
    rewards only)."""
    return lambda obs: model.predict(obs, deterministic=True)[0]


class TrainingInterrupted(KeyboardInterrupt):
    """Training stopped on a signal after saving a checkpoint and marking its segment interrupted.

    :param signum: the signal that stopped it (``signal.SIGINT`` or ``signal.SIGTERM``).
    """

    def __init__(self, signum: int):
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum


class _StopOnSignal(BaseCallback):
    """Ends SB3's ``learn`` at the next env step once SIGINT or SIGTERM reached this process.

    The handler only notes the signal and the callback returns False at the next step, so SB3 leaves
    its loop between two steps, never halfway through an exchange with the env workers: raising
    where the signal lands could cut a worker's answer in half, and SB3's close then waits forever
    for it. A second signal raises ``KeyboardInterrupt`` at once, for whoever will not wait (the
    workers are then reaped by force, :func:`_close_envs`). Used as a context manager around the
    vector env's life; handlers are installed only in the main thread, where Python runs them.
    """

    def __init__(self) -> None:
        super().__init__()
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> Self:
        if threading.current_thread() is threading.main_thread():
            for s in STOP_SIGNALS:
                self._previous[s] = signal.getsignal(s)
                signal.signal(s, self._note)
        return self

    def __exit__(self, *exc: object) -> None:
        for s, handler in self._previous.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)
        self._previous.clear()

    def _note(self, signum: int, frame: object) -> None:
        if self.signum is not None:
            raise KeyboardInterrupt(f"{signal.Signals(signum).name} while stopping")
        self.signum = signum

    def _on_step(self) -> bool:
        return self.signum is None


def _worker_env(factory: Callable[[], gym.Env]) -> gym.Env:
    """``factory()`` in a ``SubprocVecEnv`` worker, which from then on ignores SIGINT: Ctrl-C in a
    terminal reaches the whole process group, and the parent alone decides when workers stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    return factory()


def _close_envs(vec: VecEnv, force: bool) -> None:
    """Close the vector env and reap its worker processes.

    SB3's own close asks each worker to stop and waits for it, which is right after a clean stop.
    With ``force`` (an error, or a second signal, when a worker may be halfway through an exchange
    and would never answer), or when that close fails on a dead worker, every worker is terminated,
    given :data:`WORKER_EXIT_S` to exit and then killed.
    """
    if not force:
        try:
            vec.close()
            return
        except (EOFError, ConnectionError):  # a worker is gone; reap the others below
            pass
    workers = vec.unwrapped
    if isinstance(workers, SubprocVecEnv) and not workers.closed:
        for process in workers.processes:
            process.terminate()
        for process in workers.processes:
            process.join(WORKER_EXIT_S)
            if process.is_alive():
                process.kill()
                process.join()
        for remote in workers.remotes:
            remote.close()
        workers.closed = True  # the close below then closes only the wrappers (monitor file)
    vec.close()


def require_tensorboard() -> None:
    """Check that TensorBoard logging can work.

    :raises G2GError: the tensorboard package is not installed (the message says how to install it).
    """
    try:
        from torch.utils.tensorboard import SummaryWriter  # noqa: F401  (what SB3 writes with)
    except ImportError:
        raise G2GError(
            "--tensorboard needs the tensorboard package, which is not installed: pip install tensorboard"
        ) from None


class _ProgressBar(ProgressBarCallback):
    """SB3's progress bar, drawn with plain tqdm, counting from a resumed run's steps up to the
    run's total and showing the mean reward of recent episodes."""

    def __init__(self, total_steps: int, description: str):
        # SB3's __init__ insists on tqdm.rich (the rich package); plain tqdm draws the same bar
        BaseCallback.__init__(self)
        self.total_steps = total_steps
        self.description = description

    def _on_training_start(self) -> None:
        self.pbar = progress_bar(
            total=self.total_steps,
            initial=self.model.num_timesteps,
            unit="step",
            desc=self.description,
            mininterval=2.0,
        )

    def _on_step(self) -> bool:
        super()._on_step()
        buf = self.model.ep_info_buffer
        if buf and self.n_calls % 50 == 0:
            self.pbar.set_postfix(ep_reward=f"{np.mean([e['r'] for e in buf]):.2f}", refresh=False)
        return True


class CriticWarmup(BaseCallback):
    """Hold an actor-critic policy's actor and train only its critic until ``steps`` env steps.

    A run started from saved weights (``init_from``) inherits a value head fitted to another reward
    scale (the reward normalization restarts), discount, budget or policy, so its first advantages
    are mostly the critic's error, and PPO moves the copied policy on them: it drifts away from the
    behaviour it started from. Fitting the critic first, with the actor held, makes the first policy
    updates follow the present reward. Every rollout that ends within the first ``steps`` steps
    trains the critic alone; the actor learns from the first rollout that ends beyond them (also
    after a resume past them).

    :param steps: env steps over all envs.
    """

    def __init__(self, steps: int):
        super().__init__()
        self.steps = steps
        self._held: list[Any] = []

    def _actor_parameters(self) -> list[Any]:
        policy = cast(ActorCriticPolicy, self.model.policy)  # PPO or A2C (train_policy refuses the others)
        critic = {id(p) for p in (*policy.value_net.parameters(), *policy.mlp_extractor.value_net.parameters())}
        return [p for p in policy.parameters() if id(p) not in critic]

    def _on_training_start(self) -> None:
        if self.model.num_timesteps < self.steps:
            self._held = [p for p in self._actor_parameters() if p.requires_grad]
            for p in self._held:
                p.requires_grad_(False)  # no gradient: the optimizer leaves the actor as it is

    def _on_rollout_end(self) -> None:
        if self._held and self.model.num_timesteps > self.steps:
            for p in self._held:
                p.requires_grad_(True)
            self._held = []

    def _on_step(self) -> bool:
        return True


class PeriodicEvaluation(BaseCallback):
    """Every ``every`` env steps, score the policy deterministically on the validation variations,
    append the scores to ``evaluations.npz`` and, when their mean beats every earlier one (those of
    the segments before a resume included), save the model as ``best_model.zip`` with its settings
    JSON and its ``VecNormalize`` statistics (``best_model_vecnormalize.pkl``).

    Written rather than SB3's ``EvalCallback``, which counts its period in calls of one segment
    (not env steps over a resumed run), writes its file in place and saves a zip no ``rl_policy``
    settings go with. Scoring runs on an env of its own, so the training envs, their random draws
    and the weights trained are the same as without it.

    :param every: env steps (over all envs) between evaluations.
    :param env: the env the episodes run on (not a training env).
    :param variations: the validation variations, one episode each.
    :param evaluations: the run's record, read back on resume.
    :param meta: the policy settings; ``timesteps`` is filled in at each save.
    :param log: receives one line per evaluation.
    :param stopped: true once training is to stop: an evaluation under way is then abandoned (neither
        recorded nor saved), so a stop signal never waits for it.
    """

    def __init__(
        self,
        every: int,
        env: G2GEnv,
        variations: Sequence[Variation],
        evaluations: Evaluations,
        meta: PolicyMeta,
        log: Callable[[str], None],
        stopped: Callable[[], bool] = lambda: False,
    ):
        super().__init__()
        self.every = every
        self.env = env
        self.variations = list(variations)
        self.evaluations = evaluations
        self.meta = meta
        self.log = log
        self.stopped = stopped
        self._next = every

    def _on_training_start(self) -> None:
        self._next = (self.model.num_timesteps // self.every + 1) * self.every

    def _on_step(self) -> bool:
        steps = int(self.model.num_timesteps)
        if steps >= self._next:
            self._next = (steps // self.every + 1) * self.every
            self.evaluate(steps)
        return True

    def evaluate(self, steps: int) -> float | None:
        """Score the policy now (``steps`` trained), record it and keep it if it is the best; returns
        the mean, or ``None`` when a stop abandoned the evaluation."""
        act = _greedy(self.model)
        try:
            scores = [_episode(self.env, act, k, {"variation": v}, self.stopped) for k, v in enumerate(self.variations)]
        except _EpisodeStopped:
            self.log(f"evaluation at {steps} steps abandoned: training is stopping")
            return None
        best = self.evaluations.best_mean
        returns = [total for total, _ in scores]
        mean = float(np.mean(returns))
        episodes = f"{len(returns)} validation episode{'s' if len(returns) > 1 else ''}"
        message = f"evaluation at {steps} steps: mean episode reward {mean:.3f} on {episodes}"
        if mean > best:
            folder = self.evaluations.path.parent
            save_policy(self.model, folder / BEST_MODEL, self.meta.model_copy(update={"timesteps": steps}))
            save_normalization(self.model, folder / BEST_VECNORMALIZE)
            message += f", the best so far: saved {BEST_MODEL}.zip"
        else:
            message += f" (best {best:.3f})"
        self.evaluations.append(steps, returns, [length for _, length in scores])
        self.log(message)
        return mean


def _differences(old: Mapping[str, Any], new: Mapping[str, Any], prefix: str = "") -> list[str]:
    """``"field old -> new"`` for each field of ``new`` whose value differs from ``old``'s, nested
    mappings compared field by field under a dotted name (``env.reward.voltage 100.0 -> 200.0``)."""
    changed: list[str] = []
    for key, value in new.items():
        before = old.get(key)
        if isinstance(value, Mapping) and isinstance(before, Mapping):
            changed += _differences(before, value, f"{prefix}{key}.")
        elif before != value:
            changed.append(f"{prefix}{key} {before!r} -> {value!r}")
    return changed


def _run_fields(meta: PolicyMeta) -> dict[str, Any]:
    """What a resumed run must share with the checkpoint it continues, as plain data."""
    return {
        "scenario": meta.scenario,
        "overrides": meta.overrides,
        "algo": meta.algo,
        "env": meta.env.model_dump(mode="json"),
    }


def _check_same_run(previous: dict[str, Any], settings: dict[str, Any], record: Path) -> None:
    """Refuse to resume with other hyper-parameters: SB3 would silently keep the saved ones."""
    # a record older than a setting was trained with that setting's default
    before = {k: list(v) if isinstance(v, tuple) else v for k, v in _DEFAULT_SETTINGS.__dict__.items()}
    changed = _differences({**before, **(previous.get("settings") or {})}, settings)
    if changed:
        raise G2GError(
            f"{record}: the run was trained with other settings ({', '.join(changed)}); "
            "resume with the same --n-steps, --batch-size, --lr, --gamma, --ent-coef, --net-arch, --raw-reward "
            "and --critic-warmup"
        )


def _fresh_model(
    cls: type[BaseAlgorithm],
    vec: VecEnv,
    seed: int,
    settings: TrainSettings,
    algo: str,
    init_from: str | Path | None,
    probe: G2GEnv,
    log: Callable[[str], None],
) -> BaseAlgorithm:
    """A new model with random weights, or those of the saved policy ``init_from``."""
    model = cls("MlpPolicy", vec, seed=seed, device="cpu", verbose=0, **settings.algo_kwargs(algo))
    if init_from is not None:
        _copy_weights(init_from, model, probe, algo)
        log(f"starting from the weights of {init_from}")
    return model


def train_policy(
    scenario: str | Path,
    out: Path,
    *,
    algo: str = option_default("algo"),
    steps: int = option_default("steps"),
    n_envs: int = option_default("n_envs"),
    seed: int = option_default("seed"),
    overrides: Sequence[str] = (),
    env_config: EnvConfig | Mapping[str, Any] | None = None,
    settings: TrainSettings = _DEFAULT_SETTINGS,
    resume: bool = False,
    checkpoint_every: int = option_default("checkpoint_every"),
    eval_episodes: int = option_default("eval_episodes"),
    eval_every: int = option_default("eval_every"),
    val_episodes: int = option_default("val_episodes"),
    tensorboard: Path | None = None,
    progress: bool = True,
    log: Callable[[str], None] = print,
    init_from: str | Path | None = None,
    overwrite: bool = False,
) -> TrainResult:
    """Train a policy on a scenario and save it with its env settings.

    :param scenario: scenario path or bundled name (``"toy"`` for the analytic toy case).
    :param out: output folder (see :mod:`openg2g.envs.training_run`).
    :param algo: ppo, a2c, sac or td3 (sac, td3 need ``action="box"``).
    :param steps: total environment steps (over all envs), including those of earlier segments.
    :param n_envs: parallel environments (subprocesses when > 1).
    :param overrides: scenario ``dotted.key=value`` overrides.
    :param env_config: :class:`EnvConfig` or its fields.
    :param resume: continue the run in ``out`` from its latest checkpoint (refused if there is none,
        or it is damaged): same logs and monitor file, normalization statistics restored, a new
        segment in ``train.json``.
        Without it, ``out`` must hold no checkpoint (unless ``overwrite``).
    :param checkpoint_every: steps between checkpoints.
    :param overwrite: a fresh run (not ``resume``) into an ``out`` holding one deletes its
        checkpoints, best model, evaluations and normalization statistics first, so that a later
        resume cannot continue the old run's and no old file passes for the new run's.
    :param eval_episodes: held-out episodes to score the final policy and a random one on (0: skip).
    :param eval_every: env steps between evaluations on ``val_episodes`` validation variations,
        kept in ``evaluations.npz`` with the best model in ``best_model.zip`` (:class:`PeriodicEvaluation`);
        0: none.
    :param tensorboard: also log to TensorBoard under this folder, in ``<out folder name>_<k>``
        (a resumed segment continues the latest such run).
    :param init_from: start a fresh run from the network weights of a saved policy (path or
        bundled name) instead of random ones: fine-tuning under another reward, miss budget or
        scenario with the same spaces, or with action families added after the saved policy's (see
        :func:`_copy_weights`). Only the weights are taken; hyper-parameters, optimizer and reward
        normalization start afresh.
    :raises ScenarioError: arguments outside their bounds (:class:`TrainOptions`), or more
        ``eval_episodes`` than the env has held-out variations.
    :raises OutputError: ``out`` cannot be written (a full or read-only disk).
    :raises G2GError: a continuous-only algorithm with discrete actions, tensorboard requested but not
        installed, a fresh run into a folder holding one, a resume without a checkpoint to continue or
        from a damaged one (``out`` left as it was), a resume whose settings differ from the run's, or an
        ``init_from`` policy that is continued by a resume or does not fit (other algorithm, spaces or
        network sizes).
    :raises TrainingInterrupted: SIGINT or SIGTERM reached this process (main thread only): training
        stopped at the next env step with a checkpoint, the segment marked ``interrupted`` and the
        env workers reaped; a second signal raises ``KeyboardInterrupt`` at once (checkpoint still
        saved, workers terminated).
    """
    import torch

    TrainOptions.of(
        settings,
        algo=algo,
        steps=steps,
        n_envs=n_envs,
        seed=seed,
        checkpoint_every=checkpoint_every,
        eval_episodes=eval_episodes,
        eval_every=eval_every,
        val_episodes=val_episodes,
    )
    cls = algo_class(algo)
    cfg = env_config if isinstance(env_config, EnvConfig) else EnvConfig.model_validate(dict(env_config or {}))
    _check_environment(algo, cfg, eval_episodes, tensorboard)
    torch.set_num_threads(1)
    out = Path(out)
    record_path = out / "train.json"
    settings_json = {k: list(v) if isinstance(v, tuple) else v for k, v in settings.__dict__.items()}
    env_kwargs = cfg.model_dump(mode="json")
    factory = functools.partial(make_env, str(scenario), tuple(overrides), **env_kwargs)
    probe = factory()  # validates scenario and config before any subprocess starts
    meta = PolicyMeta(
        format=FORMAT, timesteps=0, algo=algo, scenario=str(scenario), overrides=list(overrides), env=cfg,
        layout=probe.layout.describe(),
    )  # fmt: skip
    if overwrite and not resume:
        if (out / "checkpoints").is_dir():
            shutil.rmtree(out / "checkpoints")
        for name in RUN_FILES:
            (out / name).unlink(missing_ok=True)
    start = _resume_point(out, meta, resume, settings_json, log)
    if start and init_from is not None:
        raise G2GError(f"{out} holds a checkpoint to resume from ({start[0].name}); init_from starts a fresh run only")
    previous = TrainRecord.read(record_path) if start else None
    done_steps = start[1] if start else 0
    evaluations = _evaluations(out, val_episodes, start[1] if start and eval_every > 0 else None, log)
    with _writing(out):
        (out / "logs").mkdir(parents=True, exist_ok=True)
        with _StopOnSignal() as stop:
            vec = _vec_env(factory, n_envs, seed + done_steps, out, start, settings, log)
            try:
                if start:
                    model = load_checkpoint(cls, start[0], vec)
                    log(f"resuming from {start[0]} ({done_steps} steps)")
                else:
                    model = _fresh_model(cls, vec, seed, settings, algo, init_from, probe, log)
                model.set_logger(_logger(out, tensorboard, resumed=start is not None))
                run = {"scenario": str(scenario), "overrides": list(overrides), "algo": algo, "settings": settings_json}
                if init_from is not None:
                    run["init_from"] = str(init_from)
                record = TrainRecord(record_path, {**run, "env": env_kwargs}, previous)
                record.start(done_steps, steps, n_envs, seed, eval_every, val_episodes)
                checkpoints = Checkpoints(checkpoint_every, n_envs, out / "checkpoints", meta)
                checkpoints.init_callback(model)
                callbacks: list[BaseCallback] = [stop, checkpoints]
                if eval_every:
                    variations = probe.generator.validation_set(val_episodes, cfg.eval_seed)
                    write = _beside_bar(log) if progress else log
                    callbacks.append(
                        PeriodicEvaluation(
                            eval_every, probe, variations, evaluations, meta, write, lambda: stop.signum is not None
                        )
                    )
                if progress:
                    callbacks.append(_ProgressBar(steps, f"train {algo}"))
                if settings.critic_warmup:
                    callbacks.append(CriticWarmup(settings.critic_warmup))
                wall = _learn(model, checkpoints, CallbackList(callbacks), steps, start, record, log, stop)
            except BaseException:
                _close_envs(vec, force=True)
                raise
            _close_envs(vec, force=False)
        if stop.signum is not None:
            raise TrainingInterrupted(stop.signum)
        record.end(int(model.num_timesteps), wall, "finished")
        policy = save_policy(model, out / "policy", meta.model_copy(update={"timesteps": int(model.num_timesteps)}))
        save_normalization(model, out / VECNORMALIZE)
        evaluation = _evaluate(probe, model, cfg, seed, eval_episodes, log)
        record.finish(evaluation, policy)
    return TrainResult(policy, int(model.num_timesteps), wall, evaluation)


def _evaluations(out: Path, episodes: int, resume_steps: int | None, log: Callable[[str], None]) -> Evaluations:
    """The run's periodic evaluations: those of ``evaluations.npz`` up to ``resume_steps`` when a
    resumed run continues them, else none yet (a fresh run's first evaluation replaces the file).

    :raises G2GError: the file cannot be continued (see :meth:`Evaluations.read`).
    """
    path = out / EVALUATIONS
    if resume_steps is None:
        return Evaluations(path, episodes)
    evaluations = Evaluations.read(path, episodes)
    best = out / f"{BEST_MODEL}.json"
    dropped = evaluations.truncate(resume_steps, read_meta(best).timesteps if best.is_file() else None)
    if dropped:
        log(
            f"{path.name}: dropped {dropped} evaluation{'s' if dropped > 1 else ''} made after step {resume_steps} "
            "(their segment ended before its next checkpoint; those steps are trained again)"
        )
    if evaluations.timesteps or dropped:
        log(f"continuing {path.name}: {len(evaluations.timesteps)} evaluations, best mean {evaluations.best_mean:.3f}")
    return evaluations


def _beside_bar(log: Callable[[str], None]) -> Callable[[str], None]:
    """``log`` with the progress bar cleared while it writes and drawn again below the line."""
    from tqdm import tqdm

    def write(message: str) -> None:
        with tqdm.external_write_mode():
            log(message)

    return write


@contextmanager
def _writing(out: Path) -> Iterator[None]:
    """Report an operating-system error while a run writes its folder (a full or read-only disk, a
    file-size limit) as an :class:`OutputError` naming the folder, instead of a traceback."""
    try:
        yield
    except OSError as exc:
        raise OutputError(f"{out}: training stopped: cannot write its files ({exc.strerror or exc})") from exc


def _learn(
    model: BaseAlgorithm,
    checkpoints: Checkpoints,
    callback: CallbackList,
    steps: int,
    start: tuple[Path, int] | None,
    record: TrainRecord,
    log: Callable[[str], None],
    stop: _StopOnSignal,
) -> float:
    """Train up to ``steps`` in all and checkpoint the end (also when stopped by a signal or
    interrupted, so ``--resume`` continues from there); returns the wall time (s). A stop, failure
    or interruption is written to the run's record (a failure or interruption before it
    propagates). The logger is closed in any case; the caller closes the envs."""
    done_steps = start[1] if start else 0
    t0 = time.perf_counter()
    try:
        if steps > done_steps:
            model.learn(total_timesteps=steps - done_steps, callback=callback, reset_num_timesteps=start is None)
        elif start:
            log(f"{start[0]} already has {done_steps} of the {steps} steps asked for; nothing to train")
        path = checkpoints.save()  # the next --resume starts exactly here
    except KeyboardInterrupt:
        path = checkpoints.save()
        record.end(int(model.num_timesteps), time.perf_counter() - t0, "interrupted")
        log(f"interrupted at {model.num_timesteps} steps; saved {path}")
        raise
    except Exception:
        record.end(int(model.num_timesteps), time.perf_counter() - t0, "failed")
        raise
    finally:
        model.logger.close()
    wall = time.perf_counter() - t0
    if stop.signum is not None:
        record.end(int(model.num_timesteps), wall, "interrupted")
        log(f"stopped by {signal.Signals(stop.signum).name} at {model.num_timesteps} steps; saved {path}")
    return wall


STAY_LOGIT = 2.0
"""Initial logit of "stay" (down and up: 0) of each action entry a policy gains at ``init_from``: an
added entry starts by staying with probability e^2 / (e^2 + 2) = 0.79, so the run starts from the
saved policy's behaviour (its deterministic action stays) and still tries every move."""


def _copy_weights(policy: str | Path, model: BaseAlgorithm, probe: G2GEnv, algo: str) -> None:
    """Load ``policy``'s network weights into ``model`` (see :func:`train_policy`'s ``init_from``).

    A discrete policy whose action families are the first ones of the run's is extended: its
    action logits are copied and every added entry gets zero weights and the biases
    ``(0, STAY_LOGIT, 0)`` over down/stay/up. A PPO or A2C policy whose observation's features
    are the first ones of the run's (the run adds observation terms) is extended too: the first
    layers of its actor and critic get zero input weights for each added feature, so the network
    computes from the run's observation what the saved one did from its own.
    """
    source, meta = load_policy(policy)
    if meta.algo != algo:
        raise G2GError(f"policy {policy} is a {meta.algo} policy; init_from needs one of the run's algorithm ({algo})")
    state = source.policy.state_dict()
    target = model.policy.state_dict()
    observation_space = source.observation_space
    saved_features = list(meta.layout.get("features") or ())
    added = _added_features(saved_features, list(probe.layout.feature_names), policy)
    if added:
        if algo not in ("ppo", "a2c"):
            raise G2GError(
                f"policy {policy}: the run's observation adds {added} features after the policy's; "
                f"init_from extends the observation of ppo and a2c policies only, not {algo}"
            )
        _check_observation_prefix(source.observation_space, probe.layout.observation_space, policy)
        state = _extend_observation(state, target, len(saved_features))
        observation_space = probe.layout.observation_space
    saved, run = list(meta.env.actions), list(probe.config.actions)
    if meta.env.action == probe.config.action == "discrete" and len(saved) < len(run) and run[: len(saved)] == saved:
        probe.layout.check_spaces(observation_space, probe.layout.action_space, f"policy {policy}")
        state = _extend_action_head(state, target)
    else:
        probe.layout.check_spaces(observation_space, source.action_space, f"policy {policy}")
    try:
        model.policy.load_state_dict(state)
    except RuntimeError as exc:  # torch names every tensor whose shape differs
        raise G2GError(f"policy {policy} has other network sizes than --net-arch asks: {exc}") from None


def _added_features(saved: Sequence[str], run: Sequence[str], policy: str | Path) -> int:
    """How many features the run's observation adds after those of the saved policy (0 when the
    counts are equal, or the policy's JSON does not name its features: the spaces are checked then).

    :raises G2GError: other counts, and the policy's features not the first of the run's; the
        message names the first feature that differs and those only one side has.
    """
    if not saved or len(saved) == len(run):
        return 0
    if len(run) > len(saved) and list(run[: len(saved)]) == list(saved):
        return len(run) - len(saved)
    first = next((i for i, (a, b) in enumerate(zip(saved, run)) if a != b), None)
    at = [] if first is None else [f"feature {first} is {saved[first]!r} in the policy, {run[first]!r} in the run"]
    only_policy = [f for f in saved if f not in set(run)]
    only_run = [f for f in run if f not in set(saved)]
    at += [f"only the policy has {_names(only_policy)}"] if only_policy else []
    at += [f"only the run has {_names(only_run)}"] if only_run else []
    raise G2GError(
        f"policy {policy} observes {len(saved)} features, the run {len(run)}: init_from extends an observation "
        f"only by features added after the policy's ({'; '.join(at)})"
    )


def _names(features: Sequence[str], shown: int = 5) -> str:
    """Up to ``shown`` feature names and how many more there are, for a message."""
    more = f" and {len(features) - shown} more" if len(features) > shown else ""
    return ", ".join(repr(f) for f in features[:shown]) + more


def _check_observation_prefix(saved: gym.Space, run: gym.spaces.Box, policy: str | Path) -> None:
    """Refuse a saved observation box whose bounds or dtype differ from the run's first features'."""
    fits = (
        isinstance(saved, gym.spaces.Box)
        and len(saved.shape) == 1
        and np.array_equal(saved.low, run.low[: saved.shape[0]])
        and np.array_equal(saved.high, run.high[: saved.shape[0]])
        and saved.dtype == run.dtype
    )
    if not fits:
        raise G2GError(
            f"policy {policy} does not fit this scenario: its observation {saved} is not the first "
            f"features of the run's {run} (other bounds or dtype: compare the observation's clip)"
        )


def _extend_observation(source: Mapping[str, Any], target: Mapping[str, Any], n_saved: int) -> dict[str, Any]:
    """``source``'s weights with zero input columns for the features the run adds after its
    ``n_saved`` ones: every matrix that reads the observation (``n_saved`` columns, the run's layer
    of the same width reading more) grows to ``target``'s width (see :func:`_copy_weights`)."""
    import torch

    state = dict(source)
    for key, weight in source.items():
        grown = target.get(key)
        if (
            grown is not None
            and weight.ndim == grown.ndim == 2
            and weight.shape[1] == n_saved
            and grown.shape[0] == weight.shape[0]
            and grown.shape[1] > n_saved
        ):
            state[key] = torch.cat([weight, weight.new_zeros((weight.shape[0], grown.shape[1] - n_saved))], dim=1)
    return state


def _extend_action_head(source: Mapping[str, Any], target: Mapping[str, Any]) -> dict[str, Any]:
    """``source``'s weights with its discrete action head grown to ``target``'s size (see :func:`_copy_weights`)."""
    import torch

    state = dict(source)
    weight, bias = source["action_net.weight"], source["action_net.bias"]
    added = target["action_net.bias"].shape[0] - bias.shape[0]
    state["action_net.weight"] = torch.cat([weight, weight.new_zeros((added, weight.shape[1]))])
    state["action_net.bias"] = torch.cat([bias, bias.new_tensor([0.0, STAY_LOGIT, 0.0]).repeat(added // 3)])
    return state


def _check_environment(algo: str, cfg: EnvConfig, eval_episodes: int, tensorboard: Path | None) -> None:
    """Refuse what the checked options cannot run with in this env or installation (see
    :func:`train_policy`'s ``Raises``)."""
    if algo in ("sac", "td3") and cfg.action != "box":
        raise G2GError(f"{algo} needs continuous actions: set the env's action to 'box' (got {cfg.action!r})")
    if eval_episodes > cfg.n_eval:
        raise ScenarioError(
            [("eval_episodes", f"{eval_episodes} is more than the env's {cfg.n_eval} held-out variations (n_eval)")]
        )
    if tensorboard is not None:
        require_tensorboard()


def _resume_point(
    out: Path, meta: PolicyMeta, resume: bool, settings_json: dict[str, Any], log: Callable[[str], None]
) -> tuple[Path, int] | None:
    """The checkpoint a run continues from and its steps, or None for a fresh run.

    :raises G2GError: a fresh run into a folder holding one, or a resume with other settings.
    """
    ckpt_dir = out / "checkpoints"
    start = latest_checkpoint(ckpt_dir)
    if start and not resume:
        raise G2GError(
            f"{out} already holds a training run ({start[0].name}); continue it with --resume or choose another --out"
        )
    if start:
        check_checkpoint(start[0])  # before anything is written: a damaged one leaves the run as it was
        changed = _differences(_run_fields(read_meta(start[0])), _run_fields(meta))
        if changed:
            raise G2GError(
                f"{start[0]} was trained otherwise ({', '.join(changed)}); resume with the same scenario, --set, "
                "--env and --algo (openg2g train --resume reuses those of train.json when they are not given)"
            )
        previous = TrainRecord.read(out / "train.json")
        if previous is not None:
            _check_same_run(previous, settings_json, out / "train.json")
    elif resume:
        # starting afresh would write over train.json's record of the earlier segments
        record = out / "train.json"
        afresh = (
            f"start afresh with --overwrite (which replaces {record})" if record.exists() else "start without --resume"
        )
        raise G2GError(
            f"--resume: no checkpoint to continue from in {ckpt_dir} ({CHECKPOINT_PREFIX}_<N>_steps.zip beside its "
            f".json); {afresh}"
        )
    return start


def _vec_env(
    factory: Callable[[], gym.Env],
    n_envs: int,
    seed: int,
    out: Path,
    start: tuple[Path, int] | None,
    settings: TrainSettings,
    log: Callable[[str], None],
) -> VecEnv:
    """``n_envs`` seeded envs (subprocesses when > 1), monitored into ``monitor.csv`` (raw rewards,
    continued on resume) and, with ``settings.normalize_reward``, reward-normalized with the
    checkpoint's statistics when it has them."""
    worker = functools.partial(_worker_env, factory)
    vec: VecEnv = SubprocVecEnv([worker] * n_envs) if n_envs > 1 else DummyVecEnv([factory] * n_envs)
    vec.seed(seed)
    vec = monitor(vec, out / "monitor.csv", append=start is not None)
    if not settings.normalize_reward:
        return vec
    stats = normalization_path(out / "checkpoints", start[1] if start else 0)
    if start and stats.is_file():
        return load_normalization(stats, vec)
    if start:
        log(f"no normalization statistics {stats.name} beside the checkpoint; reward scaling starts afresh")
    return VecNormalize(vec, norm_obs=False, norm_reward=True, gamma=settings.gamma)


def _logger(out: Path, tensorboard: Path | None, resumed: bool) -> Logger:
    """SB3's own TensorBoard logger (named after the run folder, continued on resume) or a bare one,
    plus the CSV log ``logs/progress.csv`` (continued on resume)."""
    logger = (
        configure_logger(0, str(tensorboard), out.resolve().name, reset_num_timesteps=not resumed)
        if tensorboard is not None
        else Logger(str(out / "logs"), [])
    )
    progress_csv = out / "logs" / "progress.csv"
    logger.output_formats.append(ContinuedCSV(progress_csv) if resumed else CSVOutputFormat(str(progress_csv)))
    return logger


def _evaluate(
    probe: G2GEnv, model: BaseAlgorithm, cfg: EnvConfig, seed: int, episodes: int, log: Callable[[str], None]
) -> dict[str, Any]:
    """Score the trained policy, a seeded random one and (discrete actions) the do-nothing one on
    ``episodes`` held-out episodes; empty when ``episodes`` is 0."""
    if episodes <= 0:
        return {}
    policy_mean, policy_eps = score_policy(probe, _greedy(model), episodes)
    space = probe.action_space
    space.seed(seed)
    random_mean, random_eps = score_policy(probe, lambda o: space.sample(), episodes)
    evaluation: dict[str, Any] = {
        "episodes": len(policy_eps),
        "policy_mean_reward": policy_mean,
        "random_mean_reward": random_mean,
        "policy_rewards": policy_eps,
        "random_rewards": random_eps,
    }
    message = f"held-out mean episode reward: policy {policy_mean:.3f}, random {random_mean:.3f}"
    if cfg.action == "discrete":  # also the do-nothing policy: every setting stays as it is
        stay = np.ones(probe.layout.n_actions, dtype=np.int64)
        hold_mean, hold_eps = score_policy(probe, lambda o: stay, episodes)
        evaluation.update(hold_mean_reward=hold_mean, hold_rewards=hold_eps)
        message += f", hold {hold_mean:.3f}"
    log(f"{message} ({len(policy_eps)} episodes)")
    return evaluation
