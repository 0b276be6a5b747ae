"""Study files: frozen pydantic models, unknown keys rejected, errors naming file and field.

(:func:`openg2g.studies.load.load_study` reads a file into these and checks it against its base scenario.)

A siting study (``openg2g study siting FILE``)::

    study: siting
    name: ieee13_siting
    base: ieee13_none                # scenario path (relative to this file) or bundled name
    set: [duration_s=120]            # overrides applied to every run
    candidates: ["671", "675", "692", "633", "680"]   # or three_phase
    pairs: true                      # also every pair of candidates (the site split in halves)
    controllers: [none, ofo]

A hosting-capacity study (``openg2g study hosting-capacity FILE``; command-line options
override the file)::

    study: hosting_capacity
    name: ieee13_hosting
    base: ieee13_none
    buses: three_phase
    controllers: [none, ofo]
    tolerance_pu_s: 0.0              # on each of the under- and over-voltage integrals
    duration_s: 60
    settle_s: 10                     # violations before 10 s not counted (default: 10 with a controller, 0 without)
    max_mw: 30

A PV placement study (``openg2g study pv-placement FILE``; see :mod:`openg2g.studies.pv_placement`)::

    study: pv_placement
    name: ieee34_pv
    base: ieee34_none
    candidates: three_phase          # or a list of buses
    exclude: ["800", "802"]          # buses never to use
    n_pv: 5                          # at most 5 plants
    max_kw_per_site: 2000
    max_total_kw: 2500
    cost_per_kw_year: 200            # annualized investment (currency/kW/yr)
    energy_value_per_kwh: 0.1        # or 24 hourly values (time of use)
    violation_cost_per_pu_h: 5000
    operating_points: 24
    pv_shape: {bell: {sunrise_h: 6, sunset_h: 20}}   # or {csv: profile.csv}
    validate: true

A load-loss study (``openg2g study load-loss FILE``; see :mod:`openg2g.studies.load_loss`)::

    study: load_loss
    name: virginia_load_loss
    base: virginia_load_loss         # a scenario with disturbances, sites and grid.frequency
    set: [duration_s=152, "controllers=[]"]   # the faults and 60 s after; no return coordinator
    settings:                        # the ride-through settings compared, by name
      own: {}                        # each site's ride_through as the scenario has it
      legacy_ups:                    # one ride_through for every site (or for sites: [...])
        ride_through:
          blocks: [{name: all, fraction: 1, action: ups, ups: {energy_kwh: 60000}, under_voltage: [[0.7, 0.02]]}]
    limits:                          # post-contingency limits; a limit left out is not judged
      f_max_hz: 60.15                # the frequency's zenith over the run
      v_min_pu: 0.9                  # voltages from the end of the last disturbance on
      v_max_pu: 1.1
    holdable: {multiplier_min: 0.5, multiplier_max: 1.5, tolerance: 0.05}
"""

from __future__ import annotations

import csv
import math
from fractions import Fraction
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field, field_validator, model_validator

from openg2g.core.config import ConfigModel, Name, Seconds, check_run_time
from openg2g.core.limits import MAX_RETRIES
from openg2g.datacenter.ridethrough import RideThroughSpec
from openg2g.studies.common import safe_id
from openg2g.studies.hosting import DEFAULT_SETTLE_S, HostingConfig
from openg2g.sweep.spec import Overrides, SweepError

__all__ = [
    "STUDY_KINDS",
    "BellShape",
    "HoldableSearch",
    "HostingSpec",
    "LoadLossLimits",
    "LoadLossSpec",
    "PVPlacementSpec",
    "PVShape",
    "RideThroughSetting",
    "SitingSpec",
    "StudySpec",
    "read_shape_csv",
]


class _StudyFile(ConfigModel):
    name: str
    description: str = ""
    base: str = Field(description="Base scenario: path relative to the study file, or a bundled scenario name.")
    set: Overrides = Field(default_factory=list, description="dotted.key=value overrides applied to every run first.")
    retries: int = Field(1, ge=0, le=MAX_RETRIES, description="Re-attempts of a run whose worker process died.")


def _distinct_buses(v: list[str]) -> list[str]:
    dup = {b for b in v if v.count(b) > 1}
    if dup:
        raise ValueError(f"bus listed twice: {sorted(dup)}")
    return v


class _StudyBase(_StudyFile):
    site: str | None = Field(None, description="Name of the base scenario's site to place or scale; None = the first.")
    controllers: list[str] = Field(["none"], min_length=1, description="Controller choices; none = no controller.")


class SitingSpec(_StudyBase):
    """Compare candidate buses (and pairs of buses) for a datacenter site."""

    study: Literal["siting"]
    candidates: list[str] | Literal["three_phase"] = Field(
        "three_phase", description="Candidate buses, or three_phase for every three-phase bus off the source side."
    )
    singles: bool = Field(True, description="Place the whole site on each candidate bus.")
    pairs: bool = Field(False, description="Also split the site in two halves on every pair of candidates.")
    duration_s: float | None = Field(None, gt=0, description="Run duration (s); None keeps the scenario's.")

    @field_validator("candidates")
    @classmethod
    def _candidates(cls, v: list[str] | str) -> list[str] | str:
        if isinstance(v, list):
            if not v:
                raise ValueError("give at least one candidate bus")
            _distinct_buses(v)
        return v


class HostingSpec(_StudyBase):
    """Largest hosted datacenter per bus (see :mod:`openg2g.studies.hosting`)."""

    study: Literal["hosting_capacity"]
    controllers: list[str] = Field(list(HostingConfig.controllers), min_length=1)
    buses: list[str] | Literal["three_phase"] = Field("three_phase", description="Buses to study.")
    tolerance_pu_s: float = Field(
        HostingConfig.tolerance_pu_s,
        ge=0,
        description="Largest under-voltage, and largest over-voltage, part of the violation integral that counts as hosted (pu.s).",
    )
    thermal: bool = Field(HostingConfig.thermal, description="Also require no branch above its rating (see below).")
    overload_tolerance_pct_s: float = Field(
        HostingConfig.overload_tolerance_pct_s,
        ge=0,
        description="Largest overload integral of the lines and transformers that counts as hosted (%.s).",
    )
    duration_s: float = Field(HostingConfig.duration_s, gt=0, description="Run duration (s).")
    max_mw: float = Field(HostingConfig.max_mw, gt=0, description="Largest site considered (MW peak).")
    mix: dict[str, Annotated[int, Field(ge=1)]] | None = Field(
        None, description="Replicas per block by model (a finer block); None = the site's counts over their gcd."
    )
    settle_s: float | None = Field(
        None,
        ge=0,
        description=(
            "Violations before this time are not counted (s); None = 0 without a controller, "
            f"{DEFAULT_SETTLE_S:g} s with one."
        ),
    )

    @model_validator(mode="after")
    def _settle_in_run(self) -> HostingSpec:
        if self.settle_s is not None and self.settle_s >= self.duration_s:
            raise ValueError(f"settle_s ({self.settle_s:g} s) must be below duration_s ({self.duration_s:g} s)")
        return self

    def config_fields(self) -> dict[str, Any]:
        """The :class:`~openg2g.studies.hosting.HostingConfig` fields this file sets."""
        return {
            "buses": None if self.buses == "three_phase" else list(self.buses),
            "controllers": tuple(self.controllers),
            "tolerance_pu_s": self.tolerance_pu_s,
            "thermal": self.thermal,
            "overload_tolerance_pct_s": self.overload_tolerance_pct_s,
            "duration_s": self.duration_s,
            "max_mw": self.max_mw,
            "site": self.site,
            "mix": self.mix,
            "settle_s": self.settle_s,
        }


class BellShape(ConfigModel):
    """A clear-sky day: ``peak * sin^2(pi * (h - sunrise_h) / (sunset_h - sunrise_h))`` between
    sunrise and sunset, 0 at night (the public OpenG2G study's PV shape)."""

    sunrise_h: float = Field(6.0, ge=0, lt=24, description="Hour of day the output starts (h).")
    sunset_h: float = Field(20.0, gt=0, le=24, description="Hour of day the output ends (h).")
    peak: float = Field(1.0, gt=0, le=2, description="Output at solar noon as a fraction of the rated kW.")

    @model_validator(mode="after")
    def _daylight(self) -> BellShape:
        if not self.sunrise_h < self.sunset_h:
            raise ValueError(f"need sunrise_h < sunset_h, got {self.sunrise_h} and {self.sunset_h}")
        return self


def read_shape_csv(path: Path, where: str) -> tuple[np.ndarray, np.ndarray]:
    """Read a PV availability CSV (columns ``hour``, ``availability``).

    :param where: the study file and field, for the error.
    :return: ``(hour, availability)``, hours ascending within [0, 24].
    :raises SweepError: unreadable file, missing columns, hours not ascending within [0, 24], or
        an availability that is negative or not finite.
    """
    try:
        with Path(path).open(newline="") as fh:
            rows = list(csv.DictReader(fh))
        hour = np.array([float(r["hour"]) for r in rows])
        avail = np.array([float(r["availability"]) for r in rows])
    except (OSError, KeyError, ValueError, TypeError) as exc:
        raise SweepError([(where, f"cannot read {path} (need CSV columns hour, availability): {exc}")]) from None
    if hour.size == 0 or not np.isfinite(hour).all() or np.any(np.diff(hour) < 0) or hour[0] < 0 or hour[-1] > 24:
        raise SweepError([(where, f"{path}: hours must be ascending within [0, 24] (and at least one row)")])
    bad = np.flatnonzero(~(np.isfinite(avail) & (avail >= 0)))
    if bad.size:
        raise SweepError(
            [(where, f"{path}: availability must be finite and >= 0, row {int(bad[0]) + 2} has {avail[bad[0]]}")]
        )
    return hour, avail


class PVShape(ConfigModel):
    """PV output over the representative day as a fraction of the rated kW: exactly one of
    ``bell`` or ``csv``."""

    bell: BellShape | None = None
    csv: str | None = Field(
        None,
        description=(
            "CSV with columns hour (0-24, ascending), availability (>= 0), relative to the study file; read "
            "by linear interpolation, wrapping around midnight."
        ),
    )

    @model_validator(mode="after")
    def _one(self) -> PVShape:
        given = [k for k in ("bell", "csv") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of bell, csv (got {given or 'none'})")
        return self

    def availability(self, hour: np.ndarray, where: str = "pv_shape.csv") -> np.ndarray:
        """Output fraction at each hour of day ``hour`` (h).

        :raises SweepError: the CSV cannot be read (see :func:`read_shape_csv`).
        """
        hour = np.asarray(hour, dtype=float) % 24.0
        if self.bell is not None:
            b = self.bell
            phase = (hour - b.sunrise_h) / (b.sunset_h - b.sunrise_h)
            day = (phase >= 0) & (phase <= 1)
            return np.where(day, b.peak * np.sin(np.pi * np.clip(phase, 0, 1)) ** 2, 0.0)
        assert self.csv is not None
        h, a = read_shape_csv(Path(self.csv), where)
        return np.interp(hour, h, a, period=24.0)


class PVPlacementSpec(_StudyFile):
    """Where to put PV plants on the feeder and how big (see :mod:`openg2g.studies.pv_placement`).

    Costs are annual and in one currency of your choice (the public study's: US dollars).
    """

    study: Literal["pv_placement"]
    candidates: list[str] | Literal["three_phase"] = Field(
        "three_phase",
        description=(
            "Candidate buses (each with phases a, b, c), or three_phase for every three-phase bus at the "
            "feeder's primary voltage off the source side."
        ),
    )
    exclude: list[str] = Field(default_factory=list, description="Buses taken out of the candidates.")
    n_pv: int = Field(5, ge=1, description="Most plants built.")
    max_kw_per_site: float = Field(2000.0, gt=0, description="Largest plant (kW AC, three phases together).")
    min_kw_per_site: float = Field(0.0, ge=0, description="Smallest plant built (kW AC); 0 = any size.")
    max_total_kw: float | None = Field(2500.0, gt=0, description="Most PV over all plants (kW AC); None = no cap.")
    max_per_regulator_zone: int | None = Field(
        None,
        ge=1,
        description=(
            "Most plants in one regulator zone (the buses a regulator bank feeds before the next bank, "
            "and those upstream of every bank); None = no limit."
        ),
    )
    cost_per_kw_year: float = Field(200.0, ge=0, description="Annualized investment per kW installed (per kW-yr).")
    cost_per_site_year: float = Field(0.0, ge=0, description="Annualized fixed cost of each plant built (per yr).")
    energy_value_per_kwh: float | list[float] = Field(
        0.1,
        description="Value of each kWh of PV output (per kWh): one price, or 24 hourly prices from midnight (time of use).",
    )
    violation_cost_per_pu_h: float = Field(
        5000.0,
        ge=0,
        description=(
            "Penalty per pu of voltage outside the limits, per bus-phase and hour of the representative day "
            "(per pu-h; charged every day of the year)."
        ),
    )
    days_per_year: float = Field(365.0, gt=0, le=366, description="Days the representative day stands for (d/yr).")
    operating_points: int = Field(
        24, ge=1, le=1000, description="Instants of the base run linearized at, evenly spaced over its duration."
    )
    pv_shape: PVShape = Field(
        default_factory=lambda: PVShape.model_validate({"bell": {}}),
        description="PV output over the day (fraction of kW).",
    )
    linearization_rounds: int = Field(
        2,
        ge=1,
        le=10,
        description="MILP solves: the first linearized without PV, each further one at the previous plan.",
    )
    time_limit_s: float = Field(300.0, gt=0, description="Wall-time limit of each MILP solve (s).")
    mip_gap: float = Field(1e-4, ge=0, lt=1, description="Relative MILP optimality gap at which the solver stops.")
    validate_plan: bool = Field(
        True, alias="validate", description="Run the base scenario with the plan's PV (nonlinear check)."
    )

    @field_validator("candidates")
    @classmethod
    def _candidates(cls, v: list[str] | str) -> list[str] | str:
        if isinstance(v, list):
            if not v:
                raise ValueError("give at least one candidate bus (or three_phase)")
            _distinct_buses(v)
        return v

    @field_validator("exclude")
    @classmethod
    def _exclude(cls, v: list[str]) -> list[str]:
        return _distinct_buses(v)

    @field_validator("energy_value_per_kwh")
    @classmethod
    def _prices(cls, v: float | list[float]) -> float | list[float]:
        prices = v if isinstance(v, list) else [v]
        if isinstance(v, list) and len(v) != 24:
            raise ValueError(f"give one price, or 24 hourly prices from midnight (got {len(v)})")
        bad = [p for p in prices if not (math.isfinite(p) and p >= 0)]
        if bad:
            raise ValueError(f"prices must be finite and >= 0, got {bad}")
        return v

    @model_validator(mode="after")
    def _sizes(self) -> PVPlacementSpec:
        if self.min_kw_per_site > self.max_kw_per_site:
            raise ValueError(
                f"min_kw_per_site ({self.min_kw_per_site}) exceeds max_kw_per_site ({self.max_kw_per_site})"
            )
        if self.max_total_kw is not None and self.max_total_kw < self.min_kw_per_site:
            raise ValueError(
                f"max_total_kw ({self.max_total_kw}) is below min_kw_per_site ({self.min_kw_per_site}): "
                "no plant could be built"
            )
        if isinstance(self.candidates, list) and set(self.candidates) <= set(self.exclude):
            raise ValueError("every candidate is excluded")
        return self

    def price_per_kwh(self, hour: np.ndarray) -> np.ndarray:
        """Energy value (per kWh) at each hour of day ``hour`` (h)."""
        hour = np.asarray(hour, dtype=float)
        if isinstance(self.energy_value_per_kwh, list):
            return np.asarray(self.energy_value_per_kwh, dtype=float)[np.floor(hour % 24.0).astype(int)]
        return np.full(hour.shape, float(self.energy_value_per_kwh))


class RideThroughSetting(ConfigModel):
    """One ride-through setting a load-loss study compares: a ``ride_through`` given to every site
    (or to the listed ``sites``), or ``{}`` for the base scenario's own."""

    ride_through: RideThroughSpec | None = Field(
        None,
        description=(
            "The ride_through the sites get (blocks, trip curves, UPS, return; docs/disturbances.md); null: "
            "none, the sites draw whatever the voltage. Left out: every site keeps the base scenario's own."
        ),
    )
    sites: list[Name] | None = Field(
        None,
        min_length=1,
        description="The sites given this ride_through (the others keep their own); None = every site.",
    )

    @model_validator(mode="after")
    def _scope(self) -> RideThroughSetting:
        if self.sites is not None:
            if self.own:
                raise ValueError(
                    "sites lists the sites a ride_through applies to: give the ride_through too "
                    "({} keeps every site's own)"
                )
            dup = sorted({s for s in self.sites if self.sites.count(s) > 1})
            if dup:
                raise ValueError(f"sites: listed twice: {dup}")
        return self

    @property
    def own(self) -> bool:
        """True for ``{}``: every site keeps the base scenario's ride_through."""
        return "ride_through" not in self.model_fields_set


class LoadLossLimits(ConfigModel):
    """The post-contingency limits a run must keep; a limit left out is not judged (give at least one)."""

    f_min_hz: float | None = Field(
        None, gt=0, le=1000, description="Lowest frequency allowed: the run's nadir (Hz); needs grid.frequency."
    )
    f_max_hz: float | None = Field(
        None, gt=0, le=1000, description="Highest frequency allowed: the run's zenith (Hz); needs grid.frequency."
    )
    v_min_pu: float | None = Field(
        None,
        gt=0,
        lt=1,
        description="Lowest monitored bus-phase voltage allowed after the last disturbance (pu).",
    )
    v_max_pu: float | None = Field(
        None,
        gt=1,
        le=2,
        description="Highest monitored bus-phase voltage allowed after the last disturbance (pu).",
    )
    voltage_after_s: Seconds = Field(
        Fraction(0),
        description=(
            "Voltages are counted from this long after the last disturbance ends (its last clearing, reclose "
            "or sag point), through each run's outputs.metrics_start_s (s); the frequency counts the whole run."
        ),
    )

    @field_validator("voltage_after_s")
    @classmethod
    def _after(cls, v: Fraction) -> Fraction:
        return check_run_time(v, zero_ok=True)

    @model_validator(mode="after")
    def _limits(self) -> LoadLossLimits:
        if not self.given():
            raise ValueError("give at least one of f_min_hz, f_max_hz, v_min_pu, v_max_pu")
        if self.f_min_hz is not None and self.f_max_hz is not None and self.f_min_hz >= self.f_max_hz:
            raise ValueError(f"f_min_hz ({self.f_min_hz:g} Hz) must be below f_max_hz ({self.f_max_hz:g} Hz)")
        return self

    def given(self) -> dict[str, float]:
        """The limits given: ``f_min``, ``f_max`` (Hz), ``v_min``, ``v_max`` (pu) -> value."""
        values = {"f_min": self.f_min_hz, "f_max": self.f_max_hz, "v_min": self.v_min_pu, "v_max": self.v_max_pu}
        return {name: value for name, value in values.items() if value is not None}


MAX_MULTIPLIER = 100.0
"""Largest multiplier a load-loss search may try on the sites' load."""

MIN_MULTIPLIER_TOLERANCE = 1e-3
"""Finest multiplier tolerance of a load-loss search (run folders name multipliers to 1e-4)."""

MAX_SEARCH_INTERVALS = 10_000
"""Most grid intervals of a load-loss search: (multiplier_max - multiplier_min) / tolerance."""


class HoldableSearch(ConfigModel):
    """The search for the largest simultaneous loss within the limits: a multiplier on every site's
    load (replicas, training GPUs, base load), bisected to ``tolerance``."""

    multiplier_min: float = Field(
        0.25, gt=0, le=MAX_MULTIPLIER, description="Smallest multiplier tried on every site's load."
    )
    multiplier_max: float = Field(4.0, gt=0, le=MAX_MULTIPLIER, description="Largest multiplier tried.")
    tolerance: float = Field(
        0.05,
        ge=MIN_MULTIPLIER_TOLERANCE,
        description=(
            "The search stops once the largest multiplier within the limits and the smallest beyond them are "
            "this close."
        ),
    )

    @model_validator(mode="after")
    def _range(self) -> HoldableSearch:
        lo, hi = self.multiplier_min, self.multiplier_max
        if lo >= hi:
            raise ValueError(f"multiplier_min ({lo:g}) must be below multiplier_max ({hi:g})")
        if self.tolerance > hi - lo:
            raise ValueError(f"tolerance ({self.tolerance:g}) is wider than the range [{lo:g}, {hi:g}]")
        if (hi - lo) / self.tolerance > MAX_SEARCH_INTERVALS:
            raise ValueError(
                f"[{lo:g}, {hi:g}] at tolerance {self.tolerance:g} is more than {MAX_SEARCH_INTERVALS} steps; "
                "give a larger tolerance"
            )
        return self


class LoadLossSpec(_StudyFile):
    """MW lost at a disturbance under each ride-through setting, and the largest simultaneous loss
    within the limits (see :mod:`openg2g.studies.load_loss`)."""

    study: Literal["load_loss"]
    settings: dict[str, RideThroughSetting] = Field(
        min_length=1, description="The ride-through settings compared, by name (letters, digits, _ . -)."
    )
    limits: LoadLossLimits = Field(description="Post-contingency frequency and voltage limits.")
    holdable: HoldableSearch | None = Field(
        None, description="Search, per setting, the largest simultaneous loss within the limits; None: no search."
    )

    @field_validator("settings")
    @classmethod
    def _names(cls, v: dict[str, RideThroughSetting]) -> dict[str, RideThroughSetting]:
        bad = [name for name in v if not name or safe_id(name) != name]
        if bad:
            raise ValueError(f"setting names may hold letters, digits, _ . - only (they name run folders): {bad}")
        return v


StudySpec = SitingSpec | HostingSpec | PVPlacementSpec | LoadLossSpec
"""Any study file."""

STUDY_KINDS: dict[str, type[StudySpec]] = {
    "siting": SitingSpec,
    "hosting_capacity": HostingSpec,
    "pv_placement": PVPlacementSpec,
    "load_loss": LoadLossSpec,
}
"""The ``study:`` value of a study file -> its model."""
