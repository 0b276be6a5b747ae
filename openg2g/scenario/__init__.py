"""Scenario files: the pydantic schema and the loader that validates them completely."""

from openg2g.scenario.loader import LoadedScenario, load_scenario
from openg2g.scenario.schema import Scenario

__all__ = ["LoadedScenario", "Scenario", "load_scenario"]
