"""openg2g.testing: analytic components with known answers, for tests of your own backends and controllers.

Nothing here is used by a scenario file: these are fixtures. They implement the real interfaces of
:mod:`openg2g.core.interfaces` with closed-form physics, so a test can compute every expected number
by hand (as the project's own tests of the engine, the Gymnasium env and sweeps do).

- :mod:`~openg2g.testing.toy`: :class:`AnalyticGrid`, a radial feeder whose voltages fall linearly
  with the load; :class:`ToySite`, a site whose power and latency rise with batch size; and
  :func:`toy_scenario` / :func:`toy_components`, the two together as a scenario (the ``toy`` case
  of ``openg2g train`` and ``openg2g/Toy-v0``).
- :mod:`~openg2g.testing.sweep`: :func:`toy_run`, a sweep run function with hand-checkable figures,
  for tests of sweeps and studies without running the simulator.

Example: a controller against the analytic feeder::

    from openg2g.engine.simulation import Simulation
    from openg2g.testing import toy_components, toy_scenario

    loaded = toy_scenario(duration_s=30)
    sites, grid, _ = toy_components(loaded)
    Simulation.from_scenario(loaded, components=(sites, grid, [MyController()])).run()
"""

from openg2g.testing.sweep import toy_data, toy_run, toy_summary
from openg2g.testing.toy import K_PU_PER_W, TAP_STEP_PU, AnalyticGrid, ToySite, toy_components, toy_scenario

__all__ = [
    "K_PU_PER_W",
    "TAP_STEP_PU",
    "AnalyticGrid",
    "ToySite",
    "toy_components",
    "toy_data",
    "toy_run",
    "toy_scenario",
    "toy_summary",
]
