"""A training run's folder, and how a resumed run continues it rather than starting a new one.

:func:`~openg2g.envs.training.train_policy` writes, in its output folder::

    policy.zip, policy.json                        the final model and its env settings
    vecnormalize.pkl                               its VecNormalize statistics (SB3's VecNormalize.save)
    best_model.zip, best_model.json                the model of the best periodic evaluation so far
    best_model_vecnormalize.pkl                    its VecNormalize statistics
    evaluations.npz                                every periodic evaluation (rl-zoo's EvalCallback keys)
    checkpoints/model_<N>_steps.zip, .json         model and its env settings after N steps
    checkpoints/model_vecnormalize_<N>_steps.pkl   reward-normalization statistics after N steps
    logs/progress.csv                              SB3's logger, one row per update, all segments
    monitor.csv                                    one row per finished training episode, all segments
    train.json                                     the run's settings and one entry per segment

The ``.pkl`` files exist when the run normalized with ``VecNormalize`` (rewards, by default).

A *segment* is one ``train_policy`` call: the first, then one per ``--resume``. Each resumed segment
loads the latest checkpoint with its normalization statistics, appends to ``logs/progress.csv`` and
``monitor.csv`` (whose ``t`` column keeps counting from the first segment's start), appends its
periodic evaluations to ``evaluations.npz`` (whose best mean the next ``best_model`` must beat) and
adds an entry to ``train.json``'s ``segments``. A segment also checkpoints when it ends or is interrupted, so the
next one starts exactly where it stopped.
"""

from __future__ import annotations

import json
import re
import zipfile
import zlib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import CheckpointCallback
from stable_baselines3.common.logger import CSVOutputFormat
from stable_baselines3.common.monitor import ResultsWriter
from stable_baselines3.common.vec_env import VecEnv, VecMonitor, VecNormalize

from openg2g.core.atomic import replace_atomically, write_json_atomic
from openg2g.core.errors import G2GError
from openg2g.envs.policy import PolicyMeta, save_policy

__all__ = [
    "BEST_MODEL",
    "BEST_VECNORMALIZE",
    "CHECKPOINT_PREFIX",
    "EVALUATIONS",
    "RUN_FILES",
    "VECNORMALIZE",
    "Checkpoints",
    "ContinuedCSV",
    "Evaluations",
    "TrainRecord",
    "check_checkpoint",
    "latest_checkpoint",
    "load_checkpoint",
    "load_normalization",
    "monitor",
    "normalization_path",
    "save_normalization",
]

CHECKPOINT_PREFIX = "model"
"""Checkpoint names are SB3's ``<prefix>_<N>_steps.zip`` and ``<prefix>_vecnormalize_<N>_steps.pkl``."""

VECNORMALIZE = "vecnormalize.pkl"
"""The final policy's ``VecNormalize`` statistics, beside ``policy.zip`` (rl-zoo's name)."""

BEST_MODEL = "best_model"
"""Stem of the best periodically evaluated model (``best_model.zip`` and ``.json``, rl-zoo's name)."""

BEST_VECNORMALIZE = f"{BEST_MODEL}_vecnormalize.pkl"
"""The best model's ``VecNormalize`` statistics, named as SB3 names a checkpoint's."""

EVALUATIONS = "evaluations.npz"
"""The periodic evaluations, as rl-zoo's ``EvalCallback`` writes them (see :class:`Evaluations`)."""

RUN_FILES = (VECNORMALIZE, f"{BEST_MODEL}.zip", f"{BEST_MODEL}.json", BEST_VECNORMALIZE, EVALUATIONS)
"""Files of a run beside its policy that a fresh run over it (``--overwrite``) deletes: left behind,
they would pass for the new run's."""

_CHECKPOINT = re.compile(rf"{CHECKPOINT_PREFIX}_(\d+)_steps\.zip$")


def latest_checkpoint(folder: Path) -> tuple[Path, int] | None:
    """The checkpoint zip with the most steps in ``folder`` (its JSON beside it) and its step count, or ``None``."""
    best: tuple[Path, int] | None = None
    if folder.is_dir():
        for p in folder.iterdir():
            m = _CHECKPOINT.search(p.name)
            if m and p.with_suffix(".json").is_file() and (best is None or int(m.group(1)) > best[1]):
                best = (p, int(m.group(1)))
    return best


_MOVE_AWAY = "move it away to resume from an earlier checkpoint, or start afresh with --overwrite"


def check_checkpoint(path: Path) -> None:
    """Refuse a checkpoint zip that SB3 could not load: not a whole zip file (cut short by a full
    disk or a kill), a member whose bytes fail their CRC, or no SB3 ``data`` and ``policy.pth``.

    :raises G2GError: naming the file and what is wrong with it.
    """
    try:
        with zipfile.ZipFile(path) as zf:
            bad, names = zf.testzip(), set(zf.namelist())
    except (zipfile.BadZipFile, EOFError) as exc:
        raise G2GError(f"{path}: damaged checkpoint, not a whole zip file ({exc}); {_MOVE_AWAY}") from None
    except (zlib.error, OSError) as exc:  # a compressed member that does not inflate, a read error
        raise G2GError(f"{path}: damaged checkpoint, unreadable ({exc}); {_MOVE_AWAY}") from None
    if bad is not None:
        raise G2GError(f"{path}: damaged checkpoint, {bad} in it fails its CRC check; {_MOVE_AWAY}")
    missing = [name for name in ("data", "policy.pth") if name not in names]
    if missing:
        raise G2GError(f"{path}: not an SB3 checkpoint (no {', '.join(missing)} in it); {_MOVE_AWAY}")


def load_checkpoint(cls: type[BaseAlgorithm], path: Path, env: VecEnv) -> BaseAlgorithm:
    """The model of checkpoint ``path``, on the CPU, wrapping ``env`` (check the file first with
    :func:`check_checkpoint`, before anything of the resumed run is written).

    :raises G2GError: naming the file, when SB3 cannot load it.
    """
    try:
        return cls.load(str(path), env=env, device="cpu")
    except Exception as exc:  # noqa: BLE001 - unpickling and torch raise many kinds
        raise G2GError(f"{path}: cannot load the checkpoint: {type(exc).__name__}: {exc}; {_MOVE_AWAY}") from None


def normalization_path(folder: Path, steps: int) -> Path:
    """Where the checkpoint after ``steps`` steps keeps its ``VecNormalize`` statistics."""
    return folder / f"{CHECKPOINT_PREFIX}_vecnormalize_{steps}_steps.pkl"


class Checkpoints(CheckpointCallback):
    """SB3's :class:`CheckpointCallback` (every ``every_steps`` env steps, normalization statistics
    included) that also writes the policy's settings JSON beside each zip, and saves on demand.

    :param every_steps: env steps between checkpoints, over all envs.
    :param n_envs: envs stepped per callback call.
    :param folder: the checkpoints folder.
    :param meta: the policy settings; ``timesteps`` is filled in at each save.
    """

    def __init__(self, every_steps: int, n_envs: int, folder: Path, meta: PolicyMeta):
        super().__init__(max(every_steps // n_envs, 1), str(folder), CHECKPOINT_PREFIX, save_vecnormalize=True)
        self.meta = meta

    def _on_step(self) -> bool:
        if self.n_calls % self.save_freq == 0:
            self.save()
        return True

    def save(self) -> Path:
        """Checkpoint the model now (zip, JSON, normalization statistics); returns the zip's path."""
        self.num_timesteps = int(self.model.num_timesteps)
        meta = self.meta.model_copy(update={"timesteps": self.num_timesteps})
        zip_path = save_policy(self.model, self._checkpoint_path(extension="zip"), meta)
        save_normalization(self.model, normalization_path(Path(self.save_path), self.num_timesteps))
        return zip_path


def save_normalization(model: BaseAlgorithm, path: Path) -> bool:
    """Write the ``VecNormalize`` statistics ``model`` trains with to ``path`` (SB3's
    ``VecNormalize.save``, through a temporary file and a rename).

    :return: False, writing nothing, when the model trains without ``VecNormalize``.
    """
    vec_normalize = model.get_vec_normalize_env()
    if vec_normalize is None:
        return False
    with replace_atomically(path) as tmp:
        vec_normalize.save(str(tmp))
    return True


@dataclass
class Evaluations:
    """``evaluations.npz``: the periodic evaluations of a run, with the keys and shapes of rl-zoo's
    (SB3's ``EvalCallback``): ``timesteps`` (n,), the env steps trained at each evaluation;
    ``results`` (n, episodes), each episode's total raw reward; ``ep_lengths`` (n, episodes), each
    episode's env steps. Rewritten whole (atomically) at each :meth:`append`.

    :param path: the file.
    :param episodes: episodes per evaluation (the columns).
    """

    path: Path
    episodes: int
    timesteps: list[int] = field(default_factory=list)
    results: list[list[float]] = field(default_factory=list)
    ep_lengths: list[list[int]] = field(default_factory=list)
    floor: float = float("-inf")  # the mean of a kept best model whose evaluation was cut (see truncate)

    @classmethod
    def read(cls, path: Path, episodes: int) -> Evaluations:
        """The evaluations saved at ``path`` (none when it does not exist), to be continued.

        :raises G2GError: the file is not such a record, or it holds another number of episodes
            per evaluation than ``episodes``.
        """
        if not path.is_file():
            return cls(path, episodes)
        try:
            with np.load(path) as saved:
                arrays = {k: saved[k] for k in ("timesteps", "results", "ep_lengths")}
        except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
            raise G2GError(f"{path}: not an evaluations record (timesteps, results, ep_lengths): {exc}") from None
        n = len(arrays["timesteps"])
        for key in ("results", "ep_lengths"):
            if arrays[key].ndim != 2 or arrays[key].shape[0] != n:
                raise G2GError(f"{path}: {key} has shape {arrays[key].shape}, expected ({n}, episodes)")
        if n and arrays["results"].shape[1] != episodes:
            raise G2GError(
                f"{path}: its evaluations score {arrays['results'].shape[1]} episodes each, this run asks for "
                f"{episodes} (--val-episodes); resume with the same number"
            )
        return cls(
            path,
            episodes,
            [int(t) for t in arrays["timesteps"]],
            arrays["results"].astype(float).tolist(),
            arrays["ep_lengths"].astype(int).tolist(),
        )

    @property
    def best_mean(self) -> float:
        """The best mean episode reward so far (``-inf`` before the first evaluation)."""
        return max([self.floor, *(float(np.mean(r)) for r in self.results)])

    def truncate(self, steps: int, best_model_steps: int | None) -> int:
        """Drop the evaluations made after ``steps`` (a segment that evaluated, then ended before
        its next checkpoint: the resumed run trains those steps again and evaluates them anew, so the
        file never holds one timestep twice); returns how many were dropped. The file is rewritten
        at the next :meth:`append`.

        :param best_model_steps: the timesteps of the ``best_model.zip`` on disk, if any. A best
            model from a dropped evaluation is kept, and its mean stays the one to beat, so it is
            never replaced by a worse one.
        """
        cut = [k for k, t in enumerate(self.timesteps) if t > steps]
        for k in cut:
            if self.timesteps[k] == best_model_steps:
                self.floor = max(self.floor, float(np.mean(self.results[k])))
        keep = [k for k in range(len(self.timesteps)) if k not in cut]
        self.timesteps = [self.timesteps[k] for k in keep]
        self.results = [self.results[k] for k in keep]
        self.ep_lengths = [self.ep_lengths[k] for k in keep]
        return len(cut)

    def append(self, timesteps: int, returns: list[float], lengths: list[int]) -> None:
        """Add one evaluation and rewrite the file."""
        self.timesteps.append(timesteps)
        self.results.append(list(returns))
        self.ep_lengths.append(list(lengths))
        with replace_atomically(self.path) as tmp, tmp.open("wb") as f:
            np.savez(
                f,
                timesteps=np.array(self.timesteps, dtype=np.int64),
                results=np.array(self.results, dtype=np.float64).reshape(-1, self.episodes),
                ep_lengths=np.array(self.ep_lengths, dtype=np.int64).reshape(-1, self.episodes),
            )


class ContinuedCSV(CSVOutputFormat):
    """SB3's CSV log that continues an existing file: its header and rows are kept, new rows appended.

    :param path: the CSV file (created if missing).
    """

    def __init__(self, path: Path):
        if not path.is_file() or path.stat().st_size == 0:
            super().__init__(str(path))
            return
        # SB3 opens with "w+" (truncating); "r+" keeps the rows and still lets SB3 rewrite the
        # header in place when a later row brings new keys
        self.file = open(path, "r+")  # noqa: SIM115  (closed by close(), as SB3's)
        self.keys = self.file.readline().rstrip("\n").split(",")
        self.separator = ","
        self.quotechar = '"'
        self.file.seek(0, 2)


def monitor(venv: VecEnv, path: Path, append: bool) -> VecMonitor:
    """SB3's :class:`VecMonitor` writing ``path``; with ``append`` an existing file is continued.

    A continued file keeps its header, and its ``t`` column keeps counting seconds from the time
    the file was started.

    :raises G2GError: ``path`` exists but is not a monitor file.
    """
    monitored = VecMonitor(venv)
    t_start = monitored.t_start
    if append and path.is_file():
        first = path.read_text().split("\n", 1)[0]
        try:
            t_start = float(json.loads(first[1:])["t_start"])
        except (ValueError, KeyError, TypeError):
            raise G2GError(
                f"{path}: not an SB3 monitor file (first line {first[:80]!r}); move it away to resume"
            ) from None
        monitored.t_start = t_start
    else:
        append = False
    monitored.results_writer = ResultsWriter(
        str(path), header={"t_start": t_start, "env_id": "None"}, override_existing=not append
    )
    return monitored


def load_normalization(path: Path, venv: VecEnv) -> VecNormalize:
    """The ``VecNormalize`` statistics saved at ``path``, wrapping ``venv`` and still updating.

    :raises G2GError: the file cannot be read as SB3's ``VecNormalize``.
    """
    try:
        vec = VecNormalize.load(str(path), venv)
    except Exception as exc:  # noqa: BLE001 - unpickling raises many kinds
        raise G2GError(f"{path}: cannot load the normalization statistics: {type(exc).__name__}: {exc}") from None
    vec.training = True
    return vec


class TrainRecord:
    """``train.json``: the run's settings and one entry per segment, rewritten (atomically) at
    every change so that it is readable while a segment runs and after one dies.

    Each segment holds ``from_step``, ``to_step``, ``target_steps``, ``n_envs``, ``seed``,
    ``eval_every``, ``val_episodes`` (its periodic evaluation), ``started`` (UTC), ``wall_time_s``, ``steps_per_s`` and ``status``: ``running``, then
    ``finished``, ``interrupted`` (Ctrl-C) or ``failed``; a segment found still ``running`` by
    the next one is marked ``lost`` (its process died without a word).

    :param path: the ``train.json`` file.
    :param run: the run's fixed fields (scenario, overrides, algo, settings, env).
    :param previous: the record of the earlier segments (:meth:`read`), or ``None``.
    """

    def __init__(self, path: Path, run: dict[str, Any], previous: dict[str, Any] | None):
        self.path = path
        segments = [dict(s) for s in previous["segments"]] if previous else []
        for segment in segments:
            if segment.get("status") == "running":
                segment["status"] = "lost"
        self.data: dict[str, Any] = {**run, "steps": 0, "timesteps": 0, "segments": segments}
        self.data.update(evaluation={}, policy=None)

    @staticmethod
    def read(path: Path) -> dict[str, Any] | None:
        """The ``train.json`` of earlier segments, or ``None`` if there is none.

        :raises G2GError: the file exists but is not valid JSON with a ``segments`` list.
        """
        if not path.is_file():
            return None
        try:
            record = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise G2GError(f"{path}: cannot read the training record: {exc}") from None
        if not isinstance(record, dict) or not isinstance(record.get("segments"), list):
            raise G2GError(f"{path}: not a training record (no 'segments' list); move it away to resume")
        return record

    def start(
        self, from_step: int, target_steps: int, n_envs: int, seed: int, eval_every: int, val_episodes: int
    ) -> None:
        """Add a ``running`` segment and write the file."""
        self.data.update(steps=target_steps, timesteps=from_step)
        self.data["segments"].append(
            {
                "from_step": from_step,
                "to_step": None,
                "target_steps": target_steps,
                "n_envs": n_envs,
                "seed": seed,
                "eval_every": eval_every,
                "val_episodes": val_episodes,
                "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "wall_time_s": None,
                "steps_per_s": None,
                "status": "running",
            }
        )
        self._write()

    def end(self, to_step: int, wall_time_s: float, status: str) -> None:
        """Close the running segment at ``to_step`` with ``status`` and write the file."""
        segment = self.data["segments"][-1]
        trained = to_step - segment["from_step"]
        segment.update(
            to_step=to_step,
            wall_time_s=wall_time_s,
            steps_per_s=trained / wall_time_s if wall_time_s > 0 and trained > 0 else None,
            status=status,
        )
        self.data["timesteps"] = to_step
        self._write()

    def finish(self, evaluation: dict[str, Any], policy: Path) -> None:
        """Record the final policy and its evaluation and write the file."""
        self.data.update(evaluation=evaluation, policy=str(policy))
        self._write()

    def _write(self) -> None:
        write_json_atomic(self.path, self.data)
