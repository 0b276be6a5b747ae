"""The simpy co-simulation engine: exact clock, component processes, outputs and run metrics."""

from openg2g.engine.clock import Clock
from openg2g.engine.simulation import Priority, RunResult, Simulation, run_scenario

__all__ = ["Clock", "Priority", "RunResult", "Simulation", "run_scenario"]
