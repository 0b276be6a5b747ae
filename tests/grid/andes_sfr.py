"""ANDES runs that check the aggregate frequency model (:mod:`openg2g.grid.frequency`): a load step
in a power-system dynamics engine, its centre-of-inertia frequency, and the aggregate spec derived
from the same case's data. Used by ``tests/grid/test_frequency_andes.py`` and
``bench/frequency_validation.py``; needs the ``dynamics`` extra (``pip install -e ".[dynamics]"``),
which the library itself never imports.

Two cases:

- **Kundur's two-area system** (ANDES's ``kundur/kundur_full.xlsx``: four 900 MVA GENROU machines,
  TGOV1 governors, EXDC2 exciters, loads at buses 7 and 9), with its scheduled line trip taken out
  and a step of the load at bus 7. The aggregate spec: ``base_mw`` the machines' summed rating,
  ``H`` their rating-weighted inertia, one reheat group per TGOV1 (share its machine's rating over
  ``base_mw``, droop ``R``, ``T_G = T1``, ``T_R = T3``, ``F_H = T2 / T3``), ``D`` the machines' and
  turbines' damping (0 in this case). ANDES turns constant-power loads into constant impedances in
  its time-domain run by default; with that the load follows the voltage, which an aggregate model
  has none of (the step is then 53 % off in nadir), so the loads are set to constant power for the
  run (``p2p = q2q = 1``), as a datacenter's power electronics draw. Constant-power loads have no
  frequency dependence, so ``D`` stays 0. The generators must also cover the change in network
  losses: the step the aggregate sees is the load step plus that change, from two ANDES power
  flows (before, and after the step with the generation shared as the droops share it in steady
  state), not from the dynamic run.
- **One machine** (a GENCLS classical machine with a TGOV1 governor feeding a constant-power load
  over a lossless line): the case where the aggregate model is exact, so any difference is the
  dynamics engine's own (its trapezoidal step).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from typing import Literal

import numpy as np

from openg2g.grid.frequency import ReheatSteamGovernor, SystemFrequency, SystemFrequencySpec
from openg2g.grid.frequency_metrics import FrequencyMetrics, frequency_metrics

__all__ = ["AndesStep", "kundur_step", "single_machine_step"]

STEP_AT_S = 1.0
"""When the load steps in the ANDES runs (s); the runs' times are given from it."""


@dataclass(frozen=True)
class AndesStep:
    """One ANDES load step and the aggregate model of the same case.

    :ivar case: what was run, in words.
    :ivar tstep_s: ANDES's time step (s).
    :ivar t_s: ANDES's output times after the step (s, from 0).
    :ivar f_hz: its centre-of-inertia frequency at those times (Hz).
    :ivar spec: the aggregate spec derived from the case's data.
    :ivar load_step_w: the load step (W).
    :ivar delta_p_w: what the aggregate model is stepped with: the load step plus the change in
        network losses (W).
    """

    case: str
    tstep_s: float
    t_s: np.ndarray
    f_hz: np.ndarray
    spec: SystemFrequencySpec
    load_step_w: float
    delta_p_w: float

    def model_f_hz(self, delay_s: float = 0.0) -> np.ndarray:
        """The aggregate model at ANDES's output times (Hz at each), its step ``delay_s`` (s) later
        than ANDES's: ANDES's trapezoidal rule averages the slopes before and after the change over
        its first step, as if the load had changed half a step later."""
        model = SystemFrequency(self.spec)
        times = np.maximum(self.t_s - delay_s, 0.0)
        out = [model.step(float(dt), self.delta_p_w) if dt > 0 else model.frequency_hz for dt in np.diff(times)]
        return np.concatenate(([self.spec.f0_hz], out))

    def metrics(self) -> tuple[FrequencyMetrics, FrequencyMetrics]:
        """The metrics of ANDES's trajectory and of the aggregate model's (stepped at the same times)."""
        model = SystemFrequency(self.spec)
        for dt in np.diff(self.t_s):
            model.step(float(dt), self.delta_p_w)
        andes = frequency_metrics(
            self.t_s,
            self.f_hz,
            event_t_s=0.0,
            rocof_window_s=self.spec.rocof_window_s,
            settling_band_hz=self.spec.settling_band_hz,
        )
        return andes, model.metrics()


def _quiet() -> None:
    import andes

    # no log file: ANDES would make a folder in the temporary directory for one at every call
    andes.config_logger(stream_level=40, file=False, log_path=tempfile.gettempdir())


def _constant_power_loads(ss: object) -> None:
    # ANDES's time-domain default turns PQ loads into constant impedances (module docstring)
    cfg = ss.PQ.config  # type: ignore[attr-defined]
    cfg.p2p, cfg.p2i, cfg.p2z = 1.0, 0.0, 0.0
    cfg.q2q, cfg.q2i, cfg.q2z = 1.0, 0.0, 0.0


def _run_step(
    ss: object, load: str, step_pu: float, tf_s: float, tstep_s: float, impedance: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Run ``ss`` to :data:`STEP_AT_S`, step ``load`` by ``step_pu`` (system base) and run on to
    ``tf_s`` after the step: the times after the step and the machines' speeds (pu), one column per
    machine. The step is to the load's constant power, or with ``impedance`` to its constant
    impedance, by ``step_pu`` at the bus's voltage when it steps."""
    tds = ss.TDS  # type: ignore[attr-defined]
    tds.config.tstep = tstep_s
    tds.config.no_tqdm = True
    tds.config.tf = STEP_AT_S
    tds.run()
    pq = ss.PQ  # type: ignore[attr-defined]
    uid = pq.idx2uid(load)
    if impedance:
        bus = ss.Bus  # type: ignore[attr-defined]
        v = float(bus.v.v[bus.idx2uid(pq.bus.v[uid])])
        pq.set("Req", load, float(pq.Req.v[uid]) + step_pu / v**2, attr="v")
    else:
        pq.set("Ppf", load, float(pq.Ppf.v[uid]) + step_pu, attr="v")
    tds.config.tf = STEP_AT_S + tf_s
    tds.run()
    t = np.asarray(ss.dae.ts.t)  # type: ignore[attr-defined]
    return t, np.asarray(ss.dae.ts.x)  # type: ignore[attr-defined]


def _after_step(t: np.ndarray, f: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    # the run holds the state at STEP_AT_S twice (the end of the first run and the start of the second)
    keep = t >= STEP_AT_S - 1e-9
    tt, ff = t[keep] - STEP_AT_S, f[keep]
    tt[np.abs(tt) < 1e-9] = 0.0
    _, first = np.unique(tt, return_index=True)
    return tt[first], ff[first]


KUNDUR = "kundur/kundur_full.xlsx"


def _kundur(andes_mod: object) -> object:
    ss = andes_mod.load(  # type: ignore[attr-defined]
        andes_mod.get_case(KUNDUR),  # type: ignore[attr-defined]
        setup=False,
        no_output=True,
        default_config=True,
    )
    ss.setup()
    for idx in ss.Toggler.idx.v:  # the case's scheduled line trip
        ss.Toggler.set_status(idx, 0)
    ss.PFlow.run()
    return ss


def _kundur_losses(step_pu: float, load: str) -> float:
    """The generation's change (system pu) for a load step of ``step_pu`` at ``load``: the step
    plus the change in losses, from a power flow with the generation shared by the droops."""
    import andes

    ss = _kundur(andes)
    sb = ss.config.mva
    slack0 = float(ss.Slack.p.v.sum())
    pv0 = ss.PV.p0.v.copy()
    gen = {str(g): i for i, g in enumerate(ss.GENROU.gen.v)}
    weight = ss.GENROU.Sn.v / ss.TGOV1.R.vin
    share = weight / weight.sum()
    pv_share = np.array([share[gen[str(i)]] for i in ss.PV.idx.v])
    slack_share = float(sum(share[gen[str(i)]] for i in ss.Slack.idx.v))
    uid = ss.PQ.idx2uid(load)
    ss.PQ.set("p0", load, float(ss.PQ.p0.v[uid]) + step_pu, attr="v")
    total = step_pu
    for _ in range(20):
        for k, idx in enumerate(ss.PV.idx.v):
            ss.PV.set("p0", idx, float(pv0[k] + pv_share[k] * total), attr="v")
        ss.PFlow.run()
        slack = float(ss.Slack.p.v.sum()) - slack0
        new = float(pv_share.sum() * total + slack)
        if abs(new - total) < 1e-12 * max(1.0, abs(total)) or abs(slack - slack_share * new) < 1e-10:
            return new
        total = new
    raise RuntimeError(f"the loss iteration did not settle after 20 power flows (last {total * sb:.6f} MW)")


def kundur_step(
    step_mw: float = 50.0,
    load: str = "PQ_0",
    tf_s: float = 60.0,
    tstep_s: float = 1 / 60,
    loads: Literal["constant_power", "constant_impedance"] = "constant_power",
) -> AndesStep:
    """A load step of ``step_mw`` (MW, + more load) at ``load`` (PQ_0: bus 7) in Kundur's two-area
    system, run for ``tf_s`` after it at ANDES step ``tstep_s``; the aggregate spec derived as the
    module docstring says. ``loads="constant_impedance"`` keeps ANDES's default, every load a
    constant impedance in the time domain, and steps the load's impedance by ``step_mw`` at its
    voltage then (to show what the aggregate model, which has no voltage, leaves out)."""
    import andes

    _quiet()
    ss = _kundur(andes)
    sb = float(ss.config.mva)
    sn = ss.GENROU.Sn.v.astype(float)
    base_mva = float(sn.sum())
    # inertia M = 2H on each machine's rating (the input values; ANDES holds M on the system base)
    h = float(np.sum(ss.GENROU.M.vin / 2 * sn) / base_mva)
    d = float(np.sum((ss.GENROU.D.vin + ss.TGOV1.Dt.vin) * sn) / base_mva)
    syn = {str(g): i for i, g in enumerate(ss.GENROU.idx.v)}
    governors = []
    for k, g in enumerate(ss.TGOV1.syn.v):
        t2, t3 = float(ss.TGOV1.T2.v[k]), float(ss.TGOV1.T3.v[k])
        governors.append(
            ReheatSteamGovernor(
                share=float(sn[syn[str(g)]] / base_mva),
                droop_pu=float(ss.TGOV1.R.vin[k]),
                t_gov_s=float(ss.TGOV1.T1.v[k]),
                f_hp=t2 / t3,
                t_reheat_s=t3,
            )
        )
    spec = SystemFrequencySpec(f0_hz=60.0, base_mw=base_mva, h_s=h, d_pu=d, governors=governors)
    step_pu = step_mw / sb
    if loads == "constant_power":
        _constant_power_loads(ss)
    t, x = _run_step(ss, load, step_pu, tf_s, tstep_s, impedance=loads == "constant_impedance")
    m = ss.GENROU.M.v  # system base: the centre-of-inertia weights
    f = 60.0 * (x[:, ss.GENROU.omega.a] @ m) / m.sum()
    tt, ff = _after_step(t, f)
    generation = _kundur_losses(step_pu, load)
    return AndesStep(
        case=f"ANDES {KUNDUR}, {step_mw:+g} MW at {load}" + (", loads constant Z" if loads != "constant_power" else ""),
        tstep_s=tstep_s,
        t_s=tt,
        f_hz=ff,
        spec=spec,
        load_step_w=step_mw * 1e6,
        delta_p_w=generation * sb * 1e6,
    )


def single_machine_step(step_mw: float = 20.0, tf_s: float = 60.0, tstep_s: float = 1 / 100) -> AndesStep:
    """A load step of ``step_mw`` (MW) on one 1000 MVA GENCLS machine (H 4 s, D 1 pu) with a TGOV1
    governor (R 0.05, T1 0.2 s, T2 2.4 s, T3 8 s) over a lossless line: the aggregate model is
    exact here."""
    import andes

    _quiet()
    sn, m_s, d, r, t1, t2, t3 = 1000.0, 8.0, 1.0, 0.05, 0.2, 2.4, 8.0
    ss = andes.System(default_config=True, no_output=True)
    ss.add("Bus", {"idx": 1, "name": "gen", "Vn": 20.0})
    ss.add("Bus", {"idx": 2, "name": "load", "Vn": 20.0})
    ss.add("Line", {"idx": "line", "bus1": 1, "bus2": 2, "r": 0.0, "x": 0.05, "b": 0.0, "Vn1": 20.0, "Vn2": 20.0})
    ss.add("Slack", {"idx": "g", "bus": 1, "Sn": sn, "Vn": 20.0, "v0": 1.0, "p0": 5.0})
    ss.add("PQ", {"idx": "load", "bus": 2, "Vn": 20.0, "p0": 5.0, "q0": 1.0})
    ss.add("GENCLS", {"idx": "m", "bus": 1, "gen": "g", "Sn": sn, "Vn": 20.0, "M": m_s, "D": d, "ra": 0.0, "xd1": 0.3})
    ss.add("TGOV1", {"idx": "gov", "syn": "m", "R": r, "T1": t1, "T2": t2, "T3": t3, "VMAX": 10.0, "VMIN": 0.0})
    ss.setup()
    ss.PFlow.run()
    _constant_power_loads(ss)
    sb = float(ss.config.mva)
    t, x = _run_step(ss, "load", step_mw / sb, tf_s, tstep_s)
    tt, ff = _after_step(t, 60.0 * x[:, ss.GENCLS.omega.a[0]])
    spec = SystemFrequencySpec(
        f0_hz=60.0,
        base_mw=sn,
        h_s=m_s / 2,
        d_pu=d,
        governors=[ReheatSteamGovernor(share=1.0, droop_pu=r, t_gov_s=t1, f_hp=t2 / t3, t_reheat_s=t3)],
    )
    return AndesStep(
        case="ANDES one GENCLS + TGOV1, lossless line",
        tstep_s=tstep_s,
        t_s=tt,
        f_hz=ff,
        spec=spec,
        load_step_w=step_mw * 1e6,
        delta_p_w=step_mw * 1e6,
    )
