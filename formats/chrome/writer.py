"""Chrome trace event JSON out (chrome://tracing, the Perfetto UI): the writer, and a pva trace
file's events (a report's execution is formats.chrome.execution_events).

Events are serialised with orjson and written in large blocks.
"""

from __future__ import annotations

import json
from typing import Any, BinaryIO

import orjson

#: Bytes gathered before one write to the output.
BLOCK_SIZE = 1 << 20


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

    def raw_events(self, data: memoryview, count: int) -> None:
        """Write `count` events given as their JSON texts, each led by ",\\n"."""
        if not count:
            return
        if not self._count:
            data = data[2:]
        self._count += count
        if len(self._buffer) + len(data) < BLOCK_SIZE:
            self._buffer += data
            return
        self._flush()
        self._out.write(data)

    def _flush(self) -> None:
        self._out.write(self._buffer)
        self._buffer.clear()

    def close(self, fields: dict | None = None) -> None:
        """End the event array and write the other top-level fields."""
        buffer = self._buffer
        buffer += b"\n]"
        fields = dict(fields or {})
        fields["otherData"] = {**(fields.get("otherData") or {}), "generator": "pva"}  # what pva may replace
        for key, value in fields.items():
            if key == "traceEvents":
                continue
            buffer += b"," + dumps(key) + b":" + dumps(value)
        buffer += b"}\n"
        self._flush()

    @property
    def count(self) -> int:
        return self._count


def write_trace_file_events(path: str, out: ChromeTraceWriter) -> dict:
    """Write the events of a pva trace file; return its other top-level Chrome fields."""
    from ..trace.reader import TraceReader

    reader = TraceReader(path)
    try:
        threads = reader.threads()
        labels = reader.process_labels()
        for pid, name, sort_index in reader.processes():
            if name:
                out.event({"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": name}})
            if pid in labels:
                out.event({"name": "process_labels", "ph": "M", "pid": pid, "tid": 0, "args": {"labels": labels[pid]}})
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
        _write_flows(reader, out)
        fields_text = reader.metadata.get("chrome_trace_fields", "")
        fields = json.loads(fields_text) if fields_text else {}
        return fields if isinstance(fields, dict) else {}
    finally:
        reader.close()


def _write_flows(reader: Any, out: ChromeTraceWriter) -> None:
    """Each flow as an s event where it leaves and an f event ("bp": "e") at the start of the event it
    arrives at, sharing the flow's row id (a flow of several points comes out as its links)."""
    if not reader.has_flows:
        return
    rows = reader.query(
        "SELECT f.id, f.category, f.name, f.source_pid, f.source_tid, f.source_timestamp, f.target_pid, "
        "f.target_tid, coalesce(e.timestamp, f.target_timestamp) FROM flows f LEFT JOIN events e ON e.id = f.target "
        "ORDER BY f.id"
    )
    for flow_id, category, name, source_pid, source_tid, source_ts, target_pid, target_tid, target_ts in rows:
        head = {"cat": category, "name": name, "id": flow_id}
        out.event({"ph": "s", **head, "pid": source_pid, "tid": source_tid, "ts": source_ts})
        out.event({"ph": "f", **head, "pid": target_pid, "tid": target_tid, "ts": target_ts, "bp": "e"})


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
