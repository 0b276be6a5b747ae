"""A controller as a scenario names it: which class, its label, timing and parameters.

Read from a scenario's ``controllers`` list (:mod:`openg2g.scenario.schema` composes it) and
turned into a controller by :func:`openg2g.control.registry.build_controller`.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from pydantic import Field, SerializerFunctionWrapHandler, field_validator, model_serializer

from openg2g.core.config import ConfigModel, Name, Seconds, check_run_time

__all__ = ["ControllerSpec"]


class ControllerSpec(ConfigModel):
    """One controller. Several run each control step in the order listed."""

    kind: str = Field(
        description="Stock controller name (see controllers/), 'path/to/file.py:ClassName' or 'package.module:ClassName'."
    )
    name: Name | None = Field(None, description="Label in outputs; defaults to kind.")
    period_s: Seconds | None = Field(None, description="Own period (s); default periods.control_s.")
    delay_s: Seconds = Field(Fraction(0), description="Communication delay before its commands take effect (s).")
    voltage_noise_pu: float = Field(
        0.0,
        ge=0,
        lt=1,
        allow_inf_nan=False,
        description="Standard deviation of the error on each bus-phase voltage it reads (pu; a new Gaussian "
        "draw each step, from the run's seed; the recorded voltages stay exact); 0: exact readings.",
    )
    params: dict[str, Any] = Field(default_factory=dict, description="Validated by the controller's own Config.")

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # a controller with exact readings dumps (and hashes) as it did before sensor noise existed
        data: dict[str, Any] = handler(self)
        if self.voltage_noise_pu == 0.0:
            data.pop("voltage_noise_pu", None)
        return data

    @field_validator("delay_s")
    @classmethod
    def _delay(cls, v: Fraction) -> Fraction:
        return check_run_time(v, zero_ok=True)

    @field_validator("period_s")
    @classmethod
    def _period(cls, v: Fraction | None) -> Fraction | None:
        return None if v is None else check_run_time(v, zero_ok=False)
