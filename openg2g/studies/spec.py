"""Study files: frozen pydantic models, unknown keys rejected, errors naming file and field.

A siting study (``openg2g study siting FILE``)::

    study: siting
    name: ieee13_siting
    base: ieee13_none                # scenario path (relative to this file) or bundled name
    set: [duration_s=120]            # overrides applied to every run
    candidates: ["671", "675", "692", "633", "680"]   # or three_phase
    pairs: true                      # also every pair of candidates (the site split in halves)
    controllers: [none, ofo]

A hosting-capacity study (``openg2g study hosting-capacity FILE``; command-line options
override the file)::

    study: hosting_capacity
    name: ieee13_hosting
    base: ieee13_none
    buses: three_phase
    controllers: [none, ofo]
    tolerance_pu_s: 0.0
    duration_s: 60
    max_mw: 30
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from openg2g.studies.common import BaseScenario, read_base
from openg2g.sweep.spec import SweepError, read_yaml_mapping, resolve_base, validate_model

__all__ = ["HostingSpec", "LoadedStudy", "SitingSpec", "load_study"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _StudyBase(_Model):
    name: str
    description: str = ""
    base: str = Field(description="Base scenario: path relative to the study file, or a bundled scenario name.")
    set: list[str] = Field(default_factory=list, description="dotted.key=value overrides applied to every run first.")
    site: str | None = Field(None, description="Name of the base scenario's site to place or scale; None = the first.")
    controllers: list[str] = Field(["none"], min_length=1, description="Controller choices; none = no controller.")
    retries: int = Field(1, ge=0, description="Re-attempts of a run whose worker process died.")

    @field_validator("set")
    @classmethod
    def _assignments(cls, v: list[str]) -> list[str]:
        for item in v:
            if "=" not in item:
                raise ValueError(f"{item!r}: expected dotted.key=value")
        return v


class SitingSpec(_StudyBase):
    """Compare candidate buses (and pairs of buses) for a datacenter site."""

    study: Literal["siting"]
    candidates: list[str] | Literal["three_phase"] = Field(
        "three_phase", description="Candidate buses, or three_phase for every three-phase bus off the source side."
    )
    singles: bool = Field(True, description="Place the whole site on each candidate bus.")
    pairs: bool = Field(False, description="Also split the site in two halves on every pair of candidates.")
    duration_s: float | None = Field(None, gt=0, description="Run duration (s); None keeps the scenario's.")

    @field_validator("candidates")
    @classmethod
    def _candidates(cls, v: list[str] | str) -> list[str] | str:
        if isinstance(v, list):
            if not v:
                raise ValueError("give at least one candidate bus")
            dup = {b for b in v if v.count(b) > 1}
            if dup:
                raise ValueError(f"candidate listed twice: {sorted(dup)}")
        return v


class HostingSpec(_StudyBase):
    """Largest hosted datacenter per bus (see :mod:`openg2g.studies.hosting`)."""

    study: Literal["hosting_capacity"]
    controllers: list[str] = Field(["none", "ofo"], min_length=1)
    buses: list[str] | Literal["three_phase"] = Field("three_phase", description="Buses to study.")
    tolerance_pu_s: float = Field(0.0, ge=0, description="Largest violation integral that counts as hosted (pu.s).")
    duration_s: float = Field(60.0, gt=0, description="Run duration (s).")
    max_mw: float = Field(30.0, gt=0, description="Largest site considered (MW peak).")
    mix: dict[str, int] | None = Field(
        None, description="Replicas per block by model (a finer block); None = the site's counts over their gcd."
    )


@dataclass(frozen=True)
class LoadedStudy:
    """A validated study file and its base scenario read as data."""

    spec: SitingSpec | HostingSpec
    path: Path
    base: BaseScenario


def load_study(path: str | Path, kind: type[SitingSpec | HostingSpec]) -> LoadedStudy:
    """Read and validate a study file of the given kind.

    :raises SweepError: with every problem, each naming file, field path and reason.
    """
    path = Path(path)
    data = read_yaml_mapping(path, "study")
    expected = "siting" if kind is SitingSpec else "hosting_capacity"
    if data.get("study") != expected:
        raise SweepError([(f"{path}: study", f"expected 'study: {expected}', got {data.get('study')!r}")])
    spec = validate_model(kind, data, path)
    base_path = resolve_base(spec.base, path.resolve().parent, path)
    return LoadedStudy(spec, path, read_base(base_path, spec.set))
