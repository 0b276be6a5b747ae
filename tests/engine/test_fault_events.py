"""A fault placed and cleared by scenario events, through a whole run: the bundled ieee13 case
(site dc1 at bus 671, about 4 MW) with a line-to-ground fault on phase a at 675 from t1 = 1 s to
t2 = 2 s. An event at t acts before the grid solve at t, so the grid rows stamped ``[t1, t2)`` are
solved through the fault. The site drawn as an OpenDSS model-1 load rides through it; drawn at
constant power, it cannot be solved there, and the run stops, or with ``grid.on_nonconvergence:
flag`` records those steps as not converged and goes on."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from openg2g.core.errors import PowerFlowError
from openg2g.scenario.run import run_scenario

T1, T2 = 1.0, 2.0
BASE = ("duration_s=3", "outputs.plots=false", "events=[]")
FAULT = (
    f"events=[{{t_s: {T1}, command: apply_fault, name: arc, bus1: '675.1', r_ohm: 0.05}},"
    f" {{t_s: {T2}, command: clear_fault, name: arc}}]"
)


def _grid(out: Path) -> pd.DataFrame:
    return pd.read_parquet(out / "grid")


def _faulted(t_s: pd.Series) -> np.ndarray:
    tenths = np.rint(t_s.to_numpy() * 10)  # rows every 0.1 s
    return (tenths >= T1 * 10) & (tenths < T2 * 10)


@pytest.mark.slow
def test_a_site_at_its_opendss_band_rides_through_the_fault(tmp_path: Path) -> None:
    overrides = (*BASE, "datacenters.0.load_model=opendss")
    run_scenario("ieee13_none", tmp_path / "clear", overrides)
    run_scenario("ieee13_none", tmp_path / "fault", (*overrides, FAULT))
    clear, fault = _grid(tmp_path / "clear"), _grid(tmp_path / "fault")
    during = _faulted(fault.t_s)
    assert during.sum() == 10 and fault.converged.all()
    assert (fault.v_min_pu[during] < 0.2).all() and (clear.v_min_pu > 0.9).all()
    before = fault.t_s < T1
    assert fault.v_min_pu[before].tolist() == clear.v_min_pu[before].tolist()  # untouched, bit for bit
    after = fault.t_s >= T2  # a rebuilt network, solved again to 1e-8 pu
    assert np.abs(fault.v_min_pu[after].to_numpy() - clear.v_min_pu[after].to_numpy()).max() < 1e-7
    events = pd.read_parquet(tmp_path / "fault" / "events")
    assert events.command.tolist() == ["apply_fault", "clear_fault"]


def test_a_constant_power_site_stops_the_run_naming_site_fault_and_time() -> None:
    with pytest.raises(PowerFlowError) as err:
        run_scenario("ieee13_none", None, (*BASE, FAULT, "duration_s=1.5"))
    text = str(err.value)
    assert f"t={T1} s" in text and "fault arc (bus1=675.1 phases=1 r=0.05)" in text
    assert "site dc1 (bus 671" in text and "constant power" in text


@pytest.mark.slow
def test_flag_records_the_faulted_steps_and_goes_on(tmp_path: Path) -> None:
    run_scenario("ieee13_none", tmp_path, (*BASE, FAULT, "grid.on_nonconvergence=flag"))
    grid = _grid(tmp_path)
    during = _faulted(grid.t_s)
    assert (~grid.converged[during]).all() and grid.converged[~during].all()
    assert grid.v_min_pu[during].isna().all()
