"""The grid's configuration: the feeder (or pandapower net), its regulators, PV, storage, extra loads and limits.

Read from a scenario's ``grid`` block (:mod:`openg2g.scenario.schema` composes it) and taken by
:class:`openg2g.grid.feeder.backend.FeederGrid` (``feeder``) or :class:`openg2g.grid.nets.balanced.PandapowerGrid`
(``pandapower``). A datacenter site reaches the grid as a
:class:`GridSite`: its name, bus, power factor and voltage dependence, nothing of its servers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    StrictBool,
    field_validator,
    model_serializer,
    model_validator,
)

from openg2g.core.config import MAX_KW, ConfigModel, Name, PowerFactor, VoltageDependence
from openg2g.core.errors import UnknownNameError
from openg2g.grid.frequency import SystemFrequencySpec

__all__ = [
    "MAX_TAP_STEPS",
    "PRIMARY_MIN_KV",
    "BranchRatingSpec",
    "ExtraLoadSpec",
    "GridSite",
    "GridSpec",
    "PVSpec",
    "RegulatorSpec",
    "SiteConnection",
    "SiteTransformerSpec",
    "StorageSpec",
    "monitored_at_levels",
    "tan_phi",
    "unknown_site",
]

MAX_TAP_STEPS = 32
"""Largest tap step magnitude a scenario may allow (32 x 0.625 % = 20 % on a standard regulator)."""

PRIMARY_MIN_KV = 1.0
"""Lowest base voltage (kV line to line) of a primary level: ANSI C84.1's line between low voltage
(customers' 120/240/480 V services) and medium voltage (the feeder a utility holds to its band)."""


_Bus = TypeVar("_Bus", str, int)
"""A bus as a backend names it: a feeder's bus name, a pandapower net's bus index."""

_KV_LEVEL_RTOL = 1e-6
"""A bus whose base is within this of a level is at that level (bases are rounded by the file)."""


def monitored_at_levels(
    spec: GridSpec,
    buses: Sequence[_Bus],
    base_kv: Callable[[_Bus], float],
    site_buses: Collection[_Bus],
) -> list[_Bus]:
    """Of the candidate ``buses`` (``grid.monitored_buses``, or every bus past the substation),
    the ones whose voltages count for limits, in their order.

    ``grid.monitored_min_kv`` keeps those at that base and above. Without it, and when the
    candidates are not the scenario's own list, ``monitored_levels: primary`` keeps those at
    :data:`PRIMARY_MIN_KV` and above, or at the lowest level a datacenter connects at when that
    is lower (a campus on a 480 V or 400 V network is judged at its own level); when that leaves
    none (a low-voltage network without sites), every level counts.

    :param base_kv: a bus's base voltage (kV line to line).
    :param site_buses: the datacenters' buses.
    """
    tolerance = 1.0 - _KV_LEVEL_RTOL
    if spec.monitored_min_kv is not None:
        return [b for b in buses if base_kv(b) >= spec.monitored_min_kv * tolerance]
    if spec.monitored_buses or spec.monitored_levels == "all":
        return list(buses)
    floor = min([PRIMARY_MIN_KV, *(base_kv(b) for b in site_buses)]) * tolerance
    return [b for b in buses if base_kv(b) >= floor] or list(buses)


class GridSite(Protocol):
    """What the grid needs of a datacenter site: where it draws and how its power follows voltage."""

    @property
    def name(self) -> str: ...
    @property
    def bus(self) -> str: ...
    @property
    def power_factor(self) -> float: ...
    @property
    def load_model(self) -> Literal["constant_power", "opendss"]: ...
    @property
    def vminpu(self) -> float: ...
    @property
    def vmaxpu(self) -> float: ...


@dataclass(frozen=True)
class SiteConnection:
    """A :class:`GridSite` for building a grid in code (a notebook): a site's name and bus, its
    power factor and how its power follows voltage (the defaults of a scenario's site)."""

    name: str
    bus: str
    power_factor: float = 0.95
    load_model: Literal["constant_power", "opendss"] = "constant_power"
    vminpu: float = 0.95
    vmaxpu: float = 1.05


class RegulatorSpec(ConfigModel):
    """Initial setting of one regulator bank."""

    taps: list[int] | None = Field(None, description="Per-phase tap steps; None keeps the feeder file's.")
    mode: Literal["fixed", "auto"] = Field("fixed", description="fixed taps, or the bank's own band control.")
    band_v: float | None = Field(None, gt=0, le=20, description="Auto mode: bandwidth override (V on the 120 V base).")
    vreg_v: float | None = Field(
        None, ge=90, le=150, description="Auto mode: set point override (V on the 120 V base)."
    )
    delay_s: float | None = Field(
        None,
        ge=0,
        description=(
            "Auto mode: time outside the band before the first tap move (s). None keeps the feeder's: the "
            "RegControl delay of the feeder file (15 s when the file does not set it); a value here "
            "overrides it for every phase of the bank."
        ),
    )
    tap_delay_s: float | None = Field(
        None,
        ge=0,
        description=(
            "Auto mode: time between further tap moves while the voltage stays outside the band (s). None "
            "keeps the feeder's: the RegControl tapdelay of the feeder file (2 s when the file does not set it)."
        ),
    )
    min_tap: int | None = Field(
        None,
        ge=-MAX_TAP_STEPS,
        le=MAX_TAP_STEPS,
        description="Lowest tap step of this regulator; None keeps the feeder's (-16 on a 32-step regulator).",
    )
    max_tap: int | None = Field(
        None,
        ge=-MAX_TAP_STEPS,
        le=MAX_TAP_STEPS,
        description="Highest tap step of this regulator; None keeps the feeder's (+16 on a 32-step regulator).",
    )

    @model_validator(mode="after")
    def _range(self) -> RegulatorSpec:
        if self.min_tap is not None and self.max_tap is not None and self.min_tap >= self.max_tap:
            raise ValueError(f"need min_tap < max_tap, got {self.min_tap} and {self.max_tap}")
        return self

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # a bank without the override dumps (and hashes) as it did before tap_delay_s existed
        data: dict[str, Any] = handler(self)
        if self.tap_delay_s is None:
            data.pop("tap_delay_s", None)
        return data


def _all_phases() -> list[Literal["a", "b", "c"]]:
    return ["a", "b", "c"]


class PVSpec(VoltageDependence):
    """A PV plant: a three-phase (or single-phase) generator following a profile."""

    name: Name
    bus: Name
    phases: list[Literal["a", "b", "c"]] = Field(default_factory=_all_phases)
    kw: float = Field(gt=0, le=MAX_KW, description="Rated AC output over all phases (kW).")
    power_factor: PowerFactor = Field(1.0, description="Output power factor (1 = unity; at least 0.5).")
    profile: str | None = Field(
        None,
        description=(
            "CSV with columns t_s, scale (>= 0, may exceed 1), relative to the scenario file, read by "
            "linear interpolation and held outside its range; None = constant."
        ),
    )
    scale: float = Field(1.0, ge=0, description="Initial output as a fraction of kw when no profile is given.")


class StorageSpec(ConfigModel):
    """A battery: P/Q setpoints from controllers, state of charge tracked by the grid backend and
    reported per grid step (the ``storage`` output table, ``GridState.storage``)."""

    name: Name
    bus: Name
    kw: float = Field(gt=0, le=MAX_KW, description="Power rating (kW), charge and discharge.")
    kwh: float = Field(gt=0, description="Energy capacity (kWh).")
    soc0: float = Field(0.5, ge=0, le=1, description="Initial state of charge (fraction).")
    soc_min: float = Field(0.1, ge=0, le=1)
    soc_max: float = Field(0.9, ge=0, le=1)
    efficiency: float = Field(0.95, gt=0, le=1, description="One-way efficiency.")

    @model_validator(mode="after")
    def _soc(self) -> StorageSpec:
        if not self.soc_min <= self.soc0 <= self.soc_max:
            raise ValueError(f"need soc_min <= soc0 <= soc_max, got {self.soc_min}, {self.soc0}, {self.soc_max}")
        return self


class ExtraLoadSpec(VoltageDependence):
    """An additional load with an optional time profile."""

    name: Name
    bus: Name
    kw_per_phase: float = Field(ge=0, le=MAX_KW)
    power_factor: PowerFactor = Field(0.95, description="Power factor (lagging; at least 0.5).")
    phases: list[Literal["a", "b", "c"]] = Field(default_factory=_all_phases)
    profile: str | None = Field(
        None, description="CSV with columns t_s, scale (>= 0), like a PV profile; None = constant."
    )


class SiteTransformerSpec(ConfigModel):
    """A datacenter site's own step-up transformer (pandapower nets only): the site draws at its
    low-voltage side, a new bus; the high-voltage side is the site's bus, at that bus's ``vn_kv``.
    No-load losses and magnetizing current are neglected."""

    sn_mva: float = Field(gt=0, le=10_000, description="Rated power (MVA).")
    vn_lv_kv: float = Field(gt=0, le=1_000, description="Rated voltage of the site side (kV).")
    vk_percent: float = Field(gt=0, le=100, description="Short-circuit voltage (% of rated voltage).")
    vkr_percent: float = Field(ge=0, le=100, description="Its resistive part (%): the copper losses at rated power.")

    @model_validator(mode="after")
    def _vk(self) -> SiteTransformerSpec:
        if self.vkr_percent > self.vk_percent:
            raise ValueError(f"need vkr_percent <= vk_percent, got {self.vkr_percent} and {self.vk_percent}")
        return self


class BranchRatingSpec(ConfigModel):
    """Ratings of one line or transformer that replace the feeder file's (or OpenDSS's defaults:
    400 A normal and 600 A emergency for a line that states none). A line takes amperes per
    conductor, a transformer kVA over all phases (as OpenDSS's ``normhkva``/``emerghkva``, turned
    into each winding's current); what is not given keeps the file's value."""

    normal_a: float | None = Field(None, gt=0, description="Line: normal rating (A per conductor).")
    emergency_a: float | None = Field(None, gt=0, description="Line: emergency rating (A per conductor).")
    normal_kva: float | None = Field(None, gt=0, description="Transformer: normal rating (kVA, all phases).")
    emergency_kva: float | None = Field(None, gt=0, description="Transformer: emergency rating (kVA, all phases).")

    @model_validator(mode="after")
    def _some(self) -> BranchRatingSpec:
        if all(v is None for v in (self.normal_a, self.emergency_a, self.normal_kva, self.emergency_kva)):
            raise ValueError(
                "give at least one of normal_a, emergency_a (a line) or normal_kva, emergency_kva (a transformer)"
            )
        for normal, emergency in (("normal_a", "emergency_a"), ("normal_kva", "emergency_kva")):
            lo, hi = getattr(self, normal), getattr(self, emergency)
            if lo is not None and hi is not None and hi < lo:
                raise ValueError(f"{emergency} ({hi:g}) is below {normal} ({lo:g})")
        return self


class GridSpec(ConfigModel):
    """The feeder and its options."""

    feeder: str | None = Field(
        None,
        description=(
            "Bundled feeder name (ieee13, openg2g-ieee13, ...) or path to a .dss master file; give exactly one of "
            "feeder and pandapower."
        ),
    )
    pandapower: str | None = Field(
        None,
        description=(
            "Instead of a feeder, a pandapower net solved balanced (one with asymmetric loads: converted to the "
            "phase frame and solved as a feeder): the path of a pandapower .json or pickle file (relative to the "
            "scenario file), a pandapower.networks function without arguments (case118, create_cigre_network_mv, "
            "ieee_european_lv_asymmetric, ...) or a SimBench code if simbench is installed."
        ),
    )
    trust_pickle: StrictBool = Field(
        False,
        description=(
            "Read grid.pandapower when it is a pickle (.p, .pkl, .pickle): a pickle runs any code it carries "
            "while it is read, so say here that you trust the file; without it a pickle is refused (a JSON "
            "net is checked before it is read and needs no such word)."
        ),
    )
    solver: Literal["exact", "pandapower"] = Field(
        "exact",
        description="exact: phase-frame solver matching OpenDSS (default); pandapower: runpp_3ph, approximate reference.",
    )
    tolerance_pu: float = Field(
        1e-8,
        ge=1e-12,
        le=1e-3,
        allow_inf_nan=False,
        description=(
            "A feeder solve's convergence tolerance: the largest voltage update (pu of each node's base) at which "
            "it stops. 1e-8 (default) agrees with OpenDSS at 1e-10 to about 1e-7 pu; OpenDSS's own default, 1e-4, "
            "takes fewer iterations on a large feeder and leaves errors of that order. The exact solver only."
        ),
    )
    load_aggregation: Literal["mean", "last"] = Field(
        "mean", description="What a grid solve draws from the datacenter samples since the last solve."
    )
    batch: bool = Field(True, description="Solve the steps between control actions in one batch call when possible.")
    source_pu: float | None = Field(
        None, ge=0.8, le=1.2, description="Source voltage (pu); None keeps the feeder file's."
    )
    v_min_pu: float = Field(0.95, gt=0, description="Lower voltage limit (pu).")
    v_max_pu: float = Field(1.05, gt=0, le=2.0, description="Upper voltage limit (pu).")
    monitored_buses: list[Name] | None = Field(
        None, min_length=1, description="Buses whose phases count for limits; None = every bus past the substation."
    )
    monitored_min_kv: float | None = Field(
        None,
        gt=0,
        allow_inf_nan=False,
        description=(
            "Of those buses, only the ones whose base voltage is at least this (kV line to line) count for limits: "
            "12.47 keeps a 12.47 kV feeder's primary and leaves out its 120/240 V secondaries; None = every level."
        ),
    )
    monitored_levels: Literal["primary", "all"] = Field(
        "primary",
        description=(
            "Which voltage levels count for limits when neither monitored_buses nor monitored_min_kv is given: "
            f"primary = buses at {PRIMARY_MIN_KV:g} kV and above (line to line), the levels a planner holds to the "
            "limits, or from the lowest level a datacenter connects at when that is lower (a network with no bus "
            "at either monitors every level); all = every level, 120/240 V secondaries included."
        ),
    )
    regulators: dict[Name, RegulatorSpec] = Field(default_factory=dict, description="Bank name -> initial setting.")
    capacitors: dict[Name, bool] = Field(default_factory=dict, description="Capacitor name -> closed at the start.")
    capacitor_control: Literal["fixed", "auto"] = Field(
        "fixed",
        description=(
            "fixed: capacitors stay as set (the feeder file's states, grid.capacitors, set_capacitor commands); "
            "auto: every CapControl of the feeder file switches its capacitor as OpenDSS's time mode does "
            "(voltage, current, kvar and pf types; others are refused), set_capacitor switching a bank "
            "whose control then goes on from the new state."
        ),
    )
    initial_controls: Literal["stated", "static"] = Field(
        "stated",
        description=(
            "stated: the run starts from the taps, capacitor and switch states the scenario and the feeder file "
            "state (OpenDSS's controlmode=off); static: before the run, the feeder file's RegControls, CapControls and "
            "SwtControls settle as OpenDSS's snapshot Solve lets them (its default controlmode=static: each acts "
            "after its delay, in delay order, until none does, within the file's maxcontroliter), with the "
            "feeder's own loads, PV and extra loads at 0 s and no datacenter drawing; a bank whose taps "
            "grid.regulators states keeps them. Feeders only; a control openg2g cannot run is refused by name."
        ),
    )
    load_scale: float = Field(
        1.0,
        ge=0,
        le=100,
        description="Multiplier on the feeder's own loads, as OpenDSS's LoadMult: fixed and exempt loads keep their kW.",
    )
    pv: list[PVSpec] = Field(default_factory=list)
    storage: list[StorageSpec] = Field(default_factory=list)
    extra_loads: list[ExtraLoadSpec] = Field(default_factory=list)
    site_transformers: dict[Name, SiteTransformerSpec] = Field(
        default_factory=dict,
        description="Site name -> its own step-up transformer (pandapower nets only); none by default.",
    )
    branch_ratings: dict[Name, BranchRatingSpec] = Field(
        default_factory=dict,
        description="Branch name as in the grid_branches table (line.<name>, transformer.<name>) -> its ratings "
        "(feeders only); loading is reported against these.",
    )
    load_convention: Literal["per_element", "opendss"] = Field(
        "per_element",
        description=(
            "per_element: each datacenter site, PV and extra load follows its own load_model (default "
            "constant_power); opendss: all of them are OpenDSS model-1 loads (constant P and Q within "
            "vminpu-vmaxpu, constant impedance outside), the public OpenG2G study's convention; one that "
            "says load_model constant_power is then refused. The feeder's own loads follow their file "
            "either way."
        ),
    )
    on_nonconvergence: Literal["stop", "flag"] = Field(
        "stop", description="stop: end the run with an error; flag: record the step as not converged and go on."
    )
    frequency: SystemFrequencySpec | None = Field(
        None,
        description=(
            "The bulk system's frequency after the grid's load changes (openg2g.grid.frequency: an aggregate "
            "system frequency response model), fed back to the sites' ride-through; None: no frequency model "
            "(the frequency stays nominal)."
        ),
    )

    @field_validator("feeder")
    @classmethod
    def _feeder(cls, v: str | None) -> str | None:
        if v is None:
            return v
        # a path must name a .dss file: the reader is never pointed at other files, whose
        # contents its errors would quote (`feeder: /etc/passwd`)
        if any(c in v for c in "/\\.") and not v.lower().endswith(".dss"):
            raise ValueError(f"{v!r}: give a bundled feeder name or the path of an OpenDSS master file ending in .dss")
        return v

    @model_validator(mode="after")
    def _limits(self) -> GridSpec:
        if (self.feeder is None) == (self.pandapower is None):
            raise ValueError("give exactly one of feeder (a distribution feeder) and pandapower (a pandapower net)")
        if not self.v_min_pu < self.v_max_pu:
            raise ValueError(f"need v_min_pu < v_max_pu, got {self.v_min_pu} and {self.v_max_pu}")
        names = [*(e.name for e in self.pv), *(e.name for e in self.storage), *(e.name for e in self.extra_loads)]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"PV, storage and extra-load names must be unique, repeated: {dup}")
        for name, rating in self.branch_ratings.items():
            kind, _, element = name.partition(".")
            if kind.lower() not in ("line", "transformer") or not element:
                raise ValueError(f"branch_ratings: {name!r} is not a branch name (line.<name> or transformer.<name>)")
            wrong = ("normal_kva", "emergency_kva") if kind.lower() == "line" else ("normal_a", "emergency_a")
            given = [f for f in wrong if getattr(rating, f) is not None]
            if given:
                unit = (
                    "amperes (normal_a, emergency_a)" if kind.lower() == "line" else "kVA (normal_kva, emergency_kva)"
                )
                raise ValueError(f"branch_ratings.{name}: a {kind.lower()} is rated in {unit}, not {', '.join(given)}")
        return self

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # a feeder scenario dumps (and hashes) as it did before nets existed
        data: dict[str, Any] = handler(self)
        if self.pandapower is None:
            data.pop("pandapower", None)
        if not self.trust_pickle:
            data.pop("trust_pickle", None)
        if not self.site_transformers:
            data.pop("site_transformers", None)
        if not self.branch_ratings:
            data.pop("branch_ratings", None)
        if self.capacitor_control == "fixed":
            data.pop("capacitor_control", None)
        if self.initial_controls == "stated":
            data.pop("initial_controls", None)
        if self.load_convention == "per_element":
            data.pop("load_convention", None)
        if self.frequency is None:
            data.pop("frequency", None)
        if self.tolerance_pu == 1e-8:
            data.pop("tolerance_pu", None)
        if self.monitored_levels == "primary":
            data.pop("monitored_levels", None)
        return data


def unknown_site(t_s: float, grid: str, name: str, sites: Iterable[str]) -> UnknownNameError:
    """The error for a load handed to ``grid`` (e.g. ``"feeder ieee13"``) by a site it does not serve."""
    return UnknownNameError(f"t={t_s} s, {grid}: load for unknown site {name!r} (sites: {', '.join(sites) or 'none'})")


def tan_phi(pf: float) -> float:
    """Q/P of power factor ``pf`` (lagging; clipped to [0, 1])."""
    return math.tan(math.acos(min(max(pf, 0.0), 1.0)))
