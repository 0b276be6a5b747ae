"""States: what components report at each step, and what controllers observe.

All states are frozen dataclasses; arrays inside them are made read-only so a controller cannot
change what the engine records. Phases are always ordered ``a, b, c``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from types import MappingProxyType
from typing import Literal, TypeVar

import numpy as np
from numpy.typing import DTypeLike

__all__ = [
    "MODES",
    "PHASES",
    "TIED_LOADING",
    "BlockStatus",
    "BranchSet",
    "DatacenterSeries",
    "DatacenterState",
    "GridState",
    "Mode",
    "ModelSeries",
    "ModelState",
    "Observation",
    "RideThroughState",
    "StorageLimit",
    "StorageState",
    "StorageUnit",
    "column_rows",
    "frozen_array",
]

PHASES: tuple[str, str, str] = ("a", "b", "c")

_T = TypeVar("_T")
_V = TypeVar("_V")

TIED_LOADING = 1e-9
"""Conductors of a branch whose loadings differ by less than this fraction count as equally loaded."""


def frozen_array(values: object, dtype: DTypeLike = np.float64) -> np.ndarray:
    """Copy ``values`` into a new read-only numpy array."""
    arr: np.ndarray = np.array(values, dtype=dtype)
    arr.flags.writeable = False
    return arr


def column_rows(array: np.ndarray) -> list[np.ndarray]:
    """The columns of a 2-D ``array`` as read-only rows of one new C-ordered copy: the per-step
    arrays of a batch solved one column per step, which states keep without copying again."""
    rows = array.T.copy()
    rows.flags.writeable = False
    return list(rows)


def _read_only_owned(array: np.ndarray) -> np.ndarray:
    """``array`` (fresh) made read-only."""
    array.flags.writeable = False
    return array


_FLOAT64, _INT64, _BOOL = np.dtype(np.float64), np.dtype(np.int64), np.dtype(bool)


def _keep_mappings(state: object, names: tuple[str, ...]) -> None:
    """Make each field ``names`` of the frozen ``state`` a read-only mapping: kept if it is one
    already (its producer having given up the dict behind it), else a read-only copy."""
    for name in names:
        value = getattr(state, name)
        kept = _read_only_mapping(value)
        if kept is not value:
            object.__setattr__(state, name, kept)


def _kept_or_frozen(values: object, dtype: DTypeLike = _FLOAT64) -> np.ndarray:
    """``values`` itself if it is already a read-only array of ``dtype`` that owns its data, or a
    read-only view of such an array (e.g. a row of a table of all models), its producer having
    given it up: nothing can change it; else a read-only copy (:func:`frozen_array`).

    States are built at every step; producers that hand over read-only arrays skip the copy.
    """
    if type(values) is np.ndarray and not values.flags.writeable and values.dtype == dtype:
        owner = values.base
        if owner is None or (type(owner) is np.ndarray and owner.base is None and not owner.flags.writeable):
            return values
    return frozen_array(values, dtype)


def _keep_arrays(state: object, names: tuple[str, ...], dtype: DTypeLike = _FLOAT64) -> None:
    """Replace each field ``names`` of the frozen ``state`` by :func:`_kept_or_frozen` of it (set
    only where that is a copy)."""
    for name in names:
        value = getattr(state, name)
        kept = _kept_or_frozen(value, dtype)
        if kept is not value:
            object.__setattr__(state, name, kept)


def _unchecked(cls: type[_T], fields: dict[str, object]) -> _T:
    """An instance of the frozen dataclass ``cls`` holding ``fields`` (every field, by name),
    made without its ``__init__`` and ``__post_init__``: for fields already in the form those
    would give them (read-only arrays nothing else can write, read-only mappings), checked once
    for a whole batch by the caller. A frozen dataclass's ``__init__`` sets each field through
    ``object.__setattr__``, and the checks cost as much again: several microseconds per state,
    for a state per step and site or grid."""
    state = object.__new__(cls)
    state.__dict__.update(fields)
    return state


def _read_only_mapping(values: Mapping[str, _V]) -> Mapping[str, _V]:
    """``values`` if it is a read-only mapping already, else a read-only copy."""
    return values if type(values) is MappingProxyType else MappingProxyType(dict(values))


@dataclass(frozen=True)
class ModelState:
    """One served model at one site, at one datacenter step.

    :param model: model name (trace library key).
    :param replicas: active replicas (may be fractional during a ramp).
    :param batch_size: current batch size (max_num_seqs).
    :param power_w: GPU power of all replicas of the model (W).
    :param itl_s: mean inter-token latency over the step's sampled tokens (s).
    :param throughput_tok_s: output tokens per second of all replicas.
    :param itl_deadline_s: the model's ITL deadline (s), ``None`` if it has none.
    :param deadline_miss_fraction: fraction of the step's tokens whose ITL exceeded the deadline.
    :param power_cap_w: per-GPU power cap in force (W), ``None`` if uncapped.
    :param in_flight: requests in flight per measured replica, averaged over the step (a live
        site's servers: :class:`~openg2g.core.interfaces.Live`), ``None`` for a site that does not
        measure them.
    :param measured_power_w: GPU power of the model's measured GPUs over the step (W; a live site,
        before scaling to the site's replicas), ``None`` where nothing is measured.
    """

    model: str
    replicas: float
    batch_size: int
    power_w: float
    itl_s: float
    throughput_tok_s: float
    itl_deadline_s: float | None = None
    deadline_miss_fraction: float = 0.0
    power_cap_w: float | None = None
    in_flight: float | None = None
    measured_power_w: float | None = None


@dataclass(frozen=True)
class DatacenterState:
    """One datacenter site at time ``t_s``.

    :param site: site name.
    :param t_s: simulation time (s).
    :param p_w: active power per phase a, b, c (W), facility total (GPUs, overhead, training).
    :param q_var: reactive power per phase (var).
    :param models: per-model serving state.
    :param training_power_w: power of the training job (W), 0 when none runs.
    :param online: False while the site is out (outage): it then draws nothing.
    :param supplied: False while the grid has no path from a source to the site's bus (a line
        out of service cut it off): it then draws and serves nothing, whatever it was commanded.
    """

    site: str
    t_s: float
    p_w: np.ndarray
    q_var: np.ndarray
    models: Mapping[str, ModelState]
    training_power_w: float = 0.0
    online: bool = True
    supplied: bool = True

    def __post_init__(self) -> None:
        _keep_arrays(self, ("p_w", "q_var"))
        _keep_mappings(self, ("models",))

    @property
    def power_w(self) -> float:
        """Total active power over the three phases (W)."""
        return float(np.add.reduce(self.p_w))  # sum()'s reduction, without its wrapper

    @classmethod
    def of_rows(
        cls, site: str, t_s: Sequence[float], p_w: np.ndarray, q_var: np.ndarray, models: Mapping[str, ModelState]
    ) -> list[DatacenterState]:
        """The site's state at each of several times, one per row of ``p_w`` and ``q_var``
        (``(len(t_s), 3)``, W and var), all with the same ``models``; the other fields at their
        defaults. The arrays and the mapping are checked (and copied unless read-only) once, not
        per state: a state keeps a read-only row of each.

        :raises ValueError: ``p_w`` or ``q_var`` is not of shape ``(len(t_s), 3)``.
        """
        p_w, q_var = _kept_or_frozen(p_w), _kept_or_frozen(q_var)
        if p_w.shape != (len(t_s), 3) or q_var.shape != (len(t_s), 3):
            raise ValueError(
                f"DatacenterState.of_rows: p_w and q_var need shape ({len(t_s)}, 3), got {p_w.shape} and {q_var.shape}"
            )
        models = _read_only_mapping(models)
        # the fields in their declared order, as __init__ would set them
        return [
            _unchecked(
                cls,
                {
                    "site": site,
                    "t_s": t,
                    "p_w": p,
                    "q_var": q,
                    "models": models,
                    "training_power_w": 0.0,
                    "online": True,
                    "supplied": True,
                },
            )
            for t, p, q in zip(t_s, p_w, q_var)
        ]


@dataclass(frozen=True)
class ModelSeries:
    """One served model over consecutive datacenter steps: :class:`ModelState` fields as arrays.

    Every array has one entry per step; ``power_cap_w`` is NaN where uncapped. ``in_flight`` and
    ``measured_power_w`` are ``None`` for a site that measures nothing (every site but a live one).
    """

    model: str
    replicas: np.ndarray
    batch_size: np.ndarray
    power_w: np.ndarray
    itl_s: np.ndarray
    throughput_tok_s: np.ndarray
    deadline_miss_fraction: np.ndarray
    power_cap_w: np.ndarray
    itl_deadline_s: float | None = None
    in_flight: np.ndarray | None = None
    measured_power_w: np.ndarray | None = None

    def __post_init__(self) -> None:
        _keep_arrays(
            self, ("replicas", "power_w", "itl_s", "throughput_tok_s", "deadline_miss_fraction", "power_cap_w")
        )
        _keep_arrays(self, ("batch_size",), _INT64)
        _keep_arrays(self, tuple(name for name in ("in_flight", "measured_power_w") if getattr(self, name) is not None))

    def state(self, i: int) -> ModelState:
        """The model's state at step ``i`` of the series."""
        # item() gives the Python float (int) at once, without a numpy scalar between; ModelState
        # checks nothing, so nothing is skipped by making it unchecked
        cap = self.power_cap_w.item(i)
        return _unchecked(
            ModelState,
            {
                "model": self.model,
                "replicas": self.replicas.item(i),
                "batch_size": self.batch_size.item(i),
                "power_w": self.power_w.item(i),
                "itl_s": self.itl_s.item(i),
                "throughput_tok_s": self.throughput_tok_s.item(i),
                "itl_deadline_s": self.itl_deadline_s,
                "deadline_miss_fraction": self.deadline_miss_fraction.item(i),
                "power_cap_w": None if math.isnan(cap) else cap,
                "in_flight": None if self.in_flight is None else self.in_flight.item(i),
                "measured_power_w": None if self.measured_power_w is None else self.measured_power_w.item(i),
            },
        )

    @classmethod
    def from_states(cls, states: Sequence[ModelState]) -> ModelSeries:
        """Stack per-step states of one model."""
        first = states[0]
        return cls(
            model=first.model,
            replicas=np.array([s.replicas for s in states]),
            batch_size=np.array([s.batch_size for s in states]),
            power_w=np.array([s.power_w for s in states]),
            itl_s=np.array([s.itl_s for s in states]),
            throughput_tok_s=np.array([s.throughput_tok_s for s in states]),
            deadline_miss_fraction=np.array([s.deadline_miss_fraction for s in states]),
            power_cap_w=np.array([np.nan if s.power_cap_w is None else s.power_cap_w for s in states]),
            itl_deadline_s=first.itl_deadline_s,
            in_flight=_measured([s.in_flight for s in states]),
            measured_power_w=_measured([s.measured_power_w for s in states]),
        )


def _measured(values: Sequence[float | None]) -> np.ndarray | None:
    """A measured quantity of several steps as an array (NaN where a step has none), ``None`` when
    no step has it."""
    if all(v is None for v in values):
        return None
    return np.array([np.nan if v is None else v for v in values])


@dataclass(frozen=True)
class DatacenterSeries:
    """One datacenter site over consecutive steps: :class:`DatacenterState` fields as arrays.

    :param site: site name.
    :param t_s: step end times (s), shape ``(K,)``.
    :param p_w: active power per step and phase a, b, c (W), shape ``(K, 3)``.
    :param q_var: reactive power per step and phase (var), shape ``(K, 3)``.
    :param models: model name -> its series.
    :param training_power_w: training job power per step (W), shape ``(K,)``.
    :param online: per step, False while the site is out, shape ``(K,)``.
    :param supplied: per step, False while the site's bus has no supply (see
        :attr:`DatacenterState.supplied`), shape ``(K,)``.
    """

    site: str
    t_s: np.ndarray
    p_w: np.ndarray
    q_var: np.ndarray
    models: Mapping[str, ModelSeries]
    training_power_w: np.ndarray
    online: np.ndarray
    supplied: np.ndarray

    def __post_init__(self) -> None:
        _keep_arrays(self, ("t_s", "p_w", "q_var", "training_power_w"))
        _keep_arrays(self, ("online", "supplied"), _BOOL)
        _keep_mappings(self, ("models",))

    def __len__(self) -> int:
        return int(self.t_s.size)

    @cached_property
    def power_w(self) -> np.ndarray:
        """Total active power per step over the three phases (W); read-only."""
        return _read_only_owned(self.p_w.sum(axis=1))

    def state(self, i: int = -1) -> DatacenterState:
        """The site's state at step ``i`` of the series (default: the last)."""
        # the rows of the series' read-only arrays, checked when it was made: nothing to check again
        return _unchecked(
            DatacenterState,
            {
                "site": self.site,
                "t_s": self.t_s.item(i),
                "p_w": self.p_w[i],
                "q_var": self.q_var[i],
                "models": MappingProxyType({name: m.state(i) for name, m in self.models.items()}),
                "training_power_w": self.training_power_w.item(i),
                "online": self.online.item(i),
                "supplied": self.supplied.item(i),
            },
        )

    def without_supply(self) -> DatacenterSeries:
        """The series of the site cut off from supply over the same steps: no active or reactive
        power, no training power, every model with no running replica, no power, no tokens (so
        no deadline misses either) and an undefined ITL (NaN); batch sizes and caps stay as
        commanded, and ``supplied`` is False."""
        k = len(self)
        zeros = frozen_array(np.zeros(k))
        models = {
            name: replace(
                m,
                replicas=zeros,
                power_w=zeros,
                itl_s=frozen_array(np.full(k, np.nan)),
                throughput_tok_s=zeros,
                deadline_miss_fraction=zeros,
            )
            for name, m in self.models.items()
        }
        no_power = frozen_array(np.zeros((k, 3)))
        return replace(
            self,
            p_w=no_power,
            q_var=no_power,
            models=models,
            training_power_w=zeros,
            supplied=frozen_array(np.zeros(k, dtype=bool), bool),
        )

    @classmethod
    def from_states(cls, states: Sequence[DatacenterState]) -> DatacenterSeries:
        """Stack per-step states of one site (for backends that step one instant at a time)."""
        return cls(
            site=states[0].site,
            t_s=np.array([s.t_s for s in states]),
            p_w=np.stack([s.p_w for s in states]),
            q_var=np.stack([s.q_var for s in states]),
            models={name: ModelSeries.from_states([s.models[name] for s in states]) for name in states[0].models},
            training_power_w=np.array([s.training_power_w for s in states]),
            online=np.array([s.online for s in states]),
            supplied=np.array([s.supplied for s in states]),
        )


@dataclass(frozen=True)
class BranchSet:
    """The branches (lines and transformers) whose currents a grid reports, and their ratings.

    One entry per conductor: a line's phase conductors at its sending end (``bus1``), a
    transformer's phase conductors at each winding's terminals. Conductors of one branch are
    consecutive. The same object is shared by every :class:`GridState` of a run.

    :param names: branch names, ``"line.<name>"`` or ``"transformer.<name>"``.
    :param branch: per conductor, its index in ``names``.
    :param terminal: per conductor, 1 for a line (its ``bus1`` end) or the transformer winding (1, 2).
    :param phase: per conductor, its phase ``"a"``, ``"b"`` or ``"c"``.
    :param rating_a: per conductor, the normal current rating (A): 100% loading.
    :param emergency_a: per conductor, the emergency (short-time) rating (A).
    :param default_rating: per conductor, True when the file gave no normal rating and OpenDSS's
        default stands in (lines: 400 A).
    :param default_emergency: per conductor, True likewise for the emergency rating (lines: 600 A;
        transformers: 150% of the kVA).
    """

    names: tuple[str, ...]
    branch: np.ndarray
    terminal: np.ndarray
    phase: tuple[str, ...]
    rating_a: np.ndarray
    emergency_a: np.ndarray
    default_rating: np.ndarray
    default_emergency: np.ndarray

    def __post_init__(self) -> None:
        object.__setattr__(self, "branch", frozen_array(self.branch, np.int64))
        object.__setattr__(self, "terminal", frozen_array(self.terminal, np.int64))
        object.__setattr__(self, "rating_a", frozen_array(self.rating_a))
        object.__setattr__(self, "emergency_a", frozen_array(self.emergency_a))
        object.__setattr__(self, "default_rating", frozen_array(self.default_rating, bool))
        object.__setattr__(self, "default_emergency", frozen_array(self.default_emergency, bool))
        n = len(self.phase)
        if not all(len(a) == n for a in (self.branch, self.terminal, self.rating_a, self.emergency_a)):
            raise ValueError("BranchSet: every per-conductor array needs one entry per conductor")
        if n and not (np.all(np.diff(self.branch) >= 0) and self.branch[-1] < len(self.names)):
            raise ValueError("BranchSet: conductors of one branch must be consecutive, in branch order")

    def __len__(self) -> int:
        return len(self.phase)

    @property
    def starts(self) -> np.ndarray:
        """Index of each branch's first conductor (for ``np.maximum.reduceat``)."""
        return np.searchsorted(self.branch, np.arange(len(self.names)))

    def rating_sources(self, set_by_scenario: Collection[str] = ()) -> tuple[str, ...]:
        """Per branch, where its normal rating comes from: ``"scenario"`` (named in
        ``set_by_scenario``, the scenario's ``grid.branch_ratings``; case-insensitive), ``"default"``
        (a conductor's rating is OpenDSS's default, the feeder file giving none: 400 A on a line) or
        ``"file"`` (the feeder file or pandapower net)."""
        chosen = {name.lower() for name in set_by_scenario}
        default = np.logical_or.reduceat(self.default_rating, self.starts) if len(self) else np.zeros(0, bool)
        return tuple(
            "scenario" if name.lower() in chosen else "default" if bool(d) else "file"
            for name, d in zip(self.names, default.tolist())
        )

    def loading_slopes_pct(self, current_a: np.ndarray, slopes_a: np.ndarray) -> np.ndarray:
        """Derivatives of each branch's loading (% per unit of ``x``, ``(n_branches, k)``) from
        its conductors' currents (A, ``(n_conductors,)``) and their derivatives ``d|I|/dx`` (A per
        unit of ``x``, ``(n_conductors, k)``). The loading is the most loaded conductor's
        ``100 |I| / rating``; where several are equally loaded (to :data:`TIED_LOADING`, e.g. the
        phases of a balanced branch) it is the largest of their slopes: the derivative of the
        maximum as ``x`` grows.
        """
        per_conductor = current_a / self.rating_a
        peak = np.maximum.reduceat(per_conductor, self.starts)
        tied = per_conductor >= peak[self.branch] * (1.0 - TIED_LOADING)
        slopes_pct = slopes_a * (100.0 / self.rating_a)[:, None]
        return np.maximum.reduceat(np.where(tied[:, None], slopes_pct, -np.inf), self.starts, axis=0)


_NO_CAPACITORS: Mapping[str, bool] = MappingProxyType({})
_NO_RIDE_THROUGH: Mapping[str, RideThroughState] = MappingProxyType({})
"""The capacitor states of a grid without automatic capacitor control."""

StorageLimit = Literal["soc_min", "soc_max"]
"""The state-of-charge limit that holds a battery's active power at 0 against its setpoint."""


@dataclass(frozen=True)
class StorageUnit:
    """A battery's fixed facts, shared by every :class:`StorageState` of it in a run.

    :param name: battery name, as in the scenario's ``grid.storage``.
    :param bus: the bus it connects to (wye, over every phase of the bus).
    :param rating_va: limit on ``|P + jQ|`` (VA); a setpoint beyond it is refused, never clamped.
    :param capacity_kwh: energy capacity (kWh).
    :param soc_min: lowest state of charge (fraction of the capacity); discharging stops there.
    :param soc_max: highest state of charge (fraction); charging stops there.
    :param efficiency: one-way efficiency (fraction): delivering ``P`` for ``t`` takes
        ``P t / efficiency`` from the cells, charging at ``P`` for ``t`` stores ``P t efficiency``.
    """

    name: str
    bus: str
    rating_va: float
    capacity_kwh: float
    soc_min: float
    soc_max: float
    efficiency: float


@dataclass(frozen=True)
class StorageState:
    """One battery at one grid step, after the step's energy has moved.

    Signs are those of ``set_storage_power`` (generator convention, unlike the load-convention
    datacenter and substation powers): ``p_w > 0`` discharges into the grid, ``q_var > 0`` injects.

    :param unit: the battery's fixed facts.
    :param p_w: active power delivered in this step's solve (W): the setpoint, or 0 at a limit.
    :param q_var: reactive power delivered (var): the setpoint at any state of charge.
    :param p_set_w: active power setpoint last commanded (W).
    :param soc: state of charge (fraction of the capacity).
    :param limit: the limit holding ``p_w`` at 0 against a nonzero ``p_set_w``, ``None`` when
        the battery delivers its setpoint. Power beyond the rating is refused when commanded, so
        no other limit can hold it.
    """

    unit: StorageUnit
    p_w: float
    q_var: float
    p_set_w: float
    soc: float
    limit: StorageLimit | None = None

    @property
    def energy_kwh(self) -> float:
        """Energy stored (kWh): ``soc`` times the capacity."""
        return self.soc * self.unit.capacity_kwh

    @property
    def limited(self) -> bool:
        """True while a state-of-charge limit holds the active power at 0 against the setpoint."""
        return self.limit is not None


_NO_STORAGE: Mapping[str, StorageState] = MappingProxyType({})
"""The storage states of a grid without batteries."""


@dataclass(frozen=True)
class GridState:
    """Result of one grid solve at time ``t_s``.

    :param t_s: simulation time (s).
    :param bus_phases: names ``"<bus>.<phase>"`` of the monitored bus-phases; the same tuple
        object at every step of a run.
    :param v_pu: voltage magnitude per bus-phase (pu of the bus's nominal line-to-neutral voltage).
    :param taps: regulator bank name -> per-phase tap steps in force.
    :param p_sub_w: substation active power per phase (W, > 0 = drawn from the source).
    :param q_sub_var: substation reactive power per phase (var).
    :param losses_w: total active losses (W).
    :param converged: False if the solver flagged this step as not converged (and the scenario
        asked to continue rather than stop).
    :param branches: the branches reported, ``None`` for a grid that reports none.
    :param branch_current_a: current magnitude per conductor of ``branches`` (A); NaN on a step
        that did not converge.
    :param branch_loading_pct: loading per branch: its most loaded conductor's current as a
        percentage of that conductor's normal rating (%).
    :param capacitors: capacitor name -> closed, for the capacitors under automatic control
        (:meth:`~openg2g.core.interfaces.GridBackend.controlled_capacitors`); empty when none are.
    :param energized: per bus-phase of ``bus_phases``, True while it has a path to a source
        through branches in service (a de-energized bus-phase reads 0 pu); ``None`` for a grid
        that does not tell (every bus-phase supplied).
    :param storage: battery name -> its state at this step
        (:meth:`~openg2g.core.interfaces.GridBackend.storages`); empty without batteries.
    """

    t_s: float
    bus_phases: tuple[str, ...]
    v_pu: np.ndarray
    taps: Mapping[str, tuple[int, ...]]
    p_sub_w: np.ndarray
    q_sub_var: np.ndarray
    losses_w: float
    converged: bool = True
    branches: BranchSet | None = None
    branch_current_a: np.ndarray | None = None
    branch_loading_pct: np.ndarray | None = None
    capacitors: Mapping[str, bool] = field(default_factory=lambda: _NO_CAPACITORS)
    energized: np.ndarray | None = None
    storage: Mapping[str, StorageState] = field(default_factory=lambda: _NO_STORAGE)

    def __post_init__(self) -> None:
        _keep_arrays(self, ("v_pu", "p_sub_w", "q_sub_var"))
        _keep_mappings(self, ("taps", "capacitors", "storage"))
        if self.energized is not None:
            energized = _kept_or_frozen(self.energized, _BOOL)
            if energized.shape != (len(self.bus_phases),):
                raise ValueError(
                    f"GridState: energized needs one value per bus-phase ({len(self.bus_phases)}), "
                    f"got shape {energized.shape}"
                )
            object.__setattr__(self, "energized", energized)
        if self.branches is not None:
            current, loading = _kept_or_frozen(self.branch_current_a), _kept_or_frozen(self.branch_loading_pct)
            if current.shape != (len(self.branches),) or loading.shape != (len(self.branches.names),):
                raise ValueError(
                    f"GridState: branch_current_a needs one value per conductor ({len(self.branches)}) and "
                    f"branch_loading_pct one per branch ({len(self.branches.names)}), got shapes "
                    f"{current.shape} and {loading.shape}"
                )
            object.__setattr__(self, "branch_current_a", current)
            object.__setattr__(self, "branch_loading_pct", loading)

    @classmethod
    def not_converged(
        cls,
        t_s: float,
        bus_phases: tuple[str, ...],
        taps: Mapping[str, tuple[int, ...]],
        branches: BranchSet | None = None,
        capacitors: Mapping[str, bool] = _NO_CAPACITORS,
        energized: np.ndarray | None = None,
        storage: Mapping[str, StorageState] = _NO_STORAGE,
    ) -> GridState:
        """The state of a step whose power flow failed when the run goes on (``on_nonconvergence:
        flag``): NaN voltages, powers, losses and branch currents, ``converged=False``, the taps,
        capacitor states, energized bus-phases and battery states in force (a battery's energy
        moves whether or not the feeder's power flow converges)."""
        nan3 = np.full(3, np.nan)
        i_nan = None if branches is None else np.full(len(branches), np.nan)
        loading_nan = None if branches is None else np.full(len(branches.names), np.nan)
        return cls(
            t_s,
            bus_phases,
            np.full(len(bus_phases), np.nan),
            taps,
            nan3,
            nan3,
            float("nan"),
            False,
            branches,
            i_nan,
            loading_nan,
            capacitors,
            energized,
            storage,
        )

    @classmethod
    def of_table(
        cls,
        t_s: Sequence[float],
        bus_phases: tuple[str, ...],
        table: np.ndarray,
        losses_w: Sequence[float],
        taps: Mapping[str, tuple[int, ...]],
        branches: BranchSet,
        capacitors: Mapping[str, bool] = _NO_CAPACITORS,
        energized: np.ndarray | None = None,
        storage: Mapping[str, StorageState] = _NO_STORAGE,
    ) -> list[GridState]:
        """The converged states of several solves (a batch of them), one per row of ``table``,
        the other fields shared. The table and mappings are checked (and copied unless read-only)
        once, not per state: each state's arrays are read-only segments of its row.

        :param t_s: per solve, its time (s).
        :param table: shape ``(len(t_s), len(bus_phases) + 6 + len(branches) +
            len(branches.names))``; a row holds, in this order, the voltages (pu), substation
            active power per phase (W), reactive power per phase (var), conductor currents (A) and
            branch loadings (%) of one solve.
        :param losses_w: per solve, the active losses (W).
        :raises ValueError: ``table``, ``losses_w`` or ``energized`` is not of the shape above.
        """
        widths = (len(bus_phases), 3, 3, len(branches), len(branches.names))
        table = _kept_or_frozen(table)
        if table.shape != (len(t_s), sum(widths)) or len(losses_w) != len(t_s):
            raise ValueError(
                f"GridState.of_table: a table of shape ({len(t_s)}, {sum(widths)}) and {len(t_s)} losses needed "
                f"(steps; bus-phases, 3 + 3 substation powers, conductors, branches {widths}), got shape "
                f"{table.shape} and {len(losses_w)} losses"
            )
        if energized is not None:
            energized = _kept_or_frozen(energized, _BOOL)
            if energized.shape != (len(bus_phases),):
                raise ValueError(
                    f"GridState.of_table: energized needs one value per bus-phase ({len(bus_phases)}), "
                    f"got shape {energized.shape}"
                )
        # np.cumsum would cost more than all the rest of this method
        bounds = itertools.pairwise(itertools.accumulate(widths, initial=0))
        v, p, q, i, pct = (table[:, start:end] for start, end in bounds)
        losses = [float(x) for x in losses_w]
        taps, capacitors, storage = (
            _read_only_mapping(taps),
            _read_only_mapping(capacitors),
            _read_only_mapping(storage),
        )
        # the fields in their declared order, as __init__ would set them
        return [
            _unchecked(
                cls,
                {
                    "t_s": t,
                    "bus_phases": bus_phases,
                    "v_pu": v_row,
                    "taps": taps,
                    "p_sub_w": p_row,
                    "q_sub_var": q_row,
                    "losses_w": loss,
                    "converged": True,
                    "branches": branches,
                    "branch_current_a": i_row,
                    "branch_loading_pct": pct_row,
                    "capacitors": capacitors,
                    "energized": energized,
                    "storage": storage,
                },
            )
            for t, v_row, p_row, q_row, loss, i_row, pct_row in zip(t_s, v, p, q, losses, i, pct)
        ]

    def voltage(self, bus_phase: str) -> float:
        """Voltage magnitude (pu) at ``"<bus>.<phase>"``."""
        try:
            return float(self.v_pu[self.bus_phases.index(bus_phase)])
        except ValueError:
            raise KeyError(f"unknown bus-phase {bus_phase!r}") from None


@dataclass(frozen=True)
class Observation:
    """What a controller sees at a control step: read-only, typed, never backend objects.

    :param t_s: simulation time (s).
    :param datacenters: site name -> latest datacenter state.
    :param grid: latest grid state; ``grid.storage`` holds each battery's state of charge, power
        and limit (:class:`StorageState`).
    :param v_min_pu: lower voltage limit of the scenario (pu).
    :param v_max_pu: upper voltage limit of the scenario (pu).
    :param f_hz: the bulk system's frequency at the latest grid solve (Hz), ``None`` when the
        scenario models none (``grid.frequency``).
    :param ride_through: site name -> its ride-through's blocks now (:class:`RideThroughState`),
        for the sites that have one (``datacenters[*].ride_through``).
    """

    t_s: float
    datacenters: Mapping[str, DatacenterState]
    grid: GridState
    v_min_pu: float
    v_max_pu: float
    _sensitivity: Callable[[str], np.ndarray] = field(repr=False, compare=False, default=None)  # type: ignore[assignment]
    _loading_sensitivity: Callable[[str], np.ndarray] | None = field(repr=False, compare=False, default=None)
    f_hz: float | None = None
    ride_through: Mapping[str, RideThroughState] = field(default_factory=lambda: _NO_RIDE_THROUGH)

    def __post_init__(self) -> None:
        _keep_mappings(self, ("datacenters", "ride_through"))

    def voltage_sensitivity(self, site: str) -> np.ndarray:
        """dV/dP of every monitored bus-phase with respect to the site's per-phase active power.

        :param site: datacenter site name.
        :return: read-only array of shape ``(len(grid.bus_phases), 3)`` in pu per W, for the
            present operating point and taps (reactive power follows at the site's power factor).
        """
        if self._sensitivity is None:
            raise RuntimeError("this observation carries no voltage sensitivity (grid backend has none)")
        return self._sensitivity(site)

    def loading_sensitivity(self, site: str) -> np.ndarray:
        """d(loading)/dP of every branch of ``grid.branches`` with respect to the site's per-phase
        active power.

        :param site: datacenter site name.
        :return: read-only array of shape ``(len(grid.branches.names), 3)`` in % per W, for the
            present operating point and taps (reactive power follows at the site's power factor).
        """
        if self._loading_sensitivity is None:
            raise RuntimeError("this observation carries no loading sensitivity (grid backend has none)")
        return self._loading_sensitivity(site)


Mode = Literal["online", "on_ups", "ups_empty", "tripped", "waiting_return", "returning", "recharging"]
"""A ride-through block's mode (:mod:`openg2g.datacenter.ridethrough_machine`)."""

MODES: tuple[Mode, ...] = ("online", "on_ups", "ups_empty", "tripped", "waiting_return", "returning", "recharging")
"""Every block mode, in the order of the codes the ride-through's records store."""


@dataclass(frozen=True)
class BlockStatus:
    """One block as a controller may read it.

    :param name: the block's name.
    :param fraction: its share of the site's load.
    :param mode: its mode now.
    :param since_s: when it entered the mode (s).
    :param time_in_mode_s: how long it has been in it (s).
    :param on_ups: whether its UPS carries its IT load.
    :param grid_fraction: its last step's grid draw / its asked load.
    :param serving_fraction: its last step's share of its IT load served.
    :param ups_energy_kwh: stored energy now (kWh), ``None`` without a UPS.
    :param state_of_charge: stored / usable energy, ``None`` without a UPS.
    :param release_pending: a release_block command waits for the supply to be back.
    """

    name: str
    fraction: float
    mode: Mode
    since_s: float
    time_in_mode_s: float
    on_ups: bool
    grid_fraction: float
    serving_fraction: float
    ups_energy_kwh: float | None
    state_of_charge: float | None
    release_pending: bool


@dataclass(frozen=True)
class RideThroughState:
    """A site's ride-through as a controller may read it (read-only).

    :param t_s: the time it stands at: its last step or solve (s).
    :param blocks: block name -> its status, in the order listed.
    :param online_fraction: share of the site's load on the grid in full (online or recharging),
        the blocks' fractions made to sum to 1.
    :param on_ups_fraction: share of the site's load whose IT load its UPS carries.
    """

    t_s: float
    blocks: Mapping[str, BlockStatus]
    online_fraction: float
    on_ups_fraction: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "blocks", MappingProxyType(dict(self.blocks)))
