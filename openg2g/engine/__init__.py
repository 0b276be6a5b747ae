"""The simpy co-simulation engine: exact clock, component processes, the recorders' hooks."""

from openg2g.engine.clock import Clock
from openg2g.engine.periods import Periods
from openg2g.engine.recording import Recorder
from openg2g.engine.simulation import Priority, Scheduled, Simulation

__all__ = ["Clock", "Periods", "Priority", "Recorder", "Scheduled", "Simulation"]
