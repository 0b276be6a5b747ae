"""The simpy co-simulation engine: exact clock, component processes, the recorders' hooks."""

from openg2g.core.lazy import lazy_exports

__all__ = ["Clock", "Periods", "Priority", "Recorder", "Scheduled", "Simulation"]

# Lazy, so that the schema's periods (``openg2g.engine.periods``) do not load the simulation and
# with it simpy, the recorders and the BLAS set-up.
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "clock": ("Clock",),
        "periods": ("Periods",),
        "recording": ("Recorder",),
        "simulation": ("Priority", "Scheduled", "Simulation"),
    },
)
