"""Chrome trace event JSON in (chrome://tracing, the Perfetto UI, PyTorch profiler traces): a
Chrome trace file becomes a pva trace file, in bounded memory.

The array form ``[{...}, ...]`` (whose closing bracket Chrome allows to be missing) and the
object form ``{"traceEvents": [...], ...}``; phases X (complete), B/E (begin/end), i/I (instant),
C (counter) and M (process/thread names and sort order); timestamps and durations in
microseconds. Each event's ``args`` are kept as JSON (for example SigmaStar's per-layer
``total_cycle`` and cycle percentages), its category becomes the event's channel, and keys
Chrome defines but the trace file has no column for are kept under ``args["_chrome"]``. Events
of one thread that overlap without nesting are moved to extra threads named "... (overlap N)",
because trace file events nest. Other phases (async, flow, samples, objects) are counted and
skipped.

Events are checked as they are read and staged, a batch at a time, in a temporary SQLite file
beside the output; each thread's events are then read back in start order (longest first), given
their track, id and parent in two passes that keep only the open events of each track, and
written a batch at a time. Memory stays within a fixed bound plus one batch, whatever the size
of the trace.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sqlite3
from typing import Any

import orjson

from .atomic import AtomicOutput
from .chrome_trace_json import NotFastError, read_trace_items, read_trace_items_fast
from .detect import check_regular_file
from .errors import InvalidInputError
from .jsonplain import plain
from .legacy.jsonstream import open_binary
from .legacy.tree import describe, location
from .progress import Progress

#: Phases imported; any other phase is counted and skipped.
PHASES = frozenset("XBEiICM")
#: Largest |timestamp| accepted, in microseconds (about 146,000 years).
MAX_TIME = 1 << 62
#: Events (and counter samples) staged, read back and written per batch.
BATCH = 50_000
#: Keys of an event that map to trace file columns.
_CORE_KEYS = frozenset({"name", "cat", "ph", "ts", "dur", "pid", "tid", "args"})
#: Ids given to processes and threads named by strings start here.
_SYNTHETIC_ID = 1 << 40
_ID_LIMIT = 1 << 62
#: The end of an event that never ended, in lane assignment.
_INFINITY = 1 << 63
#: SQLite page cache of the staging file, in KiB (negative: SQLite's unit for a size).
_STAGING_CACHE_KIB = 64 << 10

_STAGING_DDL = """
CREATE TABLE stage (
  seq INTEGER PRIMARY KEY,  -- order of the event in the file
  thread INTEGER NOT NULL,  -- index of its (pid, tid)
  start INTEGER NOT NULL,  -- microseconds
  neg_end INTEGER,  -- minus its end, so that ascending order is longest first; NULL while open
  label TEXT NOT NULL,
  channel INTEGER NOT NULL,  -- index in the channels, in order of first use
  args TEXT  -- JSON object, or NULL
);
CREATE TABLE stage_counters (key INTEGER NOT NULL, timestamp INTEGER NOT NULL, value REAL NOT NULL);
"""


@dataclasses.dataclass
class ImportStats:
    """What an import read and wrote."""

    events: int = 0
    threads: int = 0
    counter_samples: int = 0
    skipped: dict[str, int] = dataclasses.field(default_factory=dict)
    truncated: bool = False
    warnings: list[str] = dataclasses.field(default_factory=list)


class _Thread:
    """A (pid, tid) seen: its index in the staging file and its B events waiting for their E."""

    __slots__ = ("index", "count", "stack")

    def __init__(self, index: int) -> None:
        self.index = index
        self.count = 0  # events staged
        self.stack: list[tuple[int, int]] = []  # (seq, start) of B events not ended yet


class _Importer:
    """Checks events one at a time and stages them; `write` writes the trace file from the staging file."""

    def __init__(self, name: str, output: str) -> None:
        self.name = name
        self.threads: dict[tuple[int, int], _Thread] = {}
        self.process_names: dict[int, str] = {}
        self.process_order: dict[int, int] = {}
        self.thread_names: dict[tuple[int, int], str] = {}
        self.thread_order: dict[tuple[int, int], int] = {}
        self.channels: dict[str, int] = {}
        self.counter_keys: dict[tuple[int, str, str], int] = {}
        self.string_pids: dict[str, int] = {}
        self.string_tids: dict[tuple[int, str], int] = {}
        self.stats = ImportStats()
        self.unmatched_ends = 0
        self._batch: list[list] = []
        self._batch_first = 0  # seq of _batch[0]
        self._samples: list[tuple[int, int, float]] = []
        self._staging = AtomicOutput(output)
        try:
            self._db = sqlite3.connect(self._staging.path, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=OFF")
            self._db.execute("PRAGMA synchronous=OFF")
            self._db.execute(f"PRAGMA cache_size=-{_STAGING_CACHE_KIB}")
            self._db.executescript(_STAGING_DDL)
            self._db.execute("BEGIN")
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Remove the staging file."""
        db: sqlite3.Connection | None = getattr(self, "_db", None)
        if db is not None:
            db.close()
            del self._db
        self._staging.abort()

    def fail(self, parts: list, message: str) -> InvalidInputError:
        return InvalidInputError(f"{self.name!r}: {location(parts)}: {message}", self.name)

    def _pid(self, value: Any, parts: list) -> int:
        if value is None:
            return 0
        if isinstance(value, str):
            found = self.string_pids.get(value)
            if found is None:
                found = self.string_pids[value] = _SYNTHETIC_ID + len(self.string_pids)
                self.process_names.setdefault(found, value)
            return found
        return self._int(value, parts, "a process id (integer or string)")

    def _tid(self, pid: int, value: Any, parts: list) -> int:
        if value is None:
            return 0
        if isinstance(value, str):
            key = (pid, value)
            found = self.string_tids.get(key)
            if found is None:
                found = self.string_tids[key] = _SYNTHETIC_ID + len(self.string_tids)
                self.thread_names.setdefault((pid, found), value)
            return found
        return self._int(value, parts, "a thread id (integer or string)")

    def _int(self, value: Any, parts: list, what: str) -> int:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(parts, f"expected {what}, found {describe(value)}")
        if isinstance(value, float) and not value.is_integer():
            raise self.fail(parts, f"expected {what}, found {describe(value)}")
        number = int(value)
        if not -(1 << 62) <= number < (1 << 62):
            raise self.fail(parts, f"expected {what} that fits in 63 bits, found {describe(value)}")
        return number

    def _time(self, value: Any, parts: list, what: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(parts, f"expected {what} in microseconds (a number), found {describe(value)}")
        number = float(value)
        if not math.isfinite(number) or abs(number) >= MAX_TIME:
            raise self.fail(parts, f"expected {what} in microseconds below 2**62, found {describe(value)}")
        return number

    def _string(self, value: Any, parts: list, what: str, default: str = "") -> str:
        if value is None:
            return default
        if not isinstance(value, str):
            raise self.fail(parts, f"expected {what} (a string), found {describe(value)}")
        return value

    def add(self, parts: list, event: Any) -> None:
        """Check one trace event and stage it."""
        if not isinstance(event, dict):
            raise self.fail(parts, f"expected a trace event (an object), found {describe(event)}")
        phase = event.get("ph")
        if not isinstance(phase, str):
            raise self.fail(parts + ["ph"], f'expected the event phase (a string such as "X"), found {describe(phase)}')
        if phase not in PHASES:
            self.stats.skipped[phase] = self.stats.skipped.get(phase, 0) + 1
            return
        pid = event.get("pid")
        if type(pid) is not int or not -_ID_LIMIT <= pid < _ID_LIMIT:
            pid = self._pid(pid, parts + ["pid"])
        tid = event.get("tid")
        if type(tid) is not int or not -_ID_LIMIT <= tid < _ID_LIMIT:
            tid = self._tid(pid, tid, parts + ["tid"])
        label = event.get("name")
        if type(label) is not str:
            label = self._string(label, parts + ["name"], "the event name")
        if phase == "M":
            self._metadata(event, parts, pid, tid, label)
            return
        ts: Any = event.get("ts")
        kind = type(ts)
        if kind is float or kind is int:
            ts = float(ts)
        if not (type(ts) is float and -MAX_TIME < ts < MAX_TIME):
            ts = self._time(event.get("ts"), parts + ["ts"], "the timestamp")
        if phase == "C":
            self._counter(event, parts, pid, label, ts)
            return
        channel = event.get("cat")
        if type(channel) is not str:
            channel = self._string(channel, parts + ["cat"], "the category")
        thread = self.threads.get((pid, tid))
        if thread is None:
            thread = self.threads[(pid, tid)] = _Thread(len(self.threads))
        if phase == "E":
            self._end(event, parts, thread, ts)
            return
        args = event.get("args")
        if (args is not None and type(args) is not dict) or not _CORE_KEYS.issuperset(event):
            args = self._args(event, parts)
        if phase == "i" or phase == "I":
            args = dict(args or {})
            args.setdefault("_chrome", {})["ph"] = phase
        start = round(ts)
        if phase == "X":
            duration = event.get("dur", 0)
            kind = type(duration)
            if kind is float or kind is int:
                duration = float(duration)
            if not (type(duration) is float and 0 <= duration < MAX_TIME):
                duration = self._time(event.get("dur", 0), parts + ["dur"], "the duration")
                if duration < 0:
                    raise self.fail(parts + ["dur"], f"expected a duration >= 0, found {describe(duration)}")
            neg_end: int | None = -round(ts + duration)
        elif phase == "B":
            neg_end = None
            thread.stack.append((self.stats.events, start))
        else:  # instant
            neg_end = -start
        channel_index = self.channels.get(channel)
        if channel_index is None:
            channel_index = self.channels[channel] = len(self.channels)
        self._batch.append(
            [
                self.stats.events,
                thread.index,
                start,
                neg_end,
                label,
                channel_index,
                _json(args, self, parts) if args else None,
            ]
        )
        self.stats.events += 1
        thread.count += 1
        if len(self._batch) >= BATCH:
            self._flush()

    def _end(self, event: dict, parts: list, thread: _Thread, ts: float) -> None:
        """An E event: the end of the thread's innermost B event still open."""
        if not thread.stack:
            self.unmatched_ends += 1
            return
        seq, begin = thread.stack.pop()
        end = round(ts)
        if end < begin:
            raise self.fail(parts + ["ts"], f"the end ({ts} µs) comes before its begin event ({begin} µs)")
        args = self._args(event, parts)
        staged = self._batch[seq - self._batch_first] if seq >= self._batch_first else None
        if staged is not None:
            staged[3] = -end
            if args:
                merged = json.loads(staged[6]) if staged[6] else {}
                merged.update(args)
                staged[6] = _json(merged, self, parts)
            return
        if args:
            (text,) = self._db.execute("SELECT args FROM stage WHERE seq = ?", (seq,)).fetchone()
            merged = json.loads(text) if text else {}
            merged.update(args)
            self._db.execute(
                "UPDATE stage SET neg_end = ?, args = ? WHERE seq = ?", (-end, _json(merged, self, parts), seq)
            )
        else:
            self._db.execute("UPDATE stage SET neg_end = ? WHERE seq = ?", (-end, seq))

    def _args(self, event: dict, parts: list) -> dict | None:
        args = event.get("args")
        if args is not None and not isinstance(args, dict):
            raise self.fail(parts + ["args"], f"expected an object, found {describe(args)}")
        extra = {k: v for k, v in event.items() if k not in _CORE_KEYS}
        if extra:
            args = dict(args or {})
            args["_chrome"] = extra
        return args

    def _flush(self) -> None:
        if self._batch:
            self._db.executemany("INSERT INTO stage VALUES (?, ?, ?, ?, ?, ?, ?)", self._batch)
            self._batch_first += len(self._batch)
            self._batch = []
        if self._samples:
            self._db.executemany("INSERT INTO stage_counters VALUES (?, ?, ?)", self._samples)
            self._samples = []

    def _metadata(self, event: dict, parts: list, pid: int, tid: int, label: str) -> None:
        args = event.get("args")
        if not isinstance(args, dict):
            raise self.fail(parts + ["args"], f"expected an object, found {describe(args)}")
        if label == "process_name":
            self.process_names[pid] = self._string(args.get("name"), parts + ["args", "name"], "a process name")
        elif label == "thread_name":
            self.thread_names[(pid, tid)] = self._string(args.get("name"), parts + ["args", "name"], "a thread name")
        elif label == "process_sort_index":
            self.process_order[pid] = self._int(args.get("sort_index"), parts + ["args", "sort_index"], "a sort index")
        elif label == "thread_sort_index":
            self.thread_order[(pid, tid)] = self._int(
                args.get("sort_index"), parts + ["args", "sort_index"], "a sort index"
            )
        else:
            self.stats.skipped["M:" + label] = self.stats.skipped.get("M:" + label, 0) + 1

    def _counter(self, event: dict, parts: list, pid: int, label: str, ts: float) -> None:
        args = event.get("args")
        if not isinstance(args, dict):
            raise self.fail(parts + ["args"], f"expected an object of counter values, found {describe(args)}")
        for series, value in args.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise self.fail(
                    parts + ["args", series], f"expected a counter value (a number), found {describe(value)}"
                )
            key = (pid, label, series)
            index = self.counter_keys.get(key)
            if index is None:
                index = self.counter_keys[key] = len(self.counter_keys)
            self._samples.append((index, round(ts), float(value)))
            self.stats.counter_samples += 1
        if len(self._samples) >= BATCH:
            self._flush()

    def finish(self) -> None:
        """All events are read: B events never ended stay open."""
        self._flush()
        if self.unmatched_ends:
            self.stats.warnings.append(f"{self.unmatched_ends} end (E) event(s) without a begin event were skipped")

    def write(self, output: str, fields: str = "") -> None:
        """Write the trace file from the staging file, a batch of events at a time."""
        from .trace_writer import TraceWriter

        db = self._db
        db.execute("CREATE INDEX stage_order ON stage (thread, start, neg_end)")
        db.execute("CREATE INDEX stage_counters_order ON stage_counters (key)")
        with TraceWriter(output, producer="pva convert") as writer:
            writer.set_metadata(source_format="Chrome trace event JSON")
            if fields:
                writer.set_metadata(chrome_trace_fields=fields)
            for pid, name in self.process_names.items():
                writer.add_process(pid, name, self.process_order.get(pid))
            for pid in self.process_order:
                if pid not in self.process_names:
                    writer.add_process(pid, "", self.process_order[pid])
            channel_ids = [writer.channel(name) for name in self.channels]
            used = set(self.threads)
            for (pid, tid), thread in sorted(self.threads.items()):
                self.stats.threads += self._write_thread(writer, pid, tid, thread, used, channel_ids)
            for (pid, tid), name in self.thread_names.items():
                writer.add_thread(pid, tid, name, self.thread_order.get((pid, tid)))
            for (pid, tid), index in self.thread_order.items():
                if (pid, tid) not in self.thread_names:
                    writer.add_thread(pid, tid, "", index)
            for (pid, label, series), key in self.counter_keys.items():
                cursor = db.execute("SELECT timestamp, value FROM stage_counters WHERE key = ? ORDER BY rowid", (key,))
                while rows := cursor.fetchmany(BATCH):
                    writer.add_counter_samples(pid, label, [r[0] for r in rows], [r[1] for r in rows], series)

    def _ordered(self, columns: str, thread: int) -> sqlite3.Cursor:
        """A thread's staged events by start, longest first (open events first), then in file order."""
        return self._db.execute(f"SELECT {columns} FROM stage WHERE thread = ? ORDER BY start, neg_end, seq", (thread,))

    def _write_thread(self, writer: Any, pid: int, tid: int, thread: _Thread, used: set, channel_ids: list[int]) -> int:
        """Write a thread's events in one pass by start, longest first: each goes to the first lane
        (track) where it nests, as `assign_lanes` places them, and gets the next id; lanes after
        the first become threads "... (overlap N)". Returns the number of lanes."""
        if not thread.count:
            return 0
        next_id = writer.reserve_event_ids(thread.count)
        stacks: list[list[tuple[int, int]]] = []  # per lane: (end, id) of its open events
        lane_tids: list[int] = []
        cursor = self._ordered("start, neg_end, label, channel, args", thread.index)
        while rows := cursor.fetchmany(BATCH):
            out: list[list[tuple]] = [[] for _ in lane_tids]
            out_args: list[list[tuple[int, str]]] = [[] for _ in lane_tids]
            for start, neg_end, label, channel, args in rows:
                end = _INFINITY if neg_end is None else -neg_end
                lane = 0
                for stack in stacks:
                    while stack and stack[-1][0] <= start and stack[-1][0] != _INFINITY:
                        stack.pop()
                    if not stack or end <= stack[-1][0]:
                        break
                    lane += 1
                else:
                    stacks.append([])
                    out.append([])
                    out_args.append([])
                    if lane == 0:
                        lane_tids.append(tid)
                    else:
                        lane_tids.append(_free_tid(pid, tid, lane, used))
                        base = self.thread_names.get((pid, tid), f"thread {tid}")
                        writer.add_thread(pid, lane_tids[lane], f"{base} (overlap {lane})")
                stack = stacks[lane]
                parent = stack[-1][1] if stack else None
                stack.append((end, next_id))
                if neg_end is None:
                    out[lane].append((next_id, parent, label, channel_ids[channel], start, None, 0))
                else:
                    out[lane].append((next_id, parent, label, channel_ids[channel], start, end - start, 1))
                if args is not None:
                    out_args[lane].append((next_id, args))
                next_id += 1
            for lane, lane_tid in enumerate(lane_tids):
                if out[lane]:
                    writer.insert_event_rows(pid, lane_tid, out[lane], out_args[lane])
        return len(lane_tids)


def _free_tid(pid: int, tid: int, lane: int, used: set) -> int:
    candidate = tid + lane * (1 << 32)
    while (pid, candidate) in used or not -(1 << 63) <= candidate < (1 << 63):
        candidate = (candidate + 1) % (1 << 62)
    used.add((pid, candidate))
    return candidate


def _json(value: Any, importer: _Importer, parts: list) -> str:
    try:
        return orjson.dumps(value).decode()
    except orjson.JSONEncodeError:
        pass
    try:
        return json.dumps(value, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise importer.fail(parts + ["args"], f"args cannot be stored as JSON ({exc})") from None


def assign_lanes(starts: list[int], ends: list[int]) -> list[int]:
    """A lane (0, 1, ...) for each interval so that the intervals of one lane nest properly.

    Intervals are taken by start, longest first, as formats.trace_writer.nest_events does, and
    each goes to the first lane where it fits inside the innermost interval still open (or
    where none is open). Lane 0 gets every interval when they already nest.
    """
    order = sorted(range(len(starts)), key=lambda k: (starts[k], -ends[k], k))
    stacks: list[list[int]] = []
    lanes = [0] * len(starts)
    for k in order:
        s, e = starts[k], ends[k]
        for lane, stack in enumerate(stacks):
            while stack and ends[stack[-1]] <= s and ends[stack[-1]] != _INFINITY:
                stack.pop()
            if not stack or e <= ends[stack[-1]]:
                stack.append(k)
                lanes[k] = lane
                break
        else:
            stacks.append([k])
            lanes[k] = len(stacks) - 1
    return lanes


def import_chrome_trace(
    path: str | os.PathLike[str], output: str | os.PathLike[str], *, progress: Progress | None = None
) -> ImportStats:
    """Convert a Chrome trace event JSON file into a pva trace file (read it with pva.openTrace).

    The file is read with the fast reader, and again with the exact one when the fast reader
    cannot be sure (see formats.chrome_trace_json).
    """
    name = os.fspath(path)
    output = os.fspath(output)
    info = check_regular_file(name, "Chrome trace file")
    for fast in (True, False):
        importer = _Importer(name, output)
        try:
            if progress is not None:
                progress.start("reading", info.st_size)
            advance = progress.advance if progress is not None else None
            with open_binary(name) as raw:
                if fast:
                    items, others, status = read_trace_items_fast(raw, progress=advance)
                    for parts, event in items:
                        importer.add(parts, event)
                else:
                    items, others, status = read_trace_items(raw, name, progress=advance)
                    for parts, event in items:
                        importer.add(parts, plain(event))
            if progress is not None:
                progress.finish()
            importer.finish()
            stats = importer.stats
            stats.truncated = status["truncated"]
            if stats.truncated:
                stats.warnings.append(
                    "the trace event array is not closed (as when a tracer stopped early); the complete events were read"
                )
            if stats.skipped:
                shown = ", ".join(f"{phase}: {count}" for phase, count in sorted(stats.skipped.items()))
                stats.warnings.append(f"skipped events of phases this format does not keep ({shown})")
            other_fields = json.dumps(others, separators=(",", ":"), allow_nan=False) if others else ""
            importer.write(output, other_fields)
            return stats
        except NotFastError:
            continue
        finally:
            importer.close()
    raise AssertionError("the exact reader never asks for another")  # pragma: no cover
