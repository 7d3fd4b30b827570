"""Debug contexts at scale: a debug.cbor of millions of tiny contexts, read and walked in bounded memory.

The file holds ``{"id": n}`` for n = 1..N (9 bytes a context: 5 M contexts are 45 MB), as written
here once and cached. Ours, in a child process: open it as ``report.compilation.debugContexts()``
does and walk every context. Baseline, in a child process too: ``cbor2.load`` of the whole file
and a dict of the contexts by id (what a script without pva, and pva before, did). The target is
on ours alone: a peak within 1 GB for 5 M contexts.
"""

from __future__ import annotations

import time

#: Contexts of the file, by size of the run.
CONTEXTS = {"tiny": 200_000, "small": 1_000_000, "large": 5_000_000}
#: Peak resident memory ours may reach on the large size.
PEAK_TARGET_MB = 1024


def write_contexts(path: str, count: int) -> None:
    """A debug.cbor of `count` contexts ``{"id": n}`` in an indefinite array, as the writer lays it out."""
    import cbor2

    with open(path, "wb") as handle:
        handle.write(b"\xa2" + cbor2.dumps("pva_debug_info") + cbor2.dumps("1.0") + cbor2.dumps("contexts") + b"\x9f")
        chunk = bytearray()
        for n in range(1, count + 1):
            chunk += b"\xa1\x62id\x1a" + n.to_bytes(4, "big")
            if len(chunk) > 1 << 20:
                handle.write(chunk)
                chunk.clear()
        handle.write(chunk + b"\xff")


def ours(path: str) -> dict:
    """Child task: every debug context through the object model (as CompilationReport.debugContexts)."""
    from pva.debug import DebugContext, DebugInfo

    started = time.perf_counter()
    info = DebugInfo(path, None)  # what openReport(profile, path) makes; debugContexts() is info.select
    contexts = info.select(DebugContext.Filter())
    last = contexts[-1]
    return {"seconds": time.perf_counter() - started, "count": len(contexts), "last": last.id}


def baseline(path: str) -> dict:
    """Child task: cbor2.load of the whole file, then the contexts by id."""
    import cbor2

    started = time.perf_counter()
    with open(path, "rb") as handle:
        document = cbor2.load(handle)
    by_id = {context["id"]: context for context in document["contexts"]}
    return {"seconds": time.perf_counter() - started, "count": len(by_id), "last": max(by_id)}


def measure_debug_contexts(ctx) -> list:
    """Suite row (benchmarks.rows.Row): peak memory of reading and walking the contexts."""
    import os

    from .corpus import CACHE
    from .rows import Row
    from .timing import child

    count = CONTEXTS.get(ctx.main.size, CONTEXTS["large"])
    path = CACHE / f"debug-{count}.cbor"
    if not path.exists():
        ctx.log(f"  writing {count:,} tiny debug contexts ...")
        CACHE.mkdir(parents=True, exist_ok=True)
        scratch = f"{path}.{os.getpid()}.tmp"
        write_contexts(scratch, count)
        os.replace(scratch, path)
    mine = child("debug-walk", str(path))
    theirs = child("debug-cbor2", str(path))
    assert (mine["count"], mine["last"]) == (theirs["count"], theirs["last"]) == (count, count), (mine, theirs)
    target = PEAK_TARGET_MB * count / CONTEXTS["large"]
    return [
        Row(
            "debug-contexts",
            f"peak memory of debugContexts() over {count:,} tiny contexts ({path.stat().st_size / 1e6:.0f} MB "
            f"debug.cbor), {mine['seconds']:.1f} s (baseline {theirs['seconds']:.1f} s)",
            mine["peak_mb"],
            theirs["peak_mb"],
            "MB",
            "cbor2.load of the whole file and a dict of the contexts by id",
            f"peak <= {target:,.0f} MB ({PEAK_TARGET_MB} MB for 5 M contexts)",
            mine["peak_mb"] <= target,
            details={"seconds": mine["seconds"], "baseline_seconds": theirs["seconds"], "contexts": count},
        )
    ]
