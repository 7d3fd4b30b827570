"""Chrome trace event JSON out (chrome://tracing, the Perfetto UI): a pva trace file's events, or a
report's execution (one track per IPU, each step an event with its cycles, active tiles and
balances as args, times from the cycle counters and the clock).

Events are serialised with orjson and written in large blocks; a report's steps are read in one
SQL pass, already in the order they are written.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from itertools import groupby
from typing import Any, BinaryIO

import orjson

#: Bytes gathered before one write to the output.
BLOCK_SIZE = 1 << 20
#: Tracks of one IPU that hold events overlapping its first track get tids ipu + lane * this.
LANE_TID_STRIDE = 1000


def dumps(value: Any) -> bytes:
    """Compact JSON of `value` (orjson; the standard library for what orjson refuses, such as integers
    beyond 64 bits). Non-finite numbers raise ValueError, as JSON has none."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:
        return json.dumps(value, separators=(",", ":"), allow_nan=False).encode()


def loads(text: str) -> Any:
    """The value of JSON text stored in a trace file (orjson; the standard library for what it refuses)."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


class ChromeTraceWriter:
    """Streams a Chrome trace event JSON object: events one per line, then the other fields."""

    def __init__(self, handle: BinaryIO) -> None:
        self._out = handle
        self._count = 0
        self._buffer = bytearray(b'{"traceEvents":[\n')

    def event(self, event: dict) -> None:
        """Write one event (a dict of JSON values)."""
        buffer = self._buffer
        if self._count:
            buffer += b",\n"
        buffer += dumps(event)
        self._count += 1
        if len(buffer) >= BLOCK_SIZE:
            self._flush()

    def raw_event(self, text: bytes) -> None:
        """Write one event given as its JSON text."""
        buffer = self._buffer
        if self._count:
            buffer += b",\n"
        buffer += text
        self._count += 1
        if len(buffer) >= BLOCK_SIZE:
            self._flush()

    def _flush(self) -> None:
        self._out.write(self._buffer)
        self._buffer.clear()

    def close(self, fields: dict | None = None) -> None:
        """End the event array and write the other top-level fields."""
        buffer = self._buffer
        buffer += b"\n]"
        for key, value in (fields or {}).items():
            if key == "traceEvents":
                continue
            buffer += b"," + dumps(key) + b":" + dumps(value)
        buffer += b"}\n"
        self._flush()

    @property
    def count(self) -> int:
        return self._count


def _finite(value: Any) -> bool:
    """Whether a REAL column's value is a finite number."""
    return (type(value) is float or type(value) is int) and -_LARGEST <= value <= _LARGEST


def _micro(value: float) -> float | int:
    rounded = round(value, 3)
    return int(rounded) if float(rounded).is_integer() else rounded


def write_trace_file_events(path: str, out: ChromeTraceWriter) -> dict:
    """Write the events of a pva trace file; return its other top-level Chrome fields."""
    from .trace_reader import TraceReader

    reader = TraceReader(path)
    try:
        threads = reader.threads()
        for pid, name, sort_index in reader.processes():
            if name:
                out.event({"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": name}})
            if sort_index is not None:
                out.event(
                    {"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0, "args": {"sort_index": sort_index}}
                )
            for tid, thread_name, thread_sort in threads.get(pid, []):
                if thread_name:
                    out.event({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": thread_name}})
                if thread_sort is not None:
                    out.event(
                        {
                            "name": "thread_sort_index",
                            "ph": "M",
                            "pid": pid,
                            "tid": tid,
                            "args": {"sort_index": thread_sort},
                        }
                    )
                _write_thread(reader, pid, tid, out)
        for pid, _name, _sort in reader.processes():
            grouped: dict[tuple[str, int], dict] = {}
            for (name, series), (times, values) in sorted(reader.counter_samples(pid).items()):
                for t, v in zip(times, values):
                    grouped.setdefault((name, t), {})[series or name] = int(v) if float(v).is_integer() else v
            for (name, t), args in sorted(grouped.items(), key=lambda item: (item[0][1], item[0][0])):
                out.event({"name": name, "ph": "C", "ts": t, "pid": pid, "args": args})
        fields_text = reader.metadata.get("chrome_trace_fields", "")
        fields = json.loads(fields_text) if fields_text else {}
        return fields if isinstance(fields, dict) else {}
    finally:
        reader.close()


def _write_thread(reader: Any, pid: int, tid: int, out: ChromeTraceWriter) -> None:
    data = reader.thread_events(pid, tid)
    args_of = dict(
        reader.query(
            "SELECT a.event, a.args FROM event_args a JOIN events e ON e.id = a.event WHERE e.pid = ? AND e.tid = ?",
            (pid, tid),
        )
    )
    ids = data.ids.tolist()
    channels = data.channels.tolist()
    starts = data.timestamps.tolist()
    durations = data.durations.tolist()
    complete = data.complete.tolist()
    names = data.channel_names
    for k, label in enumerate(data.labels):
        event: dict[str, Any] = {
            "name": label,
            "ph": "X" if complete[k] else "B",
            "ts": starts[k],
            "pid": pid,
            "tid": tid,
        }
        category = names.get(channels[k], "")
        if category:
            event["cat"] = category
        if complete[k]:
            event["dur"] = durations[k]
        text = args_of.get(ids[k])
        if text:
            args = loads(text)
            extra = args.pop("_chrome", None) if isinstance(args, dict) else None
            if isinstance(extra, dict):
                phase = extra.pop("ph", None)
                if phase in ("i", "I"):
                    event["ph"] = phase
                    event.pop("dur", None)
                for key, value in extra.items():
                    event.setdefault(key, value)
            if args:
                event["args"] = args
        out.event(event)


def write_report_execution(path: str, out: ChromeTraceWriter) -> dict:
    """Write a report's execution: one track per IPU, one event per step (and per run).

    One SQL pass reads the steps of each IPU ordered by start (longest first, then by step), the
    order the events are written in, and the type of every value read is checked; a step that
    overlaps an earlier one without nesting in it goes to the IPU's first extra track where it
    nests, named "IPU n (overlap k)" and declared just before its first event.
    """
    from .errors import CorruptReportError
    from .profile_reader import ProfileReader

    reader = ProfileReader(path)
    try:
        reader.check_value_types(_SMALL_TABLES)
        reader.read_without_memory_map()
        clock = float(reader.target["clock_frequency"]) or 1.0
        scale = 1e6 / clock
        pid = 1
        out.event(
            {
                "name": "process_name",
                "ph": "M",
                "pid": pid,
                "tid": 0,
                "args": {"name": f"IPU execution: {os.path.basename(path)}"},
            }
        )
        runs: dict[Any, list] = {ipu: [] for (ipu,) in reader.query("SELECT id FROM ipus ORDER BY id")}
        for ipu, run, start, end in reader.query('SELECT ipu, run, start, "end" FROM run_cycles_by_ipu'):
            name = reader.query_one("SELECT name FROM runs WHERE id = ?", (run,))
            label = f"Run {run}" + (f" {name[0]}" if name and name[0] else "")
            runs.setdefault(ipu, []).append(
                (int(start), int(end), {"name": label, "cat": "run", "args": {"run": run, "cycles": int(end - start)}})
            )
        track = _Tracks(out, pid, scale)
        without_steps = sorted(runs, reverse=True)  # IPUs not reached yet, the next one last
        for ipu, rows in groupby(reader.export_rows(_STEP_EVENTS), key=lambda row: row[0]):
            while without_steps and without_steps[-1] < ipu:
                other = without_steps.pop()
                track.write_ipu(other, runs[other], iter(()))
            if without_steps and without_steps[-1] == ipu:
                without_steps.pop()
            track.write_ipu(ipu, runs.get(ipu, []), rows)
        for other in reversed(without_steps):
            track.write_ipu(other, runs[other], iter(()))
        if track.damaged:
            reader.check_value_types(("steps", "steps_by_ipu"))
            raise CorruptReportError(
                f"{reader.path!r}: steps_by_ipu holds a balance that is not a finite number", reader.path
            )
        return {
            "displayTimeUnit": "ns",
            "otherData": {
                "report": os.path.basename(path),
                "clock_frequency_hz": clock,
                "time_base": "IPU cycle counters divided by the tile clock",
            },
        }
    finally:
        reader.close()


#: Tables the execution export reads besides the steps (whose values the writer checks as it goes).
_SMALL_TABLES = ("target", "ipus", "runs", "run_cycles_by_ipu")
#: Strings whose JSON text is kept for reuse, at most.
_QUOTED_LIMIT = 1024
#: Largest finite double: a balance beyond it is infinite.
_LARGEST = 1.7976931348623157e308
#: Profiled steps of the execution per IPU, in the order their events are written: by IPU, then by
#: start, longest first, then by step.
_STEP_EVENTS = (
    "SELECT b.ipu, b.cycles_base, b.all_cycles_from_min, b.all_cycles_to_max, "
    "b.step_id, s.run, s.type, b.cycles, b.tile_cycles_max, b.active_tiles, b.tile_balance, "
    "b.active_tile_balance, b.thread_balance, b.data_in, b.data_out, b.data_balance, s.program, "
    "s.compute_set, s.name FROM steps_by_ipu b JOIN steps s ON s.id = b.step_id WHERE b.profiled = 1 "
    "ORDER BY b.ipu, b.cycles_base + b.all_cycles_from_min, "
    "max(b.cycles_base + b.all_cycles_from_min, b.cycles_base + b.all_cycles_to_max) DESC, b.step_id"
)


#: A step's event, with its fields in the order of the dict exporters write: name, cat, args, ph, ts,
#: dur, pid, tid (%a of an int or a float is its JSON number).
_STEP_JSON = (
    b'{"name":%s,"cat":%s,"args":{"step":%d,"run":%d,"type":%s,"cycles":%d,"tile_cycles_max":%d,'
    b'"active_tiles":%d,"tile_balance":%a,"active_tile_balance":%a,"thread_balance":%a,"data_in":%d,'
    b'"data_out":%d,"data_balance":%a%s},"ph":"X","ts":%a,"dur":%a,"pid":%d,"tid":%d}'
)


class _Tracks:
    """Writes each IPU's runs and steps as events on its tracks."""

    def __init__(self, out: ChromeTraceWriter, pid: int, scale: float) -> None:
        self._out = out
        self._pid = pid
        self._scale = scale
        self._quoted: dict[str, bytes] = {}
        self.damaged = False

    def _quote(self, text: str) -> bytes:
        found = self._quoted.get(text)
        if found is None:
            found = dumps(text)
            if len(self._quoted) < _QUOTED_LIMIT:  # step types repeat; names mostly do not
                self._quoted[text] = bytes(found)
        return found

    def write_ipu(self, ipu: int, run_items: list, rows: Iterator) -> None:
        """The events of one IPU: its runs and steps merged by start (longest first, runs before steps)."""
        out, pid, scale, quote = self._out, self._pid, self._scale, self._quote
        order = sorted(range(len(run_items)), key=lambda k: (run_items[k][0], -run_items[k][1], k))
        queued = [run_items[k] for k in order]
        lanes: list[list[int]] = []  # per lane, the ends of the events still open on it
        tids: list[int] = []

        def lane_of(start: int, end: int) -> int:
            lane = 0
            while lane < len(lanes):
                stack = lanes[lane]
                while stack and stack[-1] <= start:
                    stack.pop()
                if not stack or end <= stack[-1]:
                    stack.append(end)
                    return lane
                lane += 1
            lanes.append([end])
            tid = ipu if lane == 0 else ipu + lane * LANE_TID_STRIDE
            tids.append(tid)
            name = f"IPU {ipu}" + (f" (overlap {lane})" if lane else "")
            out.event({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}})
            out.event({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid, "args": {"sort_index": tid}})
            return lane

        def write_run(start: int, end: int, event: dict) -> None:
            tid = tids[lane_of(start, end)]
            out.event(
                {
                    **event,
                    "ph": "X",
                    "ts": _micro(start * scale),
                    "dur": _micro((end - start) * scale),
                    "pid": pid,
                    "tid": tid,
                }
            )

        position = 0
        last_start, last_end = -(1 << 63), 1 << 63
        for row in rows:
            (row_ipu, base, first, last, step, run, kind, cycles, tile_max, active, tile_balance, active_balance,
             thread_balance, data_in, data_out, data_balance, program, compute_set, name) = row  # fmt: skip
            if not (
                int is type(row_ipu) is type(base) is type(first) is type(last) is type(step) is type(run) is type(cycles)
                is type(tile_max) is type(active) is type(data_in) is type(data_out)
                and str is type(kind) is type(name)
                and (program is None or type(program) is int)
                and (compute_set is None or type(compute_set) is int)
                and _finite(tile_balance) and _finite(active_balance) and _finite(thread_balance)
                and _finite(data_balance)
            ):  # fmt: skip
                self.damaged = True
                return
            start = base + first
            end = max(start, base + last)
            if start < last_start or (start == last_start and end > last_end):
                raise AssertionError("SQLite returned the steps out of the order the query sorts them in")
            last_start, last_end = start, end
            while position < len(queued) and (queued[position][0], -queued[position][1]) <= (start, -end):
                write_run(*queued[position])
                position += 1
            tid = tids[lane_of(start, end)]
            ts = round(start * scale, 3)
            whole = int(ts)
            dur = round((end - start) * scale, 3)
            whole_dur = int(dur)
            extra = b""
            if program is not None:
                extra = b',"program":%d' % program
            if compute_set is not None:
                extra += b',"compute_set":%d' % compute_set
            quoted_kind = quote(kind)
            out.raw_event(
                _STEP_JSON
                % (
                    quote(name) if name else quoted_kind,
                    quoted_kind,
                    step,
                    run,
                    quoted_kind,
                    cycles,
                    tile_max,
                    active,
                    tile_balance,
                    active_balance,
                    thread_balance,
                    data_in,
                    data_out,
                    data_balance,
                    extra,
                    whole if whole == ts else ts,
                    whole_dur if whole_dur == dur else dur,
                    pid,
                    tid,
                )
            )
        for item in queued[position:]:
            write_run(*item)
