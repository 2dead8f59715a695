"""psched.Future: a job running on a thread of its own, as a concurrent.futures.Future.

The job's thread blocks in libpclient with the GIL released. cancel() cancels the job on the
scheduler: it raises the thread's cancel flag, which libpclient polls while it waits, and returns
once the Cancel has been sent. The future stays PENDING until it has a result, so cancel() works
while the job runs (concurrent.futures only cancels futures that have not started).
"""

import concurrent.futures
import threading

from . import _native


class Future(concurrent.futures.Future):
    def __init__(self, work, name="psched-job"):
        super().__init__()
        self._flag = _native.CancelFlag()
        self._thread = threading.Thread(target=self._run, args=(work,), name=name, daemon=True)
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

    def running(self):
        return self._thread.is_alive() and not self.done()

    def cancel(self):
        """Cancels the job on the scheduler; False if it had already finished."""
        if self.done():
            return self.cancelled()
        self._flag.set()
        self._thread.join()
        if self.done():
            return False  # finished before the cancel reached it
        super().cancel()
        self.set_running_or_notify_cancel()  # CANCELLED_AND_NOTIFIED: wakes concurrent.futures.wait()
        return True

    def _cancel_on_interrupt(self, wait, timeout):
        try:
            return wait(timeout)
        except KeyboardInterrupt:
            self.cancel()
            raise

    def result(self, timeout=None):
        """The job's Result; Ctrl-C while waiting cancels the job and raises KeyboardInterrupt."""
        return self._cancel_on_interrupt(super().result, timeout)

    def exception(self, timeout=None):
        return self._cancel_on_interrupt(super().exception, timeout)
