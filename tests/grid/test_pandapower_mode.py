"""``solver: pandapower`` (runpp_3ph reference mode) runs and is approximately right."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from openg2g.core.errors import PowerFlowError
from openg2g.core.state import DatacenterState
from openg2g.grid.feeder.backend import FeederGrid
from openg2g.scenario.schema import GridSpec, ModelSpec, RegulatorSpec, SiteSpec


@pytest.mark.filterwarnings("ignore")
def test_pandapower_mode_close_to_exact_on_ieee13() -> None:
    taps = {"reg1": RegulatorSpec(taps=[10, 8, 11])}
    exact = FeederGrid.from_spec(GridSpec(feeder="openg2g-ieee13", regulators=taps), [], Path(".")).solve(0.0, {}, 1.0)
    ref = FeederGrid.from_spec(
        GridSpec(feeder="openg2g-ieee13", regulators=taps, solver="pandapower"), [], Path(".")
    ).solve(0.0, {}, 1.0)
    assert ref.bus_phases == exact.bus_phases
    # approximate by design (sequence frame, one tap per bank): within 5%
    np.testing.assert_allclose(ref.v_pu, exact.v_pu, rtol=0.05)


@pytest.mark.slow  # runpp_3ph until it fails: about 4 s
@pytest.mark.filterwarnings("ignore")
def test_pandapower_nan_result_is_a_failure_not_a_state() -> None:
    """Past IEEE 123's collapse point runpp_3ph reports convergence with NaN voltages."""
    site = SiteSpec(name="dc", bus="300", models=[ModelSpec(model="m", gpus_per_replica=1, replicas=1, batch_size=1)])
    grid = FeederGrid.from_spec(GridSpec(feeder="ieee123", solver="pandapower"), [site], Path("."))
    p = np.full(3, 2e6)
    with pytest.raises(PowerFlowError, match="did not converge at t=0.0 s on feeder ieee123"):
        grid.solve(0.0, {"dc": DatacenterState("dc", 0.0, p, p / 3, {})}, 1.0)
