"""Reading a study file: validated against its model and checked against its base scenario.

This module sits above both the study models (:mod:`openg2g.studies.spec`, plain data) and the
studies that check a file against its base scenario (:mod:`openg2g.studies.pv_placement`,
:mod:`openg2g.studies.load_loss`), so neither of those imports the other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from openg2g.scenario.loader import resolve_scenario_path
from openg2g.studies import load_loss
from openg2g.studies.common import BaseScenario, read_base
from openg2g.studies.pv_placement import check_study
from openg2g.studies.spec import STUDY_KINDS, LoadLossSpec, PVPlacementSpec, PVShape, StudySpec
from openg2g.sweep.spec import SweepError, read_yaml_mapping, resolve_base, validate_model

__all__ = ["LoadedStudy", "load_study"]


@dataclass(frozen=True)
class LoadedStudy:
    """A validated study file and its base scenario read as data."""

    spec: StudySpec
    path: Path
    base: BaseScenario


def load_study(path: str | Path, kind: type[StudySpec] | None = None, overrides: Sequence[str] = ()) -> LoadedStudy:
    """Read and validate a study file, of the given kind or of the kind its ``study:`` names.

    A PV placement study's ``pv_shape.csv`` becomes an absolute path, and the study is checked
    against its base scenario (buses on the feeder, enough grid steps); a load-loss study too
    (:func:`openg2g.studies.load_loss.check_study`: sites, disturbances, frequency, run length).

    :param overrides: ``dotted.key=value`` assignments (``openg2g study ... --set``) applied to
        the base scenario after the file's ``set``, in every run.
    :raises SweepError: with every problem, each naming file, field path and reason.
    """
    path = resolve_scenario_path(path, "study", SweepError)
    data = read_yaml_mapping(path, "study")
    names = {model: name for name, model in STUDY_KINDS.items()}
    if kind is None:
        kind = STUDY_KINDS.get(str(data.get("study")))
        if kind is None:
            raise SweepError(
                [(f"{path}: study", f"unknown study {data.get('study')!r}; valid: {', '.join(STUDY_KINDS)}")]
            )
    elif data.get("study") != names[kind]:
        raise SweepError([(f"{path}: study", f"expected 'study: {names[kind]}', got {data.get('study')!r}")])
    spec = validate_model(kind, data, path)
    base_path = resolve_base(spec.base, path.resolve().parent, path)
    base = read_base(base_path, [*spec.set, *overrides])
    if isinstance(spec, PVPlacementSpec):
        spec = _resolved_pv_study(spec, path, base)
    if isinstance(spec, LoadLossSpec):
        problems = load_loss.check_study(spec, base)
        if problems:
            raise SweepError([(f"{path}: {field}", message) for field, message in problems])
    return LoadedStudy(spec, path, base)


def _resolved_pv_study(spec: PVPlacementSpec, path: Path, base: BaseScenario) -> PVPlacementSpec:
    """``spec`` with its CSV path made absolute, after reading the CSV and checking the study
    against its base scenario (:func:`~openg2g.studies.pv_placement.check_study`)."""
    if spec.pv_shape.csv is not None:
        shape = PVShape.model_validate({"csv": str((path.resolve().parent / spec.pv_shape.csv).resolve())})
        shape.availability(np.zeros(1), f"{path}: pv_shape.csv")
        spec = spec.model_copy(update={"pv_shape": shape})
    problems = check_study(spec, base)
    if problems:
        raise SweepError([(f"{path}: {field}", message) for field, message in problems])
    return spec
