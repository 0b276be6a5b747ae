"""How often each component of a run runs: the engine's periods (exact rationals, seconds)."""

from __future__ import annotations

from fractions import Fraction

from pydantic import Field, field_validator, model_validator

from openg2g.core.config import ConfigModel, Seconds, check_run_time

__all__ = ["Periods"]


class Periods(ConfigModel):
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
        return check_run_time(v, zero_ok=False)

    @model_validator(mode="after")
    def _nested(self) -> Periods:
        if self.grid_s % self.datacenter_s:
            raise ValueError(f"grid_s ({self.grid_s}) must be a whole multiple of datacenter_s ({self.datacenter_s})")
        if self.control_s % self.grid_s:
            raise ValueError(f"control_s ({self.control_s}) must be a whole multiple of grid_s ({self.grid_s})")
        return self
