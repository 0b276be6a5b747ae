"""Bad input fails early with a message that says what is missing or what does not match."""

from __future__ import annotations

import pytest
from gymnasium import spaces

from openg2g.core.errors import ControllerError, ScenarioError
from openg2g.envs import EnvConfig, G2GEnv, SpaceLayout, make_toy_env
from openg2g.testing import toy_components, toy_scenario


def test_no_datacenter_is_named():
    with pytest.raises(ScenarioError, match="needs a datacenter site"):
        G2GEnv(toy_scenario(10, overrides=["datacenters=[]"]), components=toy_components)


def test_no_controllable_model_is_named():
    fixed = [
        "datacenters.0.models.0.batch_sizes=[128]",
        "datacenters.0.models.1.batch_sizes=[64]",
    ]
    with pytest.raises(ScenarioError, match=r"no controllable model.*at least 2 batch sizes.*dc/toy-a \[128\]"):
        G2GEnv(toy_scenario(10, overrides=fixed), components=toy_components)


def test_one_fixed_model_is_observed_not_controlled():
    env = G2GEnv(toy_scenario(10, overrides=["datacenters.0.models.1.batch_sizes=[64]"]), components=toy_components)
    assert env.action_space == spaces.MultiDiscrete([3])
    assert "dc/toy-b.power" in env.layout.feature_names


def test_episode_longer_than_scenario():
    with pytest.raises(ScenarioError, match=r"episode_steps=50 needs 51 s .* lasts 10 s \(at most 9 steps\)"):
        make_toy_env(duration_s=10, episode_steps=50)


def test_unknown_config_key_rejected():
    with pytest.raises(ValueError, match="rewrad"):
        EnvConfig.model_validate({"rewrad": {}})


def test_unknown_zone_bus():
    with pytest.raises(ScenarioError, match=r"zone 'z' names unknown buses \['nope'\]"):
        make_toy_env(duration_s=10, observation={"zones": {"z": ["nope"]}})


def test_mismatched_policy_spaces_state_expected_and_found():
    env = make_toy_env(duration_s=10)
    layout: SpaceLayout = env.layout
    with pytest.raises(ControllerError) as exc:
        layout.check_spaces(spaces.Box(-1, 1, (7,)), spaces.MultiDiscrete([3, 3, 3]), "policy p.zip")
    msg = str(exc.value)
    assert "policy p.zip does not fit" in msg
    assert "scenario gives Box(shape=(15,)), the policy expects Box(shape=(7,))" in msg
    assert "MultiDiscrete(nvec=[3, 3])" in msg and "MultiDiscrete(nvec=[3, 3, 3])" in msg
    layout.check_spaces(env.observation_space, env.action_space, "same")  # no error
