"""Presets of the Poplar tutorials: tutorials 1 to 3 and tutorial 7's matrix-vector product."""

from __future__ import annotations

import numpy as np

from .. import programs as P
from ..codelets import Input, Output, Vertex
from ..engine import Engine
from ..errors import OptionError
from ..graph import Graph
from ..poplibs import popops
from ..target import Target
from ..types import FLOAT, INT
from .registry import _ARCH, _TILES, Built, Knob, _target, preset

MAX_CYCLE_ESTIMATE = 2**32 - 1  # a vertex's estimate, at most a 32-bit count

#: the tutorials build on 16 tiles, their tensors on the first four
_TUTORIAL_TILES = Knob("tiles-per-ipu", int, 16, "tiles per IPU (the tutorial's tensors use the first 4)", None, 4)


@preset(
    "tutorial1",
    "Poplar tutorial 1: variables, constants, copies, host handles and a data stream",
    _ARCH,
    _TUTORIAL_TILES,
)
def _tutorial1(arch: str, tiles_per_ipu: int) -> Built:
    g = Graph(_target(arch, tiles_per_ipu))
    v1 = g.addVariable(FLOAT, [4], "v1")
    v2 = g.addVariable(FLOAT, [4], "v2")
    v3 = g.addVariable(FLOAT, [4, 4], "v3")
    v4 = g.addVariable(INT, [10], "v4")
    g.setTileMapping(v1, 0)
    for i in range(4):
        g.setTileMapping(v2[i], i)
    g.setTileMapping(v3, 0)
    g.setTileMapping(v4, 1)
    c1 = g.addConstant(FLOAT, [4], [1.0, 1.5, 2.0, 2.5], "c1")
    g.setTileMapping(c1, 0)
    g.createHostWrite("v3-write", v3)
    g.createHostRead("v3-read", v3)
    stream = g.addHostToDeviceFIFO("v4-input-stream", INT, 10)
    prog = P.Sequence(name="tutorial1")
    prog.add(P.Copy(c1, v1))
    prog.add(P.PrintTensor("v1-debug", v1))
    prog.add(P.Copy(v1, v2))
    prog.add(P.PrintTensor("v2-debug", v2))
    prog.add(P.Copy(v1.slice(0, 3), v3.slice([1, 1], [2, 4])))
    prog.add(P.Copy(stream, v4))
    prog.add(P.PrintTensor("v4-0", v4))
    prog.add(P.Copy(stream, v4))
    prog.add(P.PrintTensor("v4-1", v4))

    def setup(engine: Engine) -> None:
        engine.connectStream("v4-input-stream", np.arange(30, dtype=np.int32))
        if engine.functional:
            engine.writeTensor("v3-write", np.zeros(16, dtype=np.float32))

    return Built(g, [prog], [0], functional=True, setup=setup)


@preset(
    "tutorial2", "Poplar tutorial 2: Poplibs element-wise additions (also on a transposed view)", _ARCH, _TUTORIAL_TILES
)
def _tutorial2(arch: str, tiles_per_ipu: int) -> Built:
    g = Graph(_target(arch, tiles_per_ipu))
    popops.addCodelets(g)
    v1 = g.addVariable(FLOAT, [2, 2], "v1")
    v2 = g.addVariable(FLOAT, [2, 2], "v2")
    for i in range(2):
        for j in range(2):
            g.setTileMapping(v1[i][j], i * 2 + j)
            g.setTileMapping(v2[i][j], j * 2 + i)
    prog = P.Sequence(name="tutorial2")
    c1 = g.addConstant(FLOAT, [4], [1.0, 1.5, 2.0, 2.5], "c1")
    c2 = g.addConstant(FLOAT, [4], [4.0, 3.0, 2.0, 1.0], "c2")
    g.setTileMapping(c1, 0)
    g.setTileMapping(c2, 0)
    prog.add(P.Copy(c1, v1.flatten()))
    prog.add(P.Copy(c2, v2.flatten()))
    v3 = popops.add(g, v1, v2, prog, "Add")
    prog.add(P.PrintTensor("v3", v3))
    v4 = popops.add(g, v3, v2, prog, "Add")
    prog.add(P.PrintTensor("v4", v4))
    v5 = popops.add(g, v1, v2.transpose(), prog, "Add")
    prog.add(P.PrintTensor("v5", v5))
    return Built(g, [prog], [0], functional=True)


class SumVertex(Vertex):
    """Tutorial 3's codelet: the sum of its inputs."""

    fields = {"in": Input(FLOAT, vector=True), "out": Output(FLOAT)}

    def compute(self, f) -> bool:
        f["out"][0] = f["in"].sum()
        return True


@preset(
    "tutorial3",
    "Poplar tutorial 3: a custom vertex (suffix sums) with a cycle estimate",
    _ARCH,
    _TUTORIAL_TILES,
    Knob("cycle-estimate", int, 20, "cycle estimate set on every vertex", None, 0, MAX_CYCLE_ESTIMATE),
)
def _tutorial3(arch: str, tiles_per_ipu: int, cycle_estimate: int) -> Built:
    g = Graph(_target(arch, tiles_per_ipu))
    g.addCodelets(SumVertex)
    v1 = g.addVariable(FLOAT, [4], "v1")
    v2 = g.addVariable(FLOAT, [4], "v2")
    for i in range(4):
        g.setTileMapping(v1[i], i)
        g.setTileMapping(v2[i], i)
    prog = P.Sequence(name="tutorial3")
    c1 = g.addConstant(FLOAT, [4], [1.0, 1.5, 2.0, 2.5], "c1")
    g.setTileMapping(c1, 0)
    prog.add(P.Copy(c1, v1))
    cs = g.addComputeSet("computeSet")
    for i in range(4):
        vtx = g.addVertex(cs, "SumVertex")
        g.connect(vtx["in"], v1.slice(i, 4))
        g.connect(vtx["out"], v2[i])
        g.setTileMapping(vtx, i)
        g.setCycleEstimate(vtx, cycle_estimate)
    prog.add(P.PrintTensor("v1", v1))
    prog.add(P.Execute(cs))
    prog.add(P.PrintTensor("v2", v2))
    return Built(g, [prog], [0], functional=True)


class DotProductVertex(Vertex):
    """Tutorials 6 and 7: a dot product of a row (segment) with the vector (segment)."""

    fields = {"a": Input(FLOAT, vector=True), "b": Input(FLOAT, vector=True), "out": Output(FLOAT)}

    def compute(self, f) -> bool:
        f["out"][0] = float(np.dot(f["a"], f["b"]))
        return True


class ReduceVertex(Vertex):
    """Tutorial 7: the sum of the partial dot products of one row."""

    fields = {"in": Input(FLOAT, vector=True), "out": Output(FLOAT)}

    def compute(self, f) -> bool:
        f["out"][0] = f["in"].sum()
        return True


def _tut7_estimate(rows: int, cols: int, split: int, tiles: int) -> int:
    """Tutorial 7's cost estimate of a column split (compute + exchange of both phases)."""
    vertices = rows * split
    per_tile = -(-vertices // tiles)
    seg = -(-cols // split)
    compute = -(-per_tile // 6) * (5 + (2 * seg + 3) // 4 + 1) * 6
    exchange = seg * 4 // 4
    reduce_per_tile = -(-rows // tiles)
    reduce_compute = -(-reduce_per_tile // 6) * (5 + (split + 3) // 4 + 1) * 6
    reduce_exchange = split * reduce_per_tile * 4 // 4
    return compute + exchange + reduce_compute + reduce_exchange


@preset(
    "matrix-vector",
    "Poplar tutorials 6 and 7: matrix-vector multiplication with custom vertices",
    _ARCH,
    _TILES,
    Knob("rows", int, 1000, "matrix rows"),
    Knob("cols", int, 200, "matrix columns"),
    Knob("split", int, 0, "column segments per row (0: tutorial 7's best split; 1: tutorial 6)", None, 0),
    Knob(
        "streams",
        int,
        0,
        "1: copy the matrix and vector in and the result out with data streams, as the "
        "tutorial's 2020 version in graphcore/examples does; 0: only the two compute sets",
        (0, 1),
        0,
    ),
)
def _matrix_vector(arch: str, tiles_per_ipu: int, rows: int, cols: int, split: int, streams: int) -> Built:
    # tutorial 7 configures its IPUModel with minIPUSyncDelay = 0 and relativeSyncDelay = NO_DELAY
    base = _target(arch, tiles_per_ipu)
    target = Target(
        base.arch, num_ipus=1, tiles_per_ipu=base.tiles_per_ipu, min_sync_delay=0, relative_sync_delay="NO_DELAY"
    )
    g = Graph(target)
    g.addCodelets([DotProductVertex, ReduceVertex])
    tiles = g.num_tiles
    if split > cols:
        raise OptionError(
            f"knob --split must be at most --cols ({cols}): a row splits into segments of columns, got {split}"
        )
    if split == 0:
        split = min(range(1, min(cols, 64) + 1), key=lambda s: _tut7_estimate(rows, cols, s, tiles))
    matrix = g.addVariable(FLOAT, [rows, cols], "matrix")
    vector = g.addVariable(FLOAT, [cols], "inputVector")
    out = g.addVariable(FLOAT, [rows], "outputVector")
    partials = g.addVariable(FLOAT, [rows, split], "partials")
    # the input vector is spread over all tiles: element i on tile i * tiles // cols
    g.setTileMappingIntervals(vector, np.arange(cols), np.arange(cols) + 1, (np.arange(cols) * tiles) // cols)
    mul = g.addComputeSet("mulCS")
    # vertices segment by segment: segment j of row r goes to tile (j * rows + r) * tiles // vertices
    vertices = rows * split
    j = np.repeat(np.arange(split), rows)
    r = np.tile(np.arange(rows), split)
    c0 = (j * cols) // split
    c1 = ((j + 1) * cols) // split
    keep = c1 > c0
    j, r, c0, c1 = j[keep], r[keep], c0[keep], c1[keep]
    vt = ((j * rows + r) * tiles) // vertices
    g.setTileMappingIntervals(matrix, r * cols + c0, r * cols + c1, vt)
    g.setTileMappingIntervals(partials, r * split + j, r * split + j + 1, vt)
    mv, vv, pv = int(matrix.vars[0]), int(vector.vars[0]), int(partials.vars[0])
    g.addVertexBatch(
        mul,
        "DotProductVertex",
        vt,
        {"a": (mv, r * cols + c0, c1 - c0), "b": (vv, c0, c1 - c0), "out": (pv, r * split + j, 1)},
    )
    red = g.addComputeSet("reduceCS")
    rt = (np.arange(rows) * tiles) // rows
    g.setTileMappingIntervals(out, np.arange(rows), np.arange(rows) + 1, rt)
    g.addVertexBatch(
        red,
        "ReduceVertex",
        rt,
        {"in": (pv, np.arange(rows) * split, split), "out": (int(out.vars[0]), np.arange(rows), 1)},
    )
    g.createHostWrite("matrix", matrix)
    g.createHostWrite("vector", vector)
    g.createHostRead("out", out)
    prog = P.Sequence(P.Execute(mul), P.Execute(red), name="matrix-vector")
    if streams:
        in_v = g.addHostToDeviceFIFO("inputVector", FLOAT, cols)
        in_m = g.addHostToDeviceFIFO("inputMatrix", FLOAT, rows * cols)
        out_s = g.addDeviceToHostFIFO("out", FLOAT, rows)
        prog = P.Sequence(
            P.Copy(in_v, vector),
            P.Copy(in_m, matrix),
            P.Execute(mul),
            P.Execute(red),
            P.Copy(out, out_s),
            name="matrix-vector",
        )
    rng = np.random.default_rng(1)
    m_data = rng.integers(-4, 5, size=(rows, cols)).astype(np.float32)
    v_data = rng.integers(-4, 5, size=cols).astype(np.float32)

    def setup(engine: Engine) -> None:
        if streams:
            engine.connectStream("inputVector", v_data)
            engine.connectStream("inputMatrix", m_data.reshape(-1))
            engine.connectStream("out", np.zeros(rows, dtype=np.float32))
        elif engine.functional:
            engine.writeTensor("matrix", m_data)
            engine.writeTensor("vector", v_data)

    return Built(
        g,
        [prog],
        [0],
        functional=rows * cols <= 4_000_000,
        setup=setup,
        notes={"split": split, "matrix": m_data, "vector": v_data},
    )
