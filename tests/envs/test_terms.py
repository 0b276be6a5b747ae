"""Custom reward and observation terms (openg2g.envs.terms): found by file, module or entry point,
weighed and observed as hand-computed, rebuilt by rl_policy in deployment, bad ones refused by field."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from stable_baselines3 import PPO

from openg2g.cli.main import main
from openg2g.control.registry import build_controller
from openg2g.core.commands import SetTaps
from openg2g.core.errors import ScenarioError
from openg2g.core.interfaces import RegulatorInfo
from openg2g.engine.simulation import Simulation
from openg2g.envs import make_toy_env
from openg2g.envs.policy import FORMAT, PolicyMeta, save_policy
from openg2g.envs.terms import RewardStep, TapChanges, TapPositions, TermError, TimeSinceTapChange
from openg2g.record.metrics import MetricsRecorder
from openg2g.scenario.schema import ControllerSpec
from openg2g.testing import toy_components, toy_scenario

RL_POLICY_KIND = "openg2g.controllers.rl_policy:RLPolicy"  # by module, registered or not
BASE_FEATURES = 15  # the toy's built-in features: 3 zone voltages, 2 site power, 2 models x 5

TERMS_FILE = '''
import numpy as np
from pydantic import BaseModel


class Clock:
    """Two features: the time over `scale_s`, and the number of observations seen this episode."""

    class Config(BaseModel):
        scale_s: float = 100.0

    def __init__(self, context, config):
        self.scale_s = config.scale_s
        self.feature_names = ("clock.t", "clock.count")
        self.reset()

    def reset(self):
        self.count = 0

    def __call__(self, observation):
        self.count += 1
        return np.array([observation.t_s / self.scale_s, self.count])


class Constant:
    name = "constant"

    def __init__(self, context, value=1.5):
        self.value = value

    def reset(self):
        pass

    def __call__(self, step):
        return self.value


class Throughput:
    name = "throughput"

    def __init__(self, context):
        pass

    def reset(self):
        pass

    def __call__(self, step):
        return step.terms["throughput_fraction"]


class BatchCommands:
    name = "batch_commands"

    def __init__(self, context):
        pass

    def reset(self):
        pass

    def __call__(self, step):
        return step.n_batch_changes


class Silent:
    """No __call__: not a term."""

    def __init__(self, context):
        self.name = "silent"
        self.feature_names = ("x",)

    def reset(self):
        pass


class TooShort(Clock):
    def __call__(self, observation):
        return np.array([1.0, 2.0, 3.0])
'''

ACTIONS = ([2, 2], [2, 2], [0, 0], [0, 0], [2, 2])
"""Both toy models: up, up (already at the largest size: no change), down, down, up."""


@pytest.fixture
def terms_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory holding ``terms_file.py`` (file terms are relative to it)."""
    (tmp_path / "terms_file.py").write_text(TERMS_FILE)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _episode(**config: object) -> list[tuple[np.ndarray, float, dict]]:
    env = make_toy_env(duration_s=11, variations=None, **config)
    obs, _ = env.reset(seed=0)
    out = [(obs, 0.0, {})]
    for action in ACTIONS:
        obs, reward, _, _, info = env.step(np.array(action))
        out.append((obs, float(reward), info))
    return out


def test_observation_term_from_a_file_adds_its_features(terms_dir):
    env = make_toy_env(duration_s=11, observation_terms=[{"term": "terms_file.py:Clock", "params": {"scale_s": 10}}])
    assert env.observation_space.shape == (BASE_FEATURES + 2,)
    assert env.layout.feature_names[-2:] == ("clock.t", "clock.count")
    assert env.layout.describe()["observation_shape"] == [BASE_FEATURES + 2]
    plain = _episode()
    with_clock = _episode(observation_terms=[{"term": "terms_file.py:Clock", "params": {"scale_s": 10}}])
    for k, ((obs, reward, _), (obs_c, reward_c, _)) in enumerate(zip(plain, with_clock)):
        # observed at t = 1 s + k control periods of 1 s; the count restarts with the episode
        assert obs_c[-2:].tolist() == pytest.approx([(1 + k) / 10, 1 + k])
        np.testing.assert_array_equal(obs_c[:-2], obs)  # the built-in features are untouched
        assert reward_c == reward


def test_reward_terms_add_their_weighted_values(terms_dir):
    plain = _episode()
    weighted = _episode(
        reward_terms=[
            {"term": "terms_file.py:Constant", "weight": -0.4},
            {"term": "terms_file.py:Throughput", "weight": 2.0},
        ]
    )
    for (obs, reward, info), (obs_w, reward_w, info_w) in list(zip(plain, weighted))[1:]:
        throughput = info["throughput_fraction"]
        assert info_w["reward_terms"] == {"constant": 1.5, "throughput": throughput}
        assert reward_w == pytest.approx(reward - 0.4 * 1.5 + 2.0 * throughput, abs=1e-12)
        np.testing.assert_array_equal(obs_w, obs)
    assert "reward_terms" not in plain[1][2]


def test_stock_batch_reversals_counts_moves_against_the_previous_one():
    steps = _episode(reward_terms=[{"term": "openg2g.envs.terms:BatchReversals", "weight": -0.25}])
    plain = _episode()
    # up (2 models move), up (none can), down: 2 reversals, down: none, up: 2 reversals
    assert [info["reward_terms"]["batch_reversals"] for _, _, info in steps[1:]] == [0, 0, 2, 0, 2]
    assert steps[3][1] == pytest.approx(plain[3][1] - 0.5, abs=1e-12)


def test_stock_time_since_tap_change(terms_dir):
    env = make_toy_env(
        duration_s=11,
        variations=None,
        observation_terms=[{"term": "openg2g.envs.terms:TimeSinceTapChange", "params": {"scale_s": 4}}],
    )
    assert env.layout.feature_names[-1] == "taps.reg1.since_change"
    obs, _ = env.reset(seed=0)
    assert obs[-1] == 0.0
    for k in range(1, 4):  # the toy's taps never move: time since the first observation, over 4 s
        obs, *_ = env.step(np.array([1, 1]))
        assert obs[-1] == pytest.approx(k / 4)
    term = TimeSinceTapChange(env.context, TimeSinceTapChange.Config(scale_s=4))
    seen = env.sim.observation()
    at = [dataclasses.replace(seen, t_s=t, grid=dataclasses.replace(seen.grid, taps={"reg1": taps})) for t, taps in
          ((10.0, (0, 0, 0)), (12.0, (0, 0, 0)), (13.0, (1, 0, 0)), (21.0, (1, 0, 0)))]  # fmt: skip
    assert [float(term(o)[0]) for o in at] == [0.0, 0.5, 0.0, 2.0]


def test_stock_tap_positions_maps_each_phase_tap_onto_its_range():
    env = make_toy_env(
        duration_s=11,
        variations=None,
        actions=[{"kind": "batch"}, {"kind": "taps"}],
        observation_terms=[{"term": "openg2g.envs.terms:TapPositions"}],
    )
    assert env.layout.feature_names[-3:] == ("taps.reg1.a", "taps.reg1.b", "taps.reg1.c")
    obs, _ = env.reset(seed=0)
    assert obs[-3:].tolist() == [0.0, 0.0, 0.0]
    # batch entries stay; reg1 phase a up twice, phase c down once (toy taps -16..16: 1/16 a step)
    env.step(np.array([1, 1, 2, 1, 0]))
    obs, *_ = env.step(np.array([1, 1, 2, 1, 1]))
    assert obs[-3:].tolist() == pytest.approx([2 / 16, 0.0, -1 / 16])
    # an asymmetric range and a ganged bank: taps 0..32 read 16 as 0 and 32 as 1, one feature
    ganged = RegulatorInfo("g1", ("a", "b", "c"), 0, 32, 0.00625, ganged=True)
    context = dataclasses.replace(env.context, regulators={"reg1": env.context.regulators["reg1"], "g1": ganged})
    term = TapPositions(context)
    assert term.feature_names == ("taps.reg1.a", "taps.reg1.b", "taps.reg1.c", "taps.g1")
    seen = env.sim.observation()
    at = dataclasses.replace(seen, grid=dataclasses.replace(seen.grid, taps={"reg1": (-16, 4, 16), "g1": (24, 24, 24)}))
    assert term(at).tolist() == pytest.approx([-1.0, 0.25, 1.0, 0.5])


def _tap_episode(actions: list[list[float]], **config) -> list[tuple[float, dict]]:
    """Rewards and infos of box actions on the toy with batch and tap entries; a scheduled event
    sets reg1 to (14, 0, 0) at 1.5 s, inside the first step (1 s to 2 s)."""
    env = make_toy_env(
        duration_s=11,
        variations=None,
        action="box",
        actions=[{"kind": "batch"}, {"kind": "taps"}],
        overrides=["events=[{t_s: 1.5, command: set_taps, bank: reg1, taps: [14, 0, 0]}]"],
        **config,
    )
    env.reset(seed=0)
    return [env.step(np.array(a, dtype=np.float32))[1::3] for a in actions]  # type: ignore[misc]


def test_stock_tap_changes_prices_the_agents_tap_steps_only():
    # taps entries: x in [-1, 1] onto -16..16, so 0 asks for tap 0 and 1 for tap 16
    actions = [[0, 0, 0, 0, 0], [0, 0, 1, 0, 0], [0, 0, 1, 0, 0], [0, 0, 0.0625, 0, 0]]
    plain = _tap_episode(actions)
    priced = _tap_episode(actions, reward_terms=[{"term": "openg2g.envs.terms:TapChanges", "weight": -0.5}])
    # the event's 0 -> 14 is free; the agent's 14 -> 16 costs 2 steps, staying nothing, 16 -> 1 costs 15
    assert [info["reward_terms"]["tap_changes"] for _, info in priced] == [0.0, 2.0, 0.0, 15.0]
    assert [r for r, _ in priced] == pytest.approx([r - 0.5 * n for (r, _), n in zip(plain, (0, 2, 0, 15))], abs=1e-12)
    # discrete: phase a up, phase c down in one step cost a step each
    env = make_toy_env(duration_s=11, variations=None, actions=[{"kind": "batch"}, {"kind": "taps"}],
                       reward_terms=[{"term": "openg2g.envs.terms:TapChanges", "weight": -1.0}])  # fmt: skip
    env.reset(seed=0)
    assert env.step(np.array([1, 1, 2, 1, 0]))[4]["reward_terms"] == {"tap_changes": 2.0}
    # a ganged bank has one tap changer: a move of its three phases by 3 steps counts 3
    ganged = RegulatorInfo("g1", ("a", "b", "c"), -16, 16, 0.00625, ganged=True)
    term = TapChanges(
        dataclasses.replace(env.context, regulators={"reg1": env.context.regulators["reg1"], "g1": ganged})
    )
    seen = env.sim.observation()
    before = dataclasses.replace(seen, grid=dataclasses.replace(seen.grid, taps={"reg1": (0, 0, 0), "g1": (2, 2, 2)}))
    commands = (SetTaps(bank="g1", taps=(5, 5, 5)), SetTaps(bank="reg1", taps=(-1, 0, 1)))
    assert term(RewardStep(2.0, 1.0, before, seen, {}, 2, False, commands)) == 5.0


def test_a_reward_term_sees_the_batch_commands_alone(terms_dir):
    """``RewardStep.n_batch_changes`` counts the agent's batch-size commands, not its tap commands."""
    env = make_toy_env(duration_s=11, variations=None, actions=[{"kind": "batch"}, {"kind": "taps"}],
                       reward_terms=[{"term": "terms_file.py:BatchCommands"}])  # fmt: skip
    env.reset(seed=0)
    # taps only (phase a up, c down); then model 1 down with phase a up; then both models down
    infos = [env.step(np.array(a))[4] for a in ([1, 1, 2, 1, 0], [0, 1, 2, 1, 1], [0, 0, 1, 1, 1])]
    assert [i["reward_terms"]["batch_commands"] for i in infos] == [0.0, 1.0, 2.0]
    assert [i["n_batch_changes"] for i in infos] == [0, 1, 2]
    assert [i["n_commands"] for i in infos] == [1, 2, 2]


def test_terms_by_entry_point(tmp_path, monkeypatch):
    """A package that declares its terms in the ``openg2g.rl_terms`` entry-point group."""
    (tmp_path / "my_rl_terms.py").write_text(TERMS_FILE)
    dist = tmp_path / "my_rl_terms-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: my-rl-terms\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[openg2g.rl_terms]\nclock = my_rl_terms:Clock\nconstant = my_rl_terms:Constant\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    env = make_toy_env(duration_s=11, observation_terms=[{"term": "clock"}], reward_terms=[{"term": "constant"}])
    obs, _ = env.reset(seed=0)
    assert obs[-2:].tolist() == pytest.approx([0.01, 1.0])
    assert env.step(np.array([1, 1]))[4]["reward_terms"] == {"constant": 1.5}
    with pytest.raises(ScenarioError, match=r"unknown observation term 'clck'; registered observation terms: .*clock"):
        make_toy_env(duration_s=11, observation_terms=[{"term": "clck"}])


@pytest.mark.parametrize(
    ("config", "location", "message"),
    [
        ({"observation_terms": [{"term": "nope"}]}, "observation_terms.0.term", "unknown observation term 'nope'"),
        (
            {"reward_terms": [{"term": "no_such_module_xyz:Term"}]},
            "reward_terms.0.term",
            "reward term 'no_such_module_xyz:Term': no module named 'no_such_module_xyz'",
        ),
        (
            {"reward_terms": [{"term": "terms_file.py:Nope"}]},
            "reward_terms.0.term",
            "terms_file.py has no class 'Nope'",
        ),
        (
            {"reward_terms": [{"term": "missing.py:Term"}]},
            "reward_terms.0.term",
            "reward term file 'missing.py' not found",
        ),
        (
            {"reward_terms": [{"term": "openg2g.envs.terms:BatchReversals"}, {"term": "terms_file.py:Silent"}]},
            "reward_terms.1.term",
            "'terms_file.py:Silent' is not a RewardTerm",
        ),
        (
            {"observation_terms": [{"term": "terms_file.py:Silent"}]},
            "observation_terms.0.term",
            "is not a ObservationTerm",
        ),
        (
            {"observation_terms": [{"term": "openg2g.envs.terms:TimeSinceTapChange", "params": {"scale_s": -1}}]},
            "observation_terms.0.params.scale_s",
            "greater than 0",
        ),
        (
            {"reward_terms": [{"term": "terms_file.py:Constant", "params": {"value": 1, "extra": 2}}]},
            "reward_terms.0.term",
            "__init__ raised TypeError",
        ),
    ],
)
def test_bad_terms_are_refused_naming_the_field(terms_dir, config, location, message):
    with pytest.raises(ScenarioError) as exc:
        make_toy_env(duration_s=11, **config)
    ((loc, msg),) = exc.value.problems
    assert loc == location and message in msg


def test_unusable_values_at_run_time_name_the_term_and_time(terms_dir):
    env = make_toy_env(
        duration_s=11, reward_terms=[{"term": "terms_file.py:Constant", "params": {"value": float("nan")}}]
    )
    env.reset(seed=0)
    with pytest.raises(
        TermError, match=r"reward term 'terms_file.py:Constant' \(reward_terms.0\) returned nan at t=2 s"
    ):
        env.step(np.array([1, 1]))
    with pytest.raises(
        TermError, match=r"\(observation_terms.0\) returned array\(\[1., 2., 3.\]\) at t=1 s; it must return 2"
    ):
        make_toy_env(duration_s=11, observation_terms=[{"term": "terms_file.py:TooShort"}]).reset(seed=0)


def test_bad_term_from_the_train_command_exits_2(terms_dir, capsys):
    status = main(["train", "toy", "--steps", "10", "--out", "run", "--env", "reward_terms=[{term: nope, weight: -1}]"])
    assert status == 2
    assert "error: reward_terms.0.term: unknown reward term 'nope'" in capsys.readouterr().err


@pytest.mark.slow
def test_rl_policy_rebuilds_the_observation_terms(terms_dir):
    config = {"variations": None, "observation_terms": [{"term": "terms_file.py:Clock", "params": {"scale_s": 10}}]}
    env = make_toy_env(duration_s=11, **config)
    model = PPO("MlpPolicy", env, n_steps=16, batch_size=16, seed=0, device="cpu")
    meta = PolicyMeta(format=FORMAT, algo="ppo", scenario="toy", env=env.config, layout=env.layout.describe())
    policy = save_policy(model, terms_dir / "policy", meta)
    spec = ControllerSpec(kind=RL_POLICY_KIND, params={"policy": str(policy)})
    controller = build_controller(spec, Path("."))
    for _ in range(2):  # a second run starts the terms afresh, as an episode does
        obs, _ = env.reset(seed=0)
        controller.reset(env.context, 0)
        for action in ACTIONS:
            np.testing.assert_array_equal(controller.layout.observe(env.sim.observation()), obs)
            obs, *_ = env.step(np.array(action))
    # the whole episode, acted by the model in the env and by the controller in a plain run: the same
    obs, _ = env.reset(seed=0)
    done = False
    while not done:
        obs, _, terminated, truncated, _ = env.step(model.predict(obs, deterministic=True)[0])
        done = terminated or truncated
    scenario = toy_scenario(11)
    sites, grid, _ = toy_components(scenario)
    sim = Simulation.from_scenario(scenario, None, components=(sites, grid, [build_controller(spec, Path("."))]))
    sim.run_until(scenario.scenario.duration_s)
    in_env, deployed = env.sim.recorder(MetricsRecorder).figures(), sim.recorder(MetricsRecorder).figures()
    assert in_env["n_batch_changes"] > 0
    for key in [k for k, v in in_env.items() if isinstance(v, dict)]:  # per site and model
        assert deployed.pop(key) == in_env.pop(key)  # dicts: approx takes flat ones
    assert deployed == pytest.approx(in_env)
    (terms_dir / "terms_file.py").rename(terms_dir / "moved.py")
    with pytest.raises(ScenarioError) as exc:
        controller.reset(env.context, 0)
    ((loc, msg),) = exc.value.problems
    assert loc == f"policy {policy}: env.observation_terms.0.term"
    assert "observation term file 'terms_file.py' not found" in msg
