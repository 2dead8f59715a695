"""psched.Future: a job running on a thread of its own, as a concurrent.futures.Future.

The job's thread blocks in libpclient with the GIL released. cancel() cancels the job on the
scheduler: it raises the thread's cancel flag, which libpclient polls while it waits (also while
the job waits behind the client's other jobs), and returns once the Cancel has been sent. The
future stays PENDING until it has a result, so cancel() works while the job runs
(concurrent.futures only cancels futures that have not started).

Ctrl-C while waiting on a future (result(), exception()) cancels every future this process has
outstanding and raises KeyboardInterrupt; so does closing a client (its own futures), and the
interpreter's exit cancels whatever is left before Python finalises, so no job thread is cut off
inside native code.
"""

import atexit
import concurrent.futures
import threading
import time
import weakref

from . import _native

# Futures whose job has not ended, for Ctrl-C, Client.close() and exit to cancel.
_outstanding = weakref.WeakSet()
_outstanding_lock = threading.Lock()


def cancel_outstanding(owner=None, timeout=5.0):
    """Cancels the outstanding futures (of `owner`, a Client, or all): every flag is raised first,
    so the jobs stop together, then each thread is waited for (at most `timeout` in all)."""
    with _outstanding_lock:
        futures = [f for f in _outstanding if owner is None or f._owner is owner]
    for f in futures:
        f._flag.set()
    deadline = time.monotonic() + timeout
    for f in futures:
        f._finish_cancel(max(0.0, deadline - time.monotonic()))


atexit.register(cancel_outstanding)


class Future(concurrent.futures.Future):
    def __init__(self, work, name="psched-job", owner=None):
        super().__init__()
        self._flag = _native.CancelFlag()
        self._owner = owner
        self._thread = threading.Thread(target=self._run, args=(work,), name=name, daemon=True)
        with _outstanding_lock:
            _outstanding.add(self)
        self._thread.start()

    def _run(self, work):
        try:
            value = work(self._flag)
        except _native.Cancelled:
            return  # cancel() marks the future
        except BaseException as e:  # noqa: BLE001 - the caller of result() gets it
            self.set_exception(e)
        else:
            self.set_result(value)
        finally:
            with _outstanding_lock:
                _outstanding.discard(self)

    def running(self):
        return self._thread.is_alive() and not self.done()

    def cancel(self):
        """Cancels the job on the scheduler; False if it had already finished."""
        if self.done():
            return self.cancelled()
        self._flag.set()
        return self._finish_cancel(None)

    def _finish_cancel(self, timeout):
        self._thread.join(timeout)
        if self.done() or self._thread.is_alive():
            return False  # finished before the cancel reached it (or did not stop in time)
        super().cancel()
        self.set_running_or_notify_cancel()  # CANCELLED_AND_NOTIFIED: wakes concurrent.futures.wait()
        return True

    def _cancel_on_interrupt(self, wait, timeout):
        try:
            return wait(timeout)
        except KeyboardInterrupt:
            cancel_outstanding()  # what this process submitted, this future's job first among them
            raise

    def result(self, timeout=None):
        """The job's Result; Ctrl-C while waiting cancels the job and raises KeyboardInterrupt."""
        return self._cancel_on_interrupt(super().result, timeout)

    def exception(self, timeout=None):
        return self._cancel_on_interrupt(super().exception, timeout)
