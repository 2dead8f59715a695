# examples/deepops-sum.ipynb run headless (nbclient + ipykernel) on a small CPU array: it starts
# its own local cluster, prints the seed's lines and the dashboard link, sums a Zarr store it writes
# (its cell asserts math.fsum's bits), and stops the cluster.
import os
import re
import sys

import pytest

pytest.importorskip("psched")
nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOK = os.path.join(os.environ.get("PSCHED_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..")),
                        "examples", "deepops-sum.ipynb")


def text_of(cell):
    return "".join(o.get("text", "") + "".join(o.get("data", {}).get("text/plain", ""))
                   for o in cell.get("outputs", []))


def test_the_notebook_runs_the_sum_on_a_local_cluster(monkeypatch):
    monkeypatch.setenv("PSCHED_SUM_SIZE", "2000")
    monkeypatch.setenv("PSCHED_SUM_CHUNK", "500")
    monkeypatch.setenv("PSCHED_SUM_GPUS", "0")
    monkeypatch.setenv("PYDEVD_DISABLE_FILE_VALIDATION", "1")  # ipykernel's debugger warning
    # The kernel is this interpreter (the one the module was built for), whatever comes first on PATH.
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    out = "\n".join(text_of(c) for c in nb.cells if c.cell_type == "code")
    assert "array 2000 x 2000, chunks 500 x 500" in out
    assert re.search(r"Dashboard: http://127\.0\.0\.1:\d+/", out)
    assert "Array size: 0.00 TB.  Computing parallel sum . . ." in out  # 32 MB: sum.py prints TB
    assert "Processing complete." in out
    assert re.search(r"Wall time create data \+ computation time: +\d+\.\d{8} seconds", out)
    assert re.search(r"count 1000000 ", out)
    assert re.search(r"mean: 1[01]\.9|mean: 11\.0", out)
    assert "'backend': 'cpu'" in out
    assert re.search(r"zarr sum: \d{7}\.\d+ +numpy: ", out)  # 1000 x 600 normal(10, 1): about 6e6
