"""A live site against a real server process: ``transformers serve`` of the tiny model built here.

The server tests are slow (the server's start and its first batch take 20-40 s on a small CPU);
the rest (what is measured, the checks that need no server) are fast.
"""

from __future__ import annotations

import importlib.util
import math
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from openg2g.core.errors import ScenarioError, SimulationError
from openg2g.datacenter.live.demo import DemoServer, free_port
from openg2g.datacenter.live.load import InFlightLog, LiveServerError, TokenLog, _chunk
from openg2g.datacenter.live.power import PowerSourceError
from openg2g.scenario.loader import load_scenario
from openg2g.scenario.preflight import check_start
from openg2g.scenario.run import run_scenario

SCENARIO = "live_ieee13_ofo"
_HAS_SERVER = all(importlib.util.find_spec(m) is not None for m in ("torch", "transformers", "fastapi", "uvicorn"))
needs_server = pytest.mark.skipif(not _HAS_SERVER, reason="needs the live extra (transformers serve) and PyTorch")


def _endpoints(url: str) -> list[str]:
    return [f"datacenters.0.models.{j}.endpoints.0.url={url}" for j in range(2)]


def _plain(url: str, duration_s: float, *more: str) -> list[str]:
    """The bundled live scenario without its controller and tap events: only what ``more`` adds."""
    return [f"duration_s={duration_s}", "controllers=[]", "events=[]", *_endpoints(url), *more]


# ---------------------------------------------------------------------------------------- no server
def test_in_flight_mean_is_the_time_average_of_the_count():
    log = InFlightLog()
    log.change(+2, t=10.0)  # 2 from 10 s
    log.change(+1, t=11.0)  # 3 from 11 s
    log.change(-3, t=13.0)  # 0 from 13 s
    assert log.mean(10.0, 11.0) == pytest.approx(2.0)
    assert log.mean(10.0, 14.0) == pytest.approx((2 * 1 + 3 * 2 + 0 * 1) / 4)
    assert log.mean(9.0, 10.0) == 0.0  # before the first change
    assert log.mean(12.0, 12.0) == 3.0


def test_token_windows_count_arrivals_and_keep_only_inter_token_latencies():
    tokens = TokenLog()
    for t, itl in [(1.0, math.nan), (1.05, 0.05), (1.2, 0.15), (2.0, math.nan), (2.01, 0.01)]:
        tokens.add(t, itl)
    first = tokens.window(1.0, 1.2)  # (1.0, 1.2]: the first token at 1.0 is outside
    assert first.count == 2 and list(first.itl_s) == [0.05, 0.15]
    second = tokens.window(1.5, 2.5)
    assert second.count == 2 and list(second.itl_s) == [0.01]  # a request's first token is no ITL


def test_stream_chunks_of_both_apis_and_their_ends():
    assert _chunk(b'data: {"choices":[{"delta":{"content":"Hi"},"index":0}]}', "chat") == ("Hi", False)
    assert _chunk(b'data: {"choices":[{"text":" there","index":0}]}', "completions") == (" there", False)
    assert _chunk(b'data: {"choices":[{"delta":{},"finish_reason":"length"}]}', "chat") == ("", True)
    assert _chunk(b"data: [DONE]", "chat") == ("", True)
    assert _chunk(b": keep-alive", "chat") == ("", False)
    with pytest.raises(Exception, match="the server sent an error"):
        _chunk(b'data: {"error": {"message": "model not loaded"}}', "chat")


def test_a_scenario_check_does_not_contact_the_servers():
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    check_start(load_scenario(SCENARIO, _endpoints(url)))


def test_a_live_site_takes_batch_sizes_only_and_only_measured_ones():
    loaded = load_scenario(
        SCENARIO, ["events=[{t_s: 5, command: set_replicas, site: dc1, model: Llama-3.1-8B, replicas: 10}]"]
    )
    with pytest.raises(ScenarioError, match="takes set_batch_size only, not SetReplicas"):
        check_start(loaded)
    loaded = load_scenario(
        SCENARIO, ["events=[{t_s: 5, command: set_batch_size, site: dc1, model: Llama-3.1-8B, batch_size: 64}]"]
    )
    with pytest.raises(ScenarioError, match=r"batch size 64 is not one of \[8, 16, 32\]"):
        check_start(loaded)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("datacenters.0.power={source: nvml}", "power source nvml needs the 1 GPU id"),
        ("datacenters.0.models.0.replicas=0", "0 simulated replicas cannot stand on 1 real ones"),
        ("datacenters.0.training={gpus: 8, start_s: 0, end_s: 10}", "training is for a replay site"),
        ('datacenters.0.models.0.endpoints=[{url: "127.0.0.1:8000"}]', "need an http:// or https:// URL"),
        ("datacenters.0.power={source: zeusd}", "source zeusd needs url"),
    ],
)
def test_a_live_site_spec_refuses_what_cannot_run(override: str, message: str):
    with pytest.raises(ScenarioError, match=message):
        load_scenario(SCENARIO, [override])


def test_no_server_at_an_endpoint_is_a_clear_error(tmp_path: Path):
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(LiveServerError, match=rf"no server at {url}: connection refused"):
        run_scenario(load_scenario(SCENARIO, _plain(url, 2)), tmp_path / "out")


# ---------------------------------------------------------------------------------------- a real server
@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    with DemoServer(tmp_path_factory.mktemp("tiny")) as running:
        yield running


@pytest.mark.slow
@needs_server
def test_batch_size_commands_move_the_requests_in_flight_and_the_measurements(server: DemoServer, tmp_path: Path):
    events = (
        "events=[{t_s: 4, command: set_batch_size, site: dc1, model: Llama-3.1-8B, batch_size: 8},"
        " {t_s: 8, command: set_batch_size, site: dc1, model: Llama-3.1-8B, batch_size: 16}]"
    )
    start = time.monotonic()
    result = run_scenario(load_scenario(SCENARIO, [*_plain(server.url, 12), events]), tmp_path / "out")
    assert time.monotonic() - start >= 12  # real time: the run takes at least its simulated time
    assert result.summary["status"] == "complete"
    assert result.summary["realtime"]["instants"] == 12
    models = pd.read_parquet(tmp_path / "out" / "models")
    small = models[models["model"] == "Llama-3.1-8B"].set_index("t_s")
    # within one control step (1 s) of each command the servers run the new batch (the step ending
    # at a command's instant reports the commanded batch already, as a replay site's does)
    for (t0, t1), batch in {(1.0, 3.9): 32, (5.0, 7.9): 8, (9.0, 12.0): 16}.items():
        window = small[(small.index > t0 + 1e-9) & (small.index <= t1 + 1e-9)]
        assert (window["batch_size"] == batch).all()
        assert window["in_flight"].mean() == pytest.approx(batch, abs=0.5)
    # what the streams measured: inter-token latencies and tokens, scaled to the simulated replicas
    # (a step of 0.1 s may see no token on a busy CPU: every 2 s do)
    assert small["itl_s"].groupby(np.ceil(small.index / 2)).count().min() > 0
    assert (small["itl_s"].dropna() > 0).all()
    assert small["throughput_tok_s"].sum() > 0
    assert small["measured_power_w"].isna().all()  # power source profile: nothing is metered
    large = models[models["model"] == "Llama-3.1-70B"]
    assert large["in_flight"].mean() == pytest.approx(32, abs=0.5)  # untouched
    # the profile's power per replica follows the batch with each replica's delay (< 10 s)
    assert small.loc[12.0, "power_w"] < small.loc[4.0, "power_w"]


@pytest.mark.slow
@needs_server
@pytest.mark.parametrize(("rate", "low", "high"), [(0.5, 0.0, 4.0), (500.0, 7.5, 8.5)])
def test_arrivals_at_a_rate_wait_for_the_batch_size(server: DemoServer, tmp_path: Path, rate, low, high):
    """0.5 requests/s per replica, each a second or less: far fewer in flight than the batch of 8;
    500/s: more than 8 streams can serve, so the queue keeps exactly the batch size in flight."""
    batches = ["datacenters.0.models.0.batch_size=8", "datacenters.0.models.1.batch_size=8"]
    arrivals = f"datacenters.0.requests.arrival_rate_per_s={rate}"
    result = run_scenario(load_scenario(SCENARIO, [*_plain(server.url, 8), arrivals, *batches]), tmp_path / "out")
    assert result.summary["status"] == "complete"
    models = pd.read_parquet(tmp_path / "out" / "models")
    in_flight = models[models["t_s"] > 2].groupby("model", observed=True)["in_flight"].mean()
    assert ((in_flight > low) & (in_flight < high)).all(), in_flight
    assert models["throughput_tok_s"].sum() > 0


@pytest.mark.slow
@needs_server
def test_a_model_the_server_does_not_serve_is_named(server: DemoServer, tmp_path: Path):
    loaded = load_scenario(SCENARIO, [*_plain(server.url, 2), "datacenters.0.models.1.served_model=llama-4"])
    with pytest.raises(LiveServerError, match=r"does not serve 'llama-4'; it serves 'openg2g-tiny'"):
        run_scenario(loaded, tmp_path / "out")


@pytest.mark.slow
@needs_server
def test_an_unreadable_power_meter_is_refused(server: DemoServer, tmp_path: Path):
    if importlib.util.find_spec("pynvml") is not None and Path("/proc/driver/nvidia").exists():
        pytest.skip("this machine has an NVIDIA driver: NVML can be read")
    metered = [
        "datacenters.0.power={source: nvml}",
        f'datacenters.0.models.0.endpoints=[{{url: "{server.url}", gpus: ["0"]}}]',
        f'datacenters.0.models.1.endpoints=[{{url: "{server.url}", gpus: ["1", "2", "3", "4"]}}]',
    ]
    with pytest.raises(PowerSourceError, match="NVML on this machine: cannot read GPUs"):
        run_scenario(load_scenario(SCENARIO, [*_plain(server.url, 2), *metered]), tmp_path / "out")


@pytest.mark.slow
@needs_server
def test_a_scenario_faster_than_real_time_can_run_stops_saying_so(server: DemoServer, tmp_path: Path):
    fast = "periods={datacenter_s: 0.001, grid_s: 0.001, control_s: 0.001}"
    loaded = load_scenario(SCENARIO, [*_plain(server.url, 30), fast, "datacenters.0.max_lag_s=0.5"])
    with pytest.raises(SimulationError, match="behind the wall clock .* cannot simulate the scenario in real time"):
        run_scenario(loaded, tmp_path / "out")
    summary = pd.read_json(tmp_path / "out" / "summary.json", typ="series")
    assert summary["status"] == "failed"


@pytest.mark.slow
@needs_server
def test_a_server_that_stops_mid_run_is_named_and_the_rows_before_are_kept(tmp_path: Path):
    import threading

    with DemoServer(tmp_path / "server") as doomed:  # this test's own server, stopped during the run
        loaded = load_scenario(SCENARIO, _plain(doomed.url, 30))
        # the server is warm (DemoServer streamed its first request): the run starts within a second
        on_start = lambda sim: threading.Timer(5.0, doomed.stop).start()
        with pytest.raises(LiveServerError, match=rf"the server at {doomed.url} failed at t = \d+(\.\d+)? s"):
            run_scenario(loaded, tmp_path / "out", on_start=on_start)
    models = pd.read_parquet(tmp_path / "out" / "models")
    assert models["t_s"].max() >= 2.0  # the steps before the failure are in the tables
    assert np.isfinite(models["in_flight"]).all()
