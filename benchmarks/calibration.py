"""Simulator calibration against poplibs' published IPU-Model figures.

The reference rows (benchmarks/data/poplibs_benchmark_results.csv) are poplibs' benchmark table,
copied whole. Each row ran one of poplibs' tools with the options of tests/CMakeLists.txt:
fully_connected_layer for ``fc_layer_*`` and ``bert_*``, general_matrix_multiply for ``gemm_*``,
single_conv_layer for the convolutions, on an IpuModel1 (Mk1, run here on arch ipu1) or IpuModel2
(Mk2, arch ipu2) device. The simulator runs the preset with the same options and the table compares:

- cycles: the report's total cycles over all engine runs;
- total memory: always-live plus each tile's peak not-always-live bytes, summed over the tiles, as
  poplibs' tools/bench.py sums ``liveness.alwaysLive.bytesByTile`` and
  ``liveness.notAlwaysLive.maxBytesByTile`` of the graph profile; stacks and vertex code are not
  in that liveness (NOT_VARIABLES below);
- max tile memory: the largest tile's memory including gaps.

The IpuModel2 fc_layer_*, gemm_* and bert_ffn* rows are the calibration set. Every other row a
preset runs faithfully is the out-of-sample check (no constant is fitted to it): the IpuModel2
bert_kqv/bert_proj layers, grouped bert_grouped layers and convolutions, and all IpuModel1 rows, the Mk1 copies of the
calibration shapes included. The rows no preset runs as the tool does are in EXCLUDED, with why.
"""

from __future__ import annotations

import csv
import math
import os
import re
import tempfile

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "poplibs_benchmark_results.csv")

#: single_conv_layer command lines of the convolution rows, transcribed from poplibs' tests/CMakeLists.txt
#: (add_conv_benchmark calls, sdk-release-2.0): --field, --kernel-size, --stride, --padding (on each
#: side; 0 and 1 when the call omits them; empty for the calls in CONV_PADDING_LOWER, which give
#: --padding-lower instead), --input-channels, --output-channels, --batch-size; every call adds
#: --bias 0. The calls with options the conv preset cannot express (--conv-groups) are in EXCLUDED
#: instead.
CONV_SHAPES: dict[str, tuple[str, str, str, str, int, int, int]] = {
    "resnet50_tr_bs4_cnv": ("224,224", "7", "2", "3", 4, 64, 4),
    "resnet50_tr_bs4_bm64L0_projection": ("56,56", "1", "1", "0", 64, 256, 4),
    "resnet50_tr_bs4_bm64L0": ("56,56", "1", "1", "0", 64, 64, 4),
    "resnet50_tr_bs4_bm64L0A1": ("56,56", "3", "1", "1", 64, 64, 4),
    "resnet50_tr_bs4_bm64L1A0": ("56,56", "1", "1", "0", 256, 64, 4),
    "resnet50_tr_bs4_bm128L0_projection": ("56,56", "1", "2", "0", 256, 512, 4),
    "resnet50_tr_bs4_bm128L0A0": ("56,56", "1", "2", "0", 256, 128, 4),
    "resnet50_tr_bs4_bm128L0A1": ("28,28", "3", "1", "1", 128, 128, 4),
    "resnet50_tr_bs4_bm128L0A2": ("28,28", "1", "1", "0", 128, 512, 4),
    "resnet50_tr_bs4_bm128L1A0": ("28,28", "1", "1", "0", 512, 128, 4),
    "resnet50_tr_bs4_bm256L0_projection": ("28,28", "1", "2", "0", 512, 1024, 4),
    "resnet50_tr_bs4_bm256L0A0": ("28,28", "1", "2", "0", 512, 256, 4),
    "resnet50_tr_bs4_bm256L0A1": ("14,14", "3", "1", "1", 256, 256, 4),
    "resnet50_tr_bs4_bm256L0A2": ("14,14", "1", "1", "0", 256, 1024, 4),
    "resnet50_tr_bs4_bm256L1A0": ("14,14", "1", "1", "0", 1024, 256, 4),
    "resnet50_tr_bs4_bm512L0_projection": ("14,14", "1", "2", "0", 1024, 2048, 4),
    "resnet50_tr_bs4_bm512L0A0": ("14,14", "1", "2", "0", 1024, 512, 4),
    "resnet50_tr_bs4_bm512L0A1": ("7,7", "3", "1", "1", 512, 512, 4),
    "resnet50_tr_bs4_bm512L0A2": ("7,7", "1", "1", "0", 512, 2048, 4),
    "resnet50_tr_bs4_bm512L1A0": ("7,7", "1", "1", "0", 2048, 512, 4),
    "inception_tr_bs4_layer1": ("299,299", "3", "2", "0", 4, 32, 4),
    "inception_tr_bs4_layer3": ("149,149", "3", "1", "0", 32, 32, 4),
    "inception_tr_bs4_layer5": ("147,147", "3", "1", "1", 32, 64, 4),
    "inception_tr_bs4_layer8": ("147,147", "1", "1", "0", 64, 80, 4),
    "inception_tr_bs4_layer10": ("73,73", "3", "1", "0", 80, 192, 4),
    "inception_tr_bs4_i1_a1x1": ("35,35", "1", "1", "0", 192, 64, 4),
    "inception_tr_bs4_i1_b1x1": ("35,35", "1", "1", "0", 192, 48, 4),
    "inception_tr_bs4_i1_b5x5": ("35,35", "5", "1", "2", 48, 64, 4),
    "inception_tr_bs4_i1_db1x1": ("35,35", "1", "1", "0", 192, 32, 4),
    "inception_tr_bs4_i1_c3x3a": ("35,35", "3", "1", "1", 64, 96, 4),
    "inception_tr_bs4_i1_c3x3b": ("35,35", "3", "1", "1", 96, 96, 4),
    "inception_tr_bs4_i2_a1x1": ("35,35", "1", "1", "0", 256, 64, 4),
    "inception_tr_bs4_i2_b1x1": ("35,35", "1", "1", "0", 256, 48, 4),
    "inception_tr_bs4_i3_a1x1": ("35,35", "1", "1", "0", 288, 64, 4),
    "inception_tr_bs4_i3_b1x1": ("35,35", "1", "1", "0", 288, 48, 4),
    "inception_tr_bs4_i4_a3x3": ("35,35", "3", "2", "0", 288, 384, 4),
    "inception_tr_bs4_i4_b3x3b": ("35,35", "3", "2", "0", 96, 96, 4),
    "inception_tr_bs4_i5_a1x1": ("17,17", "1", "1", "0", 768, 192, 4),
    "inception_tr_bs4_i5_b1x1": ("17,17", "1", "1", "0", 768, 128, 4),
    "inception_tr_bs4_i5_b1x7": ("17,17", "1,7", "1", "0,3", 128, 128, 4),
    "inception_tr_bs4_i5_c7x1a": ("17,17", "7,1", "1", "3,0", 128, 128, 4),
    "inception_tr_bs4_i5_b7x1": ("17,17", "7,1", "1", "3,0", 128, 192, 4),
    "inception_tr_bs4_i5_c1x7b": ("17,17", "1,7", "1", "0,3", 128, 192, 4),
    "inception_tr_bs4_i6_b1x1": ("17,17", "1", "1", "0", 768, 160, 4),
    "inception_tr_bs4_i6_b1x7": ("17,17", "1,7", "1", "0,3", 160, 160, 4),
    "inception_tr_bs4_i6_c7x1a": ("17,17", "7,1", "1", "3,0", 128, 160, 4),
    "inception_tr_bs4_i6_b7x1": ("17,17", "7,1", "1", "3,0", 160, 192, 4),
    "inception_tr_bs4_i6_c7x1b": ("17,17", "7,1", "1", "3,0", 160, 160, 4),
    "inception_tr_bs4_i6_c1x7b": ("17,17", "1,7", "1", "0,3", 160, 192, 4),
    "inception_tr_bs4_i7_b1x7": ("17,17", "1,7", "1", "0,3", 192, 192, 4),
    "inception_tr_bs4_i7_b7x1": ("17,17", "7,1", "1", "3,0", 192, 192, 4),
    "inception_tr_bs4_i8_a3x3": ("17,17", "3", "2", "0", 192, 320, 4),
    "inception_tr_bs4_i8_b3x3": ("17,17", "3", "2", "0", 192, 192, 4),
    "inception_tr_bs4_i9_a1x1": ("8,8", "1", "1", "0", 1280, 320, 4),
    "inception_tr_bs4_i9_c1x1": ("8,8", "1", "1", "0", 1280, 448, 4),
    "inception_tr_bs4_i9_ba1x3": ("8,8", "1,3", "1", "0,1", 384, 384, 4),
    "inception_tr_bs4_i9_bb3x1": ("8,8", "3,1", "1", "1,0", 384, 384, 4),
    "inception_tr_bs4_i9_d1x1": ("8,8", "1", "1", "0", 1280, 192, 4),
    "inception_tr_bs4_i9_c3x3": ("8,8", "3", "1", "1", 448, 384, 4),
    "inception_tr_bs4_i10_a1x1": ("8,8", "1", "1", "0", 2048, 320, 4),
    "inception_tr_bs4_i10_b1x1": ("8,8", "1", "1", "0", 2048, 384, 4),
    "inception_tr_bs4_i10_c1x1": ("8,8", "1", "1", "0", 2048, 448, 4),
    "inception_tr_bs4_i10_d1x1": ("8,8", "1", "1", "0", 2048, 192, 4),
    "vgg16_tr_bs4_v1L0": ("224,224", "3", "1", "1", 4, 64, 4),
    "vgg16_tr_bs4_v2L0": ("112,112", "3", "1", "1", 64, 128, 4),
    "vgg16_tr_bs4_v2L1": ("112,112", "3", "1", "1", 128, 128, 4),
    "vgg16_tr_bs4_v3L0": ("56,56", "3", "1", "1", 128, 256, 4),
    "vgg16_tr_bs4_v3L1": ("56,56", "3", "1", "1", 256, 256, 4),
    "vgg16_tr_bs4_v4L0": ("28,28", "3", "1", "1", 256, 512, 4),
    "vgg16_tr_bs4_v4L1": ("28,28", "3", "1", "1", 512, 512, 4),
    "vgg16_tr_bs4_v5L0": ("14,14", "3", "1", "1", 512, 512, 4),
    "alexnet_tr_bs4_layer1": ("224,224", "11", "4", "3", 4, 64, 4),
    "alexnet_tr_bs4_layer4": ("27,27", "5", "1", "2", 64, 192, 4),
    "alexnet_tr_bs4_layer7": ("13,13", "3", "1", "0", 192, 384, 4),
    "alexnet_tr_bs4_layer9": ("13,13", "3", "1", "0", 384, 256, 4),
    "alexnet_tr_bs4_layer11": ("13,13", "3", "1", "0", 256, 256, 4),
    "mobilenet_conv_pw_1_1": ("112,112", "1", "1", "0", 32, 64, 4),
    "mobilenet_conv_pw_2_1": ("56,56", "1", "1", "0", 64, 128, 4),
    "mobilenet_conv_pw_3_1": ("56,56", "1", "1", "0", 128, 128, 4),
    "mobilenet_conv_pw_4_1": ("28,28", "1", "1", "0", 128, 256, 4),
    "mobilenet_conv_pw_5_1": ("28,28", "1", "1", "0", 256, 256, 4),
    "mobilenet_conv_pw_6_1": ("14,14", "1", "1", "0", 256, 512, 4),
    "mobilenet_conv_pw_7_1": ("14,14", "1", "1", "0", 512, 512, 4),
    "mobilenet_conv_pw_12_1": ("7,7", "1", "1", "0", 512, 1024, 4),
    "mobilenet_conv_pw_13_1": ("7,7", "1", "1", "0", 1024, 1024, 4),
    "conv_5x200_1_in_100_out_bs1440": ("15,200", "5,200", "1", "0", 1, 100, 1440),
    "mobilenet_conv1_1": ("224,224", "3", "2", "", 4, 32, 4),
}

#: The convolution calls that pad the start of each field dim alone: their --padding-lower (the
#: end is then not padded, single_conv_layer's default --padding-upper 0).
CONV_PADDING_LOWER: dict[str, str] = {"mobilenet_conv1_1": "1"}

#: Families of the published table the presets cannot run as poplibs' tools do, and why. Each row
#: of the data file is either mapped by shape_of or matched here (first pattern that matches).
EXCLUDED: tuple[tuple[str, str], ...] = (
    (
        r"mobilenet_depthwise.*",
        "depthwise convolution (single_conv_layer --conv-groups); the conv preset has no groups",
    ),
    (r"vgg16_tr_bs4_v1L1", "its add_conv_benchmark call is commented out in tests/CMakeLists.txt (T17350)"),
    (r"oct_resnet50_.*", "octave convolution (oct_conv_layer tool); no preset"),
    (r"bert_reduce_.*|resnet50_tr_bs1_.*_reduce", "reduction (reduce_op tool); no preset"),
    (r"inception_tr_bs1_.*pool.*", "pooling (pooling_layer tool); no preset"),
    (r"lstm_.*|gru_.*", "LSTM or GRU layer (lstm_layer, gru_layer tools); no preset"),
    (r"embedding_.*", "embedding lookup (embedding_layer tool); no preset"),
    (r"cholesky_.*|triangular_solve_.*", "Cholesky factorisation or triangular solve (matrix_solver tool); no preset"),
    (r"ctc_loss_.*", "CTC loss (ctc_loss tool); no preset"),
)

#: The architecture each published target models: IpuModel1 a Mk1 IPU (1,216 tiles), IpuModel2 a
#: Mk2 IPU (1,472 tiles); poplibs' test devices use all the tiles.
ARCH = {"IpuModel1": "ipu1", "IpuModel2": "ipu2"}


def excluded(name: str) -> str | None:
    """Why a published row is not run, or None when a preset runs it."""
    for pattern, reason in EXCLUDED:
        if re.fullmatch(pattern, name):
            return reason
    return None


def family(name: str) -> str:
    """The row's family in the summary: fc, gemm, bert or conv."""
    if name.startswith("fc_layer_"):
        return "fc"
    if name.startswith("gemm_"):
        return "gemm"
    if name.startswith("bert_"):
        return "bert"
    return "conv"


def shape_of(name: str, target: str = "IpuModel2") -> tuple[str, dict, str]:
    """(preset, knobs, set) of a reference row: set is "calibration" or "out-of-sample".

    The calibration set is the IpuModel2 fc_layer_*, gemm_* and bert_ffn* rows; every other row
    (the IpuModel1 copies of those shapes included) is out-of-sample.
    """
    if target not in ARCH:
        raise KeyError(f"no architecture known for target {target!r}")
    preset, knobs = _shape(name)
    calibration = target == "IpuModel2" and re.fullmatch(r"fc_layer_.*|gemm_.*|bert_ffn.*", name) is not None
    return preset, {"arch": ARCH[target], **knobs}, "calibration" if calibration else "out-of-sample"


def _shape(name: str) -> tuple[str, dict]:
    m = re.fullmatch(r"fc_layer_(\d+)_(\d+)_(\d+)_(half|float)", name)
    if m:
        return "fc", {"batch-size": int(m[1]), "input-size": int(m[2]), "output-size": int(m[3]), "dtype": m[4]}
    m = re.fullmatch(r"fc_layer_(\d+)[x_](\d+)[x_](\d+)", name)
    if m:
        return "fc", {"batch-size": int(m[1]), "input-size": int(m[2]), "output-size": int(m[3])}
    m = re.fullmatch(r"bert_(?:ffn[12]|kqv)_(\d+)x(\d+)x(\d+)", name)
    if m:  # --batch-size S --input-size H --output-size FX (ffn1) or 3H (kqv), the reverse for ffn2
        return "fc", {"batch-size": int(m[1]), "input-size": int(m[2]), "output-size": int(m[3])}
    m = re.fullmatch(r"bert_grouped_(\d+)x(\d+)x64x\2", name)
    if m:  # bert_grouped_K x S x 64 x S runs --input-size 64 --output-size S --batch-size S --num-groups K
        return "fc", {"batch-size": int(m[2]), "input-size": 64, "output-size": int(m[2]), "num-groups": int(m[1])}
    m = re.fullmatch(r"bert_proj_(\d+)x(\d+)x\2", name)
    if m:  # bert_proj_S x H x H runs --input-size H --output-size S --batch-size H (as the call says)
        return "fc", {"batch-size": int(m[2]), "input-size": int(m[2]), "output-size": int(m[1])}
    m = re.fullmatch(r"gemm_(\d+)x(\d+)x(\d+)", name)
    if m:
        return "gemm", {"m": int(m[1]), "k": int(m[2]), "n": int(m[3])}
    if name in CONV_SHAPES:
        field, kernel, stride, padding, cin, cout, batch = CONV_SHAPES[name]
        pads = {"padding-lower": CONV_PADDING_LOWER[name]} if name in CONV_PADDING_LOWER else {"padding": padding}
        return "conv", {
            "field": field,
            "kernel-size": kernel,
            "stride": stride,
            **pads,
            "input-channels": cin,
            "output-channels": cout,
            "batch-size": batch,
        }
    raise KeyError(f"no shape known for benchmark row {name!r}")


def reference_rows(path: str = DATA) -> list[dict]:
    """The published rows: target, name, cycles, total and max tile memory."""
    with open(path, newline="") as f:
        lines = [line for line in f if not line.startswith("#")]
    return [
        {
            "target": r["Target"],
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
    """Run a preset on an IPU-Model (all tiles of the knobs' arch) and measure its report."""
    from simulator.presets import run_preset

    with tempfile.TemporaryDirectory(prefix="pva-calibration-") as d:
        run_preset(preset, knobs, d, timestamp="2024-01-01T00:00:00Z", progress=False, functional=False)
        return measure(d)


def ratio_error(ratio: float) -> float:
    """A ratio's error as a factor >= 1 (0.5 and 2.0 are both 2x off)."""
    return max(ratio, 1 / ratio) if ratio > 0 else math.inf


def geomean_error(ratios: list[float]) -> float:
    """The geometric mean of the errors of the ratios."""
    return math.exp(sum(math.log(ratio_error(r)) for r in ratios) / len(ratios)) if ratios else math.nan


def selected(only: str | None = None, which: str | None = None, target: str | None = None) -> list[dict]:
    """The published rows a preset runs, with their preset, knobs and set, filtered by name part,
    set ("calibration" or "out-of-sample") and target ("IpuModel1" or "IpuModel2")."""
    out = []
    for ref in reference_rows():
        if excluded(ref["name"]) is not None:
            continue
        if (only and only not in ref["name"]) or (target and ref["target"] != target):
            continue
        preset, knobs, row_set = shape_of(ref["name"], ref["target"])
        if which and row_set != which:
            continue
        out.append({"reference": ref, "preset": preset, "knobs": knobs, "set": row_set})
    return out


def calibrate(
    only: str | None = None, progress=None, which: str | None = None, target: str | None = None
) -> list[dict]:
    """Simulate every selected reference row (see selected)."""
    rows = []
    for chosen in selected(only, which, target):
        ref = chosen["reference"]
        try:
            sim = simulate(chosen["preset"], chosen["knobs"])
        except Exception as exc:  # a crash is a finding of the check, reported beside the figures
            row = {**chosen, "name": ref["name"], "target": ref["target"], "error": f"{type(exc).__name__}: {exc}"}
        else:
            row = {
                **chosen,
                "name": ref["name"],
                "target": ref["target"],
                "simulated": sim,
                "ratios": {key: sim[key] / ref[key] for key in ("cycles", "total_memory", "max_tile_memory")},
            }
        rows.append(row)
        if progress is not None:
            progress(row)
    return rows


def groups(rows: list[dict]) -> dict[str, list[dict]]:
    """The summary's groups: the calibration set, its families, and the out-of-sample rows by target
    and family (Mk2 convolutions, Mk1 fc rows, ...)."""
    out: dict[str, list[dict]] = {}
    for row in rows:
        keys = [row["set"]]
        if row["set"] == "calibration":
            keys.append(f"calibration {family(row['name'])}")
        else:
            keys.append(f"out-of-sample {'Mk1' if row['target'] == 'IpuModel1' else 'Mk2'} {family(row['name'])}")
        for key in keys:
            out.setdefault(key, []).append(row)
    # the calibration set first, then the out-of-sample rows, Mk2 before Mk1, families in a fixed order
    rank = {"bert": 0, "fc": 1, "gemm": 2, "conv": 3}
    order = sorted(out, key=lambda k: (k.split()[0], "Mk1" in k, rank.get(k.split()[-1], -1)))
    return {key: out[key] for key in order}


def summary(rows: list[dict]) -> dict:
    """Geometric-mean errors and worst ratios of each group (see groups); failed rows counted apart."""
    out: dict[str, dict] = {}
    for name, members in groups(rows).items():
        ran = [r for r in members if "ratios" in r]
        out[name] = {
            key: {
                "geomean_error": geomean_error([r["ratios"][key] for r in ran]),
                "worst_error": max((ratio_error(r["ratios"][key]) for r in ran), default=math.nan),
                "within_1_5x": sum(ratio_error(r["ratios"][key]) <= 1.5 for r in ran),
                "rows": len(ran),
            }
            for key in ("cycles", "total_memory", "max_tile_memory")
        }
        out[name]["failed"] = len(members) - len(ran)
    return out


def format_row(row: dict) -> str:
    ref = row["reference"]
    head = f"{row['name']:34} {row['target']:9} {ref['cycles']:>9,}"
    if "error" in row:
        return f"{head} FAILED {row['error']}"
    sim, ratio = row["simulated"], row["ratios"]
    return (
        f"{head} {sim['cycles']:>9,} {ratio['cycles']:>5.2f}  "
        f"{ref['total_memory'] / 1e6:>7.1f} {sim['total_memory'] / 1e6:>7.1f} {ratio['total_memory']:>5.2f}  "
        f"{ref['max_tile_memory']:>8,} {sim['max_tile_memory']:>8,} {ratio['max_tile_memory']:>5.2f}"
    )


HEADER = (
    f"{'row':34} {'target':9} {'cycles':>9} {'simulated':>9} {'ratio':>5}  {'totalMB':>7} {'sim MB':>7} "
    f"{'ratio':>5}  {'max tile':>8} {'sim tile':>8} {'ratio':>5}"
)
