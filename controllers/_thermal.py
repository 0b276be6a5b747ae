"""Thermal limits shared by the stock controllers: the parameters that turn them on and name the
branches, the branches' rows in the grid's branch list, and their loading sensitivities.

A branch's loading is the grid's (``GridState.branch_loading_pct``): its most loaded conductor's
current as a percentage of the conductor's normal rating. The sensitivities are the grid's exact
``d(loading)/dP`` at the present operating point (``Observation.loading_sensitivity``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from pydantic import Field, ValidationInfo, field_validator

from openg2g.core.errors import ControllerError
from openg2g.core.interfaces import ControlContext
from openg2g.core.state import Observation

from ._base import ControllerConfig
from ._voltage import SensitivityCache

__all__ = [
    "MAX_LOADING_PCT",
    "LoadingForecast",
    "LoadingSensitivityCache",
    "ThermalParams",
    "branch_loading",
    "thermal_rows",
]


MAX_LOADING_PCT = 1000.0
"""Highest loading limit a controller takes (%): ten times the normal rating, far past any
emergency rating (OpenDSS's default is 150%); a larger limit constrains nothing and only hides
that thermal limits are in effect in name alone."""


class ThermalParams(ControllerConfig):
    """The thermal-limit parameters of a controller's ``Config`` (off by default)."""

    thermal: bool = Field(False, description="Also keep branch loading under max_loading_pct (thermal limits).")
    thermal_branches: list[str] | None = Field(
        None,
        min_length=1,
        description="Branches whose loading counts, as grid_branches names them ('line.650632'); None = all.",
    )
    max_loading_pct: float = Field(
        100.0,
        gt=0,
        le=MAX_LOADING_PCT,
        allow_inf_nan=False,
        description=f"L_max: loading limit (% of the normal rating, at most {MAX_LOADING_PCT:g}).",
    )

    @field_validator("thermal_branches")
    @classmethod
    def _only_with_thermal(cls, v: list[str] | None, info: ValidationInfo) -> list[str] | None:
        if v is not None and not info.data.get("thermal", False):
            raise ValueError("thermal_branches is set but thermal is false: set thermal: true to constrain them")
        return v


def thermal_rows(context: ControlContext, names: Sequence[str] | None, *, controller: str) -> np.ndarray:
    """Indices into the grid's branch list of the constrained branches (``None`` = every branch),
    names matched case-insensitively.

    :raises ControllerError: the grid reports no branches, or a name is not one of its branches
        (the message lists them).
    """
    if context.branches is None:
        raise ControllerError(
            f"{controller}: thermal limits need a grid that reports branch loading; this one reports none"
        )
    known = [n.lower() for n in context.branches.names]
    if names is None:
        return np.arange(len(known))
    missing = [n for n in names if n.lower() not in known]
    if missing:
        raise ControllerError(
            f"{controller}: thermal_branches {missing} are not branches of the grid; "
            f"valid branches: {list(context.branches.names)}"
        )
    return np.array([known.index(n.lower()) for n in names], dtype=int)


def branch_loading(observation: Observation, rows: np.ndarray) -> np.ndarray:
    """Present loading (%) of the branches ``rows``; NaN when the grid step reports none."""
    loading = observation.grid.branch_loading_pct
    if loading is None:
        return np.full(rows.size, np.nan)
    return np.asarray(loading, dtype=float)[rows]


class LoadingSensitivityCache(SensitivityCache):
    """Rows ``zone`` (branch indices) of ``observation.loading_sensitivity(site)`` (% per W),
    refreshed every ``every_steps`` steps."""

    def _matrix(self, observation: Observation, site: str) -> np.ndarray:
        return observation.loading_sensitivity(site)


@dataclass(frozen=True)
class LoadingForecast:
    """The constrained branches' loading over a horizon, linear in the power changes of a horizon
    controller's inputs (its channels: a site's power, or the part of it that responds at one
    pace), and the cost of its overload (the controller's thermal term).

    ``L_bk = base_bk + sum_c gain_cbk dW_c``; the cost of the changes ``dW`` is
    ``weight sum_b sum_k [L_bk - limit]_+``, non-negative and convex (piecewise linear) in ``dW``.

    :param base: predicted loading with no power change, ``(B, N)`` (%).
    :param gain: loading per W of each channel's power change, ``(S, B, N)`` (% per W).
    :param limit_pct: loading limit (%).
    :param weight: cost per % of overload per branch and step.
    """

    base: np.ndarray
    gain: np.ndarray
    limit_pct: float
    weight: float

    def _over(self, dw: np.ndarray) -> np.ndarray:
        """Predicted loading above the limit, ``(C, B, N)`` (%; negative: under it)."""
        return self.base[None] + np.einsum("cs,sbn->cbn", dw, self.gain) - self.limit_pct

    def cost(self, dw: np.ndarray) -> np.ndarray:
        """Overload cost of channel power changes ``dw`` (W, ``(C, S)``), ``(C,)``."""
        return self.weight * np.maximum(self._over(dw), 0.0).sum(axis=(1, 2))

    def slope(self, dw: np.ndarray) -> np.ndarray:
        """A subgradient of :meth:`cost` at ``dw`` (W, ``(C, S)``), ``(C, S)`` (cost per W): the
        gains of the overloaded branch-steps (one at the limit counts as not overloaded, a valid
        choice at the kink)."""
        over = (self._over(dw) > 0.0).astype(float)
        return self.weight * np.einsum("cbn,sbn->cs", over, self.gain)
