"""``openg2g validate FILE...``: check scenario, sweep and study files without running them (exit 2 on problems).

A scenario is checked as ``openg2g run`` would check it and more: the schema, the feeder and the
trace library, then its components are built and started (controllers check their parameters
against the feeder, the sites and the trace library) and every event is fired on them, so an
event that would be rejected mid-run is reported now. A valid scenario's sites are listed with
their GPUs and their peak power, estimated from the traces' per-batch peaks. A sweep file (``parameters:``) is checked
with its first run in full (base scenario, fixed overrides, first point) and its size bounded;
the other points are checked as they run. A study file (``study:``) is checked with its base
scenario under the study's overrides (a load-loss study with each of its ride-through settings).
A benchmark suite (``suite:``) is checked as ``openg2g benchmark`` checks it before running: every
case, and every controller on the first case of each group it applies to. ``--set`` applies to the scenario, or to a sweep's or study's base scenario,
or to every case of a suite (last).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import Any

from openg2g.cli.run import SCENARIO_IS_CODE, site_lines
from openg2g.core.errors import ScenarioError

__all__ = ["data_kind", "file_kind", "register"]


def file_kind(name: str) -> str:
    """The kind of the file ``name`` (:func:`data_kind`).

    ``name`` is a path or a bundled file's name (``benchmark_ieee``), resolved as every command
    resolves it. A name that resolves to nothing, or an unreadable file, counts as a scenario (the
    scenario loader then says what is wrong with it).
    """
    from openg2g.scenario.loader import read_yaml_mapping, resolve_scenario_path

    try:
        data = read_yaml_mapping(resolve_scenario_path(name))
    except ScenarioError:
        return "scenario"
    return data_kind(data)


def data_kind(data: Mapping[str, Any]) -> str:
    """``sweep`` (a ``parameters:`` section), ``study`` (a ``study:`` key), ``suite`` (a benchmark
    suite: a ``suite:`` or ``cases:`` key) or ``scenario``, of a file's top-level mapping."""
    if "study" in data:
        return "study"
    if "suite" in data or "cases" in data:
        return "suite"
    if "parameters" in data and "base" in data:
        return "sweep"
    return "scenario"


def _scenario(name: str, overrides: list[str]) -> str:
    from openg2g.scenario.loader import load_scenario
    from openg2g.scenario.preflight import check_start

    loaded = load_scenario(name, overrides)
    check_start(loaded)
    ok = f"{loaded.path}: ok ({loaded.scenario.name}, sha256 {loaded.sha256[:12]})"
    return "\n".join([ok, *(f"  {line}" for line in site_lines(loaded))])


def _sweep(name: str, overrides: list[str]) -> str:
    from openg2g.sweep.runner import check_first_run
    from openg2g.sweep.spec import load_sweep

    loaded = load_sweep(name, overrides)
    check_first_run(loaded)
    spec = loaded.spec
    return (
        f"{loaded.path}: ok (sweep {spec.name}: {spec.n_runs()} runs of {loaded.base_path.name}; the first checked "
        "in full, the others are checked as they run)"
    )


def _study(name: str, overrides: list[str]) -> str:
    from openg2g.scenario.loader import load_scenario
    from openg2g.scenario.preflight import check_start
    from openg2g.studies.common import check_controller_choices, feeder_topology, study_buses
    from openg2g.studies.hosting import model_mix
    from openg2g.studies.load import load_study
    from openg2g.studies.load_loss import check_settings
    from openg2g.studies.spec import HostingSpec, LoadLossSpec, SitingSpec

    loaded = load_study(name, overrides=overrides)
    check_start(load_scenario(loaded.base.path, loaded.base.fixed))
    spec = loaded.spec
    if isinstance(spec, SitingSpec | HostingSpec):
        site = loaded.base.site_index(spec.site)  # the site the study places or scales exists
        if isinstance(spec, HostingSpec) and spec.mix is not None:  # the block names models the site serves
            try:
                model_mix(loaded.base.data["datacenters"][site], spec.mix)
            except ScenarioError as exc:
                raise ScenarioError([(f"{loaded.path}: {loc}", msg) for loc, msg in exc.problems]) from None
        check_controller_choices(loaded.base, spec.controllers, f"{loaded.path}: controllers")
    if isinstance(spec, LoadLossSpec):  # the base scenario takes each setting's ride-through
        check_settings(loaded.base, spec, f"{loaded.path}: settings")
    buses = spec.candidates if isinstance(spec, SitingSpec) else spec.buses if isinstance(spec, HostingSpec) else None
    if isinstance(buses, list):  # the buses a site is placed on must be three-phase buses of the feeder
        field = "candidates" if isinstance(spec, SitingSpec) else "buses"
        study_buses(buses, feeder_topology(loaded.base.feeder), f"{loaded.path}: {field}", "")
    return f"{loaded.path}: ok (study {loaded.spec.study} {loaded.spec.name}, base {loaded.base.path.name})"


def _suite(name: str, overrides: list[str]) -> str:
    from openg2g.benchmark.spec import load_suite

    suite = load_suite(name, overrides)
    return (
        f"{suite.path}: ok (suite {suite.spec.suite}: {len(suite.cases)} cases, "
        f"{len(suite.spec.controllers)} controllers and no control, {suite.n_runs()} runs)"
    )


_CHECKS = {"scenario": _scenario, "sweep": _sweep, "study": _study, "suite": _suite}


def _validate(args: argparse.Namespace) -> int:
    failed = 0
    for name in args.scenarios:
        try:
            print(_CHECKS[file_kind(name)](name, args.set))
        except ScenarioError as exc:
            failed += 1
            for loc, msg in exc.problems:
                print(f"error: {loc}: {msg}", file=sys.stderr)
    return 2 if failed else 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``validate`` sub-command."""
    p = subparsers.add_parser(
        "validate",
        description=__doc__,
        epilog=SCENARIO_IS_CODE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "scenarios",
        nargs="+",
        help="scenario, sweep, study or suite files, or bundled names (ieee13_ofo, sweep_ieee13_taps, benchmark_ieee)",
    )
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override before validating")
    p.set_defaults(func=_validate)
