"""The aggregate frequency model against ANDES, a power-system dynamics engine (the ``dynamics``
extra: ``pip install -e ".[dynamics]"``): a load step's centre-of-inertia frequency in Kundur's
two-area system, and in one machine where the aggregate model is exact
(``tests/grid/andes_sfr.py`` says how each aggregate spec is derived from the case's data)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.grid.andes_sfr import kundur_step, single_machine_step

pytest.importorskip("andes", reason='ANDES is not installed (the dynamics extra: pip install -e ".[dynamics]")')

pytestmark = pytest.mark.slow


def test_kundur_load_loss_within_one_percent_of_the_zenith_and_a_centihertz_at_settling() -> None:
    # a datacenter's 50 MW leaving bus 7 of the 3600 MVA system
    run = kundur_step(step_mw=-50.0, load="PQ_0")
    andes, model = run.metrics()
    # the generation also sheds the change in losses (a power flow says 2.4 MW more than the load)
    assert -run.delta_p_w / 1e6 == pytest.approx(52.448, abs=0.01)
    peak_andes, peak_model = andes.zenith_hz - 60, model.zenith_hz - 60
    assert peak_andes > 0.1
    assert abs(peak_model - peak_andes) <= 0.01 * peak_andes
    assert andes.settling_hz is not None and model.settling_hz is not None
    assert abs(model.settling_hz - andes.settling_hz) <= 0.01
    assert abs(model.zenith_t_s - andes.zenith_t_s) <= 0.1


def test_one_machine_matches_to_the_dynamics_engines_own_error() -> None:
    run = single_machine_step()
    andes, model = run.metrics()
    assert abs((model.nadir_hz - 60) - (andes.nadir_hz - 60)) <= 1e-5 * abs(andes.nadir_hz - 60)
    assert andes.settling_hz is not None and model.settling_hz is not None
    assert abs(model.settling_hz - andes.settling_hz) <= 1e-5
    # step by step: ANDES's trapezoidal rule averages the slopes before and after the change over
    # its first step, which delays its response by half a step (0.75 mHz: 0.15 Hz/s over 5 ms)...
    assert np.max(np.abs(run.model_f_hz() - run.f_hz)) == pytest.approx(0.15 * run.tstep_s / 2, rel=0.01)
    # ... and with that half step, the two agree to its integration error
    assert np.max(np.abs(run.model_f_hz(delay_s=run.tstep_s / 2) - run.f_hz)) <= 1e-5
