"""The default client: the newest open Client made with set_as_default, which Reduction.compute()
uses without client=. Its own module so that psched.array needs no import of psched.client (which
imports psched.array)."""

import threading

_defaults = []  # open clients made with set_as_default, newest last
_default_lock = threading.Lock()


def default_client():
    """The newest open Client: what Reduction.compute() uses without client=."""
    with _default_lock:
        if not _defaults:
            raise RuntimeError("no psched.Client: create one first, e.g. psched.Client('tcp://head:8786') "
                               "or psched.Client(psched.LocalCluster(cpus=2))")
        return _defaults[-1]
