"""poplin's ``0.partition`` plan constraints on a matrix product: the splits a user fixes, as
poplibs' tools take them with --plan-constraints (lib/poplin/ConvPlan.cpp, constrainPartitionVars),
named as --report-plan prints them."""

from __future__ import annotations

import numpy as np
import pytest
from simulator_run import codelet_graph, run_product

from pva.cli import main as cli_main
from simulator import FLOAT, HALF, Graph, Target
from simulator.errors import GraphError, OptionError
from simulator.poplibs import poplin
from simulator.presets import build_preset, resolve_knobs


def _partition(splits: dict) -> dict:
    return {"planConstraints": {"0": {"partition": splits}}}


def _grid(plan) -> tuple[int, int, int, int]:
    return plan.pm, plan.pn, plan.pk, plan.serial


def test_partition_constraints_are_read_as_the_plans_splits():
    assert poplin.plan_partition(None) is None
    assert poplin.plan_partition({"planConstraints": '{"method": "AMP"}'}) is None
    fixed = poplin.plan_partition(
        _partition({"batchSplit": 2, "outChanSplit": {"parallel": 8, "serial": 1}, "inChanSplit": {"parallel": 4}})
    )
    assert fixed == (("pk", 4), ("pm", 2), ("pn", 8), ("serial", 1))


@pytest.mark.parametrize(
    "splits, message",
    [
        ({"fieldSplit": {"0": 2}}, r"0\.partition\.fieldSplit: a matrix product's plan fixes only batchSplit"),
        ({"inChanSplit": {"serial": 2}}, r"0\.partition\.inChanSplit\.serial: a matrix product"),
        ({"batchSplit": 0}, r"0\.partition\.batchSplit must be a positive integer, got 0"),
        ({"batchSplit": True}, r"0\.partition\.batchSplit must be a positive integer, got True"),
        ({"outChanSplit": {"parallel": 2.5}}, r"0\.partition\.outChanSplit\.parallel must be a positive integer"),
        ({"batchSplit": {}}, r"0\.partition\.batchSplit must be a positive integer, got \{\}"),
        ({"outChanSplit": {"parallel": {"x": 1}}}, r"0\.partition\.outChanSplit\.parallel must be a positive"),
        ({"outChanSplit.parallel": 4}, r"0\.partition\.outChanSplit\.parallel: name a split's part as an object"),
    ],
)
def test_bad_partition_constraints_are_refused(splits, message):
    with pytest.raises(GraphError, match=message):
        poplin.plan_partition(_partition(splits))


def test_a_partition_that_is_not_an_object_is_refused():
    with pytest.raises(GraphError, match="0.partition must be a JSON object"):
        poplin.plan_partition({"planConstraints": {"0": {"partition": [1, 2]}}})


def test_a_fixed_partition_is_the_cheapest_plan_among_those_with_it():
    g = Graph(Target("ipu2", tiles_per_ipu=64))
    free = poplin.plan_matmul(g, 256, 512, 1024, HALF)
    assert _grid(free) == (1, 32, 2, 1)
    fixed = poplin.plan_matmul(g, 256, 512, 1024, HALF, partition=(("pm", 4), ("pn", 16), ("pk", 1)))
    assert _grid(fixed) == (4, 16, 1, 1)
    # the free plan is the cheapest; the fixed one costs what the planner estimates for its grid
    assert free.estimate["total"] < fixed.estimate["total"]
    # its tiles: the 64 = 4 x 16 x 1 cells, one each
    assert sorted(set(fixed.tiles.tolist())) == list(range(64))
    # a partial constraint leaves the rest to the planner: the column split stays the free plan's
    cols = poplin.plan_matmul(g, 256, 512, 1024, HALF, partition=(("pn", 32),))
    assert _grid(cols) == _grid(free)
    assert _grid(poplin.plan_matmul(g, 256, 512, 1024, HALF, partition=(("pm", 4),))) == (4, 16, 1, 1)


def test_a_partition_no_plan_has_is_an_error_naming_poplins_keys():
    g = Graph(Target("ipu2", tiles_per_ipu=64))
    with pytest.raises(GraphError, match=r"no plan of a \[256, 512\] x \[512, 1024\] product on 64 tiles") as info:
        poplin.plan_matmul(g, 256, 512, 1024, HALF, partition=(("pm", 8), ("pn", 16)))
    assert "(batchSplit 8, outChanSplit.parallel 16)" in str(info.value)
    # a split is the fewest parts for its share: 9 parts of 64 rows hold 8 rows each, as 8 parts do
    g16 = Graph(Target("ipu2", tiles_per_ipu=16))
    assert poplin.plan_matmul(g16, 64, 64, 64, HALF, partition=(("pm", 8),)).pm == 8
    with pytest.raises(GraphError, match=r"\(batchSplit 9\): a parallel split must be the fewest parts"):
        poplin.plan_matmul(g16, 64, 64, 64, HALF, partition=(("pm", 9),))
    # a serial split divides the output channels
    with pytest.raises(GraphError, match=r"\(outChanSplit\.serial 3\)"):
        poplin.plan_matmul(g16, 64, 64, 64, HALF, partition=(("serial", 3),))


def test_a_pass_planned_both_ways_names_the_product_as_given_when_neither_has_the_splits():
    # a fully-connected pass is planned swapped and as given; 30 row parts fit neither
    g = Graph(Target("ipu2", tiles_per_ipu=64))
    options = {"fullyConnectedPass": "TRAINING_FWD", **_partition({"batchSplit": 30})}
    with pytest.raises(GraphError, match=r"no plan of a \[20, 512\] x \[512, 64\] product on 64 tiles"):
        poplin.plan_product(g, 20, 512, 64, HALF, options)
    # splits that only the swapped product has: its 64 rows (B's columns) in 8 parts
    swapped = poplin.plan_product(
        g, 20, 512, 64, HALF, {"fullyConnectedPass": "TRAINING_FWD", **_partition({"batchSplit": 8})}
    )
    assert swapped.swapped and swapped.pm == 8


def test_a_serial_split_is_fixed_as_poplins_outchansplit_serial():
    # the serial split divides the output channels: the swapped product's 256 in 4 steps of 64
    g = Graph(Target("ipu2", tiles_per_ipu=64))
    plan = poplin.plan_product(g, 256, 512, 1024, HALF, _partition({"outChanSplit": {"serial": 4}}))
    assert plan.swapped and plan.serial == 4 and plan.step().n == 64


@pytest.mark.parametrize("swap", [False, True])
def test_a_product_with_a_fixed_partition_computes_a_times_b(tmp_path, swap):
    m, k, n = 48, 64, 40
    options = {"planConstraints": {"0": {"transform": {"swapOperands": swap}, "partition": {"batchSplit": 3}}}}
    g = codelet_graph(tiles=16)
    plan = poplin.plan_product(g, m, k, n, FLOAT, options)
    assert plan.pm == 3 and plan.swapped == swap
    expected, got, _ = run_product(g, (m, k, n), options, tmp_path, seed=5)
    assert np.allclose(got, expected, atol=1e-4)


GEMM = {"m": 256, "k": 512, "n": 1024, "tiles-per-ipu": 64, "report-plan": "1"}


def test_gemm_preset_reports_the_partition_it_was_given():
    text = (
        '{"0": {"transform": {"swapOperands": false}, '
        '"partition": {"batchSplit": 4, "outChanSplit": {"parallel": 16}, "inChanSplit": {"parallel": 1}}}}'
    )
    lines = build_preset("gemm", {**GEMM, "plan-constraints": text}).printed
    assert lines[3] == (
        "  partition: batchSplit 4, outChanSplit.parallel 16, outChanSplit.serial 1, inChanSplit.parallel 1, "
        "on 64 tiles"
    )
    assert lines[4] == "  a tile's block: 64 rows x 64 output channels x 512 input channels"
    free = build_preset("gemm", GEMM).printed
    assert free[3].startswith("  partition: batchSplit 4, outChanSplit.parallel 8, outChanSplit.serial 1, ")


def test_conv_preset_fixes_its_weight_updates_splits():
    knobs = {
        "field": "8,8",
        "input-channels": 16,
        "output-channels": 32,
        "batch-size": 2,
        "tiles-per-ipu": 16,
        "single-phase": "wu",
        "report-plan": "1",
    }
    fixed = '{"0": {"partition": {"batchSplit": 1, "inChanSplit": {"parallel": 8}}}}'
    free = build_preset("conv", knobs).printed
    lines = build_preset("conv", {**knobs, "wu-plan-constraints": fixed}).printed
    partition = [line for line in lines if line.startswith("  partition: ")]
    assert partition == [
        "  partition: batchSplit 1, outChanSplit.parallel 2, outChanSplit.serial 1, inChanSplit.parallel 8, on 16 tiles"
    ]
    assert [line for line in free if line.startswith("  partition: ")] != partition


def test_gemm_preset_refuses_partition_keys_it_does_not_model():
    knobs = resolve_knobs("gemm", {"plan-constraints": '{"0": {"partition": {"convGroupSplit": 2}}}'})
    with pytest.raises(OptionError, match=r"does not model '0\.partition\.convGroupSplit'; it honours method, "):
        build_preset("gemm", knobs)


def test_cli_refuses_a_partition_no_plan_has_with_status_2(tmp_path, capsys):
    out = tmp_path / "out"
    text = '{"0": {"partition": {"batchSplit": 64, "outChanSplit": {"parallel": 64}}}}'
    argv = ["simulate", "--preset", "gemm", "--m", "256", "--k", "64", "--n", "1024", "--tiles-per-ipu", "64"]
    assert cli_main([*argv, "--plan-constraints", text, "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "no plan of a [256, 64] x [64, 1024] product on 64 tiles" in err
    assert "(batchSplit 64, outChanSplit.parallel 64)" in err
    assert not out.exists()
