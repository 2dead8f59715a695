# The dashboard's view of a running burn-in (pbench --burn): a real psched and CPU workers started
# here, a short burn against them, and /api/status and /metrics polled (with deadlines, no fixed
# sleeps) until the burn shows every worker with a verdict, then until it is gone once pbench ends.
import json
import os
import subprocess
import tempfile
import time
import urllib.request

import pytest

from conftest import BIN_DIR


def get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


def wait_for(what, condition, timeout=30.0):
    """condition()'s first true value, polled until the deadline (then the test fails naming what)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.05)


class Cluster:
    """psched on loopback with a dashboard, and CPU workers named by the caller (each with its env)."""

    def __init__(self, tmp):
        self.procs = []
        self.tmp = tmp
        self.file = os.path.join(tmp, "scheduler.json")
        self.start(["psched", "--host", "127.0.0.1", "--port", "0", "--dashboard-address", "127.0.0.1:0",
                    "--scheduler-file", self.file], "psched")
        info = json.loads(wait_for("psched's scheduler file",
                                   lambda: os.path.exists(self.file) and open(self.file).read()))
        self.address, self.dashboard = info["address"], info["dashboard"].rstrip("/")

    def start(self, argv, log, env=None):
        out = open(os.path.join(self.tmp, log + ".log"), "w")
        self.procs.append(subprocess.Popen([os.path.join(BIN_DIR, argv[0]), *argv[1:]], stdout=out,
                                           stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}))
        return self.procs[-1]

    def worker(self, name, env=None):
        self.start(["pcuda-worker", self.address, "--backend", "cpu", "--nthreads", "1", "--name", name],
                   "worker-" + name, env)

    def status(self):
        return json.loads(get(self.dashboard + "/api/status"))

    def burn(self, *args):
        return self.start(["pbench", "--scheduler", self.address, "-d", "-q", "-x", "400", "-y", "400",
                           "--chunk-x", "100", "--chunk-y", "100", *args], "pbench")

    def close(self):
        for p in reversed(self.procs):
            p.terminate()
        for p in self.procs:
            p.wait(timeout=10)


@pytest.fixture
def cluster():
    with tempfile.TemporaryDirectory() as tmp:
        c = Cluster(tmp)
        try:
            yield c
        finally:
            c.close()


def burn_with(cluster, names):
    """The first burn on /api/status whose GPUs are exactly `names`, each with a verdict."""
    def seen():
        for b in cluster.status()["burns"]:
            gpus = {g["worker"]: g for g in b["gpus"]}
            if set(gpus) == set(names) and all(g["verdict"] in ("pass", "warn", "fail") for g in gpus.values()):
                return b
        return None
    return wait_for(f"a burn of {sorted(names)} on /api/status", seen)


def test_a_running_burn_shows_its_workers_and_verdicts_and_goes_when_it_ends(cluster):
    cluster.worker("burn-view-a")
    cluster.worker("burn-view-b")
    wait_for("2 workers", lambda: len(cluster.status()["workers"]) == 2)
    pbench = cluster.burn("--burn", "6s", "--burn-slow", "0.5")

    burn = burn_with(cluster, ["burn-view-a", "burn-view-b"])
    assert burn["total_seconds"] == 6
    assert 0 <= burn["elapsed_seconds"] <= 6
    assert burn["verdict"] in ("pass", "warn")
    assert all(g["mismatches"] == 0 for g in burn["gpus"])
    # The gauges, one per worker of the burn, while it runs.
    metrics = wait_for("the burn's gauges on /metrics",
                       lambda: (lambda m: m if 'psched_burn_gpu_verdict{worker="burn-view-b"' in m else None)(
                           get(cluster.dashboard + "/metrics")))
    assert "psched_burns_running 1\n" in metrics
    assert 'psched_burn_gpu_verdict{worker="burn-view-a"' in metrics
    # Later figures: the workers computed chunks, counted per GPU.
    wait_for("chunks counted per GPU", lambda: any(
        all(g["chunks"] > 0 for g in b["gpus"]) for b in cluster.status()["burns"]))

    assert pbench.wait(timeout=60) == 0
    wait_for("the burn gone from /api/status", lambda: cluster.status()["burns"] == [], timeout=10)
    assert "psched_burns_running 0\n" in get(cluster.dashboard + "/metrics")
    assert "psched_burn_gpu_verdict{" not in get(cluster.dashboard + "/metrics")


def test_a_worker_that_flips_a_result_shows_fail_on_the_dashboard(cluster):
    cluster.worker("burn-good-1")
    cluster.worker("burn-good-2")
    cluster.worker("burn-flipper", {"PSCHED_TEST_FLIP_CHUNK": "7"})
    wait_for("3 workers", lambda: len(cluster.status()["workers"]) == 3)
    pbench = cluster.burn("--burn", "6s", "--burn-slow", "0.5")

    def flipper_failed():
        for b in cluster.status()["burns"]:
            for g in b["gpus"]:
                if g["worker"] == "burn-flipper" and g["verdict"] == "fail":
                    return b
        return None
    burn = wait_for("burn-flipper failed on /api/status", flipper_failed, timeout=60)
    gpus = {g["worker"]: g for g in burn["gpus"]}
    assert burn["verdict"] == "fail"
    assert gpus["burn-flipper"]["mismatches"] >= 1
    assert "chunk 7" in gpus["burn-flipper"]["reason"]
    assert gpus["burn-good-1"]["verdict"] != "fail" and gpus["burn-good-2"]["verdict"] != "fail"
    assert 'psched_burn_gpu_verdict{worker="burn-flipper",' in get(cluster.dashboard + "/metrics")
    assert pbench.wait(timeout=60) == 1
