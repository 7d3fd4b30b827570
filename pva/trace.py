"""Trace reports: host-side events by process and thread (libpva section 2.3, pva.openTrace).

A thread's events are read and checked in one step the first time they are asked for, and an
Event object is made for each at once, so walking a large trace costs little per event.
"""

from __future__ import annotations

import os
from itertools import repeat
from typing import Any

from formats.gcpause import gc_paused
from formats.trace.reader import ThreadEvents, TraceReader

from .lists_and_enums import PvaList, refuse_pickle

__all__ = [
    "Event",
    "EventColumns",
    "isTrace",
    "Flow",
    "Process",
    "Thread",
    "TraceReport",
    "openTrace",
]


class _ThreadView:
    """A thread's events as loaded: one Event object per event, and the columns as lists
    (each converted from the reader's arrays on first use)."""

    __slots__ = ("data", "pid", "tid", "channel_names", "children", "offsets", "roots", "__dict__")

    def __init__(self, data: ThreadEvents) -> None:
        self.data = data
        self.pid = data.pid
        self.tid = data.tid
        self.channel_names = data.channel_names
        self.offsets = data.offsets
        n = len(data.labels)
        with gc_paused():
            events = list(map(Event, repeat(self, n), range(n), data.labels))
            #: the children of event i are children[offsets[i]:offsets[i + 1]]
            self.children = list(map(events.__getitem__, data.kids))
            self.roots = list(map(events.__getitem__, data.roots))

    def __getattr__(self, name: str) -> list:
        if name not in ("ids", "channels", "timestamps", "durations", "complete"):
            raise AttributeError(name)
        values = getattr(self.data, name).tolist()
        setattr(self, name, values)
        return values


class Event:
    """One traced event: a label on a channel, when it started and how long it lasted (libpva Event).

    `children()` is a method, as in libpva: the events that occurred on the same thread during this
    one, in start order.
    """

    __slots__ = ("_d", "_i", "label")

    __reduce_ex__ = refuse_pickle

    def __init__(self, view: _ThreadView, index: int, label: str) -> None:
        self._d = view
        self._i = index
        #: The event's label.
        self.label = label

    @property
    def pid(self) -> int:
        """The process the event occurred in."""
        return self._d.pid

    @property
    def tid(self) -> int:
        """The thread the event occurred on."""
        return self._d.tid

    @property
    def channel(self) -> str:
        """The name of the event's channel."""
        d = self._d
        return d.channel_names[d.channels[self._i]]

    @property
    def timestamp(self) -> int:
        """When the event started, in microseconds of a steady clock (comparable within one trace only)."""
        return self._d.timestamps[self._i]

    @property
    def duration(self) -> int:
        """How long the event lasted, in microseconds; for an event that never ended, until the trace stopped."""
        return self._d.durations[self._i]

    @property
    def isComplete(self) -> bool:
        """Whether the event ended; False if it was still open when the recording process stopped."""
        return self._d.complete[self._i]

    def children(self) -> PvaList:
        """The events that occurred on this thread during this event, in start order."""
        d = self._d
        i = self._i
        offsets = d.offsets
        return PvaList(d.children[offsets[i] : offsets[i + 1]])

    @property
    def id(self) -> int:
        """The event's id in the trace file (pva addition; events.id in SQL)."""
        return self._d.ids[self._i]

    @property
    def args(self) -> dict:
        """The event's arguments, e.g. from a Chrome trace (pva addition); empty if none."""
        return self._d.data.reader.event_args(self._d.ids[self._i])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Event) and other._d is self._d and other._i == self._i

    def __hash__(self) -> int:
        return hash((self._d.pid, self._d.tid, self._i))

    def __repr__(self) -> str:
        state = "" if self.isComplete else ", incomplete"
        return f"<Event {self.label!r} on {self.channel!r} at {self.timestamp} µs for {self.duration} µs{state}>"


class EventColumns:
    """A thread's events as numpy columns in start order (pva addition): `ids`, `labels` (a list),
    `channels` (names, a list), `timestamps` and `durations` in microseconds, `parents` (position of
    the parent, -1 for a root) and `selfTimes` (duration less the children's durations)."""

    __slots__ = ("ids", "labels", "channels", "timestamps", "durations", "parents", "selfTimes")

    def __init__(self, data: ThreadEvents) -> None:
        import numpy as np

        count = len(data.labels)
        self.ids = data.ids
        self.labels = data.labels
        names = data.channel_names
        self.channels = [names[c] for c in data.channels.tolist()]
        self.timestamps = data.timestamps
        self.durations = data.durations
        parents = np.full(count, -1, dtype=np.int64)
        kids = np.asarray(data.kids, dtype=np.int64)
        if kids.size:
            spans = np.diff(np.asarray(data.offsets, dtype=np.int64)).astype(np.int64)
            parents[kids] = np.repeat(np.arange(count), spans)
        self.parents = parents
        inner = parents >= 0
        children = np.bincount(parents[inner], weights=data.durations[inner], minlength=count)
        self.selfTimes = data.durations - children.astype(np.int64)

    def __len__(self) -> int:
        return len(self.labels)


class Thread:
    """A thread of a traced process: its root events in start order (libpva Thread)."""

    __slots__ = ("_trace", "pid", "tid", "name", "_view")

    __reduce_ex__ = refuse_pickle

    def __init__(self, trace: TraceReport, pid: int, tid: int, name: str) -> None:
        self._trace = trace
        self.pid = pid
        self.tid = tid
        self.name = name
        self._view: _ThreadView | None = None

    @property
    def events(self) -> PvaList:
        """The root events of this thread, in start order; use `Event.children()` for the rest."""
        return PvaList(self._load().roots)

    def _load(self) -> _ThreadView:
        view = self._view
        if view is None:
            view = self._view = _ThreadView(self._trace._reader.thread_events(self.pid, self.tid))
        return view

    def eventColumns(self) -> EventColumns:
        """Every event of the thread as columns, in start order (pva addition, for analyses)."""
        return EventColumns(self._trace._reader.thread_events(self.pid, self.tid))

    def argValues(self, key: str) -> dict[int, object]:
        """Event id -> the value of `key` in its args, for the events whose args have it (pva addition)."""
        return self._trace._reader.arg_values(self.pid, self.tid, key)

    def __repr__(self) -> str:
        name = f" {self.name!r}" if self.name else ""
        return f"<Thread {self.tid}{name} of process {self.pid}>"


class Process:
    """A traced process and its threads (libpva Process)."""

    __slots__ = ("_trace", "pid", "name", "labels", "_threads", "_by_tid")

    __reduce_ex__ = refuse_pickle

    def __init__(self, trace: TraceReport, pid: int, name: str, threads: list[tuple], labels: str = "") -> None:
        self._trace = trace
        self.pid = pid
        self.name = name
        #: labels of the process (pva addition; Chrome trace process_labels such as "GPU 0"), or ""
        self.labels = labels
        self._threads = PvaList(Thread(trace, pid, tid, thread_name) for tid, thread_name, _index in threads)
        self._by_tid = {thread.tid: thread for thread in self._threads}

    @property
    def threads(self) -> PvaList:
        """The threads of this process, by thread id."""
        return PvaList(self._threads)

    def thread(self, tid: int) -> Thread:
        """The thread with id `tid`; IndexError (C++ std::out_of_range) if the process has none."""
        found = self._by_tid.get(tid)
        if found is None:
            raise IndexError(f"process {self.pid} of {self._trace.path!r} has no thread {tid!r}")
        return found

    def __repr__(self) -> str:
        name = f" {self.name!r}" if self.name else ""
        return f"<Process {self.pid}{name}, {len(self._threads)} threads>"


class Flow:
    """A link between two events (pva addition; a Chrome trace flow such as a CPU kernel launch and
    the kernel on its GPU stream): `source` and `target` are event ids (None where no event is at
    that end), each end also given as process, thread and time in microseconds."""

    __slots__ = (
        "id",
        "flowId",
        "category",
        "name",
        "source",
        "target",
        "sourcePid",
        "sourceTid",
        "sourceTimestamp",
        "targetPid",
        "targetTid",
        "targetTimestamp",
    )

    __reduce_ex__ = refuse_pickle

    def __init__(self, row: tuple) -> None:
        (
            self.id,
            self.flowId,
            self.category,
            self.name,
            self.source,
            self.target,
            self.sourcePid,
            self.sourceTid,
            self.sourceTimestamp,
            self.targetPid,
            self.targetTid,
            self.targetTimestamp,
        ) = row

    def __repr__(self) -> str:
        return f"<Flow {self.flowId!r} {self.category!r}: event {self.source} -> event {self.target}>"


class TraceReport:
    """A trace file opened with `openTrace`: its processes, threads and events (libpva TraceReport).

    The file is opened read-only and never modified.
    """

    def __init__(self, reader: TraceReader) -> None:
        self._reader = reader
        self._source: str | None = None  # the Chrome trace converted on the fly, if any
        self._cleanup: Any = None
        #: What converting a Chrome trace on the fly warned about (pva addition); empty otherwise.
        self.importWarnings: list[str] = []
        threads = reader.threads()
        labels = reader.process_labels()
        self._processes = PvaList(
            Process(self, pid, name, threads.get(pid, []), labels.get(pid, "")) for pid, name, _ in reader.processes()
        )
        self._by_pid = {process.pid: process for process in self._processes}

    __reduce_ex__ = refuse_pickle

    @property
    def path(self) -> str:
        """Path of the trace: the trace file, or the Chrome trace it was converted from (pva addition)."""
        return self._source or self._reader.path

    @property
    def processes(self) -> PvaList:
        """The processes recorded in this trace, by process id."""
        return PvaList(self._processes)

    def process(self, pid: int) -> Process:
        """The process with id `pid`; IndexError (C++ std::out_of_range) if the trace has none."""
        found = self._by_pid.get(pid)
        if found is None:
            raise IndexError(f"{self.path!r} has no process {pid!r}")
        return found

    @property
    def flows(self) -> PvaList:
        """The flows between events, by id (pva addition; empty for a trace without any)."""
        return PvaList(map(Flow, self._reader.flows()))

    @property
    def numEvents(self) -> int:
        """The number of events in the trace (pva addition)."""
        return self._reader.event_count_and_start()[0]

    @property
    def numFlows(self) -> int:
        """The number of flows in the trace (pva addition)."""
        return self._reader.flow_count()

    @property
    def timeSpan(self) -> tuple[int, int] | None:
        """(earliest start, latest end) of the trace's events in microseconds (pva addition); None if it has none."""
        count, first = self._reader.event_count_and_start()
        return None if not count or first is None else (first, self._reader.end_of_trace())

    @property
    def metadata(self) -> dict[str, str]:
        """The trace file's facts (pva addition): producer, format_version, and from a Chrome trace
        chrome_trace_fields, time_origin_ns and display_time_unit (docs/format.md)."""
        return dict(self._reader.metadata)

    @property
    def isComplete(self) -> bool:
        """Whether the recorder closed the trace (pva addition); False if it died or is still recording."""
        return self._reader.is_complete

    def close(self) -> None:
        """Close the trace file (pva addition); threads not read yet can no longer be."""
        self._reader.close()
        if self._cleanup is not None:
            self._cleanup()

    def __enter__(self) -> TraceReport:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        if self._reader.file.closed:
            return f"<TraceReport {os.path.basename(self.path)!r} (closed)>"
        threads = sum(len(p._threads) for p in self._processes)
        state = "" if self.isComplete else ", incomplete"
        return (
            f"<TraceReport {os.path.basename(self.path)!r}, {len(self._processes)} processes, {threads} threads{state}>"
        )

    def _repr_html_(self) -> str:
        """How a notebook shows the trace (pva.notebook_tables)."""
        from .notebook_tables import trace_html

        return trace_html(self)


def isTrace(path: str | os.PathLike[str]) -> bool:
    """Whether `path` is a trace (pva addition): a trace file, or a Chrome trace event JSON file
    (.json or .json.gz, as the PyTorch profiler writes) that `openTrace` converts on the fly."""
    from formats.detect import GZIP_MAGIC, InputKind, classify_input, read_head
    from formats.pop.schema import TRACE_APPLICATION_ID

    name = os.fspath(path)
    if not os.path.isfile(name):
        return False
    head = read_head(name, 100)
    if head.startswith(b"SQLite format 3\x00"):
        return len(head) >= 72 and int.from_bytes(head[68:72], "big") == TRACE_APPLICATION_ID
    if head[:2] != GZIP_MAGIC and head.lstrip(b" \t\r\n\xef\xbb\xbf")[:1] not in (b"{", b"["):
        return False
    return classify_input(name).kind is InputKind.CHROME_TRACE


def openTrace(tracePath: str | os.PathLike[str]) -> TraceReport:
    """Open a trace file and return its TraceReport.

    A Chrome trace event JSON file (.json, or .json.gz) is converted first, to a temporary trace
    file removed when the trace is closed (pva addition). Raises a subclass of pva.PvaError naming
    the path and the problem when the file is missing, not a trace file, of a newer major format
    version, or damaged.
    """
    name = os.fspath(tracePath)
    if os.path.isfile(name) and isTrace(name) and not _is_sqlite(name):
        return _open_converted(name)
    return TraceReport(TraceReader(name))


def _is_sqlite(path: str) -> bool:
    with open(path, "rb") as handle:
        return handle.read(16) == b"SQLite format 3\x00"


def _open_converted(name: str) -> TraceReport:
    """A Chrome trace converted to a temporary trace file, removed when the trace is closed."""
    import shutil
    import tempfile
    import weakref

    from formats.chrome.importer import import_chrome_trace

    directory = tempfile.mkdtemp(prefix="pva-trace-")
    try:
        output = os.path.join(directory, os.path.basename(name).removesuffix(".gz").removesuffix(".json") + ".pvti")
        stats = import_chrome_trace(name, output)
        report = TraceReport(TraceReader(output))
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    report._source = name
    report.importWarnings = list(stats.warnings)
    report._cleanup = weakref.finalize(report, shutil.rmtree, directory, True)
    return report
