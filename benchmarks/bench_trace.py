"""Trace benchmarks: opening a large trace, traversing it, and the cost of recording an event.

Run ``python -m benchmarks.bench_trace`` (``--size tiny`` for a smoke run in seconds). The trace
is generated once through formats.trace.writer and cached under ``.bench-cache/``: 1,000,000
events on 4 threads of 2 processes, nested as epochs > steps > operations. Every figure is
printed beside a baseline measured in the same run, and as a ratio to it.

Targets: opening the trace and listing its threads under 100 ms; a full traversal (the PVTI
tutorial's recursion through ``event.children()``) at 500,000 events/s or more.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import pathlib
import sqlite3
import tempfile
import time

import numpy as np

import pva
from formats.pop.schema import read_schema_text
from formats.trace.writer import TraceWriter
from pva import tracing

from .timing import best_of, ratio_line

SIZES = {
    "full": {"epochs": 50, "steps": 1666},
    "tiny": {"epochs": 5, "steps": 100},
}
THREADS = ((1001, 1), (1001, 2), (2002, 1), (2002, 3))
CACHE = pathlib.Path(__file__).resolve().parent.parent / ".bench-cache"
_GENERATOR_VERSION = 1


def trace_path(size: str) -> pathlib.Path:
    """The cached trace of a size, generated if missing."""
    schema = hashlib.sha256(read_schema_text("trace.sql").encode()).hexdigest()[:10]
    path = CACHE / f"trace-{size}-v{_GENERATOR_VERSION}-{schema}.pvti"
    if not path.exists():
        CACHE.mkdir(exist_ok=True)
        started = time.perf_counter()
        generate(path, **SIZES[size])
        print(f"generated {path.name} in {time.perf_counter() - started:.1f} s ({path.stat().st_size / 1e6:,.0f} MB)")
    return path


def _thread_events(rng: np.random.Generator, epochs: int, steps: int, first_id: int):
    """One thread's events in id (pre-)order: per epoch an ``Epoch:i`` root, a ``setup`` leaf, and
    `steps` steps of two operations each (5,000 events per epoch with the full size)."""
    per_epoch = 2 + 3 * steps
    labels: list[str] = []
    starts = np.empty(epochs * per_epoch, dtype=np.int64)
    lengths = np.empty_like(starts)
    parents = np.empty_like(starts)
    clock = 0
    for e in range(epochs):
        base = e * per_epoch
        ops = rng.integers(5, 60, size=(steps, 2))
        step_len = ops.sum(axis=1) + 3
        step_start = clock + 12 + np.concatenate([[0], np.cumsum(step_len + 1)[:-1]])
        epoch_len = int(step_start[-1] + step_len[-1] + 1 - clock) if steps else 12
        starts[base], lengths[base], parents[base] = clock, epoch_len, -1
        starts[base + 1], lengths[base + 1], parents[base + 1] = clock + 1, 10, first_id + base
        s = base + 2 + 3 * np.arange(steps)
        starts[s], lengths[s], parents[s] = step_start, step_len, first_id + base
        starts[s + 1], lengths[s + 1], parents[s + 1] = step_start + 1, ops[:, 0], first_id + s
        starts[s + 2], lengths[s + 2], parents[s + 2] = step_start + 2 + ops[:, 0], ops[:, 1], first_id + s
        labels.append(f"Epoch:{e}")
        labels.append("setup")
        labels.extend(("step", "matmul", "relu") * steps)
        clock += epoch_len + 100
    return labels, starts, lengths, parents


def generate(path: os.PathLike[str], *, epochs: int, steps: int, seed: int = 3) -> None:
    """Write the benchmark trace."""
    rng = np.random.default_rng(seed)
    with TraceWriter(path, producer="pva-benchmarks") as w:
        for pid, tid in THREADS:
            w.add_process(pid, f"python{pid}")
            w.add_thread(pid, tid, f"worker{tid}")
            labels, starts, lengths, parents = _thread_events(rng, epochs, steps, w.next_event_id)
            parent_list = [None if p < 0 else p for p in parents.tolist()]
            w.add_events(pid, tid, labels, starts, lengths, channels="poptorch", parents=parent_list)


class EpochStats:
    longest = None
    shortest = None
    average = 0
    count = 0


def traverse_events(events, stats: EpochStats) -> int:
    """The PVTI tutorial's traversal; returns the number of events visited."""
    visited = 0
    for event in events:
        visited += 1
        if event.label.startswith("Epoch"):
            stats.count += 1
            stats.average += (event.duration - stats.average) / stats.count
            if stats.longest is None or event.duration > stats.longest.duration:
                stats.longest = event
            if stats.shortest is None or event.duration < stats.shortest.duration:
                stats.shortest = event
        visited += traverse_events(event.children(), stats)
    return visited


def _line(*args, **kwargs) -> None:
    print(ratio_line(*args, decimals=1, **kwargs))


def bench_open(path: pathlib.Path, repeat: int) -> float:
    def open_and_list() -> int:
        with pva.openTrace(str(path)) as trace:
            return sum(len(p.threads) for p in trace.processes)

    def raw() -> int:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return len(conn.execute("SELECT pid, tid FROM threads").fetchall())
        finally:
            conn.close()

    t_pva, threads = best_of(open_and_list, repeat)
    t_raw, raw_threads = best_of(raw, repeat)
    assert threads == raw_threads
    print(f"open and list threads ({threads} threads)")
    _line(
        "pva.openTrace + processes/threads",
        t_pva * 1000,
        "ms",
        "sqlite3 connect + SELECT threads",
        t_raw * 1000,
        "target < 100 ms",
    )
    return t_pva * 1000


def bench_traversal(path: pathlib.Path, repeat: int) -> float:
    def cold():
        stats = EpochStats()
        with pva.openTrace(str(path)) as trace:
            visited = sum(traverse_events(thread.events, stats) for p in trace.processes for thread in p.threads)
        return visited, stats.count, stats.longest.duration, round(stats.average, 3)

    trace = pva.openTrace(str(path))

    def warm():
        stats = EpochStats()
        visited = sum(traverse_events(thread.events, stats) for p in trace.processes for thread in p.threads)
        return visited, stats.count, stats.longest.duration, round(stats.average, 3)

    def raw():
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            count = epochs = 0
            longest = None
            average = 0.0
            for label, duration in conn.execute("SELECT label, duration FROM events"):
                count += 1
                if label.startswith("Epoch"):
                    epochs += 1
                    average += (duration - average) / epochs
                    if longest is None or duration > longest:
                        longest = duration
            return count, epochs, longest, round(average, 3)
        finally:
            conn.close()

    t_cold, result = best_of(cold, repeat)
    t_warm, result_warm = best_of(warm, repeat)
    t_raw, result_raw = best_of(raw, repeat)
    trace.close()
    assert result == result_warm == result_raw, (result, result_warm, result_raw)
    events = result[0]
    print(
        f"full traversal through event.children() ({events:,} events, {result[1]} epochs, "
        f"longest {result[2]:,} us, mean {result[3]:,.0f} us)"
    )
    _line(
        "pva, fresh openTrace (cold)",
        events / t_cold / 1000,
        "k ev/s",
        "sqlite3 SELECT label, duration + loop",
        events / t_raw / 1000,
        "target >= 500 k events/s",
    )
    _line(
        "pva, threads already read (warm)",
        events / t_warm / 1000,
        "k ev/s",
        "sqlite3 SELECT label, duration + loop",
        events / t_raw / 1000,
    )
    return events / t_cold


def bench_recording(events: int, repeat: int) -> float:
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "record.pvti")

        def record() -> None:
            with tracing.Recorder(path) as recorder:
                channel = recorder.channel("bench")
                for _ in range(events // 2):
                    with channel.event("outer"), channel.event("inner"):
                        pass

        def baseline() -> None:
            nothing = contextlib.nullcontext()
            for _ in range(events // 2):
                with nothing, nothing:
                    pass

        disabled_channel = tracing.channel("nobody-records-this")

        def disabled() -> None:
            for _ in range(events // 2):
                with disabled_channel.event("outer"), disabled_channel.event("inner"):
                    pass

        t_record, _ = best_of(record, repeat)
        t_base, _ = best_of(baseline, repeat)
        t_off, _ = best_of(disabled, repeat)
        with pva.openTrace(path) as trace:
            recorded = sum(len(th.events) * 2 for p in trace.processes for th in p.threads)
        assert recorded == events, recorded
    print(f"recording {events:,} nested events with pva.tracing (open, record, close)")
    _line("per event, recording", t_record / events * 1e6, "us", "contextlib.nullcontext()", t_base / events * 1e6)
    _line(
        "per event, no recorder active", t_off / events * 1e6, "us", "contextlib.nullcontext()", t_base / events * 1e6
    )
    return t_record / events * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="full")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    path = trace_path(args.size)
    print(f"trace: {path} ({path.stat().st_size / 1e6:,.0f} MB)")
    open_ms = bench_open(path, max(args.repeat, 5))
    rate = bench_traversal(path, args.repeat)
    per_event = bench_recording(200_000 if args.size == "full" else 20_000, args.repeat)
    print(
        f"summary: open + list threads {open_ms:.1f} ms (target < 100); traversal {rate:,.0f} events/s "
        f"(target 500,000); recording {per_event:.2f} us/event"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
