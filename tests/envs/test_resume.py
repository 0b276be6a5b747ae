"""``train_policy(resume=True)`` continues one run: same logs and monitor file, normalization
statistics restored, one train.json segment per call; and TensorBoard logging on request."""

from __future__ import annotations

import importlib.util
import json
import pickle
import re
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from openg2g.cli.main import main
from openg2g.core.errors import G2GError
from openg2g.envs.training import TrainSettings, train_policy
from openg2g.envs.training_run import latest_checkpoint, normalization_path

HAVE_TENSORBOARD = importlib.util.find_spec("tensorboard") is not None
SETTINGS = TrainSettings(n_steps=64, batch_size=64)
SETTINGS_JSON = {k: list(v) if isinstance(v, tuple) else v for k, v in SETTINGS.__dict__.items()}


def _train(out: Path, steps: int, resume: bool, messages: list[str] | None = None, **kwargs) -> None:
    train_policy(
        "toy",
        out,
        steps=steps,
        overrides=["duration_s=11"],  # 10 steps per episode
        settings=kwargs.pop("settings", SETTINGS),
        resume=resume,
        checkpoint_every=128,
        eval_episodes=0,
        progress=False,
        log=(messages if messages is not None else []).append,
        **kwargs,
    )


def _stats(out: Path, steps: int):
    with normalization_path(out / "checkpoints", steps).open("rb") as f:
        return pickle.load(f).ret_rms


def _monitor(out: Path) -> tuple[list[str], pd.DataFrame]:
    text = (out / "monitor.csv").read_text()
    return [line for line in text.splitlines() if line.startswith("#")], pd.read_csv(out / "monitor.csv", skiprows=1)


@pytest.fixture(scope="module")
def two_segments(tmp_path_factory):
    """A run trained to 256 steps, then resumed to 384; the folder and what the first segment left."""
    out = tmp_path_factory.mktemp("resume")
    _train(out, 256, resume=False)
    first = {
        "monitor": _monitor(out)[1],
        "progress": pd.read_csv(out / "logs" / "progress.csv"),
        "stats": _stats(out, 256),
    }
    messages: list[str] = []
    _train(out, 384, resume=True, messages=messages)
    return out, first, messages


@pytest.mark.slow
def test_resume_appends_to_the_same_monitor_file(two_segments):
    out, first, messages = two_segments
    assert messages == [f"resuming from {out / 'checkpoints' / 'model_256_steps.zip'} (256 steps)"]
    assert sorted(p.name for p in out.iterdir()) == [
        "checkpoints",
        "logs",
        "monitor.csv",
        "policy.json",
        "policy.zip",
        "train.json",
        "vecnormalize.pkl",
    ]
    headers, rows = _monitor(out)
    assert len(headers) == 1  # one header: the second segment appended rows only
    n = len(first["monitor"])
    # 10-step episodes: 256 // 10 in the first segment; the envs reset at resume, so 128 // 10 more
    assert n == 25 and len(rows) == 25 + 12
    pd.testing.assert_frame_equal(rows.iloc[:n], first["monitor"])
    assert (rows["l"] == 10).all() and rows["t"].is_monotonic_increasing  # t counts from the first start


@pytest.mark.slow
def test_resume_continues_the_progress_log(two_segments):
    out, first, _ = two_segments
    progress = pd.read_csv(out / "logs" / "progress.csv")
    n = len(first["progress"])
    assert n == 4 and len(progress) == 6  # one row per 64-step rollout
    pd.testing.assert_frame_equal(progress.iloc[:n][first["progress"].columns], first["progress"])
    assert progress["time/total_timesteps"].tolist() == [64, 128, 192, 256, 320, 384]


@pytest.mark.slow
def test_resume_restores_the_normalization_statistics(two_segments):
    out, first, _ = two_segments
    at_256, at_384 = first["stats"], _stats(out, 384)
    # the file saved at 256 steps is untouched and the resumed segment added its 128 returns to it
    np.testing.assert_array_equal(_stats(out, 256).mean, at_256.mean)
    assert at_256.count == pytest.approx(256, abs=1e-3)
    assert at_384.count == pytest.approx(at_256.count + 128, abs=1e-9)
    # resuming with nothing left to train saves the checkpoint again from the loaded statistics
    messages: list[str] = []
    _train(out, 384, resume=True, messages=messages)
    assert messages[-1].endswith("already has 384 of the 384 steps asked for; nothing to train")
    again = _stats(out, 384)
    for name in ("mean", "var", "count"):
        np.testing.assert_array_equal(getattr(again, name), getattr(at_384, name))


@pytest.mark.slow
def test_train_json_keeps_every_segment(two_segments):
    out, _, _ = two_segments
    record = json.loads((out / "train.json").read_text())
    segments = record["segments"]
    assert [(s["from_step"], s["to_step"], s["target_steps"], s["status"]) for s in segments[:2]] == [
        (0, 256, 256, "finished"),
        (256, 384, 384, "finished"),
    ]
    assert record["timesteps"] == latest_checkpoint(out / "checkpoints")[1] == 384
    assert record["settings"]["learning_rate"] == SETTINGS.learning_rate


@pytest.mark.slow
def test_resume_refuses_other_hyper_parameters(two_segments):
    out, _, _ = two_segments
    with pytest.raises(G2GError, match=r"other settings \(learning_rate 0\.0003 -> 0\.001\)"):
        _train(out, 512, resume=True, settings=TrainSettings(n_steps=64, batch_size=64, learning_rate=1e-3))


def _cli_resume(out: Path, *options: str) -> int:
    return main(["train", "--resume", "--out", str(out), "--eval-episodes", "0", "--no-progress", *options])


@pytest.mark.slow
def test_cli_resume_reuses_the_stored_configuration(two_segments, tmp_path):
    """No scenario, --set or hyper-parameter given again: train.json's are used (toy, duration_s=11,
    n_steps=64), and the run continues from 384 to the 512 steps asked for."""
    out = tmp_path / "run"
    shutil.copytree(two_segments[0], out)
    assert _cli_resume(out, "--steps", "512", "--checkpoint-every", "128") == 0
    record = json.loads((out / "train.json").read_text())
    assert (record["scenario"], record["overrides"], record["settings"]) == ("toy", ["duration_s=11"], SETTINGS_JSON)
    last = record["segments"][-1]
    assert (last["from_step"], last["to_step"], last["status"]) == (384, 512, "finished")


@pytest.mark.slow
def test_cli_resume_from_a_truncated_checkpoint_says_so_without_a_traceback(two_segments, tmp_path, capsys):
    out = tmp_path / "run"
    shutil.copytree(two_segments[0], out)
    latest = out / "checkpoints" / "model_384_steps.zip"
    latest.write_bytes(latest.read_bytes()[:3000])
    record = (out / "train.json").read_bytes()
    assert _cli_resume(out, "--steps", "512") == 1
    assert capsys.readouterr().err == (
        f"error: {latest}: damaged checkpoint, not a whole zip file (File is not a zip file); move it away to "
        "resume from an earlier checkpoint, or start afresh with --overwrite\n"
    )
    assert (out / "train.json").read_bytes() == record


@pytest.mark.slow
def test_cli_resume_names_the_field_that_differs(two_segments, tmp_path, capsys):
    out = tmp_path / "run"
    shutil.copytree(two_segments[0], out)
    assert _cli_resume(out, "--env", "reward.voltage=200") == 1
    assert "trained otherwise (env.reward.voltage 100.0 -> 200.0); resume with the same" in capsys.readouterr().err
    assert _cli_resume(out, "--gamma", "0.9") == 1
    assert "other settings (gamma 0.95 -> 0.9)" in capsys.readouterr().err


def test_cli_resume_without_a_record_needs_a_scenario(tmp_path, capsys):
    assert _cli_resume(tmp_path) == 2
    assert f"error: scenario: missing (--resume found no train.json in {tmp_path})" in capsys.readouterr().err


def test_resume_without_a_checkpoint_is_refused_and_leaves_train_json_as_it_was(tmp_path):
    """It used to start from step 0 and write a new train.json over the run's history."""
    empty = tmp_path / "empty"
    with pytest.raises(
        G2GError,
        match=rf"^--resume: no checkpoint to continue from in {re.escape(str(empty / 'checkpoints'))} "
        r"\(model_<N>_steps\.zip beside its \.json\); start without --resume$",
    ):
        _train(empty, 128, resume=True)
    assert not (empty / "train.json").exists()
    out = tmp_path / "run"
    (out / "checkpoints").mkdir(parents=True)
    (out / "train.json").write_text('{"segments": ["the earlier ones"]}')
    with pytest.raises(G2GError, match=rf"; start afresh with --overwrite \(which replaces {re.escape(str(out))}"):
        _train(out, 128, resume=True)
    assert (out / "train.json").read_text() == '{"segments": ["the earlier ones"]}'
    assert sorted(p.name for p in out.iterdir()) == ["checkpoints", "train.json"]


def _checkpoint(folder: Path, steps: int, damage: str) -> Path:
    """A checkpoint holding SB3's members, cut short (``"cut"``) or with a flipped byte (``"flip"``)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"model_{steps}_steps.zip"
    with zipfile.ZipFile(path, "w") as zf:  # stored: the member's bytes lie in the file as they are
        zf.writestr("data", json.dumps({"policy_class": "x"}))
        zf.writestr("policy.pth", bytes(range(256)) * 16)
    raw = bytearray(path.read_bytes())
    if damage == "cut":
        raw = raw[: len(raw) // 2]
    else:
        raw[raw.index(bytes(range(256)))] ^= 0xFF
    path.write_bytes(bytes(raw))
    path.with_suffix(".json").write_text("{}")
    return path


@pytest.mark.parametrize(
    ("damage", "why"),
    [("cut", r"not a whole zip file \(File is not a zip file\)"), ("flip", r"policy\.pth in it fails its CRC check")],
)
def test_resume_from_a_damaged_checkpoint_is_refused_naming_it(tmp_path, capsys, damage, why):
    """A checkpoint cut short by a full disk or a kill used to end in SB3's traceback."""
    out = tmp_path / "run"
    path = _checkpoint(out / "checkpoints", 128, damage)
    (out / "train.json").write_text("{}")
    with pytest.raises(G2GError, match=rf"^{re.escape(str(path))}: damaged checkpoint, {why}; move it away to resume"):
        _train(out, 256, resume=True)
    assert (out / "train.json").read_text() == "{}"
    assert sorted(p.name for p in out.rglob("*")) == [
        "checkpoints",
        "model_128_steps.json",
        "model_128_steps.zip",
        "train.json",
    ]


@pytest.mark.slow
def test_a_fresh_run_refuses_a_folder_holding_one(two_segments):
    out, _, _ = two_segments
    with pytest.raises(G2GError, match=f"{out} already holds a training run \\(model_384_steps.zip\\); continue it"):
        _train(out, 512, resume=False)


@pytest.mark.skipif(HAVE_TENSORBOARD, reason="checks the message given when tensorboard is missing")
def test_tensorboard_missing_is_a_clear_error(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["train", "toy", "--steps", "64", "--out", str(out), "--tensorboard", str(tmp_path / "tb")])
    assert code != 0
    assert "--tensorboard needs the tensorboard package, which is not installed: pip install tensorboard" in (
        capsys.readouterr().err
    )
    assert not out.exists()  # refused before the output folder was made


@pytest.mark.skipif(not HAVE_TENSORBOARD, reason="tensorboard is not installed")
def test_tensorboard_logs_continue_the_same_run(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out, tb = tmp_path / "run", tmp_path / "tb"
    _train(out, 128, resume=False, tensorboard=tb)
    _train(out, 192, resume=True, tensorboard=tb)
    assert [p.name for p in tb.iterdir()] == ["run_1"]  # the resumed segment wrote to the same run
    events = EventAccumulator(str(tb / "run_1"))
    events.Reload()
    assert "rollout/ep_rew_mean" in events.Tags()["scalars"]
    assert [e.step for e in events.Scalars("time/fps")] == [64, 128, 192]  # one per rollout, steps continued
