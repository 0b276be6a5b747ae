"""The deadline budget of the env (``EnvConfig.miss_budget``): action masking by each batch size's miss fraction.

The toy site's miss fraction is analytic (0 at 0.8 x deadline, 1 at 1.2 x deadline, ITL ``0.02 + 0.06 s^2``
with ``s`` the normalized log2 batch size, deadline 0.06 s), so the allowed sizes are known by hand:
toy-a (8..256) misses 0, 0, 0, 0, 0.433, 1 and toy-b (8..128) misses 0, 0, 0, 0.24, 1.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from openg2g.core.errors import G2GError, ScenarioError
from openg2g.envs import EnvConfig, G2GEnv, make_toy_env
from openg2g.testing.toy import ToySite

SHORT = Path(__file__).resolve().parents[2] / "scenarios" / "rl_ieee13_short.yaml"


def _batches(env: G2GEnv) -> dict[str, int]:
    state = env.sim.observation().datacenters["dc"]  # type: ignore[union-attr]
    return {name: m.batch_size for name, m in state.models.items()}


def _misses(env: G2GEnv) -> dict[str, float]:
    state = env.sim.observation().datacenters["dc"]  # type: ignore[union-attr]
    return {name: m.deadline_miss_fraction for name, m in state.models.items()}


def _allowed(env: G2GEnv) -> dict[str, list[int]]:
    return env.layout.describe()["allowed_batch_sizes"]


@pytest.mark.parametrize(
    ("budget", "expected"),
    [
        (0.05, {"dc/toy-a": [8, 16, 32, 64], "dc/toy-b": [8, 16, 32]}),
        (0.3, {"dc/toy-a": [8, 16, 32, 64], "dc/toy-b": [8, 16, 32, 64]}),
        (0.5, {"dc/toy-a": [8, 16, 32, 64, 128], "dc/toy-b": [8, 16, 32, 64]}),
        (1.0, {"dc/toy-a": [8, 16, 32, 64, 128, 256], "dc/toy-b": [8, 16, 32, 64, 128]}),
    ],
)
def test_allowed_sizes_are_those_within_the_budget(budget, expected):
    assert _allowed(make_toy_env(duration_s=10, miss_budget=budget)) == expected


def test_without_budget_every_size_is_allowed():
    env = make_toy_env(duration_s=10)
    assert _allowed(env) == {"dc/toy-a": [8, 16, 32, 64, 128, 256], "dc/toy-b": [8, 16, 32, 64, 128]}
    env.reset(seed=0)
    for _ in range(3):
        env.step(np.full(2, 2))
    assert _batches(env) == {"toy-a": 256, "toy-b": 128}  # "up" reaches the largest measured sizes


@pytest.mark.parametrize("policy", ["up", "random"])
def test_masked_sizes_are_never_sent_nor_run(policy):
    """Whatever the agent asks, no command names a masked size, and from the first step on every model
    runs an allowed size and misses its deadline at most the budget (the toy's sizes change at once)."""
    budget = 0.05
    env = make_toy_env(duration_s=31, miss_budget=budget)
    allowed = {key.split("/")[1]: sizes for key, sizes in _allowed(env).items()}
    rng = np.random.default_rng(3)
    env.reset(seed=1)
    for _ in range(30):
        action = np.full(2, 2) if policy == "up" else rng.integers(0, 3, size=2)
        for command in env.layout.commands(action, env.sim.observation()):  # type: ignore[union-attr]
            assert command.batch_size in allowed[command.model]
        _, _, _, truncated, info = env.step(action)
        assert all(b in allowed[name] for name, b in _batches(env).items())
        assert max(_misses(env).values()) <= budget
        assert info["deadline_miss_fraction"] <= budget
        if truncated:
            break


def test_models_started_above_the_budget_come_down_at_the_first_step():
    env = make_toy_env(duration_s=10, miss_budget=0.05)
    env.reset(seed=0)
    assert _batches(env) == {"toy-a": 128, "toy-b": 64}  # the scenario's sizes, both over budget
    env.step(np.full(2, 2))  # even "up" brings them to the largest allowed size below
    assert _batches(env) == {"toy-a": 64, "toy-b": 32}


def test_box_targets_pick_the_nearest_allowed_size():
    env = make_toy_env(duration_s=10, miss_budget=0.05, action="box")
    env.reset(seed=0)
    env.step(np.ones(2, dtype=np.float32))
    assert _batches(env) == {"toy-a": 64, "toy-b": 32}
    env.step(-np.ones(2, dtype=np.float32))
    assert _batches(env) == {"toy-a": 8, "toy-b": 8}


def _report_misses(monkeypatch: pytest.MonkeyPatch, toy_a: tuple[float, ...]) -> None:
    """Make the toy site report ``toy_a`` as toy-a's per-batch miss fractions."""
    info = ToySite.info

    def patched(self: ToySite):
        site = info(self)
        models = dict(site.models)
        models["toy-a"] = dataclasses.replace(models["toy-a"], miss_fraction=toy_a)
        return dataclasses.replace(site, models=models)

    monkeypatch.setattr(ToySite, "info", patched)


def test_discrete_moves_step_over_masked_sizes(monkeypatch):
    """Allowed sizes 8, 32, 64 (16 masked): from 16 the model goes down to 8, then each "up" skips 16."""
    _report_misses(monkeypatch, (0.0, 0.1, 0.0, 0.0, 0.5, 1.0))
    env = make_toy_env(duration_s=20, overrides=["datacenters.0.models.0.batch_size=16"], miss_budget=0.05)
    assert _allowed(env)["dc/toy-a"] == [8, 32, 64]
    env.reset(seed=0)
    seen = []
    for move in (1, 2, 2, 2, 0, 0, 0):
        env.step(np.array([move, 1]))
        seen.append(_batches(env)["toy-a"])
    assert seen == [8, 32, 64, 64, 32, 8, 8]


def test_site_without_miss_fractions_is_refused(monkeypatch):
    _report_misses(monkeypatch, ())
    with pytest.raises(
        ScenarioError, match=r"miss_budget needs .* site 'dc' reports none for toy-a \(deadline 0.06 s\)"
    ):
        make_toy_env(duration_s=10, miss_budget=0.05)


def test_budget_no_batch_size_meets_is_refused():
    # deadline 0.02 s: even batch 8 (ITL 0.02 s) has half its tokens over it
    with pytest.raises(
        ScenarioError, match=r"every batch size of dc/toy-a misses its 0.02 s deadline .*50.00% at batch 8"
    ):
        make_toy_env(duration_s=10, overrides=["datacenters.0.models.0.itl_deadline_s=0.02"], miss_budget=0.05)


@pytest.mark.parametrize("bad", [0, -0.1, 1.5])
def test_budget_outside_0_1_is_rejected(bad):
    with pytest.raises(ValueError, match="miss_budget"):
        EnvConfig.model_validate({"miss_budget": bad})


def test_replay_site_reports_the_miss_fraction_it_runs():
    """On the real traces, each model's reported per-batch miss fraction is what the run then reports
    in steady state at that size (the scenario's batch 128, no control, no power cap)."""
    env = G2GEnv.from_scenario(SHORT, ["events=[]"], episode_steps=3, variations=None)
    env.reset(seed=0)
    env.step(np.ones(len(env.layout.controlled), dtype=np.int64))
    state = env.sim.observation().datacenters["dc1"]  # type: ignore[union-attr]
    infos = env.context.sites["dc1"].models
    for name, m in state.models.items():
        info = infos[name]
        assert len(info.miss_fraction) == len(info.batch_sizes)
        expected = info.miss_fraction[info.batch_sizes.index(m.batch_size)]
        assert m.deadline_miss_fraction == pytest.approx(expected, rel=1e-12, abs=1e-15), name


def test_saved_policy_is_masked_alike_in_deployment(tmp_path):
    """The ``rl_policy`` controller rebuilds the mask from the policy's JSON: whatever the (untrained)
    network asks at the start, the models above budget are sent to the largest allowed sizes."""
    from stable_baselines3 import PPO

    from openg2g.controllers.rl_policy import RLPolicy
    from openg2g.envs.policy import PolicyMeta, save_policy

    env = make_toy_env(duration_s=10, miss_budget=0.05)
    model = PPO("MlpPolicy", env, n_steps=32, batch_size=32, seed=0, device="cpu")
    meta = PolicyMeta(algo="ppo", scenario="toy", env=env.config, layout=env.layout.describe())
    controller = RLPolicy(RLPolicy.Config(policy=str(save_policy(model, tmp_path / "masked", meta))))
    controller.reset(env.context, 0)
    assert controller.layout is not None and controller.layout.describe() == env.layout.describe()
    env.reset(seed=0)
    commands = controller.step(env.sim.observation())  # type: ignore[union-attr]
    assert sorted((c.model, c.batch_size) for c in commands) == [("toy-a", 64), ("toy-b", 32)]


def test_action_masks_mark_the_choices_carried_out_as_chosen():
    """MaskablePPO's layout, per model (down, stay, up). Budget 0.05: toy-a may run 8..64 and toy-b
    8..32; both start above them (128, 64), where every choice goes down to the largest allowed size."""
    env = make_toy_env(duration_s=10, miss_budget=0.05)
    env.reset(seed=0)
    assert _batches(env) == {"toy-a": 128, "toy-b": 64}
    assert env.action_masks().tolist() == [True, False, False, True, False, False]
    env.step(np.full(2, 2))  # "up" is remapped: down to 64 and 32, the top of each allowed range
    assert _batches(env) == {"toy-a": 64, "toy-b": 32}
    assert env.action_masks().tolist() == [True, True, False, True, True, False]
    for _ in range(3):
        env.step(np.zeros(2, dtype=np.int64))
    assert _batches(env) == {"toy-a": 8, "toy-b": 8}  # the smallest size: down is masked
    assert env.action_masks().tolist() == [False, True, True, False, True, True]


def test_action_masks_need_discrete_actions():
    env = make_toy_env(duration_s=10, action="box")
    env.reset(seed=0)
    with pytest.raises(G2GError, match="action masks need discrete actions"):
        env.action_masks()
