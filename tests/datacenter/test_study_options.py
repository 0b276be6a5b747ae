"""The site options that reproduce the public OpenG2G study's datacenter: ``layout: pool``,
``whole_servers`` and ``template_s``, against hand-computed answers on constant or ramp traces."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from openg2g.core.commands import SetReplicas
from openg2g.datacenter import ReplayDatacenter, TraceLibrary
from openg2g.datacenter.replay import repeat_trace

from .conftest import site_spec, synthetic_library

W_PER_GPU = 100.0


def _constant_library(tmp_path: Path) -> TraceLibrary:
    """The study's ieee123 models with a constant 100 W per GPU, so power counts GPUs."""
    models = (("Llama-3.1-8B", 1), ("Llama-3.1-70B", 4), ("Llama-3.1-405B", 8))
    return synthetic_library(tmp_path, {(m, g, 128): np.full(200, W_PER_GPU * g) for m, g in models})


def _phase_w(
    lib: TraceLibrary,
    models: list[tuple[str, int, int]],
    capacity: int,
    grow_to: dict[str, int] | None = None,
    **kw: object,
) -> np.ndarray:
    """GPU power per phase (W) of a site with ``models`` (name, GPUs, replicas), after switching
    each model named in ``grow_to`` to that many replicas."""
    spec = site_spec(
        [{"model": m, "gpus_per_replica": g, "replicas": r, "batch_size": 128} for m, g, r in models],
        gpu_capacity=capacity,
        **kw,
    )
    dc = ReplayDatacenter.from_spec(spec, lib)
    dc.reset(0)
    for model, replicas in (grow_to or {}).items():
        dc.apply(SetReplicas(site=spec.name, model=model, replicas=replicas), 0.0)
    return np.asarray(dc.step(0.1, 0.1).p_w)


def test_pool_layout_gives_the_study_z3_se_its_200_gpus_per_phase(tmp_path: Path) -> None:
    """z3_se: 600 GPUs = 75 servers, 25 per phase. Name order puts Llama-3.1-405B first: 52
    servers round-robin a, b, c = 18/17/17 (144/136/136 GPUs). Llama-3.1-70B's 45 replicas of 4
    GPUs need 23 servers; 7/8/8 are free and it takes them all. Its last server (on c) holds one
    replica (56/64/60 GPUs: 200/200/196), two with whole servers as the study (56/64/64:
    200/200/200). Packed (the default) as the bundled scenario runs it, configured at 30/35 and
    grown to 45/52: the 70B first, its 15 configured servers then its added replicas on its own
    pattern, servers 0-22 at 8/8/7 (64/60/56 GPUs, server 22 holding one replica); the 405B's
    from server 15 (15 % 3 = a): 18/17/17 (144/136/136): 208/196/192."""
    lib = _constant_library(tmp_path)
    z3 = [("Llama-3.1-70B", 4, 45), ("Llama-3.1-405B", 8, 52)]
    pool = _phase_w(lib, z3, 600, layout="pool")
    study = _phase_w(lib, z3, 600, layout="pool", whole_servers=True)
    packed = _phase_w(
        lib, [("Llama-3.1-70B", 4, 30), ("Llama-3.1-405B", 8, 35)], 600, {"Llama-3.1-70B": 45, "Llama-3.1-405B": 52}
    )
    np.testing.assert_allclose(pool / W_PER_GPU, [200, 200, 196])
    np.testing.assert_allclose(study / W_PER_GPU, [200, 200, 200])
    np.testing.assert_allclose(packed / W_PER_GPU, [208, 196, 192])


def test_pool_replicas_set_the_counts_the_pool_is_handed_out_at(tmp_path: Path) -> None:
    """Configured at 30/35 but laid out at the study's final 45/52: the 405B's 52 servers are
    a, b, c, a, ... (18/17/17), the 70B's 23 are a, b, c seven times and then b, c (a has run
    out). The first 35 405B replicas sit on 12/12/11 servers (96/96/88 GPUs), the first 30 70B
    replicas on its first 15 servers, 5/5/5 (40/40/40 GPUs): 136/136/128."""
    lib = _constant_library(tmp_path)
    z3 = [("Llama-3.1-70B", 4, 30), ("Llama-3.1-405B", 8, 35)]
    at_final = {"Llama-3.1-70B": 45, "Llama-3.1-405B": 52}
    np.testing.assert_allclose(
        _phase_w(lib, z3, 600, layout="pool", pool_replicas=at_final) / W_PER_GPU, [136, 136, 128]
    )


def test_whole_servers_fill_the_last_server(tmp_path: Path) -> None:
    """180 one-GPU replicas fill 22.5 servers; whole servers run 23 (184 replicas), on phases
    8/8/7 servers under the pool: 64/64/56 GPUs; without, 180 replicas (60/60/60 packed)."""
    lib = _constant_library(tmp_path)
    z1 = [("Llama-3.1-8B", 1, 180)]
    whole = _phase_w(lib, z1, 180, layout="pool", whole_servers=True)
    np.testing.assert_allclose(whole / W_PER_GPU, [64, 64, 56])
    np.testing.assert_allclose(_phase_w(lib, z1, 180).sum() / W_PER_GPU, 180)


def test_pool_replicas_need_the_pool_layout() -> None:
    with pytest.raises(ValueError, match="pool_replicas is for layout pool"):
        site_spec([{"model": "m", "gpus_per_replica": 1, "replicas": 1, "batch_size": 8}], pool_replicas={"m": 2})
    with pytest.raises(ValueError, match="does not serve"):
        site_spec(
            [{"model": "m", "gpus_per_replica": 1, "replicas": 1, "batch_size": 8}],
            layout="pool",
            pool_replicas={"x": 2},
        )


def test_template_repeats_a_51_s_trace_to_600_s() -> None:
    """511 samples (51 s at 0.1 s) x[i] = i: the period is 510 samples, 6001 template samples are
    11 whole periods (11 x 129,795) and samples 0-390 (76,245): mean 1,503,990 / 6001."""
    x = np.arange(511, dtype=float)
    y = repeat_trace(x, round(600 / 0.1) + 1)
    assert y.size == 6001
    assert (y[509], y[510], y[511], y[5610], y[6000]) == (509, 0, 1, 0, 390)
    assert y.mean() == pytest.approx(1_503_990 / 6001)


def test_a_site_replays_the_template_mean_not_the_measured_mean(tmp_path: Path) -> None:
    """One 1-GPU replica of the 51 s ramp 100 + i W: over any 6001 consecutive steps it draws the
    template's mean, 100 + 250.62 W (the measured mean is 100 + 255 W)."""
    lib = synthetic_library(tmp_path, {("Ramp", 1, 8): 100.0 + np.arange(511, dtype=float)})
    models = [{"model": "Ramp", "gpus_per_replica": 1, "replicas": 1, "batch_size": 8}]
    means = []
    for template_s in (600.0, None):
        dc = ReplayDatacenter.from_spec(site_spec(models, template_s=template_s), lib)
        dc.reset(3)
        series = dc.step_block(np.arange(1, 6002) * 0.1, 0.1)
        means.append(series.models["Ramp"].power_w.mean())
    assert means[0] == pytest.approx(100 + 1_503_990 / 6001, rel=1e-9)
    assert means[1] != pytest.approx(means[0], rel=1e-3)
