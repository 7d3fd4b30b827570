"""Jobs run one after another on a worker thread while the caller prepares the next ones."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable


class InOrder:
    """Runs submitted jobs in order on one worker thread, at most `ahead` of them waiting.

    Worth it where a job spends its time outside the GIL (SQLite inserts, for example). The
    first error of a job is raised in the caller, by the next `submit` or by leaving the
    ``with`` block; later jobs are then skipped.
    """

    def __init__(self, ahead: int = 1) -> None:
        self._jobs: queue.Queue[Callable[[], object] | threading.Event | None] = queue.Queue(maxsize=ahead)
        self._error: BaseException | None = None
        self._closed = False
        self._worker = threading.Thread(target=self._run, name="pva-in-order", daemon=True)
        self._worker.start()

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            if isinstance(job, threading.Event):  # a caller waiting for the jobs before it
                job.set()
            elif self._error is None:
                try:
                    job()
                except BaseException as exc:  # raised again in the caller
                    self._error = exc

    def submit(self, job: Callable[[], object]) -> None:
        """Run `job` after the ones submitted before it."""
        self._raise()
        if self._closed:
            raise RuntimeError("a job submitted after close")
        self._jobs.put(job)

    def wait(self) -> None:
        """Wait for every job submitted so far; raise the first error of one."""
        if not self._closed:  # else every job has run
            done = threading.Event()
            self._jobs.put(done)
            done.wait()
        self._raise()

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error

    def close(self) -> None:
        """Finish the jobs submitted and stop the worker (once: closing again does nothing)."""
        if self._closed:
            return
        self._closed = True
        self._jobs.put(None)
        self._worker.join()

    def __enter__(self) -> InOrder:
        return self

    def __exit__(self, kind: object, value: object, tb: object) -> None:
        self.close()
        if kind is None:
            self._raise()
