"""``solver: pandapower`` (runpp_3ph reference mode) runs and is approximately right."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from openg2g.grid.backend import FeederGrid
from openg2g.scenario.schema import GridSpec, RegulatorSpec


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
