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

__all__ = ["CODE_EXECUTION", "scenario_reference"]


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

- `kind: path/to/file.py:ClassName` imports that file and builds the class. `openg2g validate`
  does this too (it builds and starts every controller to check its parameters), as do `run`,
  `sweep`, `study`, `train` and `evaluate`.
- A pandapower pickle net (`grid.pandapower` ending in `.p`, `.pkl`, `.pickle`) runs any code
  it carries while it is read, so it is refused unless `grid.trust_pickle: true`
  (`openg2g powerflow --trust-pickle`); converting it once to JSON avoids the question.
- `kind: rl_policy` loads a Stable-Baselines3 policy `.zip`. A zip written by `openg2g train`
  (the bundled ones too) loads without unpickling anything; one holding other pickled objects is
  refused unless its params say `trust_pickle: true` (`openg2g evaluate --trust-pickle`). Its
  `vecnormalize.pkl` (params `vecnormalize`) is read by a restricted reader that builds numpy
  arrays only, so it needs no such word.
- `openg2g train --resume` reads the checkpoints in its `--out` folder, which are pickles.
- Everything else is data. A JSON net may name only objects of the packages pandapower itself
  writes (pandapower, pandas, numpy, networkx, geopandas; of builtins complex, tuple, set,
  frozenset), checked before pandapower reads the file. YAML is read with a safe loader (no
  Python tags) and aliases may not expand a file beyond a million values. The files a scenario
  names (feeder `.dss`, net, trace library, profiles) are read, so it can read any file you can.

Validate and run only scenarios and controller files from sources you trust, and say a pickle is
trusted only when it is.
"""
"""The scenario reference's section on code execution (also summarized in ``openg2g run --help``)."""


def scenario_reference() -> str:
    """Markdown reference of every scenario field and every event command."""
    lines = ["# Scenario file reference", "", "Generated from `openg2g/scenario/schema.py` (`openg2g schema`).", ""]
    lines += [CODE_EXECUTION]
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
