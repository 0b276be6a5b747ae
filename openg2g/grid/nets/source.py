"""A pandapower net as a scenario's grid: finding it, checking it, and naming its buses.

``grid.pandapower`` names the net in one of three ways, tried in this order:

1. the path of a pandapower file, relative to the scenario file: pandapower's JSON
   (``pp.to_json``, ending in ``.json``) or pickle (``pp.to_pickle``, ending in ``.p``, ``.pkl``
   or ``.pickle``). See **Files that could run code** below;
2. the name of a function of :mod:`pandapower.networks` that needs no argument (``case118``,
   ``case300``, ``create_cigre_network_mv``, ``mv_oberrhein``, ...);
3. a SimBench code (``1-HV-mixed--0-sw``), when the ``simbench`` package is installed.

**Bus names.** Sites, monitored buses and outputs name a bus by its pandapower ``bus.name``
when every bus has a name and no two names are equal ignoring case; otherwise every bus is named
by its index in ``net.bus`` (as text: ``"58"``). Matching ignores case. pandapower's MATPOWER
cases name their buses by the MATPOWER bus number (``case118`` bus ``"59"`` is index 58).

**Files that could run code.** pandapower's JSON names the class of each object it rebuilds
(``{"_module": ..., "_class": ...}``) and pandapower imports that module before its own check of
the class, so a file naming any installed module would run that module's top-level code. Every
object a JSON net names, in nested JSON texts too, is checked before pandapower sees the file:
only the packages pandapower's own ``pp.to_json`` writes are accepted (:data:`NET_JSON_PACKAGES`,
and of ``builtins`` only :data:`NET_JSON_BUILTINS`), and a frame that points at another file is
refused. A pickle can run anything while it is read, so a pickle net is read only when the caller
says the file is trusted (``grid.trust_pickle``, ``openg2g powerflow --trust-pickle``).
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import io
import json
import math
import os
import re
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from openg2g.core.errors import FeederError
from openg2g.grid.nets.tables import MAX_PROBLEMS, net_table_problems

NET_RATINGS = "a pandapower net's loading is against its own ratings: set line.max_i_ka and trafo.sn_mva in the net"
"""Why ``grid.branch_ratings`` is refused on a pandapower net."""

if TYPE_CHECKING:
    from pandapower.auxiliary import pandapowerNet

__all__ = [
    "NET_JSON_BUILTINS",
    "NET_JSON_PACKAGES",
    "NET_SUFFIXES",
    "BusNames",
    "check_net",
    "foreign_object",
    "is_network_name",
    "load_net",
    "looks_like_net_file",
    "looks_like_simbench_code",
    "pickle_path",
    "quiet_pandapower",
]

NET_SUFFIXES = (".json", ".p", ".pkl", ".pickle")
"""File endings read as pandapower nets (JSON, then pickle)."""

NET_JSON_PACKAGES = ("pandapower", "pandas", "numpy", "networkx", "geopandas")
"""Packages (with their submodules) whose objects a JSON net may name: the ones pandapower's own
``pp.to_json`` writes (the net and its controllers, frames, series and indexes, numpy arrays and
scalars, a networkx graph, a geopandas frame)."""

NET_JSON_BUILTINS = frozenset({"complex", "tuple", "set", "frozenset"})
"""The ``builtins`` a JSON net may name: the four pandapower writes."""

PICKLE_REFUSED = (
    "a pickle runs any code it carries while it is read, so a pickle net is read only when you say the "
    "file is trusted: set grid.trust_pickle: true in the scenario (openg2g powerflow --trust-pickle), or "
    "convert it once to JSON, which is checked before it is read "
    "(python -c \"import pandapower as pp; pp.to_json(pp.from_pickle('net.p'), 'net.json')\")"
)
"""Why a pickle net is refused, and the two ways on."""


@contextlib.contextmanager
def quiet_pandapower() -> Iterator[None]:
    """pandapower's deprecation notices about nets saved before its 3.0 (the bundled networks are)
    and its numba notice are not the user's concern: silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        yield


def looks_like_net_file(source: str) -> bool:
    """Whether ``source`` is meant as a file path (it has a path separator or a net file ending)."""
    return "/" in source or "\\" in source or source.lower().endswith(NET_SUFFIXES)


def pickle_path(source: str, base_dir: Path | None = None) -> Path | None:
    """The pickle file ``grid.pandapower`` names (a net file ending in ``.p``, ``.pkl`` or
    ``.pickle``), resolved as :func:`load_net` resolves it; None for a JSON file, a network name
    or a SimBench code."""
    if not looks_like_net_file(source):
        return None
    path = Path(source) if base_dir is None else base_dir / source
    return path if path.suffix.lower() in NET_SUFFIXES and path.suffix.lower() != ".json" else None


def _network_function(name: str) -> object | None:
    """The :mod:`pandapower.networks` function ``name`` if it needs no argument, else None."""
    import pandapower.networks as pn

    if name.startswith("_"):
        return None
    fn = getattr(pn, name, None)
    if not inspect.isfunction(fn):
        return None
    params = inspect.signature(fn).parameters.values()
    required = [p for p in params if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    return None if required else fn


def is_network_name(name: str) -> bool:
    """Whether ``name`` is a :mod:`pandapower.networks` function that needs no argument."""
    return _network_function(name) is not None


def _network_names() -> list[str]:
    """Every :mod:`pandapower.networks` function that needs no argument."""
    import pandapower.networks as pn

    return sorted(n for n in dir(pn) if _network_function(n) is not None)


def _read_file(path: Path, trust_pickle: bool) -> pandapowerNet:
    """The net in ``path`` (JSON checked by :func:`foreign_object` first; pickle only if trusted).

    :raises FeederError: no such file, a pickle not trusted, a JSON naming an object outside the
        allow-list, or a file that is not a pandapower net.
    """
    import pandapower as pp

    if not path.is_file():
        raise FeederError(f"grid.pandapower: no such file {str(path)!r}")
    is_json = path.suffix.lower() == ".json"
    if not is_json and not trust_pickle:
        raise FeederError(f"grid.pandapower: {str(path)!r} is a pickle: {PICKLE_REFUSED}")
    try:
        with quiet_pandapower():
            net = _checked_json(path) if is_json else pp.from_pickle(str(path))
    except FeederError:
        raise
    except Exception as exc:  # noqa: BLE001 (pandapower raises anything from json, pickle and pandas)
        raise FeederError(
            f"grid.pandapower: {str(path)!r} is not a pandapower net ({type(exc).__name__}: {exc})"
        ) from None
    if not _is_net(net):
        raise FeederError(f"grid.pandapower: {str(path)!r} holds a {type(net).__name__}, not a pandapower net")
    return net


def _is_net(value: object) -> bool:
    """Whether ``value`` is a pandapower net with a bus table."""
    import pandapower as pp

    return isinstance(value, pp.pandapowerNet) and hasattr(value, "bus")


def _checked_json(path: Path) -> object:
    """What pandapower decodes from the JSON file ``path``, once :func:`foreign_object` finds nothing
    foreign in it (the text checked is the text decoded: the file is read once).

    :raises FeederError: the file names an object outside the allow-list.
    """
    import pandapower as pp

    text = path.read_text(encoding="utf-8")
    foreign = foreign_object(text)
    if foreign is not None:
        raise FeederError(
            f"grid.pandapower: {str(path)!r} names {foreign}, which a pandapower net does not hold and reading "
            f"it could run code; a JSON net may name objects of {', '.join(NET_JSON_PACKAGES)} and of builtins "
            f"only {', '.join(sorted(NET_JSON_BUILTINS))}"
        )
    return pp.from_json(io.StringIO(text))


def _allowed_object(module: object, cls: object) -> bool:
    """Whether a JSON net may name class ``cls`` of module ``module`` (module docstring)."""
    if not isinstance(module, str):
        return False
    if module == "builtins":
        return cls in NET_JSON_BUILTINS
    return module.partition(".")[0] in NET_JSON_PACKAGES


def _json_views(text: str) -> list[object]:
    """``text`` as each decoder pandapower may apply to it reads it (the standard library's, pandas'
    ujson); empty when neither reads it. Objects keep every key of theirs, repeated ones included,
    as a list of pairs."""
    from pandas._libs.json import ujson_loads

    views: list[object] = []
    try:
        views.append(json.loads(text, object_pairs_hook=_Pairs))
    except ValueError:
        pass
    try:
        views.append(ujson_loads(text))
    except (ValueError, TypeError, OverflowError):
        pass
    return views


class _Pairs(list[tuple[str, object]]):
    """A JSON object as the list of its ``(key, value)`` pairs."""


def foreign_object(text: str) -> str | None:
    """The first object a pandapower JSON text names outside the allow-list (module docstring), as
    ``"module.class"``; None when there is none. Strings that are JSON texts themselves (frames,
    nested nets, characteristics) are searched too, as pandapower decodes them.

    A frame (``DataFrame``) whose content is the absolute path of a ``.json`` file, which pandas
    would read from disk unchecked, counts as foreign.
    """
    stack: list[object] = _json_views(text)
    while stack:
        item = stack.pop()
        if isinstance(item, (_Pairs, dict)):
            pairs = list(item) if isinstance(item, _Pairs) else list(item.items())
            modules = [v for k, v in pairs if k == "_module"]
            classes = [v for k, v in pairs if k == "_class"] or [""]
            for module in modules:
                for cls in classes:
                    if not _allowed_object(module, cls):
                        return f"{module}.{cls}" if cls else str(module)
            content = [v for k, v in pairs if k == "_object"]
            if "DataFrame" in classes and any(
                isinstance(c, str) and os.path.isabs(c) and c.endswith(".json") for c in content
            ):
                return f"a frame read from the file {next(c for c in content if isinstance(c, str))!r}"
            stack.extend(v for _, v in pairs)
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str) and item.lstrip()[:1] in ("{", "["):
            stack.extend(_json_views(item))
    return None


def looks_like_simbench_code(name: str) -> bool:
    """Whether ``name`` has the shape of a SimBench code (``1-HV-urban--0-no_sw``)."""
    return re.fullmatch(r"\d-[A-Za-z]+-[A-Za-z0-9_-]+", name) is not None


def _simbench(code: str) -> pandapowerNet | None:
    """The SimBench net of ``code``, or None when simbench is not installed or knows no such code."""
    try:
        import simbench
    except ImportError:
        return None
    try:
        return simbench.get_simbench_net(code)
    except Exception:  # noqa: BLE001 (simbench raises a bare error for unknown codes)
        return None


def load_net(source: str, base_dir: Path | None = None, trust_pickle: bool = False) -> pandapowerNet:
    """Read the pandapower net that ``grid.pandapower`` names (see the module docstring) and check it.

    :param source: a file path, a :mod:`pandapower.networks` function name or a SimBench code.
    :param base_dir: folder a relative path is resolved against (the scenario's); None = the
        working directory.
    :param trust_pickle: read a pickle file (``grid.trust_pickle``); a pickle is refused without it.
    :raises FeederError: no such file, a pickle not trusted, a JSON net naming an object outside
        the allow-list, a file that is not a pandapower net, an unknown network name, or a net
        that cannot be a grid (see :func:`check_net`).
    """
    if looks_like_net_file(source):
        path = Path(source) if base_dir is None else base_dir / source
        if path.suffix.lower() not in NET_SUFFIXES:
            raise FeederError(
                f"grid.pandapower: {source!r}: a net file must end in {', '.join(NET_SUFFIXES)} "
                "(pandapower's JSON or pickle)"
            )
        net = _read_file(path, trust_pickle)
        label = str(path)
    else:
        fn = _network_function(source)
        with quiet_pandapower():
            net = fn() if fn is not None else _simbench(source)  # type: ignore[operator]
        if net is not None and not _is_net(net):
            raise FeederError(
                f"grid.pandapower: pandapower.networks.{source} returns a {type(net).__name__}, not a pandapower net"
            )
        if net is None and looks_like_simbench_code(source) and importlib.util.find_spec("simbench") is None:
            raise FeederError(
                f"grid.pandapower: {source!r} looks like a SimBench code, and the simbench package is not "
                'installed: pip install "openg2g-cosim[simbench]" (or simbench)'
            )
        if net is None:
            import difflib

            names = _network_names()
            close = difflib.get_close_matches(source, names, n=5, cutoff=0.6)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise FeederError(
                f"grid.pandapower: unknown network {source!r}: give the path of a pandapower .json or "
                f"pickle file, or a pandapower.networks function without arguments (e.g. case118, "
                f"create_cigre_network_mv, mv_oberrhein; {len(names)} in all){hint}"
            )
        label = source
    check_net(net, label)
    return net


def check_net(net: pandapowerNet, label: str) -> None:
    """Refuse a net the balanced backend cannot solve exactly.

    :raises FeederError: a value of its tables a power flow cannot use (naming table, row and
        column: :func:`~openg2g.grid.nets.tables.net_table_problems`), no in-service external grid,
        or a load with a voltage-dependent (constant impedance or current) share.
    """
    if not len(net.bus):
        raise FeederError(f"grid.pandapower: net {label!r} has no bus")
    problems = net_table_problems(net)
    if problems:
        more = f"; and {len(problems) - MAX_PROBLEMS} more" if len(problems) > MAX_PROBLEMS else ""
        raise FeederError(f"grid.pandapower: net {label!r}: " + "; ".join(problems[:MAX_PROBLEMS]) + more)
    if "ext_grid" not in net or not net.ext_grid["in_service"].astype(bool).any():
        raise FeederError(
            f"grid.pandapower: net {label!r} has no in-service external grid (net.ext_grid): "
            "a grid needs a slack bus to hold its voltage"
        )
    zip_cols = [c for c in net.load.columns if c.startswith(("const_z", "const_i"))]
    if zip_cols and len(net.load):
        live = net.load["in_service"].astype(bool)
        dependent = net.load.index[live & (net.load[zip_cols].fillna(0.0) != 0).any(axis=1)]
        if len(dependent):
            raise FeederError(
                f"grid.pandapower: net {label!r}: loads {list(dependent[:10])} have a constant-impedance or "
                "constant-current share (const_z_*/const_i_* percent); the balanced backend draws constant power: "
                "set those shares to 0"
            )


class BusNames:
    """The names buses go by (see the module docstring) and the lookup from a name to a bus.

    :param net: the net.
    """

    def __init__(self, net: pandapowerNet) -> None:
        index = [int(i) for i in net.bus.index]
        raw = list(net.bus["name"]) if "name" in net.bus else [None] * len(index)
        named = [_name_text(n) for n in raw]
        folded = [n.lower() for n in named if n is not None]
        self.by_name = all(n is not None for n in named) and len(set(folded)) == len(named)
        self.names: tuple[str, ...] = tuple(named) if self.by_name else tuple(str(i) for i in index)  # type: ignore[arg-type]
        self.index: tuple[int, ...] = tuple(index)
        self._lookup = {n.lower(): i for n, i in zip(self.names, index)}

    def bus(self, name: str) -> int | None:
        """The pandapower bus index that ``name`` names (case-insensitive), None if none."""
        return self._lookup.get(str(name).lower())

    def rule(self) -> str:
        """How this net's buses are named, for messages."""
        return "by bus.name" if self.by_name else "by index in net.bus (names are missing or repeated)"

    def some(self, n: int = 12) -> str:
        """The first ``n`` names, for messages."""
        head = ", ".join(self.names[:n])
        return head + (f", ... ({len(self.names)} in all)" if len(self.names) > n else "")


def _name_text(value: object) -> str | None:
    """A bus name as text; None for a missing one (None, NaN, empty). Whole floats lose ``.0``."""
    if value is None:
        return None
    if isinstance(value, float):
        if math.isnan(value):
            return None
        if value.is_integer():
            return str(int(value))
    text = str(value).strip()
    return text or None
