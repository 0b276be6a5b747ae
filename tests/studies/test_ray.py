"""The Ray engine: same results table as the local pool, and a fast clear failure for a bad address."""

from __future__ import annotations

import importlib.util
import os
import socket
from pathlib import Path

import pandas as pd
import pytest

from openg2g.core.errors import G2GError
from openg2g.sweep import check_ray_address, run_sweep
from openg2g.testing import toy_run
from tests.studies.crashing import crashing_toy_run

HAVE_RAY = importlib.util.find_spec("ray") is not None
needs_ray = pytest.mark.skipif(not HAVE_RAY, reason="Ray is not installed (pip install 'openg2g-cosim[ray]')")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def local_ray():
    import ray

    # Ray's workers are new interpreters that import the run function by module: they find the
    # tests through PYTHONPATH (Ray would add only the driver's working folder, which a test
    # reading an OpenDSS file in this process may have moved; an editable install exposes openg2g alone)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()


@pytest.mark.slow
@needs_ray
def test_ray_and_local_engines_give_the_same_table(toy_sweep, tmp_path, local_ray):
    local = run_sweep(toy_sweep, tmp_path / "local", engine="local", workers=2, run_fn=toy_run).table
    on_ray = run_sweep(toy_sweep, tmp_path / "ray", engine="ray", workers=2, run_fn=toy_run).table
    pd.testing.assert_frame_equal(local, on_ray, check_exact=True)
    assert on_ray["status"].tolist().count("invalid") == 2


@pytest.mark.slow  # starts a local Ray cluster (5-15 s)
@needs_ray
def test_ray_retries_a_run_whose_worker_died(tmp_path, local_ray):
    from tests.studies.conftest import write_sweep

    path = write_sweep(tmp_path, [{"zip": {"toy.mw": [0.5, 1.0], "toy.crash": [None, "once"]}}])
    result = run_sweep(path, tmp_path / "out", engine="ray", retries=1, run_fn=crashing_toy_run)
    assert list(result.table["status"]) == ["complete", "complete"]


def test_unreachable_address_fails_fast_with_a_clear_message():
    port = _closed_port()
    with pytest.raises(G2GError, match=f"cannot reach a Ray cluster at 127.0.0.1:{port}"):
        check_ray_address(f"127.0.0.1:{port}", timeout_s=2)
    with pytest.raises(G2GError, match="not host:port"):
        check_ray_address("nonsense")


@needs_ray
def test_sweep_with_unreachable_address_fails_before_running(toy_sweep, tmp_path):
    port = _closed_port()
    with pytest.raises(G2GError, match="cannot reach a Ray cluster"):
        run_sweep(toy_sweep, tmp_path / "out", engine="ray", address=f"ray://127.0.0.1:{port}", run_fn=toy_run)
    assert not any((tmp_path / "out").glob("0*"))


def test_address_needs_the_ray_engine(toy_sweep, tmp_path):
    with pytest.raises(G2GError, match="--address is for --engine ray"):
        run_sweep(toy_sweep, tmp_path / "out", engine="local", address="127.0.0.1:6379", run_fn=toy_run)


@pytest.mark.slow
@needs_ray
def test_hosting_capacity_on_ray_matches_local(tmp_path, local_ray):
    from openg2g.studies import HostingConfig, read_base, run_hosting_capacity
    from openg2g.sweep import LocalEngine, RayEngine
    from tests.studies.test_studies import write_base

    base = read_base(write_base(tmp_path))
    config = HostingConfig(buses=["671", "675"], controllers=("none",), duration_s=60)
    local = run_hosting_capacity(base, config, tmp_path / "local", LocalEngine(2), run_fn=toy_run)
    on_ray = run_hosting_capacity(base, config, tmp_path / "ray", RayEngine(2), run_fn=toy_run)
    pd.testing.assert_frame_equal(local, on_ray, check_exact=True)
    assert list(on_ray["capacity_blocks"]) == [5, 2]
