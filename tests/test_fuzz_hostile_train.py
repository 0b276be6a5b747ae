"""Fuzz set, continued (issue 29): ``openg2g train``'s options and output folder, and a user's
controller module that raises ``KeyboardInterrupt`` or calls ``sys.exit(0)`` when imported.

Same rules as :mod:`tests.test_fuzz_hostile`: the real CLI in-process, one ``error:`` message naming
the option or file, no traceback; here the exit status is 2 (an input error) for every case. A
controller module must be refused by every command that would import it: validate (scenario,
sweep, suite, study), run, sweep, benchmark and the studies. A full disk during training (a file
size limit stands in for it, in a child process) ends with one error naming the folder.
"""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from openg2g.core.limits import max_processes
from tests.test_fuzz_hostile import Case, Make, _argv, _dump, _file, _run_result, _scenario_file

REPO = Path(__file__).resolve().parents[1]


def _train(*options: str) -> Make:
    """``train toy`` into ``{tmp}/t`` with ``options`` last (argparse keeps the last of a repeated option)."""
    return _argv(
        "train",
        "toy",
        "--steps",
        "64",
        "--n-steps",
        "32",
        "--batch-size",
        "32",
        "--no-progress",
        "--out",
        "{tmp}/t",
        *options,
    )


TRAIN_CASES: list[Case] = [
    Case(f"train:{name}", make, frags)
    for name, make, frags in [
        ("out-is-file", lambda t: [*_train()(t), "--out", str(_file(t))], ("--out", "afile", "is a file")),
        ("out-below-file", lambda t: [*_train()(t), "--out", str(_file(t) / "sub")], ("--out", "afile")),
        ("out-in-proc", _train("--out", "/proc/openg2g-fuzz"), ("--out /proc/openg2g-fuzz", "cannot write")),
        ("out-empty", _train("--out", ""), ("--out", "empty")),
        ("lr-nan", _train("--lr", "nan"), ("--lr nan", "finite")),
        ("lr-inf", _train("--lr", "inf"), ("--lr inf", "finite")),
        ("lr-negative", _train("--lr", "-0.1"), ("--lr -0.1", "greater than or equal to 0")),
        ("gamma-5", _train("--gamma", "5"), ("--gamma 5", "less than or equal to 1")),
        ("gamma-negative", _train("--gamma", "-0.5"), ("--gamma -0.5",)),
        ("batch-size-zero", _train("--batch-size", "0"), ("--batch-size 0", "greater than or equal to 1")),
        ("batch-size-one-ppo", _train("--batch-size", "1"), ("--batch-size 1", "ppo needs minibatches")),
        ("n-steps-zero", _train("--n-steps", "0"), ("--n-steps 0", "greater than or equal to 1")),
        ("n-steps-one-ppo", _train("--n-steps", "1"), ("--n-steps 1", "ppo needs rollouts")),
        ("steps-zero", _train("--steps", "0"), ("--steps 0",)),
        ("eval-episodes-negative", _train("--eval-episodes", "-1"), ("--eval-episodes -1",)),
        ("eval-episodes-beyond-held-out", _train("--eval-episodes", "9"), ("--eval-episodes", "held-out", "n_eval")),
        ("eval-every-negative", _train("--eval-every", "-5"), ("--eval-every -5", "greater than or equal to 0")),
        ("val-episodes-zero", _train("--val-episodes", "0"), ("--val-episodes 0", "greater than or equal to 1")),
        (
            "val-episodes-unbounded",
            _train("--val-episodes", "100000"),
            ("--val-episodes 100000", "less than or equal to 100"),
        ),
        ("n-envs-zero", _train("--n-envs", "0"), ("--n-envs 0",)),
        ("n-envs-unbounded", _train("--n-envs", "100000"), ("--n-envs 100000", f"at most {max_processes()}")),
        ("seed-negative", _train("--seed", "-1"), ("--seed -1",)),
        ("seed-beyond-32-bits", _train("--seed", str(2**32)), (f"--seed {2**32}",)),
        ("checkpoint-every-zero", _train("--checkpoint-every", "0"), ("--checkpoint-every 0",)),
        ("ent-coef-nan", _train("--ent-coef", "nan"), ("--ent-coef nan", "finite")),
        ("ent-coef-negative", _train("--ent-coef", "-1"), ("--ent-coef -1",)),
        ("net-arch-zero", _train("--net-arch", "0"), ("--net-arch 0",)),
        ("net-arch-huge", _train("--net-arch", "64", "10000000"), ("--net-arch 10000000", "4096")),
        ("critic-warmup-negative", _train("--critic-warmup", "-3"), ("--critic-warmup -3",)),
        (
            "critic-warmup-sac",
            _train("--algo", "sac", "--env", "action=box", "--critic-warmup", "3"),
            ("--critic-warmup 3", "actor-critic"),
        ),
    ]
]


def _small_sweep(*options: str) -> Make:
    """A two-run sweep of 1 s runs, with ``options``."""

    def make(tmp: Path) -> list[str]:
        base = _scenario_file(tmp, "duration_s=1", "events=[]", "outputs.plots=false")
        sweep = _dump(
            tmp / "sweep.yaml", {"name": "fz", "base": str(base), "parameters": [{"product": {"seed": [1, 2]}}]}
        )
        return ["sweep", str(sweep), "--out", str(tmp / "out"), "--no-progress", *options]

    return make


OTHER_NUMBER_CASES: list[Case] = [
    Case(f"numbers:{name}", make, frags)
    for name, make, frags in [
        ("sweep-workers-zero", _small_sweep("--workers", "0"), ("--workers", "at least 1")),
        ("sweep-workers-unbounded", _small_sweep("--workers", "100000"), ("--workers", f"at most {max_processes()}")),
        ("sweep-retries-negative", _small_sweep("--retries", "-1"), ("retries", "from 0 to 10, got -1")),
        ("sweep-retries-unbounded", _small_sweep("--retries", "1000000"), ("retries", "from 0 to 10, got 1000000")),
        (
            "evaluate-held-out-negative",
            _argv("evaluate", "ieee13_ppo", "--scenarios", "ieee13_rl", "--held-out", "-1", "--out", "{tmp}/e"),
            ("--held-out -1", ">= 0"),
        ),
    ]
]

# ---------------------------------------------------------------- controller modules that end the process

_MODULES = {
    "keyboard-interrupt": ("raise KeyboardInterrupt\n", "KeyboardInterrupt"),
    "sys-exit-0": ("import sys\nsys.exit(0)\n", "sys.exit(0)"),
}
"""A controller module's text, and what the error must say it did."""


def _controller_files(tmp: Path, body: str) -> dict[str, Path]:
    """``ctrl.py`` holding ``body``, a 1 s scenario whose controller it is, and a sweep, a suite and
    two study files that use it."""
    (tmp / "ctrl.py").write_text(body)
    scenario = _scenario_file(
        tmp, "duration_s=1", "events=[]", "outputs.plots=false", "controllers=[{kind: ctrl.py:Ctrl}]"
    )
    study: dict[str, Any] = {"name": "fz", "base": str(scenario), "controllers": ["ctrl.py:Ctrl"], "duration_s": 12}
    return {
        "scenario": scenario,
        "sweep": _dump(
            tmp / "sweep.yaml", {"name": "fz", "base": str(scenario), "parameters": [{"product": {"seed": [1, 2]}}]}
        ),
        "suite": _dump(
            tmp / "suite.yaml",
            {
                "suite": "fz",
                "controllers": [{"name": "mine", "kind": f"{tmp / 'ctrl.py'}:Ctrl"}],
                "cases": [
                    {"name": "a", "scenario": str(_scenario_file(tmp, "duration_s=1", "events=[]", name="case.yaml"))}
                ],
            },
        ),
        "hosting": _dump(
            tmp / "hosting.yaml", {"study": "hosting_capacity", "buses": ["671"], "max_mw": 2, "settle_s": 1, **study}
        ),
        "siting": _dump(tmp / "siting.yaml", {"study": "siting", "candidates": ["671"], **study}),
    }


def _module(body: str, command: str) -> Make:
    def make(tmp: Path) -> list[str]:
        files = _controller_files(tmp, body)
        out = ["--out", str(tmp / "out")]
        return {
            "validate-scenario": ["validate", str(files["scenario"])],
            "run": ["run", str(files["scenario"]), *out, "--no-progress"],
            "validate-sweep": ["validate", str(files["sweep"])],
            "sweep": ["sweep", str(files["sweep"]), *out, "--engine", "serial", "--no-progress"],
            "validate-suite": ["validate", str(files["suite"])],
            "benchmark": ["benchmark", str(files["suite"]), *out, "--engine", "serial", "--no-progress"],
            "validate-study": ["validate", str(files["hosting"])],
            "hosting-capacity": ["study", "hosting-capacity", str(files["hosting"]), *out, "--engine", "serial"],
            "hosting-capacity-option": [
                "study",
                "hosting-capacity",
                str(files["scenario"]),
                "--controller",
                "ctrl.py:Ctrl",
                "--duration-s",
                "12",
                "--buses",
                "671",
                *out,
                "--engine",
                "serial",
            ],
            "siting": ["study", "siting", str(files["siting"]), *out, "--engine", "serial"],
        }[command]

    return make


MODULE_COMMANDS = (
    "validate-scenario",
    "run",
    "validate-sweep",
    "sweep",
    "validate-suite",
    "benchmark",
    "validate-study",
    "hosting-capacity",
    "hosting-capacity-option",
    "siting",
)

MODULE_CASES: list[Case] = [
    Case(f"controller-module:{kind}:{command}", _module(body, command), ("{tmp}/ctrl.py", "importing", said))
    for kind, (body, said) in _MODULES.items()
    for command in MODULE_COMMANDS
]


@pytest.mark.parametrize("case", [*TRAIN_CASES, *OTHER_NUMBER_CASES, *MODULE_CASES], ids=lambda c: c.id)
def test_hostile_input_is_an_input_error(case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run_result(case.make(tmp_path), capsys)
    assert code == 2, f"exit {code}; stderr: {err}"
    assert "error:" in err, err
    assert "Traceback" not in err, err
    for fragment in case.expect:
        assert fragment.replace("{tmp}", str(tmp_path)) in err, f"{fragment!r} not in {err!r}"


def test_the_controller_module_harness_runs_a_good_module(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The harness itself: the same files with a module that imports cleanly are valid (so each
    refusal above is the module's)."""
    files = _controller_files(tmp_path, "from openg2g.controllers.noop import NoopController as Ctrl\n")
    code, err = _run_result(
        ["validate", *(str(files[k]) for k in ("scenario", "sweep", "suite", "hosting", "siting"))], capsys
    )
    assert code == 0, err


def _limit_file_size() -> None:
    # the child's files stop growing at 16 kB (EFBIG; Python ignores SIGXFSZ): a disk that fills
    # while training writes its first checkpoint, with nothing of this machine's filled
    resource.setrlimit(resource.RLIMIT_FSIZE, (16_000, resource.RLIM_INFINITY))


@pytest.mark.slow
def test_a_disk_that_fills_while_training_ends_with_one_error_naming_the_folder(tmp_path: Path) -> None:
    out = tmp_path / "t"
    argv = _train("--eval-episodes", "0")(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "openg2g", *argv],
        preexec_fn=_limit_file_size,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=600,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert f"error: {out}: training stopped: cannot write its files (File too large)" in done.stderr, done.stderr


@pytest.mark.slow
def test_the_train_cases_start_from_a_run_that_trains(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The harness itself: unedited, the train command line trains and writes its policy."""
    code, err = _run_result(_train("--eval-episodes", "0")(tmp_path), capsys)
    assert code == 0, err
    assert (tmp_path / "t" / "policy.zip").is_file()
