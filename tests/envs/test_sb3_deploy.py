"""Deploying a model trained by a plain Stable-Baselines3 script (PPO on normalized observations,
``VecNormalize(norm_obs=True)``) through ``kind: rl_policy``: the statistics are applied, refused
when missing, spaces that differ are named, and ``openg2g policy wrap`` writes settings the
controller accepts."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from stable_baselines3 import PPO
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

from openg2g.cli.main import main
from openg2g.control.registry import build_controller
from openg2g.core.errors import ControllerError
from openg2g.engine.simulation import Simulation
from openg2g.envs import make_toy_env
from openg2g.record.metrics import MetricsRecorder
from openg2g.scenario.schema import ControllerSpec
from openg2g.testing import toy_components, toy_scenario

RL_POLICY_KIND = "openg2g.controllers.rl_policy:RLPolicy"  # by module, registered or not
DURATION_S = 31


def _toy() -> gym.Env:
    return make_toy_env(duration_s=DURATION_S)


@pytest.fixture(scope="module")
def sb3_model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """``(model zip, vecnormalize.pkl)`` of PPO trained for a few hundred steps as SB3's docs do it."""
    folder = tmp_path_factory.mktemp("sb3")
    vec = VecNormalize(DummyVecEnv([_toy]), norm_obs=True, norm_reward=False)
    model = PPO("MlpPolicy", vec, n_steps=128, batch_size=64, seed=0, device="cpu")
    model.learn(384)
    model.save(folder / "ppo.zip")
    vec.save(str(folder / "vecnormalize.pkl"))
    return folder / "ppo.zip", folder / "vecnormalize.pkl"


def _controller(**params: object):
    return build_controller(ControllerSpec(kind=RL_POLICY_KIND, params=params), Path("."))


@pytest.mark.slow
def test_deployed_actions_are_the_models_on_normalized_observations(sb3_model):
    zip_path, stats_path = sb3_model
    model = PPO.load(zip_path, device="cpu")  # SB3's own loading (the test trusts its own files)
    stats = VecNormalize.load(str(stats_path), DummyVecEnv([_toy]))
    stats.training = False
    controller = _controller(policy=str(zip_path), vecnormalize=str(stats_path))
    env = make_toy_env(duration_s=DURATION_S, variations=None)
    obs, _ = env.reset(seed=0)
    controller.reset(env.context, 0)
    done, steps, raw_differs = False, 0, False
    while not done:
        action = model.predict(stats.normalize_obs(obs), deterministic=True)[0]
        raw_differs |= not np.array_equal(action, model.predict(obs, deterministic=True)[0])
        observed = env.sim.observation()
        assert controller.step(observed) == env.layout.commands(action, observed), f"step {steps}"
        obs, _, terminated, truncated, _ = env.step(action)
        done, steps = terminated or truncated, steps + 1
    assert steps == DURATION_S - 1  # floor(31 s / 1 s) - 1 control steps
    assert raw_differs  # on raw observations the model acts otherwise: the statistics matter


@pytest.mark.slow
def test_missing_statistics_are_refused(sb3_model, tmp_path):
    source_zip, _ = sb3_model
    zip_path = tmp_path / "ppo.zip"  # away from the vecnormalize.pkl saved beside it
    zip_path.write_bytes(source_zip.read_bytes())
    env = make_toy_env(duration_s=DURATION_S, variations=None)
    env.reset(seed=0)
    with pytest.raises(ControllerError, match="trained under SB3's VecNormalize") as exc:
        _controller(policy=str(zip_path)).reset(env.context, 0)
    assert "vecnormalize: path/to/vecnormalize.pkl" in str(exc.value)
    wrong = zip_path.with_name("model_as_stats.pkl")
    wrong.write_bytes(zip_path.read_bytes())
    with pytest.raises(ControllerError, match="cannot read it without unpickling code"):
        _controller(policy=str(zip_path), vecnormalize=str(wrong)).reset(env.context, 0)


class _Spaces(gym.Env):
    """An env of given spaces only (SB3 needs one to build a model); never stepped."""

    def __init__(self, observation_space: spaces.Space, action_space: spaces.Space):
        self.observation_space, self.action_space = observation_space, action_space


@pytest.mark.parametrize(
    ("observation_space", "action_space", "named"),
    [
        (
            spaces.Box(-10, 10, (20,), np.float32),
            spaces.MultiDiscrete([3, 3]),
            "observation: the scenario gives Box(shape=(15,)), the policy expects Box(shape=(20,))",
        ),
        (
            spaces.Box(-5, 5, (15,), np.float32),
            spaces.MultiDiscrete([3, 3]),
            "observation bounds: the scenario gives [-10, 10] float32, the policy expects [-5, 5] float32",
        ),
        (
            spaces.Box(-10, 10, (15,), np.float32),
            spaces.MultiDiscrete([3, 3, 3]),
            (
                "the scenario gives MultiDiscrete(nvec=[3, 3]) (2 controllable models: ['dc/toy-a', 'dc/toy-b']), "
                "the policy expects MultiDiscrete(nvec=[3, 3, 3])"
            ),
        ),
        (
            spaces.Box(-10, 10, (15,), np.float32),
            spaces.Box(-2, 2, (2,), np.float32),
            "action bounds: the scenario gives [-1, 1] float32, the policy expects [-2, 2] float32",
        ),
    ],
)
def test_a_model_of_other_spaces_is_refused_naming_the_difference(tmp_path, observation_space, action_space, named):
    zip_path = tmp_path / "other.zip"
    PPO("MlpPolicy", _Spaces(observation_space, action_space), device="cpu").save(zip_path)
    env = make_toy_env(duration_s=DURATION_S, variations=None)
    env.reset(seed=0)
    with pytest.raises(ControllerError, match="does not fit this scenario") as exc:
        _controller(policy=str(zip_path)).reset(env.context, 0)
    assert named in str(exc.value)


@pytest.mark.slow
def test_policy_wrap_writes_settings_that_rl_policy_runs(sb3_model, tmp_path, capsys):
    source_zip, stats_path = sb3_model
    zip_path = tmp_path / "deploy" / "ppo.zip"
    zip_path.parent.mkdir()
    zip_path.write_bytes(source_zip.read_bytes())
    wrap = ["policy", "wrap", str(zip_path), "--scenario", "toy", "--set", f"duration_s={DURATION_S}"]
    assert main(wrap) == 2  # trained under VecNormalize, no statistics beside it: they (or none) must be named
    assert "give the statistics (--vecnormalize path/to/vecnormalize.pkl)" in capsys.readouterr().err
    assert main([*wrap, "--vecnormalize", str(stats_path)]) == 0
    settings = json.loads(zip_path.with_suffix(".json").read_text())
    assert settings["algo"] == "ppo" and settings["env"]["action"] == "discrete"
    assert not Path(settings["vecnormalize"]).is_absolute()  # relative to the JSON file: the folder can move
    assert (zip_path.parent / settings["vecnormalize"]).resolve() == stats_path.resolve()
    assert settings["layout"]["controlled"] == ["dc/toy-a", "dc/toy-b"]
    assert main([*wrap, "--vecnormalize", "none"]) == 2  # the file is there: --force replaces it

    # the wrapped policy runs in a scenario with nothing but its path, as the statistics named
    scenario = toy_scenario(DURATION_S)
    runs = {}
    for label, params in {
        "wrapped": {"policy": str(zip_path)},
        "named": {"policy": str(source_zip), "vecnormalize": str(stats_path)},
        "raw": {"policy": str(source_zip), "vecnormalize": "none"},
    }.items():
        spec = ControllerSpec(kind=RL_POLICY_KIND, params=params)
        sites, grid, _ = toy_components(scenario)
        loaded = type(scenario)(
            scenario.scenario.model_copy(update={"controllers": [spec]}),
            scenario.path,
            scenario.base_dir,
            scenario.sha256,
        )
        sim = Simulation.from_scenario(loaded, None, components=(sites, grid, [build_controller(spec, Path("."))]))
        sim.run_until(DURATION_S)
        summary = sim.recorder(MetricsRecorder).figures()
        summary.pop("wall_time_s", None)
        runs[label] = summary
    assert runs["wrapped"] == runs["named"]
    assert runs["wrapped"] != runs["raw"]


def _box_toy() -> gym.Env:
    return make_toy_env(duration_s=DURATION_S, action="box")


def _wrap(zip_path: Path, *extra: str) -> list[str]:
    return ["policy", "wrap", str(zip_path), "--scenario", "toy", "--set", f"duration_s={DURATION_S}", *extra]


@pytest.mark.slow
def test_a_plain_sac_model_wraps_on_raw_observations_without_being_told(tmp_path, capsys):
    from stable_baselines3 import SAC

    model = SAC("MlpPolicy", DummyVecEnv([_box_toy]), learning_starts=10, seed=0, device="cpu")
    model.learn(64)  # SAC keeps _last_original_obs whether or not it ran under VecNormalize
    model.save(tmp_path / "sac.zip")
    assert main(_wrap(tmp_path / "sac.zip", "--env", "action=box")) == 0
    assert "observations: raw" in capsys.readouterr().out
    settings = json.loads((tmp_path / "sac.json").read_text())
    assert settings["algo"] == "sac" and settings["vecnormalize"] is None


@pytest.mark.slow
def test_statistics_saved_beside_the_zip_are_taken(sb3_model, tmp_path, capsys):
    source_zip, stats_path = sb3_model
    rl_zoo = tmp_path / "logs" / "ppo" / "Toy_1"  # rl-zoo's layout: ENV.zip beside ENV/vecnormalize.pkl
    (rl_zoo / "Toy").mkdir(parents=True)
    (rl_zoo / "Toy.zip").write_bytes(source_zip.read_bytes())
    (rl_zoo / "Toy" / "vecnormalize.pkl").write_bytes(stats_path.read_bytes())
    assert main(_wrap(rl_zoo / "Toy.zip")) == 0
    assert f"observations: normalized by {rl_zoo / 'Toy' / 'vecnormalize.pkl'}" in capsys.readouterr().out


@pytest.mark.slow
def test_a_ppo_that_normalized_rewards_only_takes_raw_observations(tmp_path, capsys):
    vec = VecNormalize(DummyVecEnv([_toy]), norm_obs=False, norm_reward=True)
    PPO("MlpPolicy", vec, n_steps=64, batch_size=32, seed=0, device="cpu").learn(64).save(tmp_path / "ppo.zip")
    assert main(_wrap(tmp_path / "ppo.zip")) == 2  # the zip shows the wrapper, not what it normalized
    assert "none if it normalized rewards only" in capsys.readouterr().err
    vec.save(str(tmp_path / "vecnormalize.pkl"))  # its statistics beside it say: rewards only
    assert main(_wrap(tmp_path / "ppo.zip")) == 0
    assert "observations: raw" in capsys.readouterr().out
    assert json.loads((tmp_path / "ppo.json").read_text())["vecnormalize"] is None


@pytest.mark.slow
def test_maskable_ppo_deploys_as_its_own_network_without_algo(tmp_path):
    from sb3_contrib import MaskablePPO

    model = MaskablePPO("MlpPolicy", DummyVecEnv([_toy]), n_steps=64, batch_size=32, seed=0, device="cpu")
    model.learn(64)
    model.save(tmp_path / "maskable.zip")
    assert main(_wrap(tmp_path / "maskable.zip")) == 0
    assert json.loads((tmp_path / "maskable.json").read_text())["algo"] == "ppo"
    controller = _controller(policy=str(tmp_path / "maskable.zip"))
    env = make_toy_env(duration_s=DURATION_S, variations=None)
    obs, _ = env.reset(seed=0)
    controller.reset(env.context, 0)
    for step in range(10):
        action = model.predict(obs, deterministic=True, action_masks=env.action_masks())[0]
        observed = env.sim.observation()
        assert controller.step(observed) == env.layout.commands(action, observed), f"step {step}"
        obs, *_ = env.step(action)


@pytest.mark.slow
def test_a_recurrent_ppo_zip_is_refused_with_why(tmp_path, capsys):
    from sb3_contrib import RecurrentPPO

    RecurrentPPO("MlpLstmPolicy", DummyVecEnv([_toy]), n_steps=32, batch_size=32, seed=0, device="cpu").save(
        tmp_path / "lstm.zip"
    )
    assert main(_wrap(tmp_path / "lstm.zip")) == 2
    assert "RecurrentPPO, whose LSTM state is carried from step to step" in capsys.readouterr().err
