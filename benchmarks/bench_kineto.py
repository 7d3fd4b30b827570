"""Import of real-shaped PyTorch profiler (Kineto) traces beside orjson.loads of the same bytes.

Three generated traces (benchmarks.kineto_traces): ``real`` (args on every event, 40 threads, a
third of the events in flows), ``metadata`` (the same with as many metadata events as others) and
``threads`` (many threads of one event each). For each: ``pva convert``'s rate beside
``orjson.loads`` of the same file (read and parsed, nothing kept), each in its own child process,
alternating, and the peak memory of the import beside the file's size. The targets: at least
50 MB/s and at most 5 times orjson.loads' time (a rate ratio of at least 0.2), and at most 3 times
the file in memory.
"""

from __future__ import annotations

import os
import time

from .corpus import CACHE
from .rows import Context, Row
from .rows import runs as _runs
from .timing import alternate_children, median_of

#: Events of the real-shaped traces, and threads of the many-threads trace, per benchmark size.
SIZES = {
    "tiny": {"real": 60_000, "metadata": 60_000, "threads": 10_000},
    "small": {"real": 600_000, "metadata": 600_000, "threads": 30_000},
    "large": {"real": 3_000_000, "metadata": 1_500_000, "threads": 100_000},
}
RATE_TARGET = 50.0  # MB/s
RATIO_TARGET = 0.2  # our rate over orjson.loads' rate: at most 5x its time
MEMORY_RATIO = 3.0  # peak memory over the file's size ...
MEMORY_FROM_MB = 100.0  # ... for files of this size or more (below, the interpreter and its libraries outweigh it)


def trace(shape: str, count: int, log=print) -> str:
    """The generated trace, written once and cached."""
    from .kineto_traces import generate

    path = CACHE / f"kineto-{shape}-{count}.json"
    if not path.exists():
        log(f"  generating a Kineto-shaped trace ({shape}, {count:,}) ...")
        CACHE.mkdir(parents=True, exist_ok=True)
        if shape == "threads":
            generate(path, 0, "threads", threads=count)
        else:
            generate(path, count, shape)
    return str(path)


def import_ours(path: str, output: str) -> dict:
    """Ours: formats.chrome.importer.import_chrome_trace of the trace."""
    from formats.chrome.importer import import_chrome_trace

    started = time.perf_counter()
    stats = import_chrome_trace(path, output)
    seconds = time.perf_counter() - started
    os.unlink(output)
    return {"seconds": seconds, "events": stats.events, "threads": stats.threads, "flows": stats.flows}


def orjson_loads(path: str) -> dict:
    """Baseline: orjson.loads of the file's bytes (read, then parsed)."""
    import orjson

    started = time.perf_counter()
    with open(path, "rb") as handle:
        document = orjson.loads(handle.read())
    seconds = time.perf_counter() - started
    events = document["traceEvents"] if isinstance(document, dict) else document
    return {"seconds": seconds, "events": len(events)}


def measure_kineto_import(ctx: Context) -> list[Row]:
    rows: list[Row] = []
    for shape, count in SIZES[ctx.main.size].items():
        path = trace(shape, count, ctx.log)
        with ctx.scratch_directory() as scratch:
            runs = alternate_children(
                {
                    "ours": ("kineto-import", path, os.path.join(scratch, "trace.pvti")),
                    "orjson": ("kineto-orjson", path),
                },
                ctx.child_repeat,
            )
        mb = os.path.getsize(path) / 1e6
        rate = mb / median_of(runs["ours"], "seconds")
        baseline = mb / median_of(runs["orjson"], "seconds")
        peak = median_of(runs["ours"], "peak_mb")
        what = "threads of one event each" if shape == "threads" else "events"
        title = f"pva convert of a Kineto-shaped trace ({shape}: {count:,} {what}, {mb:,.0f} MB)"
        rows.append(
            Row(
                f"kineto-import-{shape}-rate",
                f"{title}: rate",
                rate,
                baseline,
                "MB/s",
                "orjson.loads of the same file",
                f">= {RATE_TARGET:g} MB/s and ratio >= {RATIO_TARGET:g} (at most 5x orjson.loads' time)",
                rate >= RATE_TARGET and rate / baseline >= RATIO_TARGET,
                details={
                    "ours_runs": _runs(runs["ours"], "seconds", "peak_mb", "events", "threads", "flows"),
                    "baseline_runs": _runs(runs["orjson"], "seconds", "peak_mb", "events"),
                },
            )
        )
        rows.append(
            Row(
                f"kineto-import-{shape}-memory",
                f"{title}: peak memory (its process and the one it starts)",
                peak,
                mb,
                "MB",
                "the file's size",
                f"ratio <= {MEMORY_RATIO:g}"
                if mb >= MEMORY_FROM_MB
                else f"reported (the target, ratio <= {MEMORY_RATIO:g}, is for traces of {MEMORY_FROM_MB:g} MB or more)",
                peak <= MEMORY_RATIO * mb if mb >= MEMORY_FROM_MB else None,
            )
        )
    return rows
