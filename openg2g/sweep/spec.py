"""The sweep file format: a base scenario and the parameters to vary.

A sweep file is YAML whose top level is :class:`SweepSpec`::

    name: ieee13_load_scale
    base: ieee13_none              # scenario path (relative to this file) or bundled name
    set: [duration_s=60]           # overrides applied to every run
    parameters:                    # blocks, combined as a Cartesian product (last varies fastest)
      - product:                   # every combination of these lists
          grid.load_scale: [0.9, 1.0, 1.1]
          seed: [0, 1]
      - zip:                       # these lists side by side (equal lengths)
          datacenters.0.bus: ["671", "675"]
          datacenters.0.name: [dc671, dc675]
      - random:                    # n joint samples from a seeded generator
          n: 8
          seed: 42
          params:
            grid.load_scale: {uniform: [0.8, 1.2]}
            periods.control_s: {log_uniform: [0.5, 8]}
            datacenters.0.models.0.replicas: {choice: [2, 4, 8]}

Parameter names are the dotted keys of ``openg2g run --set`` (list items by index); values are
written into the scenario exactly as given (strings stay strings, ``"671"`` is not ``671``).
"""

from __future__ import annotations

import datetime
import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, Field, ValidationError, field_validator, model_validator

from openg2g.core.config import ConfigModel, field_path
from openg2g.core.errors import ScenarioError
from openg2g.core.limits import MAX_RETRIES
from openg2g.scenario import loader
from openg2g.scenario.loader import resolve_scenario_path

__all__ = [
    "MAX_RUNS",
    "Distribution",
    "LoadedSweep",
    "Overrides",
    "ParameterBlock",
    "RandomBlock",
    "SweepError",
    "SweepSpec",
    "load_sweep",
    "read_yaml_mapping",
    "resolve_base",
]


class SweepError(ScenarioError):
    """A sweep or study file is malformed; ``problems`` lists ``(file: field, reason)`` pairs."""


MAX_RUNS = 100_000
"""Most runs one sweep may expand to (checked before anything is expanded)."""


def _plain(value: Any, where: str) -> None:
    """Refuse a value that cannot be written into a scenario (a YAML date or time, a binary blob)."""
    if isinstance(value, dict):
        for k, v in value.items():
            _plain(k, where)
            _plain(v, where)
    elif isinstance(value, list):
        for v in value:
            _plain(v, where)
    elif value is not None and not isinstance(value, (str, int, float)):
        hint = "; quote it to use the text" if isinstance(value, (datetime.date, datetime.datetime)) else ""
        raise ValueError(f"{where}: {value!r} is a YAML {type(value).__name__}, not a scenario value{hint}")


def _check_key(key: str) -> str:
    if not key or any(not part.strip() for part in key.split(".")) or "=" in key:
        raise ValueError(f"{key!r} is not a dotted scenario key (e.g. grid.load_scale, datacenters.0.bus)")
    return key


def _check_assignments(v: list[str]) -> list[str]:
    for item in v:
        key, sep, _ = item.partition("=")
        if not sep:
            raise ValueError(f"{item!r}: expected dotted.key=value")
        _check_key(key)
    return v


Overrides = Annotated[list[str], AfterValidator(_check_assignments)]
"""``dotted.key=value`` overrides of a base scenario (sweeps, studies, benchmark suites)."""


class Distribution(ConfigModel):
    """One random parameter: exactly one of ``uniform``, ``log_uniform`` or ``choice``."""

    uniform: tuple[float, float] | None = Field(None, description="[low, high): uniform real.")
    log_uniform: tuple[float, float] | None = Field(
        None, description="[low, high): real whose logarithm is uniform; both bounds > 0."
    )
    choice: list[Any] | None = Field(None, min_length=1, description="Equally likely values.")

    @field_validator("choice")
    @classmethod
    def _plain_choices(cls, v: list[Any] | None) -> list[Any] | None:
        _plain(v, "choice")
        return v

    @model_validator(mode="after")
    def _exactly_one(self) -> Distribution:
        given = [k for k in ("uniform", "log_uniform", "choice") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of uniform, log_uniform, choice (got {given or 'none'})")
        for kind in ("uniform", "log_uniform"):
            bounds = getattr(self, kind)
            if bounds is None:
                continue
            lo, hi = bounds
            if not (math.isfinite(lo) and math.isfinite(hi)) or not lo < hi:
                raise ValueError(f"{kind}: need finite low < high, got [{lo}, {hi}]")
            if kind == "log_uniform" and lo <= 0:
                raise ValueError(f"log_uniform: bounds must be > 0, got [{lo}, {hi}]")
        return self


class RandomBlock(ConfigModel):
    """``n`` joint samples of the listed parameters, drawn by ``numpy.random.default_rng(seed)``.

    Samples are drawn sample by sample, parameters in the order listed.
    """

    n: int = Field(gt=0, description="Number of samples.")
    seed: int = Field(ge=0, description="Seed of the sampling generator (not the scenario's seed).")
    params: dict[str, Distribution] = Field(min_length=1, description="Dotted key -> distribution.")

    @field_validator("params")
    @classmethod
    def _keys(cls, v: dict[str, Distribution]) -> dict[str, Distribution]:
        for key in v:
            _check_key(key)
        return v


class ParameterBlock(ConfigModel):
    """One block of parameter points: exactly one of ``product``, ``zip`` or ``random``."""

    product: dict[str, list[Any]] | None = Field(None, description="Dotted key -> values; every combination.")
    zip: dict[str, list[Any]] | None = Field(
        None, description="Dotted key -> values; lists of equal length, side by side."
    )
    random: RandomBlock | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> ParameterBlock:
        given = [k for k in ("product", "zip", "random") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"a block has exactly one of product, zip, random (got {given or 'none'})")
        lists = self.product if self.product is not None else self.zip
        if lists is not None:
            if not lists:
                raise ValueError(f"{given[0]}: no parameters")
            for key, values in lists.items():
                _check_key(key)
                if not values:
                    raise ValueError(f"{given[0]}: {key}: empty list of values")
                _plain(values, f"{given[0]}: {key}")
            if self.zip is not None:
                lengths = {k: len(v) for k, v in self.zip.items()}
                if len(set(lengths.values())) > 1:
                    raise ValueError(f"zip: lists must have equal lengths, got {lengths}")
        return self

    def n_points(self) -> int:
        """How many points the block gives, without expanding it."""
        if self.random is not None:
            return self.random.n
        if self.zip is not None:
            return len(next(iter(self.zip.values())))
        assert self.product is not None
        return math.prod(len(v) for v in self.product.values())

    def parameter_keys(self) -> list[str]:
        """The dotted keys this block sets."""
        if self.random is not None:
            return list(self.random.params)
        return list((self.product if self.product is not None else self.zip) or {})


class SweepSpec(ConfigModel):
    """A sweep: a base scenario, overrides for every run, and the parameter blocks to vary."""

    name: str
    description: str = ""
    base: str = Field(description="Base scenario: path relative to the sweep file, or a bundled scenario name.")
    set: Overrides = Field(default_factory=list, description="dotted.key=value overrides applied to every run first.")
    parameters: list[ParameterBlock] = Field(min_length=1, description="Blocks combined as a Cartesian product.")
    retries: int = Field(
        1, ge=0, le=MAX_RETRIES, description="Re-attempts of a run whose worker process died or was lost."
    )
    plots: bool = Field(False, description="Let each run write its PNG plots (slow; off by default).")

    @model_validator(mode="after")
    def _bounded(self) -> SweepSpec:
        n = self.n_runs()
        if n > MAX_RUNS:
            sizes = " x ".join(str(b.n_points()) for b in self.parameters)
            raise ValueError(
                f"parameters: the blocks give {sizes} = {n:,} runs, more than the {MAX_RUNS:,} one sweep may have; "
                "split the sweep or sample it with a random block"
            )
        return self

    def n_runs(self) -> int:
        """How many runs the sweep expands to (the product of its blocks' sizes), without expanding it."""
        return math.prod(b.n_points() for b in self.parameters)

    @model_validator(mode="after")
    def _disjoint(self) -> SweepSpec:
        seen: dict[str, int] = {}
        for i, block in enumerate(self.parameters):
            for key in block.parameter_keys():
                if key in seen:
                    raise ValueError(f"parameter {key!r} is set by blocks {seen[key]} and {i}; set it once")
                seen[key] = i
        return self

    def parameter_names(self) -> list[str]:
        """Every varied key, in block order."""
        return [k for block in self.parameters for k in block.parameter_keys()]


def read_yaml_mapping(path: Path, kind: str) -> dict[str, Any]:
    """Read a YAML file that must hold a mapping; errors (as :class:`SweepError`) name the file and line."""
    return loader.read_yaml_mapping(path, kind, SweepError)


def validate_model(model: type[BaseModel], data: dict[str, Any], path: Path) -> Any:
    """Validate ``data`` against ``model``; every problem is reported as ``file: field: reason``."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise SweepError([(f"{path}: {field_path(e['loc'])}", e["msg"]) for e in exc.errors()]) from None


def resolve_base(base: str, relative_to: Path, source: Path) -> Path:
    """A base scenario path relative to ``relative_to``, else as given, else a bundled name."""
    candidate = relative_to / base
    if candidate.is_file():
        return candidate.resolve()
    try:
        return resolve_scenario_path(base).resolve()
    except ScenarioError:
        raise SweepError(
            [(f"{source}: base", f"{base!r}: no such scenario file (relative to {relative_to}) nor bundled scenario")]
        ) from None


@dataclass(frozen=True)
class LoadedSweep:
    """A validated sweep file.

    :param spec: the validated model.
    :param path: the file it was read from.
    :param base_path: absolute path of the base scenario file.
    :param base_sha256: hash of the base scenario file's bytes (part of every run's fingerprint).
    """

    spec: SweepSpec
    path: Path
    base_path: Path
    base_sha256: str


def load_sweep(path: str | Path, overrides: Sequence[str] = ()) -> LoadedSweep:
    """Read and validate a sweep file.

    :param overrides: ``dotted.key=value`` assignments (``openg2g sweep --set``) added to the
        file's ``set``: applied to the base scenario of every run, before the varied parameters.
    :raises SweepError: with every problem found, each naming file, field path and reason; the
        fixed overrides are applied to the base scenario's data here, so a bad one is refused
        before any run.
    """
    path = resolve_scenario_path(path, "sweep", SweepError)
    data = read_yaml_mapping(path, "sweep")
    if overrides:
        given = data.get("set")
        data["set"] = [*(given if isinstance(given, list) else [given] if given is not None else []), *overrides]
    spec: SweepSpec = validate_model(SweepSpec, data, path)
    base_path = resolve_base(spec.base, path.resolve().parent, path)
    base_data = read_yaml_mapping(base_path, "base scenario")
    for assignment in spec.set:
        loader.apply_override(base_data, assignment, f"{path}: set")
    return LoadedSweep(spec, path, base_path, hashlib.sha256(base_path.read_bytes()).hexdigest())
