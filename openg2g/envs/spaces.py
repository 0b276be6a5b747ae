"""Observation and action spaces, shared by the Gymnasium env and the ``rl_policy`` controller.

A :class:`SpaceLayout` is built from a run's :class:`~openg2g.core.interfaces.ControlContext` and an
:class:`~openg2g.envs.config.ObsConfig` plus an action kind. It fixes the order of every feature
and every controlled model, turns an :class:`~openg2g.core.state.Observation` into a float32 vector
(:meth:`SpaceLayout.observe`) and an action into commands (:meth:`SpaceLayout.commands`) through
the action families of :mod:`openg2g.envs.actions` (by default batch sizes alone,
:class:`~openg2g.core.commands.SetBatchSize`). The env and a deployed policy use the same object, so a
policy sees in deployment exactly what it saw in training.

Observation vector, in order (all clipped to ``[-clip, clip]``):

1. voltages, normalized so the band limits are -1 and +1: one per monitored bus-phase
   (``bus_phases``), or min, max and mean per zone (``zones``);
2. if ``branch_loading``: the most loaded line or transformer's loading as a fraction of its
   rating (1.0 at 100 %);
3. per site (if ``site_power``): facility power and training power, as fractions of the site's
   nominal power (every model at its largest measured batch, configured replicas, times PUE);
4. per (site, model), sites and models in context order: normalized log2 batch size (0 at the
   smallest measured size, 1 at the largest), ITL / deadline (ITL / ITL at the largest batch when
   the model has no deadline), deadline-miss fraction, active / configured replicas, model power
   as a fraction of its nominal power;
5. the features of the env setting's ``observation_terms``, term by term (:mod:`openg2g.envs.terms`).

Batch-size actions act on the *controlled* models: those with at least two measured batch sizes,
each stepping over its allowed sizes (:class:`~openg2g.envs.actions.BatchFamily`, which also holds
the deadline budget: ``miss_budget``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from gymnasium import spaces

from openg2g.core.commands import Actuator, Command
from openg2g.core.errors import ControllerError, G2GError, ScenarioError
from openg2g.core.interfaces import ControlContext
from openg2g.core.state import Observation
from openg2g.envs.actions import ActionFamily, ActionSpec, BatchAction, BatchFamily, build_families
from openg2g.envs.config import EnvConfig, ObsConfig
from openg2g.envs.slots import ModelSlot
from openg2g.envs.terms import ObservationTerms, build_observation_terms

__all__ = ["ActionKind", "SpaceLayout", "describe_space", "make_spaces"]

ActionKind = Literal["discrete", "box"]


def describe_space(space: spaces.Space) -> str:
    """A short text naming a space's type and shape (for error messages)."""
    if isinstance(space, spaces.MultiDiscrete):
        return f"MultiDiscrete(nvec={space.nvec.tolist()})"
    if isinstance(space, spaces.Box):
        return f"Box(shape={space.shape})"
    return repr(space)


def make_spaces(clip: float, n_features: int, action: ActionKind, n_actions: int) -> tuple[spaces.Box, spaces.Space]:
    """The observation and action spaces of a layout: ``n_features`` values in ``[-clip, clip]``
    (float32); per action entry (:mod:`openg2g.envs.actions`) a move down, none or up
    (``discrete``) or a target in ``[-1, 1]`` (``box``, float32).

    :raises ValueError: an action kind other than ``discrete`` and ``box``.
    """
    observation = spaces.Box(-clip, clip, shape=(n_features,), dtype=np.float32)
    if action == "discrete":
        return observation, spaces.MultiDiscrete(np.full(n_actions, 3, dtype=np.int64))
    if action == "box":
        return observation, spaces.Box(-1.0, 1.0, shape=(n_actions,), dtype=np.float32)
    raise ValueError(f"action must be 'discrete' or 'box', got {action!r}")


class SpaceLayout:
    """Feature order, spaces and the observation/action conversions for one control context.

    :param context: the static facts of the run (sites, models, monitored bus-phases, limits).
    :param obs: what the observation holds.
    :param action: ``"discrete"`` or ``"box"``.
    :param source: the scenario's name or path, quoted in errors.
    :param miss_budget: largest deadline-miss fraction a controlled model may be run at
        (:class:`~openg2g.envs.actions.BatchFamily`); ``None`` allows every measured batch size.
    :param actions: the action families (``EnvConfig.actions``), their entries in this order.
    :param terms: observation terms whose features follow the built-in ones (:mod:`openg2g.envs.terms`).
    :raises ScenarioError: no datacenter site, no model at all, no controllable model (one with at
        least two measured batch sizes), a zone naming an unknown bus, (with ``miss_budget``) a
        model with a deadline whose site reports no miss fractions or whose every batch size misses
        more than the budget, or an action family the scenario cannot carry out
        (:func:`~openg2g.envs.actions.build_families`).
    """

    def __init__(
        self,
        context: ControlContext,
        obs: ObsConfig,
        action: ActionKind,
        source: str = "scenario",
        miss_budget: float | None = None,
        actions: Sequence[ActionSpec] = (BatchAction(),),
        terms: ObservationTerms | None = None,
    ):
        self.obs_config = obs
        self.terms = terms
        self.action_kind = action
        if not context.sites:
            raise ScenarioError([(source, "the RL environment needs a datacenter site, and the scenario has none")])
        slots: list[ModelSlot] = []
        self._site_ref_w: dict[str, float] = {}
        for site_name, site in context.sites.items():
            site_ref = 0.0
            for name, m in site.models.items():
                i_max = int(np.argmax(m.batch_sizes)) if m.batch_sizes else 0
                p_max = max(m.power_w) if m.power_w else 0.0
                ref_replicas = float(max(m.replicas, 1))
                itl_ref = m.itl_deadline_s or (m.itl_s[i_max] if m.itl_s else 0.0) or 1.0
                power_ref = max(p_max * ref_replicas, 1.0)
                slots.append(ModelSlot(site_name, name, tuple(sorted(m.batch_sizes)), ref_replicas, power_ref, itl_ref))
                site_ref += power_ref * site.pue
            self._site_ref_w[site_name] = max(site_ref, 1.0)
        if not slots:
            raise ScenarioError([(source, "the RL environment needs at least one served model; no site lists any")])
        self.slots: tuple[ModelSlot, ...] = tuple(slots)
        self.controlled: tuple[ModelSlot, ...] = tuple(s for s in slots if s.controllable)
        if not self.controlled:
            found = ", ".join(f"{s.key} {list(s.batch_sizes)}" for s in slots)
            raise ScenarioError(
                [
                    (
                        source,
                        f"no controllable model: the RL agent needs a model with at least 2 batch sizes; found {found}",
                    )
                ]
            )
        self.sites: tuple[str, ...] = tuple(context.sites)
        self.bus_phases: tuple[str, ...] = tuple(context.bus_phases)
        self.v_mid_pu = 0.5 * (context.v_min_pu + context.v_max_pu)
        self.v_half_pu = 0.5 * (context.v_max_pu - context.v_min_pu)
        self._zone_index = self._zones(source)
        # per slot, the batch-size feature of each batch size met so far (observe)
        self._batch_feature: list[dict[int, float]] = [{} for _ in self.slots]
        self.batch = BatchFamily(self.controlled, context, miss_budget, source)
        """The controlled models' batch sizes, the family of a ``batch`` action (built without one too)."""
        self.feature_names: tuple[str, ...] = tuple(self._feature_names())
        self.families: tuple[ActionFamily, ...] = build_families(actions, self.batch, context, source)
        """The action families, in the order of their entries in the action."""
        self.n_actions = sum(f.size for f in self.families)
        self.n_targets = sum(f.n_targets for f in self.families)
        """Settings the actions command (models, sites, banks, batteries): the switching term's denominator."""
        self.observation_space, self.action_space = make_spaces(
            obs.clip, len(self.feature_names), action, self.n_actions
        )

    @classmethod
    def for_env(
        cls, context: ControlContext, config: EnvConfig, source: str = "scenario", settings_at: str = ""
    ) -> SpaceLayout:
        """The layout of an env's settings (observation and its terms, action kind and families, miss
        budget): what the env builds and what a saved policy's settings rebuild in deployment.

        :param settings_at: where ``config`` comes from, before a term error's field (see
            :func:`~openg2g.envs.terms.build_observation_terms`).
        """
        terms = build_observation_terms(config.observation_terms, context, at=settings_at)
        return cls(context, config.observation, config.action, source, config.miss_budget, config.actions, terms)

    # ----------------------------------------------------------------------------- layout
    def _zones(self, source: str) -> list[tuple[str, np.ndarray]]:
        if self.obs_config.voltages == "bus_phases":
            return []
        buses = [bp.rpartition(".")[0] for bp in self.bus_phases]
        zones = self.obs_config.zones
        if zones is None:
            return [("all", np.arange(len(self.bus_phases)))]
        out = []
        for name, members in zones.items():
            unknown = sorted(set(members) - set(buses))
            if unknown:
                raise ScenarioError(
                    [
                        (
                            source,
                            f"observation zone {name!r} names unknown buses {unknown}; monitored: {sorted(set(buses))}",
                        )
                    ]
                )
            idx = np.array([i for i, b in enumerate(buses) if b in set(members)])
            if idx.size == 0:
                raise ScenarioError([(source, f"observation zone {name!r} has no monitored bus-phase")])
            out.append((name, idx))
        return out

    def _feature_names(self) -> list[str]:
        names: list[str] = []
        if self.obs_config.voltages == "bus_phases":
            names += [f"v.{bp}" for bp in self.bus_phases]
        else:
            for zone, _ in self._zone_index:
                names += [f"v.{zone}.min", f"v.{zone}.max", f"v.{zone}.mean"]
        if self.obs_config.branch_loading:
            names.append("grid.max_loading")
        if self.obs_config.site_power:
            for site in self.sites:
                names += [f"{site}.power", f"{site}.training_power"]
        for s in self.slots:
            names += [f"{s.key}.{f}" for f in ("log2_batch", "itl_over_deadline", "miss_fraction", "replicas", "power")]
        return names + list(self.terms.feature_names if self.terms is not None else ())

    def describe(self) -> dict[str, Any]:
        """The layout as plain data (saved beside a policy)."""
        return {
            "features": list(self.feature_names),
            "controlled": [s.key for s in self.controlled],
            "batch_sizes": {s.key: list(s.batch_sizes) for s in self.controlled},
            "observation_shape": list(self.observation_space.shape or ()),
            "action": describe_space(self.action_space),
            "allowed_batch_sizes": self.batch.allowed_sizes(),
            "actions": [f.describe() for f in self.families],
        }

    # ----------------------------------------------------------------------------- conversions
    def observe(self, observation: Observation) -> np.ndarray:
        """The observation vector (float32, inside :attr:`observation_space`)."""
        # the features are gathered in a list and written at once: one numpy call, not one a feature
        values: list[float] = []
        v = (np.asarray(observation.grid.v_pu, dtype=np.float64) - self.v_mid_pu) / self.v_half_pu
        if self.obs_config.voltages == "bus_phases":
            values += v.tolist()
        else:
            for _, idx in self._zone_index:
                z = v[idx]
                finite = np.isfinite(z)
                if not finite.all():  # a NaN or an infinity among them: the finite ones alone
                    z = z[finite]
                # mean() is this sum over the count
                values += (z.min(), z.max(), np.add.reduce(z) / z.size) if z.size else (0.0, 0.0, 0.0)
        if self.obs_config.branch_loading:
            loading = observation.grid.branch_loading_pct
            if loading is not None and np.isfinite(loading).any():
                values.append(float(np.fmax.reduce(loading)) / 100.0)  # np.nanmax's reduction, without its checks
            else:
                values.append(0.0)
        datacenters = observation.datacenters
        if self.obs_config.site_power:
            for site in self.sites:
                state = datacenters.get(site)
                if state is not None:
                    ref = self._site_ref_w[site]
                    values += (state.power_w / ref, state.training_power_w / ref)
                else:
                    values += (0.0, 0.0)
        for s, features in zip(self.slots, self._batch_feature):
            state = datacenters.get(s.site)
            m = state.models.get(s.model) if state is not None else None
            if m is None:
                values += (0.0, 0.0, 0.0, 0.0, 0.0)
                continue
            feature = 0.0
            if s.controllable:
                known = features.get(m.batch_size)
                if known is None:
                    lo, hi = np.log2(s.batch_sizes[0]), np.log2(s.batch_sizes[-1])
                    known = features[m.batch_size] = (np.log2(max(m.batch_size, 1)) - lo) / (hi - lo)
                feature = known
            values += (
                feature,
                m.itl_s / s.itl_ref_s,
                m.deadline_miss_fraction,
                m.replicas / s.replicas_ref,
                m.power_w / s.power_ref_w,
            )
        out = np.array(values, dtype=np.float64)
        if self.terms:
            out = np.concatenate([out, self.terms.values(observation)])
        clip = self.obs_config.clip
        out[np.isnan(out)] = 0.0  # NaN reads 0; the clip takes an infinity to the bound of its sign
        # np.clip's result (no NaN is left) by its two ufuncs, without its wrappers
        return np.minimum(np.maximum(out, -clip, out=out), clip, out=out).astype(np.float32)

    def _split(self, action: Any) -> list[np.ndarray]:
        """The action's slice of each family, in :attr:`families` order."""
        a = np.asarray(action).reshape(-1)
        if a.size != self.n_actions:
            raise ValueError(f"action has {a.size} entries; this layout's actions have {self.n_actions}")
        if len(self.families) == 1:  # the common case, without np.split's own cost
            return [a]
        return np.split(a, np.cumsum([f.size for f in self.families])[:-1])

    def action_mask(self, observation: Observation) -> np.ndarray:
        """Which discrete choices the action families carry out as chosen, in sb3-contrib's
        ``MaskablePPO`` layout: a flat boolean array of ``3 * n_actions`` entries, entry by entry
        ``(down, stay, up)``, the families in :attr:`families` order.

        A choice is allowed when the setting it leads to moves the way it says: down to a smaller
        value, stay on the present one, up to a larger one. The others are remapped (a move past
        the end of an entry's values stays put; a batch size outside the allowed ones goes to the
        nearest allowed one whatever is chosen), so masking them changes no outcome.

        :raises G2GError: the layout's actions are not discrete (``action="box"`` has no choices to mask).
        """
        if self.action_kind != "discrete":
            raise G2GError(
                f"action masks need discrete actions (env setting action='discrete'), not {self.action_kind!r}"
            )
        return np.concatenate([f.mask(observation) for f in self.families]).reshape(-1)

    def commands(self, action: Any, observation: Observation) -> list[Command]:
        """The commands that carry out ``action`` (only for settings that change), family by family."""
        discrete = self.action_kind == "discrete"
        return [
            command
            for family, part in zip(self.families, self._split(action))
            for command in family.commands(part, observation, discrete)
        ]

    def actuators(self) -> tuple[Actuator, ...]:
        """The settings the layout's actions write."""
        return tuple(a for f in self.families for a in f.actuators())

    # ----------------------------------------------------------------------------- compatibility
    def check_spaces(self, observation_space: spaces.Space, action_space: spaces.Space, what: str) -> None:
        """Check that a policy's spaces equal this layout's.

        :param what: the policy, named in the error (e.g. its file).
        :raises ControllerError: stating the expected and the found observation/action spaces.
        """
        problems = []
        if not (isinstance(observation_space, spaces.Box) and observation_space.shape == self.observation_space.shape):
            problems.append(
                f"observation: the scenario gives {describe_space(self.observation_space)}, "
                f"the policy expects {describe_space(observation_space)}"
            )
        elif bounds := _other_bounds(self.observation_space, observation_space):
            problems.append(f"observation bounds: {bounds}")
        same_action = type(action_space) is type(self.action_space) and (
            np.array_equal(action_space.nvec, self.action_space.nvec)  # type: ignore[attr-defined]
            if isinstance(action_space, spaces.MultiDiscrete)
            else action_space.shape == self.action_space.shape
        )
        if not same_action:
            problems.append(
                f"action: the scenario gives {describe_space(self.action_space)} "
                f"({'; '.join(f.entries_text() for f in self.families)}), "
                f"the policy expects {describe_space(action_space)}"
            )
        elif isinstance(action_space, spaces.Box) and (bounds := _other_bounds(self.action_space, action_space)):
            problems.append(f"action bounds: {bounds}")
        if problems:
            raise ControllerError(f"{what} does not fit this scenario: " + "; ".join(problems))


def _other_bounds(expected: spaces.Space, found: spaces.Box) -> str:
    """What differs between the bounds (or dtype) of two boxes of one shape, or "" if nothing does."""
    assert isinstance(expected, spaces.Box)
    if (
        np.array_equal(expected.low, found.low)
        and np.array_equal(expected.high, found.high)
        and expected.dtype == found.dtype
    ):
        return ""
    return f"the scenario gives {_box_range(expected)}, the policy expects {_box_range(found)}"


def _box_range(box: spaces.Box) -> str:
    """``[-10, 10] float32``, or the bounds of each entry where they are not all alike."""
    low, high = np.unique(box.low), np.unique(box.high)
    if low.size == 1 and high.size == 1:
        return f"[{low[0]:g}, {high[0]:g}] {box.dtype}"
    return f"low {box.low.tolist()}, high {box.high.tolist()} {box.dtype}"
