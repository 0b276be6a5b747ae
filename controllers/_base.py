"""The base of every stock controller's ``Config``: frozen, unknown keys rejected."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["ControllerConfig"]


class ControllerConfig(BaseModel):
    """Parameters of a stock controller, read from a scenario's ``controllers[].params``.

    Frozen, and an unknown key is an error (``extra="forbid"``), so a typo in a scenario file is
    reported by the loader instead of being ignored.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
