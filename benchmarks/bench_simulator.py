"""Simulator benchmark: `pva simulate --preset large` on 4 Mk2 IPUs, with its time, peak memory and size.

``python -m benchmarks.bench_simulator --calibration`` prints the calibration table instead: the
fc, gemm and conv presets beside poplibs' published IPU-Model figures (benchmarks/calibration.py),
with the calibration set and the out-of-sample rows summarised per target and family; ``--set``,
``--target`` and ``--only`` choose a subset.

Run ``python -m benchmarks.bench_simulator`` (the full preset: a few minutes) or
``python -m benchmarks.bench_simulator --size tiny`` (a smoke run in seconds). Each measurement
runs in a fresh process so its peak resident memory is its own.

Beside the simulation, the same run measures a baseline: the profile writer alone writing as many
execution steps (steps, steps_by_ipu and the step_cycles_by_tile matrix of synthetic cycles) for
the same target. The ratio simulation / baseline shows how far the simulator is above the cost of
just storing its output, which is stable across machines where absolute times are not.

Targets (full size): at least 20,000 compute sets, 100,000 programs and 50,000 execution steps with
tile-level cycles, in under 10 minutes on a 2-core machine and under 4 GB of peak memory.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

from .child import PEAK_KB_CODE

SIZES = {
    "full": {},
    "small": {"layers": 20},
    "tiny": {"ipus": 2, "layers": 3, "seq": 16, "hidden": 32, "heads": 4, "tiles-per-layer": 16, "tiles-per-ipu": 64},
}
TARGETS = {"compute_sets": 20_000, "programs": 100_000, "steps": 50_000, "seconds": 600, "peak_mb": 4096}

_SIMULATE = (
    r"""
import json, os, resource, sys, time
"""
    + PEAK_KB_CODE
    + r"""
sys.path.insert(0, sys.argv[3])
from formats.pop.reader import ProfileReader
from simulator.engine import Engine
from simulator.presets import build_preset

knobs = json.loads(sys.argv[1])
directory = sys.argv[2]
t0 = time.perf_counter()
built = build_preset("large", knobs)
t1 = time.perf_counter()
engine = Engine(built.graph, built.programs, {"autoReport.all": "true", "autoReport.directory": directory},
                functional=False, timestamp="2024-01-01T00:00:00Z")
t2 = time.perf_counter()
engine.load()
built.setup(engine)
for index in built.runs:
    engine.run(index)
engine.close()
t3 = time.perf_counter()
path = os.path.join(directory, "profile.pop")
r = ProfileReader(path)
counts = {name: r.query_one(f"SELECT count(*) FROM {table}")[0] for name, table in
          (("compute_sets", "compute_sets"), ("programs", "programs"), ("steps", "steps"),
           ("lowered_variables", "vars_info"), ("liveness_steps", "liveness_steps"))}
counts["num_tiles"] = r.target["num_tiles"]
counts["tile_matrix_rows"] = r.matrix("step_cycles_by_tile").num_rows
r.close()
print(json.dumps({"build": t1 - t0, "compile": t2 - t1, "run_and_write": t3 - t2, "seconds": t3 - t0,
                  "peak_mb": peak_kb() / 1024,
                  "file_mb": os.path.getsize(path) / 1e6, **counts}))
"""
)

_BASELINE = (
    r"""
import json, os, resource, sys, time
"""
    + PEAK_KB_CODE
    + r"""
sys.path.insert(0, sys.argv[4])
import numpy as np
from formats.pop.writer import ProfileWriter
steps, tiles_per_ipu, num_ipus = (int(x) for x in sys.argv[1:4])
path = os.path.join(sys.argv[5], "baseline.pop")
rng = np.random.default_rng(0)
t0 = time.perf_counter()
with ProfileWriter(path, producer="baseline") as w:
    w.set_target(num_ipus=num_ipus, tiles_per_ipu=tiles_per_ipu, bytes_per_tile=638976)
    matrix = w.matrix("step_cycles_by_tile")
    block = 512
    for first in range(0, steps, block):
        count = min(block, steps - first)
        rows = rng.integers(0, 400, size=(count, num_ipus * tiles_per_ipu), dtype=np.int64)
        rows[rows < 200] = 0
        matrix.append(rows)
        w.insert("steps", ("id", "run", "type", "name"), [(first + i, 0, "OnTileExecute", "cs") for i in range(count)])
        w.insert("steps_by_ipu", ("step_id", "ipu", "cycles", "active_tiles", "cycles_base", "all_cycles_from_min",
                                  "all_cycles_from_max", "all_cycles_from_avg", "all_cycles_to_min", "all_cycles_to_max",
                                  "all_cycles_to_avg", "active_cycles_from_min", "active_cycles_from_max",
                                  "active_cycles_from_avg", "active_cycles_to_min", "active_cycles_to_max",
                                  "active_cycles_to_avg"),
                 [(first + i, ipu) + (1,) * 15 for i in range(count) for ipu in range(num_ipus)])
    w.insert("runs", ("id", "name", "first_step", "num_steps"), [(0, "run", 0, steps)])
print(json.dumps({"seconds": time.perf_counter() - t0,
                  "peak_mb": peak_kb() / 1024}))
"""
)


def _run(code: str, *args: str) -> dict:
    result = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=False)
    if result.returncode:
        raise SystemExit(f"benchmark process failed:\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def _calibration(as_json: bool, only: str | None, which: str | None, target: str | None) -> int:
    """Print the calibration table (see benchmarks.calibration)."""
    from . import calibration as cal

    if not as_json:
        print(cal.HEADER)
    rows = cal.calibrate(
        only,
        progress=None if as_json else lambda row: print(cal.format_row(row), flush=True),
        which=which,
        target=target,
    )
    result = cal.summary(rows)
    if as_json:
        print(json.dumps({"rows": rows, "summary": result}, indent=2))
        return 0
    for group, figures in result.items():
        failed = figures.pop("failed")
        parts = [
            f"{key} geomean error {f['geomean_error']:.2f}x, worst {f['worst_error']:.2f}x, "
            f"{f['within_1_5x']}/{f['rows']} within 1.5x"
            for key, f in figures.items()
        ]
        print(f"{group}: " + "; ".join(parts) + (f"; {failed} failed" if failed else ""))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=sorted(SIZES), default="full")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--calibration",
        action="store_true",
        help="compare the fc, gemm and conv presets with poplibs' published IPU-Model figures instead",
    )
    parser.add_argument("--only", metavar="TEXT", help="with --calibration: only the rows whose name contains TEXT")
    parser.add_argument(
        "--set",
        choices=("calibration", "out-of-sample"),
        help="with --calibration: only the calibration set or only the out-of-sample rows",
    )
    parser.add_argument(
        "--target", choices=("IpuModel1", "IpuModel2"), help="with --calibration: only the rows of this target"
    )
    args = parser.parse_args(argv)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if args.calibration:
        return _calibration(args.json, args.only, args.set, args.target)
    knobs = SIZES[args.size]
    with tempfile.TemporaryDirectory(prefix="pva-bench-simulator-") as tmp:
        sim = _run(_SIMULATE, json.dumps(knobs), tmp, root)
        tiles_per_ipu = sim["num_tiles"] // knobs.get("ipus", 4)
        base = _run(_BASELINE, str(sim["steps"]), str(tiles_per_ipu), str(knobs.get("ipus", 4)), root, tmp)
    figures = {
        "size": args.size,
        "simulator": sim,
        "baseline_writer_only": base,
        "ratio_to_baseline": sim["seconds"] / max(base["seconds"], 1e-9),
    }
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print(
            f"large preset ({args.size}): {sim['compute_sets']:,} compute sets, {sim['programs']:,} programs, "
            f"{sim['steps']:,} steps on {sim['num_tiles']:,} tiles, {sim['lowered_variables']:,} lowered variables"
        )
        print(
            f"  build {sim['build']:.1f} s, compile {sim['compile']:.1f} s, run and write {sim['run_and_write']:.1f} s: "
            f"total {sim['seconds']:.1f} s; peak memory {sim['peak_mb']:,.0f} MB; profile.pop {sim['file_mb']:,.0f} MB"
        )
        print(
            f"  baseline (writer only, same steps): {base['seconds']:.1f} s, {base['peak_mb']:,.0f} MB; "
            f"ratio {figures['ratio_to_baseline']:.1f}x"
        )
        if args.size == "full":
            checks = [
                sim["compute_sets"] >= TARGETS["compute_sets"],
                sim["programs"] >= TARGETS["programs"],
                sim["steps"] >= TARGETS["steps"],
                sim["seconds"] < TARGETS["seconds"],
                sim["peak_mb"] < TARGETS["peak_mb"],
            ]
            print(
                "  targets (20,000 compute sets, 100,000 programs, 50,000 steps, < 600 s, < 4 GB): "
                + ("met" if all(checks) else "NOT met")
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
