"""The README's and the docs' code blocks do what they say.

Every fenced block of ``README.md`` and ``docs/*.md`` is checked by its language:

- ``python``: a page's blocks run in order, in one fresh interpreter, from a folder holding only a
  link to ``scenarios/`` (the docs are written for the clone's root; their outputs go to ``runs/``);
- ``yaml``: a whole scenario is validated as one; a fragment (a few top-level fields, ``...`` for
  "the rest as before") is laid over the bundled ``ieee13_none`` and validated; a benchmark suite
  (``suite:``) is loaded as one;
- ``bash``: every ``openg2g`` command parses with the real argument parser, and every bundled
  scenario it names exists.

A block that cannot be checked as written (a placeholder path such as ``my_feeder/Master.dss``)
carries the marker ``<!-- docs-test: skip REASON -->`` on the line before its fence; the reason is
required, so a skipped block says why.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from openg2g.benchmark.spec import load_suite
from openg2g.cli.main import build_parser
from openg2g.scenario.loader import load_scenario, resolve_scenario_path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(?P<lang>\w*)\n(?P<code>.*?)^```", re.DOTALL | re.MULTILINE)
SKIP = re.compile(r"<!-- docs-test: skip (?P<reason>\S.*?) -->\n\Z")
FRAGMENT_BASE = "ieee13_none"


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    code: str
    skip: str | None

    def __str__(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def _blocks(page: Path) -> list[Block]:
    text = page.read_text()
    out = []
    for m in FENCE.finditer(text):
        marker = SKIP.search(text, 0, m.start())
        line = text.count("\n", 0, m.start()) + 1
        out.append(Block(page, line, m.group("lang"), m.group("code"), marker.group("reason") if marker else None))
    return out


BLOCKS = [b for page in PAGES for b in _blocks(page)]


def _of(lang: str) -> list[Block]:
    return [b for b in BLOCKS if b.lang == lang and b.skip is None]


def test_the_pages_have_checked_blocks_of_every_kind():
    langs = {b.lang for b in BLOCKS if b.skip is None}
    assert {"python", "yaml", "bash"} <= langs
    assert all(b.skip.strip() for b in BLOCKS if b.skip is not None)


# ---------------------------------------------------------------------------------------------- bash


def _openg2g_commands(code: str) -> list[str]:
    """The ``openg2g`` command lines of a shell block, with ``for V in A B; do ...; done`` unrolled."""
    code = re.sub(r"\\\n\s*", " ", code)
    lines = []
    for raw in code.splitlines():
        line = re.sub(r"\s+#.*$", "", raw).strip()
        loop = re.fullmatch(r"for (\w+) in ([^;]+); do (.+); done", line)
        bodies = [loop.group(3).replace(f"${loop.group(1)}", v) for v in loop.group(2).split()] if loop else [line]
        for body in bodies:
            for part in re.split(r"\s*(?:&&|;)\s*", body):
                words = shlex.split(part)
                while words and re.fullmatch(r"\w+=\S*", words[0]):
                    words.pop(0)
                if words and words[0] == "openg2g":
                    lines.append(shlex.join(words[1:]))
    return lines


BASH_COMMANDS = [(b, cmd) for b in _of("bash") for cmd in _openg2g_commands(b.code)]


def test_the_docs_show_openg2g_commands():
    assert len(BASH_COMMANDS) >= 20


@pytest.mark.parametrize(("block", "command"), BASH_COMMANDS, ids=[f"{b}:{c[:40]}" for b, c in BASH_COMMANDS])
def test_a_documented_command_parses(block: Block, command: str):
    args = shlex.split(command)
    try:
        parsed = build_parser().parse_args(args)
    except SystemExit as exc:
        pytest.fail(f"{block}: `openg2g {command}` does not parse (exit {exc.code})")
    if parsed.command in {"run", "validate"}:
        given = getattr(parsed, "scenario", None) or parsed.scenarios
        names: list[str] = given if isinstance(given, list) else [given]
        for name in names:
            if "/" not in name and not name.endswith(".yaml"):
                assert resolve_scenario_path(name).is_file(), f"{block}: no bundled scenario {name!r}"
            elif name.startswith("scenarios/"):
                assert (ROOT / name).is_file(), f"{block}: no file {name}"


# ---------------------------------------------------------------------------------------------- yaml


def _overrides(fragment: dict[str, Any]) -> list[str]:
    """A fragment as ``--set`` overrides of the base scenario: a top-level field replaces the base's,
    but a list item holding ``...`` (the rest as before) changes only the fields it names."""
    out = []
    for key, value in fragment.items():
        if isinstance(value, list) and any(isinstance(v, dict) and "..." in v for v in value):
            for i, item in enumerate(value):
                out += [f"{key}.{i}.{k}={json.dumps(v)}" for k, v in item.items() if k != "..."]
        else:
            out.append(f"{key}={json.dumps(value)}")
    return out


def _heavy(block: Block) -> bool:
    """A suite checks every case and a pandapower net is built: seconds each, so left to the full suite."""
    return "suite:" in block.code or "pandapower:" in block.code


YAML_BLOCKS = [pytest.param(b, id=str(b), marks=[pytest.mark.slow] if _heavy(b) else []) for b in _of("yaml")]


@pytest.mark.parametrize("block", YAML_BLOCKS)
def test_a_documented_yaml_block_validates(block: Block, tmp_path: Path):
    data = yaml.safe_load(block.code.replace(", ...}", ", '...': null}"))
    assert isinstance(data, dict), f"{block}: not a mapping"
    if "suite" in data:
        path = tmp_path / "suite.yaml"
        path.write_text(block.code)
        load_suite(path)
    elif "name" in data:
        path = tmp_path / "scenario.yaml"
        path.write_text(block.code)
        load_scenario(path)
    else:
        load_scenario(FRAGMENT_BASE, overrides=_overrides(data))


# -------------------------------------------------------------------------------------------- python

PYTHON_PAGES = sorted({b.page for b in _of("python")})


@pytest.mark.slow
@pytest.mark.parametrize("page", PYTHON_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_pages_python_blocks_run(page: Path, tmp_path: Path):
    blocks = [b for b in _of("python") if b.page == page]
    script = "\n\n".join(f"# {b}\n{b.code}" for b in blocks)
    (tmp_path / "scenarios").symlink_to(ROOT / "scenarios")
    env = {**os.environ, "MPLBACKEND": "Agg"}
    run = subprocess.run(
        [sys.executable, "-c", script], check=False, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900
    )
    assert run.returncode == 0, f"{page.name}'s python blocks failed:\n{run.stderr[-3000:]}"
