"""Read a scenario file, apply ``--set`` overrides, validate it completely before anything runs.

Validation has two layers: the pydantic schema (types, ranges, unknown keys) and the checks that
need the world the scenario points at (feeder buses and regulators, trace library models and
batch sizes, controller classes and their parameters, event commands). Every problem is reported
at once, each as ``<file>: <field.path>: <reason>``. :func:`openg2g.scenario.preflight.check_start`
adds a third, run by ``openg2g validate`` and ``openg2g run``: the components are built and
started, and every event is fired on them, so nothing the run would refuse later passes.

What is read is bounded: YAML aliases may not expand a file (or a ``--set`` value) beyond
:data:`MAX_YAML_NODES` values, and nesting beyond Python's recursion limit is refused
(:mod:`openg2g.core.yamltext`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from openg2g.core.commands import COMMANDS, ShiftReplicas, is_datacenter_command
from openg2g.core.config import field_path
from openg2g.core.errors import CommandError, G2GError, ScenarioError
from openg2g.core.paths import bundled_dir
from openg2g.core.yamltext import MAX_YAML_NODES, YamlTextError, read_yaml_text
from openg2g.scenario.build import check_components
from openg2g.scenario.events import build_event_command
from openg2g.scenario.loaded import LoadedScenario
from openg2g.scenario.schema import Scenario

__all__ = [
    "MAX_YAML_NODES",
    "LoadedScenario",
    "apply_override",
    "load_scenario",
    "read_scenario",
    "read_yaml_mapping",
    "resolve_scenario_path",
]


def resolve_scenario_path(
    name_or_path: str | Path,
    kind: str = "scenario",
    error: Callable[[list[tuple[str, str]]], G2GError] = ScenarioError,
) -> Path:
    """A file path as given, or the name of a bundled file (``ieee13_ofo``, ``sweep_ieee13_taps``,
    ``benchmark_ieee``, ``study_ieee13_siting``): how every command resolves what it is given to read.

    An existing file is that file. A bare name (no ``/``, no suffix) is otherwise the bundled file
    of that name, even where the working folder holds a folder of that name (``mkdir ieee13_none``
    does not hide the bundled scenario; ``./ieee13_none`` names the folder, and is refused as not a
    file). A bare name that is both a file here and a bundled name is the file here, with a note on
    stderr giving the bundled one's path.

    :param kind: what the file is, for the message (``"scenario"``, ``"sweep"``).
    :param error: error class raised with ``[(location, message)]``.
    :raises G2GError: (of class ``error``) neither a file nor a bundled name, or a folder; the
        message says where it looked.
    """
    path = Path(name_or_path)
    folder = bundled_dir("scenarios")
    # the text, not the path: Path("./ieee13_none") drops the "./" that says "the one here"
    one_part = not any(sep in str(name_or_path) for sep in {"/", os.sep})
    bare = one_part and path.suffix == ""
    bundled = folder / f"{path.name}.yaml" if bare else None
    if path.exists() and not path.is_dir():  # a file, or a pipe or device read as one
        if bundled is not None and bundled.is_file() and path.resolve() != bundled.resolve():
            _note_once(
                f"note: {name_or_path} is the file {path.resolve()}, not the bundled {kind} of that name "
                f"(give its path for that one: {bundled})"
            )
        return path
    if bundled is not None and bundled.is_file():
        return bundled
    missing = f"{path.resolve()} is a folder, not a {kind} file" if path.is_dir() else f"no {kind} file {path.resolve()}"
    if bundled is not None:
        missing += f", nor a bundled {path.name}.yaml in {folder}"
    elif one_part and path.suffix == ".yaml" and (folder / path.name).is_file():
        missing += f" (the bundled {kind} of that name is {path.stem}, without .yaml)"
    raise error([(str(name_or_path), missing)])


@functools.cache
def _note_once(text: str) -> None:
    """Print ``text`` on stderr the first time it is asked for: a command resolves one name more
    than once (``validate`` to learn the file's kind, then to check it)."""
    print(text, file=sys.stderr)


def apply_override(data: dict[str, Any], assignment: str, source: str) -> None:
    """Apply one ``dotted.key=value`` override in place; the value is read as YAML.

    List items are addressed by index (``datacenters.0.bus=675``).
    """
    key, sep, raw = assignment.partition("=")
    if not sep or not key:
        raise ScenarioError([(source, f"--set {assignment!r}: expected dotted.key=value")])
    try:
        value = read_yaml_text(raw) if raw.strip() else ""
    except YamlTextError as exc:
        raise ScenarioError([(source, f"--set {key}: value is {exc}")]) from None
    parts = key.split(".")
    node: Any = data
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        where = ".".join(parts[: i + 1])
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                raise ScenarioError([(source, f"--set {key}: {where} is not an index of a list of {len(node)}")])
            if last:
                node[int(part)] = value
            else:
                node = node[int(part)]
        elif isinstance(node, dict):
            if last:
                node[part] = value
            else:
                node = node.setdefault(part, {})
        else:
            raise ScenarioError([(source, f"--set {key}: {'.'.join(parts[:i])} is a value, not a section")])


def read_yaml_mapping(
    path: Path,
    kind: str = "scenario",
    error: Callable[[list[tuple[str, str]]], G2GError] = ScenarioError,
) -> dict[str, Any]:
    """Read a YAML file that must hold a mapping of sections.

    :param kind: what the file is, for messages (``"scenario"``, ``"sweep"``).
    :param error: error class raised with ``[(location, message)]``; locations name the file
        (and line and column for a syntax error).
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise error([(str(path), f"cannot read {kind} file: {exc.strerror}")]) from None
    except UnicodeDecodeError as exc:
        raise error([(str(path), f"not UTF-8 text (byte {exc.start}): save the {kind} file as UTF-8")]) from None
    try:
        data = read_yaml_text(text)
    except YamlTextError as exc:
        where = f"{path}:{exc.line}:{exc.column}" if exc.line is not None else str(path)
        raise error([(where, str(exc))]) from None
    if not isinstance(data, dict):
        raise error([(str(path), f"a {kind} file must be a mapping of sections (name, ...)")])
    return data


def _check_events(scenario: Scenario) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    sites = {s.name for s in scenario.datacenters}
    for i, event in enumerate(scenario.events):
        where = f"events.{i}"
        if event.command not in COMMANDS:
            problems.append((f"{where}.command", f"unknown command {event.command!r}; valid: {', '.join(COMMANDS)}"))
            continue
        try:
            command = build_event_command(event.command, event.fields())
        except ValidationError as exc:
            for err in exc.errors():
                problems.append((f"{where}.{field_path(err['loc'])}", err["msg"]))
            continue
        except CommandError as exc:
            problems.append((where, str(exc)))
            continue
        if is_datacenter_command(command):
            targets = [command.site] + ([command.to_site] if isinstance(command, ShiftReplicas) else [])
            for target in targets:
                if target not in sites:
                    problems.append((f"{where}.site", f"no datacenter site named {target!r}; sites: {sorted(sites)}"))
    return problems


def _scenario_hash(scenario: Scenario) -> str:
    canonical = json.dumps(scenario.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def read_scenario(path: Path, overrides: Sequence[str] = ()) -> Scenario:
    """Read and override a scenario file, checked against the schema only (types, ranges, unknown
    keys): nothing it names is opened, imported or run, so a file of unknown origin (a run
    folder's ``scenario.yaml``) is safe to read. :func:`load_scenario` adds the checks that open
    what it names.

    :raises ScenarioError: with every problem found, each naming file, field path and reason.
    """
    data = read_yaml_mapping(path)
    for assignment in overrides:
        apply_override(data, assignment, str(path))
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError([(f"{path}: {field_path(e['loc'])}", e["msg"]) for e in exc.errors()]) from None


def load_scenario(name_or_path: str | Path, overrides: Sequence[str] = ()) -> LoadedScenario:
    """Read, override and fully validate a scenario file. The checks import the controller files
    and plug-in sites it names and read its feeder, net and traces: for a file of unknown origin,
    :func:`read_scenario`.

    :param name_or_path: path of a YAML scenario, or a bundled scenario's name.
    :param overrides: ``dotted.key=value`` assignments applied before validation.
    :raises ScenarioError: with every problem found, each naming file, field path and reason.
    """
    path = resolve_scenario_path(name_or_path)
    scenario = read_scenario(path, overrides)
    base_dir = path.resolve().parent
    problems = _check_events(scenario) + check_components(scenario, base_dir)
    if problems:
        raise ScenarioError([(f"{path}: {loc}", msg) for loc, msg in problems])
    return LoadedScenario(scenario=scenario, path=path, base_dir=base_dir, sha256=_scenario_hash(scenario))
