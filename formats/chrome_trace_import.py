"""Chrome trace event JSON in and out (chrome://tracing, the Perfetto UI, PyTorch profiler traces).

In: the array form ``[{...}, ...]`` (whose closing bracket Chrome allows to be missing) and the
object form ``{"traceEvents": [...], ...}``; phases X (complete), B/E (begin/end), i/I (instant),
C (counter) and M (process/thread names and sort order); timestamps and durations in
microseconds. Each event's ``args`` are kept as JSON (for example SigmaStar's per-layer
``total_cycle`` and cycle percentages), its category becomes the event's channel, and keys
Chrome defines but the trace file has no column for are kept under ``args["_chrome"]``. Events
of one thread that overlap without nesting are moved to extra threads named "... (overlap N)",
because trace file events nest. Other phases (async, flow, samples, objects) are counted and
skipped.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from array import array
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

from .detect import check_regular_file
from .errors import InvalidInputError
from .jsonplain import plain
from .legacy.jsonstream import json_events, open_binary
from .legacy.tree import InputProblem, build_tree, describe, location
from .progress import Progress

#: Phases imported; any other phase is counted and skipped.
PHASES = frozenset("XBEiICM")
#: Largest |timestamp| accepted, in microseconds (about 146,000 years).
MAX_TIME = 1 << 62
#: Keys of an event that map to trace file columns.
_CORE_KEYS = frozenset({"name", "cat", "ph", "ts", "dur", "pid", "tid", "args"})
#: Ids given to processes and threads named by strings start here.
_SYNTHETIC_ID = 1 << 40
_OPEN = None


@dataclasses.dataclass
class ImportStats:
    """What an import read and wrote."""

    events: int = 0
    threads: int = 0
    counter_samples: int = 0
    skipped: dict[str, int] = dataclasses.field(default_factory=dict)
    truncated: bool = False
    warnings: list[str] = dataclasses.field(default_factory=list)


class _ThreadData:
    """The events of one (pid, tid) collected before writing, as compact columns."""

    __slots__ = ("labels", "channels", "starts", "ends", "args", "stack")

    def __init__(self) -> None:
        self.labels: list[str] = []
        self.channels: list[str] = []
        self.starts = array("q")
        self.ends: list[int | None] = []
        self.args: list[str | None] = []
        self.stack: list[int] = []  # indexes of B events waiting for their E


def _one_value(first: tuple[str, Any], events: Iterator) -> Iterator[tuple[str, Any]]:
    yield first
    if first[0] not in ("start_map", "start_array"):
        return
    depth = 1
    for event in events:
        yield event
        kind = event[0]
        if kind == "start_map" or kind == "start_array":
            depth += 1
        elif kind == "end_map" or kind == "end_array":
            depth -= 1
            if depth == 0:
                return


def read_trace_items(
    raw: BinaryIO, name: str, *, progress: Callable[[int], None] | None = None
) -> tuple[Iterator[tuple[list, Any]], dict, dict]:
    """The trace events of a Chrome trace file as (JSON location parts, value), one at a time.

    Also returns the other top-level keys (filled in as they are read; complete once the
    iterator is exhausted) and a status dict (``truncated`` when the array was never closed).
    """
    others: dict = {}
    status = {"truncated": False}
    events = json_events(raw, None, progress=progress)

    def items() -> Iterator[tuple[list, Any]]:
        try:
            first = next(events)
        except StopIteration:
            raise InvalidInputError(f"{name!r}: the file holds no JSON value", name) from None
        except InputProblem as problem:
            raise InvalidInputError(f"{name!r}: the start of the document{problem.where()}: {problem}", name) from None
        if first[0] == "start_array":
            yield from _array_items(events, [], name, status)
            return
        if first[0] != "start_map":
            value = build_tree(_one_value(first, events), name)
            raise InvalidInputError(
                f"{name!r}: $: expected an array of trace events or an object with "
                f"traceEvents, found {describe(value)}",
                name,
            )
        found = False
        while True:
            try:
                event = next(events)
            except StopIteration:
                return
            except InputProblem as problem:
                raise InvalidInputError(f"{name!r}: $ (top level){problem.where()}: {problem}", name) from None
            if event[0] == "end_map":
                break
            key = event[1]
            try:
                start = next(events)
            except InputProblem as problem:
                raise InvalidInputError(f"{name!r}: {location([key])}{problem.where()}: {problem}", name) from None
            if key == "traceEvents" and start[0] == "start_array":
                found = True
                yield from _array_items(events, ["traceEvents"], name, status)
                if status["truncated"]:
                    return
            else:
                others[key] = plain(build_tree(_one_value(start, events), name, prefix=[key]))
        if not found:
            raise InvalidInputError(
                f"{name!r}: $: expected a traceEvents array, found top-level keys {', '.join(others) or 'none'}", name
            )
        try:
            next(events)
        except StopIteration:
            pass
        except InputProblem as problem:
            raise InvalidInputError(f"{name!r}: $ (after the end){problem.where()}: {problem}", name) from None

    return items(), others, status


def _array_items(events: Iterator, prefix: list, name: str, status: dict) -> Iterator[tuple[list, Any]]:
    index = 0
    while True:
        try:
            first = next(events)
        except StopIteration:
            status["truncated"] = True
            return
        except InputProblem as problem:
            if "premature EOF" in str(problem) or "incomplete" in str(problem).lower():
                status["truncated"] = True  # Chrome accepts an array whose ']' is missing
                return
            raise InvalidInputError(
                f"{name!r}: {location(prefix + [index])}{problem.where()}: {problem}", name
            ) from None
        if first[0] == "end_array":
            return
        parts = prefix + [index]
        value = build_tree(_one_value(first, events), name, prefix=parts)
        yield parts, value
        index += 1


# -- importing ----------------------------------------------------------------------------------


class _Importer:
    def __init__(self, name: str) -> None:
        self.name = name
        self.threads: dict[tuple[int, int], _ThreadData] = {}
        self.process_names: dict[int, str] = {}
        self.process_order: dict[int, int] = {}
        self.thread_names: dict[tuple[int, int], str] = {}
        self.thread_order: dict[tuple[int, int], int] = {}
        self.counters: dict[tuple[int, str, str], tuple[array, list]] = {}
        self.string_pids: dict[str, int] = {}
        self.string_tids: dict[tuple[int, str], int] = {}
        self.stats = ImportStats()
        self.unmatched_ends = 0

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

    def _args(self, event: dict, parts: list) -> dict | None:
        args = event.get("args")
        if args is not None and not isinstance(args, dict):
            raise self.fail(parts + ["args"], f"expected an object, found {describe(args)}")
        extra = {k: v for k, v in event.items() if k not in _CORE_KEYS}
        if extra:
            args = dict(args or {})
            args["_chrome"] = extra
        return args

    def add(self, parts: list, event: Any) -> None:
        if not isinstance(event, dict):
            raise self.fail(parts, f"expected a trace event (an object), found {describe(event)}")
        phase = event.get("ph")
        if not isinstance(phase, str):
            raise self.fail(parts + ["ph"], f'expected the event phase (a string such as "X"), found {describe(phase)}')
        if phase not in PHASES:
            self.stats.skipped[phase] = self.stats.skipped.get(phase, 0) + 1
            return
        pid = self._pid(event.get("pid"), parts + ["pid"])
        tid = self._tid(pid, event.get("tid"), parts + ["tid"])
        label = self._string(event.get("name"), parts + ["name"], "the event name")
        if phase == "M":
            self._metadata(event, parts, pid, tid, label)
            return
        ts = self._time(event.get("ts"), parts + ["ts"], "the timestamp")
        if phase == "C":
            self._counter(event, parts, pid, label, ts)
            return
        channel = self._string(event.get("cat"), parts + ["cat"], "the category")
        thread = self.threads.get((pid, tid))
        if thread is None:
            thread = self.threads[(pid, tid)] = _ThreadData()
        if phase == "E":
            if not thread.stack:
                self.unmatched_ends += 1
                return
            index = thread.stack.pop()
            end = round(ts)
            if end < thread.starts[index]:
                raise self.fail(
                    parts + ["ts"], f"the end ({ts} µs) comes before its begin event ({thread.starts[index]} µs)"
                )
            thread.ends[index] = end
            args = self._args(event, parts)
            if args:
                merged = json.loads(thread.args[index]) if thread.args[index] else {}
                merged.update(args)
                thread.args[index] = _json(merged, self, parts)
            return
        args = self._args(event, parts)
        if phase in "iI":
            args = dict(args or {})
            args.setdefault("_chrome", {})["ph"] = phase
        start = round(ts)
        if phase == "X":
            duration = event.get("dur", 0)
            duration = self._time(duration, parts + ["dur"], "the duration")
            if duration < 0:
                raise self.fail(parts + ["dur"], f"expected a duration >= 0, found {describe(duration)}")
            end: int | None = round(ts + duration)
        elif phase == "B":
            end = _OPEN
            thread.stack.append(len(thread.labels))
        else:  # instant
            end = start
        thread.labels.append(label)
        thread.channels.append(channel)
        thread.starts.append(start)
        thread.ends.append(end)
        thread.args.append(_json(args, self, parts) if args else None)
        self.stats.events += 1

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
            times, values = self.counters.setdefault(key, (array("q"), []))
            times.append(round(ts))
            values.append(float(value))
            self.stats.counter_samples += 1

    def finish(self) -> None:
        for thread in self.threads.values():
            thread.stack.clear()  # B events never ended stay open
        if self.unmatched_ends:
            self.stats.warnings.append(f"{self.unmatched_ends} end (E) event(s) without a begin event were skipped")

    def write(self, output: str, fields: str = "") -> None:
        from .trace_writer import TraceWriter

        with TraceWriter(output, producer="pva convert") as writer:
            writer.set_metadata(source_format="Chrome trace event JSON")
            if fields:
                writer.set_metadata(chrome_trace_fields=fields)
            for pid, name in self.process_names.items():
                writer.add_process(pid, name, self.process_order.get(pid))
            for pid in self.process_order:
                if pid not in self.process_names:
                    writer.add_process(pid, "", self.process_order[pid])
            lanes_of: dict[tuple[int, int], int] = {}
            used = set(self.threads)
            for (pid, tid), thread in sorted(self.threads.items()):
                ends = [_INFINITY if e is None else e for e in thread.ends]
                lanes = assign_lanes(list(thread.starts), ends)
                count = max(lanes, default=-1) + 1
                for lane in range(count):
                    if lane == 0:
                        lane_tid = tid
                    else:
                        lane_tid = _free_tid(pid, tid, lane, used)
                        base = self.thread_names.get((pid, tid), f"thread {tid}")
                        writer.add_thread(pid, lane_tid, f"{base} (overlap {lane})")
                    picks = [k for k, lane_of in enumerate(lanes) if lane_of == lane]
                    writer.add_events(
                        pid,
                        lane_tid,
                        [thread.labels[k] for k in picks],
                        [thread.starts[k] for k in picks],
                        [None if thread.ends[k] is None else thread.ends[k] - thread.starts[k] for k in picks],
                        channels=[thread.channels[k] for k in picks],
                        parents="nest",
                        args=[thread.args[k] for k in picks],
                    )
                lanes_of[(pid, tid)] = count
                self.stats.threads += count
            for (pid, tid), name in self.thread_names.items():
                writer.add_thread(pid, tid, name, self.thread_order.get((pid, tid)))
            for (pid, tid), index in self.thread_order.items():
                if (pid, tid) not in self.thread_names:
                    writer.add_thread(pid, tid, "", index)
            for (pid, label, series), (times, values) in self.counters.items():
                writer.add_counter_samples(pid, label, list(times), values, series)


_INFINITY = 1 << 63


def _free_tid(pid: int, tid: int, lane: int, used: set) -> int:
    candidate = tid + lane * (1 << 32)
    while (pid, candidate) in used or not -(1 << 63) <= candidate < (1 << 63):
        candidate = (candidate + 1) % (1 << 62)
    used.add((pid, candidate))
    return candidate


def _json(value: Any, importer: _Importer, parts: list) -> str:
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
    """Convert a Chrome trace event JSON file into a pva trace file (read it with pva.openTrace)."""
    name = os.fspath(path)
    info = check_regular_file(name, "Chrome trace file")
    importer = _Importer(name)
    if progress is not None:
        progress.start("reading", info.st_size)
    with open_binary(name) as raw:
        items, others, status = read_trace_items(raw, name, progress=progress.advance if progress else None)
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
    importer.write(os.fspath(output), other_fields)
    return stats
