"""Small load-loss studies for the tests, written into a folder (shared by the study and app tests).

``write_stiff_study``: a case whose answer is known by hand. One site on a stiff 12.47 kV source
through a short line (losses of a few watts), its ride-through tripping whole (or half) the moment
a 0.5 pu source sag arrives, on a bulk system of Anderson and Mirheydar's typical reheat plant
(``grid.frequency: {base_mw: 100}``, one group without governor lag). The site's draw is then a
step of the MW lost, so the zenith is :func:`openg2g.grid.frequency.reheat_step_response` of that
step, linear in it: the largest loss within ``f_max_hz`` is the step whose closed-form zenith is
``f_max_hz``, whatever the setting.

``write_ieee13_study``: the bundled ``ieee13_fault_ups`` shortened to 8 s (a fault at 1 s that the
lateral's reclose finds gone), with a 200 MW bulk system, under three settings.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

STIFF_FEEDER = """\
! a stiff source and one short line to the site's bus: the losses are a few watts
Clear
New Circuit.stiff basekv=12.47 pu=1.0 phases=3 bus1=src MVAsc3=2000000 MVAsc1=2000000
New Line.l1 bus1=src bus2=dc phases=3 r1=0.001 x1=0.005 r0=0.003 x0=0.015 length=1 units=km
Set voltagebases=[12.47]
Calcvoltagebases
"""

BASE_MW = 100.0
"""The stiff case's bulk system (MW online)."""

F_MAX_HZ = 60.25
"""The stiff case's frequency limit (Hz)."""

STIFF_HOLDABLE = {"multiplier_min": 0.5, "multiplier_max": 4.0, "tolerance": 0.1}
"""The stiff case's search: a site of about 2.7 MW at 1x, the answer near 3.9 MW."""


def _trip(fraction: float, curve: list[list[float]]) -> dict[str, Any]:
    return {"name": f"trip{int(100 * fraction)}", "fraction": fraction, "action": "trip", "under_voltage": curve}


def stiff_base() -> dict[str, Any]:
    """The stiff case's scenario (as data): 4,000 Llama-3.1-8B replicas tripping at once below 0.7 pu."""
    return {
        "name": "stiff_trip",
        "seed": 0,
        "duration_s": 8,
        "periods": {"datacenter_s": 0.1, "grid_s": 0.1, "control_s": 1},
        "grid": {"feeder": "stiff.dss", "v_min_pu": 0.9, "v_max_pu": 1.1, "frequency": {"base_mw": BASE_MW}},
        "datacenters": [
            {
                "name": "dc",
                "bus": "dc",
                "models": [{"model": "Llama-3.1-8B", "gpus_per_replica": 1, "replicas": 4000, "batch_size": 128}],
                "ride_through": {"blocks": [_trip(1.0, [[0.7, 0.0]])]},
            }
        ],
        "disturbances": {
            "events": [
                {
                    "kind": "source_sag",
                    "name": "sag",
                    "start_s": 1,
                    "profile": [{"after_s": 0, "v_pu": [0.5]}, {"after_s": 0.1, "v_pu": [1.0]}],
                }
            ]
        },
        "outputs": {"flush_every_s": 60},
    }


def write_stiff_study(directory: Path, **fields: Any) -> Path:
    """The stiff case's feeder, base scenario and study file in ``directory``: settings ``whole``
    (the base's own: the site trips whole), ``half`` (half trips, half rides through the sag) and
    ``stays`` (no block acts at 0.5 pu); ``f_max_hz`` the only limit; the search
    :data:`STIFF_HOLDABLE`. ``fields`` replace the study's own."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "stiff.dss").write_text(STIFF_FEEDER)
    (directory / "stiff_trip.yaml").write_text(yaml.safe_dump(stiff_base(), sort_keys=False))
    stays = _trip(1.0, [[0.3, 0.5]])
    study = {
        "study": "load_loss",
        "name": "stiff_load_loss",
        "base": "stiff_trip.yaml",
        "settings": {
            "whole": {},
            "half": {
                "ride_through": {"blocks": [_trip(0.5, [[0.7, 0.0]]), {**stays, "name": "rest", "fraction": 0.5}]}
            },
            "stays": {"ride_through": {"blocks": [stays]}},
        },
        "limits": {"f_max_hz": F_MAX_HZ},
        "holdable": dict(STIFF_HOLDABLE),
        **fields,
    }
    path = directory / "study.yaml"
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    return path


IEEE13_SET = [
    "duration_s=8",
    "disturbances.events.0.start_s=1",
    "disturbances.events.0.persists_s=1",
    "disturbances.events.0.reclosing.dead_times_s=[1]",
    "grid.frequency={base_mw: 200}",
]
"""``ieee13_fault_ups`` shortened: the fault at 1 s, cleared in 0.1 s, the reclose at 2.1 s finds it gone."""


def write_ieee13_study(directory: Path, **fields: Any) -> Path:
    """A load-loss study of the shortened ``ieee13_fault_ups`` in ``directory``: settings ``own``
    (four halls on their UPS), ``trip`` (the whole site trips below 0.5 pu for two cycles) and
    ``none`` (no ride-through); limits 59.5-60.1 Hz and 0.95-1.05 pu; no search."""
    directory.mkdir(parents=True, exist_ok=True)
    study = {
        "study": "load_loss",
        "name": "ieee13_load_loss",
        "base": "ieee13_fault_ups",
        "set": list(IEEE13_SET),
        "settings": {
            "own": {},
            "trip": {"ride_through": {"blocks": [_trip(1.0, [[0.5, 0.033]])], "return_to_service": {"delay_s": 60}}},
            "none": {"ride_through": None},
        },
        "limits": {"f_min_hz": 59.5, "f_max_hz": 60.1, "v_min_pu": 0.95, "v_max_pu": 1.05},
        **fields,
    }
    path = directory / "study.yaml"
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    return path
