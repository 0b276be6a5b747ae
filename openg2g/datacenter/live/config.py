"""A live site's configuration: ``datacenters[*]`` with ``kind: live`` in a scenario.

A live site is a replay site's description (:class:`~openg2g.datacenter.config.SiteSpec`: bus,
facility, the models with their simulated replicas and the trace library whose measured means
controllers plan with) plus, per model, the real servers that serve it (``endpoints``), where its
GPUs' power is read (``power``) and the requests sent to the servers (``requests``)::

    datacenters:
      - kind: live
        name: dc1
        bus: "671"
        power: {source: nvml}
        models:
          - model: Llama-3.1-8B            # the trace library's profile: what controllers plan with
            served_model: meta-llama/Llama-3.1-8B-Instruct
            gpus_per_replica: 1
            replicas: 720                  # simulated replicas; the endpoints stand for them
            batch_size: 8
            batch_sizes: [8, 16, 32]
            endpoints: [{url: "http://10.0.0.5:8000", gpus: ["0"]}]
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from openg2g.core.config import ConfigModel
from openg2g.datacenter.config import ModelSpec, SiteSpec

__all__ = ["BatchKnobSpec", "EndpointSpec", "LiveModelSpec", "LiveSiteSpec", "PowerSpec", "RequestSpec"]


class EndpointSpec(ConfigModel):
    """One real replica: an OpenAI-compatible server and the GPUs it runs on."""

    url: str = Field(description="The server's base URL, e.g. http://127.0.0.1:8000 (its API is under /v1).")
    gpus: list[str] = Field(
        default_factory=list,
        description="The meter's ids of the GPUs this replica runs on (NVML indices '0', '1' or UUIDs; zeusd "
        "indices; a power file's GPU columns): gpus_per_replica of them, or none with power source profile.",
    )

    @field_validator("url")
    @classmethod
    def _http(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")) or len(v.split("://", 1)[1].strip("/")) == 0:
            raise ValueError(f"need an http:// or https:// URL with a host, got {v!r}")
        return v.rstrip("/")


class BatchKnobSpec(ConfigModel):
    """How a batch-size command reaches the servers."""

    kind: Literal["client", "http"] = Field(
        "client",
        description="client: openg2g keeps exactly batch_size requests in flight per replica (any server); "
        "http: openg2g also POSTs the batch size to the server's own endpoint (path) and keeps the server "
        "saturated, for a server that can change its running-batch limit (the public OpenG2G's patched "
        "vLLM: /set_max_num_seqs?max_num_seqs={batch}).",
    )
    path: str = Field(
        "/set_max_num_seqs?max_num_seqs={batch}",
        description="kind http: the path POSTed, with {batch} replaced by the batch size.",
    )

    @field_validator("path")
    @classmethod
    def _placeholder(cls, v: str) -> str:
        if not v.startswith("/") or "{batch}" not in v:
            raise ValueError(f"need a path starting with / that holds {{batch}}, got {v!r}")
        return v


class LiveModelSpec(ModelSpec):
    """One model served by real servers; ``model`` names the trace library profile controllers
    plan with (its measured means per batch size) and ``replicas`` the simulated replicas the
    real ones stand for."""

    served_model: str | None = Field(
        None, description="The model name the servers serve (their /v1/models); None: the same as model."
    )
    endpoints: list[EndpointSpec] = Field(min_length=1, description="The real replicas, one server each.")
    batch_knob: BatchKnobSpec = Field(default_factory=BatchKnobSpec, description="How batch sizes reach the servers.")

    @property
    def server_model(self) -> str:
        """The name the servers serve."""
        return self.served_model if self.served_model is not None else self.model


class PowerSpec(ConfigModel):
    """Where the site's GPU power comes from."""

    source: Literal["nvml", "zeusd", "file", "profile"] = Field(
        description="nvml: the local GPUs (nvidia-ml-py); zeusd: a zeusd daemon's power stream (the zeus "
        "package); file: a meter's CSV log as it is written; profile: no meter, each replica's power is the "
        "trace library's measured mean at the requests it has in flight (an estimate, not a measurement: "
        "measured_power_w is then empty).",
    )
    url: str | None = Field(None, description="source zeusd: host:port or http://host:port of the daemon.")
    path: str | None = Field(None, description="source file: the CSV log, relative to the scenario file.")
    interval_s: float = Field(0.1, ge=0.01, le=10, description="How often the meter is read (s).")
    stale_s: float = Field(
        5.0, ge=0.1, le=600, description="A GPU without a new sample for this long stops the run (s)."
    )

    @model_validator(mode="after")
    def _keys(self) -> PowerSpec:
        wanted = {"zeusd": "url", "file": "path"}.get(self.source)
        for key in ("url", "path"):
            given = getattr(self, key) is not None
            if given and key != wanted:
                raise ValueError(f"{key} is not for source {self.source}")
            if not given and key == wanted:
                raise ValueError(f"source {self.source} needs {key}")
        return self

    def meter_spec(self) -> dict[str, Any]:
        """The mapping :func:`openg2g.datacenter.live.meters.power_source` takes."""
        keys = {"zeusd": ("url",), "file": ("path",)}.get(self.source, ())
        return {"source": self.source, **{key: getattr(self, key) for key in keys}}


class RequestSpec(ConfigModel):
    """The requests the load generator sends, each one a prompt of the set in turn: a closed loop
    (each replica always has its batch size of them in flight) or random arrivals at a rate, queued
    by openg2g while the batch size are in flight."""

    arrival_rate_per_s: float | None = Field(
        None,
        gt=0,
        le=100_000,
        description="None: a closed loop, a new request as soon as one ends (the servers always run their "
        "batch size). A rate: requests arrive at random (Poisson, seeded) at this mean rate per real replica "
        "(1/s) and wait in openg2g's queue until fewer than the batch size are in flight; one whose stream "
        "is closed by a lower batch goes back to the queue.",
    )

    prompts: str = Field(
        "bundled",
        description="bundled (openg2g's own short prompts) or a text file relative to the scenario: one "
        'prompt per line, or a .jsonl file of {"prompt": ...} objects.',
    )
    api: Literal["chat", "completions"] = Field(
        "chat", description="The OpenAI API used: /v1/chat/completions or /v1/completions."
    )
    max_tokens: int = Field(128, ge=1, le=100_000, description="Output tokens asked per request.")
    timeout_s: float = Field(
        30.0, ge=1, le=3600, description="A request with no streamed chunk for this long stops the run (s)."
    )
    warmup_s: float = Field(
        120.0, ge=1, le=3600, description="How long each server may take to stream its first token (s)."
    )


class LiveSiteSpec(SiteSpec):
    """A datacenter site whose models run on real inference servers, measured as the run goes."""

    kind: Literal["live"] = Field(description="live: real servers and meters (this spec).")  # type: ignore[assignment]
    models: list[LiveModelSpec] = Field(min_length=1)  # type: ignore[assignment]
    power: PowerSpec = Field(description="Where the GPUs' power is read.")
    requests: RequestSpec = Field(default_factory=RequestSpec, description="The load sent to the servers.")
    stagger_s: float = Field(
        10.0,
        ge=0,
        le=600,
        description="Simulated replicas replay their real replica's measured power from a delay drawn in "
        "[0, stagger_s) (s, seeded), so that they do not all step at once.",
    )
    max_lag_s: float = Field(
        5.0,
        gt=0,
        le=60,
        description="How far the run may fall behind the wall clock before it stops (s): it catches up after a "
        "pause (the first solves, a garbage collection), and stops when it cannot.",
    )

    @model_validator(mode="after")
    def _live_only(self) -> LiveSiteSpec:
        for name in ("training", "ride_through", "template_s"):
            if getattr(self, name) is not None:
                raise ValueError(f"{name} is for a replay site; a live site measures its servers")
        measured = self.power.source != "profile"
        for i, m in enumerate(self.models):
            for j, endpoint in enumerate(m.endpoints):
                n = len(endpoint.gpus)
                if measured and n != m.gpus_per_replica:
                    raise ValueError(
                        f"models.{i}.endpoints.{j}.gpus: power source {self.power.source} needs the "
                        f"{m.gpus_per_replica} GPU id(s) of this replica, got {n}"
                    )
            if m.replicas < len(m.endpoints):
                raise ValueError(
                    f"models.{i}.replicas: {m.replicas} simulated replicas cannot stand on "
                    f"{len(m.endpoints)} real ones (at least one each)"
                )
        gpus = [g for m in self.models for e in m.endpoints for g in e.gpus]
        shared = sorted({g for g in gpus if gpus.count(g) > 1})
        if shared:
            raise ValueError(f"GPUs given to more than one endpoint: {shared} (each real replica has its own GPUs)")
        return self
