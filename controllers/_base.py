"""The bases of every stock controller: its ``Config`` (frozen, unknown keys rejected) and the
controller built from one."""

from __future__ import annotations

from typing import ClassVar

from pydantic import ConfigDict

from openg2g.core.config import ConfigModel
from openg2g.core.errors import ControllerError
from openg2g.core.interfaces import ControlContext, Controller

from ._sites import resolve_sites
from ._voltage import zone_indices

__all__ = ["ConfiguredController", "ControllerConfig"]


class ControllerConfig(ConfigModel):
    """Parameters of a stock controller, read from a scenario's ``controllers[].params``.

    Frozen, and an unknown key is an error (``extra="forbid"``), so a typo in a scenario file is
    reported by the loader instead of being ignored; no number may be infinite or NaN (a weight of
    ``inf`` would turn every cost into ``inf`` or NaN and the controller's choices into noise), and
    no boolean stands for a number (as in every model read from a file, :class:`ConfigModel`).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class ConfiguredController(Controller):
    """A stock controller: built from its nested ``Config``, and at every reset resolving the sites
    it acts on and the zone it watches.

    A ``sites`` field of the ``Config`` (names, or None for every site) becomes ``self._sites`` (checked
    against the context); a ``buses`` field becomes ``self._zone``, the indices of the watched
    bus-phases. Subclasses extend :meth:`reset` for the rest of their state.
    """

    Config: ClassVar[type[ControllerConfig]] = ControllerConfig
    requires: ClassVar[str | None] = None
    """What a scenario must give when the ``Config`` has required fields (the error when ``params``
    are missing); None when the defaults make a working controller."""

    def __init__(self, config: ControllerConfig | None = None) -> None:
        if config is None:
            if self.requires is not None:
                raise ControllerError(f"{self.name} needs {self.requires}")
            config = self.Config()
        self.config = config

    def reset(self, context: ControlContext, seed: int) -> None:
        """Store the context and resolve ``self._sites`` and ``self._zone`` from the ``Config``.

        :raises ControllerError: an unknown site or bus (the message lists the valid ones).
        """
        super().reset(context, seed)
        params = dict(self.config)
        if "sites" in params:
            self._sites = resolve_sites(context, params["sites"], controller=self.name)
        if "buses" in params:
            self._zone = zone_indices(context.bus_phases, params["buses"])
