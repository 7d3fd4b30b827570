"""What a trace holds and where its time goes: `pva info`, `pva summary`, `pva optime` and `pva diff`
of a trace (a trace file, or a Chrome / PyTorch profiler trace converted on the fly).

Times are microseconds. A thread's busy time is the time its root events cover (events of one
thread nest, so each instant of a thread counts once; overlapping events were moved to "(overlap
N)" threads when the trace was converted, which count as threads of their own). An event's self
time is its duration less its children's. The traced time is the sum of the threads' busy
times, which is the sum of every event's self time: shares of self time add up to 100%.
"""

from __future__ import annotations

import dataclasses
import json
from collections import defaultdict
from collections.abc import Iterator

import numpy as np

from ..trace import TraceReport
from .compare import Difference
from .optime import OperatorTime


@dataclasses.dataclass
class ThreadTime:
    """One thread: its events and the time they cover."""

    pid: int
    tid: int
    process: str
    thread: str
    events: int
    busy: int
    start: int | None
    end: int | None


@dataclasses.dataclass
class _Collected:
    threads: list[ThreadTime]
    total: dict[str, int]  # label -> time of its events, nested events of the same label once
    self_time: dict[str, int]  # label -> self time
    counts: dict[str, int]  # label -> events
    by_category: dict[str, int]  # channel -> self time


def _threads(trace: TraceReport) -> Iterator[tuple]:
    for process in trace.processes:
        for thread in process.threads:
            yield process, thread


def _collect(trace: TraceReport) -> _Collected:
    threads: list[ThreadTime] = []
    total: dict[str, int] = defaultdict(int)
    self_time: dict[str, int] = defaultdict(int)
    counts: dict[str, int] = defaultdict(int)
    by_category: dict[str, int] = defaultdict(int)
    for process, thread in _threads(trace):
        columns = thread.eventColumns()
        count = len(columns)
        if not count:
            threads.append(ThreadTime(process.pid, thread.tid, process.name, thread.name, 0, 0, None, None))
            continue
        roots = columns.parents < 0
        ends = columns.timestamps + columns.durations
        busy = int(columns.durations[roots].sum())
        start, end = int(columns.timestamps.min()), int(ends.max())
        threads.append(ThreadTime(process.pid, thread.tid, process.name, thread.name, count, busy, start, end))
        labels = columns.labels
        for label, value in zip(labels, columns.selfTimes.tolist()):
            self_time[label] += value
            counts[label] += 1
        for channel, value in zip(columns.channels, columns.selfTimes.tolist()):
            by_category[channel] += value
        parents = columns.parents.tolist()
        durations = columns.durations.tolist()
        for k, label in enumerate(labels):
            if not _inside_same_label(k, label, labels, parents):
                total[label] += durations[k]
    return _Collected(threads, dict(total), dict(self_time), dict(counts), dict(by_category))


def _inside_same_label(k: int, label: str, labels: list[str], parents: list[int]) -> bool:
    """Whether event k lies inside an event of its own label (its time is then counted there)."""
    parent = parents[k]
    while parent >= 0:
        if labels[parent] == label:
            return True
        parent = parents[parent]
    return False


def trace_info(trace: TraceReport) -> dict:
    """What `pva info` shows of a trace."""
    metadata = trace.metadata
    threads = list(_threads(trace))
    span = trace.timeSpan
    start, end = span if span is not None else (None, None)
    fields = json.loads(metadata.get("chrome_trace_fields") or "{}")
    origin = metadata.get("time_origin_ns")
    return {
        "path": trace.path,
        "kind": "trace",
        "format_version": metadata.get("format_version", ""),
        "producer": metadata.get("producer", ""),
        "source_format": metadata.get("source_format", ""),
        "complete": trace.isComplete,
        "processes": [
            {"pid": p.pid, "name": p.name, "labels": p.labels, "threads": len(p.threads)} for p in trace.processes
        ],
        "num_processes": len(trace.processes),
        "num_threads": len(threads),
        "num_events": trace.numEvents,
        "num_flows": trace.numFlows,
        "span": {"start": start, "end": end, "duration": None if start is None or end is None else end - start},
        "units": {
            "time": "us",
            "display_time_unit": metadata.get("display_time_unit") or None,
            "time_origin_ns": int(origin) if origin else None,
        },
        "trace_fields": sorted(fields),
    }


def info_lines(info: dict) -> list[str]:
    """`pva info`'s text for a trace."""
    span = info["span"]
    units = info["units"]
    lines = [
        f"{info['path']}",
        f"  Format:      pva trace file {info['format_version']}, written by {info['producer'] or 'unknown'}"
        + (f" from a {info['source_format']}" if info["source_format"] else ""),
        f"  Processes:   {info['num_processes']:,}",
        f"  Threads:     {info['num_threads']:,}",
        f"  Events:      {info['num_events']:,}",
        f"  Flows:       {info['num_flows']:,}",
    ]
    if span["start"] is None:
        lines.append("  Span:        no events")
    else:
        lines.append(f"  Span:        {span['start']:,} to {span['end']:,} us ({_time(span['duration'])})")
    unit = "microseconds"
    if units["display_time_unit"]:
        unit += f" (the trace asks to show {units['display_time_unit']})"
    if units["time_origin_ns"] is not None:
        unit += f"; timestamp 0 is {units['time_origin_ns']:,} ns since the Unix epoch"
    lines.append(f"  Time unit:   {unit}")
    active = [p for p in info["processes"] if p["threads"]]
    for process in active[:20]:
        labels = f" [{process['labels']}]" if process["labels"] else ""
        lines.append(f"    process {process['pid']} {process['name']!r}{labels}: {process['threads']:,} thread(s)")
    if len(active) > 20:
        lines.append(f"    ... and {len(active) - 20:,} more processes with threads")
    if len(active) < len(info["processes"]):
        lines.append(f"    ({len(info['processes']) - len(active):,} more processes named by metadata, without events)")
    if info["trace_fields"]:
        lines.append(f"  Trace keys:  {', '.join(info['trace_fields'])}")
    return lines


def _time(us: float) -> str:
    if us >= 1e6:
        return f"{us / 1e6:,.3f} s"
    if us >= 1e3:
        return f"{us / 1e3:,.3f} ms"
    return f"{us:,.0f} us"


def trace_summary(trace: TraceReport, top: int = 10) -> dict:
    """What `pva summary` shows of a trace: busy time per process and thread, the events with the most
    total and self time (by label), and the share of the traced time per category (by self time)."""
    found = _collect(trace)
    traced = sum(t.busy for t in found.threads)

    def share(value: int) -> float:
        return value / traced if traced else 0.0

    processes: dict[int, dict] = {}
    for t in found.threads:
        entry = processes.setdefault(t.pid, {"pid": t.pid, "name": t.process, "busy": 0, "threads": []})
        entry["busy"] += t.busy
        entry["threads"].append({"tid": t.tid, "name": t.thread, "events": t.events, "busy": t.busy})

    def ranked(values: dict[str, int]) -> list[dict]:
        rows = sorted(values.items(), key=lambda item: (-item[1], item[0]))
        rows = rows if top <= 0 else rows[:top]
        return [
            {"name": name, "time": value, "events": found.counts.get(name, 0), "share": share(found.self_time[name])}
            for name, value in rows
        ]

    return {
        "path": trace.path,
        "traced_time": traced,
        "processes": list(processes.values()),
        "top_by_total": ranked(found.total),
        "top_by_self": ranked(found.self_time),
        "categories": [
            {"category": name, "self_time": value, "share": share(value)}
            for name, value in sorted(found.by_category.items(), key=lambda item: (-item[1], item[0]))
        ],
    }


def summary_lines(summary: dict) -> list[str]:
    """`pva summary`'s text for a trace."""
    traced = summary["traced_time"]

    def pct(value: float) -> str:
        return f"{100 * value:6.2f}%"

    lines = [f"Trace: {summary['path']}", f"Traced time (busy time of all threads): {_time(traced)}", ""]
    lines.append("Busy time by process and thread:")
    for process in summary["processes"]:
        lines.append(f"  process {process['pid']} {process['name']!r}: {_time(process['busy'])}")
        for thread in process["threads"][:50]:
            busy = thread["busy"] / traced if traced else 0.0
            lines.append(
                f"    thread {thread['tid']} {thread['name']!r}: {_time(thread['busy'])} "
                f"({pct(busy).strip()} of traced), {thread['events']:,} events"
            )
        if len(process["threads"]) > 50:
            lines.append(f"    ... and {len(process['threads']) - 50:,} more threads")
    for key, title in (("top_by_total", "total"), ("top_by_self", "self")):
        lines += ["", f"Events with the most {title} time (by name; share is of self time):"]
        width = min(60, max((len(r["name"]) for r in summary[key]), default=4))
        for row in summary[key]:
            name = row["name"] if len(row["name"]) <= width else row["name"][: width - 3] + "..."
            lines.append(f"  {name:<{width}} {_time(row['time']):>14} {row['events']:>9,} events {pct(row['share'])}")
    lines += ["", "Share of traced time by category (self time):"]
    width = max((len(r["category"] or "(none)") for r in summary["categories"]), default=4)
    for row in summary["categories"]:
        lines.append(f"  {row['category'] or '(none)':<{width}} {_time(row['self_time']):>14} {pct(row['share'])}")
    return lines


def operator_times(trace: TraceReport, mode: str = "total", type_arg: str | None = None) -> list[OperatorTime]:
    """Seed 001's operator time cost over a trace, by self time (nested events counted once).

    An event's operator type is its name, or the value of args[`type_arg`] where the event has it.
    Total mode: one row per type, in descending order of time. Each mode: one row per event, in
    start order over the trace (ties by process and thread). `cycles` holds microseconds here."""
    if mode not in ("total", "each"):
        raise ValueError(f"mode must be 'total' or 'each', got {mode!r}")
    starts: list[np.ndarray] = []
    selves: list[np.ndarray] = []
    names: list[str] = []
    types: list[str] = []
    for _process, thread in _threads(trace):
        columns = thread.eventColumns()
        if not len(columns):
            continue
        given = thread.argValues(type_arg) if type_arg else {}
        names.extend(columns.labels)
        if given:
            types.extend(
                str(given[i]) if i in given else label for i, label in zip(columns.ids.tolist(), columns.labels)
            )
        else:
            types.extend(columns.labels)
        starts.append(columns.timestamps)
        selves.append(columns.selfTimes)
    if not names:
        return []
    self_times = np.concatenate(selves)
    total = int(self_times.sum())

    def share(value: float) -> float:
        return value / total if total else 0.0

    if mode == "total":
        by_type: dict[str, int] = defaultdict(int)
        for kind, value in zip(types, self_times.tolist()):
            by_type[kind] += value
        ranked = sorted(by_type.items(), key=lambda item: (-item[1], item[0]))
        return [OperatorTime(i, kind, kind, float(value), share(value)) for i, (kind, value) in enumerate(ranked)]
    order = np.argsort(np.concatenate(starts), kind="stable")
    values = self_times.tolist()
    return [
        OperatorTime(index, types[k], names[k], float(values[k]), share(values[k]))
        for index, k in enumerate(order.tolist())
    ]


def _short(name: str, width: int = 100) -> str:
    """A name cut to `width` characters for a table row (kernel names run to thousands)."""
    return name if len(name) <= width else name[: width - 3] + "..."


class _Count(Difference):
    """A count compared (events, flows, threads): shown, never a regression."""

    def is_regression(self, threshold: float) -> bool:
        return False


def trace_differences(a: TraceReport, b: TraceReport, type_arg: str | None = None) -> list[Difference]:
    """Two traces compared as `pva diff` compares reports: traced time, events, flows, and the self
    time of each operator type (microseconds), sorted by absolute change within each section."""
    info_a, info_b = trace_info(a), trace_info(b)
    times_a = {r.type: r.cycles for r in operator_times(a, "total", type_arg)}
    times_b = {r.type: r.cycles for r in operator_times(b, "total", type_arg)}
    found = [
        Difference("trace", "traced time [us]", sum(times_a.values()), sum(times_b.values()), "us"),
        Difference("trace", "span [us]", info_a["span"]["duration"] or 0, info_b["span"]["duration"] or 0, "us"),
        _Count("trace", "events", info_a["num_events"], info_b["num_events"]),
        _Count("trace", "flows", info_a["num_flows"], info_b["num_flows"]),
        _Count("trace", "threads", info_a["num_threads"], info_b["num_threads"]),
    ]
    operators = [
        Difference("self time by operator [us]", _short(name), times_a.get(name, 0.0), times_b.get(name, 0.0), "us")
        for name in sorted(set(times_a) | set(times_b))
    ]
    operators.sort(key=lambda d: (-abs(d.change or 0.0), d.item))
    return found + operators
