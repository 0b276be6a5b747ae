"""Known-answer checks of the committed reference-study PV and load profiles (scenarios/profiles).

The expected values were computed by running the reference code (gpu2grid/openg2g 0.2.0,
``SyntheticPV`` / ``SyntheticLoad`` with ``peak_kw=1``). The committed CSVs are read the way a
scenario reads a profile: linear interpolation, held constant outside the sampled range.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

PROFILE_DIR = Path(__file__).resolve().parents[2] / "scenarios" / "profiles"
SCRIPT = PROFILE_DIR / "make_reference_profiles.py"
STEMS = [f"reference_pv{i}" for i in range(3)] + [f"reference_load{i}" for i in range(5)]
TOL = 2e-5

GRID_T_S = [0.0, 600.0, 1200.0, 1800.0, 2400.0, 3000.0, 3600.0]
# stem -> (values at GRID_T_S, hour mean)
KNOWN: dict[str, tuple[list[float], float]] = {
    "reference_pv0": ([0.932419, 0.380868, 0.700141, 0.719307, 0.580722, 0.584767, 0.575560], 0.671029),
    "reference_pv1": ([0.576817, 0.582750, 1.046471, 0.473477, 0.426036, 0.524999, 0.558198], 0.618164),
    "reference_pv2": ([0.311088, 0.704673, 0.595022, 0.949288, 1.027930, 0.930132, 1.078702], 0.801690),
    "reference_load0": ([0.150000, 0.144032, 0.306585, 0.771818, 1.064351, 0.626833, 0.151474], 0.513245),
    "reference_load1": ([0.105913, 0.094503, 0.393695, 0.381431, 0.101409, 0.855350, 0.094104], 0.307405),
    "reference_load2": ([0.816079, 0.831331, 0.516599, 0.264891, 1.132529, 0.839100, 0.826402], 0.686639),
    "reference_load3": ([0.094771, 0.105027, 0.095197, 0.104558, 0.126800, 0.998473, 0.451238], 0.301208),
    "reference_load4": ([0.096212, 0.101838, 0.553665, 0.159625, 0.151393, 0.094529, 0.094952], 0.311397),
}
# off-grid and cloud-dip checks of the PV shapes (123.4 s lies between two 0.5 s samples)
EXTRA_T_S = [100.0, 123.4, 2100.0, 2700.0]
EXTRA: dict[str, list[float]] = {
    "reference_pv0": [0.848880, 0.835228, 0.423092, 0.523478],
    "reference_pv1": [0.470352, 0.561098, 0.579489, 0.522948],
    "reference_pv2": [0.395765, 0.402544, 0.971581, 0.298085],
}


def _read(stem: str) -> tuple[np.ndarray, np.ndarray]:
    path = PROFILE_DIR / f"{stem}.csv"
    assert path.read_text().splitlines()[0] == "t_s,scale"
    data = np.loadtxt(path, delimiter=",", skiprows=1)
    return data[:, 0], data[:, 1]


def _script() -> ModuleType:
    """Load the generator script without leaving a __pycache__ in the scenarios tree (it is bundled)."""
    spec = importlib.util.spec_from_file_location("make_reference_profiles", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    saved, sys.dont_write_bytecode = sys.dont_write_bytecode, True
    try:
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = saved
    return module


@pytest.mark.parametrize("stem", STEMS)
def test_profile_grid_and_known_values(stem: str) -> None:
    t, s = _read(stem)
    assert t.shape == (7201,)
    np.testing.assert_array_equal(t, np.arange(7201) * 0.5)
    assert np.all(s >= 0)

    values, mean = KNOWN[stem]
    np.testing.assert_allclose(np.interp(GRID_T_S, t, s), values, rtol=0, atol=TOL)
    if stem in EXTRA:
        np.testing.assert_allclose(np.interp(EXTRA_T_S, t, s), EXTRA[stem], rtol=0, atol=TOL)

    # Hour mean on 0, 0.1, ..., 3599.9 s (36000 points). The known means were evidently taken on
    # 0..3600 s inclusive (36001 points), which they match to rounding; on 36000 points the
    # difference is below 1e-5, inside the tolerance.
    hour = np.arange(36000) * 0.1
    assert abs(float(np.interp(hour, t, s).mean()) - mean) <= TOL


def test_script_rerun_is_byte_identical(tmp_path: Path) -> None:
    assert _script().main([str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"{stem}.csv" for stem in STEMS)
    for stem in STEMS:
        name = f"{stem}.csv"
        assert (tmp_path / name).read_bytes() == (PROFILE_DIR / name).read_bytes(), f"{name} is stale: rerun the script"
