"""psched.Client: a connection to a psched scheduler, as dask.distributed's Client is to Dask's.

client.run(reduction) blocks with the GIL released (other threads run) and turns Ctrl-C into a
Cancel on the scheduler; client.compute(reduction) returns a Future run by a thread of its own.
One connection runs one job at a time; jobs of several threads on one client queue up (use a
client per thread to run them side by side).
"""

import json
import os
import threading
import time

from . import _native
from ._context import _default_lock, _defaults, default_client  # noqa: F401 - default_client is API
from .array import Reduction
from .future import Future, cancel_outstanding
from .result import Result



class _ProgressBar:
    """tqdm (notebook or terminal: tqdm.auto) once a job has run for `delay` seconds."""

    def __init__(self, mode, delay=0.5):
        self.bar, self.mode, self.delay, self.t0 = None, mode, delay, time.monotonic()

    def __call__(self, done, total):
        if self.bar is None:
            if self.mode is None and time.monotonic() - self.t0 < self.delay:
                return
            try:
                from tqdm.auto import tqdm
            except ImportError:
                self.mode = False
                return
            self.bar = tqdm(total=total, unit="chunk", desc="psched", leave=False)
        self.bar.update(done - self.bar.n)

    def close(self):
        if self.bar is not None:
            self.bar.close()


class Client:
    """Client(address) / Client(scheduler_file=...) / Client(LocalCluster(...)).

    address: tcp://host:port, host:port or host (port 8786); default $PSCHED_SCHEDULER_ADDRESS or
    tcp://127.0.0.1:8786. token / token_file: the cluster's token (default $PSCHED_TOKEN).
    tls: (ca_file, cert_file, key_file) for a mutual-TLS cluster (tls:// addresses; a LocalCluster's
    own by default).
    reconnect: seconds to wait for the scheduler to come back when the connection to it is lost
    while a job runs (psched killed or restarted), then submit the job again (the same bits);
    0 (the default) raises psched.Error at once.
    no_workers_timeout: seconds a job may wait with no worker connected (none joined yet, or the
    last one left or died; said at once on stderr) before it is cancelled and psched.Error is
    raised; None waits for ever. Default 60.
    """

    def __init__(self, address=None, *, scheduler_file=None, token=None, token_file=None, tls=None,
                 timeout=5.0, name="psched-python", set_as_default=True, reconnect=0.0,
                 no_workers_timeout=60.0):
        self.cluster, self.address, self._closed = None, address, True
        if address is not None and not isinstance(address, str):
            self.cluster = address  # a LocalCluster (or anything with scheduler_file)
            scheduler_file, address = address.scheduler_file, None
            token = token if token is not None else getattr(self.cluster, "token", None)
            tls = tls if tls is not None else getattr(self.cluster, "tls", None)
        if address is None and scheduler_file is None:
            address = os.environ.get("PSCHED_SCHEDULER_ADDRESS", "tcp://127.0.0.1:8786")
        if token is None and token_file is not None:
            token = _native.load_token(os.fspath(token_file))
        self._scheduler_file = os.fspath(scheduler_file) if scheduler_file else ""
        ca_file, cert_file, key_file = (os.fspath(f) for f in tls) if tls else ("", "", "")
        self._native = _native.Client(address or "", self._scheduler_file, token or "", name,
                                      int(timeout * 1000), ca_file, cert_file, key_file,
                                      int(reconnect * 1000),
                                      0 if no_workers_timeout is None else max(1, int(no_workers_timeout * 1000)))
        self.address = address or self._read_scheduler_file().get("address", "")
        self._closed = False
        if set_as_default:
            with _default_lock:
                _defaults.append(self)

    def _read_scheduler_file(self):
        try:
            with open(self._scheduler_file) as f:
                return json.load(f)
        except (OSError, ValueError):
            return {}

    @property
    def dashboard_link(self):
        """The scheduler's dashboard: from its scheduler file, else the default port on its host."""
        if self._scheduler_file:
            link = self._read_scheduler_file().get("dashboard", "")
            return link + "/" if link and not link.endswith("/") else link
        host_port = self.address.split("://")[-1]
        host = host_port.rsplit(":", 1)[0] if ":" in host_port else host_port
        return f"http://{host}:8787/"

    def workers(self):
        """The registered workers: dicts with name, host, backend, device, memory_total_bytes, ...,
        cpu_affinity and gpu (its latest NVML health, None without NVML; see Result)."""
        return self._native.workers()

    def cluster_info(self):
        workers = self.workers()
        return {"address": self.address, "dashboard_link": self.dashboard_link, "workers": workers}

    def wait_for_workers(self, n=1, timeout=60.0):
        deadline = time.monotonic() + timeout
        while True:
            workers = self.workers()
            if len(workers) >= n:
                return workers
            if time.monotonic() > deadline:
                raise TimeoutError(f"only {len(workers)} of {n} workers registered within {timeout} s")
            time.sleep(0.02)

    def _run(self, reduction, progress, devices, cancel, interruptible, verify=0.0):
        if not isinstance(reduction, Reduction):
            raise TypeError(f"psched computes reductions (x.sum(), x.mean(), ...), not {type(reduction).__name__}")
        job = reduction._job_to_run()
        bar = _ProgressBar(progress) if progress is not False else None
        try:
            figures = self._native.run(job, bar, cancel, interruptible, float(verify), bool(devices), reduction.ddof)
        finally:
            if bar is not None:
                bar.close()
        return Result(reduction.kind, figures)

    def run(self, reduction, *, progress=None, devices=True, verify=0.0):
        """Runs the reduction's job here, blocking; Ctrl-C cancels it on the scheduler and raises
        KeyboardInterrupt. progress: None (a bar once the job has run 0.5 s), True, False.
        devices: each worker's share of the job in result.devices (two more round trips).
        verify: share of chunks (0 to 1) computed again on another worker and compared bit for
        bit (pbench --verify); result.mismatches lists those whose copies differ."""
        return self._run(reduction, progress, devices, None, threading.current_thread() is threading.main_thread(),
                         verify)

    def compute(self, reduction, *, progress=False, devices=True, verify=0.0):
        """Starts the reduction's job and returns a Future at once (concurrent.futures style)."""
        return Future(lambda flag: self._run(reduction, progress, devices, flag, False, verify),
                      name=f"psched-{reduction.kind}", owner=self)

    def close(self):
        if self._closed:
            return
        self._closed = True
        cancel_outstanding(owner=self)  # jobs in flight are cancelled, not waited for
        self._native.close()
        with _default_lock:
            if self in _defaults:
                _defaults.remove(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"<psched.Client: {self.address}, dashboard {self.dashboard_link}>"
