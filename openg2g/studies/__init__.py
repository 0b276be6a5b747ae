"""Studies built on sweeps: hosting capacity per bus, and datacenter siting."""

from openg2g.studies.common import (
    BaseScenario,
    Topology,
    controller_override,
    feeder_topology,
    read_base,
    three_phase_buses,
)
from openg2g.studies.hosting import HostingConfig, ModelMix, hosting_settings, model_mix, run_hosting_capacity
from openg2g.studies.search import MaxSearch, bisect_max
from openg2g.studies.siting import rank_placements, run_siting, siting_settings, split_site
from openg2g.studies.spec import HostingSpec, LoadedStudy, SitingSpec, load_study

__all__ = [
    "BaseScenario",
    "HostingConfig",
    "HostingSpec",
    "LoadedStudy",
    "MaxSearch",
    "ModelMix",
    "SitingSpec",
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
    "run_siting",
    "siting_settings",
    "split_site",
    "three_phase_buses",
]
