# LocalCluster: its dashboard and workers, no process left behind (close, exceptions, kill -9 of
# the Python that started it), and two clients in two threads at once.
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

psched = pytest.importorskip("psched")
pa = pytest.importorskip("psched.array")
from conftest import alive, api_status  # noqa: E402


def gone(pids, timeout=10.0):
    deadline = time.monotonic() + timeout
    while any(alive(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_a_local_cluster_has_its_workers_and_a_dashboard(cluster, client):
    workers = client.workers()
    assert len(workers) == 2
    assert {w["backend"] for w in workers} == {"cpu"}
    assert all(w["threads"] == 1 and w["memory_total_bytes"] > 0 and w["device"] for w in workers)
    assert client.dashboard_link == cluster.dashboard_link
    assert cluster.dashboard_link.startswith("http://127.0.0.1:")
    assert len(api_status(cluster.dashboard_link)["workers"]) == 2
    info = client.cluster_info()
    assert info["dashboard_link"] == cluster.dashboard_link and len(info["workers"]) == 2
    assert "2 cpu workers" in repr(cluster)


def test_closing_a_cluster_stops_every_process_it_started():
    with psched.LocalCluster(cpus=2, threads_per_worker=1, dashboard=False) as c:
        pids = list(c.pids)
        assert len(pids) == 3 and all(alive(p) for p in pids)
        assert all(os.getpgid(p) == p for p in pids)  # groups of their own: see the Ctrl-C test
    assert gone(pids)
    assert not os.path.exists(c.scheduler_file)


def test_an_exception_in_the_with_block_stops_the_cluster():
    pids = []
    with pytest.raises(ZeroDivisionError):
        with psched.LocalCluster(cpus=1, dashboard=False) as c:
            pids = list(c.pids)
            1 / 0
    assert pids and gone(pids)


def test_a_cluster_made_in_a_thread_outlives_that_thread():
    made = []
    t = threading.Thread(target=lambda: made.append(psched.LocalCluster(cpus=1, dashboard=False)))
    t.start()
    t.join()
    cluster = made[0]
    time.sleep(0.2)
    try:
        assert all(alive(p) for p in cluster.pids)
        with psched.Client(cluster, set_as_default=False) as c:
            assert pa.ones((8, 8), chunks=4).sum().compute(client=c) == 64
    finally:
        cluster.close()


CHILD = """
import os, sys, time, psched
c = psched.LocalCluster(cpus=2, threads_per_worker=1, dashboard=False)
print(os.path.dirname(c.scheduler_file), " ".join(map(str, c.pids)), flush=True)
time.sleep(600)
"""


def test_killing_the_python_process_with_sigkill_leaves_no_daemon_behind():
    proc = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True, env=os.environ)
    line = proc.stdout.readline().split()
    pids = [int(p) for p in line[1:]]
    assert len(pids) == 3 and all(alive(p) for p in pids)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert gone(pids), f"still running after kill -9 of their Python: {[p for p in pids if alive(p)]}"
    shutil.rmtree(line[0])  # its logs: a Python killed with -9 cannot remove them itself


def test_two_threads_with_two_clients_compute_at_once(cluster):
    results, errors = {}, []

    def work(i):
        try:
            with psched.Client(cluster, set_as_default=False) as c:
                x = pa.arange(0, 200 * 300, chunks=5000).reshape(200, 300).rechunk((50, 50)) * (i + 1)
                results[i] = [x[::2, ::3].sum().compute(client=c) for _ in range(5)]
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    import numpy as np
    v = np.arange(60000.0).reshape(200, 300)[::2, ::3]
    assert results[0] == [v.sum()] * 5
    assert results[1] == [2 * v.sum()] * 5


INTERRUPTED = """
import os, signal, psched, psched.array as pa
c = psched.LocalCluster(cpus=1, dashboard=False)
client = psched.Client(c)
try:
    os.killpg(0, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground group
except KeyboardInterrupt:
    pass
print((pa.ones((8, 8), chunks=4) * 2).sum().compute())
c.close()
"""


def test_a_terminal_ctrl_c_reaches_python_but_not_its_local_cluster():
    out = subprocess.run([sys.executable, "-c", INTERRUPTED], env=os.environ, capture_output=True, text=True,
                         timeout=60, start_new_session=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "128.0"


def test_gpu_workers_without_a_gpu_fail_with_the_workers_own_message_and_leave_nothing(monkeypatch):
    if subprocess.run(["sh", "-c", "nvidia-smi -L"], capture_output=True).returncode == 0:
        pytest.skip("this machine has a GPU")
    import psched.cluster
    pids, spawn = [], psched.cluster._native.spawn_child
    monkeypatch.setattr(psched.cluster._native, "spawn_child", lambda *a: pids.append(spawn(*a)) or pids[-1])
    with pytest.raises(psched.Error, match="local pcuda-worker exited .*no usable GPU"):
        psched.LocalCluster(gpus=1)
    assert len(pids) == 2 and gone(pids)
