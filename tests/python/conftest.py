# Fixtures of the Python client's tests: one local cluster (psched + 2 CPU workers, 1 thread each)
# per test file, a client on it, the dashboard's /api/status, and pbench on the same cluster.
# ctest runs each file as its own test (tests/CMakeLists.txt) with PYTHONPATH=<build>/python and
# PSCHED_BIN_DIR=<build>/bin.
import json
import os
import subprocess
import time
import urllib.request

import pytest

BIN_DIR = os.environ.get("PSCHED_BIN_DIR", "")


def api_status(link):
    with urllib.request.urlopen(link.rstrip("/") + "/api/status", timeout=10) as r:
        return json.load(r)


def wait_no_running_jobs(link, timeout=5.0):
    """The scheduler's running jobs once there are none (or the last seen list on timeout)."""
    deadline = time.monotonic() + timeout
    while True:
        jobs = api_status(link)["jobs"]
        if not jobs or time.monotonic() > deadline:
            return jobs
        time.sleep(0.02)


def pbench_json(scheduler_file, *args):
    out = subprocess.run([os.path.join(BIN_DIR, "pbench"), "-d", "--scheduler-file", scheduler_file, "-q", "--json",
                          *args], check=True, capture_output=True, text=True, timeout=120)
    return json.loads(out.stdout)


def exact(values):
    """The exact sum of numbers (floats or Python ints)."""
    from fractions import Fraction
    return sum((Fraction(v) for v in values), Fraction(0))


def elements(a):
    """The elements of a numpy array as Python numbers (ints stay exact), row-major."""
    import numpy as np
    a = np.asarray(a)
    if a.dtype.kind in "iub":
        return [int(v) for v in a.reshape(-1)]
    return [float(v) for v in a.astype(np.float64).reshape(-1)]


def random_array(rng, dtype, shape):
    """A numpy array of `dtype` (any byte order) drawn from rng: normal(10, 3) floats, 0/1 bools,
    integers over the type's whole range."""
    import numpy as np
    kind = np.dtype(dtype).kind
    if kind == "f":
        return rng.normal(10, 3, size=shape).astype(dtype)
    if kind == "b":
        return rng.integers(0, 2, size=shape).astype(dtype)
    native = np.dtype(dtype).newbyteorder("=")
    info = np.iinfo(native)
    return rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=native).astype(dtype)


def alive(pid):
    """True while pid runs (a zombie, dead but not reaped by its parent, counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture(scope="module")
def cluster():
    psched = pytest.importorskip("psched")
    with psched.LocalCluster(cpus=2, threads_per_worker=1) as c:
        yield c


@pytest.fixture(scope="module")
def client(cluster):
    import psched
    with psched.Client(cluster) as c:
        yield c
