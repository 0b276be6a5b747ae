"""Numpy arrays as Arrow arrays without pandas (the tables a run writes, the app's overview)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

__all__ = ["arrow_array"]


def arrow_array(values: np.ndarray) -> pa.Array:
    """A numpy array (numbers, booleans or strings) as an Arrow array of the type ``pa.array``
    would infer, built from its buffers: ``pa.array`` imports pandas (0.3 s) on its first call to
    check whether its input is a pandas object, and a run has none.

    :raises TypeError: an array of another kind (e.g. objects that are not strings).
    """
    n = len(values)
    kind = values.dtype.kind
    if kind in "fiu":
        data = np.ascontiguousarray(values)
        return pa.Array.from_buffers(pa.from_numpy_dtype(data.dtype), n, [None, pa.py_buffer(data)])
    if kind == "b":
        bits = np.packbits(values.astype(bool), bitorder="little")
        return pa.Array.from_buffers(pa.bool_(), n, [None, pa.py_buffer(bits)])
    if kind in "UO":
        encoded = [str.encode(v) for v in values.tolist()]
        offsets = np.zeros(n + 1, dtype=np.int32)
        np.cumsum([len(b) for b in encoded], out=offsets[1:])
        return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))])
    raise TypeError(f"no Arrow column for a numpy array of dtype {values.dtype}")
