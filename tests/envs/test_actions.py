"""Action families beyond batch sizes (``EnvConfig.actions``, :mod:`openg2g.envs.actions`): each
family's command reaches the engine with the value it should, masks hold at the grid's ends, the
default is the env's original action, a policy deploys through ``rl_policy`` with its families and
a scenario lacking what they act on is refused, naming it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from pydantic import ValidationError
from stable_baselines3 import PPO
from stable_baselines3.common.env_checker import check_env as sb3_check_env

from openg2g.controllers.rl_policy import RLPolicy
from openg2g.core.commands import SetBatchSize
from openg2g.core.errors import ControllerError, ScenarioError
from openg2g.envs import EnvConfig, G2GEnv, make_env, make_toy_env
from openg2g.envs.policy import PolicyMeta, save_policy
from openg2g.envs.training import TrainSettings
from openg2g.plot.run import read_table
from openg2g.scenario.run import run_scenario

BATTERY = "grid.storage=[{name: b1, bus: '675', kw: 100, kwh: 200, soc0: 0.5, soc_min: 0, soc_max: 1, efficiency: 1}]"
"""One 100 kW / 200 kWh lossless battery on IEEE 13 (the bundled scenario has none)."""

EVERY_FAMILY = [
    {"kind": "batch"},
    {"kind": "power_cap"},
    {"kind": "replicas"},
    {"kind": "taps"},
    {"kind": "storage"},
]


def _ieee13(actions: list[dict], overrides: tuple[str, ...] = (), **config: object) -> G2GEnv:
    return make_env(
        "ieee13_none", ["events=[]", *overrides], episode_steps=3, variations=None, actions=actions, **config
    )


def _stay(env: G2GEnv) -> np.ndarray:
    return np.ones(env.action_space.shape, dtype=np.int64)


def _entry(env: G2GEnv, kind: str, label: str) -> int:
    """Index in the action of family ``kind``'s entry ``label``."""
    start = 0
    for family in env.layout.families:
        if family.kind == kind:
            return start + family.labels.index(label)
        start += family.size
    raise KeyError(kind)


def test_default_is_batch_sizes_alone_with_the_original_numbers():
    """The default config acts on batch sizes only; a seeded toy episode under random actions gives
    the rewards recorded from the code before action families existed (commit 7634acc)."""
    assert EnvConfig().model_dump()["actions"] == [{"kind": "batch"}]
    env = make_toy_env(duration_s=31)
    assert [f.kind for f in env.layout.families] == ["batch"]
    assert env.layout.n_actions == len(env.layout.controlled) == env.layout.n_targets
    env.reset(seed=3)
    rng = np.random.default_rng(0)
    rewards, done = [], False
    while not done:
        _, reward, terminated, truncated, _ = env.step(rng.integers(0, 3, env.action_space.shape))
        rewards.append(reward)
        done = terminated or truncated
    before = [
        -0.2816998250703763, -0.5038049142707979, 0.15926996298827034, 0.3978021978021977, 0.29972566551514157,
        0.3454198634577405, 0.365691388385101, -0.03553531768212492, 0.25596099423189184, -0.8112824554391591,
        0.043088237399619665, 0.3748773534329879, 0.05557085490845683, 0.38520308382210416, -0.6188992658301227,
        -0.13968044863077006, 0.02200482602314517, 0.18414225399386872, 0.2185029197847459, 0.2685029197847459,
        0.2870917009040503, 0.16142827641697943, 0.10871231000655175, 0.15871231000655175, 0.15871231000655175,
        0.20448942122569147, 0.13966302716932072, -0.01679117924824848, 0.03320882075175152, 0.18414225399386872,
    ]  # fmt: skip
    np.testing.assert_allclose(rewards, before, rtol=1e-12, atol=1e-14)


def test_tap_up_moves_one_phase_one_step():
    env = _ieee13([{"kind": "batch"}, {"kind": "taps"}])
    assert env.layout.families[1].labels == ("reg1.a", "reg1.b", "reg1.c")
    env.reset(seed=0)
    assert env.sim is not None and env.sim.observation().grid.taps["reg1"] == (14, 6, 15)
    action = _stay(env)
    action[_entry(env, "taps", "reg1.a")] = 2
    _, _, _, _, info = env.step(action)
    assert env.sim.observation().grid.taps["reg1"] == (15, 6, 15)
    assert info["n_commands"] == 1 and info["n_batch_changes"] == 0
    action = _stay(env)
    action[_entry(env, "taps", "reg1.b")] = 0
    env.step(action)
    assert env.sim.observation().grid.taps["reg1"] == (15, 5, 15)


def test_power_cap_clips_the_models_power_at_the_cap():
    """Two levels over the H100's settable caps (200 and 700 W): down from uncapped is 200 W, and
    every replica of the 1-GPU Llama-3.1-8B (its samples all above 200 W at batch 128) then draws
    exactly 200 W: 720 replicas, 144 kW; the other models are not capped."""
    env = _ieee13([{"kind": "batch"}, {"kind": "power_cap", "levels": 2}])
    assert env.layout.families[1].describe()["values"]["dc1/Llama-3.1-8B"] == [200.0, 700.0]
    env.reset(seed=0)
    action = _stay(env)
    action[_entry(env, "power_cap", "dc1/Llama-3.1-8B")] = 0
    env.step(action)
    assert env.sim is not None
    models = env.sim.observation().datacenters["dc1"].models
    assert models["Llama-3.1-8B"].power_cap_w == 200.0
    assert models["Llama-3.1-8B"].power_w == pytest.approx(720 * 200.0, rel=1e-12)
    assert models["Llama-3.1-70B"].power_cap_w is None


def test_a_site_wide_cap_caps_every_model():
    """``per: site``, six levels 200-700 W: one entry, down from uncapped is 600 W on every model."""
    env = _ieee13([{"kind": "batch"}, {"kind": "power_cap", "per": "site"}])
    assert env.layout.families[1].labels == ("dc1",)
    env.reset(seed=0)
    action = _stay(env)
    action[_entry(env, "power_cap", "dc1")] = 0
    env.step(action)
    assert env.sim is not None
    caps = {m.power_cap_w for m in env.sim.observation().datacenters["dc1"].models.values()}
    assert caps == {600.0}


def test_replica_grid_ends_at_max_fraction():
    """From 0.05 in steps of 0.1 up to 0.95 (off the steps) of Llama-3.1-70B's 180 replicas."""
    env = _ieee13([{"kind": "replicas", "min_fraction": 0.05, "max_fraction": 0.95}])
    assert env.layout.families[0].describe()["values"]["dc1/Llama-3.1-70B"] == [9.0 + 18 * k for k in range(10)]


@pytest.mark.slow
def test_training_scores_the_hold_policy_on_every_family(tmp_path):
    """``openg2g train``'s held-out evaluation holds every entry (taps too), so a short run with
    the taps family trains, saves its families and scores the hold policy."""
    from openg2g.envs.policy import read_meta
    from openg2g.envs.training import train_policy

    actions = [{"kind": "batch"}, {"kind": "taps"}]
    result = train_policy(
        "toy", tmp_path / "run", steps=64, overrides=["duration_s=11"], env_config={"actions": actions},
        settings=TrainSettings(n_steps=32, batch_size=32), checkpoint_every=64, eval_episodes=1,
        progress=False, log=lambda _: None,
    )  # fmt: skip
    meta = read_meta(result.policy)
    assert [f["kind"] for f in meta.layout["actions"]] == ["batch", "taps"]
    assert meta.layout["actions"][1]["entries"] == ["reg1.a", "reg1.b", "reg1.c"]
    assert "hold_mean_reward" in result.evaluation


def test_replicas_step_down_a_tenth_of_the_configured():
    env = _ieee13([{"kind": "batch"}, {"kind": "replicas"}])
    assert env.layout.families[1].describe()["values"]["dc1/Llama-3.1-8B"] == [72.0 * k for k in range(11)]
    env.reset(seed=0)
    action = _stay(env)
    action[_entry(env, "replicas", "dc1/Llama-3.1-8B")] = 0
    env.step(action)
    assert env.sim is not None
    assert env.sim.observation().datacenters["dc1"].models["Llama-3.1-8B"].replicas == 648


def test_storage_up_discharges_half_the_rating():
    """Five levels over +-100 kW: up from 0 is 50 kW delivered; after the 1 s step the lossless
    200 kWh battery holds 0.5 - 50 kW * 1 s / (3600 s/h * 200 kWh) of its capacity."""
    env = _ieee13([{"kind": "batch"}, {"kind": "storage"}], (BATTERY,))
    env.reset(seed=0)
    action = _stay(env)
    action[_entry(env, "storage", "b1")] = 2
    env.step(action)
    assert env.sim is not None
    state = env.sim.observation().grid.storage["b1"]
    assert state.p_w == 50_000.0
    assert state.soc == pytest.approx(0.5 - 50.0 / 3600.0 / 200.0, rel=1e-12)


def test_masks_at_the_ends_of_each_grid():
    """Taps at 17 (the top) on a and -16 (the bottom) on c, every model uncapped (the top cap) and
    at its configured replicas (the most the site's GPUs allow), the battery idle at 0."""
    env = _ieee13(EVERY_FAMILY, ("grid.regulators.reg1.taps=[17, 6, -16]", BATTERY))
    env.reset(seed=0)
    mask = env.action_masks().reshape(-1, 3)
    up_blocked, free = [True, True, False], [True, True, True]
    expected = (
        [free] * 5 + [up_blocked] * 5 + [up_blocked] * 5 + [up_blocked, free, [False, True, True]] + [free]
    )  # batch, power_cap, replicas, taps a/b/c, storage
    assert mask.tolist() == expected
    action = _stay(env)
    action[_entry(env, "taps", "reg1.a")] = 2  # masked: stays at 17
    action[_entry(env, "taps", "reg1.c")] = 0  # masked: stays at -16
    _, _, _, _, info = env.step(action)
    assert env.sim is not None and env.sim.observation().grid.taps["reg1"] == (17, 6, -16)
    assert info["n_commands"] == 0


@pytest.mark.slow
def test_env_checkers_pass_with_every_family():
    for action in ("discrete", "box"):
        env = _ieee13(EVERY_FAMILY, (BATTERY,), action=action)
        assert env.layout.n_actions == 5 + 5 + 5 + 3 + 1
        gym_check_env(env, skip_render_check=True)
        sb3_check_env(env, warn=False)


def test_box_actions_pick_the_nearest_grid_value():
    env = _ieee13([{"kind": "batch"}, {"kind": "taps"}], action="box")
    env.reset(seed=0)
    action = np.full(env.action_space.shape, 1.0 / 3.0, dtype=np.float32)  # batch 128 of 8-512: no change
    action[_entry(env, "taps", "reg1.a")] = -1.0  # the bottom: -16
    action[_entry(env, "taps", "reg1.b")] = 1.0  # the top: 17
    action[_entry(env, "taps", "reg1.c")] = 0.0  # the middle of [-16, 17]: 0.5, nearest 0 (first of a tie)
    env.step(action)
    assert env.sim is not None and env.sim.observation().grid.taps["reg1"] == (-16, 17, 0)


@pytest.mark.parametrize(
    ("actions", "where", "what"),
    [
        ([{"kind": "batch"}, {"kind": "taps", "banks": ["reg9"]}], "actions.1.banks", "unknown regulator banks"),
        ([{"kind": "batch"}, {"kind": "storage"}], "actions.1", "needs a battery"),
        ([{"kind": "batch"}, {"kind": "replicas", "max_fraction": 1.2}], "actions.1.max_fraction", "room for at most"),
        ([{"kind": "batch"}, {"kind": "power_cap", "min_w": 100}], "actions.1.min_w", "settable caps 200-700 W"),
    ],
)
def test_a_scenario_lacking_what_a_family_acts_on_is_refused(actions, where, what):
    with pytest.raises(ScenarioError) as caught:
        _ieee13(actions)
    assert where in str(caught.value) and what in str(caught.value)


def test_power_caps_need_a_range_from_the_site():
    """The toy site's GPUs have no cap range: the power_cap family is refused, naming the models."""
    with pytest.raises(ScenarioError, match=r"actions\.1: .*dc/toy-a, dc/toy-b"):
        make_toy_env(actions=[{"kind": "batch"}, {"kind": "power_cap"}])


@pytest.mark.parametrize(
    ("actions", "field"),
    [
        ([{"kind": "tap"}], "actions.0"),
        ([{"kind": "taps"}, {"kind": "taps"}], "each family at most once"),
        ([{"kind": "power_cap", "levels": 1}], "actions.0.power_cap.levels"),
        ([{"kind": "replicas", "min_fraction": 0.5, "max_fraction": 0.5}], "min_fraction (0.5) must be below"),
        ([], "actions"),
    ],
)
def test_bad_action_settings_name_the_field(actions, field):
    with pytest.raises(ValidationError, match=field.replace(".", r"\.").replace("(", r"\(").replace(")", r"\)")):
        EnvConfig.model_validate({"actions": actions})


def _fixed_policy(env: G2GEnv, path: Path, choices: dict[int, int]) -> Path:
    """A PPO policy whose deterministic action is 'stay' on every entry but ``choices`` (entry ->
    choice): zero weights and a bias that favours the choice, so the action is known by hand."""
    import torch

    model = PPO("MlpPolicy", env, seed=0, device="cpu")
    net = model.policy.action_net
    with torch.no_grad():
        net.weight.zero_()
        bias = torch.zeros_like(net.bias)
        for i in range(env.layout.n_actions):
            bias[3 * i + choices.get(i, 1)] = 1.0
        net.bias.copy_(bias)
    meta = PolicyMeta(algo="ppo", scenario="ieee13_none", env=env.config, layout=env.layout.describe())
    return save_policy(model, path, meta)


@pytest.mark.slow
def test_rl_policy_deploys_tap_actions_into_the_runs_tap_column(tmp_path):
    """A policy raising reg1's phase a every control step: the run's ``tap_reg1_a`` climbs from 14
    by one step per control step to the bank's top, 17, and stays; b and c keep 6 and 15."""
    env = _ieee13([{"kind": "batch"}, {"kind": "taps"}])
    policy = _fixed_policy(env, tmp_path / "taps", {_entry(env, "taps", "reg1.a"): 2})
    controllers = f"controllers=[{{kind: rl_policy, params: {{policy: '{policy}'}}}}]"
    result = run_scenario("ieee13_none", tmp_path / "run", ["duration_s=6", "events=[]", controllers])
    assert result.summary["status"] == "complete"
    grid = read_table(tmp_path / "run", "grid")
    changes = grid["tap_reg1_a"].to_numpy()
    assert changes[0] == 14 and changes[-1] == 17
    assert sorted(set(changes.tolist())) == [14, 15, 16, 17]
    assert np.all(np.diff(changes) >= 0) and np.all(np.diff(changes) <= 1)
    assert set(grid["tap_reg1_b"]) == {6} and set(grid["tap_reg1_c"]) == {15}
    commands = read_table(tmp_path / "run", "commands")
    assert set(commands["command"]) == {"set_taps"} and len(commands) == 3


@pytest.mark.slow
def test_rl_policy_refuses_a_scenario_without_the_policys_bank_or_range(tmp_path):
    """A policy acting on the toy's reg1 (taps -16..16): a context without that bank, or with
    another tap range, is refused, naming the bank and the difference."""
    env = make_toy_env(duration_s=31, actions=[{"kind": "batch"}, {"kind": "taps", "banks": ["reg1"]}])
    policy = _fixed_policy(env, tmp_path / "toy_taps", {})
    controller = RLPolicy(RLPolicy.Config(policy=str(policy)))
    controller.reset(env.context, 0)  # the context it was made on fits
    assert controller.layout is not None and [f.kind for f in controller.layout.families] == ["batch", "taps"]
    no_bank = dataclasses.replace(env.context, regulators={})
    with pytest.raises(ScenarioError, match=r"actions\.1: the taps action needs a regulator bank"):
        controller.reset(no_bank, 0)
    info = env.context.regulators["reg1"]
    narrower = dataclasses.replace(env.context, regulators={"reg1": dataclasses.replace(info, max_tap=10)})
    with pytest.raises(ControllerError, match=r"taps reg1\.a: the policy steps over \[-16\.0, .*16\.0\], the scenario"):
        controller.reset(narrower, 0)
    renamed = dataclasses.replace(env.context, regulators={"reg2": dataclasses.replace(info, bank="reg2")})
    with pytest.raises(
        ScenarioError, match=r"actions\.1\.banks: unknown regulator banks \['reg1'\]; the grid has \['reg2'\]"
    ):
        controller.reset(renamed, 0)


@pytest.mark.slow
def test_rl_policy_acts_as_the_env_with_every_family(tmp_path):
    """The deployed controller sends the commands the env's layout makes of the model's action."""
    env = _ieee13(EVERY_FAMILY, (BATTERY,))
    choices = {_entry(env, "storage", "b1"): 0, _entry(env, "replicas", "dc1/Qwen3-30B-A3B"): 0}
    policy = _fixed_policy(env, tmp_path / "every", choices)
    controller = RLPolicy(RLPolicy.Config(policy=str(policy)))
    controller.reset(env.context, 0)
    assert len(controller.actuators()) == 5 + 5 + 5 + 1 + 1
    env.reset(seed=0)
    assert env.sim is not None
    observed = env.sim.observation()
    commands = controller.step(observed)
    assert [type(c).__name__ for c in commands] == ["SetReplicas", "SetStoragePower"]
    assert commands[0].replicas == 432 and commands[1].p_w == -50_000.0  # type: ignore[attr-defined]


def test_a_batch_move_sends_the_neighbouring_size_with_one_command_object_per_size():
    """Up moves each controlled model to its next measured batch size. The layout makes each size's
    command once, when it is built, so the same move from the same state sends the same objects:
    no command is made (and its fields checked) at every step."""
    env = make_toy_env(duration_s=31)
    env.reset(seed=0)
    assert env.sim is not None
    observed = env.sim.observation()
    up = np.full(env.action_space.shape, 2)
    sent = env.layout.commands(up, observed)
    expected = []
    for slot in env.layout.controlled:
        size = observed.datacenters[slot.site].models[slot.model].batch_size
        bigger = slot.batch_sizes[slot.batch_sizes.index(size) + 1]
        expected.append(SetBatchSize(site=slot.site, model=slot.model, batch_size=bigger))
    assert sent == expected
    again = env.layout.commands(up, observed)
    assert len(again) == len(sent) and all(a is b for a, b in zip(again, sent))
