"""Sweeps on a Ray cluster that requires token authentication (``ray start --head`` with
``RAY_AUTH_MODE=token``): without the token, a message saying how to pass it; with the token in
``RAY_AUTH_TOKEN`` or a ``RAY_AUTH_TOKEN_PATH`` file, the sweep runs on the cluster.

The cluster is a real head node on this machine (a few seconds to start), with its own ports and
temp folder; each sweep runs as ``python -m openg2g`` in a fresh process, as a user would, because
Ray reads its authentication settings once per process.
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from openg2g.core.errors import G2GError
from openg2g.sweep.engines import RAY_AUTH_DOC, prepare_ray_auth

pytestmark = [
    pytest.mark.skipif(
        importlib.util.find_spec("ray") is None, reason="Ray is not installed (pip install 'openg2g-cosim[ray]')"
    ),
    pytest.mark.slow,  # a real token-protected head: 10-20 s of Ray start-up
]

# Ray tries the cluster for about 20 s before giving up; one second shows the same refusal
SHORT_CONNECT = {"RAY_gcs_server_port_wait_time_s": "1"}


def _free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_AUTH", "RAY_ADDRESS"))}
    return {**env, **extra}


@pytest.fixture(scope="module")
def secured_head():
    """``(address, token)`` of a one-CPU head node that requires token authentication."""
    token = secrets.token_hex(16)
    port, dashboard, agent, metrics = _free_ports(4)
    temp = tempfile.mkdtemp(prefix="rt", dir="/tmp")  # Ray's socket paths must stay short
    log = Path(temp) / "head.log"
    command = [
        *(str(Path(sys.executable).with_name("ray")), "start", "--head", "--block"),
        *("--port", str(port), "--dashboard-port", str(dashboard)),
        *("--dashboard-agent-listen-port", str(agent), "--metrics-export-port", str(metrics)),
        *("--temp-dir", temp, "--num-cpus", "1", "--include-dashboard", "false", "--disable-usage-stats"),
    ]
    with log.open("w") as out:
        head = subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=_clean_env(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token),
            start_new_session=True,  # its own process group: the teardown stops the head and all it started
        )
    try:
        deadline = time.monotonic() + 120
        while "Ray runtime started" not in log.read_text():
            if head.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the Ray head did not start:\n{log.read_text()[-2000:]}")
            time.sleep(0.5)
        yield f"127.0.0.1:{port}", token
    finally:
        # SIGKILL: on SIGTERM the head drains for up to 30 s; nothing of this throwaway cluster is kept
        try:
            os.killpg(head.pid, signal.SIGKILL)
        except ProcessLookupError:  # the head failed to start and took its group with it
            pass
        head.wait()
        shutil.rmtree(temp, ignore_errors=True)


def _sweep(tmp_path: Path, address: str, **env: str) -> subprocess.CompletedProcess:
    path = tmp_path / "sweep.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "auth",
                "base": "ieee13_none",
                "set": ["duration_s=1", "events=[]", "outputs.voltages=envelope"],
                "parameters": [{"product": {"seed": [0]}}],
            }
        )
    )
    command = [sys.executable, "-m", "openg2g", "sweep", str(path), "--out", str(tmp_path / "out")]
    command += ["--engine", "ray", "--address", address, "--no-progress"]
    return subprocess.run(command, check=False, env=_clean_env(**env), capture_output=True, text=True, timeout=300)


def test_no_token_says_how_to_pass_it(secured_head, tmp_path):
    address, _ = secured_head
    done = _sweep(tmp_path, address, **SHORT_CONNECT)
    assert done.returncode == 1, done.stderr
    assert (
        f"cannot connect to Ray at {address}: the cluster requires token authentication and this command "
        "sent no token (RAY_AUTH_MODE is not 'token'). Run this command with the cluster's token"
    ) in done.stderr
    assert "RAY_AUTH_TOKEN=<token>" in done.stderr and RAY_AUTH_DOC in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").glob("0*"))


def test_a_wrong_token_is_reported_as_rejected(secured_head, tmp_path):
    address, _ = secured_head
    done = _sweep(tmp_path, address, RAY_AUTH_TOKEN=secrets.token_hex(16), **SHORT_CONNECT)
    assert done.returncode == 1, done.stderr
    assert "the cluster rejected the token this command sent (from RAY_AUTH_TOKEN)" in done.stderr


def test_the_token_in_a_file_runs_the_sweep_on_the_cluster(secured_head, tmp_path):
    address, token = secured_head
    token_file = tmp_path / "token"
    token_file.write_text(token + "\n")
    done = _sweep(tmp_path, address, RAY_AUTH_TOKEN_PATH=str(token_file))  # RAY_AUTH_MODE left unset
    assert done.returncode == 0, done.stderr
    table = pd.read_parquet(tmp_path / "out" / "results.parquet")
    assert table["status"].tolist() == ["complete"]


def test_an_unreadable_token_file_is_named(tmp_path, monkeypatch):
    for key in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(tmp_path / "missing"))
    with pytest.raises(G2GError, match=f"RAY_AUTH_TOKEN_PATH={tmp_path / 'missing'}: cannot read the Ray token file"):
        prepare_ray_auth()
    (tmp_path / "empty").write_text("\n")
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(tmp_path / "empty"))
    with pytest.raises(G2GError, match="the Ray token file is empty"):
        prepare_ray_auth()
    assert "RAY_AUTH_MODE" not in os.environ
