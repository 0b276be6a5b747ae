"""Scenario files: the pydantic schema, the loader that validates them completely, the building of
their components and simulation (``LoadedScenario.simulation_parts``, for
``Simulation.from_scenario``), and running one (:func:`openg2g.scenario.run.run_scenario`)."""

from openg2g.scenario.loader import LoadedScenario, load_scenario
from openg2g.scenario.schema import Scenario

__all__ = ["LoadedScenario", "Scenario", "load_scenario"]
