"""The kinds of grid a scenario can name, and the one module that tells them apart.

- **feeder** (``grid.feeder``: a bundled feeder or an OpenDSS file): the phase-frame backend
  :class:`~openg2g.grid.feeder.backend.FeederGrid`;
- **balanced net** (``grid.pandapower``, a net without asymmetric loads or static generators):
  :class:`~openg2g.grid.nets.balanced.PandapowerGrid`;
- **asymmetric net** (``grid.pandapower`` with ``asymmetric_load``/``asymmetric_sgen`` rows):
  converted to the phase frame (:mod:`openg2g.grid.nets.asymmetric`) and solved by ``FeederGrid``.

:func:`build_grid`, :func:`validate_grid`, :func:`grid_topology` and :func:`open_net` are where the choice is made;
nothing else looks at which of ``grid.feeder`` and ``grid.pandapower`` a spec holds.
pandapower is imported only when a spec names a net.

**A run folder's grid.** A finished run's ``scenario.yaml`` is data of unknown origin (a run
folder someone sent): its own ``grid.trust_pickle`` says what its writer trusted, not what the
person looking at it does. :func:`viewed_grid` replaces it with the viewer's word (``openg2g plot
--trust-pickle``, ``openg2g app --allow-code``, ``trust_pickle=True`` in Python) before a viewer
opens the net, and refuses a pickle net without it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from openg2g.core.errors import FeederError
from openg2g.core.interfaces import GridBackend
from openg2g.grid.config import GridSite, GridSpec
from openg2g.grid.feeder.backend import FeederGrid
from openg2g.grid.feeder.checks import validate_feeder_grid

if TYPE_CHECKING:
    from pandapower.auxiliary import pandapowerNet

    from openg2g.grid.topology import Topology

__all__ = ["RUN_PICKLE_REFUSED", "GridKind", "build_grid", "grid_topology", "open_net", "validate_grid", "viewed_grid"]

GridKind = Literal["feeder", "balanced_net", "asymmetric_net"]
"""The three kinds of grid (module docstring)."""


RUN_PICKLE_REFUSED = (
    "a pickle runs any code it carries while it is read, and the run folder's own grid.trust_pickle is the word "
    "of whoever wrote the folder, not yours, so it is not read (no feeder map, voltage profile or results net); "
    "if you trust the file, say so yourself: openg2g plot RUN --trust-pickle, openg2g app --allow-code, or "
    "trust_pickle=True in Python"
)
"""Why a viewer does not read the pickle net a run folder names, and how the viewer's own word reads it."""


def viewed_grid(spec: GridSpec, base_dir: Path | None, trust_pickle: bool) -> GridSpec:
    """``spec``, read from a run folder's ``scenario.yaml``, as a viewer of the folder may open it:
    its ``trust_pickle`` is the viewer's (module docstring), never the folder's.

    :param base_dir: folder a relative net path is resolved against (the run folder).
    :param trust_pickle: the viewer's own word that a pickle net is trusted.
    :raises FeederError: the spec names a pickle net and ``trust_pickle`` is false; the message
        names the file and the field (``grid.pandapower``).
    """
    from openg2g.grid.nets.source import pickle_path

    pickle = None if trust_pickle or spec.pandapower is None else pickle_path(spec.pandapower, base_dir)
    if pickle is not None:
        raise FeederError(f"grid.pandapower: {str(pickle)!r} is a pickle net: {RUN_PICKLE_REFUSED}")
    return spec.model_copy(update={"trust_pickle": trust_pickle})


def open_net(spec: GridSpec, base_dir: Path | None) -> tuple[GridKind, pandapowerNet]:
    """The pandapower net ``grid.pandapower`` names, read, and whether it is balanced or asymmetric.

    :raises FeederError: the net cannot be read or is not a grid.
    """
    from openg2g.grid.nets.asymmetric import is_asymmetric  # pandapower is imported only for nets
    from openg2g.grid.nets.source import load_net

    assert spec.pandapower is not None, "a feeder spec names no net"
    net = load_net(spec.pandapower, base_dir, spec.trust_pickle)
    return ("asymmetric_net" if is_asymmetric(net) else "balanced_net"), net


def build_grid(spec: GridSpec, sites: Sequence[GridSite], base_dir: Path | str = ".") -> GridBackend:
    """The grid backend of a grid spec (module docstring); ``base_dir``: the folder the spec's
    relative paths (a feeder file, profiles) are resolved against.

    :raises FeederError: unknown feeder, unreadable feeder file or net.
    :raises ScenarioError: the spec does not fit the grid.
    """
    base_dir = Path(base_dir)
    if spec.pandapower is None:
        return FeederGrid.from_spec(spec, sites, base_dir)
    from openg2g.grid.nets.asymmetric import asymmetric_grid
    from openg2g.grid.nets.balanced import PandapowerGrid

    kind, net = open_net(spec, base_dir)
    if kind == "asymmetric_net":
        return asymmetric_grid(net, spec, sites, base_dir)
    return PandapowerGrid(net, spec.pandapower, spec, sites)


def _validate_net(spec: GridSpec, sites: Sequence[GridSite], base_dir: Path | None) -> list[tuple[str, str]]:
    """Problems of a scenario on a pandapower net: the net can be read and is a grid
    (``grid.pandapower``), the options fit it and its buses exist (see
    :func:`openg2g.grid.nets.balanced.check_net_spec`; an asymmetric net converts to the phase frame,
    :func:`openg2g.grid.nets.asymmetric.check_asymmetric_spec`)."""
    from openg2g.grid.nets.asymmetric import check_asymmetric_spec, feeder_from_net
    from openg2g.grid.nets.balanced import check_net_spec

    assert spec.pandapower is not None
    try:
        kind, net = open_net(spec, base_dir)
        if kind == "asymmetric_net":
            return check_asymmetric_spec(feeder_from_net(net, spec.pandapower), spec, sites)
    except FeederError as exc:
        return [("grid.pandapower", str(exc).removeprefix("grid.pandapower: "))]
    return check_net_spec(net, spec, sites)


def validate_grid(spec: GridSpec, sites: Sequence[GridSite], base_dir: Path | None = None) -> list[tuple[str, str]]:
    """Every problem of a grid spec and its sites as ``(field path, message)``; empty if valid.

    Checks: the feeder exists (lists the valid names), each site's bus exists and has three
    phases (``datacenters.<i>.bus``), PV/storage/extra-load/monitored buses exist
    (``grid.pv.<i>.bus`` ...), regulator banks exist (``grid.regulators.<name>``) with one tap
    per phase inside the range (``grid.regulators.<name>.taps``; the range is the feeder's or the
    scenario's ``min_tap``/``max_tap`` when it states them; one value on a ganged bank), capacitors exist, PV and extra-load
    profiles are readable (``grid.pv.<i>.profile`` ...).

    A pandapower net (``grid.pandapower``) is checked by :func:`_validate_net` instead.

    :param base_dir: folder a relative ``.dss`` feeder or net path is resolved against (the
        scenario file's folder); ``None`` resolves it against the working directory.
    """
    if spec.pandapower is not None:
        return _validate_net(spec, sites, base_dir)
    return validate_feeder_grid(spec, sites, base_dir)


def grid_topology(spec: GridSpec, base_dir: Path | None = None) -> Topology:
    """The one-line topology of a grid spec's feeder or net (:mod:`openg2g.grid.topology`), its
    buses named as the run's tables name them.

    :param base_dir: folder a relative ``.dss`` feeder or net path is resolved against.
    :raises FeederError: unknown feeder, unreadable feeder file or net.
    """
    from openg2g.grid.topology import feeder_topology, net_topology  # pandas: only when drawing

    if spec.pandapower is None:
        from openg2g.grid.feeder.library import load_feeder, resolve_feeder

        assert spec.feeder is not None, "a grid spec names a feeder or a net"
        return feeder_topology(load_feeder(resolve_feeder(spec.feeder, base_dir)))
    from openg2g.grid.nets.asymmetric import feeder_from_net

    kind, net = open_net(spec, base_dir)
    if kind == "asymmetric_net":
        return feeder_topology(feeder_from_net(net, spec.pandapower))
    return net_topology(net)
