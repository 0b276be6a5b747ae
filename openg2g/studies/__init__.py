"""Studies built on sweeps: hosting capacity per bus, datacenter siting, PV placement, and load loss."""

from openg2g.studies.common import (
    BaseScenario,
    Topology,
    controller_override,
    feeder_topology,
    read_base,
    three_phase_buses,
)
from openg2g.studies.hosting import HostingConfig, ModelMix, hosting_settings, model_mix, run_hosting_capacity
from openg2g.studies.load import LoadedStudy, load_study
from openg2g.studies.load_loss import LoadLossResult, run_load_loss
from openg2g.studies.pv_placement import (
    PlacementProblem,
    PlacementSolution,
    PVPlacementResult,
    run_pv_placement,
    solve_placement,
)
from openg2g.studies.search import MaxSearch, bisect_max
from openg2g.studies.siting import rank_placements, run_siting, siting_settings, split_site
from openg2g.studies.spec import STUDY_KINDS, HostingSpec, LoadLossSpec, PVPlacementSpec, SitingSpec, StudySpec

__all__ = [
    "STUDY_KINDS",
    "BaseScenario",
    "HostingConfig",
    "HostingSpec",
    "LoadLossResult",
    "LoadLossSpec",
    "LoadedStudy",
    "MaxSearch",
    "ModelMix",
    "PVPlacementResult",
    "PVPlacementSpec",
    "PlacementProblem",
    "PlacementSolution",
    "SitingSpec",
    "StudySpec",
    "Topology",
    "bisect_max",
    "controller_override",
    "feeder_topology",
    "hosting_settings",
    "load_study",
    "model_mix",
    "rank_placements",
    "read_base",
    "run_hosting_capacity",
    "run_load_loss",
    "run_pv_placement",
    "run_siting",
    "siting_settings",
    "solve_placement",
    "split_site",
    "three_phase_buses",
]
