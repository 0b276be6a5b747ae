"""Site helpers shared by the stock controllers: resolving site names and reading site states."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from openg2g.core.commands import Actuator
from openg2g.core.errors import ControllerError
from openg2g.core.interfaces import ControlContext
from openg2g.core.state import DatacenterState

__all__ = ["active_replicas", "model_actuators", "phase_share", "resolve_sites", "site_models"]


def resolve_sites(context: ControlContext, names: Sequence[str] | None, *, controller: str) -> list[str]:
    """The sites a controller acts on: ``names`` checked against the context, or every site.

    :raises ControllerError: an unknown site (the message lists the valid ones), or no site at all.
    """
    known = list(context.sites)
    if names is None:
        if not known:
            raise ControllerError(f"{controller}: the scenario has no datacenter site to control")
        return known
    unknown = [n for n in names if n not in context.sites]
    if unknown:
        raise ControllerError(f"{controller}: unknown sites {unknown}; valid sites: {known}")
    return list(names)


def site_models(context: ControlContext, sites: Sequence[str]) -> list[tuple[str, str]]:
    """``(site, model)`` of every model served at ``sites``, sites in the given order."""
    return [(s, m) for s in sites for m in context.sites[s].models]


def model_actuators(kind: str, keys: Iterable[tuple[str, str]]) -> tuple[Actuator, ...]:
    """The ``kind`` setting (``"batch_size"``, ``"replicas"``...) of each ``(site, model)`` in ``keys``."""
    return tuple(Actuator(kind, key) for key in keys)


def phase_share(state: DatacenterState | None) -> np.ndarray:
    """Fraction of the site's active power on phases a, b, c (equal shares when it draws none)."""
    if state is not None:
        p = np.asarray(state.p_w, dtype=float)
        total = float(p.sum())
        if state.online and total > 0.0 and np.all(p >= 0.0):
            return p / total
    return np.full(3, 1.0 / 3.0)


def active_replicas(state: DatacenterState | None, model: str, default: float) -> float:
    """Active replicas of ``model`` in ``state`` (``default`` when the state does not report it)."""
    if state is None or model not in state.models:
        return float(default)
    n = float(state.models[model].replicas)
    return n if np.isfinite(n) and n >= 0.0 else float(default)
