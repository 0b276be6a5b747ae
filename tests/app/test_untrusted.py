"""The app is safe to open (issue 42, parts 1 and 5), checked over HTTP with its Flask test client:
it serves only regular files inside the runs folder (symbolic links resolved), reads nothing of a
run folder holding links out, answers a YAML alias bomb and crafted what-if values at once with a
message (never a server error), bounds its what-if queue, warns when it listens beyond this
machine, and ends its what-if runs when it is stopped.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dash
import pytest

from openg2g.app import create_app
from openg2g.app.data import AppError, list_runs, resolve_run
from openg2g.app.whatif import KEEP
from openg2g.cli.main import main
from openg2g.core.folder_lock import lock_held
from tests.hostile_runs import BOMB

STATES = (
    "wi-scenario",
    "wi-bus",
    "wi-replicas",
    "wi-batch",
    "wi-controller",
    "wi-params",
    "wi-duration",
    "wi-training",
    "wi-training-gpus",
    "wi-training-start",
    "wi-training-end",
    "wi-taps",
)
"""The what-if form's inputs, in the order of its callbacks' states."""

FORM = {"wi-scenario": "ieee13_none", "wi-controller": KEEP, "wi-taps": KEEP}


def submit_request(app: dash.Dash, values: dict[str, Any]) -> dict[str, Any]:
    """The request the page sends when "run" is clicked with the form holding ``values`` (any JSON)."""
    output = next(k for k, v in app.callback_map.items() if v["inputs"][0]["id"] == "wi-run")
    state: list[Any] = []
    for name in STATES:
        value = values.get(name)
        if name in ("wi-replicas", "wi-batch"):  # pattern-matching inputs: one entry per model
            state.append(
                [{"id": {"index": k, "type": name}, "property": "value", "value": v} for k, v in enumerate(value or [])]
            )
        else:
            state.append({"id": name, "property": "value", "value": value})
    outputs = [dict(zip(("id", "property"), o.split(".", 1))) for o in output.strip(".").split("...")]
    return {
        "output": output,
        "outputs": outputs,
        "inputs": [{"id": "wi-run", "property": "n_clicks", "value": 1}],
        "changedPropIds": ["wi-run.n_clicks"],
        "state": state,
    }


def submitted(client: Any, app: dash.Dash, values: dict[str, Any]) -> str:
    """The status line after submitting ``values`` (the run queued) or else the message line
    (why not); the answer must be a 200."""
    response = client.post("/_dash-update-component", json=submit_request(app, {**FORM, **values}))
    assert response.status_code == 200, response.data[:300]
    lines = response.get_json()["response"]
    return str(lines["wi-status"]["children"] or lines["wi-errors"]["children"])


@pytest.fixture
def app_over(tmp_path: Path) -> Iterator[tuple[dash.Dash, Any, Path]]:
    root = tmp_path / "runs"
    root.mkdir()
    app, queue = create_app(root)
    try:
        yield app, app.server.test_client(), root
    finally:
        queue.close()


# ------------------------------------------------------------------------------ links out
def test_a_link_out_of_the_runs_folder_is_refused_with_a_message(app_over: tuple[dash.Dash, Any, Path]) -> None:
    _, client, root = app_over
    outside = root.parent / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    (root / "run").mkdir()
    (root / "run" / "summary.json").write_text("{}")
    os.symlink(outside / "secret.txt", root / "run" / "notes.txt")
    os.symlink(outside, root / "elsewhere")
    os.symlink("/etc/passwd", root / "passwd")
    os.symlink(root / "run" / "summary.json", root / "summary_link.json")  # a link inside: served
    for path in ("/files/run/notes.txt", "/files/elsewhere/secret.txt", "/files/passwd"):
        response = client.get(path)
        assert response.status_code == 403, path
        assert response.data == b"a symbolic link out of the runs folder: not served\n"
    assert client.get("/files/summary_link.json").data == b"{}"
    assert client.get("/files/run").status_code == 404  # a folder is no file


def test_a_run_folder_holding_links_out_is_listed_and_not_read(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    (root / "sent").mkdir(parents=True)
    os.symlink("/etc/passwd", root / "sent" / "summary.json")
    (root / "sent" / "scenario.yaml").write_text("name: sent\n")
    assert [(r.run_id, r.status) for r in list_runs(root)] == [("sent", "outside")]
    with pytest.raises(AppError, match="summary.json in it are symbolic links out of the runs folder"):
        resolve_run(root, "sent")


# ----------------------------------------------------------------------------- what-if input
def test_a_yaml_alias_bomb_in_the_controller_params_is_refused_at_once(app_over: tuple[dash.Dash, Any, Path]) -> None:
    app, client, _ = app_over
    start = time.monotonic()
    text = submitted(client, app, {"wi-controller": "ofo", "wi-params": BOMB})
    assert time.monotonic() - start < 5
    assert text == (
        "controller params: the text is too big: more than 10,000 values once its YAML aliases are expanded "
        "(an alias bomb?)"
    )


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"wi-bus": 5}, "bus: Input should be a valid string"),
        ({"wi-scenario": ["ieee13_none"]}, "scenario: Input should be a valid string"),
        ({"wi-duration": [1]}, "duration_s: Input should be a valid number"),
        ({"wi-duration": "abc"}, "duration_s: Value error, not a number: 'abc'"),
        ({"wi-duration": "nan"}, "duration_s: Input should be a finite number"),
        ({"wi-replicas": [1] * 9}, "replicas: 9 values for the 5 models of the scenario's first site"),
        ({"wi-batch": [{"a": 1}]}, "batch_sizes.0: Input should be a valid number"),
        ({"wi-params": 5}, "params: Input should be a valid string"),
        ({"wi-training": 5}, "training: Input should be a valid list"),
        ({"wi-training": ["on"], "wi-training-gpus": [1]}, "training_gpus: Input should be a valid number"),
        ({"wi-controller": "ofo", "wi-params": "kp: 2024-01-01"}, "controller params: only numbers, text"),
        ({"wi-controller": "ofo", "wi-params": "kp: " + "9" * 5000}, "controller params: the text is not readable"),
        ({"wi-duration": 1e300}, "duration_s: Value error, 1e+300 s is longer than a year"),
    ],
)
def test_crafted_what_if_values_get_a_message_not_a_server_error(
    app_over: tuple[dash.Dash, Any, Path], values: dict[str, Any], message: str
) -> None:
    app, client, _ = app_over
    assert message in submitted(client, app, values)


def test_the_what_if_queue_is_bounded_and_ends_with_the_app(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    root.mkdir()
    app, queue = create_app(root, max_running=1, max_queued=1)
    client = app.server.test_client()
    try:
        assert submitted(client, app, {"wi-duration": 3600}) == "queued as #1: whatif/ieee13_none-001"  # runs
        assert submitted(client, app, {"wi-duration": 3600}) == "queued as #2: whatif/ieee13_none-002"  # waits
        assert submitted(client, app, {"wi-duration": 3600}) == (
            "the what-if queue is full: 1 runs are waiting to start (at most 1); cancel one or wait until one starts"
        )
        assert [j.state for j in queue.jobs()] == ["queued", "running"]
        process = queue._jobs[0].process
    finally:
        ended = queue.close()
    assert ended == ["whatif/ieee13_none-001", "whatif/ieee13_none-002"]
    assert process is not None and process.poll() is not None
    assert [j.state for j in queue.jobs()] == ["cancelled", "cancelled"]


# ------------------------------------------------------------------------------------ the CLI
@pytest.mark.parametrize(("host", "warned"), [("0.0.0.0", True), ("127.0.0.1", False), ("localhost", False)])
def test_a_host_beyond_this_machine_is_warned_about(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], host: str, warned: bool
) -> None:
    monkeypatch.setattr(dash.Dash, "run", lambda self, **kwargs: None)
    assert main(["app", str(tmp_path), "--host", host]) == 0
    err = capsys.readouterr().err
    assert (f"warning: --host {host} is not a loopback address" in err) is warned
    if warned:
        assert "the app has no login" in err and "ssh -L 8050:127.0.0.1:8050" in err


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_sigterm_to_the_app_ends_its_running_what_if(tmp_path: Path) -> None:
    """The what-if runs in its own process; SIGTERM to the app stops it too (its summary says
    interrupted, its folder's lock is free), and the app exits."""
    import urllib.request

    root = tmp_path / "runs"
    root.mkdir()
    port = _free_port()
    app_process = subprocess.Popen(
        [sys.executable, "-m", "openg2g", "app", str(root), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(600):  # the server is up within 60 s
            try:
                urllib.request.urlopen(url + "/_dash-layout", timeout=5).read()
                break
            except OSError:
                time.sleep(0.1)
        same_app, same_queue = create_app(root)  # the same callbacks, for the request's output id
        same_queue.close()
        body = json.dumps(submit_request(same_app, {**FORM, "wi-duration": 3600})).encode()
        request = urllib.request.Request(url + "/_dash-update-component", body, {"Content-Type": "application/json"})
        answer = json.loads(urllib.request.urlopen(request, timeout=60).read())
        assert answer["response"]["wi-status"]["children"] == "queued as #1: whatif/ieee13_none-001"
        run = root / "whatif" / "ieee13_none-001"
        for _ in range(1200):  # the run writes its first summary within 120 s
            if (run / "summary.json").is_file() and lock_held(run) is True:
                break
            time.sleep(0.1)
        assert lock_held(run) is True
        app_process.send_signal(signal.SIGTERM)
        output = app_process.communicate(timeout=120)[0].decode()
    finally:
        if app_process.poll() is None:
            app_process.kill()
    assert app_process.returncode == 0, output
    assert "ended the what-if runs whatif/ieee13_none-001 with the app" in output
    assert lock_held(run) is False
    assert json.loads((run / "summary.json").read_text())["status"] == "interrupted"
