"""The scenario file format: frozen pydantic models, unknown keys rejected, units in field names.

A scenario file is YAML whose top level is :class:`Scenario`. The components own their parts
(:mod:`openg2g.grid.config` the ``grid`` block, :mod:`openg2g.datacenter.config` the
``datacenters`` list); this module composes them with the timing, controllers, events and
outputs. :mod:`openg2g.scenario.loader` parses a file into it, and :mod:`openg2g.scenario.build`
adds the checks that need the feeder, the trace library and the controllers (buses, models,
batch sizes, controller parameters). ``openg2g schema`` prints this reference as Markdown.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Annotated, Any, Literal

from pydantic import (
    ConfigDict,
    Discriminator,
    Field,
    SerializerFunctionWrapHandler,
    Tag,
    field_validator,
    model_serializer,
    model_validator,
)

from openg2g.control.config import ControllerSpec
from openg2g.core.commands import COMMANDS, renamed_fields
from openg2g.core.config import ConfigModel, Name, Seconds, check_run_time, parse_seconds
from openg2g.core.limits import MAX_DURATION_S
from openg2g.datacenter.config import (
    LIVE_TAG,
    PLUGIN_TAG,
    REPLAY_TAG,
    ModelSpec,
    PluginSiteSpec,
    SiteSpec,
    TrainingSpec,
    site_kind,
)
from openg2g.datacenter.live.config import LiveSiteSpec
from openg2g.engine.periods import Periods
from openg2g.grid.config import MAX_TAP_STEPS, ExtraLoadSpec, GridSpec, PVSpec, RegulatorSpec, StorageSpec
from openg2g.scenario.disturbances import DisturbanceSpec

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


class EventSpec(ConfigModel):
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
        return check_run_time(v, zero_ok=True, later=True)

    @model_validator(mode="after")
    def _renamed(self) -> EventSpec:
        command = COMMANDS.get(self.command)
        old = renamed_fields(command, self.fields()) if command is not None else ""
        if old:
            raise ValueError(f"{self.command}: {old}")
        return self

    def fields(self) -> dict[str, Any]:
        """The command's own fields (everything but ``t_s`` and ``command``)."""
        return dict(self.model_extra or {})


class OutputSpec(ConfigModel):
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
    plots: bool = Field(
        True,
        description="Write PNG plots at the end of the run, each when the run has its data (summary.json: plots).",
    )
    flush_every_s: float = Field(
        60.0,
        gt=0,
        le=MAX_DURATION_S,
        description="Simulated seconds between writes of output parts (results do not depend on it).",
    )
    metrics_start_s: Seconds = Field(
        Fraction(0),
        description=(
            "First grid time (s) counted in summary.json's voltage and branch figures (violation "
            "integrals, time in violation, Vmin/Vmax, loading, overload integral), e.g. a settling "
            "window for controllers; the tables keep every step. 0: the whole run."
        ),
    )

    @field_validator("metrics_start_s")
    @classmethod
    def _start(cls, v: Fraction) -> Fraction:
        return check_run_time(v, zero_ok=True, later=True)


class Scenario(ConfigModel):
    """A complete co-simulation: feeder, datacenters, controllers, events, timing and outputs."""

    name: Name = Field(description="Run name (default output folder runs/<name>).")
    description: str = Field("", description="Free text.")
    seed: int = Field(0, ge=0, description="Seed of every random draw (trace offsets, ITL samples).")
    duration_s: Seconds = Field(description="Simulated time (s).")
    periods: Periods = Field(default_factory=Periods, description="Component periods.")
    grid: GridSpec = Field(description="Feeder and its options.")
    datacenters: list[
        Annotated[
            Annotated[SiteSpec, Tag(REPLAY_TAG)]
            | Annotated[LiveSiteSpec, Tag(LIVE_TAG)]
            | Annotated[PluginSiteSpec, Tag(PLUGIN_TAG)],
            Discriminator(site_kind),
        ]
    ] = Field(
        default_factory=list,
        description="Datacenter sites: replaying measured traces (kind: replay, the default), real inference "
        "servers measured live (kind: live) or a plug-in backend.",
    )
    controllers: list[ControllerSpec] = Field(default_factory=list, description="Controllers, run in this order.")
    events: list[EventSpec] = Field(default_factory=list, description="Commands fired at fixed times.")
    disturbances: DisturbanceSpec | None = Field(
        None,
        description=(
            "Faults (with reclosing), line trips and source sags, and the finer time steps around them "
            "(openg2g.scenario.disturbances); None: none."
        ),
    )
    outputs: OutputSpec = Field(default_factory=OutputSpec, description="What the run writes.")

    @field_validator("duration_s")
    @classmethod
    def _duration(cls, v: Fraction) -> Fraction:
        return check_run_time(v, zero_ok=False)

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # a scenario without disturbances dumps (and hashes) as it did before they existed
        data: dict[str, Any] = handler(self)
        if self.disturbances is None:
            data.pop("disturbances", None)
        return data

    @model_validator(mode="before")
    @classmethod
    def _load_convention(cls, data: Any) -> Any:
        # grid.load_convention opendss: every site, PV and extra load an OpenDSS model-1 load
        grid = data.get("grid") if isinstance(data, dict) else None
        if not isinstance(grid, dict) or grid.get("load_convention") != "opendss":
            return data
        parts = {"datacenters": data.get("datacenters")} | {f"grid.{k}": grid.get(k) for k in ("pv", "extra_loads")}
        out = {**data, "grid": dict(grid)}
        for path, items in parts.items():
            if not isinstance(items, list):
                continue
            converted = []
            for i, item in enumerate(items):
                if isinstance(item, dict):
                    if item.get("load_model", "opendss") != "opendss":
                        raise ValueError(
                            f"{path}.{i}.load_model is {item['load_model']!r}, but grid.load_convention opendss "
                            "makes every site, PV and extra load an OpenDSS model-1 load: remove one of the two"
                        )
                    item = {**item, "load_model": "opendss"}
                converted.append(item)
            if path == "datacenters":
                out["datacenters"] = converted
            else:
                out["grid"][path.removeprefix("grid.")] = converted
        return out

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
        if self.outputs.metrics_start_s >= self.duration_s:
            raise ValueError(
                f"outputs.metrics_start_s ({self.outputs.metrics_start_s}) must be before the end of the run "
                f"(duration_s {self.duration_s}): no grid step would be counted"
            )
        if self.disturbances is not None:
            step = self.disturbances.window.step_s
            for period in ("datacenter_s", "grid_s"):
                value = getattr(self.periods, period)
                if value % step:
                    raise ValueError(
                        f"periods.{period} ({value} s) must be a whole multiple of disturbances.window.step_s "
                        f"({step} s): the steps inside a window subdivide the regular ones"
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
