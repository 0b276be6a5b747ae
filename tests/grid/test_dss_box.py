"""OpenDSS scripts in a box: what a ``.dss`` file may not do is refused by name before the engine
runs, through every command that reads one (``powerflow``, ``validate``, ``feeders check``); the
engine runs in a worker process under the caller's resource limits, never raising one, with a
timeout and a memory cap for every read; every failure of it is a clear error naming the file;
and its scratch folder is removed however the read ends."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from openg2g.cli.main import main
from openg2g.core.errors import FeederError
from openg2g.grid.feeder import opendss
from openg2g.grid.feeder.opendss import read_opendss
from tests.grid.conftest import shared_data
from tests.test_fuzz_hostile import TINY_DSS

REPO = Path(__file__).resolve().parents[2]

TINY = TINY_DSS
"""A small feeder OpenDSS solves (lines 1 to 9)."""


def _feeder(folder: Path, text: str | bytes, name: str = "master.dss") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


def _scenario(folder: Path, feeder: Path) -> Path:
    """A one-second scenario on ``feeder`` with a datacenter at its bus b2."""
    site = {
        "name": "dc1",
        "bus": "b2",
        "models": [{"model": "Llama-3.1-8B", "gpus_per_replica": 1, "replicas": 10, "batch_size": 128}],
    }
    data = {"name": "tiny", "duration_s": 1, "grid": {"feeder": str(feeder)}, "datacenters": [site]}
    path = folder / "scenario.yaml"
    path.write_text(yaml.safe_dump(data | {"outputs": {"plots": False}}))
    return path


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    return code, err


@pytest.mark.parametrize("command", ["powerflow", "validate", "feeders check"])
def test_a_file_that_would_write_outside_is_refused_by_name_and_writes_nothing(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The canary: an ``Export`` to an absolute path, ``Save Circuit Dir=``, ``Set DataPath=`` and
    ``CD``, each into a folder of its own, wrote there (rc 0, nothing said); each is now named with
    its file and line, and the folder stays empty."""
    canary = tmp_path / "canary"
    canary.mkdir()
    master = _feeder(
        tmp_path / "feeder",
        TINY
        + f"Export voltages {canary}/v.csv\n"
        + f"Save Circuit Dir={canary}/saved\n"
        + f"Set DataPath={canary}\n"
        + "Export currents\n"
        + f"CD {canary}\n"
        + "Export powers\n",
    )
    argv = {
        "powerflow": ["powerflow", str(master)],
        "validate": ["validate", str(_scenario(tmp_path, master))],
        "feeders check": ["feeders", "check", str(master)],
    }[command]
    code, err = _cli(argv, capsys)
    assert code == 2, err
    for line in (
        f"master.dss line 10: Export voltages {canary}/v.csv: writes the file it names",
        f"master.dss line 11: Save Circuit Dir={canary}/saved: writes a copy of the circuit into a folder it creates",
        f"master.dss line 12: Set DataPath={canary}: Datapath moves the folder OpenDSS reads from and writes to",
        f"master.dss line 14: CD {canary}: moves the folder OpenDSS reads from and writes to",
    ):
        assert line in err, err
    assert "4 lines of this file, before OpenDSS ran it" in err
    assert list(canary.iterdir()) == []


def test_what_the_engine_writes_stays_in_its_scratch_folder(tmp_path: Path) -> None:
    """``Show`` and ``Export`` without a file name (the IEEE 4-bus YYD master has both) write into the
    engine's output folder: the scratch folder, never beside the feeder or in the working folder."""
    master = _feeder(tmp_path / "feeder", TINY + "Show voltages\nExport currents\nPlot circuit\n")
    cwd = os.getcwd()
    assert {ld.name for ld in read_opendss(master).loads} == {"ld1"}
    assert sorted(p.name for p in master.parent.iterdir()) == ["master.dss"]
    assert os.getcwd() == cwd


@pytest.mark.parametrize("source", ["tiny", "ieee13"])
def test_a_file_is_read_under_an_address_space_limit(source: str, tmp_path: Path) -> None:
    """``ulimit -v 4000000`` (shared clusters): the worker lowers its limits only, so it reads the
    file where it used to refuse every one as an engine crash."""
    if source == "tiny":
        master = _feeder(tmp_path, TINY)
    else:
        master = shared_data() / "opendss-test-cases" / "IEEETestCases" / "13Bus" / "IEEE13Nodeckt.dss"
        if not master.is_file():
            pytest.skip(f"the OpenDSS test collection is not at {master.parents[2]}")

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (4_000_000 * 1024, 4_000_000 * 1024))

    done = subprocess.run(
        [sys.executable, "-m", "openg2g", "powerflow", str(master)],
        capture_output=True,
        text=True,
        cwd=REPO,
        preexec_fn=cap,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "crashed" not in done.stderr


def test_the_worker_only_lowers_its_limits() -> None:
    """A limit lower than the cap stays; the soft one never rises above the hard one."""
    program = (
        "import resource; from openg2g.core.limits import lower_limit; AS = resource.RLIMIT_AS; "
        "resource.setrlimit(AS, (3 << 30, 5 << 30)); lower_limit(AS, 8 << 30); print(resource.getrlimit(AS)); "
        "lower_limit(AS, 4 << 30); print(resource.getrlimit(AS)); lower_limit(AS, 2 << 30); "
        "print(resource.getrlimit(AS))"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, cwd=REPO, check=True)
    assert done.stdout.split("\n")[:3] == [
        f"({3 << 30}, {5 << 30})",
        f"({3 << 30}, {4 << 30})",
        f"({2 << 30}, {2 << 30})",
    ]


def test_every_engine_failure_is_a_clear_error_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through ``feeders check``, which ran the engine in its own process without a timeout or a
    memory cap: a redirect cycle hidden behind ``CD`` (openg2g itself segfaulted, rc -11), redirects
    nested 1000 deep (a RecursionError), binary garbage; each a clear error, rc 2."""
    cycle = _feeder(tmp_path / "cycle", "cd sub\nRedirect master.dss\n")
    _feeder(tmp_path / "cycle" / "sub", "Redirect master.dss\n")
    deep = tmp_path / "deep"
    for k in range(1000):
        _feeder(deep, f"Redirect d{k + 1}.dss\n", f"d{k}.dss")
    _feeder(deep, TINY, "d1000.dss")
    garbage = _feeder(tmp_path / "garbage", bytes(range(256)) * 8)
    for path, expected in (
        (cycle, "master.dss line 1: cd sub: moves the folder OpenDSS reads from and writes to"),
        (deep / "d0.dss", "files redirecting one to the next more than 100 deep (d99.dss line 1 opens the next one)"),
        (garbage, '[file: "' + str(garbage) + '", line: 1]'),
    ):
        code, err = _cli(["feeders", "check", str(path)], capsys)
        assert code == 2 and err.startswith(f"error: {path}: "), err
        assert expected in err, err


def test_a_name_in_latin1_bytes_is_read(tmp_path: Path) -> None:
    """A file saved as Latin-1 (a load named ``café``): its names are the engine's bytes, read as
    Latin-1, where they were reported as an engine crash (a UTF-8 decoding error in the worker)."""
    master = _feeder(tmp_path, TINY.encode().replace(b"New Load.ld1", b"New Load.caf\xe9"))
    assert [ld.name for ld in read_opendss(master).loads] == ["café"]


def test_no_scratch_folder_outlives_a_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Done, refused, timed out, the worker killed by a signal, interrupted: the worker's scratch
    folder (``openg2g-opendss-*`` in the temporary folder) is gone each time."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    monkeypatch.setenv("TMPDIR", str(scratch))  # the worker's own temporary folder too
    master = _feeder(tmp_path / "feeder", TINY + "Show voltages\n")
    read_opendss(master)
    assert list(scratch.iterdir()) == []
    with pytest.raises(FeederError, match="writes the file it names"):
        read_opendss(_feeder(tmp_path / "refused", TINY + "Export voltages /v.csv\n"))
    assert list(scratch.iterdir()) == []
    years = _feeder(tmp_path / "slow", TINY + "Solve mode=yearly number=10000000\n")  # a minute of solves
    with pytest.raises(FeederError, match=r"did not finish reading the file in 3 s"):
        read_opendss(years, timeout_s=3)
    assert list(scratch.iterdir()) == []
    monkeypatch.setattr(opendss, "_WORKER", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    with pytest.raises(FeederError, match=r"engine crashed reading the file \(signal SIGSEGV\)"):
        read_opendss(master)
    assert list(scratch.iterdir()) == []
    interrupting = "import os, signal, time; os.kill(os.getppid(), signal.SIGINT); time.sleep(60)"
    monkeypatch.setattr(opendss, "_WORKER", interrupting)
    with pytest.raises(KeyboardInterrupt):
        read_opendss(master)
    assert list(scratch.iterdir()) == []
