"""What a controller's voltage sensors read: the grid's solution, or it with a measurement error.

A controller that closes a loop on voltages reads them through meters whose error is of the order
of the margins it works in (a revenue-class PT and meter: about 0.2-0.5% of reading; a distribution
PMU: 0.1%). A scenario gives a controller ``voltage_noise_pu`` (``controllers[*]``, a standard
deviation in pu) to ask how its policy copes; the recorded voltages stay the grid's own.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from openg2g.core.state import Observation

__all__ = ["noisy_voltages", "sensor_rng"]


def sensor_rng(seed: int, controller_index: int) -> np.random.Generator:
    """The generator of controller ``controller_index``'s sensor errors in a run seeded ``seed``:
    its own stream, so that adding noise to one controller leaves every other draw of the run as it
    was (the sites' ITL draws, another controller's errors)."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0x5E45, controller_index)))


def noisy_voltages(observation: Observation, rng: np.random.Generator, sigma_pu: float) -> Observation:
    """``observation`` with an independent Gaussian error of standard deviation ``sigma_pu`` (pu)
    added to every energized bus-phase voltage (a de-energized one reads its 0, a missing one NaN);
    one draw per bus-phase and call, every bus-phase drawn each time so that the stream does not
    depend on which are energized."""
    grid = observation.grid
    error = rng.normal(0.0, sigma_pu, grid.v_pu.shape)
    live = np.isfinite(grid.v_pu) if grid.energized is None else np.isfinite(grid.v_pu) & grid.energized
    read = np.where(live, grid.v_pu + error, grid.v_pu)
    return dataclasses.replace(observation, grid=dataclasses.replace(grid, v_pu=read))
