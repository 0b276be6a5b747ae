"""The ``openg2g`` process: what its light commands import, and how it ends.

Commands that read no scenario's components (``--help``, ``schema``) load none of the numeric
stack that a run needs (scipy, numba, matplotlib, pandapower, torch). A command run as the
installed ``openg2g`` (``main()`` without arguments) ends its process without the interpreter's
teardown; what it wrote, its exit status and its exit functions must come through all the same.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("scipy", "numba", "llvmlite", "matplotlib", "pandapower", "torch")
"""Packages a light command must not import."""


def _python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -c code args`` with this checkout's code, in the repository root."""
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        check=False,  # the tests read the status
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
    )


_IMPORTED_AFTER = f"""
import contextlib, io, sys
from openg2g.cli.main import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main(sys.argv[1:])
    except SystemExit:  # --help ends in argparse
        pass
print(sorted({{m.split(".")[0] for m in sys.modules}} & set({HEAVY!r})))
"""
"""Runs the command given as arguments in-process; prints the heavy packages it left imported."""


@pytest.mark.slow  # a fresh interpreter per command
@pytest.mark.parametrize("command", [["--help"], ["schema"], ["run", "--help"], ["train", "--help"]])
def test_a_light_command_imports_no_numeric_stack(command: list[str]) -> None:
    done = _python(_IMPORTED_AFTER, *command)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[]", f"openg2g {' '.join(command)} imported {done.stdout}"


_MODULES_AFTER_HELP = """
import contextlib, io, sys
from openg2g.cli.main import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    try:
        main(["--help"])
    except SystemExit:
        pass
assert "train an RL policy on a scenario" in out.getvalue()
print(sorted(m for m in sys.modules if m.split(".")[0] in ("numpy", "pydantic", "gymnasium") or m.startswith("openg2g.cli.") and m not in ("openg2g.cli.main", "openg2g.cli.helptext")))
"""


@pytest.mark.slow  # a fresh interpreter
def test_help_lists_every_command_without_importing_one() -> None:
    """``openg2g --help`` takes the commands' lines from main's table: no command module, so no
    pydantic, numpy or gymnasium (they took it from 0.07 s to 0.5 s)."""
    done = _python(_MODULES_AFTER_HELP)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[]", done.stdout


_AS_INSTALLED = "import sys; from openg2g.cli.main import main; sys.exit(main())"
"""The installed ``openg2g`` script's body: :func:`~openg2g.cli.main.main` reads ``sys.argv``."""


@pytest.mark.slow  # a 2 s run in a fresh interpreter
def test_a_run_ends_its_process_with_its_outputs_and_table_whole(tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = ["run", "ieee13_ofo", "--set", "duration_s=2", "--set", "outputs.plots=false", "--no-progress"]
    done = _python(_AS_INSTALLED, *args, "--out", str(out))
    assert done.returncode == 0, done.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "complete" and summary["sim_time_s"] == 2
    assert "ieee13_ofo" in done.stdout and done.stdout.endswith(f"outputs: {out}\n")


@pytest.mark.slow  # a fresh interpreter
def test_an_error_ends_the_process_with_status_2_and_its_message() -> None:
    done = _python(_AS_INSTALLED, "run", "no_such_scenario")
    assert done.returncode == 2
    assert done.stderr.startswith("error: no_such_scenario: no scenario file")


@pytest.mark.slow  # a fresh interpreter
def test_exit_functions_run_after_the_whole_output() -> None:
    """A handler registered with ``atexit`` (a pool's, Ray's, logging's) still runs, after the
    command's own output has been written."""
    code = "import atexit, sys; atexit.register(print, 'exit functions ran'); " + _AS_INSTALLED
    done = _python(code, "schema")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("# ") and done.stdout.endswith("\nexit functions ran\n")


def test_main_called_with_arguments_returns(capsys: pytest.CaptureFixture[str]) -> None:
    """From Python (a test, a notebook) the process goes on after the command."""
    from openg2g.cli.main import main

    assert main(["schema"]) == 0
    assert capsys.readouterr().out.startswith("# ")
