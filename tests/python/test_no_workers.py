# A job with no worker to run it is said at once on stderr and given up after no_workers_timeout.
import os
import subprocess
import time

import pytest

psched = pytest.importorskip("psched")
pa = pytest.importorskip("psched.array")
from conftest import BIN_DIR  # noqa: E402


@pytest.fixture()
def lone_scheduler(tmp_path):
    """A psched with no worker at all; yields its scheduler file."""
    sf = tmp_path / "sched.json"
    proc = subprocess.Popen([os.path.join(BIN_DIR, "psched"), "--port", "0", "--dashboard-address", "none",
                             "--scheduler-file", str(sf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while not sf.exists() and time.monotonic() < deadline:  # readiness: written once it listens
            time.sleep(0.01)
        yield str(sf)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_job_with_no_worker_is_said_at_once_and_fails_after_the_timeout(lone_scheduler, capsys):
    client = psched.Client(scheduler_file=lone_scheduler, no_workers_timeout=0.5, set_as_default=False)
    try:
        t0 = time.monotonic()
        with pytest.raises(psched.Error, match=r"^no workers: none joined within 0.5 s, 16 of 16 chunks left"):
            client.run(pa.arange(0, 64, chunks=4).sum(), progress=False, devices=False)
        assert time.monotonic() - t0 >= 0.5
        assert "psched: no workers: waiting for one to join, 16 chunks left" in capsys.readouterr().err
    finally:
        client.close()
