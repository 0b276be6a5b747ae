"""Files that could run code when read (issue 29, item 1): a pandapower pickle net, a pandapower
JSON net naming a module, a policy zip with pickled entries. Each hostile file here would create
a marker (or import a module) when read; ``openg2g validate`` and ``powerflow`` must refuse it, or
read it without running anything, and leave no marker. The trusted ways on are checked too: a
genuine pickle net with ``grid.trust_pickle`` / ``--trust-pickle``, the bundled policy as before.
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import shutil
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from openg2g.cli.main import main
from openg2g.core.paths import bundled_policies_dir

pp = pytest.importorskip("pandapower")
pn = pytest.importorskip("pandapower.networks")

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


class _MakesMarker:
    """Unpickling this creates the folder ``path``: the stand-in for any code a pickle may run."""

    def __init__(self, path: Path):
        self.path = str(path)

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return os.mkdir, (self.path,)


def _net_scenario(tmp: Path, net_file: str, **grid: Any) -> Path:
    """The bundled cigre_mv_ofo scenario on the net file ``net_file`` (in ``tmp``), 1 s long."""
    data = yaml.safe_load((SCENARIOS / "cigre_mv_ofo.yaml").read_text())
    data["grid"].update(pandapower=net_file, **grid)
    data["duration_s"] = 1
    path = tmp / "scenario.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _cigre() -> Any:
    return pn.create_cigre_network_mv()


# ----------------------------------------------------------------------------------- pickle nets
def test_a_pickle_net_is_refused_without_trust_and_runs_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "marker"
    (tmp_path / "net.p").write_bytes(pickle.dumps({"bus": _MakesMarker(marker)}))
    scenario = _net_scenario(tmp_path, "net.p")
    assert main(["validate", str(scenario)]) == 2
    err = capsys.readouterr().err
    assert "net.p" in err and "grid.trust_pickle: true" in err and "JSON" in err
    assert main(["powerflow", str(tmp_path / "net.p"), "--dc", "Bus 14=2"]) == 2
    assert "--trust-pickle" in capsys.readouterr().err
    assert not marker.exists()


@pytest.mark.parametrize("value", [1, "true", 1.0])
def test_only_a_yaml_true_trusts_a_pickle_net(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: object
) -> None:
    """An opt-in to running code is a boolean written as one: ``1`` or the string ``"true"`` is an
    error, not a yes."""
    marker = tmp_path / "marker"
    (tmp_path / "net.p").write_bytes(pickle.dumps({"bus": _MakesMarker(marker)}))
    assert main(["validate", str(_net_scenario(tmp_path, "net.p", trust_pickle=value))]) == 2
    assert "grid.trust_pickle" in capsys.readouterr().err
    assert not marker.exists()


@pytest.mark.slow
def test_a_trusted_pickle_net_reads_as_its_json_twin(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    net = _cigre()
    pp.to_pickle(net, str(tmp_path / "cigre.p"))
    pp.to_json(net, str(tmp_path / "cigre.json"))
    assert main(["validate", str(_net_scenario(tmp_path, "cigre.p", trust_pickle=True))]) == 0
    capsys.readouterr()
    voltages = []
    for argv in (["cigre.p", "--trust-pickle"], ["cigre.json"]):
        assert main(["powerflow", str(tmp_path / argv[0]), *argv[1:], "--dc", "Bus 14=2", "--json"]) == 0
        voltages.append(json.loads(capsys.readouterr().out)["v_pu"])
    assert voltages[0] == voltages[1] and "Bus 14.a" in voltages[0]


# ------------------------------------------------------------------------------------- JSON nets
def _side_effect_module(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path]:
    """A module on sys.path whose import creates a marker folder: ``(name, marker)``."""
    name, marker = "g2g_import_side_effect", tmp / "imported"
    (tmp / "mods").mkdir()
    (tmp / "mods" / f"{name}.py").write_text(f"import os\nos.mkdir({str(marker)!r})\n")
    monkeypatch.syspath_prepend(str(tmp / "mods"))
    monkeypatch.delitem(sys.modules, name, raising=False)
    return name, marker


def _object_of(module: str) -> dict[str, str]:
    return {"_module": module, "_class": "Anything", "_object": "{}"}


def _net_naming_at_top(module: str) -> str:
    """The cigre net as pandapower writes it, plus one object of ``module`` among its tables."""
    data = json.loads(pp.to_json(_cigre()))
    data["_object"]["extra"] = _object_of(module)
    return json.dumps(data)


def _net_naming_in_a_frame(module: str) -> str:
    """The cigre net with the name of its first bus an object of ``module``, inside the bus frame's
    JSON text (as pandapower writes frames), its key spelled with a JSON escape."""
    data = json.loads(pp.to_json(_cigre()))
    frame = data["_object"]["bus"]
    inner = json.loads(frame["_object"])
    inner["data"][0][0] = _object_of(module)
    frame["_object"] = json.dumps(inner).replace('"_module"', '"\\u005fmodule"')
    return json.dumps(data)


@pytest.mark.slow
@pytest.mark.parametrize("place", [_net_naming_at_top, _net_naming_in_a_frame], ids=["table", "frame-cell"])
def test_a_json_net_naming_a_module_is_refused_before_it_is_imported(
    place: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    module, marker = _side_effect_module(tmp_path, monkeypatch)
    (tmp_path / "net.json").write_text(place(module))
    assert main(["validate", str(_net_scenario(tmp_path, "net.json"))]) == 2
    err = capsys.readouterr().err
    assert "net.json" in err and f"names {module}.Anything" in err
    assert not marker.exists() and module not in sys.modules


def test_a_json_net_naming_this_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``this`` prints the Zen of Python when imported (the case of the issue)."""
    had_this = "this" in sys.modules
    (tmp_path / "net.json").write_text(_net_naming_at_top("this"))
    assert main(["powerflow", str(tmp_path / "net.json"), "--dc", "Bus 14=2"]) == 2
    out = capsys.readouterr()
    assert "names this.Anything" in out.err and "Beautiful is better than ugly" not in out.out
    assert ("this" in sys.modules) == had_this


# ---------------------------------------------------------------------------------- policy zips
def _policy_with(tmp: Path, blobs: dict[str, Any]) -> Path:
    """A copy of the bundled policy whose zip ``data`` entry has ``blobs`` pickled in (as SB3
    writes what JSON cannot hold), replacing entries of the same name."""
    src = bundled_policies_dir() / "ieee13_ppo"
    dst = tmp / "policy"
    shutil.copy(src.with_suffix(".json"), dst.with_suffix(".json"))
    with zipfile.ZipFile(src.with_suffix(".zip")) as archive:
        entries = {name: archive.read(name) for name in archive.namelist()}
    data = json.loads(entries["data"])
    for key, value in blobs.items():
        data[key] = {":type:": "<class 'object'>", ":serialized:": base64.b64encode(pickle.dumps(value)).decode()}
    entries["data"] = json.dumps(data).encode()
    with zipfile.ZipFile(dst.with_suffix(".zip"), "w") as archive:
        for name, content in entries.items():
            archive.writestr(name, content)
    return dst.with_suffix(".zip")


def _rl_scenario(tmp: Path, policy: Path, **params: Any) -> Path:
    """ieee13_rl, 1 s long, on ``policy`` (profile paths made absolute for the copy in ``tmp``)."""
    data = yaml.safe_load((SCENARIOS / "ieee13_rl.yaml").read_text())
    for item in (*data["grid"]["pv"], *data["grid"]["extra_loads"]):
        item["profile"] = str(SCENARIOS / item["profile"])
    data["duration_s"] = 1
    data["events"] = []
    data["controllers"] = [{"kind": "rl_policy", "params": {"policy": str(policy), **params}}]
    path = tmp / "rl.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.mark.slow
def test_a_policy_zip_with_a_hostile_known_entry_loads_without_unpickling(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "marker"
    keys = ("observation_space", "action_space", "policy_class", "clip_range", "lr_schedule", "_last_obs")
    policy = _policy_with(tmp_path, {k: _MakesMarker(marker) for k in keys})
    assert main(["validate", str(_rl_scenario(tmp_path, policy))]) == 0, capsys.readouterr().err
    assert not marker.exists()


@pytest.mark.slow
def test_a_policy_zip_with_an_unknown_pickled_entry_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "marker"
    policy = _policy_with(tmp_path, {"env": _MakesMarker(marker)})
    assert main(["validate", str(_rl_scenario(tmp_path, policy))]) == 2
    err = capsys.readouterr().err
    assert "policy.zip" in err and "pickled env" in err and "trust_pickle: true" in err
    assert not marker.exists()
    # said to be trusted, SB3 unpickles it as it always did
    main(["validate", str(_rl_scenario(tmp_path, policy, trust_pickle=True))])
    capsys.readouterr()
    assert marker.exists()


def test_a_hostile_vecnormalize_file_is_refused_and_runs_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "marker"
    stats = tmp_path / "vecnormalize.pkl"
    stats.write_bytes(pickle.dumps(_MakesMarker(marker)))
    policy = bundled_policies_dir() / "ieee13_ppo.zip"
    assert main(["validate", str(_rl_scenario(tmp_path, policy, vecnormalize=str(stats)))]) == 2
    err = capsys.readouterr().err
    assert "vecnormalize.pkl: cannot read it without unpickling code: it names posix.mkdir" in err
    assert not marker.exists()


def test_a_hostile_space_in_a_policy_zip_without_settings_is_refused_and_runs_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "marker"
    policy = _policy_with(tmp_path, {"observation_space": _MakesMarker(marker)})
    policy.with_suffix(".json").unlink()  # the settings are then inferred from the zip, its spaces read
    assert main(["validate", str(_rl_scenario(tmp_path, policy))]) == 2
    assert "(observation_space): cannot read it without unpickling code" in capsys.readouterr().err
    assert not marker.exists()
