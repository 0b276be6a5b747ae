"""Serving figures of a site's models over one block of steps, computed for all models in one pass.

The model (see :mod:`openg2g.datacenter.replay`): each step, up to ``samples`` replicas of a model
(the site's ``itl_samples``, :data:`ITL_SAMPLES` by default) draw one ITL each from the
time-weighted mixture of every batch configuration in its blend (the same uniform ``u`` and
normal ``z`` for all configurations), blended by the configurations' weights and slowed by the
power cap. The model's ITL is the token-weighted (harmonic) mean over its running sampled
replicas, its throughput ``replicas * conc * mean(1 / ITL)`` and its deadline-miss fraction the
token-share blend of the configurations' analytic tails.

A block's draws of all models of a site are laid out in flat arrays, model after model, each
model's in the C order of its ``(steps, sampled replicas)`` array (each drawn by its own streams,
as a draw of its own would fill it), and so are its replica counts, blend rows and weights: one
compiled call (:func:`openg2g.datacenter.kernels.serve_site`) computes every model's figures, with
the same IEEE operations in the same order as the numpy expressions of the model, so the floats
are the same bit for bit (``tests/datacenter/test_serving.py`` adds a blend's terms one by one).
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

__all__ = [
    "ITL_SAMPLES",
    "ServingConstants",
    "ServingInput",
    "expected_figures",
    "expected_inverse_itl",
    "serve_block",
]


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
    def row(self) -> np.ndarray:
        """All of it in one row of 16 floats, as the compiled kernel reads a blend (one row per
        configuration; its columns are named in :mod:`openg2g.datacenter.kernels`): the sampler's
        three part thresholds, its four parts' sigmas and log-scales, its shift, then the
        slowdown, concurrency, mean ITL and tail. Needs a sampler."""
        s = self.sampler
        if s is None:
            raise ValueError("a configuration without latency data has no ITL samples")
        values = [*s.thresholds, *s.sigmas, *s.log_scales, s.loc_s]
        return np.array([*values, self.slowdown, self.concurrency, self.mean_itl_s, self.tail])


class ServingInput(NamedTuple):
    """One model over one block of ``k`` steps.

    :ivar uniform_rng: stream of the uniforms choosing each sample's mixture part.
    :ivar normal_rng: stream of the standard normals of each sample.
    :ivar width: replica columns of the model's present ramp (> 0); ``min(width, samples)`` are sampled.
    :ivar replicas: active (possibly fractional) replicas per step.
    :ivar n_on: replicas running per step (the ceiling of ``replicas``).
    :ivar n_on_min: the smallest of ``n_on``.
    :ivar blend: ``(weight per step, constants)`` of each configuration in the blend, in the
        order their terms are added.
    :ivar has_deadline: the model has an ITL deadline (else its miss fraction is 0).
    :ivar samples: replicas whose ITL is sampled each step, at most (the site's ``itl_samples``).
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


def serve_block(
    models: list[ServingInput], k: int, analytic: bool = False
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Token-weighted ITL (s), throughput (tok/s) and deadline-miss fraction per step of each model.

    Draws ``(k, min(width, samples))`` uniforms and normals from each model's streams (also
    for a model without latency data, whose figures are NaN, NaN and 0), unless ``analytic``
    (:func:`expected_figures`: no draws, the streams do not advance).

    :param models: the models of the site that run this block (online, width > 0), in site order.
    :param k: steps in the block.
    :param analytic: the expected figures instead of the sampled ones (the site's ``itl_statistics``).
    :return: per model, three read-only arrays of shape ``(k,)``.
    """
    if analytic:
        return [expected_figures(m, k) for m in models]
    if not models:
        return []
    from openg2g.datacenter.kernels import serve_site  # numba loads when a site first steps

    sampled = [min(m.width, m.samples) for m in models]
    draws = list(itertools.accumulate((k * n for n in sampled), initial=0))
    u, z = np.empty(draws[-1]), np.empty(draws[-1])
    configs: list[np.ndarray] = []
    weights: list[np.ndarray] = []
    blends = [0]
    for m, lo, hi in zip(models, draws, draws[1:]):
        # a model's draws fill its segment as a (k, n) draw of its own would; the streams advance
        # all the same for a model without latency data
        m.uniform_rng.random(out=u[lo:hi])
        m.normal_rng.standard_normal(out=z[lo:hi])
        if all(c.sampler is not None for _, c in m.blend):
            configs += [c.row for _, c in m.blend]
            weights += [w for w, _ in m.blend]
        blends.append(len(configs))
    figures = np.empty((3, len(models), k))
    if configs:  # flat arrays (one concatenation each is the cheapest copy), shaped in the kernel
        serve_site(
            u,
            z,
            np.array(sampled),
            np.concatenate([m.n_on for m in models]),
            np.array([m.samples for m in models]),
            np.concatenate([m.replicas for m in models]),
            np.concatenate(configs),
            np.array(blends),
            np.concatenate(weights),
            np.array([m.has_deadline for m in models]),
            figures,
        )
    else:  # no model has latency data
        figures[:2] = np.nan
        figures[2] = 0.0
    figures.flags.writeable = False  # a state keeps the rows without a copy
    return list(zip(*figures))


def expected_figures(model: ServingInput, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One model's expected ITL (s), throughput (tok/s) and deadline-miss fraction per step: the
    limit of the sampled figures as the sampled replicas grow, with no draw.

    The sampled token-weighted ITL of ``n`` replicas is ``n / sum(1 / ITL_i)`` and their throughput
    ``replicas * c * mean(1 / ITL_i)``, so both tend to functions of ``E[1 / ITL]``
    (:func:`expected_inverse_itl`). The miss fraction is the analytic one the sampled figures use.
    A step without a running replica has NaN, 0 and 0.
    """
    if not all(c.sampler is not None for _, c in model.blend):
        return (np.full(k, np.nan), np.full(k, np.nan), np.zeros(k))
    weights = np.array([w for w, _ in model.blend])
    constants = [c for _, c in model.blend]
    mean_itl_s = np.array([c.mean_itl_s for c in constants])[:, None]
    concurrency = np.array([c.concurrency for c in constants])[:, None]
    inverse = expected_inverse_itl(weights, constants)
    if model.has_deadline:
        share = weights * concurrency / mean_itl_s
        miss = (share * np.array([c.tail for c in constants])[:, None]).sum(axis=0) / share.sum(axis=0)
    else:
        miss = np.zeros(k)
    running = model.n_on > 0
    figures = (
        np.where(running, 1.0 / inverse, np.nan),
        np.where(running, model.replicas * (weights * concurrency).sum(axis=0) * inverse, 0.0),
        np.where(running, miss, 0.0),
    )
    for array in figures:
        array.flags.writeable = False
    return figures


QUADRATURE_NODES = 24
"""Gauss-Hermite nodes over each sample's normal draw in :func:`expected_inverse_itl` (the
integrand is smooth and bounded by ``1 / loc``: on blends of Llama-3.1-70B's batch sizes 24
nodes agree with 96 to 7e-9, 16 to 3e-7)."""


def expected_inverse_itl(weights: np.ndarray, constants: list[ServingConstants]) -> np.ndarray:
    """``E[1 / ITL]`` (1/s) of one sampled replica per step, its ITL the blend
    ``sum_c w_c * slowdown_c * X_c(u, z)`` of the configurations' time-weighted samples, all drawn
    from one uniform ``u`` (the mixture part) and one normal ``z``.

    A configuration alone has ``E[1 / (slowdown * X)] = 1 / mean ITL`` exactly: its samples are the
    length-biased form of the per-token mixture, so ``E_time[1/X] = E_token[X / X] / E_token[X]``.
    A blend is integrated (:func:`_quadrature`, :func:`openg2g.datacenter.kernels.blend_inverse_itl`).

    :param weights: per configuration its weight at each step, ``(configurations, steps)``.
    :param constants: the configurations, with samplers.
    """
    mean_itl_s = np.array([c.mean_itl_s for c in constants])
    single = (weights > 0).sum(axis=0) == 1
    inverse = np.empty(weights.shape[1])
    inverse[single] = 1.0 / (weights[:, single] * mean_itl_s[:, None]).sum(axis=0)
    blended = np.flatnonzero(~single)
    if blended.size:
        from openg2g.datacenter.kernels import blend_inverse_itl  # numba loads when a site first steps

        capped, mass = _quadrature(tuple(constants))
        out = np.empty(blended.size)
        blend_inverse_itl(np.ascontiguousarray(weights[:, blended]), capped, mass, out)
        inverse[blended] = out
    return inverse


@functools.lru_cache(maxsize=256)
def _quadrature(constants: tuple[ServingConstants, ...]) -> tuple[np.ndarray, np.ndarray]:
    """The quadrature of a blend's samples: over ``u`` piecewise (each configuration's mixture part
    is fixed between the union of their thresholds), over ``z`` by Gauss-Hermite
    (:data:`QUADRATURE_NODES`).

    :return: ``capped`` (configuration, interval, node: the capped sample ``slowdown * (exp(sigma z +
        mu) + loc)``, s) and ``mass`` (interval, node: its probability).
    """
    samplers = [c.sampler for c in constants]
    bounds = np.unique(np.concatenate([[0.0, 1.0], *(s.thresholds for s in samplers if s is not None)]))
    mid, width = (bounds[:-1] + bounds[1:]) / 2, np.diff(bounds)
    z, g = np.polynomial.hermite_e.hermegauss(QUADRATURE_NODES)
    capped = np.empty((len(constants), mid.size, z.size))
    for c, (s, const) in enumerate(zip(samplers, constants)):
        if s is None:
            raise ValueError("a configuration without latency data has no ITL samples")
        part = np.searchsorted(s.thresholds, mid, side="right")
        capped[c] = const.slowdown * (np.exp(s.sigmas[part, None] * z + s.log_scales[part, None]) + s.loc_s)
    return capped, width[:, None] * (g / g.sum())
