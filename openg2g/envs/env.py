"""The Gymnasium environment: a thin adapter over :class:`~openg2g.engine.simulation.Simulation`.

One env step is one control period of the scenario (``periods.control_s``): the agent's action
becomes commands (:class:`~openg2g.core.commands.SetBatchSize` by default; the families of
``EnvConfig.actions``, :mod:`openg2g.envs.actions`) sent at the present instant (they take
effect at once, like a scenario controller's), the engine runs to the next control instant, and the
reward is computed from the change of the run's metrics over that period (see
:class:`~openg2g.envs.config.RewardWeights`).

Timeline of an episode of ``N`` steps with control period ``c``: :meth:`G2GEnv.reset` runs the
scenario over ``(0, c]`` without any action and observes at ``c``; step ``k`` (1-based) acts at
``k c`` and observes at ``(k + 1) c``. The episode's scenario therefore lasts ``(N + 1) c``; its
end is a time limit (``truncated``). ``terminated`` is set only when the simulation fails (a power
flow that does not converge), with the ``failure`` penalty.

With ``reward_baseline="no_control"`` each episode also runs its variation without any agent
command, in step with the agent's run, and a step's reward is the agent's minus that run's over the
same period (``info["reference_reward"]`` holds the latter). The reference does not depend on the
agent's actions, so the best policy is the same; what it removes is the part of the reward that the
variation alone decides (feeder load, PV, events), which otherwise dominates the variance of the
returns that policy-gradient training estimates (see docs/rl.md, "Reward"). The env setting's
``reward_terms`` (:mod:`openg2g.envs.terms`) are computed on the agent's run only: the reference
run does not offset them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

from openg2g.core.commands import SetBatchSize
from openg2g.core.errors import ScenarioError, SimulationError
from openg2g.core.interfaces import ControlContext
from openg2g.core.state import Observation
from openg2g.engine.simulation import Simulation
from openg2g.envs.config import EnvConfig
from openg2g.envs.render import RENDER_MODES, render_frame, render_text
from openg2g.envs.spaces import SpaceLayout
from openg2g.envs.terms import RewardStep, build_reward_terms
from openg2g.envs.variations import ScenarioGenerator, Variation
from openg2g.record.metrics import MetricsRecorder
from openg2g.scenario.build import ComponentBuilder, Components
from openg2g.scenario.loader import LoadedScenario, load_scenario
from openg2g.scenario.schema import Scenario
from openg2g.testing.toy import toy_components, toy_scenario

__all__ = ["ComponentsFactory", "G2GEnv", "make_env", "make_registered_env", "make_toy_env"]

ComponentsFactory = Callable[[LoadedScenario], Components]
"""Builds ``(sites, grid, controllers)`` for a scenario, as :class:`~openg2g.scenario.build.ComponentBuilder`."""


def _problem(source: str, message: str) -> ScenarioError:
    return ScenarioError([(source, message)])


class G2GEnv(gym.Env[np.ndarray, np.ndarray]):
    """Datacenter batch-size control on a distribution feeder, as a Gymnasium environment.

    Build it with :meth:`from_scenario` (a scenario file or bundled name) or directly from a
    :class:`~openg2g.scenario.loader.LoadedScenario`. Observation and action spaces are fixed
    here from the scenario's sites, models and monitored bus-phases (see
    :class:`~openg2g.envs.spaces.SpaceLayout`).

    :param scenario: the validated scenario.
    :param config: an :class:`EnvConfig` or a mapping of its fields.
    :param components: builds the components of each episode's scenario; default the real
        backends through a :class:`~openg2g.scenario.build.ComponentBuilder`. With
        ``reward_baseline="no_control"`` it must build new sites and grid at each call, since the
        reference run steps beside the agent's (the default keeps a second builder for it).
    :param render_mode: ``None`` (no rendering; runs write plots instead), ``"ansi"`` (:meth:`render`
        returns text) or ``"rgb_array"`` (:meth:`render` returns an image), see :mod:`openg2g.envs.render`.
    :raises ScenarioError: the scenario has no datacenter, no controllable model, or is shorter
        than two control periods or than the requested episode; a reward or observation term that
        cannot be built (located at its field, ``reward_terms.<i>.term``).
    :raises ValueError: a render mode other than those of ``metadata["render_modes"]``.
    """

    # Gymnasium declares metadata as a class-level dict; render_fps is the playback rate of a
    # recorded episode, one frame per control step
    metadata: dict[str, Any] = {"render_modes": list(RENDER_MODES), "render_fps": 4}  # noqa: RUF012

    # Set in __init__ from the scenario:
    observation_space: gym.spaces.Box
    action_space: gym.spaces.Space

    def __init__(
        self,
        scenario: LoadedScenario,
        config: EnvConfig | Mapping[str, Any] | None = None,
        *,
        components: ComponentsFactory | None = None,
        render_mode: str | None = None,
    ):
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"render_mode {render_mode!r} is not supported; use one of {self.metadata['render_modes']} or None"
            )
        self.render_mode = render_mode
        self.config = config if isinstance(config, EnvConfig) else EnvConfig.model_validate(dict(config or {}))
        self.loaded = scenario
        source = str(scenario.path)
        sc = scenario.scenario
        if not sc.datacenters:
            raise _problem(source, "the RL environment needs a datacenter site (datacenters: is empty)")
        if not self.config.keep_controllers:
            sc = sc.model_copy(update={"controllers": []})
        self.control_s: Fraction = sc.periods.control_s
        available = int(sc.duration_s // self.control_s) - 1
        if available < 1:
            raise _problem(
                source,
                f"duration_s ({float(sc.duration_s):g} s) must span at least two control periods "
                f"({float(self.control_s):g} s each) for one env step",
            )
        steps = self.config.episode_steps or available
        if steps > available:
            raise _problem(
                source,
                f"episode_steps={steps} needs {(steps + 1) * float(self.control_s):g} s of scenario "
                f"but it lasts {float(sc.duration_s):g} s (at most {available} steps)",
            )
        self.episode_steps = steps
        self.generator = ScenarioGenerator(sc, self.config.variations, (steps + 1) * self.control_s)
        self._components = components or ComponentBuilder()
        # The no-control run steps in turn with the agent's, so it needs site and grid objects of
        # its own: one builder reuses them from run to run, safe only for runs one after the other.
        self._reference_components = components or ComponentBuilder()
        self._eval_set: list[Variation] | None = None

        sim = self._simulation(self.generator.as_written().scenario)
        self.context: ControlContext = sim.context(float(self.control_s))
        self.layout = SpaceLayout.for_env(self.context, self.config, source)
        self.observation_space = self.layout.observation_space
        self.action_space = self.layout.action_space
        self.reward_terms = build_reward_terms(self.config.reward_terms, self.context)
        # the most tokens per second the scenario can serve: every model at its best batch size
        best = [max(self.context.sites[s.site].models[s.model].throughput_tok_s or (0.0,)) for s in self.layout.slots]
        self._throughput_ref = sum(b * s.replicas_ref for b, s in zip(best, self.layout.slots)) or 1.0
        self.sim: Simulation | None = None
        self.reference: Simulation | None = None
        """The episode's run without agent commands (``reward_baseline="no_control"``), else ``None``."""
        self._observation: Observation | None = None
        self._step_count = 0
        self._episode = 0
        self._needs_reset = True

    # ----------------------------------------------------------------------------- building
    @classmethod
    def from_scenario(
        cls,
        scenario: str | Path | LoadedScenario,
        overrides: Sequence[str] = (),
        *,
        components: ComponentsFactory | None = None,
        render_mode: str | None = None,
        **config: Any,
    ) -> G2GEnv:
        """Build the env from a scenario file or bundled name.

        :param scenario: path, bundled scenario name (``ieee13_none``), or a loaded scenario.
        :param overrides: ``dotted.key=value`` scenario overrides (as ``openg2g run --set``).
        :param config: :class:`EnvConfig` fields, e.g. ``action="box"``, ``episode_steps=300``.
        """
        loaded = scenario if isinstance(scenario, LoadedScenario) else load_scenario(scenario, overrides)
        return cls(loaded, config, components=components, render_mode=render_mode)

    def _simulation(self, scenario: Scenario, components: ComponentsFactory | None = None) -> Simulation:
        loaded = LoadedScenario(scenario, self.loaded.path, self.loaded.base_dir, self.loaded.sha256)
        return Simulation.from_scenario(loaded, components=(components or self._components)(loaded))

    def evaluation_set(self) -> list[Variation]:
        """The held-out evaluation variations (``config.n_eval`` of them, from ``config.eval_seed``)."""
        if self._eval_set is None:
            self._eval_set = self.generator.evaluation_set(self.config.n_eval, self.config.eval_seed)
        return self._eval_set

    # ----------------------------------------------------------------------------- gymnasium API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start an episode on a new scenario variation and observe after the first control period.

        :param seed: seeds the env's ``np_random``, from which training variations are drawn.
        :param options: ``{"eval_index": k}`` runs held-out variation ``k``; ``{"variation": "as_written"}``
            runs the scenario without randomization, ``{"variation": v}`` the :class:`Variation` ``v``.
        :return: ``(observation, info)``; ``info`` holds ``t_s`` and ``variation`` (what was drawn).
        """
        super().reset(seed=seed)
        self.reward_terms.reset()
        if self.layout.terms is not None:
            self.layout.terms.reset()
        options = options or {}
        if isinstance(options.get("variation"), Variation):
            variation = options["variation"]
        elif options.get("variation") == "as_written":
            variation = self.generator.as_written()
        elif "eval_index" in options or self.config.mode == "eval":
            index = int(options.get("eval_index", self._episode)) % self.config.n_eval
            variation = self.evaluation_set()[index]
        else:
            variation = self.generator.sample(self.np_random)
        self._episode += 1
        self.sim = self._simulation(variation.scenario)
        self.sim.start()
        self._step_count = 0
        self.sim.run_until(self.control_s)
        self._observation = self.sim.observation()
        self.reference = None
        if self.config.reward_baseline == "no_control":
            self.reference = self._simulation(variation.scenario, self._reference_components)
            shared = {id(c) for c in (*self.sim.sites, self.sim.grid)} & {
                id(c) for c in (*self.reference.sites, self.reference.grid)
            }
            if shared:
                raise ValueError(
                    "reward_baseline='no_control' runs the episode twice side by side, but the components "
                    "factory gave both runs the same site or grid objects: build new ones at each call"
                )
            self.reference.start()
            self.reference.run_until(self.control_s)
        self._needs_reset = False
        return self.layout.observe(self._observation), {"t_s": self._observation.t_s, "variation": variation.drawn}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, SupportsFloat, bool, bool, dict[str, Any]]:
        """Apply ``action`` for one control period.

        :return: ``(observation, reward, terminated, truncated, info)``:

            - observation (``np.ndarray``, float32): the state at the next control instant;
            - reward (``float``): weighted sum of the step's terms (see :class:`RewardWeights`)
              plus ``weight * value`` of each of the env setting's ``reward_terms``;
            - terminated (``bool``): the simulation failed (the episode cannot continue);
            - truncated (``bool``): the episode's last step (time limit);
            - info (``dict``): ``t_s``, the unweighted terms ``voltage_violation_pu``,
              ``overload_fraction``, ``throughput_fraction``, ``deadline_miss_fraction``, ``n_batch_changes``
              (batch-size commands sent), ``n_commands`` (every command sent), ``failed``,
              ``error`` when the simulation failed, and with ``reward_baseline="no_control"``
              ``reference_reward``, the reward of the run without agent commands over the step (the
              returned reward is the agent's minus it), and with ``reward_terms`` ``reward_terms``,
              each one's unweighted value by name.
        :raises TermError: a reward or observation term returned a value that is not finite.
        """
        if self._needs_reset or self.sim is None or self._observation is None:
            raise RuntimeError("call reset() before step() (the episode has ended or never started)")
        before = self._observation
        commands = self.layout.commands(action, before)
        self.sim.send(commands, source="agent")
        self._step_count += 1
        info: dict[str, Any] = {}
        reward, terms, error = self._advance(self.sim, len(commands))
        if error is None:
            self._observation = self.sim.observation()
        else:
            info["error"] = error
        failed = error is not None
        n_batch = sum(isinstance(c, SetBatchSize) for c in commands)
        if self.reward_terms:
            t_s = float((self._step_count + 1) * self.control_s)
            step = RewardStep(
                t_s, float(self.control_s), before, self._observation, terms, n_batch, failed, tuple(commands)
            )
            info["reward_terms"] = self.reward_terms.values(step)
            reward += self.reward_terms.weighted(info["reward_terms"])
        if self.reference is not None:
            reference_reward, _, reference_error = self._advance(self.reference, 0)
            if reference_error is not None:  # the reference cannot go on: the remaining steps are not offset
                self.reference = None
            reward -= reference_reward
            info["reference_reward"] = reference_reward
        terminated = failed
        truncated = not failed and self._step_count >= self.episode_steps
        self._needs_reset = terminated or truncated
        info.update(
            t_s=self._observation.t_s, **terms, n_batch_changes=n_batch, n_commands=len(commands), failed=failed
        )
        return self.layout.observe(self._observation), float(reward), terminated, truncated, info

    def _advance(self, sim: Simulation, n_commands: int) -> tuple[float, dict[str, float], str | None]:
        """Run ``sim`` to the end of the present step and weigh the change of its metrics.

        :param n_commands: commands sent at the step's start (the switching term).
        :return: ``(reward, unweighted terms, error)`` with ``error`` the message of a simulation
            failure (the step then pays the failure penalty), else ``None``.
        """
        before = self._snapshot(sim)
        error = None
        try:
            sim.run_until((self._step_count + 1) * self.control_s)
        except SimulationError as exc:
            error = str(exc)
        after = self._snapshot(sim)
        c = float(self.control_s)
        tokens = after[2] - before[2]
        terms = {
            "voltage_violation_pu": (after[0] - before[0]) / c,
            "overload_fraction": (after[4] - before[4]) / (100.0 * c),
            "throughput_fraction": (after[1] - before[1]) / (c * self._throughput_ref),
            "deadline_miss_fraction": (after[3] - before[3]) / tokens if tokens > 0 else 0.0,
        }
        w = self.config.reward
        reward = (
            -w.voltage * terms["voltage_violation_pu"]
            - w.overload * terms["overload_fraction"]
            + w.throughput * terms["throughput_fraction"]
            - w.latency * terms["deadline_miss_fraction"]
            - w.switching * n_commands / self.layout.n_targets
            - w.failure * float(error is not None)
        )
        return reward, terms, error

    @staticmethod
    def _snapshot(sim: Simulation) -> tuple[float, float, float, float, float]:
        m = sim.recorder(MetricsRecorder).metrics
        assert m is not None, "the simulation has not started"
        return (m.violation_integral_pu_s, m.throughput_time_tok, m.tokens, m.missed_tokens, m.overload_integral_pct_s)

    def render(self) -> str | np.ndarray | None:
        """Draw the latest observed state in the env's ``render_mode``.

        :return: ``None`` when ``render_mode`` is ``None``; for ``"ansi"`` a text of a few lines;
            for ``"rgb_array"`` a uint8 image of shape :data:`~openg2g.envs.render.FRAME_SHAPE`.
        :raises gymnasium.error.ResetNeeded: no episode has been started yet.
        """
        if self.render_mode is None:
            return None
        if self._observation is None:
            raise gym.error.ResetNeeded("call reset() before render(): there is no state to draw yet")
        if self.render_mode == "ansi":
            return render_text(self.layout, self._observation, self._step_count, self.episode_steps)
        return render_frame(self.layout, self._observation)

    def action_masks(self) -> np.ndarray:
        """The choices of the next step's action that the env carries out as chosen (sb3-contrib's
        ``MaskablePPO`` reads this method): a flat boolean array over the ``MultiDiscrete`` choices,
        entry by entry ``(down, stay, up)``; see :meth:`SpaceLayout.action_mask`.

        :raises RuntimeError: called before :meth:`reset`.
        :raises G2GError: the env has box actions.
        """
        if self._observation is None:
            raise RuntimeError("call reset() before action_masks(): there is no state to mask from")
        return self.layout.action_mask(self._observation)

    def close(self) -> None:
        """Drop the running simulation."""
        self.sim = None
        self.reference = None
        self._needs_reset = True


def make_env(
    scenario: str | Path, overrides: Sequence[str] = (), *, render_mode: str | None = None, **config: Any
) -> G2GEnv:
    """Gymnasium entry point: :meth:`G2GEnv.from_scenario` as a plain function.

    ``scenario="toy"`` builds the analytic toy case (:func:`make_toy_env`).
    """
    if str(scenario) == "toy":
        return make_toy_env(overrides=overrides, render_mode=render_mode, **config)
    return G2GEnv.from_scenario(scenario, overrides, render_mode=render_mode, **config)


def make_registered_env(scenario: str | Path, overrides: Sequence[str] = (), **kwargs: Any) -> gym.Env:
    """Entry point of the registered ids: :func:`make_env` under a :class:`~gymnasium.wrappers.TimeLimit`
    of the env's own episode length, so that the made env's ``spec.max_episode_steps`` states it
    whatever ``episode_steps`` or scenario the keyword arguments give. The env truncates at the
    same step by itself, so the wrapper changes no episode."""
    env = make_env(scenario, overrides, **kwargs)
    return gym.wrappers.TimeLimit(env, env.episode_steps)


def make_toy_env(
    duration_s: float = 60,
    training: bool = True,
    overrides: Sequence[str] = (),
    *,
    render_mode: str | None = None,
    **config: Any,
) -> G2GEnv:
    """The analytic toy environment of :mod:`openg2g.testing.toy` (registered as ``openg2g/Toy-v0``).

    Like Stable-Baselines3's identity envs it has a known good policy (the largest batches that keep
    the voltage above ``v_min_pu``) and needs no traces or power-flow solver.

    :param duration_s: scenario length (s); one step per second.
    :param training: whether the scenario has a training job.
    :param overrides: scenario ``dotted.key=value`` overrides.
    :param render_mode: ``None``, ``"ansi"`` or ``"rgb_array"`` (see :class:`G2GEnv`).
    :param config: :class:`~openg2g.envs.config.EnvConfig` fields.
    """
    return G2GEnv(
        toy_scenario(duration_s, training, overrides), config, components=toy_components, render_mode=render_mode
    )
