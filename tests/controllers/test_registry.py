"""The stock registry and the Config contract the engine relies on."""

from __future__ import annotations

import pydantic
import pytest

import openg2g.controllers
from openg2g.control.registry import stock_controllers
from openg2g.core.interfaces import Controller

MINIMAL_PARAMS = {
    "noop": {},
    "rule_based": {},
    "pid": {"setpoint": 0.955, "kp": 1.0},
    "ofo": {},
    "mpc": {},
    "tap_schedule": {"schedule": [{"t_s": 1, "bank": "reg1", "taps": [1, 1, 1]}]},
    "storage_droop": {"storage": "bat1", "buses": ["671"]},
    "load_shift": {},
}


STOCK = stock_controllers()


def test_registry_names_and_exports():
    """Every stock controller is an entry point of the package and exported by openg2g.controllers."""
    assert set(MINIMAL_PARAMS) <= set(STOCK)  # the stock set may grow (e.g. rl_policy)
    for kind in MINIMAL_PARAMS:
        assert STOCK[kind].__name__ in openg2g.controllers.__all__


@pytest.mark.parametrize("kind", sorted(MINIMAL_PARAMS))
def test_each_controller_builds_the_engine_way(kind):
    cls = STOCK[kind]
    assert issubclass(cls, Controller)
    ctrl = cls(cls.Config(**MINIMAL_PARAMS[kind]))
    assert isinstance(ctrl, Controller)
    cfg = cls.Config(**MINIMAL_PARAMS[kind])
    assert cfg.model_config.get("extra") == "forbid" and cfg.model_config.get("frozen") is True
    with pytest.raises(pydantic.ValidationError, match="no_such_param"):
        cls.Config(**MINIMAL_PARAMS[kind], no_such_param=1)


def test_wrong_type_names_the_field():
    with pytest.raises(pydantic.ValidationError, match="horizon_steps"):
        STOCK["mpc"].Config(horizon_steps="many")
    with pytest.raises(pydantic.ValidationError, match="primal_step"):
        STOCK["ofo"].Config(primal_step="fast")


@pytest.mark.parametrize("kind", sorted(MINIMAL_PARAMS))
@pytest.mark.parametrize("bad", [float("inf"), float("-inf"), float("nan")])
def test_no_number_of_a_controller_may_be_infinite_or_nan(kind, bad):
    cls = STOCK[kind]
    numbers = [name for name, f in cls.Config.model_fields.items() if f.annotation in (float, "float", float | None)]
    assert numbers or kind in ("noop", "tap_schedule"), "a controller with parameters has numbers to check"
    for name in numbers:
        with pytest.raises(pydantic.ValidationError, match=f"(?s){name}.*finite number"):
            cls.Config(**{**MINIMAL_PARAMS[kind], name: bad})


def test_a_controller_by_module_path():
    """``kind: package.module:ClassName`` imports an installed module (the loader RL terms share)."""
    from pathlib import Path

    from openg2g.control.registry import resolve_controller
    from openg2g.core.errors import ControllerError

    assert resolve_controller("openg2g.controllers.noop:NoopController", Path(".")) is STOCK["noop"]
    with pytest.raises(ControllerError, match="controller 'no_such_pkg_xyz:C': no module named 'no_such_pkg_xyz'"):
        resolve_controller("no_such_pkg_xyz:C", Path("."))
    with pytest.raises(ControllerError, match="module openg2g.controllers.noop has no 'Nope'"):
        resolve_controller("openg2g.controllers.noop:Nope", Path("."))
    with pytest.raises(ControllerError, match="is not a subclass of openg2g.core.interfaces.Controller"):
        resolve_controller("pathlib:Path", Path("."))


def test_a_broken_plugin_of_another_package_stops_only_what_names_it(tmp_path, monkeypatch):
    """A dist-info on the path registering ``broken = no_such_module:X``: the stock controllers
    still resolve, and naming the broken one says which entry point failed."""
    import sys

    from openg2g.control.registry import resolve_controller
    from openg2g.core.errors import ControllerError

    dist = tmp_path / "brokenplugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: brokenplugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[openg2g.controllers]\nbroken = no_such_module:X\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    assert resolve_controller("ofo", tmp_path).__name__ == "OFOController"
    with pytest.raises(ControllerError, match=r"controller 'broken' \(no_such_module:X\) failed to import"):
        resolve_controller("broken", tmp_path)
