"""Run folders of unknown origin, for the tests that view them (issue 42): a genuine short run on a
pandapower JSON net, and copies of it whose ``scenario.yaml`` names code that leaves a marker
folder when it runs: a pickle net (with ``grid.trust_pickle: true``), a controller file, a plug-in
site's file. Viewing such a folder must leave no marker.
"""

from __future__ import annotations

import os
import pickle
import shutil
from pathlib import Path
from typing import Any

import yaml

__all__ = ["BOMB", "MakesMarker", "Markers", "hostile_copy", "net_run"]

BOMB = "\n".join(
    f"{name}: &{name} [{', '.join([f'*{prev}' if prev else 'lol'] * 9)}]"
    for prev, name in zip(["", "a", "b", "c", "d", "e", "f"], "abcdefg")
)
"""Seven lines of YAML aliases, each nine of the one before: 9**7 (4.8 million) values written out."""


class MakesMarker:
    """Unpickling this creates the folder ``path``: the stand-in for any code a pickle may run."""

    def __init__(self, path: Path):
        self.path = str(path)

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return os.mkdir, (self.path,)


class Markers:
    """The marker folders the code a hostile run folder names would create, one per way in."""

    def __init__(self, root: Path) -> None:
        self.pickle = root / "marker_pickle"
        self.controller = root / "marker_controller"
        self.site = root / "marker_site"

    def made(self) -> list[str]:
        return [p.name for p in (self.pickle, self.controller, self.site) if p.exists()]


def net_run(root: Path) -> Path:
    """A 1 s run of the bundled ``cigre_mv_ofo`` on the CIGRE net saved as JSON (every bus voltage
    recorded, no controller, no PNG), in ``root/run``."""
    import pandapower as pp
    import pandapower.networks as pn

    from openg2g.scenario.run import run_scenario

    net_file = root / "cigre.json"
    pp.to_json(pn.create_cigre_network_mv(), str(net_file))
    out = root / "run"
    overrides = ["duration_s=1", "outputs.plots=false", "outputs.voltages=all", "controllers=[]"]
    run_scenario("cigre_mv_ofo", out_dir=out, overrides=[*overrides, f"grid.pandapower={net_file}"])
    return out


def hostile_copy(run: Path, dest: Path, markers: Markers, pickle_net: bool = True) -> Path:
    """A copy of ``run`` at ``dest`` whose ``scenario.yaml`` names a controller file and a plug-in
    site file that make their markers when imported, and (with ``pickle_net``) a pickle net, trusted
    by the folder's own ``grid.trust_pickle: true``, that makes its marker when unpickled."""
    shutil.copytree(run, dest)
    data = yaml.safe_load((dest / "scenario.yaml").read_text())
    if pickle_net:
        (dest / "net.p").write_bytes(pickle.dumps({"bus": MakesMarker(markers.pickle)}))
        data["grid"].update(pandapower=str(dest / "net.p"), trust_pickle=True)
    for name, marker in (("ctrl", markers.controller), ("site", markers.site)):
        (dest / f"{name}.py").write_text(f"import os\nos.mkdir({str(marker)!r})\n")
    data["controllers"] = [{"kind": f"{dest / 'ctrl.py'}:Controller"}]
    first = data["datacenters"][0]
    data["datacenters"][0] = {"kind": f"{dest / 'site.py'}:Site", "name": first["name"], "bus": first["bus"]}
    (dest / "scenario.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return dest
