"""Resource bounds: opening a report costs the same whatever its size; exports stream.

These are property tests, not timing benchmarks (benchmarks/ measures speed): each measurement
runs in a fresh child process, and the bounds are generous. Opening (`pva.openReport` and the
target's tile count) of a 0.9 MB simulated report and of a 100+ MB report of a long training loop
must take well under half a second and the same memory, within 50 MB. Every export of a mid-size
report must stay far below the 1 GB bound, and its anonymous memory (the heap, not the report's
pages SQLite maps from the file) must not grow with the report: not by the size of its
largest matrix as 64-bit values, which is what reading a matrix whole would cost.
"""

from __future__ import annotations

import concurrent.futures
import json
import pathlib
import subprocess
import sys
import threading

import pytest
from large_report import write_long_report

ROOT = pathlib.Path(__file__).resolve().parents[1]
MB = 1 << 20

#: Peak memory is read from /proc/self/status (VmHWM): a child's ru_maxrss starts at its parent's.
STATUS = """
def status(key):
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0
"""

OPEN_PROBE = (
    STATUS
    + """
import json, os, sys, time
sys.path.insert(0, os.getcwd())
import pva

pva.CompilationReport  # names load on first use: load the object model before measuring
times = []
before = status("VmRSS")
for _ in range(3):
    start = time.perf_counter()
    report = pva.openReport(sys.argv[1])
    tiles = report.compilation.target.numTiles
    times.append(time.perf_counter() - start)
    report.close()
print(json.dumps({"tiles": tiles, "seconds": min(times), "first_seconds": times[0],
                  "growth": status("VmHWM") - before}))
"""
)

#: Runs the command line and prints its peak resident memory last.
CLI_PROBE = (
    STATUS
    + """
import json, os, sys
sys.path.insert(0, os.getcwd())
from pva.cli import main

code = main(sys.argv[1:])
print(json.dumps({"peak": status("VmHWM")}))
sys.exit(code)
"""
)


def _open_cost(path: pathlib.Path) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", OPEN_PROBE, str(path)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def long_report(tmp_path_factory) -> pathlib.Path:
    path = tmp_path_factory.mktemp("long") / "profile.pop"
    write_long_report(path, num_steps=7000)
    assert path.stat().st_size > 100 * MB
    return path


def test_opening_a_report_is_constant_in_time_and_memory(simulated, long_report):
    small_path = simulated / "profile.pop"
    small, large = _open_cost(small_path), _open_cost(long_report)
    ratio = long_report.stat().st_size / small_path.stat().st_size
    print(
        f"\nopen + numTiles: {small_path.stat().st_size / MB:.1f} MB report {small['first_seconds']:.3f} s, "
        f"+{small['growth'] / MB:.1f} MB; {long_report.stat().st_size / MB:.0f} MB report "
        f"{large['first_seconds']:.3f} s, +{large['growth'] / MB:.1f} MB (file {ratio:.0f}x larger)"
    )
    assert small["tiles"] == 64 and large["tiles"] == 4 * 1472
    assert ratio > 100
    for cost in (small, large):
        assert cost["first_seconds"] < 0.5
        assert cost["growth"] < 50 * MB
    assert abs(large["growth"] - small["growth"]) < 50 * MB
    assert large["seconds"] < small["seconds"] + 0.25


# -- exports ------------------------------------------------------------------------------------------------------

EXPORTS = {
    "parquet": "parquet",
    "hdf5": "matrices.h5",
    "csv": "csv",
    "chrome-trace": "trace.json",
    "legacy-json": "legacy.json",
}


def _peak_memory(args: list[str]) -> dict:
    """Run `pva ARGS`; its peak RSS (from the kernel) and peak anonymous RSS (sampled every 10 ms)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", CLI_PROBE, *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    done = threading.Event()
    anon = [0]

    def sample():
        while not done.is_set():
            try:
                with open(f"/proc/{proc.pid}/status") as handle:
                    for line in handle:
                        if line.startswith("RssAnon:"):
                            anon[0] = max(anon[0], int(line.split()[1]) * 1024)
            except OSError:
                pass
            done.wait(0.01)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        stdout, stderr = proc.communicate(timeout=600)
    finally:
        done.set()
        sampler.join()
    assert proc.returncode == 0, stderr.decode()
    return {"peak": json.loads(stdout.decode().splitlines()[-1])["peak"], "anon": anon[0]}


@pytest.fixture(scope="module")
def mid_report(tmp_path_factory) -> pathlib.Path:
    """A mid-size report: 2,500 steps on 4 IPUs, its step matrix 118 MB as 64-bit values."""
    path = tmp_path_factory.mktemp("mid") / "profile.pop"
    write_long_report(path, num_steps=2500, num_programs=20_000, num_variables=20_000)
    return path


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_exports_stream_far_below_the_memory_bound(simulated, mid_report, tmp_path):
    matrix_bytes = 2500 * 4 * 1472 * 8
    jobs = [
        (fmt, label, report)
        for fmt in EXPORTS
        for label, report in (("small", simulated / "profile.pop"), ("mid", mid_report))
    ]

    def run(job):
        fmt, label, report = job
        out = tmp_path / f"{label}-{EXPORTS[fmt]}"
        return job, _peak_memory(["export", str(report), "--format", fmt, "-o", str(out)])

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        results = {(fmt, label): cost for (fmt, label, _report), cost in pool.map(run, jobs)}
    lines = []
    for fmt in EXPORTS:
        small, mid = results[(fmt, "small")], results[(fmt, "mid")]
        lines.append(
            f"{fmt}: peak {small['peak'] / MB:.0f} -> {mid['peak'] / MB:.0f} MB, "
            f"anonymous {small['anon'] / MB:.0f} -> {mid['anon'] / MB:.0f} MB"
        )
    print(
        f"\nexports of a {simulated.joinpath('profile.pop').stat().st_size / MB:.1f} MB and a "
        f"{mid_report.stat().st_size / MB:.0f} MB report:\n  " + "\n  ".join(lines)
    )
    for fmt in EXPORTS:
        small, mid = results[(fmt, "small")], results[(fmt, "mid")]
        assert mid["peak"] < 400 * MB, f"{fmt}: peak {mid['peak'] / MB:.0f} MB"
        assert mid["anon"] - small["anon"] < matrix_bytes * 2 // 3, f"{fmt}: does not stream"
