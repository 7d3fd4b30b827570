"""Chrome trace export and import, each beside a baseline run in the same benchmark.

* Export: ``pva export --format chrome-trace`` of the run's report (formats.chrome.export)
  against a naive exporter of the same steps (one SQL query, one ``json.dumps`` per event, no
  tracks for overlapping steps): JSON written per second, alternating in the benchmark's own
  process, and peak memory, each in its own child process.
* Import: ``pva convert`` of a generated Chrome trace (formats.chrome.importer) against
  ijson streaming every event of the same file and doing nothing with it: input read per second
  and peak memory, each in its own child process, alternating.

The generated trace is what a host tracer writes: 32 threads in 4 processes, each a run of
iterations of nested complete (X) events written as they end (children before their parent),
begin/end pairs, instants, counters, and now and then a copy that overlaps the next iteration
(so some threads need an overlap track). It is cached under .bench-cache/.
"""

from __future__ import annotations

import json
import os
import pathlib
import random
import sqlite3
import time

from .corpus import CACHE

#: Events of the generated trace per benchmark size.
IMPORT_EVENTS = {"tiny": 100_000, "small": 1_000_000, "large": 10_000_000}
EXPORT_RATE_TARGET = 100.0  # MB/s of JSON written
EXPORT_PEAK_TARGET = 150.0  # MB
IMPORT_RATE_TARGET = 20.0  # MB/s of JSON read
IMPORT_PEAK_TARGET = 1000.0  # MB, whatever the number of events


def chrome_trace(events: int, log=print) -> pathlib.Path:
    """The generated trace of about `events` events, written once and cached."""
    path = CACHE / f"chrome-trace-{events}.json"
    if not path.exists():
        log(f"  generating a Chrome trace of {events:,} events ...")
        CACHE.mkdir(parents=True, exist_ok=True)
        generate(path, events)
    return path


def generate(path: pathlib.Path, events: int, seed: int = 7) -> None:
    """Write a Chrome trace (object form) of about `events` events, in the order a tracer writes them."""
    rng = random.Random(seed)
    threads = [(pid, tid) for pid in range(1, 5) for tid in range(1, 9)]
    clock = dict.fromkeys(threads, 0)
    iteration = dict.fromkeys(threads, 0)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8", buffering=1 << 22) as out:
        out.write('{"traceEvents":[\n')
        lines = []
        for pid in range(1, 5):
            lines.append(f'{{"ph":"M","name":"process_name","pid":{pid},"tid":0,"args":{{"name":"worker {pid}"}}}}')
            for tid in range(1, 9):
                lines.append(
                    f'{{"ph":"M","name":"thread_name","pid":{pid},"tid":{tid},"args":{{"name":"thread {tid}"}}}}'
                )
        out.write(",\n".join(lines))
        written = len(lines)
        while written < events:
            pid, tid = threads[rng.randrange(len(threads))]
            lines = []
            for _ in range(8):  # a burst of iterations of one thread
                t0 = clock[(pid, tid)]
                i = iteration[(pid, tid)]
                head = f'"pid":{pid},"tid":{tid}'
                lines.append(
                    f'{{"ph":"X","name":"load","ts":{t0 + 1},"dur":25,{head},"args":{{"bytes":{4096 + i % 7}}}}}'
                )
                lines.append(f'{{"ph":"X","name":"matmul","ts":{t0 + 35},"dur":10,{head}}}')
                lines.append(f'{{"ph":"X","name":"kernel","ts":{t0 + 31},"dur":25,{head},"cat":"gpu"}}')
                lines.append(f'{{"ph":"X","name":"store","ts":{t0 + 61},"dur":25,{head}}}')
                lines.append(f'{{"ph":"i","name":"mark","ts":{t0 + 95},{head},"s":"t"}}')
                lines.append(f'{{"ph":"B","name":"host","ts":{t0 + 96},{head}}}')
                lines.append(f'{{"ph":"E","ts":{t0 + 99},{head}}}')
                lines.append(f'{{"ph":"X","name":"step","ts":{t0},"dur":100,{head},"args":{{"iteration":{i}}}}}')
                lines.append(f'{{"ph":"C","name":"queue","ts":{t0},"pid":{pid},"args":{{"depth":{i % 5}}}}}')
                if i % 50 == 49:
                    lines.append(f'{{"ph":"X","name":"async copy","ts":{t0 + 90},"dur":40.5,{head}}}')
                clock[(pid, tid)] = t0 + 100 + rng.randrange(20)
                iteration[(pid, tid)] = i + 1
            out.write(",\n")
            out.write(",\n".join(lines))
            written += len(lines)
        out.write('\n],"displayTimeUnit":"ns","otherData":{"generator":"pva benchmarks"}}\n')
    os.replace(tmp, path)


# -- what the child processes run ---------------------------------------------------------------


def export_ours(report: str, output: str) -> dict:
    """Ours: formats.chrome.export.export_chrome_trace of the report's execution."""
    from formats.chrome.export import export_chrome_trace

    started = time.perf_counter()
    export_chrome_trace(report, output)
    seconds = time.perf_counter() - started
    size = os.path.getsize(output)
    os.unlink(output)
    return {"seconds": seconds, "output_bytes": size}


#: The naive exporter's one query: every profiled step of every IPU, with what its event shows.
_NAIVE_SQL = (
    "SELECT b.ipu, b.cycles_base + b.all_cycles_from_min, b.cycles_base + b.all_cycles_to_max, b.step_id, "
    "s.run, s.type, b.cycles, b.tile_cycles_max, b.active_tiles, b.tile_balance, b.active_tile_balance, "
    "b.thread_balance, b.data_in, b.data_out, b.data_balance, s.program, s.compute_set, s.name "
    "FROM steps_by_ipu b JOIN steps s ON s.id = b.step_id WHERE b.profiled = 1 ORDER BY b.ipu, b.step_id"
)


def export_naive(report: str, output: str) -> dict:
    """Baseline: one query of the steps, one json.dumps per event, written line by line."""
    started = time.perf_counter()
    conn = sqlite3.connect(f"file:{report}?mode=ro", uri=True)
    try:
        (clock,) = conn.execute("SELECT clock_frequency FROM target").fetchone()
        scale = 1e6 / clock
        with open(output, "w", encoding="utf-8") as out:
            out.write('{"traceEvents":[\n')
            first = True
            for row in conn.execute(_NAIVE_SQL):
                (ipu, start, end, step, run, kind, cycles, tile_max, active, tile_balance, active_balance,
                 thread_balance, data_in, data_out, data_balance, program, compute_set, name) = row  # fmt: skip
                args = {
                    "step": step,
                    "run": run,
                    "type": kind,
                    "cycles": cycles,
                    "tile_cycles_max": tile_max,
                    "active_tiles": active,
                    "tile_balance": tile_balance,
                    "active_tile_balance": active_balance,
                    "thread_balance": thread_balance,
                    "data_in": data_in,
                    "data_out": data_out,
                    "data_balance": data_balance,
                }
                if program is not None:
                    args["program"] = program
                if compute_set is not None:
                    args["compute_set"] = compute_set
                event = {
                    "name": name or kind,
                    "cat": kind,
                    "args": args,
                    "ph": "X",
                    "ts": round(start * scale, 3),
                    "dur": round((max(start, end) - start) * scale, 3),
                    "pid": 1,
                    "tid": ipu,
                }
                if not first:
                    out.write(",\n")
                out.write(json.dumps(event, separators=(",", ":")))
                first = False
            out.write("\n]}\n")
    finally:
        conn.close()
    seconds = time.perf_counter() - started
    size = os.path.getsize(output)
    os.unlink(output)
    return {"seconds": seconds, "output_bytes": size}


def import_ours(trace: str, output: str) -> dict:
    """Ours: formats.chrome.importer.import_chrome_trace of the generated trace."""
    from formats.chrome.importer import import_chrome_trace

    started = time.perf_counter()
    stats = import_chrome_trace(trace, output)
    seconds = time.perf_counter() - started
    size = os.path.getsize(output)
    os.unlink(output)
    return {"seconds": seconds, "events": stats.events, "threads": stats.threads, "output_bytes": size}


def import_ijson(trace: str) -> dict:
    """Baseline: ijson (its C backend) streaming every trace event of the file, keeping none."""
    import ijson

    started = time.perf_counter()
    count = 0
    with open(trace, "rb") as handle:
        for _event in ijson.items(handle, "traceEvents.item", use_float=True):
            count += 1
    return {"seconds": time.perf_counter() - started, "events": count, "backend": ijson.backend}


def count_events(handle) -> int:
    """Events of an exported trace: one per line between the brackets."""
    return sum(1 for line in handle if line.startswith(b"{") and not line.startswith(b'{"traceEvents"'))
