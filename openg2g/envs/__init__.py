"""openg2g.envs: the Gymnasium environment and what the RL path shares with the ``rl_policy`` controller.

- :mod:`~openg2g.envs.env`: :class:`G2GEnv`, a thin adapter over the engine's ``Simulation``;
- :mod:`~openg2g.envs.config`: :class:`EnvConfig` (observation, action, reward, episodes);
- :mod:`~openg2g.envs.spaces`: :class:`SpaceLayout`, observation/action conversion (env and policy);
- :mod:`~openg2g.envs.terms`: custom reward and observation terms, named like controllers;
- :mod:`~openg2g.envs.variations`: seeded scenario variations and the held-out evaluation set;
- :mod:`~openg2g.envs.policy`: saving and loading trained policies with their env settings;
- :func:`make_toy_env`: the analytic toy case of :mod:`openg2g.testing` as an env (tests, benchmarks).

Importing this package registers the environments::

    import gymnasium, openg2g.envs
    env = gymnasium.make("openg2g/IEEE13-v0")            # bundled ieee13_none, discrete actions
    env = gymnasium.make("openg2g/IEEE13-v0", action="box", episode_steps=120)
    env = gymnasium.make("openg2g/Toy-v0")               # analytic, no traces or solver

(or without the import: ``gymnasium.make("openg2g.envs:openg2g/IEEE13-v0")``). The made env's
``spec.max_episode_steps`` is its episode length (a ``TimeLimit`` at the step where it truncates
anyway).
"""

from gymnasium.envs.registration import register, registry

from openg2g.core.lazy import lazy_exports

__all__ = [
    "ENV_IDS",
    "EnvConfig",
    "G2GEnv",
    "ObsConfig",
    "RewardWeights",
    "ScenarioGenerator",
    "SpaceLayout",
    "Variation",
    "VariationSpec",
    "make_env",
    "make_toy_env",
]

ENV_IDS: dict[str, dict[str, object]] = {
    "openg2g/IEEE13-v0": {"scenario": "ieee13_none", "episode_steps": 300},
    "openg2g/Toy-v0": {"scenario": "toy"},
}
"""Registered environment ids and their default keyword arguments."""

# Lazy, so that what needs one module (the CLI's training options) does not load the env and engine.
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "config": ("EnvConfig", "ObsConfig", "RewardWeights"),
        "env": ("G2GEnv", "make_env", "make_toy_env"),
        "spaces": ("SpaceLayout",),
        "variations": ("ScenarioGenerator", "Variation", "VariationSpec"),
    },
)

for _env_id, _kwargs in ENV_IDS.items():
    if _env_id not in registry:
        register(id=_env_id, entry_point="openg2g.envs.env:make_registered_env", kwargs=dict(_kwargs))
