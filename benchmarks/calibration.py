"""Simulator calibration against poplibs' published IPU-Model figures.

The reference rows (benchmarks/data/poplibs_benchmark_results.csv) are the IpuModel2 rows of
poplibs' benchmark table. Each row's name encodes the shape its tool ran (tests/CMakeLists.txt of
poplibs): fully_connected_layer for ``fc_layer_*`` and ``bert_ffn*``, general_matrix_multiply for
``gemm_*``, single_conv_layer for the convolutions. The simulator runs the preset with the same
options and the table compares:

- cycles: the report's total cycles over all engine runs;
- total memory: always-live plus each tile's peak not-always-live bytes, summed over the tiles, as
  poplibs' tools/bench.py sums ``liveness.alwaysLive.bytesByTile`` and
  ``liveness.notAlwaysLive.maxBytesByTile`` of the graph profile; stacks and vertex code are not
  in that liveness (NOT_VARIABLES below);
- max tile memory: the largest tile's memory including gaps.

fc, gemm and bert rows are the calibration set; the convolutions are the out-of-sample check.
"""

from __future__ import annotations

import csv
import math
import os
import re
import tempfile

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "poplibs_benchmark_results.csv")

#: single_conv_layer options of the convolution rows (poplibs tests/CMakeLists.txt, add_conv_benchmark).
CONV_SHAPES = {
    "mobilenet_conv_pw_13_1": {"field": "7,7", "kernel-size": "1", "input-channels": 1024, "output-channels": 1024},
    "resnet50_tr_bs4_bm256L0A1": {
        "field": "14,14",
        "kernel-size": "3",
        "padding": "1",
        "input-channels": 256,
        "output-channels": 256,
    },
    "resnet50_tr_bs4_bm256L1A0": {"field": "14,14", "kernel-size": "1", "input-channels": 1024, "output-channels": 256},
    "resnet50_tr_bs4_bm512L0A1": {
        "field": "7,7",
        "kernel-size": "3",
        "padding": "1",
        "input-channels": 512,
        "output-channels": 512,
    },
    "resnet50_tr_bs4_bm512L0A2": {"field": "7,7", "kernel-size": "1", "input-channels": 512, "output-channels": 2048},
    "resnet50_tr_bs4_bm512L1A0": {"field": "7,7", "kernel-size": "1", "input-channels": 2048, "output-channels": 512},
}


def shape_of(name: str) -> tuple[str, dict, str]:
    """(preset, knobs, set) of a reference row: set is "calibration" or "out-of-sample"."""
    m = re.fullmatch(r"fc_layer_(\d+)_(\d+)_(\d+)_(half|float)", name)
    if m:
        return (
            "fc",
            {"batch-size": int(m[1]), "input-size": int(m[2]), "output-size": int(m[3]), "dtype": m[4]},
            "calibration",
        )
    m = re.fullmatch(r"fc_layer_(\d+)[x_](\d+)[x_](\d+)", name)
    if m:
        return "fc", {"batch-size": int(m[1]), "input-size": int(m[2]), "output-size": int(m[3])}, "calibration"
    m = re.fullmatch(r"bert_ffn[12]_(\d+)x(\d+)x(\d+)", name)
    if m:  # --batch-size S --input-size H --output-size FX (ffn1), the reverse for ffn2
        return "fc", {"batch-size": int(m[1]), "input-size": int(m[2]), "output-size": int(m[3])}, "calibration"
    m = re.fullmatch(r"gemm_(\d+)x(\d+)x(\d+)", name)
    if m:
        return "gemm", {"m": int(m[1]), "k": int(m[2]), "n": int(m[3])}, "calibration"
    if name in CONV_SHAPES:
        return (
            "conv",
            {**CONV_SHAPES[name], "batch-size": 4, "stride": "1", "padding": CONV_SHAPES[name].get("padding", "0")},
            "out-of-sample",
        )
    raise KeyError(f"no shape known for benchmark row {name!r}")


def reference_rows(path: str = DATA) -> list[dict]:
    """The reference rows: name, cycles, total and max tile memory."""
    with open(path, newline="") as f:
        lines = [line for line in f if not line.startswith("#")]
    return [
        {
            "name": r["Name"],
            "cycles": int(r["Cycles"]),
            "total_memory": int(r["TotalMemory"]),
            "max_tile_memory": int(r["MaxTileMemory"]),
        }
        for r in csv.DictReader(lines)
    ]


#: Memory categories outside the liveness figures poplibs' bench.py sums: stacks and vertex code.
#: The published rows show it: fc_layer_1_1000_5_half totals 0.5 MB on 1,472 tiles, less than the
#: stacks alone (about 3 KB a tile) or the vertex code of the tiles that compute (about 2 KB each).
#: Control and exchange code, which Poplar's liveness summary lists among always-live variables,
#: stay counted.
NOT_VARIABLES = ("stack", "vertexCode", "sharedCodeStorage")


def measure(directory: str) -> dict:
    """Cycles and memory figures of the report in `directory`, as the reference table counts them."""
    import pva

    report = pva.openReport(os.path.join(directory, "profile.pop"))
    try:
        comp = report.compilation
        always = comp.memoryArray("alwaysLiveBytes").astype("int64")
        categories = comp.categoryMemoryArray()
        for name in NOT_VARIABLES:
            if name in categories:
                always = always - categories[name].astype("int64")
        not_always = comp.memoryArray("notAlwaysLiveBytes").astype("int64")
        # executionProfile.simulation.cycles: the clock at the end of the last run, all runs counted
        cycles = max((int(p.end) for run in report.execution.runs for p in run.cyclesByIpu), default=0)
        return {
            "cycles": cycles,
            "total_memory": int((always + not_always).sum()),
            "max_tile_memory": int(comp.memoryArray("total.includingGaps").max()),
        }
    finally:
        close = getattr(report, "close", None)
        if close is not None:
            close()


def simulate(preset: str, knobs: dict) -> dict:
    """Run a preset on a Mk2 IPU-Model (all tiles) and measure its report."""
    from simulator.presets import run_preset

    with tempfile.TemporaryDirectory(prefix="pva-calibration-") as d:
        run_preset(
            preset, {"arch": "ipu2", **knobs}, d, timestamp="2024-01-01T00:00:00Z", progress=False, functional=False
        )
        return measure(d)


def ratio_error(ratio: float) -> float:
    """A ratio's error as a factor >= 1 (0.5 and 2.0 are both 2x off)."""
    return max(ratio, 1 / ratio) if ratio > 0 else math.inf


def geomean_error(ratios: list[float]) -> float:
    """The geometric mean of the errors of the ratios."""
    return math.exp(sum(math.log(ratio_error(r)) for r in ratios) / len(ratios)) if ratios else math.nan


def calibrate(only: str | None = None, progress=None) -> list[dict]:
    """Simulate every reference row (or those whose name contains `only`)."""
    rows = []
    for ref in reference_rows():
        if only and only not in ref["name"]:
            continue
        preset, knobs, which = shape_of(ref["name"])
        sim = simulate(preset, knobs)
        row = {
            "name": ref["name"],
            "set": which,
            "preset": preset,
            "knobs": knobs,
            "reference": ref,
            "simulated": sim,
            "ratios": {key: sim[key] / ref[key] for key in ("cycles", "total_memory", "max_tile_memory")},
        }
        rows.append(row)
        if progress is not None:
            progress(row)
    return rows


def summary(rows: list[dict]) -> dict:
    """Geometric-mean errors and worst ratios of each set."""
    out = {}
    for which in ("calibration", "out-of-sample"):
        chosen = [r for r in rows if r["set"] == which]
        if not chosen:
            continue
        out[which] = {
            key: {
                "geomean_error": geomean_error([r["ratios"][key] for r in chosen]),
                "worst_error": max(ratio_error(r["ratios"][key]) for r in chosen),
                "within_1_5x": sum(ratio_error(r["ratios"][key]) <= 1.5 for r in chosen),
                "rows": len(chosen),
            }
            for key in ("cycles", "total_memory", "max_tile_memory")
        }
    return out


def format_row(row: dict) -> str:
    ref, sim, ratio = row["reference"], row["simulated"], row["ratios"]
    return (
        f"{row['name']:34} {ref['cycles']:>9,} {sim['cycles']:>9,} {ratio['cycles']:>5.2f}  "
        f"{ref['total_memory'] / 1e6:>7.1f} {sim['total_memory'] / 1e6:>7.1f} {ratio['total_memory']:>5.2f}  "
        f"{ref['max_tile_memory']:>8,} {sim['max_tile_memory']:>8,} {ratio['max_tile_memory']:>5.2f}"
    )


HEADER = (
    f"{'row (IpuModel2)':34} {'cycles':>9} {'simulated':>9} {'ratio':>5}  {'totalMB':>7} {'sim MB':>7} "
    f"{'ratio':>5}  {'max tile':>8} {'sim tile':>8} {'ratio':>5}"
)
