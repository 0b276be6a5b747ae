"""The notebooks in ``notebooks/`` run top to bottom, and are committed without outputs.

Each notebook is executed in a fresh Jupyter kernel (``python3``, i.e. the ipykernel of the
interpreter running the tests) with its own folder as working directory, as ``pytest --nbmake
notebooks`` would; a failing cell fails the test with the cell's traceback. Notebooks write only
to temporary folders, which the tests point into pytest's own (``TMPDIR``) so that runs do not
pile up folders in the system's.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

NOTEBOOKS_DIR = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))
TIMEOUT_S = 600  # per cell; each notebook takes well under two minutes on a loaded 2-core machine


def test_there_are_notebooks():
    names = [p.name for p in NOTEBOOKS]
    assert names[:4] == ["01_quickstart.ipynb", "02_write_a_controller.ipynb", "03_traces.ipynb", "04_train_rl.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_stripped_and_has_parameters(path: Path):
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    dirty = [i for i, c in enumerate(code) if c.outputs or c.execution_count is not None]
    assert not dirty, f"{path.name}: code cells {dirty} have outputs; strip them before committing"
    assert "parameters" in code[0].metadata.get("tags", []), f"{path.name}: first code cell must be the parameters"


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    nb = nbformat.read(path, as_version=4)
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the kernel inherits it; its tempfile calls land here
    client = nbclient.NotebookClient(
        nb, timeout=TIMEOUT_S, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    t0 = time.perf_counter()
    client.execute()  # raises CellExecutionError naming the cell and its traceback
    elapsed = time.perf_counter() - t0
    print(f"{path.name}: {elapsed:.1f} s")
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
