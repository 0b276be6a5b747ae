"""A training job's power: a PARAMETERIZED model, not a measured trace.

Synchronous data-parallel training alternates compute phases (high GPU power) with gradient
communication phases (low GPU power) once per iteration, which the model represents as a square
wave per GPU::

    p_gpu(t) = envelope(t) * (compute_power_w_per_gpu  if phase(t) < compute_fraction
                              else comm_power_w_per_gpu)
    phase(t) = ((t - start_s) / iteration_s) mod 1

``envelope`` ramps linearly 0 -> 1 over ``ramp_s`` after ``start_s`` (job start-up) and 1 -> 0 over
the ``ramp_s`` before ``end_s`` (shut-down); it is 0 outside ``[start_s, end_s]``. GPUs not running
the job draw nothing (idle power is not modelled). Defaults of :class:`TrainingSpec` (650 W compute,
250 W communication, 2 s iterations, 80 % compute) are illustrative H100 values, not a fit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # the scenario package imports this one; avoid the cycle at runtime
    from openg2g.scenario.schema import TrainingSpec

__all__ = ["training_power_w"]


def training_power_w(spec: TrainingSpec, t_s: np.ndarray | float) -> np.ndarray:
    """Total power of the job's GPUs at times ``t_s`` (W).

    :param spec: the job.
    :param t_s: sample times (s).
    :return: array shaped like ``t_s``.
    """
    t = np.asarray(t_s, dtype=np.float64)
    if spec.ramp_s > 0:
        half = (spec.end_s - spec.start_s) / 2
        ramp = min(spec.ramp_s, half)
        env = np.clip(np.minimum(t - spec.start_s, spec.end_s - t) / ramp, 0.0, 1.0)
    else:
        env = ((t >= spec.start_s) & (t < spec.end_s)).astype(np.float64)
    phase = np.mod((t - spec.start_s) / spec.iteration_s, 1.0)
    per_gpu = np.where(phase < spec.compute_fraction, spec.compute_power_w_per_gpu, spec.comm_power_w_per_gpu)
    return spec.gpus * env * per_gpu
