"""Comparing stored curve fits with a fit made on this host.

A least-squares fit (scipy's ``curve_fit``) ends in floats whose last digits depend on the host's
vector and BLAS kernels: with the same numpy and scipy, the trace library's stored fits and a
rebuild on another x86 machine differed by about 1e-8 relative (8 of 10 curves). Simulations do
not see this: they use the stored fits, the same bits on every host. Tests that check "the stored
fits are what the fit gives" compare at :data:`FIT_RTOL`, far above that noise and far below any
change a real code or data difference makes (a different start point or data point moves a
parameter by 1e-3 or more).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["FIT_RTOL", "assert_close_fits"]

FIT_RTOL = 1e-6
"""Relative tolerance of a fitted parameter between hosts."""


def assert_close_fits(a: Any, b: Any, path: str = "", rtol: float = FIT_RTOL) -> None:
    """Assert that two nested structures (dicts, lists, tuples, numbers, strings, None) are the same
    except for floats, which agree to ``rtol`` (default :data:`FIT_RTOL`); the message names the path."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        assert a.keys() == b.keys(), f"{path}: keys {sorted(a)} != {sorted(b)}"
        for k in a:
            assert_close_fits(a[k], b[k], f"{path}.{k}", rtol)
    elif isinstance(a, Sequence) and not isinstance(a, str) and isinstance(b, Sequence) and not isinstance(b, str):
        assert len(a) == len(b), f"{path}: length {len(a)} != {len(b)}"
        # a vector of numbers (a complex value's parts, a matrix row) agrees to rtol of its largest
        # entry: a part that is 0 in exact arithmetic is rounding noise of the others (1e-20 ohm
        # beside 1e-1 ohm), whatever its own relative error
        numbers = [x for x in (*a, *b) if isinstance(x, float) and math.isfinite(x)]
        scale = max((abs(x) for x in numbers), default=0.0) if len(numbers) == 2 * len(a) else 0.0
        for i, (x, y) in enumerate(zip(a, b)):
            if scale and isinstance(x, float) and isinstance(y, float):
                same = math.isclose(x, y, rel_tol=rtol, abs_tol=rtol * scale)
                assert same, f"{path}[{i}]: {x!r} != {y!r} (rtol {rtol} of the largest entry, {scale:g})"
            else:
                assert_close_fits(x, y, f"{path}[{i}]", rtol)
    elif isinstance(a, float) and isinstance(b, float):
        same = math.isclose(a, b, rel_tol=rtol, abs_tol=1e-300) or (math.isnan(a) and math.isnan(b))
        assert same, f"{path}: {a!r} != {b!r} (rtol {rtol})"
    else:
        assert type(a) is type(b) and a == b, f"{path}: {a!r} != {b!r}"
