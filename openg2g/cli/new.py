"""``openg2g new scenario|controller``: start your own files from the bundled ones.

``new scenario FROM [DIR]`` copies the bundled scenario FROM (``ieee13_ofo``) into DIR (default:
the working folder) with every file it reads by path (load and PV profiles, feeder and net files,
trace libraries, controller files), at the same paths relative to it, so the copy runs from
anywhere and gives the same results as the bundled one. Feeders, the trace library, stock
controllers and policies named by their bundled name stay names: they come with every install.

``new controller NAME [DIR]`` writes a controller to make your own: NAME.py (a class following the
stock controllers' interface, docs/controllers.md), NAME.yaml (a scenario running it on the IEEE 13
feeder) and test_NAME.py (pytest tests of the contract every controller keeps with the engine,
on 10 s of that scenario: well-formed commands naming what the sites have, the same commands for
the same observations and after a reset, no failure on a failed power flow; they hold as the rule
is changed).

Neither overwrites a file: when one of the files exists, nothing is written. Each prints the
files it wrote.
"""

from __future__ import annotations

import argparse
import keyword
import re
import shutil
import string
from pathlib import Path

from openg2g.core.errors import ScenarioError
from openg2g.core.paths import bundled_dir

__all__ = ["copy_scenario", "register", "write_controller"]

_TEMPLATES = Path(__file__).resolve().parent / "templates"
_NAME = re.compile(r"[a-z][a-z0-9_]*")
_RESERVED = frozenset(keyword.kwlist) | {"Ellipsis", "NotImplemented"}
"""Names a module or class cannot take (``class None``, ``import class``) or must not (shadowing
a built-in constant): the keywords, ``None``, ``True`` and ``False`` included."""


def _write_new(files: dict[Path, Path | str]) -> list[Path]:
    """Write each target (from a source file or text), none if any exists; returns the targets.

    :raises ScenarioError: a target exists, or one cannot be written (then those written before it
        are removed: nothing is left half done).
    """
    existing = [target for target in files if target.exists()]
    if existing:
        raise ScenarioError([(str(target), "exists; nothing was written (move it away first)") for target in existing])
    written: list[Path] = []
    for target, source in files.items():
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(source, Path):
                shutil.copyfile(source, target)
            else:
                target.write_text(source, encoding="utf-8")
        except OSError as exc:
            target.unlink(missing_ok=True)
            for done in written:
                done.unlink(missing_ok=True)
            raise ScenarioError(
                [(str(target), f"cannot write it ({exc.strerror or exc}); nothing was written")]
            ) from None
        written.append(target)
    return written


def _bundled_scenarios() -> list[str]:
    from openg2g.cli.validate import file_kind

    return sorted(p.stem for p in bundled_dir("scenarios").glob("*.yaml") if file_kind(str(p)) == "scenario")


def copy_scenario(name: str, dest: Path) -> list[Path]:
    """Copy the bundled scenario ``name`` and the files it reads by path into ``dest``.

    :return: the files written, the scenario first.
    :raises ScenarioError: not a bundled scenario's name (the message lists them), a referenced
        path outside the scenario's folder, or a target that exists (then nothing is written).
    """
    from openg2g.cli.validate import file_kind
    from openg2g.scenario.loaded import path_fields
    from openg2g.scenario.loader import load_scenario, read_yaml_mapping

    bundled = _bundled_scenarios()
    source = bundled_dir("scenarios") / f"{name}.yaml"
    if name not in bundled:
        what = f"a bundled {file_kind(str(source))} file" if source.is_file() else "not a bundled scenario"
        raise ScenarioError([(name, f"{what}; bundled scenarios: {', '.join(bundled)}")])
    load_scenario(source)  # a bundled scenario is valid; this makes sure of what is copied
    files: dict[Path, Path | str] = {dest / source.name: source}
    for field in path_fields(read_yaml_mapping(source)):
        relative = Path(field.path)
        if relative.is_absolute() or ".." in relative.parts:
            raise ScenarioError([(f"{source}: {field.key}", f"{field.path!r} is outside the scenario's folder")])
        found = source.parent / relative
        if found.is_dir():  # a trace library
            files.update({dest / relative / p.relative_to(found): p for p in sorted(found.rglob("*")) if p.is_file()})
        else:
            files[dest / relative] = found
    return _write_new(files)


def write_controller(name: str, dest: Path) -> list[Path]:
    """Write the controller template ``dest/NAME.py``, a scenario running it and its tests.

    :return: the files written.
    :raises ScenarioError: ``name`` is not a lower-case Python name or makes a keyword or built-in
        constant of the module or class name (``none``: ``class None``), or a target exists or
        cannot be written (then nothing is written).
    """
    if not _NAME.fullmatch(name):
        raise ScenarioError(
            [(name, "a controller name is a lower-case Python name: letters, digits and _, a letter first")]
        )
    class_name = "".join(part.capitalize() for part in name.split("_"))
    for what, word in (("module", name), ("class", class_name)):
        if word in _RESERVED:
            raise ScenarioError(
                [(name, f"would name the {what} {word!r}, a Python keyword or built-in constant: choose another name")]
            )
    values = {"name": name, "class_name": class_name}
    texts = {
        f"{name}.py": "controller.py.tmpl",
        f"{name}.yaml": "scenario.yaml.tmpl",
        f"test_{name}.py": "test_controller.py.tmpl",
    }
    return _write_new(
        {
            dest / target: string.Template((_TEMPLATES / template).read_text(encoding="utf-8")).substitute(values)
            for target, template in texts.items()
        }
    )


def _new(args: argparse.Namespace) -> int:
    from openg2g.cli.outdir import refuse_file_path

    dest = Path(args.dir)
    refuse_file_path(dest, "DIR")
    written = copy_scenario(args.name, dest) if args.what == "scenario" else write_controller(args.name, dest)
    for path in written:
        print(path)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``new`` sub-command with ``scenario`` and ``controller``."""
    p = subparsers.add_parser("new", description=__doc__)
    sub = p.add_subparsers(dest="what", metavar="WHAT", required=True)
    s = sub.add_parser("scenario", help="copy a bundled scenario and the files it reads", description=__doc__)
    s.add_argument("name", metavar="FROM_BUNDLED", help="bundled scenario name (e.g. ieee13_ofo)")
    c = sub.add_parser("controller", help="write a controller template, a scenario and tests", description=__doc__)
    c.add_argument("name", metavar="NAME", help="controller name, a lower-case Python name (e.g. my_controller)")
    for q in (s, c):
        q.add_argument("dir", metavar="DIR", nargs="?", default=".", help="folder to write into (default: here)")
        q.set_defaults(func=_new)
