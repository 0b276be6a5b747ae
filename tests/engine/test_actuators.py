"""Settings commands write, and their owners: a site-wide setting covers each model's."""

from __future__ import annotations

from openg2g.core.commands import SetBatchSize, SetLoadScale, SetPowerCap, ShiftReplicas
from openg2g.engine.actuators import ActuatorOwners


def test_a_site_wide_setting_overlaps_each_of_its_models():
    owners = ActuatorOwners()
    assert owners.claim("a", SetPowerCap(site="dc1", cap_w_per_gpu=650.0, model="m1").actuators()) is None
    assert owners.claim("b", SetPowerCap(site="dc2", cap_w_per_gpu=650.0).actuators()) is None
    assert owners.claim("b", SetBatchSize(site="dc1", model="m1", batch_size=8).actuators()) is None
    assert owners.claim("b", SetPowerCap(site="dc1", cap_w_per_gpu=650.0).actuators()) == (
        "b writes power_cap of site 'dc1', every model, which a already writes (it writes power_cap of site 'dc1', model 'm1')"
    )
    assert owners.claim("a", SetPowerCap(site="dc1", cap_w_per_gpu=620.0).actuators()) is None  # its own
    assert owners.claim("c", SetLoadScale(scale=1.1, load="l1").actuators()) is None
    assert owners.claim("d", SetLoadScale(scale=0.9).actuators()) == (
        "d writes load_scale of every load, which c already writes (it writes load_scale of load 'l1')"
    )


def test_a_shift_writes_the_replicas_of_both_sites():
    owners = ActuatorOwners()
    assert owners.claim("a", ShiftReplicas(site="dc1", model="m", replicas=1, to_site="dc2").actuators()) is None
    assert owners.claim("b", ShiftReplicas(site="dc3", model="m", replicas=1, to_site="dc2").actuators()) == (
        "b writes replicas of site 'dc2', model 'm', which a already writes"
    )
