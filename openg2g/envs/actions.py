"""Action families of the RL environment: what the agent sets, each family's space, mask and commands.

``EnvConfig.actions`` lists the families an env acts through; the combined action is one
``MultiDiscrete`` (``action="discrete"``) or one ``Box`` in ``[-1, 1]`` (``action="box"``) holding
the families' entries concatenated in the order of that list, each family's entries in the order
given below (:attr:`ActionFamily.labels` names them; ``SpaceLayout.describe()["actions"]`` records
them beside a saved policy).

=============  ===============================================  ==========================================
family         one entry per                                    values an entry steps over (its grid)
=============  ===============================================  ==========================================
``batch``      controlled model (>= 2 measured batch sizes)     its allowed batch sizes (below)
``power_cap``  (site, model), or site (``per: site``)           ``levels`` caps evenly from the GPUs' lowest
                                                                to highest settable cap (W per GPU)
``replicas``   (site, model) with configured replicas           whole counts ``round(f * configured)`` for
                                                                ``f`` from ``min_fraction`` in steps of ``step``
                                                                up to ``max_fraction``, which is included
``taps``       (regulator bank, regulated phase); a ganged      every tap step from the bank's ``min_tap``
               bank (one tap for its phases): the bank          to its ``max_tap``
``storage``    battery                                          ``levels`` active-power setpoints evenly
                                                                from -rating (charging) to +rating (W)
=============  ===============================================  ==========================================

Every family but ``batch`` acts the same way on its grid, from the setting in force as the
observation reports it:

- discrete: 0 moves to the nearest grid value below the present setting, 1 stays, 2 moves to the
  nearest grid value above it; a move past either end of the grid stays (and is masked). A setting
  off the grid (a scheduled event set it, or a ramp is under way) moves to its grid neighbours.
- box: ``x`` in ``[-1, 1]`` maps linearly onto ``[lowest, highest]`` of the grid and the nearest grid
  value is set.

A command is sent only for a setting that changes.

**Batch sizes** (:class:`BatchFamily`) step over a ladder of their own: each controlled model's
*allowed* sizes, its measured sizes or (with ``EnvConfig.miss_budget``) those whose steady-state
deadline-miss fraction, as its site reports it (:attr:`~openg2g.core.interfaces.ModelInfo.miss_fraction`:
the trace library's ITL mixture at the model's deadline), is at most the budget. The model's present
size is the measured one nearest in log2.

- discrete: 0, 1, 2 step down, stay, up the allowed sizes (stopping at either end); a model found
  outside them (where the run started) goes to the nearest allowed size below, or the smallest
  allowed, whatever is chosen.
- box: ``x`` in ``[-1, 1]`` maps linearly onto ``[log2 smallest, log2 largest]`` of the measured
  sizes and the allowed size nearest in log2 is set.

No command for a size outside the allowed ones is ever sent. The mask lives here rather than in the
policy's network so that it binds in the env and in deployment (the ``rl_policy`` controller) alike,
whatever the network outputs. It bounds each model's miss fraction by the budget from the moment its
move out of an over-budget starting size has settled (a batch transition blends the old and new
sizes' tails by token share, so moves among allowed sizes stay within it), as long as no power cap
slows the model (a cap raises the tails).

Settings in force: a model's power cap (an uncapped model counts as its GPUs' highest cap, their
default limit), its active replicas (fractional while a ramp runs), a bank's taps, a battery's
last active-power setpoint. Scheduled scenario events keep firing: an event that sets the same
setting (``set_taps``, ``set_replicas``, ``set_inference_scale``, ``set_power_cap``,
``set_storage_power``) overrides the agent's value at its time, and the next move starts from there.
A regulator bank in ``auto`` mode keeps regulating: the agent's taps are a starting point its own
control moves again, so give the agent banks in ``fixed`` mode (the scenario's ``grid.regulators``).
A storage command sets the reactive power to 0; the engine holds the battery's active power at 0 at
its state-of-charge limits.
"""

from __future__ import annotations

import bisect
import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Annotated, Any, ClassVar, Literal

import numpy as np
from pydantic import Discriminator, Field, Tag, model_validator

from openg2g.core.commands import (
    Actuator,
    Command,
    SetBatchSize,
    SetPowerCap,
    SetReplicas,
    SetStoragePower,
    SetTaps,
)
from openg2g.core.config import ConfigModel
from openg2g.core.errors import ControllerError, ScenarioError
from openg2g.core.interfaces import ControlContext
from openg2g.core.limits import MAX_DURATION_S
from openg2g.core.state import Observation
from openg2g.envs.slots import ModelSlot

__all__ = [
    "ActionFamily",
    "ActionSpec",
    "BatchAction",
    "BatchFamily",
    "PowerCapAction",
    "PowerCapFamily",
    "ReplicasAction",
    "ReplicasFamily",
    "StorageAction",
    "StorageFamily",
    "TapsAction",
    "TapsFamily",
    "build_families",
    "check_families",
    "default_actions",
]

MOVES = (-1, 0, 1)
"""What the discrete choices 0, 1, 2 of an entry do: down, stay, up."""


# ----------------------------------------------------------------------------- settings (EnvConfig.actions)
class BatchAction(ConfigModel):
    """Batch sizes of the controlled models (the env's original action)."""

    kind: Literal["batch"] = "batch"


class PowerCapAction(ConfigModel):
    """GPU power caps, per model or per site."""

    kind: Literal["power_cap"] = "power_cap"
    per: Literal["model", "site"] = Field("model", description="model: one cap per (site, model); site: one per site.")
    levels: int = Field(6, ge=2, le=101, description="Caps on the grid, evenly spaced (the ends included).")
    min_w: float | None = Field(
        None, gt=0, description="Lowest cap on the grid (W per GPU); None = the GPUs' lowest settable cap."
    )
    max_w: float | None = Field(
        None, gt=0, description="Highest cap on the grid (W per GPU); None = the GPUs' highest settable cap."
    )

    @model_validator(mode="after")
    def _order(self) -> PowerCapAction:
        if self.min_w is not None and self.max_w is not None and not self.min_w < self.max_w:
            raise ValueError(f"min_w ({self.min_w:g} W) must be below max_w ({self.max_w:g} W)")
        return self


class ReplicasAction(ConfigModel):
    """Active replicas per model, as fractions of the scenario's configured replicas."""

    kind: Literal["replicas"] = "replicas"
    min_fraction: float = Field(0.0, ge=0, description="Lowest count on the grid, as a fraction of the configured.")
    max_fraction: float = Field(
        1.0,
        gt=0,
        le=10,
        description="Highest count on the grid, as a fraction of the configured (within GPU capacity).",
    )
    step: float = Field(0.1, gt=0, le=1, description="Spacing of the grid, as a fraction of the configured replicas.")
    ramp_s: float = Field(0.0, ge=0, le=MAX_DURATION_S, description="Ramp of each replica command (s); 0 at once.")

    @model_validator(mode="after")
    def _order(self) -> ReplicasAction:
        if not self.min_fraction < self.max_fraction:
            raise ValueError(f"min_fraction ({self.min_fraction:g}) must be below max_fraction ({self.max_fraction:g})")
        return self


class TapsAction(ConfigModel):
    """Regulator taps, per bank and regulated phase."""

    kind: Literal["taps"] = "taps"
    banks: list[str] | None = Field(None, min_length=1, description="Regulator banks acted on; None = every bank.")


class StorageAction(ConfigModel):
    """Battery active-power setpoints, as fractions of each battery's rating."""

    kind: Literal["storage"] = "storage"
    units: list[str] | None = Field(None, min_length=1, description="Batteries acted on; None = every battery.")
    levels: int = Field(
        5, ge=2, le=101, description="Setpoints on the grid, evenly from -rating (charge) to +rating (discharge)."
    )


def _kind(value: Any) -> Any:
    """The ``kind`` of an ``EnvConfig.actions`` entry (a mapping or a made model)."""
    return value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)


ActionSpec = Annotated[
    Annotated[BatchAction, Tag("batch")]
    | Annotated[PowerCapAction, Tag("power_cap")]
    | Annotated[ReplicasAction, Tag("replicas")]
    | Annotated[TapsAction, Tag("taps")]
    | Annotated[StorageAction, Tag("storage")],
    Discriminator(_kind),
]
"""One entry of ``EnvConfig.actions``, told apart by ``kind`` (a callable discriminator: the config
models' strict field checks run before validation, which pydantic's field discriminator refuses)."""


def default_actions() -> list[ActionSpec]:
    """The default of ``EnvConfig.actions``: batch sizes alone (the env's original action)."""
    return [BatchAction()]


# ----------------------------------------------------------------------------- families
class ActionFamily(ABC):
    """One family's part of the action: its entries, their mask and the commands they imply.

    :ivar labels: one name per action entry (``"dc1/Llama-3.1-8B"``, ``"reg1.a"``).
    :ivar n_targets: settings the family commands (models, sites, banks, batteries): the
        denominator of its share of the switching term.
    """

    kind: ClassVar[str]
    labels: tuple[str, ...]
    n_targets: int

    @property
    def size(self) -> int:
        """Entries of the family in the action."""
        return len(self.labels)

    @abstractmethod
    def mask(self, observation: Observation) -> np.ndarray:
        """Per entry, which of (down, stay, up) the family carries out as chosen: shape ``(size, 3)``."""

    @abstractmethod
    def commands(self, action: np.ndarray, observation: Observation, discrete: bool) -> list[Command]:
        """The commands carrying out the family's slice of the action (only settings that change)."""

    @abstractmethod
    def actuators(self) -> tuple[Actuator, ...]:
        """The settings the family writes."""

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """The family as plain data: ``kind``, ``entries`` and what their values are."""

    def entries_text(self) -> str:
        """What the family's entries are, for error messages."""
        return f"{self.kind}: {list(self.labels)}"


class BatchFamily(ActionFamily):
    """Batch sizes of the controlled models, stepping over their allowed sizes (module docstring).

    The layout builds it whether or not ``EnvConfig.actions`` lists ``batch``: the layout's
    description beside a policy lists the allowed sizes, and the renderer shows each model's place
    among its sizes.

    :param controlled: the controllable models (at least two measured batch sizes), in layout order.
    :param context: the run's static facts (each model's miss fractions).
    :param miss_budget: largest deadline-miss fraction (of tokens) a model may be run at; ``None``
        allows every measured batch size.
    :param source: the scenario's name or path, quoted in errors.
    :raises ScenarioError: with ``miss_budget``, a model with a deadline whose site reports no miss
        fractions or whose every batch size misses more than the budget.
    """

    kind = "batch"

    def __init__(
        self, controlled: Sequence[ModelSlot], context: ControlContext, miss_budget: float | None, source: str
    ):
        self.controlled = tuple(controlled)
        self.miss_budget = miss_budget
        self.labels = tuple(s.key for s in self.controlled)
        self.n_targets = len(self.labels)
        self._log2 = [np.log2(np.array(s.batch_sizes, dtype=float)) for s in self.controlled]
        # per controlled model, each batch size's index (the first, as argmin finds it): the lookup
        # of the present index at every step, which needs the log2 distance only for other sizes
        self._index_of = [{b: i for i, b in reversed(list(enumerate(s.batch_sizes)))} for s in self.controlled]
        self.allowed: tuple[np.ndarray, ...] = tuple(self._allowed(context, s, source) for s in self.controlled)
        """Per controlled model, the indices into its batch sizes that it may run (ascending)."""
        self._allowed_lists = [ok.tolist() for ok in self.allowed]
        # per controlled model, the command setting each of its batch sizes: built once, not at every
        # step (a command checks its fields when made); a command is frozen, so one can be sent again
        self._set_batch = [
            tuple(SetBatchSize(site=s.site, model=s.model, batch_size=b) for b in s.batch_sizes)
            for s in self.controlled
        ]

    def _allowed(self, context: ControlContext, slot: ModelSlot, source: str) -> np.ndarray:
        """Indices of ``slot``'s batch sizes whose miss fraction is within :attr:`miss_budget`."""
        every = np.arange(len(slot.batch_sizes))
        info = context.sites[slot.site].models[slot.model]
        if self.miss_budget is None or info.itl_deadline_s is None:
            return every
        if len(info.miss_fraction) != len(info.batch_sizes):
            message = (
                f"miss_budget needs each batch size's deadline-miss fraction, and site {slot.site!r} "
                f"reports none for {slot.model} (deadline {info.itl_deadline_s:g} s)"
            )
            raise ScenarioError([(source, message)])
        miss = dict(zip(info.batch_sizes, info.miss_fraction))
        fractions = np.array([miss[b] for b in slot.batch_sizes])
        ok = every[fractions <= self.miss_budget]
        if ok.size == 0:
            message = (
                f"miss_budget={self.miss_budget:g}: every batch size of {slot.key} misses its "
                f"{info.itl_deadline_s:g} s deadline more often (least: {fractions.min():.2%} at batch "
                f"{slot.batch_sizes[int(fractions.argmin())]}); raise the budget or the deadline"
            )
            raise ScenarioError([(source, message)])
        return ok

    def allowed_sizes(self) -> dict[str, list[int]]:
        """Per controlled model (``"<site>/<model>"``), the batch sizes it may run, ascending."""
        return {s.key: [s.batch_sizes[int(i)] for i in ok] for s, ok in zip(self.controlled, self.allowed)}

    def current_index(self, observation: Observation) -> np.ndarray:
        """Index into each controlled model's batch sizes of its present batch (nearest in log2)."""
        return np.array(self._current(observation), dtype=np.int64)

    def _current(self, observation: Observation) -> list[int]:
        """:meth:`current_index` as a list."""
        datacenters = observation.datacenters
        out = []
        for s, index_of, log2 in zip(self.controlled, self._index_of, self._log2):
            state = datacenters.get(s.site)
            m = state.models.get(s.model) if state is not None else None
            b = m.batch_size if m is not None else s.batch_sizes[0]
            exact = index_of.get(b)
            out.append(exact if exact is not None else int(np.argmin(np.abs(log2 - np.log2(max(b, 1))))))
        return out

    def moves(self, action: Any, observation: Observation, discrete: bool) -> tuple[list[int], list[int]]:
        """The ladder: per controlled model, the index into its batch sizes of the present batch
        (:meth:`current_index`) and of the one to run after ``action`` (always one of
        :attr:`allowed`; module docstring), as lists.

        :raises ValueError: ``action`` has another number of entries than there are controlled models.
        """
        a = np.asarray(action).reshape(-1)
        if a.size != self.size:
            raise ValueError(f"action has {a.size} entries; this layout controls {self.size} models")
        current = self._current(observation)
        if discrete:
            target = []
            for x, ok, c in zip(a.astype(np.int64).tolist(), self._allowed_lists, current):
                rank = bisect.bisect_left(ok, c)
                if rank < len(ok) and ok[rank] == c:
                    target.append(ok[min(max(rank + min(max(x, 0), 2) - 1, 0), len(ok) - 1)])
                else:  # outside the allowed sizes (where the run started): the nearest allowed one below
                    target.append(ok[max(rank - 1, 0)])
            return current, target
        target = []
        for x, log2, ok in zip(a.tolist(), self._log2, self.allowed):
            x = float(np.clip(np.nan_to_num(x), -1.0, 1.0))
            goal = log2[0] + 0.5 * (x + 1.0) * (log2[-1] - log2[0])
            target.append(int(ok[int(np.argmin(np.abs(log2[ok] - goal)))]))
        return current, target

    def mask(self, observation: Observation) -> np.ndarray:
        # a choice is honest when the ladder moves the way it says: outside the allowed sizes every
        # choice leads to one size, so only the move towards it is
        honest = []
        for m in MOVES:
            current, target = self.moves(np.full(self.size, m + 1), observation, discrete=True)
            honest.append(np.sign(np.array(target, dtype=np.int64) - np.array(current, dtype=np.int64)) == m)
        return np.stack(honest, axis=1)

    def commands(self, action: np.ndarray, observation: Observation, discrete: bool) -> list[Command]:
        current, target = self.moves(action, observation, discrete)
        return [sets[t] for sets, c, t in zip(self._set_batch, current, target) if c != t]

    def actuators(self) -> tuple[Actuator, ...]:
        return tuple(Actuator("batch_size", (s.site, s.model)) for s in self.controlled)

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "entries": list(self.labels)}

    def entries_text(self) -> str:
        return f"{self.size} controllable models: {list(self.labels)}"


class _GridFamily(ActionFamily):
    """A family whose every entry steps over an ascending grid of values (module docstring)."""

    grids: tuple[np.ndarray, ...]
    unit: ClassVar[str]

    @abstractmethod
    def current(self, observation: Observation) -> np.ndarray:
        """Each entry's setting in force (in the grid's unit)."""

    @abstractmethod
    def _commands(self, target: np.ndarray, changed: np.ndarray) -> list[Command]:
        """Commands setting the entries to ``target`` (every entry), sent where ``changed``."""

    def _tolerance(self) -> np.ndarray:
        """Per entry, how close two values are to count as one setting (rounding of the grid)."""
        return np.array([1e-9 * max(float(g[-1] - g[0]), 1.0) for g in self.grids])

    def targets(self, action: np.ndarray, observation: Observation, discrete: bool) -> np.ndarray:
        """Each entry's setting after ``action`` (module docstring)."""
        current, tol = self.current(observation), self._tolerance()
        target = current.copy()
        for i, grid in enumerate(self.grids):
            if discrete:
                move = MOVES[int(np.clip(int(action[i]), 0, 2))]
                below, above = grid[grid < current[i] - tol[i]], grid[grid > current[i] + tol[i]]
                if move < 0 and below.size:
                    target[i] = below[-1]
                elif move > 0 and above.size:
                    target[i] = above[0]
            else:
                x = float(np.clip(np.nan_to_num(action[i]), -1.0, 1.0))
                goal = grid[0] + 0.5 * (x + 1.0) * (grid[-1] - grid[0])
                nearest = grid[int(np.argmin(np.abs(grid - goal)))]
                if abs(nearest - current[i]) > tol[i]:
                    target[i] = nearest
        return target

    def mask(self, observation: Observation) -> np.ndarray:
        current, tol = self.current(observation), self._tolerance()
        down = np.array([bool((g < c - t).any()) for g, c, t in zip(self.grids, current, tol)])
        up = np.array([bool((g > c + t).any()) for g, c, t in zip(self.grids, current, tol)])
        return np.stack([down, np.ones(self.size, dtype=bool), up], axis=1)

    def commands(self, action: np.ndarray, observation: Observation, discrete: bool) -> list[Command]:
        current = self.current(observation)
        target = self.targets(action, observation, discrete)
        return self._commands(target, np.abs(target - current) > self._tolerance())

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "entries": list(self.labels),
            "unit": self.unit,
            "values": {label: grid.tolist() for label, grid in zip(self.labels, self.grids)},
        }


def _error(source: str, where: str, message: str) -> ScenarioError:
    return ScenarioError([(source, f"{where}: {message}")])


class PowerCapFamily(_GridFamily):
    """GPU power caps (W per GPU): :class:`SetPowerCap` per (site, model) or per site."""

    kind = "power_cap"
    unit = "W per GPU"

    def __init__(self, spec: PowerCapAction, context: ControlContext, source: str, where: str):
        self.per = spec.per
        pairs = [(site, name) for site, info in context.sites.items() for name in info.models]
        no_range = [f"{s}/{m}" for s, m in pairs if context.sites[s].models[m].power_cap_range_w is None]
        if no_range:
            raise _error(
                source,
                where,
                f"the power_cap action needs each model's range of GPU power caps, and the sites report none for "
                f"{', '.join(no_range)} (their GPUs cannot be capped in this scenario)",
            )
        self.settings: list[tuple[str, str | None]] = (
            list(pairs) if spec.per == "model" else [(s, None) for s in context.sites]
        )
        grids, self._uncapped_w = [], []
        for site, model in self.settings:
            models = [model] if model is not None else list(context.sites[site].models)
            ranges = [context.sites[site].models[m].power_cap_range_w for m in models]
            lo = max(r[0] for r in ranges if r is not None)
            hi = min(r[1] for r in ranges if r is not None)
            label = site if model is None else f"{site}/{model}"
            for name, value in (("min_w", spec.min_w), ("max_w", spec.max_w)):
                if value is not None and not lo <= value <= hi:
                    raise _error(
                        source, f"{where}.{name}", f"{value:g} W is outside {label}'s settable caps {lo:g}-{hi:g} W"
                    )
            low, high = spec.min_w if spec.min_w is not None else lo, spec.max_w if spec.max_w is not None else hi
            grids.append(np.linspace(low, high, spec.levels))
            self._uncapped_w.append(hi)
        self.grids = tuple(grids)
        self.labels = tuple(s if m is None else f"{s}/{m}" for s, m in self.settings)
        self.n_targets = len(self.labels)

    def current(self, observation: Observation) -> np.ndarray:
        out = np.array(self._uncapped_w, dtype=float)
        for i, (site, model) in enumerate(self.settings):
            models = observation.datacenters[site].models
            caps = [m.power_cap_w for name, m in models.items() if model in (None, name) and m.power_cap_w is not None]
            if caps:
                out[i] = max(caps)
        return out

    def _commands(self, target: np.ndarray, changed: np.ndarray) -> list[Command]:
        return [
            SetPowerCap(site=site, cap_w_per_gpu=float(t), model=model)
            for (site, model), t, c in zip(self.settings, target, changed)
            if c
        ]

    def actuators(self) -> tuple[Actuator, ...]:
        return tuple(Actuator("power_cap", (s,) if m is None else (s, m)) for s, m in self.settings)


class ReplicasFamily(_GridFamily):
    """Active replicas per model (whole counts): :class:`SetReplicas`."""

    kind = "replicas"
    unit = "replicas"

    def __init__(self, spec: ReplicasAction, context: ControlContext, source: str, where: str):
        self.ramp_s = spec.ramp_s
        self.pairs = [(s, m) for s, info in context.sites.items() for m, mi in info.models.items() if mi.replicas > 0]
        if not self.pairs:
            raise _error(source, where, "the replicas action needs a model with configured replicas; none has any")
        n_steps = math.floor((spec.max_fraction - spec.min_fraction) / spec.step + 1e-9)
        fractions = np.append(spec.min_fraction + spec.step * np.arange(n_steps + 1), spec.max_fraction)
        grids = []
        for site, model in self.pairs:
            info = context.sites[site].models[model]
            counts = np.unique(np.floor(fractions * info.replicas + 0.5))
            room = self._room(context, site, model)
            if counts[-1] > room:
                raise _error(
                    source,
                    f"{where}.max_fraction",
                    f"{spec.max_fraction:g} asks for {int(counts[-1])} replicas of {site}/{model} "
                    f"({int(counts[-1]) * info.gpus_per_replica} GPUs); {self._room_text(context, site, room)}",
                )
            grids.append(counts)
        self.grids = tuple(grids)
        self.labels = tuple(f"{s}/{m}" for s, m in self.pairs)
        self.n_targets = len(self.labels)

    def _room(self, context: ControlContext, site: str, model: str) -> int:
        """Most replicas of ``model`` the action may ask for: its configured count plus an even share
        (among the site's models this family acts on) of the GPUs the configured replicas and the
        training job leave free, so that every model at its most still fits the site."""
        info = context.sites[site]
        mine = info.models[model]
        if info.gpu_capacity is None:
            return mine.replicas
        used = sum(m.replicas * m.gpus_per_replica for m in info.models.values())
        used += info.training.gpus if info.training is not None else 0
        sharing = sum(1 for s, _ in self.pairs if s == site)
        return mine.replicas + max(info.gpu_capacity - used, 0) // sharing // mine.gpus_per_replica

    @staticmethod
    def _room_text(context: ControlContext, site: str, room: int) -> str:
        capacity = context.sites[site].gpu_capacity
        if capacity is None:
            return f"site {site!r} reports no GPU capacity, so max_fraction must be at most 1"
        return (
            f"site {site!r} has room for at most {room} (its {capacity} GPUs shared with its other models at their "
            "most and its training job)"
        )

    def current(self, observation: Observation) -> np.ndarray:
        return np.array([observation.datacenters[site].models[model].replicas for site, model in self.pairs])

    def _commands(self, target: np.ndarray, changed: np.ndarray) -> list[Command]:
        return [
            SetReplicas(site=site, model=model, replicas=int(t), ramp_s=self.ramp_s)
            for (site, model), t, c in zip(self.pairs, target, changed)
            if c
        ]

    def actuators(self) -> tuple[Actuator, ...]:
        return tuple(Actuator("replicas", pair) for pair in self.pairs)


def _chosen(
    given: Sequence[str] | None, known: list[str], kind: str, names: tuple[str, str, str], source: str, where: str
) -> list[str]:
    """The grid elements a family of ``kind`` acts on: those ``given``, else every one the scenario has.

    :param names: one element with its article, the plural, and the spec's field (``("a battery",
        "batteries", "units")``), for messages.
    :raises ScenarioError: the grid has none, or ``given`` names one it lacks.
    """
    one, many, field = names
    if not known:
        raise _error(source, where, f"the {kind} action needs {one}, and the scenario's grid has none")
    chosen = list(given) if given is not None else known
    unknown = [x for x in chosen if x not in known]
    if unknown:
        raise _error(source, f"{where}.{field}", f"unknown {many} {unknown}; the grid has {known}")
    return chosen


class TapsFamily(_GridFamily):
    """Regulator taps (steps): one entry per regulated phase of a bank, or one per bank where its
    phases share one tap (ganged); :class:`SetTaps` per bank."""

    kind = "taps"
    unit = "tap steps"

    def __init__(self, spec: TapsAction, context: ControlContext, source: str, where: str):
        banks = _chosen(
            spec.banks,
            list(context.regulators),
            self.kind,
            ("a regulator bank", "regulator banks", "banks"),
            source,
            where,
        )
        self.banks = tuple(banks)
        self._phases = {b: context.regulators[b].phases for b in self.banks}
        # (bank, index of the phase whose tap the entry reads), ganged banks read their first phase
        self._entries = [
            (b, k)
            for b in self.banks
            for k in (range(1) if context.regulators[b].ganged else range(len(self._phases[b])))
        ]
        self.grids = tuple(
            np.arange(context.regulators[b].min_tap, context.regulators[b].max_tap + 1, dtype=float)
            for b, _ in self._entries
        )
        self.labels = tuple(
            b if context.regulators[b].ganged else f"{b}.{self._phases[b][k]}" for b, k in self._entries
        )
        self.n_targets = len(self.banks)

    def current(self, observation: Observation) -> np.ndarray:
        taps = observation.grid.taps
        return np.array([float(taps[b][k]) for b, k in self._entries])

    def _commands(self, target: np.ndarray, changed: np.ndarray) -> list[Command]:
        out: list[Command] = []
        for bank in self.banks:
            rows = [i for i, (b, _) in enumerate(self._entries) if b == bank]
            if changed[rows].any():
                taps = [int(target[i]) for i in rows]
                out.append(SetTaps(bank=bank, taps=tuple(taps * len(self._phases[bank]) if len(rows) == 1 else taps)))
        return out

    def actuators(self) -> tuple[Actuator, ...]:
        return tuple(Actuator("regulator", (b,)) for b in self.banks)


class StorageFamily(_GridFamily):
    """Battery active-power setpoints (W, > 0 discharges): :class:`SetStoragePower` per battery."""

    kind = "storage"
    unit = "W"

    def __init__(self, spec: StorageAction, context: ControlContext, source: str, where: str):
        units = _chosen(
            spec.units, list(context.storages), self.kind, ("a battery", "batteries", "units"), source, where
        )
        unrated = [u for u in units if u not in context.storage_units]
        if unrated:
            raise _error(source, where, f"the grid reports no rating for batteries {unrated}")
        self.units = tuple(units)
        self.grids = tuple(np.linspace(-1.0, 1.0, spec.levels) * context.storage_units[u].rating_va for u in units)
        self.labels = self.units
        self.n_targets = len(self.units)

    def current(self, observation: Observation) -> np.ndarray:
        return np.array([observation.grid.storage[u].p_set_w for u in self.units])

    def _commands(self, target: np.ndarray, changed: np.ndarray) -> list[Command]:
        return [SetStoragePower(name=u, p_w=float(t)) for u, t, c in zip(self.units, target, changed) if c]

    def actuators(self) -> tuple[Actuator, ...]:
        return tuple(Actuator("storage", (u,)) for u in self.units)


def build_families(
    specs: Sequence[BatchAction | PowerCapAction | ReplicasAction | TapsAction | StorageAction],
    batch: BatchFamily,
    context: ControlContext,
    source: str,
) -> tuple[ActionFamily, ...]:
    """The families of ``EnvConfig.actions``, in its order.

    :param batch: the layout's batch sizes, the family of a ``batch`` entry.

    :raises ScenarioError: the scenario lacks what a family acts on (no cap range, no regulator
        bank or battery, an unknown one named), or a grid beyond a site's GPU capacity; the message
        names the setting (``actions.2.banks``).
    """
    families: list[ActionFamily] = []
    for i, spec in enumerate(specs):
        where = f"actions.{i}"
        if isinstance(spec, BatchAction):
            families.append(batch)
        elif isinstance(spec, PowerCapAction):
            families.append(PowerCapFamily(spec, context, source, where))
        elif isinstance(spec, ReplicasAction):
            families.append(ReplicasFamily(spec, context, source, where))
        elif isinstance(spec, TapsAction):
            families.append(TapsFamily(spec, context, source, where))
        else:
            families.append(StorageFamily(spec, context, source, where))
    return tuple(families)


def check_families(saved: Sequence[dict[str, Any]], families: Sequence[ActionFamily], what: str) -> None:
    """Check that a scenario gives a saved policy's action entries and their values.

    ``batch`` is checked by the spaces' shapes alone (a policy deploys on any scenario with as many
    controllable models); every other family must act on the same entries over the same grids.

    :param saved: ``layout["actions"]`` of the policy's settings file.
    :param what: the policy, named in the error.
    :raises ControllerError: naming each family whose entries or values differ.
    """
    found = [f.describe() for f in families]
    problems = []
    if [s.get("kind") for s in saved] != [f["kind"] for f in found]:
        problems.append(
            f"action families {[s.get('kind') for s in saved]}, the layout has {[f['kind'] for f in found]}"
        )
    for old, new in zip(saved, found):
        if new["kind"] == "batch" or old.get("kind") != new["kind"]:
            continue
        if old.get("entries") != new["entries"]:
            missing = [e for e in old.get("entries", []) if e not in new["entries"]]
            extra = [e for e in new["entries"] if e not in old.get("entries", [])]
            problems.append(
                f"{new['kind']}: the policy acts on {old.get('entries')}, the scenario gives {new['entries']}"
                + (f" (missing {missing})" if missing else "")
                + (f" (not in the policy: {extra})" if extra else "")
            )
            continue
        for entry in new["entries"]:
            before, after = old.get("values", {}).get(entry), new["values"][entry]
            if before is None or len(before) != len(after) or not np.allclose(before, after):
                problems.append(f"{new['kind']} {entry}: the policy steps over {before}, the scenario over {after}")
    if problems:
        raise ControllerError(f"{what} does not fit this scenario: " + "; ".join(problems))
