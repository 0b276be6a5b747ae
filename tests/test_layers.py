"""The layer table of ``docs/architecture.md`` ("Layers") is what the code imports.

Every module of ``openg2g/`` and ``controllers/`` (``openg2g.controllers``) is read with ``ast``; an
import counts wherever it stands (module level, ``if TYPE_CHECKING:``, inside a function), a
relative one resolved to the module it names. A package may import itself and the packages its
row's ``imports`` column names (``everything below``: every package on a lower floor); each name
there is a package on a lower floor that the row's packages do import; and no modules import each
other, directly or around a circle. Third-party imports are not in the table.

The checker takes any tree and table, so the last tests plant a back-import and a circle and see
them reported.
"""

from __future__ import annotations

import ast
import os
import re
from collections import defaultdict
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HOUSE = "openg2g"
# folder (from the repository root) -> the package it is installed as
SOURCES = {"openg2g": "openg2g", "controllers": "openg2g.controllers"}
TABLE = ROOT / "docs" / "architecture.md"
HEADER = ["floor", "package", "what it is", "imports"]
NAMES = re.compile(r"`[\w.]+`(, `[\w.]+`)*")
EVERYTHING_BELOW = "everything below"
NOTHING = "nothing"


@dataclass(frozen=True)
class Import:
    module: str
    target: str  # the module of the house it names
    file: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.text}"


@dataclass(frozen=True)
class Row:
    floor: int
    packages: tuple[str, ...]
    imports: tuple[str, ...] | None  # None: everything below
    line: int


def find_modules(root: Path, sources: dict[str, str]) -> dict[str, Path]:
    """Module name -> file, for every ``.py`` file under each source folder."""
    found = {}
    for folder, package in sources.items():
        top = root / folder
        assert top.is_dir(), f"{top} is not a folder"
        # os.walk does not enter a linked folder: openg2g/controllers links to controllers/, read once
        for here, _, files in os.walk(top):
            for name in files:
                if name.endswith(".py"):
                    parts = Path(here, name).relative_to(top).with_suffix("").parts
                    if parts[-1] == "__init__":
                        parts = parts[:-1]
                    found[".".join((package, *parts))] = Path(here, name)
    return found


def _known(name: str, modules: dict[str, Path]) -> str:
    """The longest module of the house that ``name`` is or lies in (``pkg.mod.Class`` -> ``pkg.mod``)."""
    while name not in modules and "." in name:
        name = name.rpartition(".")[0]
    return name


def read_imports(root: Path, modules: dict[str, Path], house: str) -> list[Import]:
    found: dict[tuple[str, str, int], Import] = {}
    for module, path in sorted(modules.items()):
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                # `from pkg import mod` names the module pkg.mod; `from pkg.mod import Class`, pkg.mod
                names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
            else:
                continue
            text = ast.unparse(node)
            for name in names:
                if name == house or name.startswith(house + "."):
                    target = _known(name, modules)
                    key = (module, target, node.lineno)
                    found.setdefault(key, Import(module, target, str(path.relative_to(root)), node.lineno, text))
    return list(found.values())


def parse_table(text: str, where: str) -> list[Row]:
    """The rows of the table in the section ``## Layers``; a cell it cannot read is an error."""
    lines = text.splitlines()
    start = lines.index("## Layers")
    table = []
    for number, line in enumerate(lines[start + 1 :], start + 2):
        if line.startswith("## "):
            break
        if line.startswith("|"):
            table.append((number, [cell.strip() for cell in line.strip().strip("|").split("|")]))
    assert table and table[0][1] == HEADER, f"{where}: the Layers table's header is not {' | '.join(HEADER)}"
    rows = []
    for number, cells in table[2:]:
        assert len(cells) == 4, f"{where}:{number}: {len(cells)} cells, not 4"
        floor, packages, _, imports = cells
        assert floor.isdigit(), f"{where}:{number}: floor {floor!r} is not a number"
        assert NAMES.fullmatch(packages), f"{where}:{number}: package {packages!r} is not backticked names"
        if imports == EVERYTHING_BELOW:
            allowed = None
        elif imports == NOTHING:
            allowed = ()
        else:
            assert NAMES.fullmatch(imports), (
                f"{where}:{number}: imports {imports!r} is neither backticked names, {NOTHING!r} nor {EVERYTHING_BELOW!r}"
            )
            allowed = tuple(re.findall(r"`([\w.]+)`", imports))
        rows.append(Row(int(floor), tuple(re.findall(r"`([\w.]+)`", packages)), allowed, number))
    return rows


def package_of(module: str, rows: list[Row]) -> tuple[str, Row] | None:
    """The longest package of the table that ``module`` is or lies in, with its row."""
    matches = [
        (package, row)
        for row in rows
        for package in row.packages
        if module == package or module.startswith(package + ".")
    ]
    return max(matches, key=lambda match: len(match[0]), default=None)


def table_problems(rows: list[Row], where: str) -> list[str]:
    """The table against itself: a package in one row only; each import a package on a lower floor."""
    problems = []
    floors = {}
    for row in rows:
        for package in row.packages:
            if package in floors:
                problems.append(f"{where}:{row.line}: {package} has a second row")
            floors[package] = row.floor
    for row in rows:
        for name in row.imports or ():
            if name not in floors:
                problems.append(f"{where}:{row.line}: {name} has no row")
            elif floors[name] >= row.floor:
                problems.append(f"{where}:{row.line}: {name} is on floor {floors[name]}, not below {row.floor}")
    return problems


def unplaced(modules: dict[str, Path], rows: list[Row], root: Path, house: str) -> list[str]:
    # the root package (the version) is under every floor: importing any module of the house runs it
    return [
        f"{path.relative_to(root)}: {module} lies in no package of the Layers table"
        for module, path in sorted(modules.items())
        if module != house and package_of(module, rows) is None
    ]


def layer_breaks(imports: list[Import], rows: list[Row], house: str) -> list[str]:
    """Each import of a package that the importer's row does not name."""
    problems = []
    for imp in sorted(imports, key=lambda imp: (imp.file, imp.line)):
        source, target = package_of(imp.module, rows), package_of(imp.target, rows)
        if imp.target == house or source is None or target is None:
            continue  # the root package, or a module `unplaced` reports
        (package, row), (named, named_row) = source, target
        if named == package or named in (row.imports or ()):
            continue
        if row.imports is None and named_row.floor < row.floor:
            continue
        may = EVERYTHING_BELOW if row.imports is None else ", ".join(row.imports) or NOTHING
        problems.append(f"{imp}: {package} imports {named}; its row (floor {row.floor}) allows: {may}")
    return problems


def unused_listings(imports: list[Import], rows: list[Row], where: str) -> list[str]:
    """Each package a row names that none of the row's packages imports."""
    used = defaultdict(set)
    for imp in imports:
        source, target = package_of(imp.module, rows), package_of(imp.target, rows)
        if source and target:
            used[source[1].line].add(target[0])
    return [
        f"{where}:{row.line}: the row of {', '.join(row.packages)} names {name}, which none of them imports"
        for row in rows
        for name in row.imports or ()
        if name not in used[row.line]
    ]


def circles(imports: list[Import]) -> list[str]:
    """Each set of modules that import each other (a strongly connected component, Tarjan's
    algorithm), with the imports that tie it."""
    graph = defaultdict(set)
    for imp in imports:
        if imp.target != imp.module:
            graph[imp.module].add(imp.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    components = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [
        f"circle of {', '.join(sorted(component))}:\n"
        + "\n".join(
            f"  {imp}"
            for imp in sorted(imports, key=lambda imp: (imp.file, imp.line))
            if imp.module in component and imp.target in component and imp.target != imp.module
        )
        for component in components
    ]


@cache
def _house() -> tuple[dict[str, Path], list[Import], list[Row]]:
    modules = find_modules(ROOT, SOURCES)
    rows = parse_table(TABLE.read_text(), str(TABLE.relative_to(ROOT)))
    return modules, read_imports(ROOT, modules, HOUSE), rows


def test_the_table_reads_and_sends_every_import_down():
    _, _, rows = _house()
    problems = table_problems(rows, str(TABLE.relative_to(ROOT)))
    assert not problems, "\n".join(problems)


def test_every_module_lies_in_a_package_of_the_table():
    modules, _, rows = _house()
    assert "openg2g.controllers.mpc" in modules and "openg2g.core.interfaces" in modules
    problems = unplaced(modules, rows, ROOT, HOUSE)
    assert not problems, "\n".join(problems)


def test_imports_follow_the_layers():
    _, imports, rows = _house()
    problems = layer_breaks(imports, rows, HOUSE)
    assert not problems, f"{len(problems)} import(s) break docs/architecture.md's Layers table:\n" + "\n".join(problems)


def test_the_table_names_only_imports_that_are_made():
    _, imports, rows = _house()
    problems = unused_listings(imports, rows, str(TABLE.relative_to(ROOT)))
    assert not problems, "\n".join(problems)


def test_no_modules_import_each_other():
    _, imports, _ = _house()
    problems = circles(imports)
    assert not problems, "\n".join(problems)


SYNTHETIC_TABLE = """\
## Layers

| floor | package | what it is | imports |
|---|---|---|---|
| 2 | `pkg.high` | above | `pkg.low` |
| 1 | `pkg.low` | below | nothing |
"""


def test_a_back_import_in_a_function_and_its_circle_are_reported(tmp_path):
    for folder in ("pkg", "pkg/low", "pkg/high"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "pkg/low/a.py").write_text("import numpy\n\n\ndef later():\n    from ..high import b\n\n    return b\n")
    (tmp_path / "pkg/high/b.py").write_text("from pkg.low.a import later\n")
    modules = find_modules(tmp_path, {"pkg": "pkg"})
    imports = read_imports(tmp_path, modules, "pkg")
    rows = parse_table(SYNTHETIC_TABLE, "table")

    assert layer_breaks(imports, rows, "pkg") == [
        "pkg/low/a.py:5: from ..high import b: pkg.low imports pkg.high; its row (floor 1) allows: nothing"
    ]
    tie = [
        "circle of pkg.high.b, pkg.low.a:",
        "  pkg/high/b.py:1: from pkg.low.a import later",
        "  pkg/low/a.py:5: from ..high import b",
    ]
    assert circles(imports) == ["\n".join(tie)]
    assert unused_listings(imports, rows, "table") == []


def test_a_back_import_planted_in_the_house_is_reported():
    _, imports, rows = _house()
    planted = Import("openg2g.core.state", "openg2g.engine.simulation", "openg2g/core/state.py", 1, "import planted")
    problems = layer_breaks([*imports, planted], rows, HOUSE)
    assert (
        "openg2g/core/state.py:1: import planted: openg2g.core imports openg2g.engine; its row (floor 1) allows: nothing"
    ) in problems


def test_a_table_cell_that_cannot_be_read_is_an_error():
    bad = SYNTHETIC_TABLE.replace("`pkg.low` |\n", "low things |\n")
    with pytest.raises(AssertionError, match="table:5: imports 'low things' is neither"):
        parse_table(bad, "table")
