"""The trace file reader: processes, threads and, per thread, its events as checked columns."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import pathlib
import shutil
import sqlite3
import struct
import tempfile
import weakref
from typing import TYPE_CHECKING

from ..errors import CorruptReportError, InconsistentReportError, PvaError
from ..lazy_import import lazy_module
from ..pop.arrow_chunks import check_ipc_stream
from ..pop.query.user_sql import UserSql
from ..pop.reader import MMAP_BYTES
from ..pop.schema import PROFILE_APPLICATION_ID, TRACE_APPLICATION_ID, TRACE_FORMAT, Schema, trace_schema
from ..pop.sqlite_reader import SqliteFile
from .writer import NULL as _NULL
from .writer import STATE_COMPLETE, THREAD_EVENTS_SQL, thread_columns_schema

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa
else:
    np = lazy_module("numpy")
    pa = lazy_module("pyarrow")


def _text_damage(method):
    """Report text that is not UTF-8 (a damaged page) as CorruptReportError, as SQLite errors are."""

    @functools.wraps(method)
    def guarded(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except UnicodeDecodeError as exc:
            raise CorruptReportError(
                f"{self.path!r}: the trace file is damaged (text that is not UTF-8: {exc.reason})", self.path
            ) from None

    return guarded


class ThreadEvents:
    """The events of one thread, ordered by start time (ties by id).

    `ids`, `channels`, `timestamps`, `durations` (those of events that never ended run to the end
    of the trace) and `complete` are numpy arrays; `labels` is a list. The tree is in lists: the
    children of event i are ``kids[offsets[i]:offsets[i + 1]]``, in start order, and `roots` lists
    the events without a parent, in order.
    """

    __slots__ = (
        "pid",
        "tid",
        "ids",
        "labels",
        "channels",
        "channel_names",
        "timestamps",
        "durations",
        "complete",
        "roots",
        "kids",
        "offsets",
        "reader",
    )

    pid: int
    tid: int
    ids: np.ndarray
    labels: list[str]
    channels: np.ndarray
    channel_names: dict[int, str]
    timestamps: np.ndarray
    durations: np.ndarray
    complete: np.ndarray
    roots: list[int]
    kids: list[int]
    offsets: list[int]
    reader: TraceReader

    def __len__(self) -> int:
        return len(self.labels)


#: What format 1.1 added (table flows, column processes.labels): read where the file has it.
_SINCE_1_1 = {"flows": None, "processes": ("labels",)}


def _schema_1_0() -> Schema:
    """The tables and columns every trace file of major version 1 has (those of format 1.0)."""
    schema = trace_schema()
    tables = {}
    for name, spec in schema.tables.items():
        if name in _SINCE_1_1 and _SINCE_1_1[name] is None:
            continue
        later = _SINCE_1_1.get(name) or ()
        tables[name] = dataclasses.replace(spec, columns=tuple(c for c in spec.columns if c.name not in later))
    return dataclasses.replace(schema, tables=tables)


class TraceReader(UserSql):
    """A trace file opened read-only.

    A trace left with a hot journal (its recorder died in the middle of a commit) is read from a
    rolled-back copy in a temporary directory; the file itself is never modified.
    """

    @_text_damage
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._copy_dir: str | None = None
        source = self.path
        if _has_hot_journal(self.path):
            self._copy_dir = tempfile.mkdtemp(prefix="pva-trace-")
            weakref.finalize(self, shutil.rmtree, self._copy_dir, True)
            source = _rolled_back_copy(self.path, self._copy_dir)
        try:
            self.file = SqliteFile(
                source,
                what="trace file",
                application_id=TRACE_APPLICATION_ID,
                supported_major=TRACE_FORMAT[0],
                schema=_schema_1_0(),
                other_kinds={PROFILE_APPLICATION_ID: "a pva report (profile.pop); open it with pva.openReport"},
            )
        except PvaError as exc:
            if source == self.path:
                raise
            raise type(exc)(str(exc).replace(repr(source), repr(self.path)), self.path) from None
        self.file.path = self.path
        self.file.conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")  # thread columns are large BLOBs
        self.metadata = self.file.metadata
        self.version = self.file.version
        self.is_complete = self.metadata.get("state", STATE_COMPLETE) == STATE_COMPLETE
        self.channel_names = self._channels()
        self._end_of_trace: int | None = None
        self.has_flows = bool(self.file.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'flows'"))
        self.has_labels = any(row[1] == "labels" for row in self.file.query("PRAGMA table_info(processes)"))

    def close(self) -> None:
        """Close the file (and remove a rolled-back copy)."""
        self.file.close()
        if self._copy_dir is not None:
            shutil.rmtree(self._copy_dir, ignore_errors=True)

    @_text_damage
    def query(self, sql: str, params=()) -> list[tuple]:
        """All rows of a read-only query."""
        return self.file.query(sql, params)

    def _query_row(self, sql: str, params=()) -> tuple:
        """The one row of a query that always returns one (an aggregate without GROUP BY)."""
        row = self.file.query_one(sql, params)
        assert row is not None, f"expected a row from {sql!r}"
        return row

    # -- processes and threads -------------------------------------------------------------

    @_text_damage
    def processes(self) -> list[tuple[int, str, int | None]]:
        """``(pid, name, sort_index)`` of every process, by pid."""
        rows = self.query("SELECT pid, name, sort_index FROM processes ORDER BY pid")
        for pid, _name, _index in rows:
            if not isinstance(pid, int):
                raise InconsistentReportError(f"{self.path!r}: process ids must be integers, found {pid!r}", self.path)
        return rows

    @_text_damage
    def process_labels(self) -> dict[int, str]:
        """``{pid: labels}`` of the processes that have labels (Chrome trace process_labels)."""
        if not self.has_labels:
            return {}
        return {
            pid: str(labels) for pid, labels in self.query("SELECT pid, labels FROM processes WHERE labels IS NOT NULL")
        }

    @_text_damage
    def arg_values(self, pid: int, tid: int, key: str) -> dict[int, object]:
        """Event id -> the value of `key` in its args, for the thread's events whose args have it."""
        path = "$." + json.dumps(str(key))
        rows = self.query(
            "SELECT e.id, json_extract(a.args, ?) FROM events e JOIN event_args a ON a.event = e.id "
            "WHERE e.pid = ? AND e.tid = ? AND json_type(a.args, ?) IS NOT NULL",
            (path, pid, tid, path),
        )
        return dict(rows)

    @_text_damage
    def flows(self) -> list[tuple]:
        """Every flow, by id: ``(id, flow_id, category, name, source, target, source_pid, source_tid,
        source_timestamp, target_pid, target_tid, target_timestamp)``; none in a format 1.0 file."""
        if not self.has_flows:
            return []
        return self.query(
            "SELECT id, flow_id, category, name, source, target, source_pid, source_tid, source_timestamp, "
            "target_pid, target_tid, target_timestamp FROM flows ORDER BY id"
        )

    def event_count_and_start(self) -> tuple[int, int | None]:
        """The number of events and the earliest start (None without events)."""
        count, first = self._query_row("SELECT count(*), min(timestamp) FROM events")
        return int(count), None if first is None else int(first)

    def flow_count(self) -> int:
        """The number of flows."""
        if not self.has_flows:
            return 0
        return int(self._query_row("SELECT count(*) FROM flows")[0])

    @_text_damage
    def threads(self) -> dict[int, list[tuple[int, str, int | None]]]:
        """``{pid: [(tid, name, sort_index), ...]}``, threads by tid; every pid is a known process."""
        known = {row[0] for row in self.processes()}
        found: dict[int, list] = {pid: [] for pid in known}
        for pid, tid, name, index in self.query("SELECT pid, tid, name, sort_index FROM threads ORDER BY pid, tid"):
            if pid not in known:
                raise InconsistentReportError(
                    f"{self.path!r}: thread {tid} belongs to process {pid}, which is not in table processes", self.path
                )
            if not isinstance(tid, int):
                raise InconsistentReportError(f"{self.path!r}: thread ids must be integers, found {tid!r}", self.path)
            found[pid].append((tid, name, index))
        return found

    @_text_damage
    def _channels(self) -> dict[int, str]:
        return {int(i): str(name) for i, name in self.query("SELECT id, name FROM channels")}

    @_text_damage
    def end_of_trace(self) -> int:
        """The latest time the trace knows of: where events that never ended stop."""
        if self._end_of_trace is None:
            (latest,) = self.file.query_one("SELECT max(timestamp + coalesce(duration, 0)) FROM events") or (None,)
            try:
                recorded = int(self.metadata.get("last_timestamp", "0") or 0)
            except ValueError:
                recorded = 0
            self._end_of_trace = max(int(latest or 0), recorded)
        return self._end_of_trace

    # -- events ----------------------------------------------------------------------------

    @_text_damage
    def thread_events(self, pid: int, tid: int) -> ThreadEvents:
        """The events of one thread, checked: ends not before starts, children within parents."""
        where = f"{self.path!r}: thread {tid} of process {pid}"
        columns = self._stored_columns(pid, tid, where)
        if columns is None:
            columns = self._sql_columns(pid, tid, where)
        ids, parent_ids, labels, channels, stamps, lengths, done = columns
        data = ThreadEvents()
        data.pid = pid
        data.tid = tid
        data.channel_names = self.channel_names
        data.reader = self
        n = len(labels)
        if n == 0:
            data.ids = data.channels = data.timestamps = data.durations = np.zeros(0, dtype=np.int64)
            data.complete = np.zeros(0, dtype=bool)
            data.labels = []
            data.roots = []
            data.kids = []
            data.offsets = [0]
            return data
        if n > 1 and not bool(np.all(ids[1:] > ids[:-1])):
            raise InconsistentReportError(f"{where}: event ids are not unique", self.path)

        def name(k: int) -> str:
            return f"event {int(ids[k])} {labels[k]!r}"

        unknown = ~np.isin(channels, np.fromiter(self.channel_names, dtype=np.int64, count=len(self.channel_names)))
        if unknown.any():
            k = int(np.flatnonzero(unknown)[0])
            raise InconsistentReportError(
                f"{where}: {name(k)} is on channel {int(channels[k])}, which is not in table channels", self.path
            )
        is_open = lengths == _NULL
        bad = np.flatnonzero(done & is_open)
        if bad.size:
            k = int(bad[0])
            raise InconsistentReportError(f"{where}: {name(k)} is marked complete but has no duration", self.path)
        bad = np.flatnonzero(~is_open & (lengths < 0))
        if bad.size:
            k = int(bad[0])
            raise InconsistentReportError(
                f"{where}: {name(k)} ends before it starts (start {int(stamps[k])} µs, duration {int(lengths[k])} µs)",
                self.path,
            )
        end_of_trace = self.end_of_trace() if is_open.any() else 0
        lengths = np.where(is_open, np.maximum(end_of_trace - stamps, 0), lengths)
        ends = stamps + lengths

        # parents: ids -> positions in id order; checked before reordering by time
        has_parent = parent_ids != _NULL
        index = np.searchsorted(ids, np.where(has_parent, parent_ids, 0))
        index = np.minimum(index, n - 1)
        found = has_parent & (ids[index] == parent_ids)
        bad = np.flatnonzero(has_parent & ~found)
        if bad.size:
            k = int(bad[0])
            raise InconsistentReportError(
                f"{where}: {name(k)} has parent {int(parent_ids[k])}, which is not an event of this thread", self.path
            )
        bad = np.flatnonzero(has_parent & (parent_ids >= ids))
        if bad.size:
            k = int(bad[0])
            raise InconsistentReportError(
                f"{where}: {name(k)} has parent {int(parent_ids[k])}, which does not begin before it", self.path
            )
        parent_index = np.where(has_parent, index, -1)
        p = np.maximum(parent_index, 0)
        outside_start = has_parent & (stamps < stamps[p])
        outside_end = has_parent & done[p] & (is_open | (ends > ends[p]))
        bad = np.flatnonzero(outside_start | outside_end)
        if bad.size:
            k = int(bad[0])
            q = int(p[k])
            child_end = "still open" if is_open[k] else f"{int(ends[k])}"
            raise InconsistentReportError(
                f"{where}: {name(k)} [{int(stamps[k])}, {child_end}] does not lie within its parent {name(q)} "
                f"[{int(stamps[q])}, {int(ends[q])}] (microseconds); the trace is mis-nested",
                self.path,
            )

        # order by start time, ties by id
        if n > 1 and not bool(np.all(stamps[1:] >= stamps[:-1])):
            order = np.lexsort((ids, stamps))
            inverse = np.empty(n, dtype=np.int64)
            inverse[order] = np.arange(n)
            ids, stamps, lengths, done, channels = (
                ids[order],
                stamps[order],
                lengths[order],
                done[order],
                channels[order],
            )
            labels = [labels[k] for k in order.tolist()]
            parent_index = parent_index[order]
            parent_index = np.where(parent_index >= 0, inverse[np.maximum(parent_index, 0)], -1)
        child = np.flatnonzero(parent_index >= 0)
        kids = child[np.argsort(parent_index[child], kind="stable")]
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(parent_index[child], minlength=n), out=offsets[1:])

        data.ids = ids
        data.labels = labels
        data.channels = channels
        data.timestamps = stamps
        data.durations = lengths
        data.complete = done
        data.roots = np.flatnonzero(parent_index < 0).tolist()
        data.kids = kids.tolist()
        data.offsets = offsets.tolist()
        return data

    def _stored_columns(self, pid: int, tid: int, where: str) -> tuple | None:
        """A thread's columns from its thread_event_columns stream, or None if it has none that agrees."""
        row = self.file.query_one(
            "SELECT num_events, data FROM thread_event_columns WHERE pid = ? AND tid = ?", (pid, tid)
        )
        if row is None:
            return None
        (count,) = self._query_row("SELECT count(*) FROM events WHERE pid = ? AND tid = ?", (pid, tid))
        num_events, data = row
        if num_events != count:
            return None  # stale: table events is authoritative
        if not isinstance(data, bytes):
            raise CorruptReportError(f"{where}: thread_event_columns.data must be a BLOB", self.path)
        try:
            check_ipc_stream(
                pa.py_buffer(data), max_rows=count, where=f"{where}: thread_event_columns.data", path=self.path
            )
            stream = pa.ipc.open_stream(pa.py_buffer(data))
            table = pa.Table.from_batches(list(stream), schema=stream.schema)
            table.validate(full=True)
        except CorruptReportError:
            raise
        except (pa.ArrowException, OSError, ValueError, struct.error) as exc:
            raise CorruptReportError(
                f"{where}: thread_event_columns.data is not a readable Arrow IPC stream ({exc})", self.path
            ) from None
        if not table.schema.equals(thread_columns_schema()) or table.num_rows != count:
            raise CorruptReportError(
                f"{where}: thread_event_columns.data: expected {count} rows of {thread_columns_schema()}, found "
                f"{table.num_rows} rows of {table.schema}",
                self.path,
            )
        table = table.combine_chunks()
        label_column = table.column("label").chunk(0) if table.num_rows else None
        if label_column is None:
            labels: list = []
        else:
            dictionary = np.array(label_column.dictionary.to_pylist() + [""], dtype=object)
            labels = dictionary[label_column.indices.to_numpy(zero_copy_only=False)].tolist()
        numbers = [
            table.column(name).to_numpy() for name in ("id", "parent", "channel", "timestamp", "duration", "complete")
        ]
        ids, parents, channels, stamps, lengths, complete = numbers
        return ids, parents, labels, channels, stamps, lengths, complete != 0

    def _sql_columns(self, pid: int, tid: int, where: str) -> tuple:
        """A thread's columns read from table events."""
        row = self._query_row(THREAD_EVENTS_SQL, (pid, tid))
        count = row[0]
        try:
            numbers = [np.fromstring(text or "", sep=",", dtype=np.int64) for text in row[1:7]]
            labels = json.loads(row[7]) if count else []
        except ValueError:
            raise InconsistentReportError(
                f"{where}: events must hold integers in id, parent, channel, timestamp, duration and complete",
                self.path,
            ) from None
        if any(a.size != count for a in numbers) or len(labels) != count:
            raise InconsistentReportError(f"{where}: events must hold integers and text labels", self.path)
        if any(not isinstance(label, str) for label in labels):
            bad = next(label for label in labels if not isinstance(label, str))
            raise InconsistentReportError(f"{where}: an event has label {bad!r}, not text", self.path)
        ids, parents, channels, stamps, lengths, complete = numbers
        return ids, parents, labels, channels, stamps, lengths, complete != 0

    @_text_damage
    def event_args(self, event_id: int) -> dict:
        """The arguments of an event as a dict (empty if it has none)."""
        row = self.file.query_one("SELECT args FROM event_args WHERE event = ?", (event_id,))
        if row is None:
            return {}
        try:
            value = json.loads(row[0])
        except (TypeError, ValueError) as exc:
            raise InconsistentReportError(
                f"{self.path!r}: event {event_id} has args that are not JSON ({exc})", self.path
            ) from None
        if not isinstance(value, dict):
            raise InconsistentReportError(
                f"{self.path!r}: event {event_id} has args that are not a JSON object", self.path
            )
        return value

    @_text_damage
    def counter_samples(self, pid: int) -> dict[tuple[str, str], tuple[list[int], list[float]]]:
        """``{(name, series): (timestamps, values)}`` of a process's counters, in time order."""
        found: dict[tuple[str, str], tuple[list[int], list[float]]] = {}
        for name, series, stamp, value in self.query(
            "SELECT name, series, timestamp, value FROM counter_samples WHERE pid = ? ORDER BY name, series, timestamp",
            (pid,),
        ):
            times, values = found.setdefault((name, series), ([], []))
            times.append(stamp)
            values.append(value)
        return found


def _has_hot_journal(path: str) -> bool:
    journal = path + "-journal"
    try:
        if os.path.getsize(journal) == 0:
            return False
    except OSError:
        return False
    uri = pathlib.Path(os.path.abspath(path)).as_uri() + "?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True)
    except sqlite3.Error:
        return False
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.OperationalError as exc:
        return getattr(exc, "sqlite_errorname", "") == "SQLITE_READONLY_ROLLBACK"
    except sqlite3.Error:
        return False
    finally:
        conn.close()
    return False


def _rolled_back_copy(path: str, directory: str) -> str:
    """Copy a trace and its hot journal into `directory` and let SQLite roll the copy back."""
    copy = os.path.join(directory, os.path.basename(path))
    try:
        shutil.copyfile(path, copy)
        shutil.copyfile(path + "-journal", copy + "-journal")
        conn = sqlite3.connect(copy)
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        finally:
            conn.close()
    except (OSError, sqlite3.Error) as exc:
        raise CorruptReportError(
            f"{path!r}: its writer stopped in the middle of a commit and the trace cannot be recovered ({exc})", path
        ) from None
    return copy
