"""Host-side trace of the simulator: compile phases, engine load and each run.

Events are kept in memory while the engine lives and written with the report as a pva trace
file (read it with ``pva.openTrace``). They also go to the global ``formats.trace.tracing`` channel
"simulator", so a trace started by the user (``formats.trace.tracing.start``) sees them live.
"""

from __future__ import annotations

import os
import threading
import time
from contextlib import AbstractContextManager
from typing import Literal

from formats.atomic import AtomicOutput
from formats.trace import tracing
from formats.trace.writer import TraceWriter

_CHANNEL = tracing.channel("simulator")


class _Phase:
    def __init__(self, trace: HostTrace, label: str) -> None:
        self._trace = trace
        self._label = label
        self._live: AbstractContextManager[object] | None = None

    def __enter__(self) -> _Phase:
        self._start = time.monotonic_ns()
        self._live = _CHANNEL.event(self._label)
        self._live.__enter__()
        return self

    def __exit__(self, *exc) -> Literal[False]:
        assert self._live is not None, "__exit__ before __enter__"
        self._live.__exit__(*exc)
        end = time.monotonic_ns()
        # Round both ends to microseconds (not the duration), so nested events stay inside their parents.
        start_us, end_us = self._start // 1000, end // 1000
        self._trace.events.append((self._label, start_us, max(0, end_us - start_us)))
        return False


class HostTrace:
    """Records (label, start, duration) of host-side events in microseconds of a steady clock."""

    def __init__(self) -> None:
        self.events: list[tuple[str, int, int]] = []
        self.pid = os.getpid()
        self.tid = threading.get_native_id()

    def phase(self, label: str) -> _Phase:
        return _Phase(self, label)

    def write(self, path: str) -> None:
        """Write the events as a trace file (atomically)."""
        self.stage(path).commit()

    def stage(self, path: str) -> AtomicOutput:
        """Write the trace file under a temporary name; returns the output to commit (or abort)."""
        writer = TraceWriter(path, producer="pva-simulator")
        try:
            writer.add_process(self.pid, "pva simulate")
            writer.add_thread(self.pid, self.tid, "engine")
            if self.events:
                events = sorted(self.events, key=lambda e: (e[1], -e[2]))
                writer.add_events(
                    self.pid,
                    self.tid,
                    [e[0] for e in events],
                    [e[1] for e in events],
                    [e[2] for e in events],
                    channels="simulator",
                    parents="nest",
                )
            writer.close(commit=False)
        except BaseException:
            writer.abort()
            raise
        return writer.output


def trace_file_name(timestamp: float | None = None, pid: int | None = None) -> str:
    """A libpvti-style file name: day, date and time of the recording, then the process id."""
    moment = time.localtime(timestamp) if timestamp is not None else time.localtime()
    return time.strftime("%a_%b_%d_%H-%M-%S_%Y", moment) + f"_{os.getpid() if pid is None else pid}.pvti"
