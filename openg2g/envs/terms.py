"""Reward and observation terms of the RL env beyond the built-in ones, named like controllers.

``EnvConfig.reward_terms`` and ``EnvConfig.observation_terms`` list terms by ``term``, resolved as
a scenario's controller ``kind`` is (:func:`openg2g.control.registry.load_plugin`): the name of an
entry point of the ``openg2g.rl_terms`` group (the stock terms below, and any installed
package's), ``package.module:ClassName``, or ``path/to/file.py:ClassName`` (relative to the working
directory). A term class is built once per env (and per ``rl_policy`` run) from the run's
:class:`~openg2g.core.interfaces.ControlContext`: ``cls(context, cls.Config(**params))`` when it has
a ``Config`` (a pydantic model), else ``cls(context, **params)``.

- A **reward term** (:class:`RewardTerm`) is called after each env step with a :class:`RewardStep`
  and returns a float; the step's reward gains ``weight * value``. It only shapes training: a
  deployed policy never builds it.
- An **observation term** (:class:`ObservationTerm`) fixes its ``feature_names`` at construction
  and returns one float per name for each observation; its features follow the built-in ones in
  the observation vector and are clipped like them. ``rl_policy`` rebuilds the observation terms
  its policy was trained with (they are in the policy's JSON file), so the policy sees the same
  vector in deployment; a term that cannot be imported there refuses the policy, naming it.

Both have ``reset()``, called at the start of each episode (each run for ``rl_policy``). A value
that is not finite (or an observation array of another shape) is an error naming the term and the
simulation time, not a feature silently zeroed.

Stock terms: :class:`BatchReversals` (``batch_reversals``, reward), :class:`TapChanges`
(``tap_changes``, reward), :class:`TimeSinceTapChange` (``time_since_tap_change``, observation),
:class:`TapPositions` (``tap_positions``, observation), :class:`RideThroughBlocks`
(``ride_through``, observation: the sites' blocks on the grid, on UPS, UPS charge) and
:class:`FrequencyDeviation` (``frequency``, observation).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
from pydantic import Field, ValidationError

from openg2g.control.registry import instantiate, load_plugin
from openg2g.core.commands import Command, SetTaps
from openg2g.core.config import ConfigModel
from openg2g.core.errors import G2GError, ScenarioError
from openg2g.core.interfaces import ControlContext
from openg2g.core.state import Observation

__all__ = [
    "TERM_GROUP",
    "BatchReversals",
    "FrequencyDeviation",
    "ObservationTerm",
    "ObservationTerms",
    "RewardStep",
    "RewardTerm",
    "RewardTermSpec",
    "RewardTerms",
    "RideThroughBlocks",
    "TapChanges",
    "TapPositions",
    "TermError",
    "TermSpec",
    "TimeSinceTapChange",
    "build_observation_terms",
    "build_reward_terms",
    "foreign_term",
]

TERM_GROUP = "openg2g.rl_terms"
"""Package entry-point group of the reward and observation terms an env setting can name."""


class TermError(G2GError):
    """A reward or observation term returned something unusable while the env ran."""


# ----------------------------------------------------------------------------- settings
class TermSpec(ConfigModel):
    """One term of :class:`~openg2g.envs.config.EnvConfig` (an observation term as it is)."""

    term: str = Field(
        min_length=1,
        description="Entry-point name (group openg2g.rl_terms), 'package.module:ClassName' or "
        "'path/to/file.py:ClassName' (relative to the working directory).",
    )
    params: dict[str, Any] = Field(default_factory=dict, description="Validated by the term's own Config.")


class RewardTermSpec(TermSpec):
    """One reward term of :class:`~openg2g.envs.config.EnvConfig`: the reward gains ``weight * value``."""

    weight: float = Field(1.0, description="Multiplies the term's value (signed: a penalty takes a negative weight).")


# ----------------------------------------------------------------------------- protocols
@dataclass(frozen=True)
class RewardStep:
    """What a reward term sees of one env step.

    :param t_s: simulation time at the step's end (s).
    :param dt_s: the step's length, one control period (s).
    :param before: the state the agent acted on, at the step's start.
    :param observation: the state at the step's end (on a failed step, the last one observed).
    :param terms: the step's unweighted built-in terms, as in the env's ``info``:
        ``voltage_violation_pu``, ``overload_fraction``, ``throughput_fraction``, ``deadline_miss_fraction``.
    :param n_batch_changes: batch-size commands the agent sent at the step's start.
    :param failed: the simulation failed during the step.
    :param commands: the commands the agent sent at the step's start (not the scenario's events).
    """

    t_s: float
    dt_s: float
    before: Observation
    observation: Observation
    terms: Mapping[str, float]
    n_batch_changes: int
    failed: bool
    commands: tuple[Command, ...] = ()


@runtime_checkable
class RewardTerm(Protocol):
    """A reward term: built as ``cls(context, ...)`` (module docstring)."""

    name: str
    """Its key in the env's ``info["reward_terms"]``."""

    def reset(self) -> None:
        """Forget the past episode."""

    def __call__(self, step: RewardStep) -> float:
        """The term's unweighted value for the step."""


@runtime_checkable
class ObservationTerm(Protocol):
    """An observation term: built as ``cls(context, ...)`` (module docstring)."""

    feature_names: Sequence[str]
    """Names of its features, in order; fixed at construction (the observation space's shape)."""

    def reset(self) -> None:
        """Forget the past episode."""

    def __call__(self, observation: Observation) -> np.ndarray:
        """One float per feature name."""


def foreign_term(term: str) -> bool:
    """Whether a term setting names code that is not openg2g's own: a file, another package's
    module, or an entry point that another package declares (or that none does)."""
    source, sep, _ = term.rpartition(":")
    if sep:
        return source.endswith(".py") or not (source == "openg2g" or source.startswith("openg2g."))
    return term not in {e.name for e in entry_points(group=TERM_GROUP) if e.value.startswith("openg2g.")}


# ----------------------------------------------------------------------------- building
def _build(spec: TermSpec, where: str, what: str, context: ControlContext, base_dir: Path) -> Any:
    """The term ``spec`` names, built; errors as a ScenarioError located at ``where`` (``reward_terms.0``)."""
    try:
        cls = load_plugin(spec.term, base_dir, TERM_GROUP, what)
        if not isinstance(cls, type):
            raise G2GError(f"{spec.term!r} is not a class")
        return instantiate(cls, spec.params, f"{what} {spec.term!r}", context)
    except ValidationError as exc:
        problems = [(f"{where}.params.{'.'.join(map(str, e['loc']))}", e["msg"]) for e in exc.errors()]
        raise ScenarioError(problems) from None
    except G2GError as exc:
        raise ScenarioError([(f"{where}.term", str(exc))]) from exc


def _not_a(where: str, term: str, protocol: type, members: str) -> ScenarioError:
    return ScenarioError([(f"{where}.term", f"{term!r} is not a {protocol.__name__}: its instances need {members}")])


class RewardTerms:
    """The env's reward terms with their weights."""

    def __init__(self, specs: Sequence[RewardTermSpec], context: ControlContext, base_dir: Path):
        self.terms: list[tuple[RewardTermSpec, str, RewardTerm]] = []
        for i, spec in enumerate(specs):
            where = f"reward_terms.{i}"
            term = _build(spec, where, "reward term", context, base_dir)
            if not (isinstance(term, RewardTerm) and isinstance(getattr(term, "name", None), str)):
                raise _not_a(where, spec.term, RewardTerm, "name: str, reset(), __call__(step)")
            self.terms.append((spec, where, term))

    def __bool__(self) -> bool:
        return bool(self.terms)

    def reset(self) -> None:
        """Start an episode."""
        for _, _, term in self.terms:
            term.reset()

    def values(self, step: RewardStep) -> dict[str, float]:
        """Each term's unweighted value, by name.

        :raises TermError: a value that is not a finite number (the message names the term and ``t_s``).
        """
        out: dict[str, float] = {}
        for spec, where, term in self.terms:
            value = term(step)
            if not (isinstance(value, (int, float, np.floating, np.integer)) and np.isfinite(value)):
                raise TermError(
                    f"reward term {spec.term!r} ({where}) returned {value!r} at t={step.t_s:g} s; "
                    "a reward term must return a finite number"
                )
            out[term.name] = float(value)
        return out

    def weighted(self, values: Mapping[str, float]) -> float:
        """``sum(weight * value)`` of :meth:`values`' result, in the terms' order."""
        return sum(spec.weight * values[term.name] for spec, _, term in self.terms)


class ObservationTerms:
    """The observation terms of a layout: their features follow the built-in ones."""

    def __init__(self, specs: Sequence[TermSpec], context: ControlContext, base_dir: Path, at: str = ""):
        self.terms: list[tuple[TermSpec, str, ObservationTerm, int]] = []
        names: list[str] = []
        for i, spec in enumerate(specs):
            where = f"{at}observation_terms.{i}"
            term = _build(spec, where, "observation term", context, base_dir)
            features = getattr(term, "feature_names", None)
            if not isinstance(term, ObservationTerm) or isinstance(features, str):
                raise _not_a(where, spec.term, ObservationTerm, "feature_names, reset(), __call__(observation)")
            features = list(features)  # type: ignore[arg-type]  # checked just below
            if not features or not all(isinstance(n, str) for n in features):
                raise ScenarioError(
                    [
                        (
                            f"{where}.term",
                            f"{spec.term!r}: feature_names must be a non-empty list of strings, not {features!r}",
                        )
                    ]
                )
            names += features
            self.terms.append((spec, where, term, len(features)))
        self.feature_names: tuple[str, ...] = tuple(names)

    def __bool__(self) -> bool:
        return bool(self.terms)

    def reset(self) -> None:
        """Start an episode."""
        for _, _, term, _ in self.terms:
            term.reset()

    def values(self, observation: Observation) -> np.ndarray:
        """Every term's features, concatenated (float64).

        :raises TermError: an array of another length than the term's ``feature_names`` or with a
            value that is not finite (the message names the term and the observation's time).
        """
        parts = []
        for spec, where, term, n in self.terms:
            raw = term(observation)
            try:
                value = np.asarray(raw, dtype=np.float64)
            except (TypeError, ValueError):
                value = np.array([np.nan])
            if value.shape != (n,) or not np.isfinite(value).all():
                raise TermError(
                    f"observation term {spec.term!r} ({where}) returned {raw!r} at t={observation.t_s:g} s; "
                    f"it must return {n} finite numbers (one per feature name)"
                )
            parts.append(value)
        return np.concatenate(parts) if parts else np.zeros(0)


def build_reward_terms(
    specs: Sequence[RewardTermSpec], context: ControlContext, base_dir: Path | None = None
) -> RewardTerms:
    """The reward terms of ``specs``, built for a run of ``context``.

    :param base_dir: where file paths are relative to (default the working directory).
    :raises ScenarioError: per term, located at its field (``reward_terms.<i>.term`` or
        ``reward_terms.<i>.params.<name>``): unknown name, missing file or module, import failure,
        a class whose instances are no :class:`RewardTerm`, parameters its ``Config`` rejects.
    """
    return RewardTerms(specs, context, base_dir or Path.cwd())


def build_observation_terms(
    specs: Sequence[TermSpec], context: ControlContext, base_dir: Path | None = None, at: str = ""
) -> ObservationTerms:
    """The observation terms of ``specs``, built for a run of ``context``.

    :param base_dir: where file paths are relative to (default the working directory).
    :param at: where the settings come from, before each error's field (``"policy p.zip: env."``).
    :raises ScenarioError: as :func:`build_reward_terms`, at ``observation_terms.<i>``; also a
        term without feature names.
    """
    return ObservationTerms(specs, context, base_dir or Path.cwd(), at)


# ----------------------------------------------------------------------------- stock terms
class BatchReversals:
    """Reward term ``batch_reversals``: how many served models reversed their batch size this step.

    A model reverses when its batch size moves the opposite way to its previous move (up after
    down, or down after up), however many steps apart. Paired with a negative weight it
    discourages dithering that the built-in ``switching`` term (which prices every change alike)
    does not tell from a purposeful move: ``{term: batch_reversals, weight: -0.1}``.
    """

    name = "batch_reversals"

    def __init__(self, context: ControlContext):
        self._models = [(site, model) for site, info in context.sites.items() for model in info.models]
        self.reset()

    def reset(self) -> None:
        """Forget every model's last move."""
        self._direction: dict[tuple[str, str], int] = {}

    def __call__(self, step: RewardStep) -> float:
        reversals = 0
        for key in self._models:
            old, new = (_batch_size(o, *key) for o in (step.before, step.observation))
            if old is None or new is None:
                continue
            move = int(np.sign(new - old))
            if move:
                reversals += self._direction.get(key, move) == -move
                self._direction[key] = move
        return float(reversals)


def _batch_size(observation: Observation, site: str, model: str) -> int | None:
    """A model's batch size in ``observation``, None when its site or the model is not reported."""
    state = observation.datacenters.get(site)
    m = state.models.get(model) if state is not None else None
    return m.batch_size if m is not None else None


class TapChanges:
    """Reward term ``tap_changes``: the tap steps the agent moved this step (dimensionless), summed
    over every regulated phase it commanded: ``sum |new - old|`` with ``old`` the tap in the
    observation the agent acted on and ``new`` the tap its :class:`~openg2g.core.commands.SetTaps`
    sets. A ganged bank counts once (its phases share one tap changer). Taps a scheduled
    ``set_taps`` event or a bank's own ``auto`` control moves cost nothing: the agent did not
    choose them. With a negative weight (the cost of one tap step) it prices the wear of a
    regulator, whose tap changer is rated for a number of operations: ``{term: tap_changes,
    weight: -2}``.
    """

    name = "tap_changes"

    def __init__(self, context: ControlContext):
        self._ganged = {bank for bank, info in context.regulators.items() if info.ganged}

    def reset(self) -> None:
        """Nothing to forget: each step's commands carry its moves."""

    def __call__(self, step: RewardStep) -> float:
        moved = 0
        for command in step.commands:
            if isinstance(command, SetTaps):
                old = step.before.grid.taps[command.bank]
                phases = 1 if command.bank in self._ganged else len(command.taps)
                moved += sum(abs(new - was) for new, was in zip(command.taps[:phases], old[:phases]))
        return float(moved)


class TimeSinceTapChange:
    """Observation term ``time_since_tap_change``: per regulator bank, the time since its taps last
    moved (or since the first observation of the run), divided by ``scale_s``; one feature
    ``taps.<bank>.since_change`` per bank of the run. An agent that sees how long the regulators
    have rested can learn when a move of its own would wake them.
    """

    class Config(ConfigModel):
        """Parameters of :class:`TimeSinceTapChange`."""

        scale_s: float = Field(60.0, gt=0, description="Time that reads as 1.0 (s).")

    def __init__(self, context: ControlContext, config: Config):
        self.config = config
        self._banks = tuple(context.regulators)
        self.feature_names = tuple(f"taps.{bank}.since_change" for bank in self._banks)
        self.reset()

    def reset(self) -> None:
        """Forget the taps seen and when they moved."""
        self._taps: dict[str, tuple[int, ...]] = {}
        self._since_s: dict[str, float] = {}

    def __call__(self, observation: Observation) -> np.ndarray:
        out = np.zeros(len(self._banks))
        for i, bank in enumerate(self._banks):
            taps = tuple(observation.grid.taps.get(bank, ()))
            if self._taps.get(bank) != taps:
                self._taps[bank] = taps
                self._since_s[bank] = observation.t_s
            out[i] = (observation.t_s - self._since_s[bank]) / self.config.scale_s
        return out


class TapPositions:
    """Observation term ``tap_positions``: each regulated phase's tap, mapped from its bank's
    ``[min_tap, max_tap]`` onto ``[-1, 1]`` (dimensionless); one feature ``taps.<bank>.<phase>``
    per bank and phase (one ``taps.<bank>`` for a ganged bank). The built-in observation has the
    voltages the taps produce, not the taps themselves, so without it a tap-acting agent cannot
    tell how far a bank may still move, nor a scheduled tap change from a load change.
    """

    def __init__(self, context: ControlContext):
        regulators = context.regulators
        # (bank, index of the phase read); a ganged bank's phases share its first one's tap
        self._entries = tuple(
            (bank, k) for bank, info in regulators.items() for k in range(1 if info.ganged else len(info.phases))
        )
        self.feature_names = tuple(
            f"taps.{bank}" if regulators[bank].ganged else f"taps.{bank}.{regulators[bank].phases[k]}"
            for bank, k in self._entries
        )
        self._mid = np.array([(regulators[b].max_tap + regulators[b].min_tap) / 2 for b, _ in self._entries])
        self._half = np.array([(regulators[b].max_tap - regulators[b].min_tap) / 2 for b, _ in self._entries])

    def reset(self) -> None:
        """Nothing to forget: the feature is the observation's own taps."""

    def __call__(self, observation: Observation) -> np.ndarray:
        taps = np.array([float(observation.grid.taps[bank][k]) for bank, k in self._entries])
        return (taps - self._mid) / self._half


class RideThroughBlocks:
    """Observation term ``ride_through``: per site with a ride-through
    (:class:`~openg2g.core.interfaces.RideThroughInfo`), the share of its load on the grid in full
    (``ride_through.<site>.online``, 0-1), the share its UPS carries (``.on_ups``, 0-1) and the
    lowest state of charge of its blocks' UPS (``.ups_soc``, 0-1; 1 without a UPS). An agent that
    sees blocks leave and return can tell a site that has dropped onto its UPS from one that cut
    its own load, and how long the UPS will carry it.
    """

    def __init__(self, context: ControlContext):
        self._sites = tuple(name for name, info in context.sites.items() if info.ride_through is not None)
        if not self._sites:
            raise G2GError("observation term ride_through: no site of the scenario has a ride_through")
        self.feature_names = tuple(
            f"ride_through.{site}.{what}" for site in self._sites for what in ("online", "on_ups", "ups_soc")
        )

    def reset(self) -> None:
        """Nothing to forget: the features are the observation's own."""

    def __call__(self, observation: Observation) -> np.ndarray:
        out = []
        for site in self._sites:
            state = observation.ride_through[site]
            socs = [b.state_of_charge for b in state.blocks.values() if b.state_of_charge is not None]
            out += [state.online_fraction, state.on_ups_fraction, min(socs, default=1.0)]
        return np.array(out)


class FrequencyDeviation:
    """Observation term ``frequency``: the bulk system's frequency deviation from nominal divided
    by ``scale_hz`` (one feature ``frequency.deviation``); needs the scenario's ``grid.frequency``."""

    class Config(ConfigModel):
        """Parameters of :class:`FrequencyDeviation`."""

        scale_hz: float = Field(0.5, gt=0, description="Deviation that reads as 1.0 (Hz).")

    feature_names = ("frequency.deviation",)

    def __init__(self, context: ControlContext, config: Config):
        if context.f0_hz is None:
            raise G2GError("observation term frequency: the scenario models no frequency (grid.frequency)")
        self.config = config
        self._f0_hz = context.f0_hz

    def reset(self) -> None:
        """Nothing to forget: the feature is the observation's own frequency."""

    def __call__(self, observation: Observation) -> np.ndarray:
        assert observation.f_hz is not None, "a scenario with grid.frequency gives every observation its frequency"
        return np.array([(observation.f_hz - self._f0_hz) / self.config.scale_hz])
