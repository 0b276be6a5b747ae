"""Which cases of a parametrized test run in the fast path (``pytest -m "not slow"``).

A test over many similar cases keeps a sample of them in the fast path and marks the rest slow;
CI runs them all.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pytest


def sampled(values: Iterable[Any], every: int, ids: Sequence[str] | None = None) -> list[Any]:
    """``values`` as pytest params: the first of every ``every`` in the fast path, the others
    marked slow (``ids``, if given, names each)."""
    values = list(values)
    names = list(ids) if ids is not None else [None] * len(values)
    return [
        pytest.param(v, id=name, marks=() if i % every == 0 else pytest.mark.slow)
        for i, (v, name) in enumerate(zip(values, names, strict=True))
    ]
