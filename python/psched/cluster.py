"""psched.LocalCluster: psched and its workers as child processes of this Python, as `pbench -g N`
/ `pbench -c N` start them: on loopback, a scheduler file and logs in a temporary directory, the
dashboard on a free port.

Children never outlive us: close() (also on leaving a `with` block, on an exception and at exit)
stops the workers, then the scheduler; a Python killed outright (kill -9) takes them along through
PR_SET_PDEATHSIG. That signal follows the *thread* that started a child, so a thread of the
cluster's own, alive until close(), starts and stops them: a cluster made in a short-lived thread
survives that thread.
"""

import atexit
import json
import os
import shutil
import tempfile
import threading
import time

from . import _native


def _find_bin_dir(bin_dir):
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [bin_dir] if bin_dir else [
        os.environ.get("PSCHED_BIN_DIR"),
        os.path.join(here, "..", "..", "bin"),              # the build tree: build/python/psched
        os.path.join(here, "..", "..", "..", "..", "bin"),  # installed: PREFIX/lib/python3.X/dist-packages/psched
        os.path.dirname(shutil.which("psched") or ""),
    ]
    for d in candidates:
        if d and all(os.access(os.path.join(d, b), os.X_OK) for b in ("psched", "pcuda-worker")):
            return os.path.realpath(d)
    raise FileNotFoundError("cannot find psched and pcuda-worker (looked in "
                            f"{', '.join(os.path.realpath(d) for d in candidates if d)}); "
                            "pass bin_dir= or set PSCHED_BIN_DIR")


class LocalCluster:
    """LocalCluster(gpus=N) or LocalCluster(cpus=N, threads_per_worker=T): N workers on this host.

    memory_limit: each worker's --memory-limit; token: require this token (clients made with
    Client(cluster) present it); tls: (ca_file, cert_file, key_file), mutual TLS on every connection
    with this one pair (Client(cluster) uses it too); bin_dir: where psched and pcuda-worker are (default: next to this
    package's build or install, $PSCHED_BIN_DIR, PATH)."""

    def __init__(self, gpus=0, cpus=0, threads_per_worker=0, *, memory_limit=None, token=None, tls=None,
                 dashboard=True, log_level="warning", bin_dir=None, timeout=120.0):
        if gpus and cpus:
            raise ValueError("LocalCluster: give gpus or cpus, not both")
        if gpus < 0 or cpus < 0 or threads_per_worker < 0:
            raise ValueError("LocalCluster: gpus, cpus and threads_per_worker must be >= 0")
        if not gpus and not cpus:
            cpus = 1
        self.n_workers = gpus or cpus
        self.backend = "cuda" if gpus else "cpu"
        self.token = token
        self.tls = tuple(os.fspath(f) for f in tls) if tls else None
        if self.tls and len(self.tls) != 3:
            raise ValueError("LocalCluster: tls is (ca_file, cert_file, key_file)")
        self._bin = _find_bin_dir(bin_dir)
        self._dir = tempfile.mkdtemp(prefix="psched-local.")
        self.scheduler_file = os.path.join(self._dir, "scheduler.json")
        self.pids = []  # scheduler first
        self._stop = threading.Event()
        self._started = threading.Event()
        self._start_error = None
        self._closed = False
        self._children = self._specs(memory_limit, dashboard, log_level, threads_per_worker)
        self._keeper = threading.Thread(target=self._keep, name="psched-local-cluster", daemon=True)
        self._keeper.start()
        atexit.register(self.close)
        try:
            self._started.wait()
            if self._start_error:
                raise self._start_error
            self._wait_ready(timeout)
        except BaseException:
            self.close()
            raise

    def _specs(self, memory_limit, dashboard, log_level, threads_per_worker):
        # libpclient describes the processes (client/local_cluster_children.h): one home for
        # their flags.
        token_file = ""
        if self.token:
            token_file = os.path.join(self._dir, "token")
            fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(self.token)
        gpus = self.n_workers if self.backend == "cuda" else 0
        cpus = self.n_workers if self.backend == "cpu" else 0
        return _native.local_cluster_children(
            gpus, cpus, threads_per_worker, str(memory_limit or ""), token_file,
            "127.0.0.1:0" if dashboard else "none", log_level, list(self.tls or ()), self.scheduler_file)

    def _keep(self):
        try:
            for i, (binary, args, env) in enumerate(self._children):
                log = os.path.join(self._dir, f"{binary}-{i}.log")
                self.pids.append(_native.spawn_child(os.path.join(self._bin, binary), args, env, log))
        except BaseException as e:  # noqa: BLE001 - handed to the constructor
            self._start_error = e
        self._started.set()
        self._stop.wait()
        # Workers first (they say goodbye), then the scheduler.
        for pid in reversed(self.pids[1:]):
            _native.stop_child(pid, 3000)
        if self.pids:
            _native.stop_child(self.pids[0], 3000)

    def _check_children(self):
        for i, pid in enumerate(self.pids):
            status = _native.child_exited(pid)
            if status is not None:
                binary = self._children[i][0]
                try:
                    with open(os.path.join(self._dir, f"{binary}-{i}.log")) as f:
                        tail = f.read()[-2000:].strip()
                except OSError:
                    tail = ""
                raise _native.Error(f"local {binary} exited (wait status {status}): {tail or 'no output'}")

    def _wait_ready(self, timeout):
        deadline = time.monotonic() + timeout
        while not self._scheduler_info():
            self._check_children()
            if time.monotonic() > deadline:
                raise TimeoutError(f"local psched did not write {self.scheduler_file} within {timeout} s")
            time.sleep(0.02)
        client = _native.Client("", self.scheduler_file, self.token or "", "psched-local-cluster", 5000,
                                *(self.tls or ("", "", "")))
        try:
            while len(client.workers()) < self.n_workers:
                self._check_children()
                if time.monotonic() > deadline:
                    raise TimeoutError(f"local workers did not register within {timeout} s")
                time.sleep(0.02)
        finally:
            client.close()

    def _scheduler_info(self):
        try:
            with open(self.scheduler_file) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    @property
    def scheduler_address(self):
        return (self._scheduler_info() or {}).get("address", "")

    @property
    def local_directory(self):
        """This cluster's temporary directory, which its workers read too: psched.array.from_array
        writes arrays here by default. Removed by close()."""
        return self._dir

    @property
    def dashboard_link(self):
        link = (self._scheduler_info() or {}).get("dashboard", "")
        return link + "/" if link and not link.endswith("/") else link

    def close(self):
        """Stops the workers, then the scheduler, and removes the temporary directory."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        self._keeper.join()
        atexit.unregister(self.close)
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        state = "closed" if self._closed else f"{self.scheduler_address}, dashboard {self.dashboard_link}"
        return f"<psched.LocalCluster: {self.n_workers} {self.backend} workers, {state}>"

    def _repr_html_(self):
        if self._closed:
            return "<p>psched.LocalCluster (closed)</p>"
        link = self.dashboard_link
        return (f"<p>psched.LocalCluster: {self.n_workers} {self.backend} workers at "
                f"<code>{self.scheduler_address}</code>; dashboard: <a href='{link}' target='_blank'>{link}</a></p>")
