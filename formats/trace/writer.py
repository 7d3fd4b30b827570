"""Trace file writers: all at once for converters (TraceWriter), or batch by batch for a live
recorder (TraceAppender, the back end of formats.trace.tracing).

Both write the schema of schemas/trace.sql. Times are integer microseconds of a steady clock.
"""

from __future__ import annotations

import datetime
import functools
import itertools
import json
import os
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .. import __version__
from ..atomic import AtomicOutput, _fsync_path
from ..errors import InvalidInputError
from ..lazy_import import lazy_module
from ..pop.schema import TRACE_APPLICATION_ID, TRACE_FORMAT, split_ddl, trace_schema, user_version
from ..pop.sqlite_writer import SqliteFileWriter

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa
else:
    np = lazy_module("numpy")
    pa = lazy_module("pyarrow")

#: Metadata `state` of a trace whose writer has not finished (recording) and of a finished one.
STATE_RECORDING = "recording"
STATE_COMPLETE = "complete"

_OPEN = 2**63 - 1  # the largest int64: end time of an event that never ended
_FLOW_COLUMNS = (
    "id",
    "flow_id",
    "category",
    "name",
    "source",
    "target",
    "source_pid",
    "source_tid",
    "source_timestamp",
    "target_pid",
    "target_tid",
    "target_timestamp",
)
_EVENT_COLUMNS = ("pid", "tid", "id", "parent", "label", "channel", "timestamp", "duration", "complete")
#: Stands for SQL NULL in the integer columns of thread_event_columns (and of bulk reads).
NULL = -(2**63)  # the smallest int64


@functools.cache
def thread_columns_schema() -> pa.Schema:
    """The schema of a thread_event_columns stream (schemas/trace.sql)."""
    return pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("parent", pa.int64(), nullable=False),
            pa.field("label", pa.dictionary(pa.int32(), pa.utf8()), nullable=False),
            pa.field("channel", pa.int64(), nullable=False),
            pa.field("timestamp", pa.int64(), nullable=False),
            pa.field("duration", pa.int64(), nullable=False),
            pa.field("complete", pa.int8(), nullable=False),
        ]
    )


#: One SQL query reading a thread's events as text columns: count, six integer lists, a JSON label list.
THREAD_EVENTS_SQL = (
    f"SELECT count(*), group_concat(id), group_concat(coalesce(parent, {NULL})), group_concat(channel), "
    f"group_concat(timestamp), group_concat(coalesce(duration, {NULL})), group_concat(complete), "
    f"json_group_array(label) FROM (SELECT * FROM events WHERE pid = ? AND tid = ? ORDER BY id)"
)


def encode_thread_columns(row: tuple) -> bytes:
    """The thread_event_columns stream of a thread, from its THREAD_EVENTS_SQL row."""
    count = row[0]
    numbers = [np.fromstring(text or "", sep=",", dtype=np.int64) for text in row[1:7]]
    labels = json.loads(row[7]) if count else []
    if any(a.size != count for a in numbers) or len(labels) != count:
        raise InvalidInputError("events changed while their columns were written")
    ids, parents, channels, stamps, lengths, complete = numbers
    return thread_columns_stream(ids, parents, pa.array(labels, type=pa.utf8()), channels, stamps, lengths, complete)


def thread_columns_stream(
    ids: np.ndarray,
    parents: np.ndarray,
    labels: pa.Array,
    channels: np.ndarray,
    stamps: np.ndarray,
    lengths: np.ndarray,
    complete: np.ndarray,
) -> bytes:
    """The thread_event_columns stream of a thread's events (in id order): int64 columns with NULL
    for a missing parent or duration, and the labels as an Arrow string array."""
    label_array = labels.dictionary_encode()
    if label_array.type != thread_columns_schema().field("label").type:
        label_array = label_array.cast(thread_columns_schema().field("label").type)
    batch = pa.record_batch(
        [
            pa.array(ids, type=pa.int64()),
            pa.array(parents, type=pa.int64()),
            label_array,
            pa.array(channels, type=pa.int64()),
            pa.array(stamps, type=pa.int64()),
            pa.array(lengths, type=pa.int64()),
            pa.array(np.asarray(complete).astype(np.int8)),
        ],
        schema=thread_columns_schema(),
    )
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, thread_columns_schema()) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def thread_columns_rows(execute, threads: Iterable[tuple[int, int]]) -> Iterable[tuple[int, int, int, bytes]]:
    """Rows of thread_event_columns for `threads`, read back through `execute` (a SQL runner)."""
    for pid, tid in threads:
        row = execute(THREAD_EVENTS_SQL, (pid, tid)).fetchone()
        if row[0]:
            yield pid, tid, row[0], encode_thread_columns(row)


def nest_events(
    starts: Sequence[int] | np.ndarray,
    ends: Sequence[int] | np.ndarray,
    labels: Sequence[str] | None = None,
    where: str = "events",
) -> tuple[np.ndarray, np.ndarray]:
    """Infer how the events of one thread nest from their times alone.

    `ends` holds each event's end, or a value of at least 2**63-1 for an event that never ended.
    Returns ``(order, parent)``: `order` lists positions by start (longest first on ties) and
    `parent[i]` is the position of event i's innermost enclosing event, or -1 for a root. Two
    events that overlap without one containing the other raise InvalidInputError naming both.
    """
    start = np.asarray(starts, dtype=np.int64)
    end = np.asarray(ends, dtype=np.int64)
    n = start.size
    if end.size != n:
        raise InvalidInputError(f"{where}: {n} starts but {end.size} ends")
    order = np.lexsort((np.arange(n), -end, start)) if n else np.zeros(0, dtype=np.int64)
    parent = [-1] * n
    start_list = start.tolist()
    end_list = end.tolist()
    stack: list[int] = []
    for i in order.tolist():
        s = start_list[i]
        while stack and end_list[stack[-1]] <= s and end_list[stack[-1]] != _OPEN:
            stack.pop()
        if stack:
            top = stack[-1]
            if end_list[i] > end_list[top]:

                def name(k: int) -> str:
                    return repr(labels[k]) if labels is not None else f"#{k}"

                raise InvalidInputError(
                    f"{where}: event {name(i)} [{s}, {end_list[i]}] starts inside event {name(top)} "
                    f"[{start_list[top]}, {end_list[top]}] but ends after it; events of one thread must nest"
                )
            parent[i] = top
        stack.append(i)
    return order, np.asarray(parent, dtype=np.int64)


def _times(values: Any, count: int, what: str, where: str, allow_open: bool) -> tuple[np.ndarray, np.ndarray]:
    """Microsecond values as int64 or (when any is fractional) float64, and a mask of the entries
    that are None or NaN (open)."""
    if isinstance(values, np.ndarray) and values.dtype.kind in "iu":
        data = values.astype(np.int64)
        missing = np.zeros(data.size, dtype=bool)
    else:
        items = list(values)
        try:
            data = np.array([0.0 if v is None else v for v in items], dtype=np.float64)
        except (TypeError, ValueError):
            raise InvalidInputError(f"{where}: {what} must be numbers (microseconds)") from None
        missing = np.array([v is None for v in items], dtype=bool) | np.isnan(data)
        if np.isinf(data).any():
            raise InvalidInputError(f"{where}: {what} must be finite, found infinity")
        data = np.where(missing, 0.0, data)
        if np.abs(data).max(initial=0) >= 2.0**62:
            raise InvalidInputError(f"{where}: {what} must be below 2**62 microseconds")
        if np.array_equal(data, np.rint(data)):
            data = data.astype(np.int64)
    if data.size != count:
        raise InvalidInputError(f"{where}: expected {count} {what}, got {data.size}")
    if missing.any() and not allow_open:
        raise InvalidInputError(
            f"{where}: {what} must all be given; entry {int(np.flatnonzero(missing)[0])} is missing"
        )
    return data, missing


class _ThreadRegistry:
    """Processes, threads and channels named so far, written when the file is finished."""

    def __init__(self) -> None:
        self.processes: dict[int, list] = {}
        self.threads: dict[tuple[int, int], list] = {}
        self.channels: dict[str, int] = {}

    def process(self, pid: int, name: str | None = None, sort_index: int | None = None) -> None:
        entry = self.processes.setdefault(pid, ["", None])
        if name is not None:
            entry[0] = name
        if sort_index is not None:
            entry[1] = sort_index

    def thread(self, pid: int, tid: int, name: str | None = None, sort_index: int | None = None) -> int:
        self.process(pid)
        key = (pid, tid)
        entry = self.threads.get(key)
        if entry is None:
            entry = self.threads[key] = ["", None, len(self.threads)]
        if name is not None:
            entry[0] = name
        if sort_index is not None:
            entry[1] = sort_index
        return entry[2]

    def channel(self, name: str) -> int:
        found = self.channels.get(name)
        if found is None:
            found = self.channels[name] = len(self.channels)
        return found


def _check_id(value: Any, what: str, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise InvalidInputError(f"{where}: {what} must be an integer, got {value!r}")
    value = int(value)
    if not -(1 << 63) <= value < (1 << 63):
        raise InvalidInputError(f"{where}: {what} {value} does not fit in 64 bits")
    return value


def _json_args(value: Any, where: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError as exc:
            raise InvalidInputError(f"{where}: args must be a JSON object, got unparsable text ({exc})") from None
        if not isinstance(parsed, dict):
            raise InvalidInputError(f"{where}: args must be a JSON object, got {type(parsed).__name__}")
        return value
    if not isinstance(value, Mapping):
        raise InvalidInputError(f"{where}: args must be a mapping, got {type(value).__name__}")
    try:
        return json.dumps(value, separators=(",", ":"), default=str)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"{where}: args cannot be stored as JSON ({exc})") from None


class TraceWriter(SqliteFileWriter):
    """Write a whole trace file (for converters); nothing appears under `path` until `close`.

    Events get ids in the order they are added (``nest`` orders a batch by start first). Give
    parents explicitly (event ids) or let `add_events` infer them from times. Every event must
    lie within its parent; one that does not, or one that ends before it starts, raises
    InvalidInputError naming it.

    >>> with TraceWriter("host.pvti", producer="my-converter") as w:        # doctest: +SKIP
    ...     w.add_process(42, "python")
    ...     w.add_thread(42, 7, "main")
    ...     ids = w.add_events(42, 7, ["Epoch:0", "step"], [0, 10], [1000, 50], channels="poptorch")
    """

    def __init__(
        self, path: str | os.PathLike[str], *, producer: str = "pva", producer_version: str = __version__
    ) -> None:
        super().__init__(
            path,
            schema=trace_schema(),
            application_id=TRACE_APPLICATION_ID,
            version=TRACE_FORMAT,
            producer=producer,
            producer_version=producer_version,
        )
        self.set_metadata(clock="steady", state=STATE_COMPLETE)
        self._registry = _ThreadRegistry()
        self._next_id = 0
        self._last = 0
        self._whole: set[tuple[int, int]] = set()  # threads written by insert_thread_columns
        self._labels: dict[int, str] = {}  # pid -> process labels
        self._flows = 0

    @property
    def next_event_id(self) -> int:
        """The id the next event added will get."""
        return self._next_id

    def reserve_event_ids(self, count: int) -> int:
        """Set aside `count` consecutive event ids for `insert_event_rows`; returns the first."""
        first = self._next_id
        self._next_id += max(0, int(count))
        return first

    def insert_event_rows(
        self, pid: int, tid: int, rows: Sequence[tuple], args: Sequence[tuple[int, str]] = ()
    ) -> None:
        """Insert events of one thread whose ids, parents and nesting the caller has worked out.

        For converters that nest events themselves, a batch at a time: `rows` are ``(id, parent,
        label, channel id, timestamp, duration, complete)`` with ids from `reserve_event_ids`,
        parents on the same thread (None for a root), channel ids from `channel`, and a None
        duration for an event that never ended; `args` are ``(id, JSON object text)``.
        """
        pid = _check_id(pid, "pid", self.path)
        tid = _check_id(tid, "tid", self.path)
        self._check_not_whole(pid, tid)
        self._registry.thread(pid, tid)
        last = self._last
        for row in rows:
            start = row[4]
            end = start if row[5] is None else start + row[5]
            if end > last:
                last = end
        self._last = last
        self.insert("events", _EVENT_COLUMNS, [(pid, tid, *row) for row in rows])
        if args:
            self.insert("event_args", ("event", "args"), args)

    def insert_thread_columns(
        self,
        pid: int,
        tid: int,
        ids: np.ndarray,
        parents: np.ndarray,
        labels: pa.Array,
        channels: np.ndarray,
        timestamps: np.ndarray,
        durations: np.ndarray,
        args: Iterable[tuple[int, str]] = (),
    ) -> None:
        """Insert all the events of one thread at once, as columns, for converters that nest events
        themselves: int64 arrays of ids (ascending, from `reserve_event_ids`), parents (`NULL` for a
        root), channel ids (from `channel`), timestamps and durations (`NULL` for an event that never
        ended), the labels as an Arrow string array, and `args` as ``(id, JSON object text)``.

        The thread's thread_event_columns stream is written from the same columns, so the thread
        takes no further events.
        """
        pid = _check_id(pid, "pid", self.path)
        tid = _check_id(tid, "tid", self.path)
        self._check_not_whole(pid, tid)
        self._registry.thread(pid, tid)
        count = len(ids)
        if not count:
            return
        complete = (durations != NULL).astype(np.int8)
        ends = np.where(complete == 1, timestamps + durations, timestamps)
        self._last = max(self._last, int(ends.max()))
        # pid and tid (checked integers) as literals: seven values bound a row instead of nine
        row = f"({pid}, {tid}, ?, ?, ?, ?, ?, ?, ?)"
        step = 1 << 16
        for at in range(0, count, step):
            part = slice(at, at + step)
            values = np.empty((len(ids[part]), 7), dtype=object)  # Python ints, str and None
            values[:, 0] = ids[part]
            values[:, 1] = parents[part]
            values[parents[part] == NULL, 1] = None
            values[:, 2] = labels.slice(at, len(values)).to_numpy(zero_copy_only=False)
            values[:, 3] = channels[part]
            values[:, 4] = timestamps[part]
            values[:, 5] = durations[part]
            values[complete[part] == 0, 5] = None
            values[:, 6] = complete[part]
            self.insert_flat("events", _EVENT_COLUMNS, values.ravel().tolist(), row)
        self.insert_flat("event_args", ("event", "args"), list(itertools.chain.from_iterable(args)))
        stream = thread_columns_stream(ids, parents, labels, channels, timestamps, durations, complete)
        self.insert("thread_event_columns", ("pid", "tid", "num_events", "data"), [(pid, tid, count, stream)])
        self._whole.add((pid, tid))

    def insert_small_threads(
        self,
        pids: np.ndarray,
        tids: np.ndarray,
        ids: np.ndarray,
        parents: np.ndarray,
        labels: list,
        channels: np.ndarray,
        timestamps: np.ndarray,
        durations: np.ndarray,
        args: Iterable[tuple[int, str]] = (),
    ) -> None:
        """Insert all the events of many small threads at once, as `insert_thread_columns` does for
        one (the columns of every thread, with each event's pid and tid), but without their
        thread_event_columns streams: a reader loads such a thread from table events. For converters
        of traces with many threads of few events each, where a stream per thread costs more than it saves."""
        count = len(ids)
        if not count:
            return
        whole = self._whole
        register = self._registry.thread
        for key in dict.fromkeys(zip(pids.tolist(), tids.tolist())):  # int64 values: ids in range
            if key in whole:
                self._check_not_whole(*key)
            register(*key)
            whole.add(key)
        complete = (durations != NULL).astype(np.int8)
        ends = np.where(complete == 1, timestamps + durations, timestamps)
        self._last = max(self._last, int(ends.max()))
        values = np.empty((count, 9), dtype=object)
        values[:, 0] = pids
        values[:, 1] = tids
        values[:, 2] = ids
        values[:, 3] = parents
        values[parents == NULL, 3] = None
        values[:, 4] = labels
        values[:, 5] = channels
        values[:, 6] = timestamps
        values[:, 7] = durations
        values[complete == 0, 7] = None
        values[:, 8] = complete
        self.insert_flat("events", _EVENT_COLUMNS, values.ravel().tolist())
        self.insert_flat("event_args", ("event", "args"), list(itertools.chain.from_iterable(args)))

    def _check_not_whole(self, pid: int, tid: int) -> None:
        if (pid, tid) in self._whole:
            raise InvalidInputError(f"{self.path!r}: the events of thread {pid}/{tid} were already written whole")

    # -- processes, threads, channels ----------------------------------------------------

    def add_process(self, pid: int, name: str = "", sort_index: int | None = None) -> None:
        """Name a process (processes of events are added without a name otherwise)."""
        pid = _check_id(pid, "pid", self.path)
        self._registry.process(
            pid, str(name), None if sort_index is None else _check_id(sort_index, "sort_index", self.path)
        )

    def set_process_labels(self, pid: int, labels: str) -> None:
        """Label a process (Chrome trace process_labels, e.g. "GPU 0")."""
        pid = _check_id(pid, "pid", self.path)
        self._registry.process(pid)
        self._labels[pid] = str(labels)

    def add_flows(self, rows: Iterable[Sequence[Any]]) -> None:
        """Add flows, each ``(flow_id, category, name, source event id or None, target event id or None,
        source_pid, source_tid, source_timestamp, target_pid, target_tid, target_timestamp)``; row ids
        follow in the order given."""
        numbered = [(self._flows + offset, *row) for offset, row in enumerate(rows)]
        self.insert("flows", _FLOW_COLUMNS, numbered)
        self._flows += len(numbered)

    def add_thread(self, pid: int, tid: int, name: str = "", sort_index: int | None = None) -> None:
        """Name a thread (threads of events are added without a name otherwise)."""
        pid = _check_id(pid, "pid", self.path)
        tid = _check_id(tid, "tid", self.path)
        self._registry.thread(
            pid, tid, str(name), None if sort_index is None else _check_id(sort_index, "sort_index", self.path)
        )

    def channel(self, name: str) -> int:
        """The id of a channel, added on first use."""
        if not isinstance(name, str):
            raise InvalidInputError(f"{self.path!r}: a channel name must be a string, got {name!r}")
        return self._registry.channel(name)

    # -- events ------------------------------------------------------------------------

    def add_event(
        self,
        pid: int,
        tid: int,
        label: str,
        timestamp: int,
        duration: int | None = None,
        *,
        channel: str = "",
        parent: int | None = None,
        complete: bool | None = None,
        args: Mapping[str, Any] | str | None = None,
    ) -> int:
        """Add one event and return its id.

        `duration` None means the event never ended (complete False); `complete` False with a
        duration means it was still open when the trace stopped, after `duration`. `parent` is
        the id of an event already added on the same thread, or None.
        """
        ids = self.add_events(
            pid,
            tid,
            [label],
            [timestamp],
            [duration],
            channels=channel,
            complete=None if complete is None else [complete],
            parents=[parent],
            args=None if args is None else [args],
        )
        return int(ids[0])

    def add_events(
        self,
        pid: int,
        tid: int,
        labels: Sequence[str],
        timestamps: Any,
        durations: Any,
        *,
        channels: str | Sequence[str] = "",
        complete: Sequence[bool] | None = None,
        parents: str | Sequence[int | None] | None = "nest",
        args: Sequence[Mapping[str, Any] | str | None] | None = None,
    ) -> np.ndarray:
        """Add many events of one thread; return their ids, in the order given.

        `timestamps` and `durations` are microseconds (numbers; floats are rounded, a None or NaN
        duration means the event never ended). `parents` is ``"nest"`` to infer nesting from the
        times within this batch (pass all of a thread's events in one call), None to make every
        event a root, or one event id (or None) per event.
        """
        where = f"{self.path!r}: thread {pid}/{tid}"
        pid = _check_id(pid, "pid", self.path)
        tid = _check_id(tid, "tid", self.path)
        labels = [label if isinstance(label, str) else _bad_label(label, where) for label in labels]
        n = len(labels)
        start, _ = _times(timestamps, n, "timestamps", where, allow_open=False)
        length, open_ = _times(durations, n, "durations", where, allow_open=True)
        negative = np.flatnonzero(~open_ & (length < 0))
        if negative.size:
            k = int(negative[0])
            raise InvalidInputError(
                f"{where}: event {labels[k]!r} at {start[k]:g} µs ends before it starts (duration {length[k]:g} µs)"
            )
        if start.dtype.kind == "f" or length.dtype.kind == "f":
            # round starts and ends (not durations), so that events that nest still nest
            ends = np.rint(start + length).astype(np.int64)
            start = np.rint(start).astype(np.int64)
            length = ends - start
        end = np.where(open_, _OPEN, start + length)
        if complete is None:
            done = ~open_
        else:
            done = np.asarray(list(complete), dtype=bool)
            if done.size != n:
                raise InvalidInputError(f"{where}: expected {n} complete flags, got {done.size}")
            bad = np.flatnonzero(done & open_)
            if bad.size:
                raise InvalidInputError(
                    f"{where}: event {labels[int(bad[0])]!r} is marked complete but has no duration"
                )
        if isinstance(channels, str):
            channel_ids = np.full(n, self.channel(channels), dtype=np.int64)
        else:
            names = list(channels)
            if len(names) != n:
                raise InvalidInputError(f"{where}: expected {n} channels, got {len(names)}")
            channel_ids = np.array([self.channel(c) for c in names], dtype=np.int64)
        if args is not None:
            args = list(args)
            if len(args) != n:
                raise InvalidInputError(f"{where}: expected {n} args, got {len(args)}")
        self._check_not_whole(pid, tid)
        self._registry.thread(pid, tid)
        first = self.next_event_id

        if isinstance(parents, str):
            if parents != "nest":
                raise InvalidInputError(f"{where}: parents must be 'nest', None or a sequence of ids, got {parents!r}")
            order, parent_pos = nest_events(start, end, labels, where)
            ids = np.empty(n, dtype=np.int64)
            ids[order] = first + np.arange(n)
            parent_id = np.where(parent_pos >= 0, ids[np.maximum(parent_pos, 0)], -1)
        else:
            order = np.arange(n)
            ids = first + order
            if parents is None:
                parent_id = np.full(n, -1, dtype=np.int64)
            else:
                given = list(parents)
                if len(given) != n:
                    raise InvalidInputError(f"{where}: expected {n} parents, got {len(given)}")
                parent_id = np.array(
                    [-1 if p is None else _check_id(p, "parent", where) for p in given], dtype=np.int64
                )
            self._check_parents(where, labels, ids, parent_id, start, end, pid, tid, first)

        rows = []
        args_rows = []
        for k in order.tolist():
            p = int(parent_id[k])
            rows.append(
                (
                    pid,
                    tid,
                    int(ids[k]),
                    None if p < 0 else p,
                    labels[k],
                    int(channel_ids[k]),
                    int(start[k]),
                    None if open_[k] else int(length[k]),
                    int(done[k]),
                )
            )
            if args is not None and args[k] is not None:
                args_rows.append((int(ids[k]), _json_args(args[k], f"{where}: event {labels[k]!r}")))
        self.insert("events", _EVENT_COLUMNS, rows)
        if args_rows:
            self.insert("event_args", ("event", "args"), args_rows)
        self._next_id = first + n
        closed = end[~open_]
        if closed.size:
            self._last = max(self._last, int(closed.max()))
        if start.size:
            self._last = max(self._last, int(start.max()))
        return ids

    def _check_parents(
        self,
        where: str,
        labels: list[str],
        ids: np.ndarray,
        parent_id: np.ndarray,
        start: np.ndarray,
        end: np.ndarray,
        pid: int,
        tid: int,
        first: int,
    ) -> None:
        has = parent_id >= 0
        if not has.any():
            return
        bad = np.flatnonzero(has & (parent_id >= ids))
        if bad.size:
            k = int(bad[0])
            raise InvalidInputError(
                f"{where}: event {labels[k]!r} names parent {int(parent_id[k])}, which is not an event added before it"
            )
        in_batch = parent_id >= first
        new = np.clip(parent_id - first, 0, max(0, len(labels) - 1))
        p_start = np.where(in_batch, start[new], 0)
        p_end = np.where(in_batch, end[new], 0)
        p_here = in_batch.copy()
        earlier = sorted(set(parent_id[has & ~in_batch].tolist()))
        if earlier:
            found = self._earlier_events(pid, tid, earlier)
            for k in np.flatnonzero(has & ~in_batch).tolist():
                event = found.get(int(parent_id[k]))
                if event is not None:
                    p_start[k], p_end[k] = event
                    p_here[k] = True
        p_done = p_end != _OPEN
        checks = (
            (has & ~p_here, "is on another thread"),
            (has & (start < p_start), "starts before it"),
            (has & p_done & (end > p_end), "ends after it"),
        )
        for mask, problem in checks:
            bad = np.flatnonzero(mask)
            if bad.size:
                k = int(bad[0])
                shown_end = "open" if end[k] == _OPEN else int(end[k])
                parent_end = "open" if p_end[k] == _OPEN else int(p_end[k])
                raise InvalidInputError(
                    f"{where}: event {labels[k]!r} [{int(start[k])}, {shown_end}] is not within its parent event "
                    f"{int(parent_id[k])} [{int(p_start[k])}, {parent_end}]: it {problem}"
                )

    def _earlier_events(self, pid: int, tid: int, ids: list[int]) -> dict[int, tuple[int, int]]:
        """Start and end (_OPEN if it never ended) of events added earlier on a thread, by id."""
        found: dict[int, tuple[int, int]] = {}
        for at in range(0, len(ids), 500):
            part = ids[at : at + 500]
            marks = ", ".join("?" * len(part))
            for event, start, duration in self.execute(
                f"SELECT id, timestamp, duration FROM events WHERE pid = ? AND tid = ? AND id IN ({marks})",
                (pid, tid, *part),
            ):
                found[event] = (start, _OPEN if duration is None else start + duration)
        return found

    def add_counter_samples(self, pid: int, name: str, timestamps: Any, values: Any, series: str = "") -> None:
        """Add samples of a counter (Chrome trace "C" events, libpvti graphs) of a process."""
        pid = _check_id(pid, "pid", self.path)
        where = f"{self.path!r}: counter {name!r}"
        times, _ = _times(timestamps, len(timestamps), "timestamps", where, allow_open=False)
        numbers = np.asarray(values, dtype=np.float64)
        if numbers.shape != times.shape:
            raise InvalidInputError(f"{where}: {times.size} timestamps but {numbers.size} values")
        if not np.isfinite(numbers).all():
            raise InvalidInputError(f"{where}: values must be finite numbers")
        self._registry.process(pid)
        self.insert(
            "counter_samples",
            ("pid", "name", "series", "timestamp", "value"),
            zip([pid] * times.size, [name] * times.size, [series] * times.size, times.tolist(), numbers.tolist()),
        )

    # -- finishing -----------------------------------------------------------------------

    def _finish(self) -> None:
        registry = self._registry
        self.insert(
            "processes",
            ("pid", "name", "sort_index", "labels"),
            [(pid, name, index, self._labels.get(pid)) for pid, (name, index) in sorted(registry.processes.items())],
        )
        self.insert(
            "threads",
            ("pid", "tid", "name", "sort_index"),
            [(pid, tid, name, index) for (pid, tid), (name, index, _) in sorted(registry.threads.items())],
        )
        self.insert("channels", ("id", "name"), [(i, name) for name, i in registry.channels.items()])
        self.insert(  # a thread at a time: memory holds one thread's columns, not the file's
            "thread_event_columns",
            ("pid", "tid", "num_events", "data"),
            thread_columns_rows(self.execute, sorted(set(registry.threads) - self._whole)),
        )
        self.set_metadata(last_timestamp=self._last)


def _bad_label(label: Any, where: str) -> str:
    raise InvalidInputError(f"{where}: event labels must be strings, got {label!r}")


class TraceAppender:
    """A trace file written in place, one committed batch at a time (the tracing API's back end).

    The file is created complete but empty (under a temporary name, then renamed), so a trace
    file exists from the start; its indexes are built by `close`. Each `commit` is one SQLite transaction: a process that dies
    leaves every committed batch readable, its open events with complete = 0 and metadata
    state ``recording``. `close` ends the remaining open events (complete stays 0) and sets the
    state to ``complete``.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, producer: str = "pva", producer_version: str = __version__
    ) -> None:
        self.path = os.fspath(path)
        try:
            out = AtomicOutput(self.path)
        except (FileNotFoundError, PermissionError) as exc:
            raise InvalidInputError(f"cannot write {self.path!r}: {exc}", self.path) from None
        try:
            conn = sqlite3.connect(out.path, isolation_level=None)
            try:
                conn.execute("PRAGMA journal_mode=DELETE")
                conn.execute(f"PRAGMA application_id={TRACE_APPLICATION_ID}")
                conn.execute(f"PRAGMA user_version={user_version(*TRACE_FORMAT)}")
                tables, self._index_ddl = split_ddl(trace_schema().ddl)
                conn.executescript(tables)
                created = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
                conn.executemany(
                    "INSERT INTO metadata (key, value) VALUES (?, ?)",
                    [
                        ("format_version", f"{TRACE_FORMAT[0]}.{TRACE_FORMAT[1]}"),
                        ("producer", producer),
                        ("producer_version", producer_version),
                        ("created", created),
                        ("clock", "steady"),
                        ("state", STATE_RECORDING),
                        ("last_timestamp", "0"),
                    ],
                )
            finally:
                conn.close()
            out.commit()
        except BaseException:
            out.abort()
            raise
        self._conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=60)
        self._conn.execute("PRAGMA journal_mode=DELETE")
        self._conn.execute("PRAGMA synchronous=OFF")
        self._closed = False

    def commit(
        self,
        *,
        processes: Iterable[tuple[int, str]] = (),
        threads: Iterable[tuple[int, int, str]] = (),
        channels: Iterable[tuple[int, str]] = (),
        events: Iterable[tuple] = (),
        ended: Iterable[tuple[int, int, int, int]] = (),
        args: Iterable[tuple[int, str]] = (),
        last_timestamp: int | None = None,
    ) -> None:
        """Write one batch in one transaction.

        `events` are rows of ``(pid, tid, id, parent, label, channel, timestamp, duration,
        complete)``; `ended` are ``(duration, pid, tid, id)`` of events written open earlier that
        have since ended.
        """
        if self._closed:
            raise InvalidInputError(f"{self.path!r}: the trace is closed")
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany("INSERT OR REPLACE INTO processes (pid, name) VALUES (?, ?)", processes)
            conn.executemany("INSERT OR REPLACE INTO threads (pid, tid, name) VALUES (?, ?, ?)", threads)
            conn.executemany("INSERT INTO channels (id, name) VALUES (?, ?)", channels)
            conn.executemany(
                "INSERT INTO events (pid, tid, id, parent, label, channel, timestamp, duration, complete) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                events,
            )
            conn.executemany("UPDATE events SET duration = ?, complete = 1 WHERE pid = ? AND tid = ? AND id = ?", ended)
            conn.executemany("INSERT INTO event_args (event, args) VALUES (?, ?)", args)
            if last_timestamp is not None:
                conn.execute("UPDATE metadata SET value = ? WHERE key = 'last_timestamp'", (str(int(last_timestamp)),))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def close(self, *, still_open: Iterable[tuple[int, int, int, int]] = (), last_timestamp: int | None = None) -> None:
        """Finish the file: `still_open` are ``(duration, pid, tid, id)`` of events written open
        that never ended (they keep complete = 0); the state becomes ``complete``."""
        if self._closed:
            return
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany("UPDATE events SET duration = ? WHERE pid = ? AND tid = ? AND id = ?", still_open)
            if last_timestamp is not None:
                conn.execute("UPDATE metadata SET value = ? WHERE key = 'last_timestamp'", (str(int(last_timestamp)),))
            conn.execute("UPDATE metadata SET value = ? WHERE key = 'state'", (STATE_COMPLETE,))
            threads = conn.execute("SELECT pid, tid FROM threads ORDER BY pid, tid").fetchall()
            conn.executemany(
                "INSERT OR REPLACE INTO thread_event_columns (pid, tid, num_events, data) VALUES (?, ?, ?, ?)",
                thread_columns_rows(conn.execute, threads),
            )
            for statement in self._index_ddl.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("PRAGMA analysis_limit=1000")
        conn.execute("ANALYZE")
        conn.close()
        self._closed = True
        _fsync_path(self.path)

    def abandon(self) -> None:
        """Stop writing without finishing (as if the process had died); for tests and forks."""
        if not self._closed:
            self._conn.close()
            self._closed = True
