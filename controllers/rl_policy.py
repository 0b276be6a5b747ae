"""A trained reinforcement-learning policy as a scenario controller.

The policy is a Stable-Baselines3 zip (PPO, A2C, SAC, TD3, DQN) with its env settings in a JSON
file beside it, written by ``openg2g train`` or ``openg2g policy wrap``, or inferred when there is
none (see :mod:`openg2g.envs.policy`). At each control step the controller builds the observation
vector exactly as the training env did (:class:`openg2g.envs.spaces.SpaceLayout`, from the run's
context and the saved observation settings), normalizes it with the ``VecNormalize`` statistics the
policy was trained with if any, asks the policy for an action and sends the commands it implies
(:class:`SetBatchSize`, and those of the other action families it was trained with: power caps,
replicas, taps, storage; :mod:`openg2g.envs.actions`). A scenario that lacks what such a family acts
on (a regulator bank, a battery), or gives it other values (a tap range), is refused, naming it.

Scenario use::

    controllers:
      - kind: rl_policy
        params: {policy: controllers/policies/ieee13_ppo.zip}
      - kind: rl_policy            # an SB3 zip trained with VecNormalize(norm_obs=True)
        params: {policy: logs/ppo/best_model.zip, vecnormalize: logs/ppo/vecnormalize.pkl}

``policy`` is a path (relative to the working directory) or the name of a bundled policy in
``controllers/policies`` (``ieee13_ppo``). Loading it unpickles nothing (:mod:`openg2g.envs.policy`);
a zip that holds pickled objects openg2g does not know is refused unless ``trust_pickle: true``. A scenario whose sites, models or monitored bus-phases
give spaces of other shapes or bounds than the policy's is refused at the start of the run, naming
both. A zip trained under ``VecNormalize`` without a JSON file saying which statistics it needs is
refused until ``vecnormalize`` names them (or says ``none``). A
policy trained with a deadline budget (``EnvConfig.miss_budget``) is held to the same allowed batch
sizes here as in training (:mod:`openg2g.envs.spaces`), whatever its network outputs. The
observation terms a policy was trained with (``EnvConfig.observation_terms``, in its JSON file)
are rebuilt for each run from the same entry point, module or file (a file path relative to the
working directory), each run starting them afresh; a term that cannot be imported refuses the
policy, naming the term. Reward terms are training's only and are not imported here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field, StrictBool

from openg2g.core.commands import Actuator, Command
from openg2g.core.interfaces import ControlContext, Controller
from openg2g.core.state import Observation

from ._base import ControllerConfig

if TYPE_CHECKING:  # the RL stack (gymnasium, torch) loads only when a scenario uses this controller
    from openg2g.envs.policy import ObsNormalization, PolicyMeta
    from openg2g.envs.spaces import SpaceLayout

__all__ = ["RLPolicy"]


class RLPolicy(Controller):
    """Acts with a trained SB3 policy on the settings it was trained for (batch sizes by default;
    the action families of its env settings, :mod:`openg2g.envs.actions`)."""

    name = "rl_policy"

    class Config(ControllerConfig):
        """Parameters of :class:`RLPolicy`."""

        policy: str = Field(description="Saved policy: path to its .zip (a .json must sit beside it) or bundled name.")
        deterministic: bool = Field(True, description="Take the policy's most likely action (else sample).")
        trust_pickle: StrictBool = Field(
            False,
            description=(
                "Let Stable-Baselines3 unpickle what openg2g cannot read without it (a zip not written by "
                "openg2g train): a pickle runs any code it carries, so only for a policy you trust."
            ),
        )
        vecnormalize: str | None = Field(
            None,
            description=(
                "SB3 VecNormalize statistics (vecnormalize.pkl, path relative to the working directory) the policy "
                "was trained with, applied to its observations; 'none': raw observations. Default: what the "
                "policy's .json says, else raw observations for a zip trained without VecNormalize."
            ),
        )

    def __init__(self, config: Config):
        from openg2g.envs.policy import policy_meta, resolve_policy

        self.config = config
        self.path = resolve_policy(config.policy)
        self.meta: PolicyMeta = policy_meta(self.path)
        self._model: Any = None
        self._normalization: ObsNormalization | None = None
        self.layout: SpaceLayout | None = None

    def reset(self, context: ControlContext, seed: int) -> None:
        """Load the policy and its observation statistics (once) and check that this scenario's
        spaces match it.

        :raises ControllerError: the scenario gives other observation/action shapes or bounds than
            the policy's, or other entries or values of an action family than it acts on (a
            regulator bank, battery or model it lacks), or the observation statistics are missing (policy trained under
            ``VecNormalize``), unreadable or of another shape.
        :raises ScenarioError: an observation term of the policy's settings cannot be built here
            (located at ``policy <zip>: env.observation_terms.<i>.term``).
        """
        from openg2g.envs.actions import check_families
        from openg2g.envs.policy import load_policy, observation_normalization
        from openg2g.envs.spaces import SpaceLayout

        super().reset(context, seed)
        if self._model is None:
            self._model, self.meta = load_policy(self.path, trust_pickle=self.config.trust_pickle)
            self._normalization = observation_normalization(
                self.path, self.config.vecnormalize, self._model.observation_space
            )
        self.layout = SpaceLayout.for_env(context, self.meta.env, str(self.path), f"policy {self.path}: env.")
        saved = self.meta.layout.get("actions")
        if isinstance(saved, list):
            check_families(saved, self.layout.families, f"policy {self.path}")
        self.layout.check_spaces(self._model.observation_space, self._model.action_space, f"policy {self.path}")

    def actuators(self) -> tuple[Actuator, ...]:
        assert self.layout is not None, "reset() first"
        return self.layout.actuators()

    def step(self, observation: Observation) -> list[Command]:
        assert self.layout is not None, "reset() first"
        obs = self.layout.observe(observation)
        if self._normalization is not None:
            obs = self._normalization.apply(obs)
        action, _ = self._model.predict(obs, deterministic=self.config.deterministic)
        return self.layout.commands(action, observation)
