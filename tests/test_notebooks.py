"""Every notebook under notebooks/ runs top to bottom without an error.

The kernel process inherits os.environ, so the Triton interpreter switch set in conftest (and
here, explicitly) reaches the notebook before it imports triton.
"""
import os
from pathlib import Path

import pytest

from tests.conftest import DEVICE

nbclient = pytest.importorskip("nbclient")  # not installed on the GPU machine
import nbformat  # noqa: E402  (a dependency of nbclient)

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = ROOT / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path, monkeypatch):
    if DEVICE != "cuda":
        monkeypatch.setenv("TRITON_INTERPRET", "1")
    # the notebooks import `tiers` from this checkout even when it is not pip-installed
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOK_DIR)}})
    client.execute()  # raises CellExecutionError, with the cell's traceback, on the first failing cell
