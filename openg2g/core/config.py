"""Building blocks of every configuration read from a file (scenarios, sweeps, studies).

:class:`ConfigModel` is the strict pydantic base (frozen, unknown keys rejected, no inf/NaN, no
booleans read as numbers); :data:`Name` and :data:`Seconds` are the field types for element names
and exact times; :class:`VoltageDependence` is how any load or generator follows its voltage. The
components own their configuration types (:mod:`openg2g.grid.config`,
:mod:`openg2g.datacenter.config`) and build them from these; :mod:`openg2g.scenario.schema`
composes them into a scenario.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    ValidationInfo,
    field_validator,
)

from openg2g.core.limits import MAX_DURATION_S

__all__ = [
    "HIDDEN_TAG",
    "MAX_KW",
    "MIN_POWER_FACTOR",
    "ConfigModel",
    "Name",
    "PowerFactor",
    "Seconds",
    "VoltageDependence",
    "check_run_time",
    "field_path",
    "parse_seconds",
]


def check_run_time(v: Fraction, *, zero_ok: bool, later: bool = False) -> Fraction:
    """``v`` (s) if it is > 0 (>= 0 with ``zero_ok``) and at most :data:`MAX_DURATION_S`; else
    ValueError saying which bound it breaks (``later`` words it for an instant, not a length)."""
    if v < 0 or (v == 0 and not zero_ok):
        raise ValueError(f"must be {'>=' if zero_ok else '>'} 0 s, got {v}")
    if v > MAX_DURATION_S:
        raise ValueError(
            f"{float(v):g} s is {'later' if later else 'longer'} than a year ({MAX_DURATION_S} s), "
            "the longest run openg2g accepts"
        )
    return v


HIDDEN_TAG = "~"
"""Prefix of a discriminated union member's tag that field paths leave out, for a union whose
members share their fields' paths: a site's ``kind`` picks its spec, and its fields read
``datacenters.0.bus``, not ``datacenters.0.replay.bus``."""


def field_path(loc: Sequence[Any]) -> str:
    """A pydantic error location as the dotted field path messages show (``datacenters.0.bus``);
    union tags starting with :data:`HIDDEN_TAG` are left out."""
    return ".".join(str(p) for p in loc if not (isinstance(p, str) and p.startswith(HIDDEN_TAG))) or "(top level)"


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

MIN_POWER_FACTOR = 0.5
"""Lowest power factor of a load, generator or site: reactive power up to 1.73 times the real power.
Below it the reactive power of a few kW reaches megavars (pf 1e-9: 1e9 times the real power), which
no feeder carries: the first power flow would fail instead of validate."""


def _power_factor(value: float) -> float:
    if value < MIN_POWER_FACTOR:
        raise ValueError(
            f"a power factor is between {MIN_POWER_FACTOR} and 1, got {value!r}: below {MIN_POWER_FACTOR} "
            f"a load draws more than {math.tan(math.acos(MIN_POWER_FACTOR)):.2f} var per W"
        )
    return value


PowerFactor = Annotated[float, Field(le=1), AfterValidator(_power_factor)]
"""A power factor (lagging, 1 = unity), from :data:`MIN_POWER_FACTOR` to 1."""


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


class ConfigModel(BaseModel):
    """Base of every model read from a file: frozen, unknown keys rejected, no inf/NaN, no booleans
    where numbers belong."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_boolean_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        # pydantic's lax mode reads `true` as 1: a YAML boolean where a number belongs is a mistake
        field = cls.model_fields.get(info.field_name or "")
        if field is not None and _has_bool(value) and _numeric(field.annotation):
            raise ValueError(f"expected a number, got a boolean ({value!r})")
        return value


class VoltageDependence(ConfigModel):
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
