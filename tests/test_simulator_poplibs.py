"""Poplibs-style operations: their results on data, their vertices, and the calibrated cycle model."""

from __future__ import annotations

import numpy as np
import pytest
from simulator_run import build_convolution, codelet_graph, correlate, run_convolution, run_functional, run_product

from formats.pop.reader import ProfileReader
from simulator import FLOAT, HALF, Engine, Graph, Sequence, Target
from simulator.compiler.regions import split_by_mapping
from simulator.errors import GraphError
from simulator.poplibs import poplin, popnn, popops, rearrange
from simulator.poplibs.poplin import matmul

TS = "2024-01-01T00:00:00Z"

#: A lone product planned on its operands as given (poplin's swapOperands constraint); by default
#: the planner also weighs it swapped, as poplin plans NONE_MATMUL products
AS_GIVEN = {"planConstraints": {"0": {"transform": {"swapOperands": False}}}}


def test_matmul_reduce_and_elementwise_compute_on_data(tmp_path):
    g = codelet_graph()
    rng = np.random.default_rng(3)
    a = rng.standard_normal((37, 50)).astype(np.float32)
    b = rng.standard_normal((50, 23)).astype(np.float32)
    A = poplin.createMatMulInputLHS(g, FLOAT, a.shape, b.shape, "A")
    B = g.addVariable(FLOAT, b.shape, "B")
    from simulator.poplibs.poputil import mapTensorLinearly

    mapTensorLinearly(g, B)
    prog = Sequence()
    C = poplin.matMul(g, A, B, prog, "mm")
    D = popops.sub(g, C, popops.reduce(g, C, [0], prog, "MAX", debugPrefix="colmax"), prog, "shift")
    S = popops.reduce(g, D, [1], prog, "ADD", debugPrefix="rowsum")
    popnn.nonLinearityInPlace(g, "SIGMOID", D, prog, "sigmoid")
    for name, t in (("A", A), ("B", B)):
        g.createHostWrite(name, t)
    for name, t in (("C", C), ("D", D), ("S", S)):
        g.createHostRead(name, t)
    out = run_functional(g, prog, tmp_path, {"A": a, "B": b}, ["C", "D", "S"])
    c = a @ b
    d = c - c.max(axis=0)
    assert np.allclose(out["C"], c, atol=1e-4)
    assert np.allclose(out["S"], d.sum(axis=1), atol=1e-3)
    assert np.allclose(out["D"], 1 / (1 + np.exp(-d)), atol=1e-5)
    r = ProfileReader(tmp_path / "profile.pop")
    names = set(r.column("SELECT name FROM vertex_types"))
    assert "poplin::ConvPartial1x1Out<float,float,true,false>" in names
    assert "popnn::NonLinearitySupervisor<float,popnn::NonLinearityType::SIGMOID>" in names
    assert any(n.startswith("popops::Reduce<popops::ReduceMax,float,float,false") for n in names)
    assert "mm/Conv_1/Convolve" in r.column("SELECT name FROM compute_sets")


def test_convolution_matches_numpy(tmp_path):
    g = codelet_graph(16)
    params = poplin.ConvParams(2, 3, 5, (6, 7), (3, 3), (1, 2), (1, 1), FLOAT)
    x, w, prog, y = build_convolution(g, params)
    xv, wv, out = run_convolution(g, prog, x, w, y, tmp_path, seed=9)
    oh, ow = params.out_field
    ref = correlate(xv, wv, stride=(1, 2), padding=(1, 1))
    assert out.shape == (2, 5, oh, ow)
    assert np.allclose(out, ref, atol=1e-4)


def test_loss_and_gradients(tmp_path):
    g = codelet_graph(8)
    probs = g.addVariable(FLOAT, [4, 3], "probs")
    expected = g.addVariable(FLOAT, [4, 3], "expected")
    from simulator.poplibs.poputil import mapTensorLinearly

    mapTensorLinearly(g, probs)
    mapTensorLinearly(g, expected)
    prog = Sequence()
    deltas, loss = popnn.calcLoss(g, probs, expected, "SUM_SQUARED", prog, "loss")
    grad = popnn.nonLinearityInputGradient(g, "SIGMOID", probs, deltas, prog, "grad")
    g.createHostWrite("p", probs)
    g.createHostWrite("e", expected)
    g.createHostRead("loss", loss)
    g.createHostRead("grad", grad)
    p = np.full((4, 3), 0.25, dtype=np.float32)
    e = np.eye(4, 3, dtype=np.float32)
    out = run_functional(g, prog, tmp_path, {"p": p, "e": e}, ["loss", "grad"])
    assert np.isclose(float(out["loss"]), 0.5 * ((p - e) ** 2).sum())
    assert np.allclose(out["grad"], (p - e) * p * (1 - p))


# -- the cycle model against published IPU-Model figures ----------------------------------------

#: Cycles of poplibs' gemm benchmarks on the IPU Model (Mk1, half data, float partials), from
#: graphcore/poplibs tests/benchmark_results.csv; see the README section "The bundled IPU-Model simulator".
PUBLISHED = {
    (200, 64, 10000): 11_597,
    (1000, 256, 10000): 113_300,
    (600, 512, 30000): 502_036,
    (1000, 512, 30000): 941_961,
    (200, 256, 20000): 58_346,
}


@pytest.mark.parametrize("shape", sorted(PUBLISHED))
def test_matmul_plan_estimate_within_2x_of_published(shape):
    g = Graph(Target("ipu1"))
    m, k, n = shape
    plan = poplin.plan_matmul(g, m, k, n, HALF, FLOAT, HALF)
    ratio = plan.estimate["total"] / PUBLISHED[shape]
    assert 0.5 <= ratio <= 2.0, (shape, plan.estimate)


def test_simulated_matmul_within_2x_of_published(tmp_path):
    g = Graph(Target("ipu1"))
    poplin.addCodelets(g)
    popops.addCodelets(g)  # poplin casts its float partials with popops vertices
    A = poplin.createMatMulInputLHS(g, HALF, (200, 64), (64, 10000), "A")
    B = poplin.createMatMulInputRHS(g, HALF, (200, 64), (64, 10000), "B")
    prog = Sequence()
    poplin.matMul(g, A, B, prog, "gemm")
    with Engine(
        g,
        prog,
        {"autoReport.outputExecutionProfile": "true", "autoReport.directory": str(tmp_path)},
        timestamp=TS,
        functional=False,
    ) as e:
        e.run(0)
    r = ProfileReader(tmp_path / "profile.pop")
    start, end = r.query_one('SELECT start, "end" FROM run_cycles_by_ipu')
    ratio = (end - start) / PUBLISHED[(200, 64, 10000)]
    assert 0.5 <= ratio <= 2.0
    # the AMP vertex dominates and reaches a plausible share of the peak multiply-accumulate rate
    macs = 200 * 64 * 10000
    peak = 1216 * g.target.macs_per_cycle("half", "float")
    assert 0.1 <= macs / peak / (end - start) <= 1.0


def test_matmul_splits_channels_in_whole_amp_groups():
    # k = 1000 half inputs make 63 groups of 16 input channels, n = 5 one group of output channels
    # (8 wide: half inputs with float partials use 8 conv units on Mk2): poplin never splits a
    # group (ConvModel.cpp, totalInChanSplit <= numInChanGrains)
    g = Graph(Target("ipu2"))
    plan = poplin.plan_matmul(g, 8, 1000, 5, HALF, FLOAT, HALF)
    assert plan.pk <= 63 and plan.pn == 1
    assert plan.kb % 16 == 0 and plan.nb == 8
    # the split is the smallest one giving its block size (Model::ceildivConstrainDivisor)
    assert -(-63 // -(-63 // plan.pk)) == plan.pk


def test_weight_update_rearranges_a_transposed_operand_and_keeps_the_result(tmp_path):
    g = codelet_graph(tiles=16)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((8, 40)).astype(np.float32)
    z = rng.standard_normal((8, 24)).astype(np.float32)
    X = poplin.createMatMulInputLHS(g, FLOAT, x.shape, (40, 24), "X", AS_GIVEN)
    Z = poplin.createMatMulInputLHS(g, FLOAT, z.shape, (24, 40), "Z", AS_GIVEN)
    prog = Sequence()
    W = poplin.matMul(g, X.transpose(), Z, prog, "Wu", {"fullyConnectedPass": "TRAINING_WU"})
    for name, t in (("X", X), ("Z", Z)):
        g.createHostWrite(name, t)
    g.createHostRead("W", W)
    out = run_functional(g, [prog], tmp_path, {"X": x, "Z": z}, ["W"])
    assert np.allclose(out["W"], x.T @ z, atol=1e-4)
    r = ProfileReader(tmp_path / "profile.pop")
    names = [row[0] for row in r.query("SELECT name FROM compute_sets")]
    r.close()
    # the transposed activations are regrouped (their matrices copied to the tiles that transpose
    # them, popops::rearrange::regroupTensor), then copied into the plan's layout
    assert "Wu/actsRearranged/regroup/Transpose" in names
    assert any("regroup/preRegroup" in n for n in names)
    assert any("actsRearranged/OnTileCopy" in n or "actsRearranged/Exchange" in n for n in names)


def test_operands_created_for_the_plan_are_not_copied():
    g = codelet_graph(tiles=64)
    wu = {"fullyConnectedPass": "TRAINING_WU"}
    A = poplin.createMatMulInputLHS(g, HALF, (64, 256), (256, 128), "A", wu)
    B = poplin.createMatMulInputRHS(g, HALF, (64, 256), (256, 128), "B", wu)
    prog = Sequence()
    poplin.matMul(g, A, B, prog, "mm", wu)
    names = [cs.name for cs in g.state.compute_sets]
    assert not any("Rearranged" in n for n in names)
    assert not any(type(p).__name__ == "Copy" for p in prog.programs)


def test_matmul_cells_take_consecutive_tiles_in_poplins_order():
    # lib/poplin/Convolution.cpp, linearizeConvIndices: input-channel split outermost, output
    # channels innermost, from tile 0, so both tiles of a super tile read the same activations
    g = Graph(Target("ipu2", tiles_per_ipu=64))
    plan = poplin.plan_matmul(g, 64, 64, 64, HALF, FLOAT, HALF)
    pm, pn, pk = plan.pm, plan.pn, plan.pk
    assert pm * pn * pk > 1
    for cell, tile in enumerate(plan.tiles.tolist()):
        im, jn, ik = cell // (pn * pk), (cell // pk) % pn, cell % pk
        assert tile == (ik * pm + im) * pn + jn
    assert sorted(plan.tiles.tolist()) == list(range(pm * pn * pk))


def test_regroup_group_sizes_follow_update_grouping_internal():
    # lib/popops/Rearrange.cpp, updateGroupingInternal: the groups are split by the smallest prime
    # of (from * to) / grain^2 while the transpositions of the fullest IPU times the factor stay
    # within the tiles, then the factor is taken from `from` first, down to the grain
    # 62 transpositions of 16 x 16 halves on 1,472 tiles: factors 2, 4, 8, 16 fit (992 <= 1,472);
    # gcd(16, 16 / 4) = 4 from `from`, gcd(4, 4) = 4 from `to`
    assert rearrange.regroup_sizes(16, 16, 62, 1472, 4) == (4, 4)
    # 500 transpositions: only the factor 2 fits (1,000 <= 1,472 < 2,000), taken from `from`
    assert rearrange.regroup_sizes(16, 16, 500, 1472, 4) == (8, 16)
    # a group that is not a multiple of the grain is left alone
    assert rearrange.regroup_sizes(2, 16, 1, 1472, 4) == (2, 16)
    assert rearrange.regroup_grain(HALF) == 4 and rearrange.regroup_grain(FLOAT) == 2


def test_regroup_copies_matrices_spread_over_the_tiles_and_charges_their_exchange_code(tmp_path):
    from simulator.compiler import compile_graph
    from simulator.compiler.exchange import EXCHANGE_CODE_BYTES_PER_REGION, EXCHANGE_CODE_FIXED_BYTES

    g = codelet_graph(tiles=4)
    X = g.addVariable(HALF, [16, 16], "X")
    g.setTileMapping(X[:8], 0)
    g.setTileMapping(X[8:], 1)
    prog = Sequence()
    T = matmul._regroup(g, X.transpose(), 16, prog, "regroup")
    assert T.shape == (16, 16)
    # X^T's rows are contiguous in runs of 16 and one 16 x 16 matrix fits one of the 4 tiles four
    # times: the groups become 16 (to) x 4 (from), four matrices of 64 halves, matrix t on tile t,
    # matrix t holding X[y, 4t:4t+4] for the 16 rows y
    exe = compile_graph(g, [prog])
    plans = [p.plan for p in exe.progs if p.type == "DoExchange" and "preRegroup" in p.name]
    assert len(plans) == 1
    code = dict(zip(plans[0].code.idx.tolist(), plans[0].code.val.tolist()))
    # regions: tiles 0 and 1 each receive the 8 rows the other holds and send their 8 rows to the
    # three other tiles (8 + 24); tiles 2 and 3 receive 16 rows of 4 halves
    fixed, per_region = EXCHANGE_CODE_FIXED_BYTES, EXCHANGE_CODE_BYTES_PER_REGION
    assert code == {
        0: fixed + 32 * per_region,
        1: fixed + 32 * per_region,
        2: fixed + 16 * per_region,
        3: fixed + 16 * per_region,
    }
    g.createHostWrite("X", X)
    g.createHostRead("T", T)
    x = np.arange(256, dtype=np.float16).reshape(16, 16)
    out = run_functional(g, [prog], tmp_path, {"X": x}, ["T"])
    assert np.array_equal(out["T"], x.T)


FWD, BWD = ({"fullyConnectedPass": p} for p in ("TRAINING_FWD", "TRAINING_BWD"))


def _fc_backward(tmp_path, bwd_options, shape=(8, 96, 64)):
    """W [I, O] created for the forward pass, dA = dC W^T by the backward pass's options."""
    b, i, o = shape
    g = codelet_graph(tiles=16)
    rng = np.random.default_rng(7)
    w = rng.standard_normal((i, o)).astype(np.float32)
    z = rng.standard_normal((b, o)).astype(np.float32)
    W = poplin.createMatMulInputRHS(g, FLOAT, (b, i), (i, o), "W", FWD)
    Z = poplin.createMatMulInputLHS(g, FLOAT, (b, o), (o, i), "Z", bwd_options)
    prog = Sequence()
    Wt = poplin.transposeMatMulRHS(g, W, (b, i), prog, "Bwd/WeightsTranspose", bwd_options)
    D = poplin.matMul(g, Z, Wt, prog, "Bwd", bwd_options)
    for name, t in (("W", W), ("Z", Z)):
        g.createHostWrite(name, t)
    g.createHostRead("D", D)
    out = run_functional(g, [prog], tmp_path, {"W": w, "Z": z}, ["D"])
    assert np.allclose(out["D"], z @ w.T, atol=1e-4)
    return g, W, Wt, {cs.name for cs in g.state.compute_sets}


def test_fc_weight_transpose_is_laid_out_for_the_backward_plan(tmp_path):
    # poplin::fullyConnectedWeightTranspose with both plans swapped: the transposed weights are
    # created for the backward plan, so the backward pass reads them where they are
    g, _, Wt, names = _fc_backward(tmp_path, BWD)
    fwd = poplin.plan_product(g, 8, 96, 64, FLOAT, FWD)
    bwd = poplin.plan_product(g, 8, 64, 96, FLOAT, BWD)
    assert fwd.swapped and bwd.swapped
    assert "Bwd/WeightsTranspose/Transpose" in names
    assert not any("weightsRearranged" in n or "actsRearranged" in n for n in names)
    # every element of W (the swapped backward product's left operand) sits on a tile of the
    # backward plan that reads its block
    layout = matmul._operand_layout(bwd, "lhs")
    var, idx = Wt.transpose().element_arrays()
    from simulator.compiler.regions import split_by_mapping

    _, tiles, _, _ = split_by_mapping(g.state, var, idx, np.ones(idx.size, dtype=np.int64))
    rows, cols = np.divmod(np.arange(idx.size), 64)
    block = (rows // layout.rb) * -(-64 // layout.cb) + cols // layout.cb
    assert all(t in layout.users[b] for t, b in zip(tiles.tolist(), block.tolist()))
    # the transposed matrices: 8 x 8 floats (each plan's input-channel group of 8 divides its 96
    # and 64 input channels), the 96 x 64 weights' 96 matrices at most six vertices a tile
    assert (fwd.k_grain, bwd.k_grain) == (8, 8)
    (cs,) = [c for c in g.state.compute_sets if c.name == "Bwd/WeightsTranspose/Transpose"]
    (batch,) = cs.batches
    assert set(batch.work["rows"].tolist()) == {8} and set(batch.work["cols"].tolist()) == {8}
    assert int(batch.work["matrices"].sum()) == 96 * 64 // 64
    assert np.bincount(batch.tiles).max() <= 6


def test_fc_weight_transpose_is_a_view_unless_both_plans_swap(tmp_path):
    # getGroupSizes: useCopyImpl unless both plans swap their operands: W^T is W's transposed
    # view, which the backward product reads (or rearranges) as any operand
    swap_off = {**BWD, "planConstraints": '{"0": {"transform": {"swapOperands": false}}}'}
    _, W, Wt, names = _fc_backward(tmp_path / "given", swap_off)
    assert "Bwd/WeightsTranspose/Transpose" not in names
    assert np.array_equal(Wt.element_arrays()[1], W.transpose().element_arrays()[1])
    assert Wt.variable_ids() == W.variable_ids()


def test_fc_weight_transpose_is_a_view_when_a_group_would_be_one(tmp_path):
    # getGroupSizes: useCopyImpl when a transposed matrix's side would be 1: 5 outputs share no
    # divisor with the backward plan's input-channel group of 8 floats
    swapped = {**BWD, "planConstraints": '{"0": {"transform": {"swapOperands": true}}}'}
    g, W, Wt, names = _fc_backward(tmp_path, swapped, shape=(4, 40, 5))
    assert poplin.plan_product(g, 4, 40, 5, FLOAT, FWD).swapped
    assert poplin.plan_product(g, 4, 5, 40, FLOAT, swapped).swapped
    assert "Bwd/WeightsTranspose/Transpose" not in names
    assert Wt.variable_ids() == W.variable_ids()


def test_scaled_add_regroups_an_operand_grouped_along_the_other_dimension(tmp_path):
    # popops::scaledAddTo regroups B to A's grouping when they are grouped along different
    # dimensions (lib/popops/ScaledAdd.cpp: regroupIfBeneficial(B, A))
    g = codelet_graph(tiles=4)
    W = g.addVariable(HALF, [8, 32], "W")
    for t in range(4):
        g.setTileMapping(W[2 * t : 2 * t + 2], t)
    B = g.addVariable(HALF, [32, 8], "B")
    for t in range(4):
        g.setTileMapping(B[8 * t : 8 * t + 8], t)
    A = W.transpose()
    # detectDimGroupings: A's rows are W's columns, contiguous 32 at a time on one tile; B's rows
    # are 8 contiguous elements
    assert rearrange.dim_grouping(g, A) == (0, 32)
    assert rearrange.dim_grouping(g, B) == (1, 8)
    prog = Sequence()
    popops.scaledAddTo(g, A, B, 0.5, prog, "update")
    # one 8 x 32 transposition on 4 tiles: updateGroupingInternal cuts it 4 ways (2 from `from`,
    # 2 from `to`): four matrices of 16 x 4 halves, one a tile
    pre = next(v for v in g.state.vars if v.name == "update/regroupB/preRegroup")
    pre.finalize_mapping()
    assert pre.map_starts.tolist() == [0, 64, 128, 192]
    assert pre.map_tiles.tolist() == [0, 1, 2, 3]
    for name, t in (("W", W), ("B", B)):
        g.createHostWrite(name, t)
    g.createHostRead("W_out", W)
    w = np.arange(256, dtype=np.float16).reshape(8, 32) / 8
    b = np.arange(256, dtype=np.float16).reshape(32, 8) / 16
    out = run_functional(g, [prog], tmp_path, {"W": w, "B": b}, ["W_out"])
    assert np.allclose(out["W_out"], w + 0.5 * b.T)


def test_scaled_add_reads_a_scale_tensor_from_the_last_tile(tmp_path):
    # poplibs' tools pass the learning rate as a constant tensor; popops maps it to every tile in
    # turn, so it ends on the last, and its vertices read it (ScaledAddSupervisor<..., false>)
    g = codelet_graph(tiles=4)
    A = g.addVariable(FLOAT, [4, 8], "A")
    B = g.addVariable(FLOAT, [4, 8], "B")
    for t in range(4):
        g.setTileMapping(A[t], t)
        g.setTileMapping(B[t], t)
    scale = g.addConstant(HALF, [], -0.5, "scale")
    g.setTileMapping(scale, 0)  # as single_conv_layer maps it; the cast's output is what popops maps
    prog = Sequence()
    popops.scaledAddTo(g, A, B, scale, prog, "update")
    cast = next(v for v in g.state.vars if v.name == "update/scaleB/out")  # a half scale of float data
    cast.finalize_mapping()
    assert cast.map_tiles.tolist() == [3]
    batch = next(b for cs in g.state.compute_sets if cs.name == "update/AddTo" for b in cs.batches)
    assert batch.vtype.name == "popops::ScaledAddSupervisor<float,float,false>"
    for name, t in (("A", A), ("B", B)):
        g.createHostWrite(name, t)
    g.createHostRead("A_out", A)
    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    b = np.ones((4, 8), dtype=np.float32)
    out = run_functional(g, [prog], tmp_path, {"A": a, "B": b}, ["A_out"])
    assert np.allclose(out["A_out"], a - 0.5)
    with pytest.raises(GraphError, match=r"a scale tensor of one element, got shape \[8\]"):
        popops.scaledAddTo(g, A, B, B[0], Sequence(), "bad")
    with pytest.raises(GraphError, match="a scale tensor only without scaleA"):
        popops.scaledAddTo(g, A, B, scale, Sequence(), "bad", scaleA=2.0)


def test_matmul_planner_chooses_poplins_method_per_shape():
    # poplin weighs AMP, HMAC and OUTER_PRODUCT for a matrix product (ConvVertexType.cpp,
    # getConvVertexTypeCandidates; SLIC is disabled for fully-connected passes) and keeps the cheapest
    g = Graph(Target("ipu2", tiles_per_ipu=16))
    every = poplin.plan_methods({"planConstraints": '{"method": "all"}'})
    assert every == poplin.MATMUL_METHODS == ("AMP", "HMAC", "OUTER_PRODUCT")
    # one output channel: AMP would pad it to 8 conv units, HMAC's dot products do not pad
    hmac = poplin.plan_matmul(g, 64, 64, 1, FLOAT, FLOAT, FLOAT, methods=every)
    assert (hmac.method, hmac.pm, hmac.pn, hmac.pk) == ("HMAC", 16, 1, 1)
    # one input channel: an outer product, its output written in the input type
    outer = poplin.plan_matmul(g, 16, 1, 16, FLOAT, FLOAT, FLOAT, methods=every)
    assert outer.method == "OUTER_PRODUCT" and outer.pk == 1 and outer.n_grain == 2
    assert outer.vertex_out_type() == FLOAT
    # a square product stays on the conv units
    assert poplin.plan_matmul(g, 64, 64, 64, HALF, FLOAT, HALF, methods=every).method == "AMP"
    # by default (no plan constraint) the planner weighs AMP only
    assert poplin.plan_methods(None) == poplin.plan_methods({}) == ("AMP",)
    assert poplin.plan_matmul(g, 64, 64, 1, FLOAT, FLOAT, FLOAT).method == "AMP"
    # a constrained method is the only one weighed, as poplin's planConstraints "method"
    assert poplin.plan_methods({"planConstraints": {"method": "hmac"}}) == ("HMAC",)
    with pytest.raises(GraphError, match="OUTER_PRODUCT for one input channel only"):
        poplin.plan_matmul(g, 16, 8, 16, FLOAT, FLOAT, FLOAT, methods=("OUTER_PRODUCT",))
    with pytest.raises(GraphError, match="planConstraints method must be one of .*, got 'SLIC'"):
        poplin.plan_methods({"planConstraints": '{"method": "SLIC"}'})
    # a number is not a method's name, and the message shows it as the number it is
    with pytest.raises(GraphError, match="planConstraints method must be one of .*, got 5$"):
        poplin.plan_methods({"planConstraints": {"method": 5}})
    with pytest.raises(GraphError, match="planConstraints must be a JSON object"):
        poplin.plan_methods({"planConstraints": "{method"})


@pytest.mark.parametrize("shape", [(64, 64, 1), (16, 1, 16)])
def test_hmac_and_outer_product_matmuls_compute_on_data(tmp_path, shape):
    m, k, n = shape
    g = codelet_graph(tiles=16)
    options = {"planConstraints": '{"method": "all", "0": {"transform": {"swapOperands": false}}}'}
    expected, got, _ = run_product(g, shape, options, tmp_path, seed=11)
    assert np.allclose(got, expected, atol=1e-4)
    vertex = "poplin::ConvPartialHorizontalMac" if k > 1 else "poplin::OuterProduct"
    assert any(name.startswith(vertex) for name in g.state.vertex_types)
    assert not any(name.startswith("poplin::ConvPartial1x1Out") for name in g.state.vertex_types)
    # neither method's partials are in interleaved memory (only AMP's out field asks for it)
    products = [v for v in g.state.vars if v.name.startswith("mm/")]
    assert products and not any(v.interleaved for v in products)


def test_scaled_add_regroups_a_four_dimensional_operand_to_the_weights_grouping(tmp_path):
    # a convolution's weight deltas, a product [c*kh*kw, o] viewed as [o, c, kh, kw], are added to
    # weights grouped by input channels: popops regroups the deltas to that grouping first
    # (lib/popops/Rearrange.cpp, regroupIfBeneficial on the two grouped dimensions)
    g = codelet_graph(tiles=16)
    o, c, k = 16, 16, 3
    params = poplin.ConvParams(2, c, o, (6, 6), (k, k), (1, 1), (1, 1), FLOAT)
    weights = poplin.createWeights(g, params, "weights")
    rows, inner = c * k * k, 8
    wu = {"pass": "TRAINING_WU"}  # planned as the conv preset plans a weight update: as given
    acts = poplin.createMatMulInputLHS(g, FLOAT, (rows, inner), (inner, o), "acts", wu)
    deltas = poplin.createMatMulInputRHS(g, FLOAT, (rows, inner), (inner, o), "deltas", wu)
    prog = Sequence()
    product = poplin.matMul(g, acts, deltas, prog, "Wu", wu)
    popops.scaledAddTo(g, weights, product.transpose().reshape((o, c, k, k)), -0.5, prog, "acc")
    names = [cs.name for cs in g.state.compute_sets]
    assert "acc/regroupB/Transpose" in names
    rng = np.random.default_rng(4)
    w = rng.standard_normal((o, c, k, k)).astype(np.float32)
    a = rng.standard_normal((rows, inner)).astype(np.float32)
    z = rng.standard_normal((inner, o)).astype(np.float32)
    for name, t in (("W", weights), ("A", acts), ("Z", deltas)):
        g.createHostWrite(name, t)
    g.createHostRead("Wout", weights)
    out = run_functional(g, [prog], tmp_path, {"W": w, "A": a, "Z": z}, ["Wout"])
    assert np.allclose(out["Wout"], w - 0.5 * (a @ z).T.reshape(o, c, k, k), atol=1e-4)
    # the regrouped deltas are read in pieces of the weights' channel groups, not element by element
    add = next(cs for cs in g.state.compute_sets if cs.name == "acc/AddTo")
    pieces = sum(len(batch.fields["B"][0]) for batch in add.batches)
    assert pieces * 4 <= o * c * k * k


def test_left_operands_are_stored_with_their_input_channels_grouped():
    # poplin stores activations with their input channels innermost in groups
    # ([inChanGroups][positions][inChansPerGroup]); inside each block, so does this simulator
    g = codelet_graph(tiles=4)
    var = g.addVariable(FLOAT, [15], "x")
    view, _ = matmul._blocked_view(g, var, 3, 5, 3, 5, group=2)
    assert view.element_arrays()[1].reshape(3, 5).tolist() == [
        [0, 1, 6, 7, 12],
        [2, 3, 8, 9, 13],
        [4, 5, 10, 11, 14],
    ]
    A = poplin.createMatMulInputLHS(g, HALF, (64, 256), (256, 128), "A", AS_GIVEN)
    plan = poplin.plan_product(g, 64, 256, 128, HALF, AS_GIVEN)
    assert rearrange.dim_grouping(g, A) == (1, plan.k_grain)


def test_left_operands_group_channels_by_their_gcd_with_the_plans_group():
    # poplin groups a created input's channels by gcd(inChansPerGroup, channels)
    # (lib/poplin/Convolution.cpp, createInputImpl: getInChansPerGroup): 1,000 input channels of a
    # half product are stored in groups of 8, not in groups of 16 with a ragged last one, so
    # poputil's grouping detection finds them (a grouping must divide the dimension)
    g = codelet_graph(tiles=16)
    A = poplin.createMatMulInputLHS(g, HALF, (64, 1000), (1000, 128), "A", AS_GIVEN)
    assert poplin.plan_product(g, 64, 1000, 128, HALF, AS_GIVEN).k_grain == 16
    assert rearrange.dim_grouping(g, A) == (1, 8)
    B = poplin.createMatMulInputLHS(g, HALF, (64, 1024), (1024, 128), "B", AS_GIVEN)
    assert rearrange.dim_grouping(g, B) == (1, 16)


def test_fc_weight_update_of_1000_channels_adds_whole_channel_groups():
    # fully_connected_layer 1 x 1000 x 1000 half: the weights, created for the swapped forward plan,
    # and the weight-update product are both grouped by 8 input channels, so the scaled add reads
    # the update from other tiles in long runs; with groups of 16 and a ragged last one neither had
    # a grouping poputil detects, and the add read it in pieces of one group
    knobs = {"arch": "ipu2", "batch-size": 1, "input-size": 1000, "output-size": 1000, "plan": "separate"}
    remote = _remote_update_pieces(knobs)
    assert 0 < remote * 100 <= 1000 * 1000  # 4,121 remote pieces; 123,878 of 8 elements with groups of 16


def test_products_store_their_output_channels_grouped(tmp_path):
    # poplin creates a convolution's partials [Co/cpg][N][field][cpg] (lib/poplin/Convolution.cpp,
    # convolutionImpl: getPartialOutputShape), its output channels in groups of
    # gcd(partialChansPerGroup, channels) (getOutChansPerGroup), and so does this simulator inside
    # each tile's block: 20 output channels of a float product in groups of 4, with k unsplit and
    # split, and the product is still A B
    rng = np.random.default_rng(11)
    for k, splits in ((8, 1), (64, 4)):
        g = codelet_graph(tiles=16)
        plan = poplin.plan_product(g, 48, k, 20, FLOAT, AS_GIVEN)
        assert (plan.pk, plan.n_grain) == (splits, 16)
        A = poplin.createMatMulInputLHS(g, FLOAT, (48, k), (k, 20), "A", AS_GIVEN)
        B = poplin.createMatMulInputRHS(g, FLOAT, (48, k), (k, 20), "B", AS_GIVEN)
        prog = Sequence()
        C = poplin.matMul(g, A, B, prog, "mm", AS_GIVEN)
        assert rearrange.dim_grouping(g, C) == (1, 4)
        a = rng.standard_normal((48, k)).astype(np.float32)
        b = rng.standard_normal((k, 20)).astype(np.float32)
        g.createHostWrite("A", A)
        g.createHostWrite("B", B)
        g.createHostRead("C", C)
        out = run_functional(g, [prog], tmp_path / str(k), {"A": a, "B": b}, ["C"])
        assert np.allclose(out["C"], a @ b, atol=1e-3)


def test_fc_weight_update_of_1324_channels_reads_the_update_in_channel_groups():
    # fully_connected_layer 16 x 1324 x 100 (half): the weights, created for the swapped forward
    # plan, group their 1,324 input channels by 4 (gcd with the plan's 16), and so does the
    # swapped weight-update product, its output channels being those input channels; the scaled
    # add reads the update from other tiles in 1,988 pieces, where row-by-row output blocks made
    # it 32,940 pieces of 4 elements, 0.56 MB of the layer's 1.56 MB of exchange code
    knobs = {"arch": "ipu2", "batch-size": 16, "input-size": 1324, "output-size": 100}
    assert 0 < _remote_update_pieces(knobs) * 32 <= 1324 * 100


def _remote_update_pieces(knobs: dict) -> int:
    """Pieces of the weight update that the fc preset's scaled add (Wu/AddTo) reads from other tiles."""
    from simulator.presets import build_preset

    g = build_preset("fc", knobs).graph
    add = next(cs for cs in g.state.compute_sets if cs.name == "Wu/AddTo/AddTo")
    remote = 0
    for batch in add.batches:
        vertex, var, start, length = batch.fields["B"]
        row, tile, _, _ = split_by_mapping(g.state, var, start, length)
        remote += int(np.count_nonzero(tile != batch.tiles[vertex[row]]))
    return remote
