"""Measurements that run in a fresh process, so the peak memory reported is theirs alone.

``python -m benchmarks.child TASK ARGS...`` prints one JSON object: the seconds measured (imports
excluded), the answer computed (so the caller can check both sides agree) and ``peak_mb``, the
process's peak resident memory, plus the largest peak of any process it started (an upper bound
of their memory together).

The peak is the kernel's high-water mark of this process image (``VmHWM`` in /proc/self/status),
taken with getrusage's ``ru_maxrss`` where /proc is missing. On Linux ``ru_maxrss`` alone would not
do: it carries over the parent's peak across fork and exec, so a child started by a large
benchmark process would report the parent's memory.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time

#: Source of ``peak_kb()`` for the benchmarks' ``python -c`` children (needs ``import resource``).
PEAK_KB_CODE = """
def peak_kb():
    try:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
"""


def _peak_mb() -> float:
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def json_answer(path: str) -> dict:
    """Baseline: json.load the legacy document, then total memory over all tiles."""
    started = time.perf_counter()
    with open(path, "rb") as handle:
        document = json.load(handle)
    loaded = time.perf_counter() - started
    total = sum(document["graphProfile"]["memory"]["byTile"]["totalIncludingGaps"])
    return {"seconds": time.perf_counter() - started, "load_seconds": loaded, "total": total}


def ijson_answer(path: str) -> dict:
    """Stronger baseline: stream the legacy document with ijson up to the per-tile totals, then sum."""
    import ijson

    started = time.perf_counter()
    with open(path, "rb") as handle:
        values = next(ijson.items(handle, "graphProfile.memory.byTile.totalIncludingGaps", use_float=True))
        total = sum(int(v) for v in values)
    return {"seconds": time.perf_counter() - started, "total": total}


def pva_answer(path: str) -> dict:
    """Ours: openReport, then total memory over all tiles through the object model."""
    import pva

    open_report = pva.openReport  # loads the object model (names load when first used), untimed like the imports
    started = time.perf_counter()
    with open_report(path) as report:
        total = sum(tile.memory.total.includingGaps for tile in report.compilation.tiles)
    return {"seconds": time.perf_counter() - started, "total": total}


def pva_convert(source: str, output: str) -> dict:
    """Ours: `pva convert` of the legacy document into a profile.pop."""
    from formats.convert import convert

    started = time.perf_counter()
    convert([source], output)
    seconds = time.perf_counter() - started
    size = os.path.getsize(output)
    os.unlink(output)
    return {"seconds": seconds, "output_bytes": size}


def write(source: str, scratch: str, repeat: str) -> dict:
    """Writing the report: ProfileWriter against raw sqlite3.executemany plus pyarrow, alternating."""
    from .writing import load_content, measure_writes

    content = load_content(source)
    return measure_writes(content, scratch, int(repeat))


def debug_walk(path: str) -> dict:
    """Ours: every context of a debug.cbor through the object model (see benchmarks.bench_debug)."""
    from .bench_debug import ours

    return ours(path)


def debug_cbor2(path: str) -> dict:
    """Baseline: cbor2.load of the debug.cbor and its contexts by id (see benchmarks.bench_debug)."""
    from .bench_debug import baseline

    return baseline(path)


def _chrome(name: str):
    def task(*args: str) -> dict:
        from . import bench_chrome

        return getattr(bench_chrome, name)(*args)

    return task


def _kineto(name: str):
    def task(*args: str) -> dict:
        from . import bench_kineto

        return getattr(bench_kineto, name)(*args)

    return task


TASKS = {
    "kineto-import": _kineto("import_ours"),
    "kineto-orjson": _kineto("orjson_loads"),
    "chrome-export": _chrome("export_ours"),
    "chrome-export-naive": _chrome("export_naive"),
    "chrome-import": _chrome("import_ours"),
    "chrome-import-ijson": _chrome("import_ijson"),
    "json-answer": json_answer,
    "ijson-answer": ijson_answer,
    "pva-answer": pva_answer,
    "pva-convert": pva_convert,
    "write": write,
    "debug-walk": debug_walk,
    "debug-cbor2": debug_cbor2,
}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in TASKS:
        print(f"usage: python -m benchmarks.child {{{','.join(TASKS)}}} ARGS...", file=sys.stderr)
        return 2
    result = TASKS[argv[0]](*argv[1:])
    result["peak_mb"] = _peak_mb()
    result["ru_maxrss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    # processes the task started (the second half of a Chrome trace import): their largest peak,
    # counted as if it coincided with ours (an upper bound)
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    if children:
        result["children_peak_mb"] = children
        result["peak_mb"] += children
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
