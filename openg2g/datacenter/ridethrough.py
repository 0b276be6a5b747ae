"""A site's ride-through configuration: its load as blocks, their trip curves, UPS and return.

Read from a site's ``ride_through`` field (:class:`openg2g.datacenter.config.SiteSpec`) and run by
:class:`openg2g.datacenter.ridethrough_machine.RideThrough`. A block is a hall or a UPS system
holding a ``fraction`` of the site's load (of every phase alike). Each block has trip curves
written as a ride-through requirement is: a point ``(v_pu, duration_s)`` of ``under_voltage``
reads "below ``v_pu`` for longer than ``duration_s``, the block leaves the grid"; ``over_voltage``,
``under_frequency`` and ``over_frequency`` points read the same way (above, below, above). The
block then transfers to its UPS (``action: ups``) or stops (``action: trip``), and returns after
the supply is back inside the return band (:class:`ReturnSpec`). See ``docs/disturbances.md``.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from openg2g.core.config import MAX_KW, ConfigModel, Name
from openg2g.core.limits import MAX_DURATION_S

__all__ = [
    "FRACTION_TOLERANCE",
    "BlockSpec",
    "CurvePoints",
    "RepeatedSagsSpec",
    "ReturnSpec",
    "RideThroughSpec",
    "UpsSpec",
]

FRACTION_TOLERANCE = 1e-9
"""How far the blocks' fractions may sum from 1."""

MAX_OVER_VOLTAGE_PU = 2.0
"""Highest voltage a curve or band may name (pu)."""

CurvePoints = list[tuple[float, float]]
"""A trip curve: ``(level, duration_s)`` points, the level in pu or Hz, ascending."""


def _check_curve(points: CurvePoints, field: str, unit: str, longer_when_higher: bool) -> CurvePoints:
    """``points`` if their levels ascend strictly and their durations run the way the curve's
    side requires (longer when higher for an under-curve, shorter for an over-curve); else a
    ValueError naming the point. Levels are checked against the nominal by the model."""
    for i, (level, duration_s) in enumerate(points):
        if not (math.isfinite(level) and math.isfinite(duration_s)):
            raise ValueError(f"point {i} ({level} {unit}, {duration_s} s): level and duration must be finite numbers")
        if level <= 0:
            raise ValueError(f"point {i} ({level:g} {unit}, {duration_s:g} s): the level must be > 0")
        if not 0 <= duration_s <= MAX_DURATION_S:
            raise ValueError(
                f"point {i} ({level:g} {unit}, {duration_s:g} s): the duration must be between 0 and {MAX_DURATION_S} s"
            )
        if i == 0:
            continue
        level0, duration0 = points[i - 1]
        if level <= level0:
            raise ValueError(
                f"point {i} ({level:g} {unit}, {duration_s:g} s) follows point {i - 1} ({level0:g} {unit}, {duration0:g} s): "
                "list the points by strictly ascending level"
            )
        if longer_when_higher and duration_s <= duration0:
            raise ValueError(
                f"{field} is not monotone: point {i} ({level:g} {unit}, {duration_s:g} s) allows no longer than point "
                f"{i - 1} ({level0:g} {unit}, {duration0:g} s); a higher level must allow a longer duration"
            )
        if not longer_when_higher and duration_s >= duration0:
            raise ValueError(
                f"{field} is not monotone: point {i} ({level:g} {unit}, {duration_s:g} s) allows no shorter than point "
                f"{i - 1} ({level0:g} {unit}, {duration0:g} s); a higher level must allow a shorter duration"
            )
    return points


class UpsSpec(ConfigModel):
    """A block's UPS: the stored energy that carries its IT load off the grid, and its recharge."""

    energy_kwh: float = Field(
        gt=0,
        le=MAX_KW * 24,
        description=(
            "Usable stored energy of the block's UPS (kWh), full at the start: what the storage gives up "
            "before it is empty; the load receives it times discharge_efficiency. An autonomy of T s at "
            "L kW is L T / 3600 / discharge_efficiency kWh."
        ),
    )
    discharge_efficiency: float = Field(
        0.95,
        gt=0,
        le=1,
        description=(
            "Energy delivered to the IT load / energy drawn from storage; 0.95 assumes a double-conversion "
            "UPS near its rated load."
        ),
    )
    charge_efficiency: float = Field(
        0.9,
        gt=0,
        le=1,
        description=(
            "Energy stored / energy the charger draws from the grid; 0.9 assumes a battery charger between "
            "lead-acid (about 0.85) and lithium-ion (about 0.95)."
        ),
    )
    recharge_fraction: float = Field(
        0.1,
        gt=0,
        le=1,
        description=(
            "Charger power drawn from the grid while recharging, as a fraction of the block's present load; "
            "0.1 assumes a charger sized at a tenth of the UPS rating. Ignored when recharge_kw is given."
        ),
    )
    recharge_kw: float | None = Field(
        None,
        gt=0,
        le=MAX_KW,
        description="Charger power drawn from the grid while recharging (kW); None: recharge_fraction of the load.",
    )

    @model_validator(mode="after")
    def _one_charger(self) -> UpsSpec:
        if self.recharge_kw is not None and "recharge_fraction" in self.model_fields_set:
            raise ValueError(
                "give the charger's power once: recharge_kw (kW) or recharge_fraction (of the block's load)"
            )
        return self


# The defaults of the voltage curves: the ITI (CBEMA) curve's boundaries for IT power supplies,
# as (level, longest time the supplies ride through beyond it)
ITIC_UNDER_VOLTAGE: CurvePoints = [(0.7, 0.02), (0.8, 0.5), (0.9, 10.0)]
ITIC_OVER_VOLTAGE: CurvePoints = [(1.1, 0.5), (1.2, 0.003)]


class RepeatedSagsSpec(ConfigModel):
    """A count of voltage sags: the block leaves the grid at the ``count``-th sag within
    ``within_s``, however short each one (UPS and transfer-switch controllers that give up on a
    supply dipping again and again, as a line's reclosings onto a fault make it)."""

    count: int = Field(ge=2, le=1000, description="Sags that make the block act, the one that acts included.")
    within_s: float = Field(gt=0, le=MAX_DURATION_S, description="Window the sags must fall within (s).")
    below_pu: float = Field(
        0.9, gt=0, lt=1, description="A sag: the lowest phase going below this (pu), after being at or above it."
    )


class BlockSpec(ConfigModel):
    """One block of a site's load (a hall or a UPS system): its share, trip curves and action."""

    name: Name = Field(description="Block name (outputs, events and release_block commands use it).")
    fraction: float = Field(
        ge=0, le=1, description="Share of the site's load on every phase (0-1); the blocks' shares sum to 1."
    )
    action: Literal["ups", "trip"] = Field(
        description=(
            "What the block does when a curve point is exceeded. ups: its IT load transfers to its UPS and "
            "serves on stored energy until the UPS is empty, its grid draw dropping to residual_fraction; "
            "trip: it stops serving, its draw dropping to residual_fraction."
        )
    )
    residual_fraction: float = Field(
        0.0,
        ge=0,
        le=1,
        description=(
            "Share of the block's load that stays on the grid while its IT load is off it (cooling, lighting, "
            "controls not behind the UPS); 0 assumes the whole block leaves, as the sites of NERC's January 2025 "
            "incident review whose load went to backup whole."
        ),
    )
    under_voltage: CurvePoints = Field(
        ITIC_UNDER_VOLTAGE,
        description=(
            "(v_pu, duration_s) points, ascending v_pu: the lowest phase below v_pu for longer than duration_s "
            "acts; higher v_pu must allow longer. The default is the ITI (CBEMA) curve's lower boundary for IT "
            "power supplies (a UPS's own input window is usually tighter: give it)."
        ),
    )
    over_voltage: CurvePoints = Field(
        ITIC_OVER_VOLTAGE,
        description=(
            "(v_pu, duration_s) points, ascending v_pu: the highest phase above v_pu for longer than duration_s "
            "acts; higher v_pu must allow shorter. The default is the ITI (CBEMA) curve's upper boundary."
        ),
    )
    under_frequency: CurvePoints = Field(
        [],
        description=(
            "(f_hz, duration_s) points, ascending f_hz: frequency below f_hz for longer than duration_s acts; "
            "higher f_hz must allow longer. Empty (the default) assumes IT power supplies and UPS rectifiers "
            "that do not trip on frequency within the range a grid holds."
        ),
    )
    over_frequency: CurvePoints = Field(
        [],
        description=(
            "(f_hz, duration_s) points, ascending f_hz: frequency above f_hz for longer than duration_s acts; "
            "higher f_hz must allow shorter. Empty by default, as under_frequency."
        ),
    )
    repeated_sags: RepeatedSagsSpec | None = Field(
        None, description="Act at the count-th sag within a window, however short each (None: sags are not counted)."
    )
    ups: UpsSpec | None = Field(None, description="The block's UPS; required for action ups, refused for trip.")

    @field_validator("under_voltage", "over_voltage", "under_frequency", "over_frequency")
    @classmethod
    def _monotone(cls, points: CurvePoints, info: ValidationInfo) -> CurvePoints:
        field = info.field_name or ""
        unit = "pu" if field.endswith("voltage") else "Hz"
        _check_curve(points, field, unit, longer_when_higher=field.startswith("under"))
        for i, (v, _) in enumerate(points):
            if field == "under_voltage" and v >= 1:
                raise ValueError(f"point {i}: {v:g} pu is not below the nominal 1 pu")
            if field == "over_voltage" and not 1 < v <= MAX_OVER_VOLTAGE_PU:
                raise ValueError(
                    f"point {i}: {v:g} pu is not above the nominal 1 pu and at most {MAX_OVER_VOLTAGE_PU:g}"
                )
        return points

    @model_validator(mode="after")
    def _ups(self) -> BlockSpec:
        if self.action == "ups" and self.ups is None:
            raise ValueError(f"block {self.name!r}: action ups needs ups (energy_kwh at least)")
        if self.action == "trip" and self.ups is not None:
            raise ValueError(f"block {self.name!r}: action trip has no UPS to use; drop ups or set action: ups")
        return self


class ReturnSpec(ConfigModel):
    """When and how blocks that left the grid return to it."""

    v_min_pu: float = Field(
        0.9, gt=0, lt=1, description="The lowest phase must be at least this for the block to return (pu)."
    )
    v_max_pu: float = Field(
        1.1,
        gt=1,
        le=MAX_OVER_VOLTAGE_PU,
        description="The highest phase must be at most this for the block to return (pu); 0.9-1.1 pu is the "
        "ITI (CBEMA) curve's steady-state band.",
    )
    f_min_hz: float | None = Field(
        None,
        gt=0,
        description="Lowest frequency for a return (Hz); None: the block's highest under-frequency point (no bound "
        "when it has none).",
    )
    f_max_hz: float | None = Field(
        None,
        gt=0,
        description="Highest frequency for a return (Hz); None: the block's lowest over-frequency point (no bound "
        "when it has none).",
    )
    delay_s: float = Field(
        300.0,
        ge=0,
        le=MAX_DURATION_S,
        description="How long voltage and frequency must stay inside the band, without a break, before a block may "
        "return (s); 300 s is IEEE 1547-2018's default enter-service delay for generators, a cautious stand-in "
        "for a site waiting for a stable supply.",
    )
    ramp_s: float = Field(
        300.0,
        ge=0,
        le=MAX_DURATION_S,
        description="A returning block's grid draw (and, for a block that stopped, its serving) rises linearly over "
        "this (s); 300 s is IEEE 1547-2018's default enter-service ramp. A release_block command may set its own.",
    )
    stagger_s: float = Field(
        0.0,
        ge=0,
        le=MAX_DURATION_S,
        description="Blocks that may return at once start their ramps this far apart, in the order listed (s); "
        "0 assumes no coordination: they start together.",
    )
    mode: Literal["auto", "commanded"] = Field(
        "auto",
        description="auto: a block returns as soon as it may (after its stagger slot); commanded: only when a "
        "release_block command releases it, so a controller can pace the returns.",
    )

    @model_validator(mode="after")
    def _band(self) -> ReturnSpec:
        if self.f_min_hz is not None and self.f_max_hz is not None and self.f_min_hz >= self.f_max_hz:
            raise ValueError(f"f_min_hz ({self.f_min_hz:g} Hz) must be below f_max_hz ({self.f_max_hz:g} Hz)")
        return self


class RideThroughSpec(ConfigModel):
    """A site's ride-through behaviour: its load as blocks, each with trip curves and an action."""

    blocks: list[BlockSpec] = Field(
        min_length=1, description="The site's load as blocks, each a fraction of it; the fractions sum to 1."
    )
    nominal_hz: float = Field(
        60.0,
        gt=0,
        le=1000,
        description="The system's nominal frequency (Hz): under-frequency points lie below it, over-frequency "
        "points above.",
    )
    return_to_service: ReturnSpec = Field(
        default_factory=ReturnSpec, description="When and how blocks that left the grid return to it."
    )

    @model_validator(mode="after")
    def _blocks(self) -> RideThroughSpec:
        total = math.fsum(b.fraction for b in self.blocks)
        if abs(total - 1.0) > FRACTION_TOLERANCE:
            shares = ", ".join(f"{b.name} {b.fraction:g}" for b in self.blocks)
            raise ValueError(f"blocks: the fractions sum to {total!r}, not 1 ({shares})")
        names = [b.name for b in self.blocks]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"blocks: names listed twice: {dup}")
        nominal = self.nominal_hz
        for i, b in enumerate(self.blocks):
            for j, (f, _) in enumerate(b.under_frequency):
                if f >= nominal:
                    raise ValueError(
                        f"blocks.{i}.under_frequency point {j}: {f:g} Hz is not below the nominal {nominal:g} Hz"
                    )
            for j, (f, _) in enumerate(b.over_frequency):
                if f <= nominal:
                    raise ValueError(
                        f"blocks.{i}.over_frequency point {j}: {f:g} Hz is not above the nominal {nominal:g} Hz"
                    )
        band = self.return_to_service
        if band.f_min_hz is not None and band.f_min_hz >= nominal:
            raise ValueError(
                f"return_to_service.f_min_hz: {band.f_min_hz:g} Hz is not below the nominal {nominal:g} Hz"
            )
        if band.f_max_hz is not None and band.f_max_hz <= nominal:
            raise ValueError(
                f"return_to_service.f_max_hz: {band.f_max_hz:g} Hz is not above the nominal {nominal:g} Hz"
            )
        return self
