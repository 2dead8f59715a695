# The scheduler's and the client's errors arrive as psched.Error with their message.
import os
import socket
import time

import pytest

psched = pytest.importorskip("psched")
pa = pytest.importorskip("psched.array")
from conftest import api_status  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_address_raises_with_the_address():
    port = free_port()
    with pytest.raises(psched.Error, match=f"cannot connect to scheduler tcp://127.0.0.1:{port}: Connection refused"):
        psched.Client(f"tcp://127.0.0.1:{port}", timeout=2)


def test_a_malformed_address_raises():
    with pytest.raises(psched.Error, match="port"):
        psched.Client("tcp://127.0.0.1:notaport")


def test_a_missing_scheduler_file_raises_after_the_timeout(tmp_path):
    with pytest.raises(psched.Error):
        psched.Client(scheduler_file=str(tmp_path / "none.json"), timeout=0.2)


@pytest.fixture(scope="module")
def guarded():
    with psched.LocalCluster(cpus=1, threads_per_worker=1, token="s3cret-token", dashboard=False) as c:
        yield c


def test_a_wrong_token_is_refused_with_the_schedulers_message(guarded):
    with pytest.raises(psched.Error, match="refused us: .*token"):
        psched.Client(scheduler_file=guarded.scheduler_file, token="wrong")
    with pytest.raises(psched.Error, match="requires a token"):
        psched.Client(scheduler_file=guarded.scheduler_file, token="")


def test_the_right_token_from_a_file_is_accepted(guarded, tmp_path):
    path = tmp_path / "token"
    path.write_text("s3cret-token\n")
    os.chmod(path, 0o600)
    with psched.Client(scheduler_file=guarded.scheduler_file, token_file=path) as c:
        assert pa.ones((4, 4), chunks=2).sum().compute(client=c) == 16
    with psched.Client(guarded) as c:  # a LocalCluster hands its token to its clients
        assert pa.ones((4, 4), chunks=2).sum().compute(client=c) == 16


def test_a_grid_the_scheduler_would_refuse_raises_where_it_is_written_naming_the_field():
    with pytest.raises(ValueError, match="chunk of 60000 x 60000 elements is too large"):
        pa.ones((100000, 100000), chunks=(60000, 60000))  # 3.6e9 elements in one chunk
    with pytest.raises(ValueError, match="too many"):
        pa.ones((1 << 30, 1 << 29), chunks=(256, 256))  # 2^43 chunks: past 2^40
    with pytest.raises(ValueError, match="too many"):
        pa.ones((1 << 30, 1 << 29), chunks=(1 << 16, 1 << 14)).rechunk(256)


def test_a_job_the_scheduler_refuses_raises_its_message(client):
    job = pa.ones((100, 100), chunks=10).sum().job()
    job.chunk_rows = 0  # past the Python checks, as a hand-made job could be
    with pytest.raises(psched.Error, match="chunk-x must be > 0"):
        client._native.run(job)


def test_a_job_aborted_by_its_scheduler_raises_the_schedulers_message():
    cluster = psched.LocalCluster(cpus=1, threads_per_worker=1)
    client = psched.Client(cluster, set_as_default=False)
    future = client.compute(pa.random.normal(size=(20000, 20000), chunks=500, seed=1).sum())
    deadline = time.monotonic() + 10
    while not api_status(cluster.dashboard_link)["jobs"]:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    cluster.close()
    with pytest.raises(psched.Error, match="^scheduler shutting down"):
        future.result(timeout=30)
    client.close()


def test_compute_without_a_client_says_how_to_make_one():
    from psched import client as client_module
    saved = list(client_module._defaults)
    client_module._defaults.clear()
    try:
        with pytest.raises(RuntimeError, match="psched.Client"):
            pa.ones((4, 4), chunks=2).sum().compute()
    finally:
        client_module._defaults[:] = saved


def test_a_job_that_fails_on_the_cluster_raises_the_schedulers_message(monkeypatch):
    monkeypatch.setenv("PSCHED_TEST_CRASH_ON_CHUNK", "7")  # test-only: a worker dies on chunk 7
    # Three workers, none restarted: chunk 7 takes them all down, the first ones beside other chunks
    # (named, not counted), so the job may end for want of workers before the chunk reaches the
    # limit; either way the message names the chunk and the workers it took down.
    with psched.LocalCluster(cpus=3, threads_per_worker=1, dashboard=False) as cluster:
        with psched.Client(cluster, set_as_default=False, no_workers_timeout=2) as c:
            with pytest.raises(psched.Error, match=r"chunk 7 took down 3 workers"):
                pa.arange(10000, chunks=100).reshape(100, 100).rechunk(10).sum().compute(client=c)
