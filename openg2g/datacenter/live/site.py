"""A datacenter site whose models run on real inference servers, measured as the run goes.

:class:`LiveSite` has the replay site's interface and outputs
(:class:`~openg2g.datacenter.replay.ReplayDatacenter`) and is built from a scenario's
``kind: live`` site (:class:`~openg2g.datacenter.live.config.LiveSiteSpec`). It is
:class:`~openg2g.core.interfaces.Live`: the engine paces the run to the wall clock, and each
step reports what the servers and meters did over its window of wall-clock time.

**What is measured** (per model, over each step's window): the tokens streamed by its servers,
their inter-token latencies and the requests in flight (:mod:`openg2g.datacenter.live.load`), and
its GPUs' power from the site's meter (:mod:`openg2g.datacenter.live.meters`; ``measured_power_w``).

**What is augmented.** The site's models have ``replicas`` simulated replicas standing on the few
real ones (``endpoints``): simulated replica ``j`` is real replica ``j mod R`` replayed with a
delay ``d_j`` drawn once per run from the seed, uniformly in ``[0, stagger_s)`` on the 0.1 s grid,
so that the simulated replicas do not all step at once when a batch size changes (as the replay's
per-replica trace offsets). Its power over the window ``(a, b]`` is the mean measured power of
its real replica's GPUs over ``(a - d_j, b - d_j]``; its phase is the replay's layout
(:mod:`openg2g.datacenter.layout`). The facility adds PUE and base load as the replay does:
``p = pue * (GPU power on the phase) + base``, ``q = p * tan(acos(pf))``. A model's throughput is
the measured tokens per second of a real replica (their mean) times the simulated replicas; its
ITL and deadline misses are those of the measured tokens (NaN ITL in a window with none).

With ``power: {source: profile}`` there is no meter: a replica's power is the trace library's
measured mean power per replica at the requests its real replica has in flight (interpolated in
``log2`` of the batch between the measured batch sizes, the ends held beyond them), an estimate
from measured H100 traces, not a measurement; ``measured_power_w`` is NaN.

**What controllers see** is what they see of a replay site: the same
:class:`~openg2g.core.interfaces.SiteInfo`, from the trace library's profile of each model
(``model``), so a controller tuned on replayed traces runs unchanged; and the measured ITL and
throughput in its observations. Commands: ``set_batch_size`` only (a live site's replicas, caps
and supply are real; they are refused, saying so).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from openg2g.core.commands import Command, SetBatchSize
from openg2g.core.errors import CommandError, ScenarioError, SimulationError
from openg2g.core.interfaces import DatacenterBackend, SiteInfo
from openg2g.core.state import DatacenterSeries, DatacenterState, ModelSeries
from openg2g.datacenter.config import ModelSpec, SiteSpec
from openg2g.datacenter.layout import ModelSlots, replica_phases
from openg2g.datacenter.library import TraceLibrary
from openg2g.datacenter.live.config import LiveModelSpec, LiveSiteSpec
from openg2g.datacenter.live.load import (
    LiveServerError,
    ReplicaLoad,
    post_batch_limit,
    prompt_cycle,
    served_models,
)
from openg2g.datacenter.live.meters import power_source
from openg2g.datacenter.live.power import PowerSampler, PowerSourceError
from openg2g.datacenter.replay import ReplayDatacenter

__all__ = ["LiveSite", "load_prompts", "replay_twin"]

_DELAY_GRID_S = 0.1
"""The grid the simulated replicas' delays are drawn on (s): fewer distinct windows to measure."""

_AHEAD_S = 0.05
"""How far (s) past the wall clock a step may end (simpy wakes a little early)."""


def replay_twin(spec: LiveSiteSpec) -> SiteSpec:
    """The replay site with the live site's bus, facility and models: what its controllers plan with."""
    keep = set(SiteSpec.model_fields) - {"kind", "models"}
    data = {k: v for k, v in spec.model_dump().items() if k in keep}
    models = [ModelSpec.model_validate({k: getattr(m, k) for k in ModelSpec.model_fields}) for m in spec.models]
    return SiteSpec.model_validate({**data, "models": [m.model_dump() for m in models]})


def load_prompts(source: str, base_dir: Path) -> list[str]:
    """The prompts of a site's ``requests.prompts``: ``bundled`` or a file (one per line, or .jsonl).

    :raises ScenarioError: the file cannot be read, or holds no prompt (naming the file and line).
    """
    if source == "bundled":
        text = resources.files("openg2g.datacenter.live").joinpath("prompts.txt").read_text(encoding="utf-8")
        return [line for line in text.splitlines() if line.strip()]
    path = base_dir / source
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError([("requests.prompts", f"cannot read {path}: {exc}")]) from None
    prompts: list[str] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if path.suffix == ".jsonl":
            try:
                prompt = json.loads(line)["prompt"]
            except (ValueError, KeyError, TypeError):
                raise ScenarioError(
                    [(f"{path}:{number}", 'requests.prompts: need a JSON object with "prompt"')]
                ) from None
            if not isinstance(prompt, str) or not prompt:
                raise ScenarioError([(f"{path}:{number}", 'requests.prompts: "prompt" must be a non-empty string')])
            prompts.append(prompt)
        else:
            prompts.append(line)
    if not prompts:
        raise ScenarioError([("requests.prompts", f"{path} holds no prompt")])
    return prompts


@dataclass
class _LiveModel:
    spec: LiveModelSpec
    loads: list[ReplicaLoad]
    phase: np.ndarray  # phase (0-2) of each simulated replica
    real: np.ndarray  # the real replica each simulated one stands on
    delay_s: np.ndarray  # each simulated replica's delay (s)
    batch: int
    profile_w: tuple[np.ndarray, np.ndarray]  # log2 batch sizes and mean power per replica (W)


class LiveSite(DatacenterBackend):
    """A site of real servers (module docstring). Build it with :meth:`from_spec`.

    :param spec: the site's spec.
    :param library: the trace library holding its models' profiles.
    :param base_dir: the scenario's folder (prompt and power files are relative to it).
    """

    def __init__(self, spec: LiveSiteSpec, library: TraceLibrary, base_dir: Path):
        self.name = spec.name
        self.spec = spec
        self.max_lag_s = spec.max_lag_s
        self._twin = ReplayDatacenter.from_spec(replay_twin(spec), library)
        self._info = self._twin.info()
        self._prompts = load_prompts(spec.requests.prompts, base_dir)
        self._base_dir = base_dir
        used = sum(m.replicas * m.gpus_per_replica for m in spec.models)
        phases, _ = replica_phases(
            spec.layout,
            [
                ModelSlots(m.model, m.gpus_per_replica, (spec.pool_replicas or {}).get(m.model, m.replicas), m.replicas)
                for m in spec.models
            ],
            spec.gpu_capacity if spec.gpu_capacity is not None else used,
            0,
        )
        self._phases = dict(zip((m.model for m in spec.models), phases))
        self._q_per_p = math.tan(math.acos(spec.power_factor))
        self._base_w = spec.base_load_kw_per_phase * 1000.0
        self._models: dict[str, _LiveModel] = {}
        self._sampler: PowerSampler | None = None
        self._origin: float | None = None

    @classmethod
    def from_spec(cls, spec: LiveSiteSpec, library: TraceLibrary, base_dir: Path) -> LiveSite:
        """The site of a scenario's ``kind: live`` entry (nothing is contacted until :meth:`reset`)."""
        return cls(spec, library, base_dir)

    def info(self) -> SiteInfo:
        return self._info

    def stand_in(self) -> ReplayDatacenter:
        """The replay site of the same description (:func:`replay_twin`): what a check of the
        scenario starts instead of the servers, which it must not load."""
        return self._twin

    # ------------------------------------------------------------------ start and stop
    def reset(self, seed: int) -> None:
        """Check every server and the meter, start the load at the initial batch sizes, and wait
        until every replica streams (``requests.warmup_s``).

        :raises LiveServerError: a server is not there, does not serve its model, or streams nothing.
        :raises PowerSourceError: the meter cannot be read.
        """
        self.close()
        spec = self.spec
        for m in spec.models:
            for endpoint in m.endpoints:
                served = served_models(endpoint.url)
                if m.server_model not in served:
                    raise LiveServerError(
                        f"site {self.name!r}, model {m.model!r}: the server at {endpoint.url} does not serve "
                        f"{m.server_model!r}; it serves {', '.join(map(repr, served)) or 'nothing'} (set served_model)"
                    )
        gpus = [g for m in spec.models for e in m.endpoints for g in e.gpus]
        if spec.power.source != "profile":
            self._sampler = PowerSampler(
                power_source(spec.power.meter_spec(), self._base_dir),
                gpus,
                interval_s=spec.power.interval_s,
                stale_s=spec.power.stale_s,
            )
            self._sampler.start()
        rng = np.random.default_rng(seed)
        next_prompt = prompt_cycle(self._prompts)
        r = spec.requests
        for m in spec.models:
            info = self._info.models[m.model]
            saturate = m.batch_knob.kind == "http"
            slots = 2 * max(info.batch_sizes) if saturate else max(info.batch_sizes)
            loads = [
                ReplicaLoad(
                    e.url,
                    m.server_model,
                    next_prompt,
                    r.api,
                    r.max_tokens,
                    slots,
                    r.timeout_s,
                    r.arrival_rate_per_s,
                    int(rng.integers(2**31)),
                )
                for e in m.endpoints
            ]
            steps = round(spec.stagger_s / _DELAY_GRID_S)
            delay = rng.integers(0, steps, size=m.replicas) * _DELAY_GRID_S if steps else np.zeros(m.replicas)
            self._models[m.model] = _LiveModel(
                spec=m,
                loads=loads,
                phase=self._phases[m.model][: m.replicas],
                real=np.arange(m.replicas) % len(loads),
                delay_s=delay,
                batch=m.batch_size,
                profile_w=(np.log2(np.array(info.batch_sizes, dtype=float)), np.array(info.power_w)),
            )
            for load in loads:
                if saturate:
                    post_batch_limit(load.url, m.batch_knob.path, m.batch_size)
                load.start(slots if saturate else m.batch_size)
        self._warm_up(r.warmup_s)
        self._origin = None

    def _warm_up(self, warmup_s: float) -> None:
        deadline = time.monotonic() + warmup_s
        waiting = [(name, load) for name, lm in self._models.items() for load in lm.loads]
        while waiting:
            self._raise_failures(None)
            waiting = [(name, load) for name, load in waiting if len(load.tokens) == 0]
            if waiting and time.monotonic() > deadline:
                name, load = waiting[0]
                raise LiveServerError(
                    f"site {self.name!r}, model {name!r}: the server at {load.url} streamed no token within "
                    f"{warmup_s:g} s of the first requests (requests.warmup_s)"
                )
            time.sleep(0.05)

    def go_live(self, origin_s: float) -> None:
        self._origin = origin_s

    def close(self) -> None:
        """Stop every request and the meter."""
        for lm in self._models.values():
            for load in lm.loads:
                load.stop()
        self._models = {}
        if self._sampler is not None:
            self._sampler.stop()
            self._sampler = None

    # ------------------------------------------------------------------ stepping
    def _raise_failures(self, t_s: float | None) -> None:
        when = f" at t = {t_s:g} s" if t_s is not None else " while starting"
        for name, lm in self._models.items():
            for load in lm.loads:
                if load.error is not None:
                    raise LiveServerError(
                        f"site {self.name!r}, model {name!r}: the server at {load.url} failed{when}: {load.error[1]}"
                    )
        if self._sampler is not None:
            try:
                self._sampler.check()
            except PowerSourceError as exc:
                raise PowerSourceError(f"site {self.name!r}{when}: {exc}") from None

    def step(self, t_s: float, dt_s: float) -> DatacenterState:
        return self.step_block(np.array([t_s]), dt_s).state(0)

    def step_block(self, t_s: np.ndarray, dt_s: float) -> DatacenterSeries:
        """What was measured over each step ending at ``t_s`` (all in the past: the run is paced).

        :raises SimulationError: the run is not paced (a step ends ahead of the wall clock).
        :raises LiveServerError: a server failed.
        :raises PowerSourceError: the meter failed or stopped.
        """
        if self._origin is None:
            raise SimulationError(f"live site {self.name!r} stepped before the run went live (go_live)")
        t = np.asarray(t_s, dtype=np.float64)
        ends = self._origin + t
        if ends[-1] > time.monotonic() + _AHEAD_S:
            raise SimulationError(
                f"live site {self.name!r} asked for t = {t[-1]:g} s ahead of the wall clock: a live site runs only "
                "in a run paced to real time"
            )
        self._raise_failures(float(t[-1]))
        k = t.size
        phase_w = np.zeros((k, 3))
        models: dict[str, ModelSeries] = {}
        for name, lm in self._models.items():
            models[name], on_phase = self._model_block(lm, ends, dt_s)
            phase_w += on_phase
        p_w = self.spec.pue * phase_w + self._base_w
        series = DatacenterSeries(
            site=self.name,
            t_s=t,
            p_w=p_w,
            q_var=p_w * self._q_per_p,
            models=models,
            training_power_w=np.zeros(k),
            online=np.ones(k, dtype=bool),
            supplied=np.ones(k, dtype=bool),
        )
        return series if self.supplied else series.without_supply()

    def _replica_w(self, lm: _LiveModel, r: int, a: float, b: float) -> float:
        """GPU power of real replica ``r`` over ``(a, b]`` (W): measured, or the profile's estimate."""
        if self._sampler is None:
            x, w = lm.profile_w
            running = lm.loads[r].in_flight.mean(a, b)
            if lm.spec.batch_knob.kind == "http":  # the client saturates the server: its own limit runs
                running = min(running, lm.batch)
            return float(np.interp(math.log2(max(running, 1.0)), x, w))
        history = self._sampler.history
        return sum(history.mean_w(gpu, a, b) for gpu in lm.spec.endpoints[r].gpus)

    def _model_block(self, lm: _LiveModel, ends: np.ndarray, dt_s: float) -> tuple[ModelSeries, np.ndarray]:
        k, n_real = ends.size, len(lm.loads)
        power, in_flight, measured = np.zeros(k), np.zeros(k), np.full(k, np.nan)
        itl, miss, tput = np.full(k, np.nan), np.zeros(k), np.zeros(k)
        on_phase = np.zeros((k, 3))
        deadline = lm.spec.itl_deadline_s
        # the simulated replicas by (real replica, delay): each pair's window is measured once
        pairs, which = np.unique(
            np.stack([lm.real, np.rint(lm.delay_s / _DELAY_GRID_S)], axis=1), axis=0, return_inverse=True
        )
        which = which.reshape(-1)
        for i, b in enumerate(ends):
            a = b - dt_s
            pair_w = np.array(
                [self._replica_w(lm, int(r), a - d * _DELAY_GRID_S, b - d * _DELAY_GRID_S) for r, d in pairs]
            )
            replica_w = pair_w[which]
            power[i] = replica_w.sum()
            for ph in range(3):
                on_phase[i, ph] = replica_w[lm.phase == ph].sum()
            windows = [load.tokens.window(a, b) for load in lm.loads]
            samples = [x for w in windows for x in w.itl_s]
            tput[i] = sum(w.count for w in windows) / dt_s / n_real * lm.spec.replicas
            if samples:
                itl[i] = sum(samples) / len(samples)
                if deadline is not None:
                    miss[i] = sum(1 for x in samples if x > deadline) / len(samples)
            in_flight[i] = sum(load.in_flight.mean(a, b) for load in lm.loads) / n_real
            if self._sampler is not None:
                measured[i] = sum(self._replica_w(lm, r, a, b) for r in range(n_real))
        series = ModelSeries(
            model=lm.spec.model,
            replicas=np.full(k, float(lm.spec.replicas)),
            batch_size=np.full(k, lm.batch, dtype=np.int64),
            power_w=power,
            itl_s=itl,
            throughput_tok_s=tput,
            deadline_miss_fraction=miss,
            power_cap_w=np.full(k, np.nan),
            itl_deadline_s=deadline,
            in_flight=in_flight,
            measured_power_w=measured,
        )
        return series, on_phase

    # ------------------------------------------------------------------ commands
    def apply(self, command: Command, t_s: float) -> None:
        """Carry out a ``set_batch_size``: the servers' requests in flight (and their own limit,
        with ``batch_knob: http``) follow at once.

        :raises CommandError: another command, an unknown model or an unmeasured batch size.
        """
        command = self.check_command(command)
        lm = self._models[command.model]
        lm.batch = command.batch_size
        for load in lm.loads:
            if lm.spec.batch_knob.kind == "http":
                post_batch_limit(load.url, lm.spec.batch_knob.path, command.batch_size)
            else:
                load.set_target(command.batch_size)

    def check_command(self, command: Command) -> SetBatchSize:
        """``command`` if the site can carry it out (the servers need not run).

        :raises CommandError: not a ``set_batch_size``, an unknown model or an unmeasured batch size.
        """
        if not isinstance(command, SetBatchSize):
            raise CommandError(
                f"live site {self.name!r} takes set_batch_size only, not {type(command).__name__}: its replicas, "
                "power caps and supply are real"
            )
        info = self._info.models.get(command.model)
        if info is None:
            raise CommandError(
                f"live site {self.name!r} serves no model {command.model!r}; it serves {sorted(self._info.models)}"
            )
        if command.batch_size not in info.batch_sizes:
            raise CommandError(
                f"live site {self.name!r}, model {command.model!r}: batch size {command.batch_size} is not one of "
                f"{list(info.batch_sizes)}"
            )
        return command
