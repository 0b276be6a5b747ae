"""Serving figures of a site's models over one block of steps, computed for all models in one pass.

The model (see :mod:`openg2g.datacenter.replay`): each step, up to ``samples`` replicas of a model
(the site's ``itl_samples``, :data:`ITL_SAMPLES` by default) draw one ITL each from the
time-weighted mixture of every batch configuration in its blend (the same uniform ``u`` and
normal ``z`` for all configurations), blended by the configurations' weights and slowed by the
power cap. The model's ITL is the token-weighted (harmonic) mean over its running sampled
replicas, its throughput ``replicas * conc * mean(1 / ITL)`` and its deadline-miss fraction the
token-share blend of the configurations' analytic tails.

A block's draws, samples and blends of all models of a site are laid out in flat arrays, model
after model, each model's samples in the C order of its ``(steps, replicas)`` array, so every
elementwise operation runs once per block for the whole site instead of once per model and
configuration, and each model's row sums run over exactly the arrays a model-by-model computation
would reduce: the floats are the same bit for bit. A model in a transition computes every
configuration of its blend at once, one row per configuration, and adds the rows in the blend's
order (a reduction over the leading axis of a C-ordered array adds row after row), so its terms
are added as one by one (``tests/datacenter/test_serving.py``), in a dozen numpy calls whatever
the number of configurations.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

import numpy as np

from openg2g.datacenter.config import ITL_SAMPLES
from openg2g.datacenter.library import TimeWeightedSampler

__all__ = ["ITL_SAMPLES", "ServingConstants", "ServingInput", "serve_block"]


@dataclass(frozen=True)
class ServingConstants:
    """What the ITL sampling needs of one batch configuration under one power cap (fixed by them).

    :param sampler: the length-biased ITL mixture; ``None`` if the configuration has no latency data.
    :param slowdown: power-cap slowdown factor of ITL (1 uncapped).
    :param concurrency: ``c``, decoding sequences per replica.
    :param mean_itl_s: per-token mean ITL under the cap (s).
    :param tail: fraction of tokens over the model's deadline under the cap (0 without a deadline).
    """

    sampler: TimeWeightedSampler | None
    slowdown: float
    concurrency: float
    mean_itl_s: float
    tail: float

    @cached_property
    def alone_miss(self) -> float:
        """The deadline-miss fraction of a step served by this configuration alone: the token-share
        blend of :func:`serve_block` for one term of weight 1, in the same operations."""
        share = np.ones(1) * self.concurrency / self.mean_itl_s
        return float((np.zeros(1) + share / (np.zeros(1) + share) * self.tail)[0])


class ServingInput(NamedTuple):
    """One model over one block of ``k`` steps.

    :param uniform_rng: stream of the uniforms choosing each sample's mixture part.
    :param normal_rng: stream of the standard normals of each sample.
    :param width: replica columns of the model's present ramp (> 0); ``min(width, samples)`` are sampled.
    :param replicas: active (possibly fractional) replicas per step.
    :param n_on: replicas running per step (the ceiling of ``replicas``).
    :param n_on_min: the smallest of ``n_on``.
    :param blend: ``(weight per step, constants)`` of each configuration in the blend, in the
        order their terms are added.
    :param has_deadline: the model has an ITL deadline (else its miss fraction is 0).
    :param samples: replicas whose ITL is sampled each step, at most (the site's ``itl_samples``).
    """

    uniform_rng: np.random.Generator
    normal_rng: np.random.Generator
    width: int
    replicas: np.ndarray
    n_on: np.ndarray
    n_on_min: int
    blend: list[tuple[np.ndarray, ServingConstants]]
    has_deadline: bool
    samples: int = ITL_SAMPLES


def serve_block(models: list[ServingInput], k: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Token-weighted ITL (s), throughput (tok/s) and deadline-miss fraction per step of each model.

    Draws ``(k, min(width, samples))`` uniforms and normals from each model's streams (also
    for a model without latency data, whose figures are NaN, NaN and 0).

    :param models: the models of the site that run this block (online, width > 0), in site order.
    :param k: steps in the block.
    :return: per model, three read-only arrays of shape ``(k,)``.
    """
    n_w = [min(m.width, m.samples) for m in models]
    sampled = [i for i, m in enumerate(models) if all(c.sampler is not None for _, c in m.blend)]
    starts = list(itertools.accumulate((k * n_w[i] for i in sampled), initial=0))
    u, z = np.empty(starts[-1]), np.empty(starts[-1])
    segment = {i: (lo, hi) for i, lo, hi in zip(sampled, starts, starts[1:])}
    for i, m in enumerate(models):
        if i in segment:  # a model's draws fill its segment as a (k, n_w) draw of its own would
            lo, hi = segment[i]
            m.uniform_rng.random(out=u[lo:hi])
            m.normal_rng.standard_normal(out=z[lo:hi])
        else:  # no latency data: the streams advance all the same
            m.uniform_rng.random(k * n_w[i])
            m.normal_rng.standard_normal(k * n_w[i])
    if sampled and len(sampled) == len(models):
        return _blend(models, n_w, k, u, z)
    nan = (_frozen(np.full(k, np.nan)), _frozen(np.full(k, np.nan)), _frozen(np.zeros(k)))
    out = [nan] * len(models)
    if sampled:
        figures = _blend([models[i] for i in sampled], [n_w[i] for i in sampled], k, u, z)
        for i, f in zip(sampled, figures):
            out[i] = f
    return out


def _blend(
    models: list[ServingInput], n_w: list[int], k: int, u: np.ndarray, z: np.ndarray
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """:func:`serve_block` for models whose every configuration has latency data; ``u`` and ``z``
    hold their draws, model after model."""
    n_models = len(models)
    itl = np.empty(u.size)
    conc, miss = np.empty((n_models, k)), np.zeros((n_models, k))
    start = 0
    for i, m in enumerate(models):
        end = start + k * n_w[i]
        u_m, z_m, itl_m = u[start:end], z[start:end], itl[start:end]
        start = end
        if len(m.blend) == 1:  # weight exactly 1: the blends below reduce to these floats
            c = m.blend[0][1]
            c.sampler.sample_s(u_m, z_m, out=itl_m)  # type: ignore[union-attr]
            if c.slowdown != 1.0:
                itl_m *= c.slowdown
            conc[i] = c.concurrency
            if m.has_deadline:
                miss[i] = c.alone_miss
            continue
        # every configuration of the blend at once, one row per configuration in the blend's
        # order; rows are then summed first to last (a reduction over the leading axis adds row
        # after row): the floats of adding the terms one by one
        t = _blend_tables(tuple(c for _, c in m.blend))
        weights = np.stack([w for w, _ in m.blend])
        index = np.searchsorted(t.grid, u_m, side="right")
        terms = t.sigmas.take(index, axis=1)
        terms *= z_m
        terms += t.log_scales.take(index, axis=1)
        np.exp(terms, out=terms)
        terms += t.locs_s
        per_step = terms.reshape(len(weights), k, -1)
        np.multiply(per_step, weights[:, :, None], out=per_step)
        if t.slowed:
            terms *= t.slowdowns
        np.add.reduce(terms, axis=0, out=itl_m)
        conc_w = weights * t.concurrency
        np.add.reduce(conc_w, axis=0, out=conc[i], initial=0.0)
        if m.has_deadline:
            shares = conc_w / t.mean_itl_s
            total = np.add.reduce(shares, axis=0, initial=0.0)
            np.add.reduce(shares / total * t.tails, axis=0, out=miss[i], initial=0.0)
    # A sampled replica makes conc / ITL tokens per second, so the token-weighted mean ITL is the
    # harmonic mean n / sum(1 / ITL); replicas not running this step count for nothing.
    np.divide(1.0, itl, out=itl)
    n_valid = np.minimum(np.stack([m.n_on for m in models]), np.array([[m.samples] for m in models]))
    inv_sum = np.empty((n_models, k))
    start = 0
    for i, m in enumerate(models):
        inv = itl[start : start + k * n_w[i]].reshape(k, n_w[i])
        start += k * n_w[i]
        if m.n_on_min < n_w[i]:
            inv = np.where(np.arange(n_w[i])[None, :] < n_valid[i][:, None], inv, 0.0)
        np.add.reduce(inv, axis=1, out=inv_sum[i])
    replicas = np.stack([m.replicas for m in models])
    if min(m.n_on_min for m in models) > 0:
        itl_mean = n_valid / inv_sum
        tput = replicas * conc * inv_sum / n_valid
    else:
        running = n_valid > 0
        with np.errstate(invalid="ignore", divide="ignore"):
            itl_mean = np.where(running, n_valid / inv_sum, np.nan)
            tput = np.where(running, replicas * conc * inv_sum / n_valid, 0.0)
        miss = np.where(running, miss, 0.0)
    return list(zip(_rows(itl_mean), _rows(tput), _rows(miss)))


class _BlendTables(NamedTuple):
    """The constants of one blend's configurations, one row per configuration in the blend's order.

    :param grid: the union of their samplers' thresholds: one ``searchsorted`` of the shared
        uniforms on it picks every configuration's mixture part.
    :param sigmas: per configuration, the sigma of the part each search result selects
        (:meth:`TimeWeightedSampler.on_grid`), shape ``(n, grid.size + 1)``.
    :param log_scales: likewise the log-scale.
    :param locs_s: per configuration, its samples' shift (s), shape ``(n, 1)``.
    :param slowdowns: per configuration, the power-cap slowdown factor, shape ``(n, 1)``.
    :param slowed: whether any slowdown differs from 1.
    :param concurrency: per configuration, decoding sequences per replica, shape ``(n, 1)``.
    :param mean_itl_s: per configuration, the mean ITL under the cap (s), shape ``(n, 1)``.
    :param tails: per configuration, the fraction of tokens over the deadline, shape ``(n, 1)``.
    """

    grid: np.ndarray
    sigmas: np.ndarray
    log_scales: np.ndarray
    locs_s: np.ndarray
    slowdowns: np.ndarray
    slowed: bool
    concurrency: np.ndarray
    mean_itl_s: np.ndarray
    tails: np.ndarray


@functools.lru_cache(maxsize=1024)
def _blend_tables(configs: tuple[ServingConstants, ...]) -> _BlendTables:
    """The :class:`_BlendTables` of configurations that all have latency data (kept: a model's
    blends repeat from block to block while it changes batch)."""
    samplers = [c.sampler for c in configs]
    if any(s is None for s in samplers):
        raise ValueError("a blend of ITL samples needs latency data for every configuration")
    grid = np.unique(np.concatenate([s.thresholds for s in samplers]))  # type: ignore[union-attr]
    tables = [s.on_grid(grid) for s in samplers]  # type: ignore[union-attr]

    def column(values: list[float]) -> np.ndarray:
        return np.array(values)[:, None]

    slowdowns = column([c.slowdown for c in configs])
    return _BlendTables(
        grid=grid,
        sigmas=np.stack([sigma for sigma, _ in tables]),
        log_scales=np.stack([log_scale for _, log_scale in tables]),
        locs_s=column([s.loc_s for s in samplers]),  # type: ignore[union-attr]
        slowdowns=slowdowns,
        slowed=bool((slowdowns != 1.0).any()),
        concurrency=column([c.concurrency for c in configs]),
        mean_itl_s=column([c.mean_itl_s for c in configs]),
        tails=column([c.tail for c in configs]),
    )


def _frozen(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


def _rows(array: np.ndarray) -> list[np.ndarray]:
    """Row views of ``array``, made read-only (a state keeps them without a copy)."""
    array.flags.writeable = False
    return list(array)
