"""A datacenter site's configuration: its bus, facility, models served and training job.

Read from a scenario's ``datacenters`` list (:mod:`openg2g.scenario.schema` composes it) and
taken by :class:`openg2g.datacenter.replay.ReplayDatacenter`.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field, SerializerFunctionWrapHandler, field_validator, model_serializer, model_validator

from openg2g.core.config import HIDDEN_TAG, MAX_KW, ConfigModel, Name, PowerFactor, VoltageDependence
from openg2g.core.limits import MAX_DURATION_S
from openg2g.datacenter.ridethrough import RideThroughSpec

__all__ = [
    "LIVE_TAG",
    "PLUGIN_TAG",
    "REPLAY_TAG",
    "ModelSpec",
    "PluginSiteSpec",
    "SiteSpec",
    "TrainingSpec",
    "site_kind",
]


class ModelSpec(ConfigModel):
    """One model served at a site."""

    model: Name = Field(description="Model name in the trace library (openg2g traces list).")
    gpus_per_replica: int = Field(gt=0, description="GPUs per replica; must match a measured configuration.")
    replicas: int = Field(ge=0, description="Replica count at the start.")
    batch_size: int = Field(gt=0, description="Initial batch size (a measured max_num_seqs).")
    batch_sizes: list[int] | None = Field(None, description="Batch sizes controllers may set; None = all measured.")
    itl_deadline_s: float | None = Field(None, ge=1e-3, le=60, description="Inter-token latency deadline (s).")


class TrainingSpec(ConfigModel):
    """A training job: a parameterized synthetic model (not a measured trace), see openg2g.datacenter.training.

    The defaults are the public OpenG2G study's job (arXiv 2605.05519, gpu2grid/openg2g 0.2.0
    ``TrainingTraceParams`` and ``TrainingRun``): a 1000 s per-GPU trace of 35-40 s plateaus at
    225 W and 10-15 s at 175 W with 50 W noise, 0.3 s smoothing, rare 120-125 W dips and an 18 s
    start-up ramp from 50 W, rescaled to a 400 W peak (mean 253 W per GPU), all GPUs in lockstep.
    """

    gpus: int = Field(gt=0, le=10_000_000, description="GPUs running the job (reserved in the site's capacity).")
    start_s: float = Field(ge=0, le=MAX_DURATION_S, allow_inf_nan=False, description="Job start (s).")
    end_s: float = Field(
        gt=0,
        le=MAX_DURATION_S,
        allow_inf_nan=False,
        description="Job end (s); the job draws power in [start_s, end_s).",
    )
    high_w_per_gpu: float = Field(
        225.0, gt=0, le=2000, description="Compute plateau level per GPU before the peak rescale (W)."
    )
    low_w_per_gpu: float = Field(
        175.0, ge=0, le=2000, description="Communication plateau level per GPU before the peak rescale (W)."
    )
    high_s: tuple[float, float] = Field(
        (35.0, 40.0), description="Range of compute plateau lengths, drawn uniformly (s)."
    )
    low_s: tuple[float, float] = Field(
        (10.0, 15.0), description="Range of communication plateau lengths, drawn uniformly (s)."
    )
    noise_w: float = Field(
        50.0, ge=0, le=2000, description="Standard deviation of white noise on each 0.1 s sample (W)."
    )
    smoothing_s: float = Field(0.3, ge=0, le=60, description="Moving-average window applied after the noise (s).")
    dips_per_s: float = Field(0.01, ge=0, le=10, description="Rate of brief power dips (1/s, Poisson).")
    dip_depth_w: tuple[float, float] = Field(
        (120.0, 125.0), description="Range of dip depths below the current level (W)."
    )
    dip_s: tuple[float, float] = Field(
        (0.06, 0.14), description="Range of dip lengths (s); dips shorter than 0.05 s vanish."
    )
    ramp_s: float = Field(
        18.0, ge=0, le=3600, description="Start-up ramp: power is capped by a line rising over ramp_s (s)."
    )
    ramp_from_w_per_gpu: float = Field(
        50.0, ge=0, le=2000, description="Start of the ramp line, before the peak rescale (W)."
    )
    peak_w_per_gpu: float | None = Field(
        400.0,
        gt=0,
        le=1000,
        description="Rescale the trace so that its maximum is this (W per GPU); None keeps the levels.",
    )
    trace_s: float = Field(
        1000.0, ge=1, le=86_400, description="Length of the synthesized trace, which then repeats (s)."
    )
    seed: int = Field(2, ge=0, description="Seed of the trace synthesis (2 reproduces the study's trace).")
    sync: Literal["lockstep", "independent"] = Field(
        "lockstep",
        description=(
            "lockstep: every GPU follows the same trace (synchronous data-parallel training); "
            "independent: each 8-GPU server replays it from its own seeded offset."
        ),
    )

    @field_validator("high_s", "low_s", "dip_depth_w", "dip_s")
    @classmethod
    def _range(cls, v: tuple[float, float]) -> tuple[float, float]:
        lo, hi = v
        if not (math.isfinite(lo) and math.isfinite(hi) and 0 <= lo <= hi):
            raise ValueError(f"need a finite range 0 <= low <= high, got [{lo}, {hi}]")
        return v

    @model_validator(mode="after")
    def _window(self) -> TrainingSpec:
        if self.end_s <= self.start_s:
            raise ValueError(f"end_s ({self.end_s}) must be after start_s ({self.start_s})")
        for name in ("high_s", "low_s"):
            if getattr(self, name)[0] < 0.1:
                raise ValueError(f"{name}: plateaus must last at least one 0.1 s sample, got {getattr(self, name)}")
        return self


ITL_SAMPLES = 256
"""Default replicas per model whose ITL is sampled each step (all of them when fewer)."""


class SiteSpec(VoltageDependence):
    """A datacenter site on one three-phase bus, replaying measured traces."""

    kind: Literal["replay"] = Field(
        "replay",
        description="The site's backend: replay (measured traces, this spec), live (real servers: LiveSiteSpec) or "
        "a plug-in's name (PluginSiteSpec).",
    )
    name: Name = Field(description="Site name (commands and outputs use it).")
    bus: Name = Field(description="Feeder bus; it must have phases a, b and c.")
    traces: str = Field("bundled", description="Trace library: 'bundled' or a directory relative to the scenario file.")
    power_factor: PowerFactor = Field(0.95, description="Facility power factor (lagging; at least 0.5).")
    pue: float = Field(1.0, ge=1, le=5, description="Power usage effectiveness: facility power / IT power.")
    base_load_kw_per_phase: float = Field(0.0, ge=0, le=MAX_KW, description="Constant non-GPU load per phase (kW).")
    gpu_capacity: int | None = Field(
        None, gt=0, le=10_000_000, description="GPUs installed; None = exactly those the models use."
    )
    models: list[ModelSpec] = Field(min_length=1)
    training: TrainingSpec | None = None
    itl_samples: int = Field(
        ITL_SAMPLES,
        ge=1,
        le=1_000_000,
        description="Replicas per model whose ITL is sampled each step (all when fewer): fewer make the "
        "reported ITL and throughput noisier and the run faster; deadline misses are analytic, unaffected.",
    )
    itl_statistics: Literal["sampled", "analytic"] = Field(
        "sampled",
        description=(
            "sampled: each step's ITL and throughput from itl_samples replicas' draws of the measured ITL "
            "mixtures, with the noise a fleet's per-second telemetry has (the default: the reference figures "
            "are computed so); analytic: their expected values, no draws: ITL the token-weighted mean of the "
            "blend's configurations (sum of weight x mean ITL), throughput the replicas' expected tokens, the "
            "limit of sampled as itl_samples grows, and faster."
        ),
    )

    layout: Literal["packed", "pool"] = Field(
        "packed",
        description=(
            "How servers (8 GPUs) meet the phases. packed: each model's replicas fill consecutive servers, "
            "models one after another in the order listed, server s on phase 'abc'[s % 3]. pool: the public "
            "OpenG2G study's pool of ceil(gpu_capacity / 8) servers split evenly over a, b, c (the extra ones "
            "on a, then b); the models, in name order, each take the servers for their pool_replicas "
            "round-robin a, b, c, a phase with no free server skipped."
        ),
    )
    pool_replicas: dict[Name, int] | None = Field(
        None,
        description=(
            "layout pool: replicas per model at which the pool's servers are handed out (a model not named: "
            "its configured replicas). The study hands them out anew at every step; a site holds one "
            "layout, so give the counts it runs longest at."
        ),
    )
    whole_servers: bool = Field(
        False,
        description=(
            "Run each model on whole 8-GPU servers, as the study's pool: its replica count (rounded to the "
            "nearest whole) is raised to fill its last server, e.g. 180 replicas of a 1-GPU model run, draw and "
            "serve as 184. Capacity checks still count the commanded replicas."
        ),
    )
    template_s: float | None = Field(
        None,
        ge=1,
        le=86_400,
        allow_inf_nan=False,
        description=(
            "Replay each measured trace as the study's per-GPU template of this length (s; the study: 600): "
            "the trace without its last sample, repeated from its start until round(template_s / 0.1) + 1 "
            "samples, its mean left as it falls. None: the whole trace, closed into a loop that keeps its "
            "measured mean."
        ),
    )
    ride_through: RideThroughSpec | None = Field(
        None,
        description=(
            "How the site rides through voltage and frequency disturbances (its load as blocks with trip "
            "curves, UPS and return; docs/disturbances.md). None: the site draws whatever the grid's voltage, "
            "as before."
        ),
    )

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # a site at the defaults dumps (and hashes) as it did before these fields existed
        data: dict[str, Any] = handler(self)
        for name, default in (
            ("kind", "replay"),
            ("itl_samples", ITL_SAMPLES),
            ("itl_statistics", "sampled"),
            ("layout", "packed"),
            ("pool_replicas", None),
            ("whole_servers", False),
            ("template_s", None),
            ("ride_through", None),
        ):
            if getattr(self, name) == default:
                data.pop(name, None)
        return data

    @model_validator(mode="after")
    def _pool(self) -> SiteSpec:
        if self.pool_replicas is None:
            return self
        if self.layout != "pool":
            raise ValueError(f"pool_replicas is for layout pool, but layout is {self.layout!r}")
        served = {m.model for m in self.models}
        unknown = sorted(set(self.pool_replicas) - served)
        if unknown:
            raise ValueError(
                f"pool_replicas names models the site does not serve: {unknown}; it serves {sorted(served)}"
            )
        negative = {k: v for k, v in self.pool_replicas.items() if v < 0}
        if negative:
            raise ValueError(f"pool_replicas must be >= 0, got {negative}")
        return self

    @model_validator(mode="after")
    def _unique_models(self) -> SiteSpec:
        names = [m.model for m in self.models]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"model listed twice at site {self.name!r}: {sorted(dup)}")
        return self


class PluginSiteSpec(VoltageDependence):
    """A datacenter site whose backend is a plug-in: a class of one's own that implements
    :class:`openg2g.core.interfaces.DatacenterBackend`, built as
    ``cls(name=..., bus=..., power_factor=..., **params)``.

    ``kind`` names it as a controller's ``kind`` does: an entry point of the
    ``openg2g.datacenters`` group, ``package.module:ClassName``, or ``path/to/file.py:ClassName``
    (relative to the scenario file; that file's code runs when the scenario is built).
    """

    kind: str = Field(description="The plug-in: entry-point name, package.module:ClassName or file.py:ClassName.")
    name: Name = Field(description="Site name (commands and outputs use it).")
    bus: Name = Field(description="Feeder bus; it must have phases a, b and c.")
    power_factor: PowerFactor = Field(0.95, description="Facility power factor (lagging; at least 0.5).")
    params: dict[str, Any] = Field(
        default_factory=dict, description="Further keyword arguments of the plug-in's constructor."
    )

    @field_validator("kind")
    @classmethod
    def _not_replay(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("kind must name a plug-in (or be replay, for a site replaying measured traces)")
        return v


REPLAY_TAG = HIDDEN_TAG + "replay"
LIVE_TAG = HIDDEN_TAG + "live"
PLUGIN_TAG = HIDDEN_TAG + "plugin"
"""The union tags of the three site specs (hidden from field paths: :data:`HIDDEN_TAG`)."""


def site_kind(value: Any) -> str:
    """Which spec a ``datacenters`` entry is: :data:`REPLAY_TAG` (no ``kind``, or ``kind: replay``),
    :data:`LIVE_TAG` (``kind: live``: :class:`openg2g.datacenter.live.config.LiveSiteSpec`) or
    :data:`PLUGIN_TAG`."""
    kind = value.get("kind", "replay") if isinstance(value, dict) else getattr(value, "kind", "replay")
    return {"replay": REPLAY_TAG, "live": LIVE_TAG}.get(kind, PLUGIN_TAG)
