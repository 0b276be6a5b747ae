"""rl-zoo's layout of a training run: periodic evaluation on the validation set (``evaluations.npz``,
``best_model.zip`` with its settings), continued by ``--resume``, and ``vecnormalize.pkl`` beside
each policy, read back by ``rl_policy``."""

from __future__ import annotations

import itertools
import json
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

from openg2g.cli.main import main
from openg2g.control.registry import build_controller
from openg2g.envs import G2GEnv, make_toy_env
from openg2g.envs.policy import FORMAT, PolicyMeta, load_policy, read_meta
from openg2g.envs.training import PeriodicEvaluation, TrainSettings, train_policy
from openg2g.envs.training_run import Evaluations, normalization_path
from openg2g.envs.variations import Variation
from openg2g.scenario.schema import ControllerSpec

RL_POLICY_KIND = "openg2g.controllers.rl_policy:RLPolicy"  # by module, registered or not
DURATION_S = 11  # 10 control steps an episode
SETTINGS = TrainSettings(n_steps=50, batch_size=50)
EVAL_EVERY = 100
VAL_EPISODES = 2


def _train(out: Path, steps: int, messages: list[str] | None = None, **kwargs) -> None:
    options = {"settings": SETTINGS, "checkpoint_every": EVAL_EVERY, "eval_every": EVAL_EVERY}
    train_policy(
        "toy",
        out,
        steps=steps,
        overrides=[f"duration_s={DURATION_S}"],
        val_episodes=VAL_EPISODES,
        eval_episodes=0,
        progress=False,
        log=(messages if messages is not None else []).append,
        **(options | kwargs),
    )


def _toy() -> G2GEnv:
    return make_toy_env(duration_s=DURATION_S)


def _validation_set(env: G2GEnv) -> list[Variation]:
    return env.generator.validation_set(VAL_EPISODES, env.config.eval_seed)


def _returns(model: PPO, env: G2GEnv, variations: list[Variation]) -> list[float]:
    """Each variation's total reward under the model's deterministic actions (the test's own loop)."""
    totals = []
    for k, variation in enumerate(variations):
        obs, _ = env.reset(seed=k, options={"variation": variation})
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(model.predict(obs, deterministic=True)[0])
            total, done = total + float(reward), terminated or truncated
        totals.append(total)
    return totals


def _weights(path: Path) -> dict[str, torch.Tensor]:
    return load_policy(path)[0].policy.state_dict()


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """PPO trained 300 steps on the toy case, evaluated (and checkpointed) every 100."""
    out = tmp_path_factory.mktemp("evaluated")
    _train(out, 300)
    return out


def test_validation_and_held_out_sets_are_apart():
    env = _toy()
    n, seed = env.config.n_eval, env.config.eval_seed
    validation = [v.drawn for v in env.generator.validation_set(n, seed)]
    assert validation == [v.drawn for v in env.generator.validation_set(n, seed)]  # a fixed set
    held_out = [v.drawn for v in env.evaluation_set()]
    assert len(held_out) == n and not any(v in held_out for v in validation)


@pytest.mark.slow
def test_evaluations_npz_holds_the_checkpoints_scores_on_the_validation_set(evaluated):
    with np.load(evaluated / "evaluations.npz") as saved:
        assert sorted(saved.files) == ["ep_lengths", "results", "timesteps"]  # rl-zoo's keys
        timesteps, results, lengths = saved["timesteps"], saved["results"], saved["ep_lengths"]
    assert timesteps.tolist() == [100, 200, 300]
    assert results.shape == lengths.shape == (3, VAL_EPISODES)
    assert (lengths == DURATION_S - 1).all()
    env = _toy()
    for row, steps in zip(results, timesteps):
        model = load_policy(evaluated / "checkpoints" / f"model_{steps}_steps.zip")[0]
        assert row.tolist() == _returns(model, env, _validation_set(env)), steps


@pytest.mark.slow
def test_best_model_is_the_first_best_evaluation_and_deploys(evaluated):
    with np.load(evaluated / "evaluations.npz") as saved:
        means = saved["results"].mean(axis=1)
        best_steps = int(saved["timesteps"][int(np.argmax(means))])
    assert read_meta(evaluated / "best_model.zip").timesteps == best_steps
    checkpoint = _weights(evaluated / "checkpoints" / f"model_{best_steps}_steps.zip")
    best = _weights(evaluated / "best_model.zip")
    assert all(torch.equal(best[k], checkpoint[k]) for k in checkpoint)
    controller = build_controller(
        ControllerSpec(kind=RL_POLICY_KIND, params={"policy": str(evaluated / "best_model.zip")}), Path(".")
    )
    env = make_toy_env(duration_s=DURATION_S, variations=None)
    obs, _ = env.reset(seed=0)
    controller.reset(env.context, 0)
    action = load_policy(evaluated / "best_model.zip")[0].predict(obs, deterministic=True)[0]
    observed = env.sim.observation()
    assert controller.step(observed) == env.layout.commands(action, observed)


@pytest.mark.slow
def test_periodic_evaluation_leaves_training_as_it_was(evaluated, tmp_path):
    _train(tmp_path, 300, eval_every=0)
    assert not (tmp_path / "evaluations.npz").exists() and not (tmp_path / "best_model.zip").exists()
    plain, with_evaluation = _weights(tmp_path / "policy.zip"), _weights(evaluated / "policy.zip")
    assert all(torch.equal(plain[k], with_evaluation[k]) for k in plain)


@pytest.mark.slow
def test_vecnormalize_beside_each_policy_is_the_trained_statistics(evaluated):
    best_steps = read_meta(evaluated / "best_model.zip").timesteps
    for saved, checkpoint in (
        (evaluated / "vecnormalize.pkl", 300),
        (evaluated / "best_model_vecnormalize.pkl", best_steps),
    ):
        with saved.open("rb") as f, normalization_path(evaluated / "checkpoints", checkpoint).open("rb") as g:
            ours, theirs = pickle.load(f), pickle.load(g)
        assert ours.ret_rms.count == theirs.ret_rms.count > 0
        assert (ours.ret_rms.mean, ours.ret_rms.var) == (theirs.ret_rms.mean, theirs.ret_rms.var)


@pytest.mark.slow
def test_rl_policy_with_the_saved_vecnormalize_takes_the_models_actions(evaluated):
    """SB3's own loading of the zip and the statistics against ``rl_policy`` given both, step by step."""
    model = PPO.load(evaluated / "policy.zip", device="cpu")
    stats = VecNormalize.load(str(evaluated / "vecnormalize.pkl"), DummyVecEnv([_toy]))
    stats.training = False
    params = {"policy": str(evaluated / "policy.zip"), "vecnormalize": str(evaluated / "vecnormalize.pkl")}
    controller = build_controller(ControllerSpec(kind=RL_POLICY_KIND, params=params), Path("."))
    env = make_toy_env(duration_s=DURATION_S, variations=None)
    obs, _ = env.reset(seed=0)
    controller.reset(env.context, 0)
    done, steps = False, 0
    while not done:
        action = model.predict(stats.normalize_obs(obs), deterministic=True)[0]
        observed = env.sim.observation()
        assert controller.step(observed) == env.layout.commands(action, observed), f"step {steps}"
        obs, _, terminated, truncated, _ = env.step(action)
        done, steps = terminated or truncated, steps + 1
    assert steps == DURATION_S - 1


@pytest.mark.slow
def test_resume_continues_the_evaluations_and_keeps_the_best(tmp_path, capsys):
    """Weights held (learning rate 0): every evaluation scores the same, so the first stays the best
    and a resumed segment, which must beat the stored best, saves none. The resume is the CLI's,
    taking --eval-every and --val-episodes from train.json; raw rewards leave no statistics."""
    out = tmp_path / "run"
    held = TrainSettings(n_steps=50, batch_size=50, learning_rate=0.0, normalize_reward=False)
    _train(out, 200, settings=held)
    best_zip = (out / "best_model.zip").read_bytes()
    assert (
        main(["train", "--resume", "--out", str(out), "--steps", "300", "--no-progress", "--eval-episodes", "0"]) == 0
    )
    assert "continuing evaluations.npz: 2 evaluations" in capsys.readouterr().out
    with np.load(out / "evaluations.npz") as saved:
        assert saved["timesteps"].tolist() == [100, 200, 300]
        results = saved["results"]
    assert (results == results[0]).all()
    assert read_meta(out / "best_model.zip").timesteps == 100
    assert (out / "best_model.zip").read_bytes() == best_zip
    assert [s["eval_every"] for s in json.loads((out / "train.json").read_text())["segments"]] == [100, 100]
    assert not list(out.glob("*vecnormalize*.pkl"))
    # another number of validation episodes cannot continue the file: refused, naming it
    assert main(["train", "--resume", "--out", str(out), "--steps", "400", "--no-progress", "--val-episodes", "3"]) == 1
    err = capsys.readouterr().err
    assert f"{out / 'evaluations.npz'}: its evaluations score 2 episodes each, this run asks for 3" in err
    # a fresh run over it deletes the old run's evaluations, best model and statistics
    _train(out, 50, eval_every=0, overwrite=True)
    assert not any((out / name).exists() for name in ("evaluations.npz", "best_model.zip", "best_model.json"))


@pytest.mark.slow
def test_resume_after_an_unsaved_end_drops_the_evaluations_it_repeats(tmp_path, capsys):
    """A segment that evaluated at 200 and 300 but whose checkpoints there were lost resumes from
    100: the two evaluations are dropped and made again, so no timestep is recorded twice."""
    out = tmp_path / "run"
    held = TrainSettings(n_steps=50, batch_size=50, learning_rate=0.0, normalize_reward=False)
    _train(out, 300, settings=held)
    for lost in out.glob("checkpoints/*"):
        if "_100_" not in lost.name:
            lost.unlink()
    assert (
        main(["train", "--resume", "--out", str(out), "--steps", "300", "--no-progress", "--eval-episodes", "0"]) == 0
    )
    printed = capsys.readouterr().out
    assert "evaluations.npz: dropped 2 evaluations made after step 100" in printed
    assert "continuing evaluations.npz: 1 evaluations" in printed
    with np.load(out / "evaluations.npz") as saved:
        assert saved["timesteps"].tolist() == [100, 200, 300]


def test_a_kept_best_model_from_a_dropped_evaluation_stays_the_one_to_beat(tmp_path):
    evaluations = Evaluations(tmp_path / "evaluations.npz", 2, [100, 200, 300], [[1.0, 1.0], [3.0, 5.0], [2.0, 2.0]])
    evaluations.ep_lengths = [[10, 10]] * 3
    assert evaluations.truncate(100, best_model_steps=200) == 2
    assert evaluations.timesteps == [100] and evaluations.results == [[1.0, 1.0]]
    assert evaluations.best_mean == 4.0  # best_model.zip's mean, (3 + 5) / 2, not the kept 1.0
    evaluations.append(200, [3.5, 3.5], [10, 10])
    assert evaluations.best_mean == 4.0
    # a best model from a kept evaluation sets no floor
    fresh = Evaluations(tmp_path / "other.npz", 1, [100, 200], [[1.0], [3.0]], [[10], [10]])
    assert fresh.truncate(100, best_model_steps=100) == 1 and fresh.best_mean == 1.0


def test_a_stop_abandons_an_evaluation_under_way(tmp_path):
    """The stop arrives after 4 env steps of the first of two 10-step validation episodes: the
    evaluation returns at once, records nothing and saves no best model."""
    env = _toy()
    model = PPO("MlpPolicy", env, n_steps=50, batch_size=50, seed=0, device="cpu")
    meta = PolicyMeta(
        format=FORMAT, timesteps=0, algo="ppo", scenario="toy", env=env.config, layout=env.layout.describe()
    )
    asks = itertools.count()
    logged: list[str] = []
    evaluation = PeriodicEvaluation(
        100,
        env,
        _validation_set(env),
        Evaluations(tmp_path / "evaluations.npz", VAL_EPISODES),
        meta,
        logged.append,
        stopped=lambda: next(asks) == 4,
    )
    evaluation.init_callback(model)
    assert evaluation.evaluate(100) is None
    assert next(asks) == 5  # asked before each of the 4 steps taken and the one not taken
    assert logged == ["evaluation at 100 steps abandoned: training is stopping"]
    assert not (tmp_path / "evaluations.npz").exists() and not (tmp_path / "best_model.zip").exists()
