"""The env's observation terms of a disturbed grid: the sites' blocks and the bulk system's frequency."""

from __future__ import annotations

import numpy as np
import pytest

from openg2g.core.errors import G2GError, ScenarioError
from openg2g.envs.env import G2GEnv, make_toy_env

OVERRIDES = ("duration_s=30", "grid.frequency={base_mw: 50}", "outputs.plots=false")


@pytest.mark.slow
def test_an_agent_sees_the_halls_leave_for_their_ups_and_the_frequency_rise() -> None:
    env = G2GEnv.from_scenario(
        "ieee13_fault_ups",
        OVERRIDES,
        variations=None,
        observation_terms=[{"term": "ride_through"}, {"term": "frequency", "params": {"scale_hz": 1.0}}],
    )
    names = env.layout.feature_names
    assert names[-4:] == (
        "ride_through.dc1.online",
        "ride_through.dc1.on_ups",
        "ride_through.dc1.ups_soc",
        "frequency.deviation",
    )
    obs, _ = env.reset(seed=0)
    seen = [obs[-4:]]
    for _ in range(25):
        obs, *_ = env.step(np.ones_like(env.action_space.sample()))  # every model holds its batch
        seen.append(obs[-4:])
    before, after = seen[5], seen[22]  # 6 s and 23 s: the fault is at 20 s
    assert before[:3].tolist() == [1.0, 0.0, 1.0] and abs(before[3]) < 0.01
    # every hall on its UPS, whose charge has begun to fall; 3.9 MW less on a 50 MW system: faster
    assert after[0] == 0.0 and after[1] == 1.0 and 0.9 < after[2] < 1.0 and after[3] > 0.01
    env.close()


def test_the_terms_refuse_a_scenario_without_what_they_read() -> None:
    for term, words in (
        ("ride_through", "no site of the scenario has a ride_through"),
        ("frequency", "models no frequency"),
    ):
        with pytest.raises((G2GError, ScenarioError), match=words):
            make_toy_env(duration_s=11, variations=None, observation_terms=[{"term": term}])
