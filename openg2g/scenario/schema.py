"""The scenario file format: frozen pydantic models, unknown keys rejected, units in field names.

A scenario file is YAML whose top level is :class:`Scenario`. :mod:`openg2g.scenario.loader`
parses it and adds the checks that need the feeder and the trace library (buses, models, batch
sizes). ``openg2g schema`` prints this reference as Markdown.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    ValidationInfo,
    field_validator,
    model_validator,
)

from openg2g.core.limits import MAX_DURATION_S

__all__ = [
    "MAX_DURATION_S",
    "MAX_STEPS",
    "MAX_TAP_STEPS",
    "ControllerSpec",
    "EventSpec",
    "ExtraLoadSpec",
    "GridSpec",
    "ModelSpec",
    "Name",
    "OutputSpec",
    "PVSpec",
    "Periods",
    "RegulatorSpec",
    "Scenario",
    "Seconds",
    "SiteSpec",
    "StorageSpec",
    "TrainingSpec",
    "parse_seconds",
]


MAX_STEPS = 10**9
"""Most datacenter steps in one run (about 30 h of wall time at 0.1 ms per step)."""
MAX_TAP_STEPS = 32
"""Largest tap step magnitude a scenario may allow (32 x 0.625 % = 20 % on a standard regulator)."""


def parse_seconds(value: Any) -> Fraction:
    """Read a time in seconds as an exact rational: ``1``, ``0.1``, ``"1/10"`` all work.

    Floats are read through their shortest decimal form, so ``0.1`` is exactly 1/10.
    """
    if isinstance(value, Fraction):
        return value
    if isinstance(value, bool):
        raise ValueError("expected a number of seconds, got a boolean")  # noqa: TRY004 (pydantic reports ValueError)
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value} is not a finite number of seconds")
        return Fraction(repr(value))
    if isinstance(value, str):
        try:
            return Fraction(value.strip())
        except (ValueError, ZeroDivisionError, OverflowError):
            raise ValueError(f"{value!r} is not a number of seconds (write e.g. 0.1 or 1/10)") from None
    raise ValueError(f"expected a number of seconds, got {type(value).__name__}")


def _name(value: Any) -> Any:
    """Bus and element names may be written as bare numbers in YAML (``bus: 671``)."""
    return str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value


Name = Annotated[str, BeforeValidator(_name), Field(min_length=1)]
"""A bus or element name; numbers are read as their text."""

Seconds = Annotated[
    Fraction,
    BeforeValidator(parse_seconds),
    PlainSerializer(lambda f: str(f), return_type=str),
]
"""An exact rational number of seconds."""


MAX_KW = 1_000_000.0
"""Largest power of one load, generator or battery (kW): a gigawatt."""


def _numeric(annotation: Any) -> bool:
    """Whether a field's type is (or holds) ``int`` or ``float`` and no ``bool``."""
    parts, found = [annotation], False
    while parts:
        part = parts.pop()
        if part is bool:
            return False
        found = found or part in (int, float)
        parts.extend(get_args(part))
    return found


def _has_bool(value: Any) -> bool:
    return isinstance(value, bool) or (isinstance(value, list | tuple) and any(_has_bool(v) for v in value))


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_boolean_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        # pydantic's lax mode reads `true` as 1: a YAML boolean where a number belongs is a mistake
        field = cls.model_fields.get(info.field_name or "")
        if field is not None and _has_bool(value) and _numeric(field.annotation):
            raise ValueError(f"expected a number, got a boolean ({value!r})")
        return value


class Periods(_Model):
    """How often each component runs (exact rationals, seconds).

    The grid period must be a whole multiple of the datacenter period and the control period a
    whole multiple of the grid period, so that every grid solve sees complete datacenter samples.
    """

    datacenter_s: Seconds = Field(Fraction(1, 10), description="Datacenter sampling period (s).")
    grid_s: Seconds = Field(Fraction(1, 10), description="Grid power-flow period (s).")
    control_s: Seconds = Field(Fraction(1), description="Default controller period (s).")

    @field_validator("datacenter_s", "grid_s", "control_s")
    @classmethod
    def _positive(cls, v: Fraction) -> Fraction:
        if v <= 0:
            raise ValueError(f"must be > 0 s, got {v}")
        if v > MAX_DURATION_S:
            raise ValueError(
                f"{float(v):g} s is longer than a year ({MAX_DURATION_S} s), the longest run openg2g accepts"
            )
        return v

    @model_validator(mode="after")
    def _nested(self) -> Periods:
        if self.grid_s % self.datacenter_s:
            raise ValueError(f"grid_s ({self.grid_s}) must be a whole multiple of datacenter_s ({self.datacenter_s})")
        if self.control_s % self.grid_s:
            raise ValueError(f"control_s ({self.control_s}) must be a whole multiple of grid_s ({self.grid_s})")
        return self


class RegulatorSpec(_Model):
    """Initial setting of one regulator bank."""

    taps: list[int] | None = Field(None, description="Per-phase tap steps; None keeps the feeder file's.")
    mode: Literal["fixed", "auto"] = Field("fixed", description="fixed taps, or the bank's own band control.")
    band_v: float | None = Field(None, gt=0, le=20, description="Auto mode: bandwidth override (V on the 120 V base).")
    vreg_v: float | None = Field(
        None, ge=90, le=150, description="Auto mode: set point override (V on the 120 V base)."
    )
    delay_s: float = Field(15.0, ge=0, description="Auto mode: time outside the band before a tap move (s).")
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


class _VoltageDependence(_Model):
    """How a load or generator's power follows the voltage at its terminals."""

    load_model: Literal["constant_power", "opendss"] = Field(
        "constant_power",
        description=(
            "constant_power: P and Q at any voltage; opendss: OpenDSS load model 1, constant P and Q "
            "between vminpu and vmaxpu and a constant impedance outside (as the OpenG2G study)."
        ),
    )
    vminpu: float = Field(0.95, gt=0.5, lt=1.0, description="opendss model: lower end of the constant-power band (pu).")
    vmaxpu: float = Field(1.05, gt=1.0, le=2.0, description="opendss model: upper end of the constant-power band (pu).")


class PVSpec(_VoltageDependence):
    """A PV plant: a three-phase (or single-phase) generator following a profile."""

    name: Name
    bus: Name
    phases: list[Literal["a", "b", "c"]] = Field(default_factory=lambda: ["a", "b", "c"])
    kw: float = Field(gt=0, le=MAX_KW, description="Rated AC output over all phases (kW).")
    power_factor: float = Field(1.0, gt=0, le=1, description="Output power factor (1 = unity).")
    profile: str | None = Field(
        None,
        description=(
            "CSV with columns t_s, scale (>= 0, may exceed 1), relative to the scenario file, read by "
            "linear interpolation and held outside its range; None = constant."
        ),
    )
    scale: float = Field(1.0, ge=0, description="Initial output as a fraction of kw when no profile is given.")


class StorageSpec(_Model):
    """A battery: P/Q setpoints from controllers, state of charge tracked by the grid backend."""

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


class ExtraLoadSpec(_VoltageDependence):
    """An additional load with an optional time profile."""

    name: Name
    bus: Name
    kw_per_phase: float = Field(ge=0, le=MAX_KW)
    power_factor: float = Field(0.95, gt=0, le=1)
    phases: list[Literal["a", "b", "c"]] = Field(default_factory=lambda: ["a", "b", "c"])
    profile: str | None = Field(
        None, description="CSV with columns t_s, scale (>= 0), like a PV profile; None = constant."
    )


class GridSpec(_Model):
    """The feeder and its options."""

    feeder: str = Field(description="Bundled feeder name (ieee13, openg2g-ieee13, ...) or path to a .dss master file.")
    solver: Literal["exact", "pandapower"] = Field(
        "exact",
        description="exact: phase-frame solver matching OpenDSS (default); pandapower: runpp_3ph, approximate reference.",
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
    regulators: dict[Name, RegulatorSpec] = Field(default_factory=dict, description="Bank name -> initial setting.")
    capacitors: dict[Name, bool] = Field(default_factory=dict, description="Capacitor name -> closed.")
    load_scale: float = Field(1.0, ge=0, le=100, description="Multiplier on the feeder's own loads.")
    pv: list[PVSpec] = Field(default_factory=list)
    storage: list[StorageSpec] = Field(default_factory=list)
    extra_loads: list[ExtraLoadSpec] = Field(default_factory=list)
    on_nonconvergence: Literal["stop", "flag"] = Field(
        "stop", description="stop: end the run with an error; flag: record the step as not converged and go on."
    )

    @field_validator("feeder")
    @classmethod
    def _feeder(cls, v: str) -> str:
        # a path must name a .dss file: the reader is never pointed at other files, whose
        # contents its errors would quote (`feeder: /etc/passwd`)
        if any(c in v for c in "/\\.") and not v.lower().endswith(".dss"):
            raise ValueError(f"{v!r}: give a bundled feeder name or the path of an OpenDSS master file ending in .dss")
        return v

    @model_validator(mode="after")
    def _limits(self) -> GridSpec:
        if not self.v_min_pu < self.v_max_pu:
            raise ValueError(f"need v_min_pu < v_max_pu, got {self.v_min_pu} and {self.v_max_pu}")
        names = [e.name for e in (*self.pv, *self.storage, *self.extra_loads)]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"PV, storage and extra-load names must be unique, repeated: {dup}")
        return self


class ModelSpec(_Model):
    """One model served at a site."""

    model: Name = Field(description="Model name in the trace library (openg2g traces list).")
    gpus_per_replica: int = Field(gt=0, description="GPUs per replica; must match a measured configuration.")
    replicas: int = Field(ge=0, description="Replica count at the start.")
    batch_size: int = Field(gt=0, description="Initial batch size (a measured max_num_seqs).")
    batch_sizes: list[int] | None = Field(None, description="Batch sizes controllers may set; None = all measured.")
    itl_deadline_s: float | None = Field(None, ge=1e-3, le=60, description="Inter-token latency deadline (s).")


class TrainingSpec(_Model):
    """A training job: a parameterized synthetic model (not a measured trace), see openg2g.datacenter.training.

    The defaults are the public OpenG2G study's job (arXiv 2605.05519, gpu2grid/openg2g 0.2.0
    ``TrainingTraceParams`` and ``TrainingRun``): a 1000 s per-GPU trace of 35-40 s plateaus at
    225 W and 10-15 s at 175 W with 50 W noise, 0.3 s smoothing, rare 120-125 W dips and an 18 s
    start-up ramp from 50 W, rescaled to a 400 W peak (mean 253 W per GPU), all GPUs in lockstep.
    """

    gpus: int = Field(gt=0, le=10_000_000, description="GPUs running the job (reserved in the site's capacity).")
    start_s: float = Field(ge=0, le=MAX_DURATION_S, allow_inf_nan=False, description="Job start (s).")
    end_s: float = Field(
        gt=0,
        le=MAX_DURATION_S,
        allow_inf_nan=False,
        description="Job end (s); the job draws power in [start_s, end_s).",
    )
    high_w_per_gpu: float = Field(
        225.0, gt=0, le=2000, description="Compute plateau level per GPU before the peak rescale (W)."
    )
    low_w_per_gpu: float = Field(
        175.0, ge=0, le=2000, description="Communication plateau level per GPU before the peak rescale (W)."
    )
    high_s: tuple[float, float] = Field(
        (35.0, 40.0), description="Range of compute plateau lengths, drawn uniformly (s)."
    )
    low_s: tuple[float, float] = Field(
        (10.0, 15.0), description="Range of communication plateau lengths, drawn uniformly (s)."
    )
    noise_w: float = Field(
        50.0, ge=0, le=2000, description="Standard deviation of white noise on each 0.1 s sample (W)."
    )
    smoothing_s: float = Field(0.3, ge=0, le=60, description="Moving-average window applied after the noise (s).")
    dips_per_s: float = Field(0.01, ge=0, le=10, description="Rate of brief power dips (1/s, Poisson).")
    dip_depth_w: tuple[float, float] = Field(
        (120.0, 125.0), description="Range of dip depths below the current level (W)."
    )
    dip_s: tuple[float, float] = Field(
        (0.06, 0.14), description="Range of dip lengths (s); dips shorter than 0.05 s vanish."
    )
    ramp_s: float = Field(
        18.0, ge=0, le=3600, description="Start-up ramp: power is capped by a line rising over ramp_s (s)."
    )
    ramp_from_w_per_gpu: float = Field(
        50.0, ge=0, le=2000, description="Start of the ramp line, before the peak rescale (W)."
    )
    peak_w_per_gpu: float | None = Field(
        400.0,
        gt=0,
        le=1000,
        description="Rescale the trace so that its maximum is this (W per GPU); None keeps the levels.",
    )
    trace_s: float = Field(
        1000.0, ge=1, le=86_400, description="Length of the synthesized trace, which then repeats (s)."
    )
    seed: int = Field(2, ge=0, description="Seed of the trace synthesis (2 reproduces the study's trace).")
    sync: Literal["lockstep", "independent"] = Field(
        "lockstep",
        description=(
            "lockstep: every GPU follows the same trace (synchronous data-parallel training); "
            "independent: each 8-GPU server replays it from its own seeded offset."
        ),
    )

    @field_validator("high_s", "low_s", "dip_depth_w", "dip_s")
    @classmethod
    def _range(cls, v: tuple[float, float]) -> tuple[float, float]:
        lo, hi = v
        if not (math.isfinite(lo) and math.isfinite(hi) and 0 <= lo <= hi):
            raise ValueError(f"need a finite range 0 <= low <= high, got [{lo}, {hi}]")
        return v

    @model_validator(mode="after")
    def _window(self) -> TrainingSpec:
        if self.end_s <= self.start_s:
            raise ValueError(f"end_s ({self.end_s}) must be after start_s ({self.start_s})")
        for name in ("high_s", "low_s"):
            if getattr(self, name)[0] < 0.1:
                raise ValueError(f"{name}: plateaus must last at least one 0.1 s sample, got {getattr(self, name)}")
        return self


class SiteSpec(_VoltageDependence):
    """A datacenter site on one three-phase bus."""

    name: Name = Field(description="Site name (commands and outputs use it).")
    bus: Name = Field(description="Feeder bus; it must have phases a, b and c.")
    traces: str = Field("bundled", description="Trace library: 'bundled' or a directory relative to the scenario file.")
    power_factor: float = Field(0.95, gt=0, le=1, description="Facility power factor (lagging).")
    pue: float = Field(1.0, ge=1, le=5, description="Power usage effectiveness: facility power / IT power.")
    base_load_kw_per_phase: float = Field(0.0, ge=0, le=MAX_KW, description="Constant non-GPU load per phase (kW).")
    gpu_capacity: int | None = Field(
        None, gt=0, le=10_000_000, description="GPUs installed; None = exactly those the models use."
    )
    models: list[ModelSpec] = Field(min_length=1)
    training: TrainingSpec | None = None

    @model_validator(mode="after")
    def _unique_models(self) -> SiteSpec:
        names = [m.model for m in self.models]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"model listed twice at site {self.name!r}: {sorted(dup)}")
        return self


class ControllerSpec(_Model):
    """One controller. Several run each control step in the order listed."""

    kind: str = Field(description="Stock controller name (see controllers/) or 'path/to/file.py:ClassName'.")
    name: Name | None = Field(None, description="Label in outputs; defaults to kind.")
    period_s: Seconds | None = Field(None, description="Own period (s); default periods.control_s.")
    delay_s: Seconds = Field(Fraction(0), description="Communication delay before its commands take effect (s).")
    params: dict[str, Any] = Field(default_factory=dict, description="Validated by the controller's own Config.")

    @field_validator("delay_s")
    @classmethod
    def _delay(cls, v: Fraction) -> Fraction:
        if v < 0:
            raise ValueError(f"must be >= 0 s, got {v}")
        if v > MAX_DURATION_S:
            raise ValueError(
                f"{float(v):g} s is longer than a year ({MAX_DURATION_S} s), the longest run openg2g accepts"
            )
        return v

    @field_validator("period_s")
    @classmethod
    def _period(cls, v: Fraction | None) -> Fraction | None:
        if v is not None and v <= 0:
            raise ValueError(f"must be > 0 s, got {v}")
        if v is not None and v > MAX_DURATION_S:
            raise ValueError(
                f"{float(v):g} s is longer than a year ({MAX_DURATION_S} s), the longest run openg2g accepts"
            )
        return v


class EventSpec(_Model):
    """A command fired at a fixed time, e.g. ``{t_s: 1500, command: set_taps, bank: reg1, taps: [16, 6, 17]}``.

    ``command`` is a command name (see openg2g.core.commands.COMMANDS); the other keys are that
    command's fields.
    """

    model_config = ConfigDict(extra="allow", frozen=True)

    t_s: Seconds
    command: str

    @field_validator("t_s")
    @classmethod
    def _time(cls, v: Fraction) -> Fraction:
        if v < 0:
            raise ValueError(f"must be >= 0 s, got {v}")
        if v > MAX_DURATION_S:
            raise ValueError(
                f"{float(v):g} s is later than a year ({MAX_DURATION_S} s), the longest run openg2g accepts"
            )
        return v

    def fields(self) -> dict[str, Any]:
        """The command's own fields (everything but ``t_s`` and ``command``)."""
        return dict(self.model_extra or {})


class OutputSpec(_Model):
    """What a run writes."""

    voltages: Literal["all", "envelope"] = Field(
        "all", description="all: every bus-phase at every grid step; envelope: min/max/mean only."
    )
    branches: Literal["none", "all"] = Field(
        "none",
        description=(
            "all: the grid_branches table, current (A) and loading (%) of every line and transformer "
            "conductor at every grid step; none: only the loading figures of summary.json."
        ),
    )
    plots: bool = Field(True, description="Write PNG plots at the end of the run.")
    flush_every_s: float = Field(
        60.0, gt=0, le=MAX_DURATION_S, description="Simulated seconds between writes of output parts."
    )


class Scenario(_Model):
    """A complete co-simulation: feeder, datacenters, controllers, events, timing and outputs."""

    name: Name = Field(description="Run name (default output folder runs/<name>).")
    description: str = Field("", description="Free text.")
    seed: int = Field(0, ge=0, description="Seed of every random draw (trace offsets, ITL samples).")
    duration_s: Seconds = Field(description="Simulated time (s).")
    periods: Periods = Field(default_factory=Periods, description="Component periods.")
    grid: GridSpec = Field(description="Feeder and its options.")
    datacenters: list[SiteSpec] = Field(default_factory=list, description="Datacenter sites.")
    controllers: list[ControllerSpec] = Field(default_factory=list, description="Controllers, run in this order.")
    events: list[EventSpec] = Field(default_factory=list, description="Commands fired at fixed times.")
    outputs: OutputSpec = Field(default_factory=OutputSpec, description="What the run writes.")

    @field_validator("duration_s")
    @classmethod
    def _duration(cls, v: Fraction) -> Fraction:
        if v <= 0:
            raise ValueError(f"must be > 0 s, got {v}")
        if v > MAX_DURATION_S:
            raise ValueError(
                f"{float(v):g} s is longer than a year ({MAX_DURATION_S} s), the longest run openg2g accepts"
            )
        return v

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        steps = self.duration_s / self.periods.datacenter_s
        if steps > MAX_STEPS:
            raise ValueError(
                f"duration_s / periods.datacenter_s = {float(steps):.3g} steps, more than the {MAX_STEPS:.0e} a run "
                "can hold: lengthen datacenter_s or shorten the run"
            )
        if self.duration_s % self.periods.grid_s:
            raise ValueError(
                f"duration_s ({self.duration_s}) must be a whole multiple of periods.grid_s ({self.periods.grid_s})"
            )
        names = [s.name for s in self.datacenters]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"datacenter site names must be unique, repeated: {sorted(dup)}")
        if self.grid.solver == "pandapower":
            dependent = [
                f"{path}.{i}.load_model"
                for path, items in (
                    ("datacenters", self.datacenters),
                    ("grid.pv", self.grid.pv),
                    ("grid.extra_loads", self.grid.extra_loads),
                )
                for i, item in enumerate(items)
                if item.load_model != "constant_power"
            ]
            if dependent:
                raise ValueError(
                    f"{', '.join(dependent)}: load_model opendss needs grid.solver exact "
                    "(the pandapower reference mode draws constant power)"
                )
        return self
