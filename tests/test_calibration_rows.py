"""The calibration runner's rows: every published row of poplibs' benchmark table is either run with
the shape and target of its poplibs tool command line or excluded with a reason, and the calibration
set stays the 59 IpuModel2 fc, gemm and bert_ffn rows (benchmarks/calibration.py)."""

from __future__ import annotations

import importlib.util
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _load_calibration():
    spec = importlib.util.spec_from_file_location("pva_bench_calibration", ROOT / "benchmarks" / "calibration.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


cal = _load_calibration()


def test_every_published_row_is_run_or_excluded_with_a_reason():
    rows = cal.reference_rows()
    assert len(rows) == 555  # the whole table of poplibs sdk-release-2.0, 278 IpuModel1 + 277 IpuModel2
    assert {r["target"] for r in rows} == {"IpuModel1", "IpuModel2"}
    for row in rows:
        reason = cal.excluded(row["name"])
        if reason is None:
            preset, knobs, which = cal.shape_of(row["name"], row["target"])
            assert preset in ("fc", "gemm", "conv"), row
            assert which in ("calibration", "out-of-sample")
        else:
            assert len(reason) > 20, row
            with pytest.raises(KeyError):  # an excluded row has no shape the presets could run
                cal.shape_of(row["name"], row["target"])
    assert len(cal.selected()) == 328
    assert len(cal.selected(which="out-of-sample")) == 269


def test_calibration_set_is_the_59_ipumodel2_fc_gemm_and_bert_ffn_rows():
    chosen = cal.selected(which="calibration")
    names = sorted(r["reference"]["name"] for r in chosen)
    assert len(names) == 59
    assert {r["reference"]["target"] for r in chosen} == {"IpuModel2"}
    assert {r["knobs"]["arch"] for r in chosen} == {"ipu2"}
    assert sum(n.startswith("fc_layer_") for n in names) == 20
    assert sum(n.startswith("gemm_") for n in names) == 27
    assert sum(n.startswith("bert_ffn") for n in names) == 12
    # the same rows the calibration table has always had
    assert names[0] == "bert_ffn1_128x1024x4096" and names[-1] == "gemm_600x64x30000"
    # their Mk1 copies are out-of-sample
    assert cal.shape_of("gemm_200x64x10000", "IpuModel1")[2] == "out-of-sample"
    assert cal.shape_of("fc_layer_1_1000_5_half", "IpuModel1")[2] == "out-of-sample"


@pytest.mark.parametrize(
    ("name", "target", "preset", "knobs", "which"),
    [
        (
            "fc_layer_16_1000_1000_float",
            "IpuModel1",
            "fc",
            {"arch": "ipu1", "batch-size": 16, "input-size": 1000, "output-size": 1000, "dtype": "float"},
            "out-of-sample",
        ),
        (
            "bert_ffn2_384x3072x768",
            "IpuModel2",
            "fc",
            {"arch": "ipu2", "batch-size": 384, "input-size": 3072, "output-size": 768},
            "calibration",
        ),
        # --input-size H --output-size 3H --batch-size S
        (
            "bert_kqv_384x768x2304",
            "IpuModel2",
            "fc",
            {"arch": "ipu2", "batch-size": 384, "input-size": 768, "output-size": 2304},
            "out-of-sample",
        ),
        # the call runs --input-size H --output-size S --batch-size H, whatever the name suggests
        (
            "bert_proj_128x1024x1024",
            "IpuModel2",
            "fc",
            {"arch": "ipu2", "batch-size": 1024, "input-size": 1024, "output-size": 128},
            "out-of-sample",
        ),
        ("gemm_600x512x20000", "IpuModel1", "gemm", {"arch": "ipu1", "m": 600, "k": 512, "n": 20000}, "out-of-sample"),
        (
            "resnet50_tr_bs4_cnv",
            "IpuModel2",
            "conv",
            {
                "arch": "ipu2",
                "field": "224,224",
                "kernel-size": "7",
                "stride": "2",
                "padding": "3",
                "input-channels": 4,
                "output-channels": 64,
                "batch-size": 4,
            },
            "out-of-sample",
        ),
        (
            "inception_tr_bs4_i5_b1x7",
            "IpuModel1",
            "conv",
            {
                "arch": "ipu1",
                "field": "17,17",
                "kernel-size": "1,7",
                "stride": "1",
                "padding": "0,3",
                "input-channels": 128,
                "output-channels": 128,
                "batch-size": 4,
            },
            "out-of-sample",
        ),
        (
            "conv_5x200_1_in_100_out_bs1440",
            "IpuModel2",
            "conv",
            {
                "arch": "ipu2",
                "field": "15,200",
                "kernel-size": "5,200",
                "stride": "1",
                "padding": "0",
                "input-channels": 1,
                "output-channels": 100,
                "batch-size": 1440,
            },
            "out-of-sample",
        ),
        # --padding-lower 1 alone: no --padding knob, the end of each dim not padded
        (
            "mobilenet_conv1_1",
            "IpuModel2",
            "conv",
            {
                "arch": "ipu2",
                "field": "224,224",
                "kernel-size": "3",
                "stride": "2",
                "padding-lower": "1",
                "input-channels": 4,
                "output-channels": 32,
                "batch-size": 4,
            },
            "out-of-sample",
        ),
        (
            "alexnet_tr_bs4_layer1",
            "IpuModel1",
            "conv",
            {
                "arch": "ipu1",
                "field": "224,224",
                "kernel-size": "11",
                "stride": "4",
                "padding": "3",
                "input-channels": 4,
                "output-channels": 64,
                "batch-size": 4,
            },
            "out-of-sample",
        ),
        (
            "bert_grouped_16x384x64x384",
            "IpuModel1",
            "fc",
            {"arch": "ipu1", "batch-size": 384, "input-size": 64, "output-size": 384, "num-groups": 16},
            "out-of-sample",
        ),
    ],
)
def test_rows_map_to_their_tools_command_lines(name, target, preset, knobs, which):
    assert cal.shape_of(name, target) == (preset, knobs, which)


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("mobilenet_depthwise_3", "--conv-groups"),
        ("vgg16_tr_bs4_v1L1", "commented out"),
        ("oct_resnet50_tr_bs4_bm64L0_a", "oct_conv_layer"),
        ("bert_reduce_0", "reduce_op"),
        ("triangular_solve_1_256_1_64_float_left", "matrix_solver"),
    ],
)
def test_excluded_rows_say_why(name, why):
    assert why in cal.excluded(name)


def test_conv_shapes_are_the_87_single_conv_layer_calls_the_preset_can_run():
    assert len(cal.CONV_SHAPES) == 87
    published = {r["name"] for r in cal.reference_rows()}
    assert set(cal.CONV_SHAPES) <= published
    assert cal.family("resnet50_tr_bs4_bm64L0") == "conv" and cal.family("bert_kqv_128x768x2304") == "bert"


def test_conv_knobs_build_the_published_layer():
    from simulator.presets import build_preset

    _, knobs, _ = cal.shape_of("inception_tr_bs4_i9_ba1x3", "IpuModel1")
    built = build_preset("conv", {**knobs, "tiles-per-ipu": 16, "single-phase": "fwd"})
    # 8x8 field, 1x3 kernel padded (0,1): 8x8 outputs of 384 x 384 MACs, 4 images; the outer kernel
    # columns write 7 output columns each, the middle one 8
    assert built.notes["macs"] == 4 * 8 * (7 + 8 + 7) * 384 * 384
    assert built.graph.target.arch.tiles_per_ipu == 1216  # Mk1, as IpuModel1


def test_summary_groups_out_of_sample_rows_by_target_and_family():
    def row(name, target, which, ratio):
        return {
            "name": name,
            "target": target,
            "set": which,
            "ratios": {"cycles": ratio, "total_memory": ratio, "max_tile_memory": ratio},
        }

    rows = [
        row("gemm_200x64x10000", "IpuModel2", "calibration", 1.0),
        row("gemm_200x64x10000", "IpuModel1", "out-of-sample", 2.0),
        row("resnet50_tr_bs4_cnv", "IpuModel1", "out-of-sample", 0.5),
        row("resnet50_tr_bs4_cnv", "IpuModel2", "out-of-sample", 1.25),
        {"name": "vgg16_tr_bs4_v1L0", "target": "IpuModel2", "set": "out-of-sample", "error": "boom"},
    ]
    result = cal.summary(rows)
    assert list(result) == [
        "calibration",
        "calibration gemm",
        "out-of-sample",
        "out-of-sample Mk2 conv",
        "out-of-sample Mk1 gemm",
        "out-of-sample Mk1 conv",
    ]
    assert result["out-of-sample"]["cycles"]["rows"] == 3
    assert result["out-of-sample"]["failed"] == 1
    assert result["out-of-sample Mk2 conv"]["failed"] == 1
    assert result["out-of-sample Mk1 conv"]["cycles"]["geomean_error"] == pytest.approx(2.0)
    assert result["out-of-sample"]["cycles"]["geomean_error"] == pytest.approx((2 * 2 * 1.25) ** (1 / 3))
    assert result["out-of-sample"]["cycles"]["within_1_5x"] == 1
