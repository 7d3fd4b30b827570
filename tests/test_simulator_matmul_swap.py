"""Matrix products planned swapped: a lone product under poplin's swapOperands plan constraint, a
fully-connected pass when that is cheaper, with poplin's transform costs (lib/poplin/ConvPlan.cpp,
getSwapOperandCandidates; ConvModel.cpp, addTransformCycleEstimate), and clones that keep their
source's storage order."""

from __future__ import annotations

import numpy as np
import pytest
from simulator_run import codelet_graph, run_functional, run_product

from simulator import FLOAT, HALF, Graph, Sequence, Target
from simulator.compiler.regions import split_by_mapping
from simulator.errors import GraphError
from simulator.poplibs import poplin, popops
from simulator.poplibs._util import in_storage_order, map_linearly
from simulator.target import architecture


def test_transform_cost_of_operands_as_given_rearranges_both_operands_and_the_output():
    # [64, 256] x [256, 128] half on 32 tiles, grains 16 (k) and 8 (n): per tile 1,536 operand
    # elements (3,072 bytes) and 256 output elements (512 bytes); copies at min(8, 2) bytes a cycle
    # scaled by 5/4, exchanges at 4 bytes a cycle; temporary bytes twice the larger copy
    arch = architecture("ipu2")
    cycles, temp = poplin.transform_cost(arch, False, 64, 256, 128, 16, 8, 32, HALF, HALF)
    assert int(cycles) == (3072 * 5 // 8) + 3072 // 4 + (512 * 5 // 8) + 512 // 4 == 3136
    assert int(temp) == 2 * 3072


def test_transform_cost_scales_by_the_types_and_the_unpadded_channels():
    # [10, 30] x [30, 7], half in and float out, grains 16 and 8, 4 tiles: 576 operand bytes a
    # tile (elements padded: 10 x 32 + 32 x 8, at the output type's 4 bytes), copied at
    # min(8, 4) bytes a cycle scaled by 5/3 (30 x 7 halves are not a multiple of 4); 80 output
    # bytes scaled by 5/3 (7 floats are not a multiple of 2)
    arch = architecture("ipu2")
    cycles, temp = poplin.transform_cost(arch, False, 10, 30, 7, 16, 8, 4, HALF, FLOAT)
    assert int(cycles) == -(-576 * 5 // (4 * 3)) + 576 // 4 + -(-80 * 5 // (4 * 3)) + 80 // 4 == 438
    assert int(temp) == 2 * 576


def test_transform_temporary_bytes_are_held_to_the_memory_bound():
    # poplin's totalTempBytes takes the larger of the transform's and the convolution's
    g = Graph(Target("ipu2", tiles_per_ipu=16))
    plan = poplin.plan_matmul(g, 8, 4096, 8, HALF, swap=False)
    used = plan.pm * plan.pn * plan.pk
    _, temp = poplin.transform_cost(
        architecture("ipu2"), False, 8, 4096, 8, plan.k_grain, plan.n_grain, used, HALF, HALF
    )
    assert plan.estimate["memory"] >= int(temp) > 0


def test_transform_cost_of_swapped_operands_is_the_output_regroup_alone():
    # swapped, nothing is padded: only the output of a lone product is regrouped, its channel
    # group (8) not one conv unit's weights (16), at min(8, 8 x 2) bytes a cycle
    arch = architecture("ipu2")
    cycles, temp = poplin.transform_cost(arch, True, 128, 256, 64, 16, 8, 32, HALF, HALF)
    assert int(cycles) == -(-512 * 5 // (8 * 4)) == 80
    assert int(temp) == 1024
    # a group of 16 output channels needs no regroup; padded input channels are rearranged
    cycles, _ = poplin.transform_cost(arch, True, 128, 256, 64, 16, 16, 32, HALF, HALF)
    assert int(cycles) == 0
    cycles, _ = poplin.transform_cost(arch, True, 128, 250, 64, 16, 16, 32, HALF, HALF)
    assert int(cycles) > 0


SWAP = {"planConstraints": {"0": {"transform": {"swapOperands": True}}}}


def _copies(program) -> int:
    """Copy programs anywhere in a program tree."""
    children = getattr(program, "programs", [])
    return int(type(program).__name__ == "Copy") + sum(_copies(p) for p in children)


def test_the_swap_constraint_plans_the_swapped_product_with_poplins_transform_costs():
    g = Graph(Target("ipu2"))
    as_given = poplin.plan_matmul(g, 600, 256, 20000, HALF)
    assert not as_given.swapped and (as_given.m, as_given.n) == (600, 20000)
    assert as_given.estimate["transform"] == 0
    swapped = poplin.plan_matmul(g, 600, 256, 20000, HALF, swap=poplin.plan_swap(SWAP))
    assert swapped.swapped and (swapped.m, swapped.k, swapped.n) == (20000, 256, 600)
    # swapped, only the output is regrouped (its group of 8 is not a conv unit's 16 weights)
    used = swapped.pm * swapped.pn * swapped.pk
    out_bytes = -(-(20000 * 600) // used) * 2
    assert swapped.estimate["transform"] == -(-out_bytes * 5 // (8 * 4))
    # as given under the constraint, both operands and the output are rearranged
    given = poplin.plan_matmul(g, 600, 256, 20000, HALF, swap=False)
    assert not given.swapped and given.estimate["transform"] > swapped.estimate["transform"]


def test_swap_constraints_are_checked():
    assert poplin.plan_swap(None) is None
    assert poplin.plan_swap({"planConstraints": '{"0": {"transform": {"swapOperands": false}}}'}) is False
    with pytest.raises(GraphError, match="swapOperands must be true or false"):
        poplin.plan_swap({"planConstraints": {"0": {"transform": {"swapOperands": "yes"}}}})
    with pytest.raises(GraphError, match="fullyConnectedPass must be one of"):
        poplin.matmul_pass({"fullyConnectedPass": "SIDEWAYS"})
    # poplin's FullyConnectedPass values (lib/poplin/MatMul.cpp), NONE by default
    assert poplin.matmul_pass({"fullyConnectedPass": "inference_fwd"}) == "INFERENCE_FWD"
    assert poplin.matmul_pass(None) == "NONE"


@pytest.mark.parametrize("shape", [(64, 32, 48), (40, 24, 8)])
def test_swapped_product_computes_a_times_b_on_operands_created_for_it(tmp_path, shape):
    m, k, n = shape
    g = codelet_graph(tiles=16)
    plan = poplin.plan_matmul(g, m, k, n, FLOAT, swap=True)
    assert plan.swapped
    expected, got, prog = run_product(g, shape, SWAP, tmp_path, seed=3)
    assert np.allclose(got, expected, atol=1e-4)
    # the operands are stored as the swapped product reads them: nothing is copied first
    assert _copies(prog) == 0


def test_clone_of_a_transposed_view_keeps_its_storage_order():
    # Poplar's default clone (PRESERVE_ORDER_UNLESS_ALIASES): the clone of C^T viewed as C is
    # stored as C^T, each element on the tile of the element it copies
    g = codelet_graph(tiles=16)
    X = g.addVariable(HALF, [32, 48], "X")
    map_linearly(g, X, grain=8)
    view = X.transpose()
    clone = g.clone(view, "clone")
    assert clone.shape == view.shape
    back = clone.transpose()
    assert back.is_whole_variable()
    state = g.state
    src = split_by_mapping(state, X.vars, X.starts, X.lengths)
    dst = split_by_mapping(state, back.vars, back.starts, back.lengths)
    assert np.array_equal(src[1], dst[1]) and np.array_equal(src[3], dst[3])


def test_element_wise_operations_on_transposed_views_work_in_storage_order(tmp_path):
    # popops reorders flattened operands to the first one's storage order before it builds vertices
    # (Graph::reorderToSimplify): operands stored alike give one region a tile, not one an element
    g = codelet_graph(tiles=16)
    X = g.addVariable(FLOAT, [32, 48], "X")
    Y = g.addVariable(FLOAT, [32, 48], "Y")
    map_linearly(g, X, grain=8)
    map_linearly(g, Y, grain=8)
    prog = Sequence()
    Z = popops.add(g, X.transpose(), Y.transpose(), prog, "sum")
    popops.scaledAddTo(g, X.transpose(), Y.transpose(), 0.5, prog, "acc")
    stored = in_storage_order(Z, X.transpose(), Y.transpose())
    assert all(len(t.vars) == 1 for t in stored)
    rng = np.random.default_rng(9)
    x = rng.standard_normal((32, 48)).astype(np.float32)
    y = rng.standard_normal((32, 48)).astype(np.float32)
    g.createHostWrite("X", X)
    g.createHostWrite("Y", Y)
    g.createHostRead("Z", Z)
    g.createHostRead("Xout", X)
    out = run_functional(g, [prog], tmp_path, {"X": x, "Y": y}, ["Z", "Xout"])
    assert np.allclose(out["Z"], (x + y).T)
    assert np.allclose(out["Xout"], x + 0.5 * y)
    # each vertex's edges hold one region per operand on its tile (16 tiles, 3 operands, 2 ops)
    for prefix, operands in (("sum/", 3), ("acc/", 2)):
        cs = next(c for c in g.state.compute_sets if c.name.startswith(prefix))
        regions = sum(len(conn[0]) for batch in cs.batches for conn in batch.fields.values())
        assert regions <= 16 * operands


def test_transform_cost_of_the_fully_connected_passes_planned_alone():
    # poplin's addTransformCycleEstimate for FC_TRAINING_* passes planned alone (not jointly):
    # swapped and unpadded, the forward pass moves nothing, the backward pass rearranges its input
    # and the weight update its input and its output; no pass regroups its output
    arch = architecture("ipu2")

    def cost(fc_pass, swapped=True, n_grain=16):
        cycles, temp = poplin.transform_cost(arch, swapped, 64, 64, 64, 16, n_grain, 4, HALF, HALF, fc_pass)
        return int(cycles), int(temp)

    # 64 x 64 halves on 4 tiles: 2,048 bytes a tile, exchanged at 4 a cycle (512) and copied at
    # 2 a cycle scaled by 5/4 (1,280); the temporary bytes are twice the largest copy
    one_copy = 512 + 1280
    assert cost("TRAINING_FWD") == (0, 0)
    assert cost("TRAINING_FWD", n_grain=8) == (0, 0)
    assert cost("TRAINING_BWD") == (one_copy, 4096)
    assert cost("TRAINING_WU") == (2 * one_copy, 4096)
    # a lone product regroups an output grouped otherwise than one conv unit's 16 halves: 8 bytes
    # a cycle (min(memcpy rate, 8 halves)) scaled by 5/4
    assert cost("NONE", n_grain=8) == (320, 4096)
    # as given, both operands (4,096 bytes a tile) and the output are rearranged
    assert cost("TRAINING_FWD", swapped=False) == (1024 + 2560 + one_copy, 8192)


@pytest.mark.parametrize(
    ("fc_pass", "m", "k", "n", "swaps"),
    [
        ("TRAINING_FWD", 4, 1000, 1000, True),
        ("TRAINING_BWD", 4, 1000, 1000, True),
        ("TRAINING_FWD", 16, 1000, 5, False),
    ],
)
def test_a_fully_connected_pass_keeps_the_cheaper_orientation(fc_pass, m, k, n, swaps):
    # ConvPlan.cpp, getSwapOperandCandidates: a fully-connected pass planned alone tries its
    # operands swapped, then as given, each with its transform costs, and keeps the cheaper plan:
    # the forward pass of fc_layer_4_1000_1000_half swaps (as given it rearranges both operands
    # and the output), that of fc_layer_16_1000_5_half does not (1,808 estimated cycles swapped,
    # 1,762 as given)
    g = Graph(Target("ipu2"))
    plan = poplin.plan_product(g, m, k, n, HALF, {"fullyConnectedPass": fc_pass})
    swapped = poplin.plan_matmul(g, m, k, n, HALF, swap=True, fc_pass=fc_pass).estimate["total"]
    given = poplin.plan_matmul(g, m, k, n, HALF, swap=False, fc_pass=fc_pass).estimate["total"]
    assert plan.swapped is swaps
    assert plan.swapped == (swapped <= given)
    assert plan.estimate["total"] == min(swapped, given)
    # a lone product (poplin's NONE_MATMUL) is planned both ways as well, with its own costs: as
    # given, both operands and the output are rearranged
    lone = poplin.plan_product(g, m, k, n, HALF)
    lone_swapped = poplin.plan_matmul(g, m, k, n, HALF, swap=True).estimate["total"]
    lone_given = poplin.plan_matmul(g, m, k, n, HALF, swap=False).estimate["total"]
    assert lone.swapped == (lone_swapped <= lone_given)
    assert lone.estimate["total"] == min(lone_swapped, lone_given)
    forced = poplin.plan_product(g, m, k, n, HALF, {"fullyConnectedPass": fc_pass, **SWAP})
    assert forced.swapped


def test_a_lone_product_is_planned_swapped_when_poplin_would():
    # gemm_600x256x20000 (general_matrix_multiply's default half): as given, poplin charges the
    # copies that rearrange both operands and the output, so the swapped plan wins: C^T's 20,000
    # rows over 38 and A's 600 rows (its output channels) over 38, 1,444 tiles
    g = Graph(Target("ipu2"))
    plan = poplin.plan_product(g, 600, 256, 20000, HALF)
    assert plan.swapped and (plan.m, plan.k, plan.n) == (20000, 256, 600)
    assert (plan.pm, plan.pn, plan.pk) == (38, 38, 1)
    given = poplin.plan_matmul(g, 600, 256, 20000, HALF, swap=False)
    assert plan.estimate["total"] == 124_067 < given.estimate["total"]


def test_a_convolutions_weight_update_is_planned_as_given_and_swapped_only_on_request():
    g = Graph(Target("ipu2", tiles_per_ipu=64))
    wu = {"pass": "TRAINING_WU"}
    assert poplin.matmul_pass(wu) == poplin.CONV_WEIGHT_UPDATE
    plan = poplin.plan_product(g, 576, 392, 64, HALF, wu)
    assert not plan.swapped and plan.estimate["transform"] == 0
    # swapped by the constraint, the plan pays the weight update's own transform costs, those of
    # the product it plans, C^T [64, 392] x [392, 576]
    swapped = poplin.plan_product(g, 576, 392, 64, HALF, {**wu, **SWAP})
    used = swapped.pm * swapped.pn * swapped.pk
    m, k, n = swapped.m, swapped.k, swapped.n
    assert (m, k, n) == (64, 392, 576)
    cost, _ = poplin.transform_cost(
        architecture("ipu2"),
        True,
        m,
        k,
        n,
        swapped.k_grain,
        swapped.n_grain,
        used,
        HALF,
        HALF,
        poplin.CONV_WEIGHT_UPDATE,
    )
    assert swapped.swapped and swapped.estimate["transform"] == int(cost) > 0
    # constrained either way, its operands are rearranged (ConvModel.cpp, addTransformCycleEstimate:
    # isConvWeightUpdate), where a lone product's swapped plan rearranges nothing unpadded
    arch = architecture("ipu2")
    conv_wu, _ = poplin.transform_cost(arch, True, 392, 576, 64, 16, 16, 64, HALF, HALF, poplin.CONV_WEIGHT_UPDATE)
    lone, _ = poplin.transform_cost(arch, True, 392, 576, 64, 16, 16, 64, HALF, HALF)
    # 392 x 576 + 576 x 64 halves over 64 tiles, 8,208 bytes a tile: copied at 2 bytes a cycle
    # scaled by 5/4, exchanged at 4
    assert int(lone) == 0 and int(conv_wu) == -(-8208 * 5 // 8) + 8208 // 4
    with pytest.raises(GraphError, match="pass option can only be TRAINING_WU"):
        poplin.matmul_pass({"pass": "TRAINING_FWD"})
    with pytest.raises(GraphError, match="either the pass option TRAINING_WU or fullyConnectedPass"):
        poplin.matmul_pass({"pass": "TRAINING_WU", "fullyConnectedPass": "TRAINING_WU"})
