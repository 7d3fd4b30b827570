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

Events are checked a block at a time as they are parsed (events of the usual shapes in one quick
pass, any other one by a check that names its JSON location) and staged as columns: a thread index,
start, end, file order, channel, label and args per event. Up to a memory bound (`STAGE_MEMORY`)
the columns stay in memory; beyond it they are moved, sorted by thread, to a temporary Arrow IPC
file beside the output, removed when the conversion ends. Each thread's events are then gathered,
ordered by start (longest first, then in file order), placed on the thread or an overlap thread
where they nest, given their ids and parents, and written to the trace file as one set of
columns. Memory stays within the bound plus the events of the largest thread, whatever the size
of the trace.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import math
import os
import re
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
import orjson
import pyarrow as pa

from ..atomic import AtomicOutput
from ..detect import GZIP_MAGIC, check_regular_file, read_head
from ..errors import InvalidInputError, PvaError
from ..gcpause import gc_paused
from ..json_values import plain
from ..progress import Progress
from ..streaming.json_events import open_binary
from ..streaming.tree import describe, location
from ..trace.writer import NULL
from . import parallel_read as halves
from .events import NotFastError, Readable, read_trace_blocks_fast, read_trace_items
from .nesting import OPEN, free_tid, nest, nest_by_owner
from .spool import Spool, counter_schema, event_schema

#: Phases imported (flows s/t/f and async b/e/n too); any other phase is counted and skipped.
PHASES = frozenset("XBEiICMstfben")
#: Flow points: a start, a step, an end.
_FLOW_PHASES = {"s": 0, "t": 1, "f": 2}
#: How a flow point finds its event: the innermost one enclosing its time, the next one to start
#: on its thread (an end without "bp": "e"), or the event that carries it (bind_id).
BIND_ENCLOSING, BIND_NEXT, BIND_EVENT = 0, 1, 2
#: Largest |timestamp| accepted, in microseconds (about 146,000 years).
MAX_TIME = 1 << 62
#: Events (and counter samples) staged per batch by the exact reader; the fast one stages a block
#: (about 1 MB of JSON) per batch.
BATCH = 50_000
#: Keys of an event that map to trace file columns.
_CORE_KEYS = frozenset({"name", "cat", "ph", "ts", "dur", "pid", "tid", "args"})
#: Threads of at most this many events are written together (`_Importer._write_small_threads`) ...
_SMALL_THREAD = 64
#: ... this many events at a time.
_SMALL_BATCH = 1 << 16
#: The columns of staged flow points.
_FLOW_COLUMNS = ("key", "order", "phase", "thread", "time", "bind", "seq")
#: Ids given to processes and threads named by strings start here.
_SYNTHETIC_ID = 1 << 40
_ID_LIMIT = 1 << 62
#: MAX_TIME as a float, compared with timestamps (a float compared with a large int is slower).
_MAX_TIME_FLOAT = float(MAX_TIME)
#: Bytes of staged columns kept in memory; beyond it they go to a temporary file beside the output.
STAGE_MEMORY = 256 << 20
#: The module whose `child(task)` reads the second half of a large trace in a child process.
SECOND_HALF = "formats.chrome.second_half"


@dataclasses.dataclass
class ImportStats:
    """What an import read and wrote."""

    events: int = 0
    threads: int = 0
    counter_samples: int = 0
    flows: int = 0
    skipped: dict[str, int] = dataclasses.field(default_factory=dict)
    truncated: bool = False
    warnings: list[str] = dataclasses.field(default_factory=list)


class _Thread:
    """A (pid, tid) seen: its index in the staged columns and its B events waiting for their E."""

    __slots__ = ("index", "stack")

    def __init__(self, index: int) -> None:
        self.index = index
        self.stack: list[tuple[int, int]] = []  # (seq, start) of B events not ended yet


class _Importer:
    """Checks events and stages them as columns; `write` writes the trace file from them."""

    def __init__(
        self, name: str, output: str, memory: int | None = None, *, spill_to: tuple[str, str] | None = None
    ) -> None:
        """`spill_to`: for the second half of a trace read apart (`hand_over`), the temporary files
        (of another) that take its staged events and counter samples."""
        self.name = name
        self.threads: dict[tuple[int, int], _Thread] = {}
        self._fast_threads: dict[tuple[int, int], _Thread] = {}  # threads of integer pid and tid
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
        limit = STAGE_MEMORY if memory is None else memory
        events_file, counters_file = spill_to or (None, None)
        self._events = Spool(event_schema(), output, limit * 7 // 8, events_file)
        self._counters = Spool(counter_schema(), output, limit // 8, counters_file)
        # E events of a second half whose B event is not in it: (thread, end, args), in file order
        self._dangling: list[tuple[int, int, dict | None]] | None = [] if spill_to else None
        # the batch being staged, a row per event: (thread index, ts, dur or NaN for a B event, label,
        # channel index, args JSON or None); `_base` is the seq (order in the file) of its first event
        self._base = 0
        self._rows: list[tuple[int, float, float, str, int, bytes | None]] = []
        self._counts = np.zeros(0, dtype=np.int64)  # events staged per thread, up to the last batch
        self._ends: dict[int, int] = {}  # position in the batch -> end, for B events ended
        self._late: list[tuple[int, int, int, dict | None]] = []  # (thread, seq, end, args) of earlier B events
        self._sample_key: list[int] = []
        self._sample_ts: list[float] = []
        self._sample_value: list[float] = []
        self.process_labels: dict[int, str] = {}
        # flow points: (key, phase, thread, time, binding, seq of the event for BIND_EVENT), sealed
        # into numpy columns (`_flow_parts`) with every batch; keys are (kind, category, name, id)
        self.flow_keys: dict[tuple, int] = {}
        self._flow_rows: list[tuple[int, int, int, float, int, int]] = []
        self._flow_parts: list[np.ndarray] = []
        self.flow_points = 0
        self.async_events = 0
        self._async_open: dict[tuple, _Thread] = {}  # (pid, category, id) -> its b events still open

    def close(self) -> None:
        """Remove the temporary files."""
        self._events.close()
        self._counters.close()

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

    def add_block(self, prefix: list, first: int, events: list) -> None:
        """Check and stage a block of events (the `first`-th of the array onwards).

        Events of the usual shapes (integer pid and tid already seen, string name and category,
        numeric times, object args, and for an E event no args) are staged here; every other
        event, and any that fails a check, by `add`, which says what is wrong."""
        threads = self._fast_threads
        channels = self.channels
        counter_keys = self.counter_keys
        stage = self._rows.append
        sample_key = self._sample_key.append
        sample_ts = self._sample_ts.append
        sample_value = self._sample_value.append
        dumps = orjson.dumps
        core = _CORE_KEYS
        nan = math.nan
        limit = _MAX_TIME_FLOAT
        base = self._base
        seq = self.stats.events
        ends = self._ends
        low = -limit
        id_low = -_ID_LIMIT
        for offset, event in enumerate(events):
            try:
                ph = event["ph"]
                ts = event["ts"]
                kind = type(ts)
                if not ((kind is float or kind is int) and low < ts < limit):
                    raise _SlowPathError
                instant = False
                if ph == "X":
                    dur = event.get("dur", 0)
                    kind = type(dur)
                    if not ((kind is float or kind is int) and 0 <= dur < limit and ts + dur < limit):
                        raise _SlowPathError
                elif ph == "E":
                    dur = None
                elif ph == "B":
                    dur = nan
                elif ph == "C":
                    pid = event["pid"]
                    label = event["name"]
                    args = event["args"]
                    tid = event.get("tid")
                    if (
                        type(pid) is not int
                        or not id_low <= pid < _ID_LIMIT
                        or type(label) is not str
                        or type(args) is not dict
                        or not (tid is None or (type(tid) is int and id_low <= tid < _ID_LIMIT))
                    ):
                        raise _SlowPathError
                    keys = []
                    for series, value in args.items():
                        kind = type(value)
                        if not ((kind is int or kind is float) and value - value == 0):
                            raise _SlowPathError
                        keys.append(counter_keys[(pid, label, series)])
                    for key, value in zip(keys, args.values()):
                        sample_key(key)
                        sample_ts(ts)
                        sample_value(value)
                    self.stats.counter_samples += len(keys)
                    continue
                elif ph == "i" or ph == "I":
                    dur = 0.0
                    instant = True
                elif ph == "M":
                    if not self._fast_metadata(event):
                        raise _SlowPathError
                    continue
                elif ph == "s" or ph == "f" or ph == "t":
                    if not self._fast_flow(event, ph, ts):
                        raise _SlowPathError
                    continue
                else:
                    raise _SlowPathError
                pid = event["pid"]
                tid = event["tid"]
                if type(pid) is not int or type(tid) is not int:
                    raise _SlowPathError
                thread = threads[(pid, tid)]
                cat = event.get("cat")
                channel = channels[cat if cat is not None else ""]
                args = event.get("args")
                if args is not None and type(args) is not dict:
                    raise _SlowPathError
                if dur is None:  # an E event
                    label = event.get("name")
                    if label is not None and type(label) is not str:
                        raise _SlowPathError
                    size = 4 + (label is not None) + ("dur" in event) + (cat is not None) + (args is not None)
                    if args or len(event) != size or not thread.stack:
                        raise _SlowPathError  # args to merge, or unknown keys, or no begin event
                    begin_seq, begin = thread.stack[-1]
                    end = round(float(ts))
                    if end < begin:
                        raise _SlowPathError
                    thread.stack.pop()
                    if begin_seq >= base:
                        ends[begin_seq - base] = end
                    else:
                        self._late.append((thread.index, begin_seq, end, None))
                    continue
                label = event["name"]
                if type(label) is not str:
                    raise _SlowPathError
                if len(event) != 5 + ("dur" in event) + (cat is not None) + (args is not None):
                    extra = {key: value for key, value in event.items() if key not in core}
                    if "bind_id" in extra:
                        raise _SlowPathError
                    if extra:
                        args = dict(args or {})
                        args["_chrome"] = extra
                if instant:
                    args = dict(args or {})
                    args.setdefault("_chrome", {})["ph"] = ph
                text = dumps(args) if args else None
            except (_SlowPathError, KeyError, TypeError, orjson.JSONEncodeError):
                self.stats.events = seq
                self.add(prefix + [first + offset], event)
                seq = self.stats.events
                base = self._base
                ends = self._ends
                continue
            if dur != dur:  # NaN: a B event
                thread.stack.append((seq, round(float(ts))))
            stage((thread.index, ts, dur, label, channel, text))
            seq += 1
        self.stats.events = seq
        # sealed now, so that nothing parsed from this block outlives it (small objects kept from
        # many blocks would keep the memory of all their events)
        self._seal()

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
        raw_pid = event.get("pid")
        pid = raw_pid
        if type(pid) is not int or not -_ID_LIMIT <= pid < _ID_LIMIT:
            pid = self._pid(pid, parts + ["pid"])
        raw_tid = event.get("tid")
        tid = raw_tid
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
        stack: _Thread | None = None
        if phase in "ben":  # async: on a track of the process per category, matched by id
            stack = self._async(event, parts, pid, channel, label)
            tid = self._tid(pid, f"async {channel or label}", parts)
            raw_tid = None
        thread = self.threads.get((pid, tid))
        if thread is None:
            thread = self.threads[(pid, tid)] = _Thread(len(self.threads))
        if type(raw_pid) is int and type(raw_tid) is int and raw_pid == pid and raw_tid == tid:
            self._fast_threads[(pid, tid)] = thread
        if phase in _FLOW_PHASES:
            self._flow(event, parts, thread, channel, label, ts, phase)
            return
        if stack is not None:
            stack.index = thread.index
            if phase == "e":
                self._end(event, parts, stack, ts)
                return
        if phase == "E":
            self._end(event, parts, thread, ts)
            return
        if "bind_id" in event:
            self._bound_flow(event, parts, thread, ts)
        args = event.get("args")
        if (args is not None and type(args) is not dict) or not _CORE_KEYS.issuperset(event):
            args = self._args(event, parts)
        if phase in "iIbn":
            args = dict(args or {})
            args.setdefault("_chrome", {})["ph"] = phase
        if phase == "X":
            duration = event.get("dur", 0)
            kind = type(duration)
            if kind is float or kind is int:
                duration = float(duration)
            if not (type(duration) is float and 0 <= duration < MAX_TIME):
                duration = self._time(event.get("dur", 0), parts + ["dur"], "the duration")
                if duration < 0:
                    raise self.fail(parts + ["dur"], f"expected a duration >= 0, found {describe(duration)}")
            if not ts + duration < MAX_TIME:
                raise self.fail(
                    parts + ["dur"], f"expected the event to end before 2**62 µs, found {describe(duration)}"
                )
        elif phase == "B" or phase == "b":
            duration = math.nan
            (thread if stack is None else stack).stack.append((self.stats.events, round(ts)))
        else:  # instant
            duration = 0.0
        channel_index = self.channels.get(channel)
        if channel_index is None:
            channel_index = self.channels[channel] = len(self.channels)
        self._rows.append(
            (thread.index, ts, duration, label, channel_index, _json(args, self, parts) if args else None)
        )
        self.stats.events += 1
        if len(self._rows) >= BATCH:
            self._seal()

    def _fast_flow(self, event: dict, ph: str, ts: float) -> bool:
        """A flow point of the usual shape (integer pid and tid of a thread seen, an integer or string
        id, string category and name) staged; False for any other, which `add` checks."""
        pid = event.get("pid")
        tid = event.get("tid")
        fid = event.get("id")
        cat = event.get("cat", "")
        label = event.get("name", "")
        if type(pid) is not int or type(tid) is not int or type(cat) is not str or type(label) is not str:
            return False
        kind = type(fid)
        if not (kind is str or (kind is int and -_ID_LIMIT <= fid < _ID_LIMIT)):  # type: ignore[operator]
            return False
        thread = self._fast_threads.get((pid, tid))
        if thread is None:
            return False
        key = (0, cat, label, fid)
        index = self.flow_keys.get(key)
        if index is None:
            index = self.flow_keys[key] = len(self.flow_keys)
        bind = BIND_NEXT if ph == "f" and event.get("bp") != "e" else BIND_ENCLOSING
        self._flow_rows.append((index, _FLOW_PHASES[ph], thread.index, ts, bind, -1))
        return True

    def _fast_metadata(self, event: dict) -> bool:
        """An M event of the usual shape (integer pid and tid, a known name, its value of the right
        type) taken in; False for any other, which `add` checks."""
        pid = event.get("pid")
        tid = event.get("tid", 0)
        args = event.get("args")
        if type(pid) is not int or type(tid) is not int or type(args) is not dict:
            return False
        if not (-_ID_LIMIT <= pid < _ID_LIMIT and -_ID_LIMIT <= tid < _ID_LIMIT):
            return False
        label = event.get("name")
        if label == "thread_name" or label == "process_name" or label == "process_labels":
            value = args.get("labels" if label == "process_labels" else "name")
            if type(value) is not str:
                return False
            if label == "thread_name":
                self.thread_names[(pid, tid)] = value
            elif label == "process_name":
                self.process_names[pid] = value
            else:
                self.process_labels[pid] = value
            return True
        if label == "thread_sort_index" or label == "process_sort_index":
            value = args.get("sort_index")
            if type(value) is not int or not -(1 << 62) <= value < (1 << 62):
                return False
            if label == "thread_sort_index":
                self.thread_order[(pid, tid)] = value
            else:
                self.process_order[pid] = value
            return True
        return False

    def _flow(self, event: dict, parts: list, thread: _Thread, cat: str, label: str, ts: float, phase: str) -> None:
        """A flow point (s, t or f), keyed by category, name and id."""
        flow_id = event.get("id")
        if flow_id is None:
            flow_id = event.get("bind_id")
        if isinstance(flow_id, bool) or not isinstance(flow_id, (int, str)):
            raise self.fail(parts + ["id"], f"expected a flow id (an integer or a string), found {describe(flow_id)}")
        if isinstance(flow_id, int):
            flow_id = self._int(flow_id, parts + ["id"], "a flow id")
        bind = BIND_NEXT if phase == "f" and event.get("bp") != "e" else BIND_ENCLOSING
        self._flow_point((0, cat, label, flow_id), _FLOW_PHASES[phase], thread, ts, bind, -1)

    def _bound_flow(self, event: dict, parts: list, thread: _Thread, ts: float) -> None:
        """The flow point of an event that carries it (bind_id with flow_in and/or flow_out)."""
        flow_id = event["bind_id"]
        if isinstance(flow_id, bool) or not isinstance(flow_id, (int, str)):
            raise self.fail(
                parts + ["bind_id"], f"expected a flow id (an integer or a string), found {describe(flow_id)}"
            )
        arrives, leaves = bool(event.get("flow_in")), bool(event.get("flow_out"))
        if arrives or leaves:
            phase = 1 if arrives and leaves else (0 if leaves else 2)
            self._flow_point((1, "", "", flow_id), phase, thread, ts, BIND_EVENT, self.stats.events)

    def _flow_point(self, key: tuple, phase: int, thread: _Thread, ts: float, bind: int, seq: int) -> None:
        index = self.flow_keys.get(key)
        if index is None:
            index = self.flow_keys[key] = len(self.flow_keys)
        self._flow_rows.append((index, phase, thread.index, ts, bind, seq))

    def _async(self, event: dict, parts: list, pid: int, cat: str, label: str) -> _Thread:
        """The b events still open of an async event's id (b/e/n, matched by category and id)."""
        key_id = event.get("id", event.get("id2"))
        if isinstance(key_id, dict):
            key_id = json.dumps(key_id, sort_keys=True)
        if key_id is None or isinstance(key_id, (bool, list)):
            raise self.fail(parts + ["id"], f"expected the id of the async event, found {describe(key_id)}")
        self.async_events += 1
        key = (pid, cat, key_id)
        found = self._async_open.get(key)
        if found is None:
            found = self._async_open[key] = _Thread(-1)
        return found

    def _end(self, event: dict, parts: list, thread: _Thread, ts: float) -> None:
        """An E event: the end of the thread's innermost B event still open."""
        if not thread.stack:
            if self._dangling is not None:  # its B event may be in the first half
                args = self._args(event, parts)
                if args:
                    _json(args, self, parts)
                self._dangling.append((thread.index, round(ts), args or None))
                return
            self.unmatched_ends += 1
            return
        seq, begin = thread.stack.pop()
        end = round(ts)
        if end < begin:
            raise self.fail(parts + ["ts"], f"the end ({ts} µs) comes before its begin event ({begin} µs)")
        args = self._args(event, parts)
        if seq < self._base:  # staged in an earlier batch: applied when the thread is written
            if args:
                _json(args, self, parts)  # checked now, where its location is known
            self._late.append((thread.index, seq, end, args or None))
            return
        position = seq - self._base
        self._ends[position] = end
        if args:
            row = self._rows[position]
            merged = orjson.loads(row[5]) if row[5] else {}
            merged.update(args)
            self._rows[position] = (*row[:5], _json(merged, self, parts))

    def _args(self, event: dict, parts: list) -> dict | None:
        args = event.get("args")
        if args is not None and not isinstance(args, dict):
            raise self.fail(parts + ["args"], f"expected an object, found {describe(args)}")
        extra = {k: v for k, v in event.items() if k not in _CORE_KEYS}
        if extra:
            args = dict(args or {})
            args["_chrome"] = extra
        return args

    def _seal(self) -> None:
        """Move the batch being staged to the spool, as Arrow columns."""
        if self._flow_rows:
            self._seal_flows()
        count = len(self._rows)
        if count:
            group, ts_values, dur_values, labels, channels, texts = zip(*self._rows)
            self._rows.clear()
            ts = np.array(ts_values, dtype=np.float64)
            dur = np.array(dur_values, dtype=np.float64)
            start = np.rint(ts).astype(np.int64)
            open_ = np.isnan(dur)
            end = np.rint(np.where(open_, 0.0, ts + dur)).astype(np.int64)
            end[open_] = OPEN
            if self._ends:
                end[np.fromiter(self._ends, np.int64)] = np.fromiter(self._ends.values(), np.int64)
            threads = np.array(group, dtype=np.int32)
            batch = pa.record_batch(
                [
                    pa.array(threads),
                    pa.array(np.arange(self._base, self._base + count, dtype=np.int64)),
                    pa.array(start),
                    pa.array(end),
                    pa.array(np.array(channels, dtype=np.int32)),
                    pa.array(labels, type=pa.string()),
                    pa.array(texts, type=pa.binary()),
                ],
                schema=self._events.schema,
            )
            self._events.add(batch)
            counts = np.bincount(threads, minlength=len(self.threads))
            counts[: len(self._counts)] += self._counts
            self._counts = counts
            self._base += count
            self._ends = {}
        if self._sample_key:
            batch = pa.record_batch(
                [
                    pa.array(np.array(self._sample_key, dtype=np.int32)),
                    pa.array(np.rint(np.array(self._sample_ts, dtype=np.float64)).astype(np.int64)),
                    pa.array(np.array(self._sample_value, dtype=np.float64)),
                ],
                schema=self._counters.schema,
            )
            self._counters.add(batch)
            for column in (self._sample_key, self._sample_ts, self._sample_value):
                column.clear()

    def _seal_flows(self) -> None:
        """Move the flow points staged to a numpy block: columns key, order, phase, thread, time,
        binding and event seq (`_FLOW_COLUMNS`)."""
        keys, phases, threads, times, binds, seqs = zip(*self._flow_rows)
        count = len(keys)
        self._flow_rows.clear()
        block = np.empty((len(_FLOW_COLUMNS), count), dtype=np.int64)
        block[0] = keys
        block[1] = np.arange(self.flow_points, self.flow_points + count)
        block[2] = phases
        block[3] = threads
        block[4] = np.rint(np.array(times, dtype=np.float64))
        block[5] = binds
        block[6] = seqs
        self._flow_parts.append(block)
        self.flow_points += count

    def flow_columns(self) -> np.ndarray:
        """Every flow point staged, as `_seal_flows`'s columns."""
        if self._flow_rows:
            self._seal_flows()
        if not self._flow_parts:
            return np.zeros((len(_FLOW_COLUMNS), 0), dtype=np.int64)
        if len(self._flow_parts) > 1:
            self._flow_parts = [np.concatenate(self._flow_parts, axis=1)]
        return self._flow_parts[0]

    def _metadata(self, event: dict, parts: list, pid: int, tid: int, label: str) -> None:
        args = event.get("args")
        if not isinstance(args, dict):
            raise self.fail(parts + ["args"], f"expected an object, found {describe(args)}")
        if label == "process_name":
            self.process_names[pid] = self._string(args.get("name"), parts + ["args", "name"], "a process name")
        elif label == "process_labels":
            self.process_labels[pid] = self._string(args.get("labels"), parts + ["args", "labels"], "process labels")
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
            self._sample_key.append(index)
            self._sample_ts.append(ts)
            self._sample_value.append(float(value))
            self.stats.counter_samples += 1
        if len(self._sample_key) >= BATCH:
            self._seal()

    def finish(self) -> None:
        """All events are read: B events never ended stay open."""
        self._seal()
        self._events.finish()
        self._counters.finish()
        if self.unmatched_ends:
            self.stats.warnings.append(f"{self.unmatched_ends} end (E) event(s) without a begin event were skipped")

    def hand_over(self) -> dict:
        """All events of a second half are read: its staged rows go to the files of `spill_to`, and
        the rest of what it read is returned for `merge` (in the process of the first half), as
        values JSON carries (lists of pairs where keys are not strings)."""
        self._seal()
        return {
            "stats": dataclasses.asdict(self.stats),
            "threads": [[pid, tid, thread.index] for (pid, tid), thread in self.threads.items()],
            "counts": self._counts.tolist(),
            "channels": list(self.channels),  # in order of their indices
            "counter_keys": [[*key, index] for key, index in self.counter_keys.items()],
            "names": [
                list(self.process_names.items()),
                list(self.process_order.items()),
                [[*key, name] for key, name in self.thread_names.items()],
                [[*key, index] for key, index in self.thread_order.items()],
            ],
            "string_ids": bool(self.string_pids or self.string_tids),
            "async": self.async_events,
            "labels": list(self.process_labels.items()),
            "flow_keys": [[*key, index] for key, index in self.flow_keys.items()],
            "flows": self.flow_columns().tolist(),
            "late": self._late,
            "dangling": self._dangling,
            "events": list(self._events.hand_over().items()),
            "counters": list(self._counters.hand_over().items()),
        }

    def merge(self, half: dict, files: tuple[str, str]) -> bool:
        """Take in the second half of the trace (`hand_over`'s answer, its rows in `files`) after this
        first half, as if read in one go; False, with this half unusable, when only reading the
        whole trace in one go can tell (string process or thread ids, an end before its begin)."""
        if half["string_ids"] or half["async"] or self.async_events:
            return False
        self._seal()
        flow_offset = self.flow_points
        offset = self.stats.events
        thread_map = np.zeros(len(half["threads"]), dtype=np.int64)
        threads_by_index: dict[int, _Thread] = {}
        for pid, tid, index in half["threads"]:
            thread = self.threads.get((pid, tid))
            if thread is None:
                thread = self.threads[(pid, tid)] = _Thread(len(self.threads))
            thread_map[index] = thread.index
            threads_by_index[index] = thread
        for index, end, args in half["dangling"]:
            thread = threads_by_index[index]
            if not thread.stack:
                self.unmatched_ends += 1
                continue
            seq, begin = thread.stack.pop()
            if end < begin:
                return False
            self._late.append((thread.index, seq, end, args))
        for index, seq, end, args in half["late"]:
            self._late.append((int(thread_map[index]), seq + offset, end, args))
        channel_map = np.array(
            [self.channels.setdefault(name, len(self.channels)) for name in half["channels"]] or [0], dtype=np.int32
        )
        key_map = {
            index: self.counter_keys.setdefault((pid, label, series), len(self.counter_keys))
            for pid, label, series, index in half["counter_keys"]
        }
        counts = np.zeros(len(self.threads), dtype=np.int64)
        counts[: len(self._counts)] = self._counts
        theirs = np.array(half["counts"], dtype=np.int64)
        np.add.at(counts, thread_map[: len(theirs)], theirs[: len(thread_map)])
        self._counts = counts
        process_names, process_order, thread_names, thread_order = half["names"]
        self.process_names.update((pid, name) for pid, name in process_names)
        self.process_order.update((pid, index) for pid, index in process_order)
        self.thread_names.update(((pid, tid), name) for pid, tid, name in thread_names)
        self.thread_order.update(((pid, tid), index) for pid, tid, index in thread_order)
        self.process_labels.update((pid, labels) for pid, labels in half["labels"])
        flow_key_map = np.zeros(len(half["flow_keys"]) or 1, dtype=np.int64)
        for kind, cat, label, flow_id, index in half["flow_keys"]:
            flow_key_map[index] = self.flow_keys.setdefault((kind, cat, label, flow_id), len(self.flow_keys))
        points = np.array(half["flows"], dtype=np.int64).reshape(len(_FLOW_COLUMNS), -1)
        if points.shape[1]:
            points[0] = flow_key_map[points[0]]
            points[1] += flow_offset
            points[3] = thread_map[points[3]]
            points[6] = np.where(points[6] >= 0, points[6] + offset, -1)
            self._flow_parts.append(points)
            self.flow_points += points.shape[1]
        stats = half["stats"]
        self.stats.events += stats["events"]
        self.stats.counter_samples += stats["counter_samples"]
        for phase, count in stats["skipped"].items():
            self.stats.skipped[phase] = self.stats.skipped.get(phase, 0) + count

        def shift(batch: pa.RecordBatch) -> pa.RecordBatch:
            columns = batch.columns
            columns[1] = pa.array(columns[1].to_numpy() + offset)
            columns[4] = pa.array(channel_map[columns[4].to_numpy()])
            return pa.record_batch(columns, schema=batch.schema)

        self._events.attach(files[0], {int(thread_map[g]): found for g, found in half["events"]}, shift)
        self._counters.attach(files[1], {key_map[g]: found for g, found in half["counters"]}, lambda batch: batch)
        return True

    def write(self, output: str, fields: str = "") -> None:
        """Write the trace file from the staged columns, a thread at a time."""
        from ..trace.writer import TraceWriter

        late: dict[int, list[tuple[int, int, dict | None]]] = {}
        for thread_index, seq, end, args in self._late:
            late.setdefault(thread_index, []).append((seq, end, args))
        self._late = []
        with TraceWriter(output, producer="pva convert") as writer:
            writer.set_metadata(source_format="Chrome trace event JSON")
            if fields:
                writer.set_metadata(chrome_trace_fields=fields)
                _time_facts(writer, json.loads(fields))
            for pid, name in self.process_names.items():
                writer.add_process(pid, name, self.process_order.get(pid))
            for pid in self.process_order:
                if pid not in self.process_names:
                    writer.add_process(pid, "", self.process_order[pid])
            for pid, labels in self.process_labels.items():
                writer.set_process_labels(pid, labels)
            channel_ids = np.array([writer.channel(name) for name in self.channels] or [0], dtype=np.int64)
            used = set(self.threads)
            points = _FlowPoints(self.flow_columns(), self.threads)
            small: list[tuple[int, int, _Thread, list]] = []  # threads of few events, written together
            small_events = 0
            counts = self._counts
            for (pid, tid), thread in sorted(self.threads.items()):
                ends = late.pop(thread.index, [])
                count = int(counts[thread.index]) if thread.index < len(counts) else 0
                if 0 < count <= _SMALL_THREAD:
                    small.append((pid, tid, thread, ends))
                    small_events += count
                    if small_events >= _SMALL_BATCH:
                        self._write_small_threads(writer, small, used, channel_ids, points)
                        small, small_events = [], 0
                    continue
                lanes = self._write_thread(writer, pid, tid, thread, used, channel_ids, ends, points)
                self.stats.threads += lanes
            self._write_small_threads(writer, small, used, channel_ids, points)
            self.stats.flows = points.write(writer, self.flow_keys)
            for (pid, tid), name in self.thread_names.items():
                writer.add_thread(pid, tid, name, self.thread_order.get((pid, tid)))
            for (pid, tid), index in self.thread_order.items():
                if (pid, tid) not in self.thread_names:
                    writer.add_thread(pid, tid, "", index)
            for (pid, label, series), key in self.counter_keys.items():
                samples = self._counters.group(key)
                times = samples.column("timestamp").to_numpy()
                values = samples.column("value").to_numpy()
                for at in range(0, len(times), BATCH):
                    part = slice(at, at + BATCH)
                    writer.add_counter_samples(pid, label, times[part], values[part], series)

    def _with_late(self, rows: pa.Table, late: list[tuple[int, int, dict | None]]) -> pa.Table:
        """A thread's staged rows with the ends (and E args) of B events that ended in a later batch."""
        if not late:
            return rows
        seq = _array(rows, "seq").to_numpy()
        end = _array(rows, "end").to_numpy().copy()
        where = np.searchsorted(seq, [item[0] for item in late])
        end[where] = [item[1] for item in late]
        rows = rows.set_column(rows.schema.get_field_index("end"), "end", pa.array(end))
        if any(extra for _, _, extra in late):  # args of E events to merge into their B's
            merged = _array(rows, "args").to_pylist()
            for position, (_, _, extra) in zip(where.tolist(), late):
                if extra:
                    staged = merged[position]
                    value = orjson.loads(staged) if staged else {}
                    value.update(extra)
                    merged[position] = _json(value, self, [])
            rows = rows.set_column(rows.schema.get_field_index("args"), "args", pa.array(merged, type=pa.binary()))
        return rows

    def _write_small_threads(
        self,
        writer: Any,
        threads: list[tuple[int, int, _Thread, list]],
        used: set,
        channel_ids: np.ndarray,
        points: _FlowPoints,
    ) -> None:
        """Write threads of few events in one step (their events nest as `_write_thread` places
        them, in one pass over all of them); a thread whose events need an overlap track is
        written by `_write_thread` instead."""
        if not threads:
            return
        if any(late for *_, late in threads):
            tables = [self._with_late(self._events.group(thread.index), late) for _, _, thread, late in threads]
            sizes = np.array([t.num_rows for t in tables], dtype=np.int64)
            rows = pa.concat_tables(tables).combine_chunks()
        else:
            rows, sizes = self._events.groups([thread.index for _, _, thread, _ in threads])
        offsets = np.concatenate([[0], np.cumsum(sizes)])
        owner = np.repeat(np.arange(len(threads)), sizes)
        seq = _array(rows, "seq").to_numpy()
        start = _array(rows, "start").to_numpy()
        end = _array(rows, "end").to_numpy()
        order = np.lexsort((seq, -end, start, owner))
        owner, start, end = owner[order], start[order], end[order]
        parents, overlapping = nest_by_owner(owner.tolist(), start.tolist(), end.tolist())
        keep = ~np.isin(owner, np.array(sorted(overlapping), dtype=np.int64))
        for index in sorted(overlapping):
            pid, tid, thread, _ = threads[index]
            own = rows.slice(int(offsets[index]), int(sizes[index]))
            lanes = self._write_thread(writer, pid, tid, thread, used, channel_ids, [], points, own)
            self.stats.threads += lanes
        chosen = np.flatnonzero(keep)
        if not chosen.size:
            return
        count = chosen.size
        first = writer.reserve_event_ids(count)
        ids = np.arange(first, first + count, dtype=np.int64)
        new_position = np.full(len(order), -1, dtype=np.int64)
        new_position[chosen] = np.arange(count)
        kept_parents = parents[chosen]
        parent_ids = np.where(kept_parents >= 0, new_position[np.maximum(kept_parents, 0)] + first, NULL)
        taken = order[chosen]
        kept_owner, kept_start, kept_end = owner[chosen], start[chosen], end[chosen]
        pids = np.array([thread[0] for thread in threads], dtype=np.int64)[kept_owner]
        tids = np.array([thread[1] for thread in threads], dtype=np.int64)[kept_owner]
        args = _array(rows, "args").take(pa.array(taken)).cast(pa.string())
        present = np.flatnonzero(args.is_valid().to_numpy(zero_copy_only=False))
        writer.insert_small_threads(
            pids,
            tids,
            ids,
            parent_ids,
            _array(rows, "label").take(pa.array(taken)).to_pylist(),
            channel_ids[_array(rows, "channel").to_numpy()[taken]],
            kept_start,
            np.where(kept_end == OPEN, NULL, kept_end - kept_start),
            zip(ids[present].tolist(), args.take(pa.array(present)).to_pylist()),
        )
        self.stats.threads += int(np.unique(kept_owner).size)
        bounds = np.searchsorted(kept_owner, np.arange(len(threads) + 1))
        placed = (offsets, bounds, taken, seq, kept_start, kept_end, kept_parents, new_position, ids)
        for index, (_, tid, thread, _) in enumerate(threads):
            if index not in overlapping and points.has(thread.index):
                _bind_small_thread(points, thread.index, tid, index, placed)

    def _write_thread(
        self,
        writer: Any,
        pid: int,
        tid: int,
        thread: _Thread,
        used: set,
        channel_ids: np.ndarray,
        late: list[tuple[int, int, dict | None]],
        points: _FlowPoints,
        rows: pa.Table | None = None,
    ) -> int:
        """Write a thread's events by start, longest first: each goes to the first lane (track)
        where it nests, as `assign_lanes` places them, and gets the next id; lanes after the
        first become threads "... (overlap N)". Returns the number of lanes."""
        if thread.index >= len(self._counts) or not self._counts[thread.index]:
            return 0
        if rows is None:
            rows = self._with_late(self._events.group(thread.index), late)
        seq = _array(rows, "seq").to_numpy()
        start = _array(rows, "start").to_numpy()
        end = _array(rows, "end").to_numpy()
        args = _array(rows, "args")
        order = np.lexsort((seq, -end, start))
        start = start[order]
        end = end[order]
        lanes, parents = nest(start, end)
        count = len(order)
        first = writer.reserve_event_ids(count)
        ids = np.arange(first, first + count, dtype=np.int64)
        parent_ids = np.where(parents >= 0, parents + first, NULL)
        durations = np.where(end == OPEN, NULL, end - start)
        channels = channel_ids[_array(rows, "channel").to_numpy()[order]]
        labels = _array(rows, "label").take(order)
        args = args.take(order).cast(pa.string())
        lane_count = int(lanes.max()) + 1
        base = self.thread_names.get((pid, tid), f"thread {tid}")
        lane_tids = [tid]
        for lane in range(lane_count):
            if lane == 0:
                lane_tid = tid
            else:
                lane_tid = free_tid(pid, tid, lane, used)
                lane_tids.append(lane_tid)
                writer.add_thread(pid, lane_tid, f"{base} (overlap {lane})")
            chosen = np.flatnonzero(lanes == lane) if lane_count > 1 else np.arange(count)
            lane_args = args.take(chosen) if lane_count > 1 else args
            lane_ids = ids[chosen]
            present = np.flatnonzero(lane_args.is_valid().to_numpy(zero_copy_only=False))
            writer.insert_thread_columns(
                pid,
                lane_tid,
                lane_ids,
                parent_ids[chosen],
                labels.take(chosen) if lane_count > 1 else labels,
                channels[chosen],
                start[chosen],
                durations[chosen],
                zip(lane_ids[present].tolist(), lane_args.take(present).to_pylist()),
            )
        points.bind(thread.index, seq, order, start, end, lanes, parents, ids, np.array(lane_tids, dtype=np.int64))
        return lane_count


class _FlowPoints:
    """The flow points staged (`_Importer.flow_columns`), bound to their events a thread at a time
    (`bind`) and then written as flows, a row per pair of consecutive points of a flow (its points
    ordered by time, as trace viewers order them, whatever their order in the file)."""

    def __init__(self, columns: np.ndarray, threads: dict[tuple[int, int], _Thread]) -> None:
        self.columns = columns
        count = columns.shape[1]
        self.event = np.full(count, -1, dtype=np.int64)  # the event id each point binds to
        self.pid = np.zeros(count, dtype=np.int64)
        self.tid = np.zeros(count, dtype=np.int64)
        thread_pid = np.zeros(len(threads) or 1, dtype=np.int64)
        thread_tid = np.zeros(len(threads) or 1, dtype=np.int64)
        for (pid, tid), thread in threads.items():
            thread_pid[thread.index] = pid
            thread_tid[thread.index] = tid
        if count:
            self.pid[:] = thread_pid[columns[3]]
            self.tid[:] = thread_tid[columns[3]]
        self._by_thread = np.argsort(columns[3], kind="stable")
        self._bounds = np.searchsorted(columns[3][self._by_thread], np.arange(len(threads) + 1))

    def has(self, thread: int) -> bool:
        """Whether the thread has flow points."""
        return thread + 1 < len(self._bounds) and self._bounds[thread] != self._bounds[thread + 1]

    def bind(
        self,
        thread: int,
        seq: np.ndarray,
        order: np.ndarray,
        start: np.ndarray,
        end: np.ndarray,
        lanes: np.ndarray,
        parents: np.ndarray,
        ids: np.ndarray,
        lane_tids: np.ndarray,
    ) -> None:
        """Bind the thread's points to its events (by start, longest first, as placed in `lanes`
        with `parents`; `order` takes file order to that order, `seq` is each event's file order)."""
        if thread + 1 >= len(self._bounds) or self._bounds[thread] == self._bounds[thread + 1]:
            return
        which = self._by_thread[self._bounds[thread] : self._bounds[thread + 1]]
        times = self.columns[4][which]
        binds = self.columns[5][which]
        found = np.full(len(which), -1, dtype=np.int64)  # positions in the sorted events
        best_start = np.full(len(which), np.iinfo(np.int64).min, dtype=np.int64)
        for lane in range(int(lanes.max()) + 1):
            members = np.flatnonzero(lanes == lane)
            at = np.searchsorted(start[members], times, side="right") - 1
            candidate = np.where(at >= 0, members[np.maximum(at, 0)], -1)
            while True:  # up the parents until an event that has not ended before the point
                ended = (candidate >= 0) & (end[np.maximum(candidate, 0)] < times)
                if not ended.any():
                    break
                candidate = np.where(ended, parents[np.maximum(candidate, 0)], candidate)
            deeper = (candidate >= 0) & (start[np.maximum(candidate, 0)] > best_start)
            found = np.where(deeper, candidate, found)
            best_start = np.where(deeper, start[np.maximum(candidate, 0)], best_start)
        following = np.searchsorted(start, times, side="left")
        found = np.where(binds == BIND_NEXT, np.where(following < len(start), following, -1), found)
        exact = binds == BIND_EVENT
        if exact.any():
            inverse = np.empty(len(order), dtype=np.int64)
            inverse[order] = np.arange(len(order))
            rows = np.searchsorted(seq, self.columns[6][which[exact]])
            found[exact] = inverse[np.minimum(rows, len(order) - 1)]
        bound = found >= 0
        self.event[which[bound]] = ids[found[bound]]
        self.tid[which[bound]] = lane_tids[lanes[found[bound]]]

    def write(self, writer: Any, keys: dict[tuple, int]) -> int:
        """Write the flows: the rows linking each point of a flow to the next. Returns their number."""
        columns = self.columns
        if not columns.shape[1]:
            return 0
        order = np.lexsort((columns[1], columns[2], columns[4], columns[0]))  # by flow, time, phase, file order
        key, phase = columns[0][order], columns[2][order]
        pairs = np.flatnonzero((key[:-1] == key[1:]) & (phase[:-1] != 2) & (phase[1:] != 0))
        names = [(str(flow_id), cat, label) for (_, cat, label, flow_id) in keys]
        source, target = order[pairs], order[pairs + 1]
        events = np.where(self.event >= 0, self.event, NULL)
        for at in range(0, len(pairs), BATCH):
            part = slice(at, at + BATCH)
            s, t = source[part], target[part]
            rows = zip(
                key[pairs[part]].tolist(),
                events[s].tolist(),
                events[t].tolist(),
                self.pid[s].tolist(),
                self.tid[s].tolist(),
                columns[4][s].tolist(),
                self.pid[t].tolist(),
                self.tid[t].tolist(),
                columns[4][t].tolist(),
            )
            writer.add_flows(
                (*names[k], None if a == NULL else a, None if b == NULL else b, *rest) for k, a, b, *rest in rows
            )
        return len(pairs)


def _time_facts(writer: Any, fields: dict) -> None:
    """The trace's time origin (baseTimeNanoseconds: the wall-clock time of timestamp 0, in
    nanoseconds since the Unix epoch) and the unit to show times in (displayTimeUnit), as metadata."""
    origin = fields.get("baseTimeNanoseconds")
    if type(origin) is int:
        writer.set_metadata(time_origin_ns=origin)
    unit = fields.get("displayTimeUnit")
    if unit in ("ms", "us", "ns"):
        writer.set_metadata(display_time_unit=unit)


def _bind_small_thread(points: _FlowPoints, thread: int, tid: int, index: int, placed: tuple) -> None:
    """Bind the flow points of the `index`-th thread written by `_Importer._write_small_threads`
    (`placed`: where its rows and events are in the columns written together)."""
    offsets, bounds, taken, seq, starts, ends, parents, new_position, ids = placed
    part = slice(bounds[index], bounds[index + 1])
    local_parents = np.where(parents[part] >= 0, new_position[np.maximum(parents[part], 0)] - bounds[index], -1)
    points.bind(
        thread,
        seq[offsets[index] : offsets[index + 1]],
        taken[part] - offsets[index],
        starts[part],
        ends[part],
        np.zeros(bounds[index + 1] - bounds[index], dtype=np.int64),
        local_parents,
        ids[part],
        np.array([tid], dtype=np.int64),
    )


def _array(table: pa.Table, name: str) -> pa.Array:
    return table.column(name).combine_chunks()


class _SlowPathError(Exception):
    """An event the fast path of `_Importer.add_block` leaves to `_Importer.add`."""


def _json(value: Any, importer: _Importer, parts: list) -> bytes:
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:
        pass
    try:
        return json.dumps(value, separators=(",", ":"), allow_nan=False).encode()
    except (TypeError, ValueError) as exc:
        raise importer.fail(parts + ["args"], f"args cannot be stored as JSON ({exc})") from None


def import_chrome_trace(
    path: str | os.PathLike[str], output: str | os.PathLike[str], *, progress: Progress | None = None
) -> ImportStats:
    """Convert a Chrome trace event JSON file into a pva trace file (read it with pva.openTrace).

    The file is read with the fast reader, and again with the exact one when the fast reader
    cannot be sure (see formats.chrome.events). A large file is read as two halves at once
    on two processors (formats.chrome.parallel_read) when there are two.
    """
    name = os.fspath(path)
    output = os.fspath(output)
    info = check_regular_file(name, "Chrome trace file")
    compressed = read_head(name, 2) == GZIP_MAGIC
    with gc_paused():  # the parsed events hold no cycles: collections would only walk them again
        if not compressed and info.st_size >= halves.MIN_BYTES and halves.processors() >= 2:
            stats = _import_in_halves(name, output, info.st_size, progress)
            if stats is not None:
                return stats
        for fast in (True, False):
            importer = _Importer(name, output)
            try:
                if progress is not None:
                    progress.start("reading", info.st_size)
                advance = progress.advance if progress is not None and not compressed else None
                with _open_trace(name, compressed) as raw:
                    if fast:
                        others, status = stage_fast(importer, raw, advance)
                    else:
                        items, others, status = read_trace_items(raw, name, progress=advance)
                        for parts, event in items:
                            importer.add(parts, plain(event))
                if progress is not None:
                    progress.finish()
                return _write_trace(importer, output, others, status)
            except NotFastError:
                continue
            finally:
                importer.close()
    raise AssertionError("the exact reader never asks for another")  # pragma: no cover


def _open_trace(name: str, compressed: bool) -> Any:
    """The trace's bytes: the file, or what it decompresses to (gzip)."""
    if not compressed:
        return open_binary(name)
    return _Gunzip(name)


class _Gunzip:
    """A gzip-compressed trace read as its JSON; damage is an InvalidInputError naming the file."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._raw = gzip.open(name, "rb")  # noqa: SIM115 (closed by __exit__)

    def read(self, size: int = -1, /) -> bytes:
        try:
            return self._raw.read(size)
        except (OSError, EOFError, zlib.error) as exc:
            raise InvalidInputError(
                f"{self._name!r}: expected gzip-compressed JSON, found damaged gzip data ({exc})", self._name
            ) from None

    def __enter__(self) -> _Gunzip:
        return self

    def __exit__(self, *exc: object) -> None:
        self._raw.close()


def _import_in_halves(name: str, output: str, size: int, progress: Progress | None) -> ImportStats | None:
    """Import the file read as two halves at once, or None when they cannot decide as one reading does."""
    if _many_threads(name):
        return None
    cut = halves.find_cut(name, size)
    if cut is None:
        return None
    end, start, before, after = cut
    files: list[AtomicOutput] = []  # the second half's staged rows
    second: halves.SecondHalf | None = None
    importer: _Importer | None = None
    try:
        try:
            files.extend(AtomicOutput(output) for _ in range(2))
            paths = (files[0].path, files[1].path)
            second = halves.SecondHalf(SECOND_HALF, name, output, start, before, paths, STAGE_MEMORY // 2)
        except (PvaError, OSError):  # no output there, or no process to be had: one reading says which error
            return None
        importer = _Importer(name, output, STAGE_MEMORY // 2)
        if progress is not None:
            progress.start("reading", end + len(after))  # the bytes this process reads; the child's in parallel
        read = _read_halves(importer, second, name, end, after, paths, progress)
        if read is None:
            return None
        if progress is not None:
            progress.finish()
        return _write_trace(importer, output, *read)
    finally:
        if second is not None:
            second.stop()
        if importer is not None:
            importer.close()
        for file in files:
            file.abort()


#: Bytes of the start of a trace looked at to see whether its threads are many and short.
_THREADS_SAMPLE = 4 << 20
_TID = re.compile(rb'"tid"\s*:\s*(-?[0-9]+)')


def _many_threads(name: str) -> bool:
    """Whether the start of the trace names many threads of few events each (more than 1,000, one
    for every 16 events or fewer): merging two halves would then cost more than it saves."""
    with open(name, "rb") as handle:
        sample = handle.read(_THREADS_SAMPLE)
    tids = _TID.findall(sample)
    distinct = len(set(tids))
    return distinct > 1000 and distinct * 16 > len(tids)


def _read_halves(
    importer: _Importer,
    second: halves.SecondHalf,
    name: str,
    end: int,
    after: bytes,
    files: tuple[str, str],
    progress: Progress | None,
) -> tuple[dict, dict] | None:
    """Read the first half into `importer` and merge the second; the keys besides the events and
    the status of the reading, or None when the halves cannot decide."""
    try:
        with halves.HalfReader(name, 0, end, after=after) as raw:
            others, status = stage_fast(importer, raw, progress.advance if progress is not None else None)
    except (NotFastError, InvalidInputError):
        return None
    if status.get("keys_after_events"):  # the cut was not in the events array
        return None
    answer = second.result()
    if answer is None or not importer.merge(answer["half"], files):
        return None
    others.update(answer["others"])
    return others, answer["status"]


def stage_fast(importer: _Importer, raw: Readable, progress: Callable[[int], None] | None = None) -> tuple[dict, dict]:
    """Check and stage every event of `raw` with the fast reader: the keys besides the events and
    the status of the reading (NotFastError where only the exact reader can tell)."""
    blocks, others, status = read_trace_blocks_fast(raw, progress=progress)
    for prefix, first, events in blocks:
        importer.add_block(prefix, first, events)
    return others, status


def _write_trace(importer: _Importer, output: str, others: dict, status: dict) -> ImportStats:
    """Write the trace file of a whole reading."""
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
