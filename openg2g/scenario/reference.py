"""The scenario file reference as Markdown, generated from the pydantic models so it cannot drift."""

from __future__ import annotations

import dataclasses
import types
import typing
from fractions import Fraction
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from openg2g.core.commands import COMMANDS
from openg2g.core.limits import CAP_CALIBRATED_MIN_W, CAP_MAX_W, CAP_MIN_W
from openg2g.scenario.schema import Scenario

__all__ = ["CODE_EXECUTION", "OUTPUT_FOLDERS", "scenario_reference"]


def _type_name(annotation: Any) -> str:
    """Readable type of a field: ``seconds``, ``list[str] | None``, ``'fixed' | 'auto'``."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if annotation is Fraction:
        return "seconds"
    if annotation is type(None):
        return "None"
    if origin is typing.Literal:
        return " \\| ".join(repr(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(_type_name(a) for a in args)
    if origin is not None:
        return f"{origin.__name__}[{', '.join(_type_name(a) for a in args)}]"
    return getattr(annotation, "__name__", str(annotation))


def _nested_models(annotation: object) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _nested_models(arg)]


def _section(model: type[BaseModel], seen: set[type[BaseModel]]) -> list[str]:
    seen.add(model)
    lines = [f"### `{model.__name__}`", "", (model.__doc__ or "").strip().splitlines()[0], ""]
    lines += ["| field | type | default | meaning |", "|---|---|---|---|"]
    nested: list[type[BaseModel]] = []
    for name, field in model.model_fields.items():
        if field.is_required():
            default = "required"
        elif field.default_factory is not None:
            default = "(empty)" if field.default_factory in (list, dict) else "(see type)"
        else:
            default = "" if field.default is PydanticUndefined else f"`{field.default}`"
        lines.append(f"| `{name}` | {_type_name(field.annotation)} | {default} | {field.description or ''} |")
        nested += [m for m in _nested_models(field.annotation) if m not in seen]
    lines.append("")
    for sub in nested:
        if sub not in seen:
            lines += _section(sub, seen)
    return lines


CODE_EXECUTION = """\
## A scenario can run code

A scenario from someone else is code: read it before you validate or run it.

- `kind: path/to/file.py:ClassName` imports that file and builds the class (`kind:
  package.module:ClassName` an installed module). `openg2g validate` does this too (it builds and starts every controller to check its parameters), as do `run`,
  `sweep`, `study`, `train` and `evaluate`.
- A pandapower pickle net (`grid.pandapower` ending in `.p`, `.pkl`, `.pickle`) runs any code
  it carries while it is read, so it is refused unless `grid.trust_pickle: true`
  (`openg2g powerflow --trust-pickle`); converting it once to JSON avoids the question.
- `kind: rl_policy` loads a Stable-Baselines3 policy `.zip`. A zip written by `openg2g train`
  (the bundled ones too) loads without unpickling anything; one holding other pickled objects is
  refused unless its params say `trust_pickle: true` (`openg2g evaluate --trust-pickle`). Its
  `vecnormalize.pkl` (params `vecnormalize`) is read by a restricted reader that builds numpy
  arrays only, so it needs no such word. The observation terms named in the policy's `.json`
  (`observation_terms`: a file, module or entry point) are imported when the run starts.
- `openg2g train --resume` reads the checkpoints in its `--out` folder, which are pickles.
- A finished run's folder is only read, wherever it came from: `openg2g plot`, `openg2g compare`,
  `openg2g app` and `to_pandapower_results` import no controller or plug-in site file its
  `scenario.yaml` names, and never take that file's own `grid.trust_pickle`: a pickle net a run
  names is read only on your word (`openg2g plot --trust-pickle`, `openg2g app --allow-code`,
  `trust_pickle=True`); without it the feeder map and profile are skipped, naming the file.
- A feeder `.dss` file is an OpenDSS script, which OpenDSS's engine runs command by command, so
  it runs in a box (`validate`, `powerflow`, `feeders check` and the app alike). It may read any
  file you can (a `Redirect` or `Compile` to a sibling or absolute path, load shapes, bus
  coordinates), and what the engine writes by itself (`Show`, `Export` without a file name,
  `Plot`, a debug trace) goes to a private scratch folder, deleted when the reading ends. It may
  not write a file it names, move the engine's folders, run a program, load a user-written
  model's library or hide a command from openg2g's scan: `Export` to a file, `Save`,
  `Set DataPath`, `CD`, `Compile` inside the files, `AlignFile`, `Distribute`, `Rephase`,
  `Set CaseName`, `DOScmd`, `Set Editor`, `Set ShowExport`, `NewActor`, `Clone`, `UserModel=`,
  `ShaftModel=`, `DynaDLL=`, an element name with a `..` path component, a command or file given
  through a parser variable (`@name`) and a redirect cycle are each refused by name, with the file
  and line, before the engine runs anything (in any abbreviation OpenDSS takes). The engine runs
  in a process of its own, with at most 8 GiB of memory (less under a lower `ulimit -v`) for at
  most 300 s.
- Everything else is data. A JSON net may name only objects of the packages pandapower itself
  writes (pandapower, pandas, numpy, networkx, geopandas; of builtins complex, tuple, set,
  frozenset), checked before pandapower reads the file. YAML is read with a safe loader (no
  Python tags) and aliases may not expand a file beyond a million values (a run's `scenario.yaml`
  too; the app's controller parameters box, ten thousand). The files a scenario names (feeder
  `.dss`, net, trace library, profiles) are read, so it can read any file you can.

Validate and run only scenarios and controller files from sources you trust, and say a pickle is
trusted only when it is.
"""
"""The scenario reference's section on code execution (also summarized in ``openg2g run --help``)."""

FILES_AND_NAMES = """\
## Files, bundled names and your own copy

Paths in a scenario (a feeder `.dss` or net file, `profile`s, a `traces` folder, a controller
file in `kind`) are relative to the scenario file. Feeders, the bundled trace library, stock
controllers and bundled policies go by name and come with every install. Every command takes a
bundled file by its name where it takes a file: `ieee13_ofo` (a scenario), `sweep_ieee13_taps`,
`study_ieee13_siting`, `benchmark_ieee`; `openg2g validate` checks each as what it is.
`openg2g new scenario ieee13_ofo DIR` copies a bundled scenario and the files it names into DIR
(it refuses to overwrite any), so the copy runs from anywhere with the same results;
`openg2g new controller NAME DIR` writes a controller template with a scenario and tests.
"""
"""The scenario reference's section on paths and names (``openg2g new``)."""
OUTPUT_FOLDERS = """\
## Output folders

`run`, `sweep`, `benchmark`, `study` and `train` write into one folder (`--out`, default
`runs/<name>`), and keep it safe:

- **No silent overwrite.** A folder that holds an earlier command's outputs is refused before
  anything runs, with what it holds: the command, its scenario or name, its state (complete,
  interrupted, failed, or incomplete: killed before it could say), when it was written and its key
  figure, e.g. `--out runs/x: holds a complete run of scenario ieee13_ofo (finished 2026-11-25
  21:30:02; violation integral 1.234 pu.s); give --overwrite to replace it, or another folder`.
  `--overwrite` writes over it. A rerun of the same sweep, suite or study resumes (complete runs
  are kept) unless it would replace complete runs made from other inputs (the sweep, suite or base
  scenario changed), which needs `--overwrite`; `train --resume` continues a training run, and
  `train --overwrite` starts afresh, deleting the old checkpoints, best model, evaluations and statistics.
- **One writer at a time.** A command locks its folder while it runs (an OS lock, `flock`, on
  `OUT/.openg2g.lock`, released by the operating system when the process ends, however it ends). A
  second command into the same folder fails at once, naming the first one's PID.
- **Whole files or none.** Every file written in one piece (`summary.json`, `scenario.yaml`,
  `error.txt`, policies and checkpoints, the sweep, benchmark and study tables, figures) is
  written to a hidden temporary file in the folder and renamed over its name, so a crash, a kill
  or a full disk leaves the previous file (a run's `error.txt` a disk cannot take is not written,
  and stderr says so beside the error). Output tables are parquet parts, each complete. `kill`
  (SIGTERM) ends a command as Ctrl-C does; the Ctrl-C after the first that stopped a `run` (a
  burst) are ignored until it has exited, so its summary says `interrupted`; a benchmark rewrites
  its tables after every finished run, so even `kill -9` leaves the tables of the runs that
  finished.
"""
"""The scenario reference's section on output folders (``--overwrite``, the lock, atomic writes)."""


def scenario_reference() -> str:
    """Markdown reference of every scenario field and every event command."""
    lines = ["# Scenario file reference", "", "Generated from `openg2g/scenario/schema.py` (`openg2g schema`).", ""]
    lines += [CODE_EXECUTION, FILES_AND_NAMES, OUTPUT_FOLDERS]
    lines += _section(Scenario, set())
    lines += ["### Event commands", "", "| command | fields |", "|---|---|"]
    for name, cls in COMMANDS.items():
        fields = ", ".join(f"`{f.name}`" for f in dataclasses.fields(cls))
        lines.append(f"| `{name}` | {fields} |")
    lines += [
        "",
        (
            "Replicas are whole: `set_inference_scale` aims each model at the count nearest `fraction` times "
            "its configured replicas, a half rounded up (0.333 of 90 is 30); `set_replicas` and "
            "`shift_replicas` take whole counts. `set_power_cap` takes "
            f"{CAP_MIN_W:g}-{CAP_MAX_W:g} W per GPU; the power-cap model is calibrated on "
            f"{CAP_CALIBRATED_MIN_W:g}-{CAP_MAX_W:g} W only, so a run counts the caps below "
            f"{CAP_CALIBRATED_MIN_W:g} W in `summary.json` (`power_caps_below_calibration`) and warns."
        ),
    ]
    return "\n".join(lines) + "\n"
