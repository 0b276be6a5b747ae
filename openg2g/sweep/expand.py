"""Turn parameter blocks into the list of runs: points, run ids and ``--set`` overrides.

Expansion is deterministic: the same sweep file always gives the same points in the same order,
with the same run ids (``<index>-<hash of the point>``), so a rerun finds its earlier outputs.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from openg2g.sweep.spec import Distribution, ParameterBlock

__all__ = ["encode_value", "expand_block", "expand_parameters", "point_hash", "point_overrides", "run_ids"]


def _sample(dist: Distribution, rng: np.random.Generator) -> Any:
    if dist.uniform is not None:
        lo, hi = dist.uniform
        return float(rng.uniform(lo, hi))
    if dist.log_uniform is not None:
        lo, hi = dist.log_uniform
        return float(math.exp(rng.uniform(math.log(lo), math.log(hi))))
    assert dist.choice is not None
    return dist.choice[int(rng.integers(len(dist.choice)))]


def expand_block(block: ParameterBlock) -> list[dict[str, Any]]:
    """The points of one block, each a ``{dotted key: value}`` dict.

    ``product`` varies the last key fastest; ``random`` draws sample by sample, keys in order.
    """
    if block.product is not None:
        keys = list(block.product)
        return [dict(zip(keys, combo)) for combo in itertools.product(*(block.product[k] for k in keys))]
    if block.zip is not None:
        keys = list(block.zip)
        return [dict(zip(keys, values)) for values in zip(*(block.zip[k] for k in keys))]
    assert block.random is not None
    rng = np.random.default_rng(block.random.seed)
    return [{k: _sample(d, rng) for k, d in block.random.params.items()} for _ in range(block.random.n)]


def expand_parameters(blocks: Sequence[ParameterBlock]) -> list[dict[str, Any]]:
    """Cartesian product of the blocks' points (last block varies fastest), merged into one dict each."""
    points: list[dict[str, Any]] = [{}]
    for block in blocks:
        points = [{**p, **q} for p in points for q in expand_block(block)]
    return points


def encode_value(value: Any) -> str:
    """A YAML flow text that ``yaml.safe_load`` reads back as exactly ``value``.

    Strings are quoted (``"671"`` stays a string), floats keep every digit and always read as
    floats (PyYAML reads ``1e-05`` as a string, so it is written ``1.0e-05``).
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        x = float(value)
        if math.isnan(x):
            return ".nan"
        if math.isinf(x):
            return ".inf" if x > 0 else "-.inf"
        text = repr(x)
        mantissa, e, exponent = text.partition("e")
        if "." not in mantissa:
            mantissa += ".0"
        return mantissa + (e + (exponent if exponent[0] in "+-" else "+" + exponent) if e else "")
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{json.dumps(str(k))}: {encode_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(encode_value(v) for v in value) + "]"
    raise TypeError(f"cannot write a {type(value).__name__} ({value!r}) into a scenario")


def point_overrides(point: Mapping[str, Any]) -> list[str]:
    """``dotted.key=value`` overrides (as ``openg2g run --set``) that set a point."""
    return [f"{key}={encode_value(value)}" for key, value in point.items()]


def point_hash(point: Mapping[str, Any]) -> str:
    """Eight hex digits identifying a point's keys and values."""
    canonical = json.dumps([[k, encode_value(v)] for k, v in sorted(point.items())], separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:8]


def run_ids(points: Sequence[Mapping[str, Any]]) -> list[str]:
    """``<index>-<hash>`` per point; the index is zero-padded to at least four digits."""
    width = max(4, len(str(len(points) - 1)))
    return [f"{i:0{width}d}-{point_hash(p)}" for i, p in enumerate(points)]
