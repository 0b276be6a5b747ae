"""Scenario files: the pydantic schema, the loader that validates them completely, the building of
their components and simulation (``LoadedScenario.simulation_parts``, for
``Simulation.from_scenario``), and running one (:func:`openg2g.scenario.run.run_scenario`)."""

from openg2g.core.lazy import lazy_exports

__all__ = ["LoadedScenario", "Scenario", "load_scenario"]

# Lazy, so that what needs the schema alone (``openg2g schema``) does not load the builder and with
# it the grid, the sites and scipy.
__getattr__, __dir__ = lazy_exports(
    __name__, {"loaded": ("LoadedScenario",), "loader": ("load_scenario",), "schema": ("Scenario",)}
)
