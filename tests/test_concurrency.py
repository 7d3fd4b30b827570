"""Concurrency: readers of a report never see a half-written one, and trace writing from many threads loses nothing.

Ten reader processes open and fully read the same report (every row of every table, every matrix
chunk, and objects of the pva model) over and over, while a writer process writes new reports to
that path. Every read must succeed and see exactly one complete version: its digest is one of the
digests of the versions the writer writes. A reader that holds the file open while it is replaced
keeps reading the old version (the rename leaves its inode alive); reads that span a replacement
are counted and must occur.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import threading
import time

import pva
from formats.trace import tracing

WORKER = pathlib.Path(__file__).parent / "support" / "concurrency_worker.py"
READERS = 10
WRITES = 60

sys.path.insert(0, str(WORKER.parent))
import concurrency_worker  # noqa: E402


def test_readers_see_the_old_or_the_new_report_never_a_mix(tmp_path):
    # the digest of each version the writer will write, read from files written elsewhere
    expected = {}
    for index in range(len(concurrency_worker.VERSIONS)):
        path = tmp_path / f"version-{index}.pop"
        concurrency_worker.write_version(str(path), index)
        digest, replaced = concurrency_worker.read_once(str(path))
        assert not replaced
        expected[digest] = index
    assert len(expected) == len(concurrency_worker.VERSIONS)
    sizes = {(tmp_path / f"version-{i}.pop").stat().st_size for i in range(len(concurrency_worker.VERSIONS))}
    assert len(sizes) > 1, "the versions should differ in size"

    report = tmp_path / "shared" / "profile.pop"
    report.parent.mkdir()
    concurrency_worker.write_version(str(report), 0)
    stop = tmp_path / "stop"
    readers = [
        subprocess.Popen(
            [sys.executable, str(WORKER), "read", str(report), str(stop)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(READERS)
    ]
    try:
        time.sleep(1.0)  # let every reader start reading
        start = time.monotonic()
        writer = subprocess.run(
            [sys.executable, str(WORKER), "write", str(report), str(WRITES)],
            capture_output=True,
            text=True,
            timeout=600,
        )
        writing = time.monotonic() - start
        assert writer.returncode == 0, writer.stderr
    finally:
        stop.touch()
        outputs = [proc.communicate(timeout=300) for proc in readers]
    results = []
    for proc, (out, err) in zip(readers, outputs):
        assert proc.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    errors = [e for r in results for e in r["errors"]]
    assert errors == [], errors[0]
    seen = {}
    for r in results:
        for digest, count in r["seen"].items():
            seen[digest] = seen.get(digest, 0) + count
    unknown = set(seen) - set(expected)
    assert not unknown, f"{len(unknown)} read(s) saw a report that is none of the versions written"
    iterations = sum(r["iterations"] for r in results)
    spanning = sum(r["spanning"] for r in results)
    print(
        f"\n{READERS} readers, {iterations} complete reads ({min(r['iterations'] for r in results)} to "
        f"{max(r['iterations'] for r in results)} each) while {WRITES} reports were written in {writing:.1f} s; "
        f"{spanning} reads spanned a replacement; versions seen: {sorted(expected[d] for d in seen)}"
    )
    assert all(r["iterations"] >= 3 for r in results)
    assert len(seen) >= 3, "the readers should have seen several versions"
    assert spanning > 0, "some reads should have held the file while it was replaced"


def test_many_threads_trace_at_once_and_lose_no_event(tmp_path):
    """32 threads record events at once through one recorder that flushes while they record."""
    path = tmp_path / "threads.pvti"
    threads_count, per_thread = 32, 250
    with tracing.Recorder(path, flush_interval=0.002, max_buffered=16) as recorder:
        channel = recorder.channel("work")
        barrier = threading.Barrier(threads_count)

        def worker(k: int) -> None:
            barrier.wait()
            for i in range(per_thread):
                with channel.event(f"t{k}-e{i}"):
                    pass

        threads = [threading.Thread(target=worker, args=(k,), name=f"w{k:02d}") for k in range(threads_count)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    with pva.openTrace(path) as trace:
        (process,) = trace.processes
        by_thread = {t.name: [e.label for e in t.events] for t in process.threads}
    assert sorted(by_thread) == [f"w{k:02d}" for k in range(threads_count)]
    for k in range(threads_count):
        assert by_thread[f"w{k:02d}"] == [f"t{k}-e{i}" for i in range(per_thread)]
