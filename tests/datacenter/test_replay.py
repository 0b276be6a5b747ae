"""Behaviour of the replay backend: energy, determinism, transitions, ramps, shifts, commands."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from openg2g.core.commands import (
    SetBatchSize,
    SetInferenceScale,
    SetPowerCap,
    SetReplicas,
    SetSiteOnline,
    SetTaps,
    ShiftReplicas,
)
from openg2g.core.errors import CommandError, TraceError
from openg2g.core.state import DatacenterSeries, DatacenterState
from openg2g.datacenter import ReplayDatacenter, TraceLibrary, validate_site
from openg2g.datacenter.replay import loop_trace

from .conftest import reference_spec, site_spec, synthetic_library

DT = 0.1


def _run(dc: ReplayDatacenter, t0_s: float, t1_s: float, dt_s: float = DT) -> list:
    n0, n1 = round(t0_s / dt_s), round(t1_s / dt_s)
    return [dc.step(k * dt_s, dt_s) for k in range(n0 + 1, n1 + 1)]


def _model_power(states: list, model: str) -> np.ndarray:
    return np.array([s.models[model].power_w for s in states])


def _small(library: TraceLibrary, replicas: int = 40, name: str = "dc1", **kw) -> ReplayDatacenter:
    spec = site_spec(
        [
            {"model": "Llama-3.1-8B", "gpus_per_replica": 1, "replicas": replicas, "batch_size": 128},
            {"model": "Llama-3.1-70B", "gpus_per_replica": 4, "replicas": 10, "batch_size": 128},
        ],
        name=name,
        **kw,
    )
    dc = ReplayDatacenter.from_spec(spec, library)
    dc.reset(0)
    return dc


def test_energy_equals_integral_of_known_power(tmp_path: Path) -> None:
    lib = synthetic_library(tmp_path, {("Const", 2, 8): np.full(100, 400.0), ("Const", 2, 16): np.full(80, 500.0)})
    spec = site_spec(
        [{"model": "Const", "gpus_per_replica": 2, "replicas": 10, "batch_size": 8}],
        pue=1.2,
        base_load_kw_per_phase=5.0,
        training={  # a constant 600 W per GPU: equal plateaus, no noise, dips, smoothing or ramp
            "gpus": 8,
            "start_s": 2.0,
            "end_s": 4.0,
            "high_w_per_gpu": 600,
            "low_w_per_gpu": 600,
            "noise_w": 0,
            "dips_per_s": 0,
            "smoothing_s": 0,
            "ramp_s": 0,
            "peak_w_per_gpu": None,
        },
    )
    dc = ReplayDatacenter.from_spec(spec, lib)
    dc.reset(0)
    states = _run(dc, 0.0, 10.0)
    integral_j = sum(s.power_w for s in states) * DT
    # Hand count: 10 replicas x 400 W x PUE 1.2 for 10 s, 3 x 5 kW base for 10 s,
    # training 8 GPUs x 600 W x PUE 1.2 for 2 s (samples at 2.0 .. 3.9 s).
    expected_j = 10 * 400 * 1.2 * 10 + 3 * 5000 * 10 + 8 * 600 * 1.2 * 2
    assert integral_j == pytest.approx(expected_j, rel=1e-9)
    assert dc.energy_j == pytest.approx(expected_j, rel=1e-9)
    # A 1 s step reports the mean of its ten samples: same energy.
    dc.reset(0)
    states_1s = _run(dc, 0.0, 10.0, dt_s=1.0)
    assert sum(s.power_w for s in states_1s) * 1.0 == pytest.approx(expected_j, rel=1e-9)


def test_reactive_power_and_phase_balance(library: TraceLibrary) -> None:
    dc = ReplayDatacenter.from_spec(reference_spec(), library)
    dc.reset(0)
    states = _run(dc, 0.0, 20.0)
    p = np.array([s.p_w for s in states])
    q = np.array([s.q_var for s in states])
    np.testing.assert_allclose(q, p * math.tan(math.acos(0.95)))
    share = p.mean(axis=0) / p.mean(axis=0).sum()
    np.testing.assert_allclose(share, 1 / 3, atol=0.01)
    s = states[-1]
    gpu_w = sum(m.power_w for m in s.models.values())
    assert s.power_w == pytest.approx(gpu_w + 3 * 500e3)


def test_same_seed_same_arrays_other_seed_differs(library: TraceLibrary) -> None:
    dc = ReplayDatacenter.from_spec(reference_spec(), library)

    def record(seed: int) -> tuple[np.ndarray, np.ndarray]:
        dc.reset(seed)
        states = _run(dc, 0.0, 30.0)
        return np.array([s.p_w for s in states]), np.array([[m.itl_s for m in s.models.values()] for s in states])

    p1, i1 = record(5)
    p2, i2 = record(5)
    p3, _ = record(6)
    np.testing.assert_array_equal(p1, p2)
    np.testing.assert_array_equal(i1, i2)
    assert not np.array_equal(p1, p3)


def test_replicas_are_desynchronized(library: TraceLibrary) -> None:
    dc = _small(library, replicas=200)
    power = _model_power(_run(dc, 0.0, 50.0), "Llama-3.1-8B") / 200
    trace = library.power("Llama-3.1-8B", 1, 128)
    # Averaging 200 desynchronized replicas shrinks the fluctuation well below one replica's.
    assert power.std() < 0.3 * trace.std()


def test_loop_has_no_seam_jump() -> None:
    x = 100 + 50 * np.sin(np.linspace(0, 7, 200))  # ends 18 W away from where it starts
    y = loop_trace(x, 10)
    assert y.size == 190
    interior_step = np.abs(np.diff(x)).max()
    looped = np.concatenate([y, y])
    assert np.abs(np.diff(looped)).max() < 2 * interior_step
    assert y.mean() == pytest.approx(x.mean(), rel=1e-12)


def test_batch_change_moves_power_smoothly_to_the_new_trace(library: TraceLibrary) -> None:
    dc = _small(library, replicas=300)
    before = _model_power(_run(dc, 0.0, 30.0), "Llama-3.1-8B")
    dc.apply(SetBatchSize(site="dc1", model="Llama-3.1-8B", batch_size=8), 30.0)
    after = _run(dc, 30.0, 90.0)
    power = _model_power(after, "Llama-3.1-8B")
    assert after[0].models["Llama-3.1-8B"].batch_size == 8
    old = library.config("Llama-3.1-8B", 1, 128).mean_power_w * 300
    new = library.config("Llama-3.1-8B", 1, 8).mean_power_w * 300
    # Drain time constant: half a request at the old batch (about 3 s): first step barely moves.
    assert power[0] > new + 0.9 * (old - new)
    assert abs(power[0] - before[-1]) < 0.05 * old
    assert power[-100:].mean() == pytest.approx(new, rel=0.02)
    # Monotone on 1 s averages while it drains.
    means = power[:100].reshape(10, 10).mean(axis=1)
    assert np.all(np.diff(means) < 0.01 * old)
    # ITL follows: batch 8 decodes faster than 128.
    assert (
        np.mean([s.models["Llama-3.1-8B"].itl_s for s in after[-100:]])
        < library.config("Llama-3.1-8B", 1, 128).median_itl_s
    )


def test_replicas_ramp_linearly(library: TraceLibrary) -> None:
    dc = _small(library, replicas=100)
    _run(dc, 0.0, 10.0)
    dc.apply(SetReplicas(site="dc1", model="Llama-3.1-8B", replicas=20, ramp_s=40.0), 10.0)
    states = _run(dc, 10.0, 60.0)
    reps = np.array([s.models["Llama-3.1-8B"].replicas for s in states])
    assert reps[0] == pytest.approx(100 - 80 * 0.1 / 40)
    assert reps[199] == pytest.approx(60.0)  # t = 30 s, half-way
    assert reps[-1] == 20.0
    power = _model_power(states, "Llama-3.1-8B")
    per_replica = power / reps
    assert per_replica.mean() == pytest.approx(library.config("Llama-3.1-8B", 1, 128).mean_power_w, rel=0.05)
    dc.apply(SetInferenceScale(site="dc1", fraction=0.5, ramp_s=10.0), 60.0)
    end = _run(dc, 60.0, 75.0)[-1]
    assert end.models["Llama-3.1-8B"].replicas == 50.0
    assert end.models["Llama-3.1-70B"].replicas == 5.0


def test_inference_scale_aims_at_whole_replicas(library: TraceLibrary) -> None:
    """Each model goes to the whole count nearest the fraction of its configured replicas (720,
    180, 90, 480, 210), a half rounded up; the ramp passes through fractional counts on the way."""
    dc = ReplayDatacenter.from_spec(reference_spec(), library)
    dc.reset(0)
    dc.apply(SetInferenceScale("dc1", 0.333), 0.0)  # 239.76, 59.94, 29.97, 159.84, 69.93
    state = dc.step(0.1, DT)
    assert [m.replicas for m in state.models.values()] == [240, 60, 30, 160, 70]
    dc.apply(SetInferenceScale("dc1", 0.35, ramp_s=10.0), 0.1)  # 252, 63, 31.5, 168, 73.5 (ties go up)
    states = _run(dc, 0.1, 10.1)
    assert states[49].models["Llama-3.1-405B"].replicas == pytest.approx(31)  # half-way from 30 to 32
    assert [m.replicas for m in states[-1].models.values()] == [252, 63, 32, 168, 74]


def test_shift_between_two_sites(library: TraceLibrary) -> None:
    a = _small(library, replicas=100, name="a", gpu_capacity=200)
    b = _small(library, replicas=50, name="b", gpu_capacity=200)
    cmd = ShiftReplicas(site="a", model="Llama-3.1-8B", replicas=30, to_site="b", ramp_s=10.0)
    a.apply(cmd, 0.0)
    b.apply(cmd, 0.0)
    sa, sb = _run(a, 0.0, 5.0)[-1], _run(b, 0.0, 5.0)[-1]
    assert sa.models["Llama-3.1-8B"].replicas == pytest.approx(85.0)
    assert sb.models["Llama-3.1-8B"].replicas == pytest.approx(65.0)
    sa, sb = _run(a, 5.0, 12.0)[-1], _run(b, 5.0, 12.0)[-1]
    assert sa.models["Llama-3.1-8B"].replicas == 70.0
    assert sb.models["Llama-3.1-8B"].replicas == 80.0
    only_8b = ReplayDatacenter.from_spec(
        site_spec([{"model": "Llama-3.1-8B", "gpus_per_replica": 1, "replicas": 5, "batch_size": 8}], name="c"), library
    )
    with pytest.raises(CommandError, match="does not serve 'Llama-3.1-70B' and cannot receive"):
        only_8b.apply(ShiftReplicas(site="a", model="Llama-3.1-70B", replicas=1, to_site="c"), 0.0)
    with pytest.raises(CommandError, match="only 70 are"):
        a.apply(ShiftReplicas(site="a", model="Llama-3.1-8B", replicas=71, to_site="b"), 20.0)
    with pytest.raises(CommandError, match="exceed its capacity of 200"):
        b.apply(ShiftReplicas(site="a", model="Llama-3.1-8B", replicas=200, to_site="b"), 20.0)


def test_command_errors(library: TraceLibrary) -> None:
    dc = _small(library, gpu_capacity=100)
    cases = [
        (SetBatchSize(site="dc1", model="GPT", batch_size=8), "does not serve model 'GPT'"),
        (
            SetBatchSize(site="dc1", model="Llama-3.1-8B", batch_size=100),
            r"batch size 100 not available.*valid: \[8, 16",
        ),
        (SetBatchSize(site="dc2", model="Llama-3.1-8B", batch_size=8), "for site 'dc2' delivered to site 'dc1'"),
        (SetPowerCap(site="dc1", cap_w_per_gpu=50.0), "outside the H100 range 200-700 W"),
        (SetReplicas(site="dc1", model="Llama-3.1-8B", replicas=-1), "must be >= 0"),
        (SetReplicas(site="dc1", model="Llama-3.1-8B", replicas=61), "101 GPUs needed .* exceed its capacity of 100"),
        (SetReplicas(site="dc1", model="Llama-3.1-8B", replicas=10, ramp_s=-1), "ramp_s must be >= 0"),
        (SetInferenceScale(site="dc1", fraction=2.0), "exceed its capacity of 100"),
        (ShiftReplicas(site="dc1", model="Llama-3.1-8B", replicas=1, to_site="dc1"), "both 'dc1'"),
        (SetTaps(bank="reg1", taps=(1, 1, 1)), "site .dc1. cannot carry out SetTaps"),
    ]
    for command, match in cases:
        with pytest.raises(CommandError, match=match):
            dc.apply(command, 1.0)
    dc.apply(SetReplicas(site="dc1", model="Llama-3.1-8B", replicas=60), 1.0)  # exactly fills 100 GPUs


def test_power_cap_clips_power_and_slows_decoding(library: TraceLibrary) -> None:
    dc = _small(library, replicas=100)
    free = _run(dc, 0.0, 20.0)
    dc.apply(SetPowerCap(site="dc1", cap_w_per_gpu=400.0, model="Llama-3.1-8B"), 20.0)
    capped = _run(dc, 20.0, 40.0)
    assert _model_power(capped, "Llama-3.1-8B").max() <= 100 * 400.0 + 1e-6
    assert capped[-1].models["Llama-3.1-8B"].power_cap_w == 400.0
    assert capped[-1].models["Llama-3.1-70B"].power_cap_w is None
    itl_free = np.mean([s.models["Llama-3.1-8B"].itl_s for s in free])
    itl_cap = np.mean([s.models["Llama-3.1-8B"].itl_s for s in capped])
    slow = (library.config("Llama-3.1-8B", 1, 128).mean_power_w / 400.0) ** 0.4
    assert itl_cap / itl_free == pytest.approx(slow, rel=0.05)
    assert (
        capped[-1].models["Llama-3.1-8B"].deadline_miss_fraction
        >= free[-1].models["Llama-3.1-8B"].deadline_miss_fraction
    )


def test_site_outage_draws_nothing(library: TraceLibrary) -> None:
    dc = _small(library, base_load_kw_per_phase=100.0)
    dc.apply(SetSiteOnline(site="dc1", online=False), 0.0)
    s = _run(dc, 0.0, 1.0)[-1]
    assert not s.online and s.power_w == 0.0 and np.all(s.q_var == 0)
    assert all(m.throughput_tok_s == 0 for m in s.models.values())
    dc.apply(SetSiteOnline(site="dc1", online=True), 1.0)
    assert _run(dc, 1.0, 2.0)[-1].power_w > 300e3


def test_deadline_miss_is_the_mixture_tail(library: TraceLibrary) -> None:
    spec = site_spec(
        [{"model": "Llama-3.1-70B", "gpus_per_replica": 4, "replicas": 10, "batch_size": 128, "itl_deadline_s": 0.05}]
    )
    dc = ReplayDatacenter.from_spec(spec, library)
    miss = _run(dc, 0.0, 1.0)[-1].models["Llama-3.1-70B"].deadline_miss_fraction
    mix = library.config("Llama-3.1-70B", 4, 128).itl
    assert mix is not None
    assert miss == pytest.approx(1 - float(mix.cdf(0.05)))


def test_reference_site_info_and_validation(library: TraceLibrary) -> None:
    spec = reference_spec()
    assert validate_site(spec, library, 0) == []
    info = ReplayDatacenter.from_spec(spec, library).info()
    assert info.bus == "671" and set(info.models) == {
        "Llama-3.1-8B",
        "Llama-3.1-70B",
        "Llama-3.1-405B",
        "Qwen3-30B-A3B",
        "Qwen3-235B-A22B",
    }
    m = info.models["Llama-3.1-405B"]
    assert m.batch_sizes == (8, 16, 32, 64, 96, 128, 192, 256, 384, 512)
    assert m.power_w[5] == pytest.approx(library.config("Llama-3.1-405B", 8, 128).mean_power_w)
    assert m.itl_deadline_s == 0.12 and m.initial_batch_size == 128


def test_validate_site_lists_every_problem(library: TraceLibrary) -> None:
    spec = site_spec(
        [
            {"model": "GPT", "gpus_per_replica": 1, "replicas": 1, "batch_size": 8},
            {"model": "Llama-3.1-8B", "gpus_per_replica": 2, "replicas": 1, "batch_size": 8},
            {
                "model": "Llama-3.1-70B",
                "gpus_per_replica": 4,
                "replicas": 10,
                "batch_size": 100,
                "batch_sizes": [8, 100, 128],
            },
        ],
        gpu_capacity=20,
        training={"gpus": 30, "start_s": 0, "end_s": 10},
    )
    problems = dict(validate_site(spec, library, 2))
    assert "unknown model 'GPT'" in problems["datacenters.2.models.0.model"]
    assert "measured: [1]" in problems["datacenters.2.models.1.gpus_per_replica"]
    assert "valid: [8, 16" in problems["datacenters.2.models.2.batch_size"]
    assert "[100]" in problems["datacenters.2.models.2.batch_sizes"]
    assert "more than gpu_capacity 20" in problems["datacenters.2.training.gpus"]
    assert "exceed gpu_capacity 20" in problems["datacenters.2.gpu_capacity"]
    with pytest.raises(TraceError, match="unknown model"):
        ReplayDatacenter.from_spec(spec, library)


def test_datacenter_block_equals_single_steps(library: TraceLibrary) -> None:
    def site() -> ReplayDatacenter:
        dc = ReplayDatacenter.from_spec(reference_spec(training={"gpus": 2400, "start_s": 2, "end_s": 8}), library)
        dc.reset(7)
        dc.apply(SetBatchSize("dc1", "Llama-3.1-70B", 32), 0.0)
        dc.apply(SetInferenceScale("dc1", 0.61, ramp_s=9.0), 0.0)
        dc.apply(SetPowerCap("dc1", 400.0, "Qwen3-30B-A3B"), 0.0)
        return dc

    times = np.round(np.arange(1, 121) * 0.1, 10)
    one, block = site(), site()
    singles = [one.step(float(t), 0.1) for t in times]
    series = block.step_block(times, 0.1)
    for i, state in enumerate(singles):
        _assert_same(series.state(i), state)
    assert one.energy_j == block.energy_j


def _assert_same(a: DatacenterState, b: DatacenterState) -> None:
    np.testing.assert_array_equal(a.p_w, b.p_w)
    np.testing.assert_array_equal(a.q_var, b.q_var)
    for name in a.models:
        x, y = a.models[name], b.models[name]
        assert (x.replicas, x.batch_size, x.power_w, x.throughput_tok_s, x.deadline_miss_fraction) == (
            y.replicas,
            y.batch_size,
            y.power_w,
            y.throughput_tok_s,
            y.deadline_miss_fraction,
        )
        assert x.itl_s == y.itl_s or (np.isnan(x.itl_s) and np.isnan(y.itl_s))


def test_steady_power_tables_equal_replica_sums(library: TraceLibrary) -> None:
    """After a ramp, power comes from per-phase tables; during one, from replica-by-replica sums.
    A "ramp" to the count already running keeps the second path: both must agree."""

    def site(ramp_s: float, seeds: tuple[int, ...] = (11,)) -> ReplayDatacenter:
        dc = ReplayDatacenter.from_spec(reference_spec(), library)
        for episode, seed in enumerate(seeds):  # episodes before the last: spectra are kept, offsets are not
            if episode:
                dc.step_block(np.array([0.1, 0.2]), 0.1)
            dc.reset(seed)
            dc.apply(SetInferenceScale("dc1", 0.613, ramp_s=0.0), 0.0)  # 441 of 720 replicas, 110 of 180, ...
            dc.apply(SetPowerCap("dc1", 330.0, "Llama-3.1-70B"), 0.0)
            dc.apply(SetBatchSize("dc1", "Qwen3-30B-A3B", 64), 0.0)  # a transition of weights too
            dc.apply(SetInferenceScale("dc1", 0.613, ramp_s=ramp_s), 0.0)
        return dc

    times = np.round(np.arange(1, 201) * 0.1, 10)
    tables, sums = site(0.0).step_block(times, 0.1), site(1e6).step_block(times, 0.1)
    np.testing.assert_allclose(tables.p_w, sums.p_w, rtol=1e-12)
    for name, model in tables.models.items():
        np.testing.assert_allclose(model.power_w, sums.models[name].power_w, rtol=1e-12)
    assert tables.models["Llama-3.1-8B"].replicas[0] == 441
    after_reset = site(0.0, seeds=(4, 11)).step_block(times, 0.1)
    np.testing.assert_array_equal(after_reset.p_w, tables.p_w)


def test_a_ramp_by_offset_equals_the_replica_sums(library: TraceLibrary, monkeypatch: pytest.MonkeyPatch) -> None:
    """A large site's ramp is summed by trace offset (``_BY_OFFSET``): forced on for every model of
    the reference site (a ramp down and one up within the block, a capped model, a transition of
    batch weights), it gives the replica-by-replica power to rounding."""
    from openg2g.datacenter import replay

    def run(by_offset: int) -> tuple[DatacenterSeries, DatacenterSeries]:
        monkeypatch.setattr(replay, "_BY_OFFSET", by_offset)
        dc = ReplayDatacenter.from_spec(reference_spec(), library)
        dc.reset(5)
        dc.apply(SetPowerCap("dc1", 330.0, "Llama-3.1-70B"), 0.0)
        dc.apply(SetBatchSize("dc1", "Qwen3-30B-A3B", 64), 0.0)
        dc.apply(SetInferenceScale("dc1", 0.4, ramp_s=6.0), 0.0)
        first = dc.step_block(np.round(np.arange(1, 81) * 0.1, 10), 0.1)
        dc.apply(SetInferenceScale("dc1", 0.9, ramp_s=5.0), 8.0)
        second = dc.step_block(np.round(np.arange(81, 201) * 0.1, 10), 0.1)
        return first, second

    for by_replica, by_offset in zip(run(10**9), run(0)):
        np.testing.assert_allclose(by_offset.p_w, by_replica.p_w, rtol=1e-12)
        for name, model in by_replica.models.items():
            np.testing.assert_allclose(by_offset.models[name].power_w, model.power_w, rtol=1e-12)
            np.testing.assert_array_equal(by_offset.models[name].replicas, model.replicas)
        assert not np.array_equal(by_offset.p_w[:, 0], by_offset.p_w[0, 0])  # the ramp moved the power


def test_itl_samples_changes_only_the_sampled_figures(library: TraceLibrary) -> None:
    """A site sampling 32 replicas per model draws the same power and deadline misses; its ITL and
    throughput are other estimates of the same means."""

    def run(**kw) -> list:
        dc = ReplayDatacenter.from_spec(reference_spec(**kw), library)
        dc.reset(3)
        return _run(dc, 0.0, 60.0)

    full, few = run(), run(itl_samples=32)
    for a, b in zip(full, few):
        np.testing.assert_array_equal(a.p_w, b.p_w)
        for name, model in a.models.items():
            assert model.deadline_miss_fraction == b.models[name].deadline_miss_fraction
    itl = {name: np.mean([s.models[name].itl_s for s in full]) for name in full[0].models}
    itl_few = {name: np.mean([s.models[name].itl_s for s in few]) for name in full[0].models}
    assert itl_few != itl
    for name, mean in itl.items():
        assert itl_few[name] == pytest.approx(mean, rel=0.02)


def test_itl_samples_is_dumped_only_when_set() -> None:
    """A site at the default sampling dumps (so hashes) as before the field existed; 0 is refused."""
    assert "itl_samples" not in reference_spec().model_dump()
    assert reference_spec(itl_samples=64).model_dump()["itl_samples"] == 64
    with pytest.raises(ValueError, match="itl_samples"):
        reference_spec(itl_samples=0)


def test_power_tables_of_any_trace_length_equal_replica_sums(tmp_path: Path) -> None:
    """A looped trace of prime length (1,009 samples) is transformed at a fast length of at least
    twice it, one of 5-smooth length (1,000) at its own; both tables are the replicas' sums."""
    rng = np.random.default_rng(3)
    # loop_trace drops min(50, N // 4) samples at 0.1 s: 1,059 and 1,050 measured samples
    traces = {("m", 1, 8): 300 + 50 * rng.random(1059), ("m", 1, 16): 400 + 50 * rng.random(1050)}
    library = synthetic_library(tmp_path, traces)
    spec = site_spec([{"model": "m", "gpus_per_replica": 1, "replicas": 37, "batch_size": 8}], gpu_capacity=40)
    dc = ReplayDatacenter.from_spec(spec, library)
    dc.reset(5)
    m = dc._models["m"]
    for batch, length in ((8, 1009), (16, 1000)):
        c = m.configs[batch]
        assert c.length == length
        table = m.phase_table(batch, 37)
        sums = np.zeros((length, 3))
        for r in range(37):  # replica r of phase p draws x[(o_r + k) mod L] at sample k
            sums[:, m.phase[r]] += np.roll(c.doubled_w[:length], -int(c.offsets[r]))
        np.testing.assert_allclose(table, sums, rtol=1e-12)
    assert m.configs[8].fft_n == 2025  # 3^4 5^2, the first 5-smooth length from 2,018
    assert m.configs[16].fft_n == 1000


def test_sites_of_one_library_share_their_looped_traces(library: TraceLibrary) -> None:
    """An env builds a site per episode whose spec differs (here the training job): the looped
    traces and their spectra are made once, and a site built later replays the same power."""
    first = ReplayDatacenter.from_spec(reference_spec(), library)
    times = np.round(np.arange(1, 31) * 0.1, 10)
    power = first.step_block(times, 0.1).p_w
    later = ReplayDatacenter.from_spec(reference_spec(training={"gpus": 2400, "start_s": 5, "end_s": 6}), library)
    for name, m in first._models.items():
        for batch, c in m.configs.items():
            shared = later._models[name].configs[batch]
            assert shared.doubled_w is c.doubled_w and shared.spectra is c.spectra
    assert first._models["Llama-3.1-8B"].configs[128].spectra  # filled by the first site's tables
    # the same seed and the training job idle in both: the same power from the shared spectra
    np.testing.assert_array_equal(later.step_block(times, 0.1).p_w, power)


def _spiky_site(tmp_path: Path, batch_sizes: list[int] | None) -> ReplayDatacenter:
    """10 replicas of a 2-GPU model whose batch-8 trace holds one 700 W spike (a prefill) over 400 W
    and whose batch-16 trace peaks at 680 W; PUE 1.2, 5 kW a phase of base load and a constant
    600 W-per-GPU training job on 8 GPUs."""
    spike = np.full(100, 400.0)
    spike[37] = 700.0
    lib = synthetic_library(
        tmp_path, {("Spiky", 2, 8): spike, ("Spiky", 2, 16): np.r_[np.full(79, 650.0), 680.0]}
    )
    flat = {"high_w_per_gpu": 600, "low_w_per_gpu": 600, "noise_w": 0, "dips_per_s": 0, "smoothing_s": 0}
    spec = site_spec(
        [{"model": "Spiky", "gpus_per_replica": 2, "replicas": 10, "batch_size": 16, "batch_sizes": batch_sizes}],
        pue=1.2,
        base_load_kw_per_phase=5.0,
        training={"gpus": 8, "start_s": 0.0, "end_s": 100.0, "ramp_s": 0, "peak_w_per_gpu": None, **flat},
    )
    return ReplayDatacenter.from_spec(spec, lib)


@pytest.mark.parametrize(
    ("batch_sizes", "replica_peak_w"),
    [(None, 700.0), ([16], 680.0)],  # the highest sample over the sizes the site may use
    ids=["both-sizes", "batch-16-only"],
)
def test_the_peak_estimate_is_every_replica_at_its_traces_peak(tmp_path: Path, batch_sizes, replica_peak_w) -> None:
    dc = _spiky_site(tmp_path, batch_sizes)
    peak = dc.peak_estimate()
    assert (peak.serving_gpus, peak.training_gpus) == (20, 8)
    # by hand: PUE x (10 replicas x their peak + 8 training GPUs x 600 W) + 3 phases x 5 kW
    assert peak.peak_w == pytest.approx(1.2 * (10 * replica_peak_w + 8 * 600.0) + 3 * 5000.0, rel=1e-12)
    dc.reset(0)
    drawn_w = max(s.power_w for s in _run(dc, 0.0, 20.0))
    assert drawn_w <= peak.peak_w  # replicas desynchronized: the run stays under the estimate
