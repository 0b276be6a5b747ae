"""Which phase each replica of a site draws from: the site's ``layout`` (:class:`~openg2g.datacenter.config.SiteSpec`).

GPUs sit in servers of :data:`GPUS_PER_SERVER`; a server is wired to one phase. Replica ``j`` of a
model with ``g`` GPUs per replica sits on the model's server ``j * g // 8`` (8 one-GPU replicas
share a server, an 8-GPU replica has one), so a layout is the phase of each of a model's servers.

**packed** (the default): each model's configured replicas fill consecutive servers, models one
after another in the order listed, then the training job's servers; server ``s`` counted over the
site is on phase ``"abc"[s % 3]``. A model's replicas beyond its configured count continue its own
pattern.

**pool** (the public OpenG2G study's ``ServerPool``): the site has ``ceil(capacity / 8)`` servers
split evenly over a, b, c (``q + 1`` on the first ``r`` phases, ``q, r = divmod(servers, 3)``). The
models, in name order, each take ``ceil(n * g / 8)`` servers for their ``n`` pool replicas
round-robin: the first on a, each next on the phase after the last one taken, a phase with no free
server skipped. Servers beyond those (replicas above ``n``) continue the model's round-robin
without limit. The study shuffles which server is on which phase and which a model takes first with
its seed; the phase counts above do not depend on that order, and this model has no per-server
properties, so nothing here is random. The training job is spread evenly over the phases (the study
adds a third of its power to each).

Example: the study's ieee123 site z3_se, 600 GPUs (75 servers, 25 per phase), Llama-3.1-405B at 52
replicas of 8 GPUs takes 18/17/17 servers, then Llama-3.1-70B at 45 replicas of 4 GPUs needs 23
servers, finds 7/8/8 free and takes them all: 200/200/200 GPUs per phase. Packed, the same counts
give 208/196/192.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

__all__ = ["GPUS_PER_SERVER", "Layout", "ModelSlots", "replica_phases"]

GPUS_PER_SERVER = 8

Layout = Literal["packed", "pool"]


@dataclass(frozen=True)
class ModelSlots:
    """One model as a layout sees it.

    :param name: model name.
    :param gpus: GPUs per replica.
    :param replicas: replicas the layout places first (packed: the configured count; pool: the
        pool count).
    :param slots: replica slots the site keeps for the model (every replica it may ever run).
    """

    name: str
    gpus: int
    replicas: int
    slots: int


def _servers(replicas: int, gpus: int) -> int:
    return -(-replicas * gpus // GPUS_PER_SERVER)


def _pool_servers(models: Sequence[ModelSlots], capacity_gpus: int) -> dict[str, list[int]]:
    """Phase of each of every model's servers under the pool rule (see the module docstring)."""
    q, r = divmod(math.ceil(capacity_gpus / GPUS_PER_SERVER), 3)
    free = [q + (1 if p < r else 0) for p in range(3)]
    phases: dict[str, list[int]] = {}
    for m in sorted(models, key=lambda m: m.name):
        taken: list[int] = []
        phase = 0
        for _ in range(_servers(m.replicas, m.gpus)):
            for p in (phase, (phase + 1) % 3, (phase + 2) % 3):
                if free[p] > 0:
                    free[p] -= 1
                    taken.append(p)
                    phase = (p + 1) % 3
                    break
            else:  # the pool is full: continue the round-robin unlimited
                taken.append(phase)
                phase = (phase + 1) % 3
        extra = max(_servers(m.slots, m.gpus) - len(taken), 0)
        taken.extend((phase + i) % 3 for i in range(extra))
        phases[m.name] = taken
    return phases


def replica_phases(
    layout: Layout, models: Sequence[ModelSlots], capacity_gpus: int, training_gpus: int
) -> tuple[list[np.ndarray], np.ndarray]:
    """The phase (0, 1, 2 for a, b, c) of every replica slot of each model, and the training job's
    share of its power on each phase.

    :param layout: ``packed`` or ``pool`` (module docstring).
    :param models: the site's models, in the order listed.
    :param capacity_gpus: the site's GPU capacity (the pool's size).
    :param training_gpus: GPUs of the training job (0: none).
    :return: one ``intp`` array of length ``slots`` per model, in the order given, and the
        training share (three fractions summing to 1; zeros without training).
    """
    if layout == "pool":
        servers = _pool_servers(models, capacity_gpus)
        out = []
        for m in models:
            server_phase = np.array(servers[m.name], dtype=np.intp)
            out.append(server_phase[(np.arange(m.slots) * m.gpus) // GPUS_PER_SERVER])
        return out, (np.full(3, 1 / 3) if training_gpus else np.zeros(3))
    out, server = [], 0
    for m in models:
        j = np.arange(m.slots)
        out.append(((server + (j * m.gpus) // GPUS_PER_SERVER) % 3).astype(np.intp))
        server += _servers(m.replicas, m.gpus)
    share = np.zeros(3)
    if training_gpus:
        n_servers = _servers(training_gpus, 1)
        share = np.bincount((server + np.arange(n_servers)) % 3, minlength=3) / n_servers
    return out, share
