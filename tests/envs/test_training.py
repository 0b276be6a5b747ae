"""Training end to end on the toy case: PPO beats random, checkpoints resume, the saved policy
runs as a scenario controller and reproduces the env's episode exactly."""

from __future__ import annotations

import argparse
import inspect
import json
from pathlib import Path

import numpy as np
import pytest

from openg2g.cli.main import build_parser
from openg2g.cli.train import parse_env_settings
from openg2g.control.registry import build_controller
from openg2g.core.errors import ControllerError, G2GError
from openg2g.engine.simulation import Simulation
from openg2g.envs import make_toy_env
from openg2g.envs.policy import load_policy, read_meta
from openg2g.envs.train_options import TrainOptions
from openg2g.envs.training import TrainSettings, _check_same_run, score_policy, train_policy
from openg2g.envs.training_run import latest_checkpoint, normalization_path
from openg2g.record.metrics import MetricsRecorder
from openg2g.scenario.schema import ControllerSpec
from openg2g.testing import toy_components, toy_scenario
from tests.envs.conftest import TOY_STEPS

BASE_FEATURES = 15  # the toy's built-in features: 3 zone voltages, 2 site power, 2 models x 5

RL_POLICY_KIND = "openg2g.controllers.rl_policy:RLPolicy"  # by module, registered or not


@pytest.mark.slow  # the session's PPO run on the toy (trained_toy): ~30 s on 2 cores
def test_ppo_beats_random_on_held_out_set(trained_toy):
    result, out = trained_toy
    ev = result.evaluation
    assert ev["episodes"] == 4
    # the random policy walks into voltage violations and deadline misses; PPO learns to avoid them
    assert ev["policy_mean_reward"] > ev["random_mean_reward"] + 5.0, ev
    assert ev["policy_mean_reward"] > ev["hold_mean_reward"], ev  # better than never acting, too
    record = json.loads((out / "train.json").read_text())
    assert record["timesteps"] >= TOY_STEPS and record["evaluation"] == ev
    assert (out / "logs" / "progress.csv").read_text().startswith(("rollout/", "time/", "train/"))
    assert (out / "monitor.csv").is_file()


@pytest.mark.slow  # the session's PPO run on the toy (trained_toy): ~30 s on 2 cores
def test_checkpoints_and_resume(trained_toy, tmp_path):
    _, out = trained_toy
    found = latest_checkpoint(out / "checkpoints")
    assert found is not None and found[1] >= 4000
    assert read_meta(found[0]).timesteps == found[1]
    resumed = tmp_path / "resumed"
    (resumed / "checkpoints").mkdir(parents=True)
    stats = normalization_path(found[0].parent, found[1])
    for path in (found[0], found[0].with_suffix(".json"), stats):
        (resumed / "checkpoints" / path.name).write_bytes(path.read_bytes())
    messages: list[str] = []
    result = train_policy(
        "toy",
        resumed,
        steps=found[1] + 512,
        n_envs=1,
        overrides=["duration_s=31"],
        resume=True,
        eval_episodes=0,
        progress=False,
        log=messages.append,
    )
    assert messages[0].startswith("resuming from") and result.timesteps >= found[1] + 512
    assert (resumed / "logs" / "progress.csv").is_file() and (resumed / "monitor.csv").is_file()
    # the refusal names the one field that differs, not the whole env configuration
    with pytest.raises(G2GError, match=r"trained otherwise \(env\.action 'discrete' -> 'box'\); resume with the same"):
        train_policy(
            "toy", resumed, steps=10**6, overrides=["duration_s=31"], env_config={"action": "box"}, resume=True
        )


def _run_as_controller(policy: Path, scenario) -> dict:
    spec = ControllerSpec(kind=RL_POLICY_KIND, params={"policy": str(policy)})
    controller = build_controller(spec, Path("."))
    sites, grid, _ = toy_components(scenario)
    loaded = type(scenario)(
        scenario.scenario.model_copy(update={"controllers": [spec]}), scenario.path, scenario.base_dir, scenario.sha256
    )
    sim = Simulation.from_scenario(loaded, None, components=(sites, grid, [controller]))
    sim.run_until(scenario.scenario.duration_s)
    return sim.recorder(MetricsRecorder).figures()


@pytest.mark.slow  # the session's PPO run on the toy (trained_toy): ~30 s on 2 cores
def test_saved_policy_runs_as_controller_like_in_the_env(trained_toy):
    result, _ = trained_toy
    model, meta = load_policy(result.policy)
    assert meta.algo == "ppo" and meta.env.action == "discrete"
    scenario = toy_scenario(31)
    env = make_toy_env(duration_s=31, variations=None)
    obs, _ = env.reset(seed=0)
    done = False
    while not done:
        obs, _, terminated, truncated, _ = env.step(model.predict(obs, deterministic=True)[0])
        done = terminated or truncated
    in_env = env.sim.recorder(MetricsRecorder).figures()
    as_controller = _run_as_controller(result.policy, scenario)
    for key in [k for k, v in in_env.items() if isinstance(v, dict)]:  # per site and model
        assert as_controller.pop(key) == in_env.pop(key)  # dicts: approx takes flat ones
    assert as_controller == pytest.approx(in_env)
    assert in_env["n_batch_changes"] > 0


@pytest.mark.slow  # the session's PPO run on the toy (trained_toy): ~30 s on 2 cores
def test_policy_refuses_a_scenario_with_other_spaces(trained_toy):
    result, _ = trained_toy
    models = toy_scenario(11).scenario.datacenters[0].models
    three = [m.model_dump() for m in models] + [{**models[0].model_dump(), "model": "toy-c"}]
    with pytest.raises(ControllerError) as exc:
        _run_as_controller(result.policy, toy_scenario(11, overrides=[f"datacenters.0.models={json.dumps(three)}"]))
    assert (
        "does not fit this scenario: observation: the scenario gives Box(shape=(20,)), the policy expects Box(shape=(15,))"
        in str(exc.value)
    )
    assert "MultiDiscrete(nvec=[3, 3, 3])" in str(exc.value)


def test_missing_policy_files_are_named(tmp_path):
    with pytest.raises(ControllerError, match="not found"):
        build_controller(ControllerSpec(kind=RL_POLICY_KIND, params={"policy": str(tmp_path / "none.zip")}), Path("."))
    (tmp_path / "lonely.zip").write_bytes(b"")  # no settings beside it: inferred from the zip, which is none
    with pytest.raises(ControllerError, match="lonely.zip: not a Stable-Baselines3 policy zip"):
        build_controller(
            ControllerSpec(kind=RL_POLICY_KIND, params={"policy": str(tmp_path / "lonely.zip")}), Path(".")
        )


def test_score_policy_is_deterministic():
    env = make_toy_env(duration_s=11, n_eval=2)
    hold = lambda obs: np.ones(2, dtype=np.int64)
    assert score_policy(env, hold) == score_policy(env, hold)


def test_cli_registers_train_and_evaluate():
    parser = build_parser()
    args = parser.parse_args(["train", "toy", "--steps", "10", "--env", "action=box", "--env", "reward.voltage=5"])
    assert args.func is not None and args.steps == 10
    assert parse_env_settings(args.env) == {"action": "box", "reward": {"voltage": 5}}
    args = parser.parse_args(["evaluate", "p.zip", "--scenarios", "a", "b", "--baseline"])
    assert args.scenarios == ["a", "b"] and args.baseline


@pytest.mark.slow
def test_box_actions_train_and_deploy(tmp_path):
    """Continuous log2 batch targets: SAC refuses discrete actions; PPO on box trains and deploys."""
    with pytest.raises(G2GError, match="sac needs continuous actions"):
        train_policy("toy", tmp_path / "sac", algo="sac", steps=10, progress=False)
    result = train_policy(
        "toy",
        tmp_path / "box",
        steps=128,
        overrides=["duration_s=11"],
        env_config={"action": "box"},
        settings=TrainSettings(n_steps=64, batch_size=64),
        eval_episodes=1,
        progress=False,
        log=lambda _: None,
    )
    assert read_meta(result.policy).env.action == "box"
    summary = _run_as_controller(result.policy, toy_scenario(11))
    assert summary["grid_steps"] == 110


def _toy_run(out: Path, **kwargs) -> Path:
    """A one-rollout PPO run on the 11 s toy case; returns the policy's zip."""
    options = {"steps": 32, "settings": TrainSettings(n_steps=32, batch_size=32), "eval_episodes": 0}
    options.update(kwargs)
    return train_policy("toy", out, overrides=["duration_s=11"], progress=False, log=lambda _: None, **options).policy


def test_init_from_starts_from_the_saved_weights(tmp_path):
    """With a zero learning rate training cannot move the weights, so the result equals its source."""
    source = _toy_run(tmp_path / "source")
    copy = _toy_run(tmp_path / "copy", seed=7, init_from=source, settings=TrainSettings(32, 32, learning_rate=0.0))
    fresh = _toy_run(tmp_path / "fresh", seed=7, settings=TrainSettings(32, 32, learning_rate=0.0))
    a, b, c = (load_policy(p)[0].policy.state_dict() for p in (source, copy, fresh))
    assert all(np.array_equal(a[k].numpy(), b[k].numpy()) for k in a)
    assert not all(np.array_equal(a[k].numpy(), c[k].numpy()) for k in a)  # other seed, other weights
    assert json.loads((tmp_path / "copy" / "train.json").read_text())["init_from"] == str(source)


def test_init_from_extends_a_batch_policy_with_tap_actions(tmp_path):
    """A batch-size policy fine-tuned with taps added: its 2 x 3 batch logits are copied and each of
    reg1's three phases gets zero weights and the biases (0, 2, 0), so its deterministic action
    stays; the taps family first instead of last is refused."""
    source = _toy_run(tmp_path / "source")
    taps = {"actions": [{"kind": "batch"}, {"kind": "taps"}]}
    frozen = TrainSettings(32, 32, learning_rate=0.0)
    copy = _toy_run(tmp_path / "copy", seed=7, init_from=source, env_config=taps, settings=frozen)
    a, b = (load_policy(p)[0].policy.state_dict() for p in (source, copy))
    assert all(np.array_equal(a[k].numpy(), b[k].numpy()) for k in a if not k.startswith("action_net."))
    weight, bias = b["action_net.weight"].numpy(), b["action_net.bias"].numpy()
    assert weight.shape == (6 + 9, 64)
    assert np.array_equal(weight[:6], a["action_net.weight"].numpy())
    assert np.array_equal(bias[:6], a["action_net.bias"].numpy())
    assert not weight[6:].any()
    assert bias[6:].tolist() == [0.0, 2.0, 0.0] * 3
    reversed_order = {"actions": [{"kind": "taps"}, {"kind": "batch"}]}
    with pytest.raises(G2GError, match="does not fit this scenario: action"):
        _toy_run(tmp_path / "reversed", init_from=source, env_config=reversed_order)


@pytest.mark.slow
def test_init_from_extends_a_policy_whose_observation_gains_features(tmp_path):
    """A run that adds an observation term (one feature after the toy's 15) starts from the saved
    policy with that feature's input weights at zero: on the same observation it takes the saved
    policy's action with the same probabilities and values the state the same; a run whose
    observation lacks a feature of the policy is refused, naming it."""
    since = {"observation_terms": [{"term": "openg2g.envs.terms:TimeSinceTapChange", "params": {"scale_s": 2}}]}
    source = _toy_run(tmp_path / "source")
    frozen = TrainSettings(32, 32, learning_rate=0.0)
    copy = _toy_run(tmp_path / "copy", seed=7, init_from=source, env_config=since, settings=frozen)
    (p, _), (q, _) = load_policy(source), load_policy(copy)
    assert q.observation_space.shape == (BASE_FEATURES + 1,)
    env = make_toy_env(duration_s=11, variations=None, **since)
    obs, _ = env.reset(seed=0)
    for _ in range(4):  # the added feature grows each step (the toy's taps never move): 0, 0.5, 1, 1.5
        a, b = (m.policy.obs_to_tensor(o)[0] for m, o in ((p, obs[:BASE_FEATURES]), (q, obs)))
        assert np.allclose(p.policy.get_distribution(a).distribution[0].probs.detach(),
                           q.policy.get_distribution(b).distribution[0].probs.detach(), rtol=0, atol=1e-6)  # fmt: skip
        assert np.allclose(p.policy.predict_values(a).item(), q.policy.predict_values(b).item(), rtol=0, atol=1e-5)
        action = p.predict(obs[:BASE_FEATURES], deterministic=True)[0]
        assert np.array_equal(q.predict(obs, deterministic=True)[0], action)
        obs, *_ = env.step(action)
    with pytest.raises(
        G2GError, match=r"observes 16 features, the run 15: .*only the policy has 'taps.reg1.since_change'"
    ):
        _toy_run(tmp_path / "fewer", init_from=copy)


def test_init_from_refuses_a_policy_that_does_not_fit(tmp_path):
    source = _toy_run(tmp_path / "source")
    one_model = ["duration_s=11", "datacenters.0.models.1.batch_sizes=[64]"]
    with pytest.raises(G2GError, match=r"does not fit this scenario: action: .*MultiDiscrete\(nvec=\[3, 3\]\)"):
        train_policy("toy", tmp_path / "a", steps=32, overrides=one_model, init_from=source, progress=False)
    with pytest.raises(G2GError, match="is a ppo policy; init_from needs one of the run's algorithm \\(a2c\\)"):
        _toy_run(tmp_path / "b", algo="a2c", init_from=source)
    with pytest.raises(G2GError, match="other network sizes than --net-arch"):
        _toy_run(tmp_path / "c", init_from=source, settings=TrainSettings(32, 32, net_arch=(16,)))
    with pytest.raises(G2GError, match="holds a checkpoint to resume from .*init_from starts a fresh run only"):
        _toy_run(tmp_path / "source", steps=64, resume=True, init_from=source)


def _weights(policy: Path) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """A saved PPO policy's (actor, critic) weights by name."""
    state = {k: v.numpy() for k, v in load_policy(policy)[0].policy.state_dict().items()}
    critic = {k: v for k, v in state.items() if k.startswith(("value_net.", "mlp_extractor.value_net."))}
    return {k: v for k, v in state.items() if k not in critic}, critic


@pytest.mark.slow
def test_critic_warmup_holds_the_actor_and_trains_the_critic(tmp_path):
    """Two 32-step rollouts within a 64-step warm-up train the value network alone; a third, beyond
    it, trains the actor too."""
    source = _toy_run(tmp_path / "source")
    actor0, critic0 = _weights(source)
    warm = TrainSettings(32, 32, critic_warmup=64)
    actor, critic = _weights(_toy_run(tmp_path / "held", steps=64, init_from=source, settings=warm))
    assert all(np.array_equal(actor0[k], actor[k]) for k in actor0)
    assert not all(np.array_equal(critic0[k], critic[k]) for k in critic0)
    actor, _ = _weights(_toy_run(tmp_path / "after", steps=96, init_from=source, settings=warm))
    assert not all(np.array_equal(actor0[k], actor[k]) for k in actor0)
    actor, _ = _weights(_toy_run(tmp_path / "none", steps=64, init_from=source))
    assert not all(np.array_equal(actor0[k], actor[k]) for k in actor0)  # without it the actor moves at once


def test_critic_warmup_is_refused_without_a_critic_or_when_negative(tmp_path):
    with pytest.raises(G2GError, match="critic_warmup: .*needs an actor-critic algorithm .* sac has none"):
        train_policy(
            "toy", tmp_path / "a", algo="sac", env_config={"action": "box"}, settings=TrainSettings(critic_warmup=1)
        )
    with pytest.raises(G2GError, match="critic_warmup: Input should be greater than or equal to 0"):
        _toy_run(tmp_path / "b", settings=TrainSettings(32, 32, critic_warmup=-1))


def test_resume_of_a_record_older_than_a_setting_takes_its_default(tmp_path):
    """A train.json written before critic_warmup existed resumes with the default (0), not as a change."""
    now = {k: list(v) if isinstance(v, tuple) else v for k, v in TrainSettings().__dict__.items()}
    older = {k: v for k, v in now.items() if k != "critic_warmup"}
    _check_same_run({"settings": older}, now, tmp_path / "train.json")
    with pytest.raises(G2GError, match=r"other settings \(critic_warmup 0 -> 2048\)"):
        _check_same_run({"settings": older}, {**now, "critic_warmup": 2048}, tmp_path / "train.json")


def test_every_training_default_comes_from_train_options():
    """TrainOptions holds each default once: train_policy's keyword defaults, TrainSettings' fields and
    the help of every `openg2g train` option are its, so a default changed there changes all three."""
    fields = TrainOptions.model_fields
    parameters = inspect.signature(train_policy).parameters
    run = [name for name in fields if name in parameters]
    assert run == ["algo", "steps", "n_envs", "seed", "checkpoint_every", "eval_episodes", "eval_every", "val_episodes"]
    assert all(parameters[name].default == fields[name].default for name in run)
    settings = TrainSettings()
    assert set(run) | set(TrainSettings.__dataclass_fields__) == set(fields)
    assert all(getattr(settings, name) == fields[name].default for name in TrainSettings.__dataclass_fields__)
    train = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices["train"]
    helps = {action.dest: action.help for action in train._actions}
    assert "(default 0.0003)" in helps["lr"] and "(default 64 64)" in helps["net_arch"]
    for name, field in fields.items():
        help_text = helps[{"learning_rate": "lr", "normalize_reward": "raw_reward"}.get(name, name)] or ""
        # the description, its first letter in the help's case, then the default
        assert (field.description or "").removesuffix(".")[1:] + " (default " in help_text, name
