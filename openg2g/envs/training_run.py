"""A training run's folder, and how a resumed run continues it rather than starting a new one.

:func:`~openg2g.envs.training.train_policy` writes, in its output folder::

    checkpoints/model_<N>_steps.zip, .json         model and its env settings after N steps
    checkpoints/model_vecnormalize_<N>_steps.pkl   reward-normalization statistics after N steps
    logs/progress.csv                              SB3's logger, one row per update, all segments
    monitor.csv                                    one row per finished training episode, all segments
    train.json                                     the run's settings and one entry per segment

A *segment* is one ``train_policy`` call: the first, then one per ``--resume``. Each resumed segment
loads the latest checkpoint with its normalization statistics, appends to ``logs/progress.csv`` and
``monitor.csv`` (whose ``t`` column keeps counting from the first segment's start) and adds an entry
to ``train.json``'s ``segments``. A segment also checkpoints when it ends or is interrupted, so the
next one starts exactly where it stopped.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from stable_baselines3.common.callbacks import CheckpointCallback
from stable_baselines3.common.logger import CSVOutputFormat
from stable_baselines3.common.monitor import ResultsWriter
from stable_baselines3.common.vec_env import VecEnv, VecMonitor, VecNormalize

from openg2g.core.errors import G2GError
from openg2g.core.jsontext import json_text
from openg2g.envs.policy import PolicyMeta, save_policy

__all__ = [
    "CHECKPOINT_PREFIX",
    "Checkpoints",
    "ContinuedCSV",
    "TrainRecord",
    "latest_checkpoint",
    "load_normalization",
    "monitor",
    "normalization_path",
]

CHECKPOINT_PREFIX = "model"
"""Checkpoint names are SB3's ``<prefix>_<N>_steps.zip`` and ``<prefix>_vecnormalize_<N>_steps.pkl``."""

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
        vec_normalize = self.model.get_vec_normalize_env()
        if vec_normalize is not None:
            vec_normalize.save(str(normalization_path(Path(self.save_path), self.num_timesteps)))
        return zip_path


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
    ``started`` (UTC), ``wall_time_s``, ``steps_per_s`` and ``status``: ``running``, then
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

    def start(self, from_step: int, target_steps: int, n_envs: int, seed: int) -> None:
        """Add a ``running`` segment and write the file."""
        self.data.update(steps=target_steps, timesteps=from_step)
        self.data["segments"].append(
            {
                "from_step": from_step,
                "to_step": None,
                "target_steps": target_steps,
                "n_envs": n_envs,
                "seed": seed,
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
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json_text(self.data, str(self.path)) + "\n")
        tmp.replace(self.path)
