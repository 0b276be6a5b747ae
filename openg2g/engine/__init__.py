"""The simpy co-simulation engine: exact clock, component processes, outputs and run metrics."""

from openg2g.engine.clock import Clock
from openg2g.engine.simulation import Phase, RunResult, Simulation, run_scenario

__all__ = ["Clock", "Phase", "RunResult", "Simulation", "run_scenario"]
