"""The benchmark suite file: controllers to compare and the cases to compare them on.

A suite file is YAML whose top level is :class:`SuiteSpec`::

    suite: benchmark_ieee
    set: [outputs.plots=false]        # overrides of every run, before a case's own
    controllers:
      - {name: rule_based, kind: rule_based, params: {hold_s: 5}}
      - {name: ofo, kind: ofo, tuned: true}     # a case's <prefix>_ofo.yaml block where there is one
      - {name: rl, scenario: ieee13_rl, cases: [ieee13_tap]}   # that scenario's controllers block
    cases:
      - name: ieee13_tap
        scenario: ieee13_none          # path relative to the suite file, or a bundled name
        set: [duration_s=600]
        variations:                    # sweep parameter blocks (product / zip / random)
          - random: {n: 4, seed: 1, params: {datacenters.0.bus: {choice: ["671", "675"]}}}

Each case group gives its reference case (the scenario with the group's ``set``; ``reference:
false`` leaves it out) and one case per point of its variations, which are the overrides of
``openg2g sweep`` (dotted scenario keys, list items by index). Every case is run once per
controller and once with no controller at all (``none``), the baseline that throughput loss is
measured against. The ``controllers`` block of a case's scenario is always replaced.

:func:`load_suite` checks everything a run would reject before anything runs: the file against
the schema, every scenario, every case (variation values included: a datacenter bus the feeder
lacks is named with its case), and every controller built against each case group it applies to.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from openg2g.core.config import ConfigModel
from openg2g.core.errors import ScenarioError
from openg2g.core.limits import MAX_RETRIES
from openg2g.scenario import loader
from openg2g.sweep.expand import encode_value, expand_parameters, point_overrides
from openg2g.sweep.spec import (
    MAX_RUNS,
    Overrides,
    ParameterBlock,
    SweepError,
    read_yaml_mapping,
    resolve_base,
    validate_model,
)

__all__ = [
    "BASELINE",
    "SCORES",
    "Case",
    "CaseGroup",
    "ControllerChoice",
    "LoadedSuite",
    "SuiteSpec",
    "check_suite",
    "controllers_override",
    "load_suite",
    "select_suite",
]

SCORES: dict[str, str] = {
    "violation_integral_pu_s": "violation integral (pu.s)",
    "violation_time_s": "violation time (s)",
    "throughput_loss_pct": "throughput loss vs no control (%)",
    "itl_deadline_miss_pct": "ITL deadline misses (%)",
    "n_tap_changes": "tap operations",
}
"""Per-run scores of the leaderboard (column -> label); lower is better for each."""

BASELINE = "none"
"""Name of the no-control run of every case (reserved: no controller of a suite may take it)."""

_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"


class ControllerChoice(ConfigModel):
    """One contestant: a stock (or file) controller with parameters, or a scenario's controllers block."""

    name: str = Field(pattern=_NAME, description="Label in the leaderboard and run folders (letters, digits, _.-).")
    kind: str | None = Field(None, description="Controller kind as in a scenario (stock name or file.py:Class).")
    params: dict[str, Any] = Field(default_factory=dict, description="Parameters of ``kind`` (its Config fields).")
    period_s: float | None = Field(None, gt=0, description="Control period of ``kind`` (s); None: the case's.")
    tuned: bool = Field(
        False,
        description="With ``kind``: in a case whose scenario <prefix>_<x>.yaml has a sibling <prefix>_<kind>.yaml, "
        "use that file's controllers block (the parameters tuned for that feeder) instead of ``params``.",
    )
    scenario: str | None = Field(
        None,
        description="Take this scenario's ``controllers`` block (path relative to the suite file, or bundled); "
        "file paths inside the block are read relative to each case's scenario, as if it were written there.",
    )
    cases: list[str] | None = Field(
        None, min_length=1, description="Case groups this controller applies to; None: all of them."
    )

    @model_validator(mode="after")
    def _one_source(self) -> ControllerChoice:
        if (self.kind is None) == (self.scenario is None):
            raise ValueError("give exactly one of kind (with params) or scenario (its controllers block)")
        if self.scenario is not None and (self.params or self.tuned or self.period_s is not None):
            raise ValueError("params, period_s and tuned go with kind, not with scenario")
        if self.name == BASELINE:
            raise ValueError(f"{BASELINE!r} is the no-control baseline every case runs; choose another name")
        return self


class CaseGroup(ConfigModel):
    """A scenario, its reference case and its seeded variations."""

    name: str = Field(pattern=_NAME, description="Group name; cases are <name>-ref and <name>-v<k>.")
    scenario: str = Field(description="Scenario path relative to the suite file, or a bundled scenario name.")
    set: Overrides = Field(default_factory=list, description="dotted.key=value overrides of every case of the group.")
    reference: bool = Field(True, description="Include the scenario as it is (after ``set``) as a case.")
    variations: list[ParameterBlock] = Field(
        default_factory=list, description="Sweep parameter blocks combined as a Cartesian product; each point a case."
    )

    @model_validator(mode="after")
    def _some_case(self) -> CaseGroup:
        if not self.reference and not self.variations:
            raise ValueError("no cases: reference is false and there are no variations")
        return self


class SuiteSpec(ConfigModel):
    """A benchmark: controllers, case groups, and overrides of every run."""

    suite: str = Field(pattern=_NAME, description="Suite name (the default output folder is runs/<suite>).")
    description: str = ""
    set: Overrides = Field(default_factory=list, description="dotted.key=value overrides of every run, applied first.")
    controllers: list[ControllerChoice] = Field(min_length=1, description="The contestants (the baseline is implied).")
    cases: list[CaseGroup] = Field(min_length=1, description="Case groups.")
    retries: int = Field(
        1, ge=0, le=MAX_RETRIES, description="Re-attempts of a run whose worker process died or was lost."
    )

    @model_validator(mode="after")
    def _unique_and_bounded(self) -> SuiteSpec:
        for what, names in (
            ("controllers", [c.name for c in self.controllers]),
            ("cases", [g.name for g in self.cases]),
        ):
            twice = sorted({n for n in names if names.count(n) > 1})
            if twice:
                raise ValueError(f"{what}: names must be unique; repeated: {twice}")
        n_cases = sum(
            int(g.reference) + (math.prod(b.n_points() for b in g.variations) if g.variations else 0)
            for g in self.cases
        )
        if n_cases * (len(self.controllers) + 1) > MAX_RUNS:
            raise ValueError(f"{n_cases:,} cases x {len(self.controllers) + 1} runs is more than {MAX_RUNS:,} runs")
        return self


@dataclass(frozen=True)
class Case:
    """One scenario instance of the suite.

    :param case_id: ``<group>-ref`` or ``<group>-v<k>`` (k from 0, in expansion order).
    :param group: the case group's name.
    :param scenario: absolute path of the scenario file.
    :param scenario_sha256: hash of its bytes.
    :param overrides: the suite's ``set``, the group's ``set``, the variation point's, then ``--set``.
    :param params: the variation point (dotted key -> value); empty for the reference case.
    """

    case_id: str
    group: str
    scenario: Path
    scenario_sha256: str
    overrides: tuple[str, ...]
    params: dict[str, Any]


@dataclass(frozen=True)
class LoadedSuite:
    """A validated suite file with its cases and, per case, each controller's block.

    :param controllers: per case id, controller name -> the ``controllers`` list of that run
        (``none`` is the baseline, an empty list); a controller absent for a case does not apply to it.
    :param sources: per case id and controller name, where its block came from (``params``, a file).
    """

    spec: SuiteSpec
    path: Path
    cases: tuple[Case, ...]
    controllers: dict[str, dict[str, list[dict[str, Any]]]]
    sources: dict[str, dict[str, str]]

    def n_runs(self) -> int:
        """Runs the suite consists of (baselines included)."""
        return sum(len(c) for c in self.controllers.values())


def _scenario_path(name: str, suite: Path, field: str) -> Path:
    try:
        return resolve_base(name, suite.resolve().parent, suite)
    except SweepError:
        raise SweepError(
            [
                (
                    f"{suite}: {field}",
                    f"{name!r}: no such scenario file (relative to the suite file) nor bundled scenario",
                )
            ]
        ) from None


def _controllers_block(path: Path, suite: Path, field: str) -> list[dict[str, Any]]:
    block = read_yaml_mapping(path, "scenario").get("controllers")
    if not isinstance(block, list) or not block:
        raise SweepError([(f"{suite}: {field}", f"{path} has no controllers block to take")])
    return block


def _expand_cases(spec: SuiteSpec, suite: Path, last: Sequence[str]) -> list[Case]:
    cases: list[Case] = []
    for gi, group in enumerate(spec.cases):
        path = _scenario_path(group.scenario, suite, f"cases.{gi}.scenario")
        sha = hashlib.sha256(path.read_bytes()).hexdigest()
        fixed = (*spec.set, *group.set)
        if group.reference:
            cases.append(Case(f"{group.name}-ref", group.name, path, sha, (*fixed, *last), {}))
        if group.variations:
            for k, point in enumerate(expand_parameters(group.variations)):
                overrides = (*fixed, *point_overrides(point), *last)
                cases.append(Case(f"{group.name}-v{k}", group.name, path, sha, overrides, dict(point)))
    return cases


def _choice_block(choice: ControllerChoice, case: Case, suite: Path, index: int) -> tuple[list[dict[str, Any]], str]:
    """The controllers list of ``choice`` in ``case``, and where it came from."""
    if choice.scenario is not None:
        path = _scenario_path(choice.scenario, suite, f"controllers.{index}.scenario")
        return _controllers_block(path, suite, f"controllers.{index}.scenario"), str(path.name)
    assert choice.kind is not None
    if choice.tuned:
        prefix = case.scenario.stem.rsplit("_", 1)[0]
        sibling = case.scenario.parent / f"{prefix}_{choice.kind}.yaml"
        if sibling.is_file():
            return _controllers_block(sibling, suite, f"controllers.{index}.tuned"), sibling.name
    entry: dict[str, Any] = {"kind": choice.kind, "params": dict(choice.params)}
    if choice.period_s is not None:
        entry["period_s"] = choice.period_s
    return [entry], "params"


def controllers_override(block: list[dict[str, Any]]) -> str:
    """The ``controllers=...`` override that replaces a scenario's controllers with ``block``."""
    return f"controllers={encode_value(block)}"


def _check_case(case: Case, controllers: list[dict[str, Any]], suite: Path, where: str) -> None:
    """Load and start ``case`` with ``controllers`` as a run would; problems name the suite, case and field."""
    from openg2g.scenario.preflight import check_start

    overrides = [*case.overrides, controllers_override(controllers)]
    try:
        check_start(loader.load_scenario(case.scenario, overrides))
    except ScenarioError as exc:
        varied = ", ".join(f"{k}={encode_value(v)}" for k, v in case.params.items())
        label = f"{suite}: {where} (case {case.case_id}{': ' + varied if varied else ''})"
        raise SweepError([(f"{label}: {loc}", msg) for loc, msg in exc.problems]) from None


def load_suite(path: str | Path, overrides: Sequence[str] = (), *, check: bool = True) -> LoadedSuite:
    """Read and validate a suite file and expand it into cases and runs.

    :param overrides: ``dotted.key=value`` assignments (``--set``) applied to every case last, after
        the suite's and the group's ``set`` and the variation's values.
    :param check: also run :func:`check_suite`.
    :raises SweepError: every problem found, each naming the suite file and the field (and the
        case and the scenario field for a case the scenario loader rejects).
    """
    path = loader.resolve_scenario_path(path, "benchmark suite", SweepError)
    data = read_yaml_mapping(path, "benchmark suite")
    spec: SuiteSpec = validate_model(SuiteSpec, data, path)
    groups = [g.name for g in spec.cases]
    for i, choice in enumerate(spec.controllers):
        unknown = [c for c in choice.cases or [] if c not in groups]
        if unknown:
            raise SweepError([(f"{path}: controllers.{i}.cases", f"{unknown} are not case groups; groups: {groups}")])
    cases = _expand_cases(spec, path, overrides)
    controllers: dict[str, dict[str, list[dict[str, Any]]]] = {}
    sources: dict[str, dict[str, str]] = {}
    for case in cases:
        controllers[case.case_id] = {BASELINE: []}
        sources[case.case_id] = {BASELINE: "no control"}
        for i, choice in enumerate(spec.controllers):
            if choice.cases is None or case.group in choice.cases:
                block, source = _choice_block(choice, case, path, i)
                controllers[case.case_id][choice.name] = block
                sources[case.case_id][choice.name] = source
    suite = LoadedSuite(spec, path, tuple(cases), controllers, sources)
    if check:
        check_suite(suite)
    return suite


def check_suite(suite: LoadedSuite) -> None:
    """Load and start every case without control, and every controller on the first case of each
    group it applies to, as the runs will (about half a second each).

    :raises SweepError: the first case or controller a run would reject, naming the suite file,
        the suite's field, the case and the scenario's field.
    """
    groups = [g.name for g in suite.spec.cases]
    first_of_group: set[str] = set()
    for case in suite.cases:
        where = f"cases.{groups.index(case.group)}" + (f".variations (point {case.case_id})" if case.params else "")
        _check_case(case, [], suite.path, where)
        if case.group in first_of_group:
            continue
        first_of_group.add(case.group)
        for i, choice in enumerate(suite.spec.controllers):
            block = suite.controllers[case.case_id].get(choice.name)
            if block is not None:
                _check_case(case, block, suite.path, f"controllers.{i} ({choice.name})")


def _check_patterns(
    patterns: Sequence[str], candidates: Sequence[str], listed: Sequence[str], option: str, suite: Path
) -> None:
    """Refuse shell-style ``patterns`` that match none of ``candidates`` (the message lists ``listed``)."""
    unmatched = [p for p in patterns if not fnmatch.filter(candidates, p)]
    if unmatched:
        raise SweepError([(f"{suite}: {option} {' '.join(unmatched)}", f"matches nothing; names: {', '.join(listed)}")])


def _matches(name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def select_suite(
    suite: LoadedSuite, cases: Sequence[str] | None = None, controllers: Sequence[str] | None = None
) -> LoadedSuite:
    """The part of ``suite`` to run: some of its cases and some of its controllers (the baseline always).

    :param cases: shell-style patterns of case groups (``ieee13_tap``) or case ids
        (``ieee13_tap-v3``, ``ieee123*``); ``None``: every case.
    :param controllers: shell-style patterns of controller names; ``None``: every controller.
    :raises SweepError: a pattern matches no case or controller (the message lists the names).
    """
    groups = [g.name for g in suite.spec.cases]
    names = [c.name for c in suite.spec.controllers]
    kept_cases = suite.cases
    if cases is not None:
        _check_patterns(cases, [*groups, *(c.case_id for c in suite.cases)], groups, "--cases", suite.path)
        kept_cases = tuple(c for c in suite.cases if _matches(c.group, cases) or _matches(c.case_id, cases))
    kept_names = names
    if controllers is not None:
        _check_patterns(controllers, names, names, "--controllers", suite.path)
        kept_names = [n for n in names if _matches(n, controllers)]
    kept_groups = {c.group for c in kept_cases}
    spec = suite.spec.model_copy(
        update={
            "controllers": [c for c in suite.spec.controllers if c.name in kept_names],
            "cases": [g for g in suite.spec.cases if g.name in kept_groups],
        }
    )
    keep = {BASELINE, *kept_names}
    return dataclasses.replace(
        suite,
        spec=spec,
        cases=kept_cases,
        controllers={
            c.case_id: {n: b for n, b in suite.controllers[c.case_id].items() if n in keep} for c in kept_cases
        },
        sources={c.case_id: {n: s for n, s in suite.sources[c.case_id].items() if n in keep} for c in kept_cases},
    )
