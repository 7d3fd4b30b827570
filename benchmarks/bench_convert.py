"""Legacy JSON conversion against json.load of the same file: peak memory and throughput ratios.

Generates a legacy v1 profile (graphProfile + executionProfile in one JSON document, keys sorted
as Poplar wrote them) dominated by per-tile arrays: compute set cycle estimates, execution
computeSetCyclesByTile, exchange arrays and memory by category, on a 4-IPU Mk2 target
(5,888 tiles). The file is cached under .bench-cache/. Then, side by side and alternating, each
in a fresh child process:

* baseline: ``json.load`` of the file;
* pva: ``formats.legacy.convert_legacy`` of the file into a profile.pop.

It reports each child's peak RSS (resource.getrusage) and wall time, and the ratios the issue
asks for: pva peak RSS / json.load peak RSS (target <= 0.3) and json.load time / pva time
(pva's throughput relative to json.load, target >= 0.5).

    python benchmarks/bench_convert.py                # the 1 GB measurement (minutes)
    python benchmarks/bench_convert.py --size tiny    # a smoke run of a few seconds
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from .child import PEAK_KB_CODE

ROOT = pathlib.Path(__file__).resolve().parents[1]
CACHE = ROOT / ".bench-cache"
SIZES = {"tiny": (1, 64, 2_000_000), "small": (4, 1472, 100_000_000), "1g": (4, 1472, 1_070_000_000)}
MEMORY_TARGET = 0.3
THROUGHPUT_TARGET = 0.5

_BASELINE = (
    """
import json, resource, sys, time
"""
    + PEAK_KB_CODE
    + r"""
start = time.perf_counter()
with open(sys.argv[1], "rb") as handle:
    document = json.load(handle)
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "peak_kb": peak_kb()}))
"""
)

_PVA = (
    """
import json, resource, sys, time
"""
    + PEAK_KB_CODE
    + r"""
sys.path.insert(0, sys.argv[3])
from formats.legacy import convert_legacy

start = time.perf_counter()
convert_legacy([sys.argv[1]], sys.argv[2])
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "peak_kb": peak_kb()}))
"""
)


class _RowPool:
    """Pre-formatted random rows of per-tile numbers, so gigabytes of text are written quickly."""

    def __init__(self, rng: np.random.Generator, tiles: int, high: int, zeros: float, count: int = 256) -> None:
        self.rows = []
        for _ in range(count):
            values = rng.integers(0, high, size=tiles)
            values[rng.random(tiles) < zeros] = 0
            self.rows.append("[" + ",".join(map(str, values.tolist())) + "]")
        self.rng = rng

    def pick(self) -> str:
        return self.rows[int(self.rng.integers(0, len(self.rows)))]


def _matrix(out, pool: _RowPool, rows: int) -> None:
    out.write("[")
    for r in range(rows):
        if r:
            out.write(",")
        out.write(pool.pick())
    out.write("]")


def generate(path: pathlib.Path, ipus: int, tiles_per_ipu: int, target_bytes: int, seed: int = 1) -> None:
    """Write a legacy profile of about `target_bytes` bytes."""
    rng = np.random.default_rng(seed)
    tiles = ipus * tiles_per_ipu
    cycles = _RowPool(rng, tiles, 200_000, 0.1)
    active = _RowPool(rng, tiles, 70_000, 0.1)
    measured = _RowPool(rng, tiles, 250_000, 0.1)
    traffic = _RowPool(rng, tiles, 40_000, 0.3)
    memory = _RowPool(rng, tiles, 600_000, 0.2, count=64)
    per_cs = 3 * tiles * 6.3 + 4 * 0.25 * tiles * 4.5
    num_cs = max(4, int(target_bytes / per_cs))
    num_ex = max(1, num_cs // 4)
    names = ["layer%d/cs%d" % (i // 8, i) for i in range(num_cs)]
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="ascii", buffering=1 << 22) as out:
        out.write('{"executionProfile":{"computeSetCyclesByTile":')
        _matrix(out, measured, num_cs)
        out.write(
            ',"profilerMode":"COMPUTE_SETS","programTrace":[0],"simulation":{"cycles":%d,"steps":[' % (num_cs * 500)
        )
        for cs in range(num_cs):
            if cs:
                out.write(",")
            out.write(
                '{"activeTileBalance":0.9,"activeTiles":%d,"computeSet":%d,"cycles":500,"cyclesFrom":%d,'
                '"cyclesOverlapped":0,"cyclesTo":%d,"program":%d,"threadBalance":0.5,"tileBalance":0.8,'
                '"type":"OnTileExecute"}' % (tiles, cs, 500 * cs, 500 * cs + 500, cs + 1)
            )
        out.write(']}},"graphProfile":{"computeSets":{"cycleEstimates":{"activeCyclesByTile":')
        _matrix(out, active, num_cs)
        out.write(',"cyclesByTile":')
        _matrix(out, cycles, num_cs)
        out.write('},"names":' + json.dumps(names) + "}")
        out.write(',"controlPrograms":[0],"exchanges":{')
        for k, key in enumerate(("bytesReceivedByTile", "bytesSentByTile", "codeBytesByTile", "cyclesByTile")):
            out.write(("," if k else "") + json.dumps(key) + ":")
            _matrix(out, traffic, num_ex)
        out.write(
            '},"functionPrograms":[],"graph":{"numComputeSets":%d,"numEdges":0,"numVars":0,"numVertices":0}' % num_cs
        )
        out.write(',"memory":{"byCategory":{')
        for c, category in enumerate(
            (
                "constant",
                "controlCode",
                "copyDescriptor",
                "internalExchangeCode",
                "message",
                "stack",
                "variable",
                "vertexCode",
                "vertexFieldData",
                "vertexInstanceState",
            )
        ):
            out.write(("," if c else "") + json.dumps(category) + ":{")
            for r, region in enumerate(("interleaved", "nonInterleaved", "overflowed")):
                out.write(
                    ("," if r else "")
                    + json.dumps(region)
                    + ':{"nonOverlapped":'
                    + memory.pick()
                    + ',"overlapped":'
                    + memory.pick()
                    + "}"
                )
            out.write("}")
        out.write('},"byTile":{"total":' + memory.pick() + ',"totalIncludingGaps":' + memory.pick() + "}}")
        programs = [{"children": list(range(1, num_cs + 1)), "type": "Sequence"}]
        programs += [{"computeSet": cs, "type": "OnTileExecute"} for cs in range(num_cs)]
        out.write(',"programs":' + json.dumps(programs, separators=(",", ":")))
        out.write(
            ',"target":{"bytesPerIPU":%d,"bytesPerTile":638976,"clockFrequency":1330000000,"numIPUs":%d,'
            '"numTiles":%d,"tilesPerIPU":%d,"totalMemory":%d,"type":"IPU"}'
            % (638976 * tiles_per_ipu, ipus, tiles, tiles_per_ipu, 638976 * tiles)
        )
        out.write(',"vertexTypes":{"names":[],"sizes":[]}}}')
    os.replace(tmp, path)


def _child(code: str, *args: str) -> dict:
    result = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    if result.returncode:
        raise SystemExit(f"child failed:\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def _warm(path: pathlib.Path) -> None:
    with open(path, "rb") as handle:
        while handle.read(1 << 24):
            pass


def measure(path: pathlib.Path, repeats: int) -> dict:
    """Alternate baseline and pva children; return every run and the median ratios."""
    runs: dict[str, list[dict]] = {"json.load": [], "pva convert": []}
    with tempfile.TemporaryDirectory(dir=CACHE) as scratch:
        output = os.path.join(scratch, "profile.pop")
        _warm(path)
        for _ in range(repeats):
            runs["json.load"].append(_child(_BASELINE, str(path)))
            runs["pva convert"].append(_child(_PVA, str(path), output, str(ROOT)))
            os.unlink(output)
    base_time = statistics.median(r["seconds"] for r in runs["json.load"])
    pva_time = statistics.median(r["seconds"] for r in runs["pva convert"])
    base_peak = statistics.median(r["peak_kb"] for r in runs["json.load"])
    pva_peak = statistics.median(r["peak_kb"] for r in runs["pva convert"])
    return {
        "file_bytes": path.stat().st_size,
        "runs": runs,
        "json_load_seconds": base_time,
        "pva_seconds": pva_time,
        "json_load_peak_mb": base_peak / 1024,
        "pva_peak_mb": pva_peak / 1024,
        "memory_ratio": pva_peak / base_peak,
        "throughput_ratio": base_time / pva_time,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="1g", help="input size (default: 1g)")
    parser.add_argument("--repeats", type=int, default=None, help="runs of each side (default: 3, 1 for 1g)")
    args = parser.parse_args(argv)
    ipus, tiles_per_ipu, target = SIZES[args.size]
    CACHE.mkdir(exist_ok=True)
    path = CACHE / f"legacy-{args.size}.json"
    if not path.exists():
        started = time.perf_counter()
        print(f"generating {path} (about {target / 1e6:,.0f} MB) ...", flush=True)
        generate(path, ipus, tiles_per_ipu, target)
        print(f"  done in {time.perf_counter() - started:,.1f} s", flush=True)
    repeats = args.repeats or (1 if args.size == "1g" else 3)
    result = measure(path, repeats)
    result["size"] = args.size
    (CACHE / f"bench_convert-{args.size}.json").write_text(json.dumps(result, indent=2) + "\n")
    memory_ok = result["memory_ratio"] <= MEMORY_TARGET
    speed_ok = result["throughput_ratio"] >= THROUGHPUT_TARGET
    print(f"input: {path.name}, {result['file_bytes'] / 1e6:,.1f} MB, {repeats} run(s) each, medians")
    print(f"  json.load   : {result['json_load_seconds']:8.2f} s  peak RSS {result['json_load_peak_mb']:9,.0f} MB")
    print(f"  pva convert : {result['pva_seconds']:8.2f} s  peak RSS {result['pva_peak_mb']:9,.0f} MB")
    print(
        f"  memory ratio (pva / json.load)         {result['memory_ratio']:.3f}  target <= {MEMORY_TARGET}  "
        f"{'ok' if memory_ok else 'MISSED'}"
    )
    print(
        f"  throughput ratio (pva / json.load)     {result['throughput_ratio']:.3f}  target >= {THROUGHPUT_TARGET}  "
        f"{'ok' if speed_ok else 'MISSED'}"
    )
    return 0 if (memory_ok and speed_ok) or args.size == "tiny" else 1


if __name__ == "__main__":
    sys.exit(main())
