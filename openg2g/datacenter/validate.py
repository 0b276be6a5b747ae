"""Checks of a datacenter site spec against a trace library, reported as (field path, message)."""

from __future__ import annotations

from openg2g.datacenter.config import SiteSpec
from openg2g.datacenter.library import TraceLibrary

__all__ = ["validate_site"]


def validate_site(spec: SiteSpec, library: TraceLibrary, index: int) -> list[tuple[str, str]]:
    """Every problem of site ``spec`` (``datacenters.<index>`` in the scenario); never raises for them.

    Checked: model known, GPUs per replica measured, initial batch size and every listed batch size
    measured, initial batch size among the listed ones, ITL data present when a deadline is set,
    and the GPUs of all replicas plus the training job within ``gpu_capacity``.

    :return: ``(field path, message)`` pairs, e.g. ``("datacenters.0.models.1.batch_size", "...")``.
    """
    problems: list[tuple[str, str]] = []
    site = f"datacenters.{index}"
    for j, m in enumerate(spec.models):
        where = f"{site}.models.{j}"
        if m.model not in library.models():
            problems.append((f"{where}.model", f"unknown model {m.model!r}; the trace library has {library.models()}"))
            continue
        measured_gpus = library.gpus(m.model)
        if m.gpus_per_replica not in measured_gpus:
            problems.append(
                (
                    f"{where}.gpus_per_replica",
                    f"{m.model} was not measured on {m.gpus_per_replica} GPUs per replica; measured: {list(measured_gpus)}",
                )
            )
            continue
        measured = library.batch_sizes(m.model, m.gpus_per_replica)
        if m.batch_size not in measured:
            problems.append(
                (
                    f"{where}.batch_size",
                    f"batch size {m.batch_size} not measured for {m.model}; valid: {list(measured)}",
                )
            )
        if m.batch_sizes is not None:
            bad = sorted(set(m.batch_sizes) - set(measured))
            if bad:
                problems.append(
                    (f"{where}.batch_sizes", f"batch sizes {bad} not measured for {m.model}; valid: {list(measured)}")
                )
            if m.batch_size in measured and m.batch_size not in m.batch_sizes:
                problems.append(
                    (f"{where}.batch_size", f"initial batch size {m.batch_size} is not in batch_sizes {m.batch_sizes}")
                )
            if len(set(m.batch_sizes)) != len(m.batch_sizes):
                problems.append((f"{where}.batch_sizes", f"batch sizes listed twice: {m.batch_sizes}"))
        if m.itl_deadline_s is not None:
            allowed = m.batch_sizes if m.batch_sizes is not None else measured
            no_itl = [
                b for b in allowed if b in measured and library.config(m.model, m.gpus_per_replica, b).itl is None
            ]
            if no_itl:
                problems.append(
                    (f"{where}.itl_deadline_s", f"{m.model} has no ITL measurements at batch sizes {no_itl}")
                )
    inference = sum(m.replicas * m.gpus_per_replica for m in spec.models)
    training = spec.training.gpus if spec.training is not None else 0
    if spec.gpu_capacity is not None:
        if training > spec.gpu_capacity:
            problems.append(
                (f"{site}.training.gpus", f"training uses {training} GPUs, more than gpu_capacity {spec.gpu_capacity}")
            )
        if inference + training > spec.gpu_capacity:
            problems.append(
                (
                    f"{site}.gpu_capacity",
                    (
                        f"models use {inference} GPUs and training {training}: {inference + training} "
                        f"exceed gpu_capacity {spec.gpu_capacity}"
                    ),
                )
            )
    return problems
