"""Ready-made models for `pva simulate`: the Poplar tutorials, single layers and whole networks.

A preset builds a graph and its programs from knobs (each with a type, a default and help),
then says which programs to run. `run_preset` compiles, runs and writes the reports.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import programs as P
from .codelets import Input, Output, Vertex
from .engine import Engine
from .errors import GraphError, OptionError
from .graph import Graph
from .poplibs import fullyconnected, planreport, poplin, popnn, popops, poprand
from .poplibs._util import group_graphs, map_linearly, merge_parallel
from .target import Target
from .types import FLOAT, HALF, INT, UNSIGNED_INT, as_type


@dataclass(frozen=True)
class Knob:
    """One preset parameter."""

    name: str
    type: Callable[[Any], Any]  # int, float, str or flag
    default: Any
    help: str
    choices: tuple | None = None
    minimum: int | None = 1
    maximum: int | None = None  # counts that set how much the simulator builds or runs are bounded

    @property
    def is_flag(self) -> bool:
        """Whether the knob is yes or no, so that it may be given without a value (meaning yes)."""
        return self.type is flag


#: Upper bounds of the knobs that count what a preset builds or runs, so that no knob makes the
#: simulator build or run without end: an IPU-POD64's IPUs, and counts well past any real model's.
MAX_IPUS = 64
MAX_LAYERS = 1_000
MAX_HEADS = 1_024
MAX_STEPS = 10_000
MAX_RUNS = 1_000
MAX_CYCLE_ESTIMATE = 2**32 - 1  # a vertex's estimate, at most a 32-bit count


@dataclass
class Built:
    """A built preset: the graph, its programs and how to run them."""

    graph: Graph
    programs: list
    runs: list[int]
    functional: bool = False
    setup: Callable[[Engine], None] | None = None
    notes: dict = field(default_factory=dict)
    printed: list[str] = field(default_factory=list)  # printed before the runs, as the tools print plans


@dataclass(frozen=True)
class Preset:
    name: str
    summary: str
    knobs: tuple[Knob, ...]
    build: Callable[..., Built]


_ARCH = Knob("arch", str, "ipu2", "IPU architecture", ("ipu1", "ipu2", "ipu21"), None)
_TILES = Knob("tiles-per-ipu", int, 0, "shrink each IPU to this many tiles (0: the full IPU)", None, 0)
_DTYPE = Knob("dtype", str, "half", "data type", ("half", "float"), None)
#: the tutorials build on 16 tiles, their tensors on the first four
_TUTORIAL_TILES = Knob("tiles-per-ipu", int, 16, "tiles per IPU (the tutorial's tensors use the first 4)", None, 4)


def flag(value: Any) -> bool:
    """A yes-or-no knob's value: true, false, 1, 0, yes, no, on or off, as boost's bool options."""
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise ValueError(value)


flag.__name__ = "bool"
_REPORT_PLAN = Knob(
    "report-plan", flag, False, "print the plans poplin's planner chose, as the tool's --report-plan", None, None
)

PRESETS: dict[str, Preset] = {}


def preset(name: str, summary: str, *knobs: Knob):
    def register(fn):
        PRESETS[name] = Preset(name, summary, tuple(knobs), fn)
        return fn

    return register


def _target(arch: str, tiles_per_ipu: int, ipus: int = 1, replicas: int = 1, io_tiles: int = 0) -> Target:
    return Target(
        arch, num_ipus=ipus, tiles_per_ipu=tiles_per_ipu or None, replication_factor=replicas, io_tiles=io_tiles
    )


_IO_TILES = Knob(
    "io-tiles",
    int,
    0,
    "tiles per IPU kept for stream copies, which then overlap compute (Poplar's I/O tiles; 0: none)",
    None,
    0,
)


def _io_graphs(target: Target) -> tuple[Graph, Graph | None]:
    """The compute graph and, with I/O tiles, the virtual graph of the I/O tiles."""
    root = Graph(target)
    if not target.io_tiles:
        return root, None
    top = target.tiles_per_ipu
    return root.createVirtualGraph(0, top - target.io_tiles), root.createVirtualGraph(top - target.io_tiles, top)


def _stream_in(io: Graph | None, stream, tensor, load, prefetch, name: str) -> None:
    """Copy a stream into `tensor` in `load`; with I/O tiles, `prefetch` streams the next data
    into a buffer on the I/O tiles (at the end of a loop body, so it overlaps its compute) and
    `load` copies that buffer into `tensor`."""
    if io is None:
        load.add(P.Copy(stream, tensor))
        return
    buffer = io.addVariable(tensor.dtype, list(tensor.shape), f"{name}/ioBuffer")
    map_linearly(io, buffer)
    load.add(P.Copy(buffer, tensor))
    prefetch.add(P.Copy(stream, buffer))


def resolve_knobs(name: str, values: dict[str, Any]) -> dict[str, Any]:
    """The knobs of preset `name` with defaults filled in; unknown or bad knobs raise OptionError."""
    found = PRESETS.get(name)
    if found is None:
        raise OptionError(f"unknown preset {name!r}; available: {', '.join(PRESETS)}")
    spec = {k.name: k for k in found.knobs}
    out = {k.name: k.default for k in found.knobs}
    for key, value in values.items():
        knob = spec.get(key.replace("_", "-"))
        if knob is None:
            raise OptionError(
                f"preset {name!r} has no knob --{key.replace('_', '-')}; its knobs are "
                f"{', '.join('--' + k for k in spec) or 'none'}"
            )
        try:
            if knob.type in (int, float) and isinstance(value, str) and "_" in value:
                raise ValueError(value)  # Python reads 1_0 as 10; a command line should not
            converted = knob.type(value)
            if knob.type is float and not math.isfinite(converted):
                raise ValueError(value)
        except (TypeError, ValueError, OverflowError):
            expected = {int: "a whole number", float: "a number", flag: "true or false"}.get(
                knob.type, knob.type.__name__
            )
            raise OptionError(f"knob --{knob.name} of preset {name!r} expects {expected}, got {value!r}") from None
        if knob.choices and converted not in knob.choices:
            raise OptionError(
                f"knob --{knob.name} of preset {name!r} must be one of {', '.join(map(str, knob.choices))}, "
                f"got {value!r}"
            )
        if knob.minimum is not None and knob.type is int and converted < knob.minimum:
            raise OptionError(f"knob --{knob.name} of preset {name!r} must be at least {knob.minimum}, got {converted}")
        if knob.maximum is not None and knob.type is int and converted > knob.maximum:
            raise OptionError(
                f"knob --{knob.name} of preset {name!r} must be at most {knob.maximum:,}, got {converted:,}"
            )
        out[knob.name] = converted
    return out


def build_preset(name: str, knobs: dict[str, Any] | None = None) -> Built:
    values = resolve_knobs(name, knobs or {})
    return PRESETS[name].build(**{k.replace("-", "_"): v for k, v in values.items()})


def run_preset(
    name: str,
    knobs: dict[str, Any] | None = None,
    directory: str = ".",
    options: dict | None = None,
    timestamp=None,
    progress=None,
    output=None,
    functional: bool | None = None,
) -> Engine:
    """Build, compile and run a preset, writing every report to `directory`; returns the closed engine.

    Sizes within the device's memory may still need more host memory than the process gets (the
    simulator keeps a few 8-byte indices for every element it lays out): that is an OptionError
    naming the preset and its knobs."""
    try:
        return _run_preset(name, knobs, directory, options, timestamp, progress, output, functional)
    except MemoryError:
        given = " ".join(f"--{k} {v}" for k, v in sorted((knobs or {}).items())) or "its defaults"
        raise OptionError(
            f"preset {name!r} with {given}: simulating it needs more host memory than this machine "
            "gives the process; choose smaller sizes"
        ) from None


def _run_preset(name, knobs, directory, options, timestamp, progress, output, functional) -> Engine:
    built = build_preset(name, knobs)
    engine_options = {"autoReport.all": "true", "autoReport.directory": directory}
    engine_options.update(options or {})
    engine = Engine(
        built.graph,
        built.programs,
        engine_options,
        timestamp=timestamp,
        progress=progress,
        output=output,
        functional=built.functional if functional is None else functional,
    )
    engine.program_name = name
    # the plans, as the tools print them, before the runs
    for line in built.printed:
        engine.print_line(line)
    try:
        engine.load()
        if built.setup is not None:
            built.setup(engine)
        total = len(built.runs)
        engine.progress.start("running", total)
        for index in built.runs:
            engine.run(index)
            engine.progress.advance()
        engine.progress.finish()
        engine.close()
    except BaseException:
        engine.abort()
        raise
    return engine


# -- the tutorials -------------------------------------------------------------------------------


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


# -- single layers -------------------------------------------------------------------------------


@preset(
    "matmul",
    "one matrix multiplication C[m,n] = A[m,k] B[k,n] planned by poplin",
    _ARCH,
    _TILES,
    _DTYPE,
    Knob("m", int, 1024, "rows of A and C"),
    Knob("k", int, 1024, "columns of A, rows of B"),
    Knob("n", int, 1024, "columns of B and C"),
    Knob("ipus", int, 1, "IPUs", None, 1, MAX_IPUS),
)
def _matmul(arch: str, tiles_per_ipu: int, dtype: str, m: int, k: int, n: int, ipus: int) -> Built:
    g = Graph(_target(arch, tiles_per_ipu, ipus))
    poplin.addCodelets(g)
    popops.addCodelets(g)
    t = as_type(dtype)
    A = poplin.createMatMulInputLHS(g, t, (m, k), (k, n), "A")
    B = poplin.createMatMulInputRHS(g, t, (m, k), (k, n), "B")
    prog = P.Sequence(name="matmul")
    C = poplin.matMul(g, A, B, prog, "matmul")
    g.createHostRead("C", C)
    return Built(g, [prog], [0], notes={"C": C})


_PHASE = Knob(
    "single-phase",
    str,
    "all",
    "passes to run, as poplibs' benchmark tools' --single-phase",
    ("all", "fwd", "bwd", "wu"),
    None,
)


@preset(
    "fc",
    "a fully-connected layer as poplibs' fully_connected_layer tool runs it (no bias): the forward pass, "
    "then the weight transpose, backward pass and weight update",
    _ARCH,
    _TILES,
    _DTYPE,
    Knob("batch-size", int, 1, "batch size"),
    Knob("input-size", int, 1000, "input features"),
    Knob("output-size", int, 1000, "output features"),
    _PHASE,
    Knob(
        "plan",
        str,
        "poplin",
        "how the passes are planned: poplin (one joint plan unless separate plans are cheaper, as poplin "
        "chooses; grouped layers each pass alone), separate (each pass alone) or joint",
        fullyconnected.PLAN_MODES,
        None,
    ),
    Knob(
        "num-groups",
        int,
        1,
        "independent layers side by side (the tool's grouped matMulGrouped), each on its share of the tiles",
        None,
        1,
        MAX_HEADS,
    ),
    Knob(
        "matmul-options",
        str,
        "",
        "poplin options of the passes, a JSON object such as "
        '{"availableMemoryProportion": 0.3, "partialsType": "half"}',
        None,
        None,
    ),
    _REPORT_PLAN,
)
def _fc(
    arch,
    tiles_per_ipu,
    dtype,
    batch_size,
    input_size,
    output_size,
    single_phase,
    plan,
    num_groups,
    matmul_options,
    report_plan,
) -> Built:
    options = _layer_options(matmul_options, "matmul-options")
    g = Graph(_target(arch, tiles_per_ipu))
    poplin.addCodelets(g)
    popops.addCodelets(g)
    t = as_type(dtype)
    b, i, o = batch_size, input_size, output_size
    if num_groups > 1:
        # poplin would weigh a joint plan of the grouped passes too; this simulator plans each alone
        if plan == "joint":
            raise OptionError("--num-groups plans each pass alone: it takes no --plan joint")
        # each group's layer on its share of the tiles, the groups' steps run side by side
        graphs = group_graphs(g, num_groups)
        passes = [_fc_separate_passes(vg, t, b, i, o, single_phase, options) for vg in graphs]
        fwd, bwd = (merge_parallel(g, [p[index] for p in passes]) for index in (0, 1))
        assert isinstance(fwd, P.Sequence) and isinstance(bwd, P.Sequence)  # as the passes are
        built = _fc_built(g, fwd, bwd, num_groups * b * i * o, {"jointPlan": False, "groups": num_groups})
        if report_plan:
            built.printed = [f"Each of the {num_groups} groups on {graphs[0].num_tiles:,} tiles:"]
            built.printed += _fc_plan_lines(graphs[0], b, i, o, t, "separate", options, single_phase)
        return built
    # as poplin plans them (--plan poplin, the default), the forward pass (fully_connected_layer
    # sets TRAINING_FWD whatever passes run) is planned jointly with the backward and weight-update
    # passes unless separate plans are cheaper, and the other passes' plans follow the forward
    # pass's (lib/poplin/ConvPlan.cpp, createPlan and getPlan); --plan separate plans each alone
    fc_plan = fullyconnected.plan_fully_connected(g, b, i, o, t, plan, options)
    fwd = P.Sequence(name="fwd")
    bwd = P.Sequence(name="bwd")
    if fc_plan.joint:
        prev_act = fullyconnected.createInput(g, fc_plan, "prevAct")
        weights = fullyconnected.createWeights(g, fc_plan, "weights")
        if single_phase in ("all", "fwd"):
            fullyconnected.forward(g, fc_plan, prev_act, weights, fwd, "Fwd")
        if single_phase in ("all", "bwd", "wu"):
            z_deltas = fullyconnected.createDeltas(g, fc_plan, "zDeltas")
            if single_phase in ("all", "bwd"):
                weights_t = fullyconnected.transposeWeights(g, fc_plan, weights, bwd, "Bwd/WeightsTranspose")
                fullyconnected.backward(g, fc_plan, z_deltas, weights_t, bwd, "Bwd")
            if single_phase in ("all", "wu"):
                fullyconnected.weightUpdate(g, fc_plan, weights, -0.05, prev_act, z_deltas, bwd, "Wu")
    else:
        fwd, bwd = _fc_separate_passes(g, t, b, i, o, single_phase, options)
    built = _fc_built(g, fwd, bwd, b * i * o, {"jointPlan": fc_plan.joint, "planCycles": fc_plan.cycles})
    if report_plan:
        built.printed = planreport.fully_connected_plan_lines(fc_plan, _bound(g, options), single_phase)
    return built


def _fc_plan_lines(g: Graph, b: int, i: int, o: int, t, mode: str, options: dict, passes: str) -> list[str]:
    plan = fullyconnected.plan_fully_connected(g, b, i, o, t, mode, options)
    return planreport.fully_connected_plan_lines(plan, _bound(g, options), passes)


def _fc_built(g: Graph, fwd: P.Sequence, bwd: P.Sequence, macs_per_pass: int, notes: dict) -> Built:
    """The fc preset's engine runs: the forward pass, then the backward pass and weight update."""
    programs = [p for p in (fwd, bwd) if p.programs]
    return Built(g, programs, list(range(len(programs))), notes={"macs": macs_per_pass * len(programs), **notes})


def _fc_separate_passes(
    g: Graph, t, b: int, i: int, o: int, single_phase: str, options: dict
) -> tuple[P.Sequence, P.Sequence]:
    """The passes of a layer planned each alone, with its fullyConnectedPass and the layer's poplin
    `options`, as fully_connected_layer passes them: the forward pass, then the backward pass and
    weight update."""
    fwd, bwd = P.Sequence(name="fwd"), P.Sequence(name="bwd")
    fwd_opts, bwd_opts, wu_opts = (
        {**options, "fullyConnectedPass": p} for p in ("TRAINING_FWD", "TRAINING_BWD", "TRAINING_WU")
    )
    prev_act = poplin.createMatMulInputLHS(g, t, (b, i), (i, o), "prevAct", fwd_opts)
    weights = poplin.createMatMulInputRHS(g, t, (b, i), (i, o), "weights", fwd_opts)
    if single_phase in ("all", "fwd"):
        poplin.matMul(g, prev_act, weights, fwd, "Fwd", fwd_opts)
    if single_phase in ("all", "bwd", "wu"):
        z_deltas = poplin.createMatMulInputLHS(g, t, (b, o), (o, i), "zDeltas", bwd_opts)
        if single_phase in ("all", "bwd"):
            weights_t = poplin.transposeMatMulRHS(g, weights, (b, i), bwd, "Bwd/WeightsTranspose", bwd_opts)
            poplin.matMul(g, z_deltas, weights_t, bwd, "Bwd", bwd_opts)
        if single_phase in ("all", "wu"):
            poplin.matMulAcc(g, weights, -0.05, prev_act.transpose(), z_deltas, bwd, "Wu", wu_opts)
    return fwd, bwd


@preset(
    "gemm",
    "C = alpha A B + beta C as poplibs' general_matrix_multiply tool runs it",
    _ARCH,
    _TILES,
    _DTYPE,
    Knob("m", int, 1024, "rows of A and C"),
    Knob("k", int, 1024, "columns of A, rows of B"),
    Knob("n", int, 1024, "columns of B and C"),
    Knob("alpha", float, 1.0, "scale of A B", None, None),
    Knob("beta", float, 1.0, "scale of C", None, None),
    Knob("partials-type", str, "float", "type of the partial sums (poplin's partialsType)", ("half", "float"), None),
    Knob(
        "available-memory-proportion",
        float,
        poplin.AVAILABLE_MEMORY_PROPORTION,
        "share of a tile's memory the planner may give the product's temporaries (0: no bound)",
        None,
        None,
    ),
    Knob("plan-constraints", str, "", "poplin plan constraints of the product, a JSON object", None, None),
    _REPORT_PLAN,
)
def _gemm(
    arch,
    tiles_per_ipu,
    dtype,
    m,
    k,
    n,
    alpha,
    beta,
    partials_type,
    available_memory_proportion,
    plan_constraints,
    report_plan,
) -> Built:
    options = _checked_options(
        {"partialsType": partials_type, "availableMemoryProportion": available_memory_proportion},
        "available-memory-proportion",
    )
    options.update(_plan_constraints(plan_constraints, "plan-constraints", _PRODUCT_CONSTRAINTS) or {})
    g = Graph(_target(arch, tiles_per_ipu))
    poplin.addCodelets(g)
    popops.addCodelets(g)
    t = as_type(dtype)
    A = poplin.createMatMulInputLHS(g, t, (m, k), (k, n), "matA", options)
    B = poplin.createMatMulInputRHS(g, t, (m, k), (k, n), "matB", options)
    prog = P.Sequence(name="gemm")
    product = poplin.matMul(g, A, B, prog, "op(A) x op(B)", options)
    C = g.clone(product, "matC")
    popops.scaledAddTo(g, C, product, alpha, prog, "scaledAdd", scaleA=beta)
    g.createHostRead("C", C)
    printed = []
    if report_plan:
        plan = poplin.plan_product(g, m, k, n, t, options)
        printed = planreport.matmul_plan_lines("Plan of op(A) x op(B)", plan, _bound(g, options))
    return Built(g, [prog], [0], notes={"macs": m * k * n}, printed=printed)


#: The poplin options of a layer the simulator honours: single_conv_layer's --convolution-options
#: and fully_connected_layer's --matmul-options may set these.
_LAYER_OPTION_KEYS = ("availableMemoryProportion", "partialsType")


def _knob_json(text: str, knob: str):
    """The JSON value of knob --`knob`, which expects an object; bad JSON is an OptionError."""
    import json

    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise OptionError(f"knob --{knob} expects a JSON object, got {text!r}: {exc}") from None
    except RecursionError:
        raise OptionError(f"knob --{knob} expects a JSON object, got one nested too deeply to read") from None


def _layer_options(text: str, knob: str) -> dict:
    """poplin options from a knob: a JSON object as the tools take them, with only
    _LAYER_OPTION_KEYS, whose values poplin must accept; {} for an empty knob."""
    if not text.strip():
        return {}
    value = _knob_json(text, knob)
    if not isinstance(value, dict):
        raise OptionError(f"knob --{knob} expects a JSON object, got {text!r}")
    for key in value:
        if key not in _LAYER_OPTION_KEYS:
            raise OptionError(
                f"knob --{knob}: the simulator does not model option {key!r}; it honours {', '.join(_LAYER_OPTION_KEYS)}"
            )
    return _checked_options(value, knob)


def _checked_options(options: dict, knob: str) -> dict:
    """`options` once poplin accepts their partials type and memory proportion; a bad value is an
    OptionError naming the knob."""
    try:
        poplin.memory_bound(options, 1)
        poplin.partials_type(options)
    except GraphError as exc:
        raise OptionError(f"knob --{knob}: {exc}") from None
    return dict(options)


def _bound(g: Graph, options: dict | None) -> float:
    """The planner's memory bound per tile of `g` for these options."""
    return poplin.memory_bound(options, g.target.bytesPerTile)


#: The plan constraints the simulator honours, by pass of the `conv` preset (None: a value): a
#: convolution's expanded dims and operand swap, and its weight update's method and operand swap
#: (a matrix product).
_CONV_TRANSFORMS = {"0": {"transform": {"swapOperands": None, "expandDims": None}}}
_PRODUCT_CONSTRAINTS = {"method": None, "0": {"transform": {"swapOperands": None}}}
_CONV_CONSTRAINTS: dict[str, dict] = {"fwd": _CONV_TRANSFORMS, "bwd": _CONV_TRANSFORMS, "wu": _PRODUCT_CONSTRAINTS}


def _plan_constraints(text: str, name: str, allowed: dict) -> dict | None:
    """The options of a pass whose plan-constraints knob `name` is `text`, a JSON object as
    poplibs' tools take it; None when empty. Keys not in `allowed`, the tree of the keys the
    simulator honours, are refused."""
    if not text.strip():
        return None
    knob = f"--{name}"
    value = _knob_json(text, name)

    def check(obj, tree: dict, path: str) -> None:
        if not isinstance(obj, dict):
            raise OptionError(f"knob {knob} expects a JSON object at {path or 'the top'}, got {obj!r}")
        for key, sub in obj.items():
            where = f"{path}.{key}" if path else key
            if key not in tree:
                honoured = ", ".join(_paths(allowed))
                raise OptionError(f"knob {knob}: the simulator does not model {where!r}; it honours {honoured}")
            if tree[key] is not None:
                check(sub, tree[key], where)

    check(value, allowed, "")
    return {"planConstraints": value}


def _paths(allowed: dict, prefix: str = "") -> list[str]:
    """The dotted keys of a constraint tree: ["method", "0.transform.swapOperands"]."""
    out = []
    for key, sub in allowed.items():
        out += [f"{prefix}{key}"] if sub is None else _paths(sub, f"{prefix}{key}.")
    return out


def _pair(text: str, name: str) -> tuple[int, int]:
    parts = [p for p in str(text).strip("{}").replace(" ", "").split(",") if p]
    try:
        values = [int(p) for p in parts]
    except ValueError:
        values = []
    if len(values) == 1:
        values = values * 2
    if len(values) != 2 or min(values) < 0:
        raise OptionError(
            f"knob --{name} expects one or two non-negative integers such as 7 or 7,7 or {{7,7}}, got {text!r}"
        )
    return values[0], values[1]


def _conv_padding(padding: str, lower: str, upper: str) -> tuple[tuple[int, int], tuple[int, int]]:
    """The (lower, upper) padding of the conv preset's knobs, as single_conv_layer combines its
    options (tools/single_conv_layer.cpp): --padding sets both ends and may not be given with
    --padding-lower or --padding-upper; either of those alone leaves the other end at its default,
    0. With none of them given, the preset pads both ends by 1."""
    for name, value in (("padding-lower", lower), ("padding-upper", upper)):
        if padding and value:
            raise OptionError(f"knobs --padding and --{name} cannot both be given (single_conv_layer refuses it)")
    if padding or not (lower or upper):
        both = _pair(padding or "1", "padding")
        return both, both
    return (_pair(lower, "padding-lower") if lower else (0, 0)), (_pair(upper, "padding-upper") if upper else (0, 0))


def _conv_backward_params(params: poplin.ConvParams) -> poplin.ConvParams:
    """The convolution of the conv preset's backward pass: the deltas [b, o, oh, ow] with the
    transposed and flipped weights. The forward pass's valid convolution is a full one backwards:
    the deltas are padded by kernel - 1 less the forward padding, each end by its own end's
    (lib/poplin/ConvUtil.cpp, getGradientParams pads kernel - 1 at both ends and truncates the
    output by the forward padding at the same ends, which ConvParams::canonicalize takes off the
    padding). Where the forward padding is wider than the kernel less one, that padding is
    negative: the deltas of outputs that read padding only are left out. At stride 1 the gradient
    then has the input's field. For a strided convolution the deltas' field is convolved at stride
    1, not dilated: about the multiply-accumulates of poplin's dilated deltas, on a smaller field
    (at least one output)."""
    field, pads, uppers = [], [], []
    for size, k, stride, out, (lower, upper) in zip(
        params.field, params.kernel, params.stride, params.out_field, params.pad_widths
    ):
        first = max(0, -(-(lower - k + 1) // stride))  # deltas before it read the lower padding only
        last = min(out, -(-(size + lower) // stride))  # deltas from it on read the upper padding only
        # the padding before the first kept delta: kernel - 1 less the forward padding it skips
        before = min(k - 1, max(0, k - 1 - (lower - first * stride)))
        # (at least one delta, though where all of them read padding only, none reaches the input)
        kept = max(1, last - first)
        if stride == 1:
            after = size + k - 1 - kept - before  # the output is then `size`
        else:
            after = max(0, k - 1 - upper, k - kept - before)
        field.append(kept)
        pads.append(before)
        uppers.append(after)
    return poplin.ConvParams(
        params.batch,
        params.out_chans,
        params.in_chans,
        (field[0], field[1]),
        params.kernel,
        (1, 1),
        (pads[0], pads[1]),
        params.dtype,
        (uppers[0], uppers[1]),
    )


@preset(
    "conv",
    "one 2-D convolution planned by poplin; single_conv_layer's options (--field, --kernel-size, "
    "--input-channels, --output-channels, --batch-size, --single-phase) override the short ones",
    _ARCH,
    _TILES,
    _DTYPE,
    Knob("batch", int, 4, "batch size"),
    Knob("in-chans", int, 64, "input channels"),
    Knob("out-chans", int, 64, "output channels"),
    Knob("height", int, 28, "input height"),
    Knob("width", int, 28, "input width"),
    Knob("kernel", int, 3, "kernel height and width"),
    Knob("stride", str, "1", "stride (S or H,W)", None, None),
    Knob(
        "padding",
        str,
        "",
        "zero padding at both ends of each field dim (P or H,W); 1 when neither --padding-lower nor "
        "--padding-upper is given",
        None,
        None,
    ),
    Knob(
        "padding-lower",
        str,
        "",
        "zero padding at the start of each field dim (P or H,W; single_conv_layer)",
        None,
        None,
    ),
    Knob(
        "padding-upper", str, "", "zero padding at the end of each field dim (P or H,W; single_conv_layer)", None, None
    ),
    Knob("field", str, "", "input field H,W (single_conv_layer)", None, None),
    Knob("kernel-size", str, "", "kernel size K or H,W (single_conv_layer)", None, None),
    Knob("input-channels", int, 0, "input channels (single_conv_layer)", None, 0),
    Knob("output-channels", int, 0, "output channels (single_conv_layer)", None, 0),
    Knob("batch-size", int, 0, "batch size (single_conv_layer)", None, 0),
    _PHASE,
    *(
        Knob(f"{phase}-plan-constraints", str, "", f"poplin plan constraints of the {what}, a JSON object", None, None)
        for phase, what in (("fwd", "forward pass"), ("bwd", "backward pass"), ("wu", "weight update"))
    ),
    Knob(
        "convolution-options",
        str,
        "",
        "poplin options of every pass, a JSON object such as "
        '{"availableMemoryProportion": 0.3, "partialsType": "half"}',
        None,
        None,
    ),
    _REPORT_PLAN,
)
def _conv(
    arch,
    tiles_per_ipu,
    dtype,
    batch,
    in_chans,
    out_chans,
    height,
    width,
    kernel,
    stride,
    padding,
    padding_lower,
    padding_upper,
    field,
    kernel_size,
    input_channels,
    output_channels,
    batch_size,
    single_phase,
    fwd_plan_constraints,
    bwd_plan_constraints,
    wu_plan_constraints,
    convolution_options,
    report_plan,
) -> Built:
    # single_conv_layer's --convolution-options apply to every pass, each pass's plan constraints
    # beside them
    layer = _layer_options(convolution_options, "convolution-options")
    fwd_opts, bwd_opts, wu_opts = (
        {**layer, **(_plan_constraints(text, f"{phase}-plan-constraints", _CONV_CONSTRAINTS[phase]) or {})}
        for text, phase in (
            (fwd_plan_constraints, "fwd"),
            (bwd_plan_constraints, "bwd"),
            (wu_plan_constraints, "wu"),
        )
    )
    g = Graph(_target(arch, tiles_per_ipu))
    poplin.addCodelets(g)
    popops.addCodelets(g)
    h, w = _pair(field, "field") if field else (height, width)
    kh, kw = _pair(kernel_size, "kernel-size") if kernel_size else (kernel, kernel)
    sh, sw = _pair(stride, "stride")
    lower, upper = _conv_padding(padding, padding_lower, padding_upper)
    b = batch_size or batch
    c = input_channels or in_chans
    o = output_channels or out_chans
    if min(h, w, kh, kw, sh, sw) < 1:
        raise OptionError("knobs --field, --kernel-size and --stride must be positive")
    t = as_type(dtype)
    params = poplin.ConvParams(b, c, o, (h, w), (kh, kw), (sh, sw), lower, t, upper)
    oh, ow = params.out_field
    if oh < 1 or ow < 1:
        raise OptionError(
            f"the convolution's output field {oh}x{ow} is empty; check --field, --kernel-size, --stride and "
            "--padding (or --padding-lower and --padding-upper)"
        )
    x = poplin.createInput(g, params, "conv/in", fwd_opts)
    weights = poplin.createWeights(g, params, "conv/weights", fwd_opts)
    fwd = P.Sequence(name="fwd")
    bwd = P.Sequence(name="bwd")
    if single_phase in ("all", "fwd"):
        poplin.convolution(g, x, weights, params, fwd, "Fwd", fwd_opts)
    if single_phase in ("all", "bwd"):
        # input gradients: the deltas convolved with the transposed and flipped weights, a tensor
        # of the backward plan written by transpose vertices (single_conv_layer's backward pass,
        # poplin::convolution with transposeAndFlipWeights)
        bp = _conv_backward_params(params)
        deltas = poplin.createInput(g, bp, "conv/deltas", bwd_opts)
        poplin.convolution(g, deltas, weights, bp, bwd, "Bwd", bwd_opts, transposeAndFlipWeights=True)
    if single_phase in ("all", "wu"):
        # weight gradients as poplin plans them: a product over batch and field positions
        rows, inner = c * kh * kw, b * oh * ow
        acts = poplin.createMatMulInputLHS(g, t, (rows, inner), (inner, o), "Wu/activations", wu_opts)
        zd = poplin.createMatMulInputRHS(g, t, (rows, inner), (inner, o), "Wu/deltas", wu_opts)
        # the deltas added to the weights in the weights' shape, [o, c, kh, kw], regrouped to the
        # weights' grouping first (lib/poplin/Convolution.cpp, convolutionWeightUpdate:
        # regroupIfBeneficial, then scaledAddTo, which regroups as well)
        product = poplin.matMul(g, acts, zd, bwd, "Wu", wu_opts)
        popops.scaledAddTo(g, weights, product.transpose().reshape((o, c, kh, kw)), -0.05, bwd, "Wu/AddTo")
    programs = [p for p in (fwd, bwd) if p.programs]
    built = Built(g, programs, list(range(len(programs))), notes={"macs": params.macs})
    if report_plan:
        bound = _bound(g, layer)
        if single_phase in ("all", "fwd"):
            built.printed += planreport.convolution_plan_lines(
                "Forward plan", poplin.convolution_plan(g, params, fwd_opts), bound
            )
        if single_phase in ("all", "bwd"):
            built.printed += planreport.convolution_plan_lines(
                "Backward plan", poplin.convolution_plan(g, _conv_backward_params(params), bwd_opts), bound
            )
        if single_phase in ("all", "wu"):
            wu = poplin.plan_product(g, c * kh * kw, b * oh * ow, o, t, wu_opts)
            built.printed += planreport.matmul_plan_lines("Weight-update plan", wu, bound)
    return built


# -- networks ------------------------------------------------------------------------------------


def _dense(g: Graph, x, fan_in: int, fan_out: int, prog, name: str, dtype):
    W = poplin.createMatMulInputRHS(g, dtype, (x.shape[0], fan_in), (fan_in, fan_out), f"{name}/weights")
    b = g.addVariable(dtype, [fan_out], f"{name}/biases")
    map_linearly(g, b)
    y = poplin.matMul(g, x, W, prog, f"{name}/Fwd")
    popops.addInPlace(g, y, b, prog, f"{name}/Fwd/bias")
    return y, W, b


@preset(
    "mnist-mlp",
    "a training loop of a two-layer perceptron on MNIST-sized data (tutorial 5 style)",
    _ARCH,
    _TILES,
    _DTYPE,
    Knob("batch", int, 16, "batch size"),
    Knob("hidden", int, 128, "hidden units"),
    Knob("steps", int, 4, "training steps per run", None, 1, MAX_STEPS),
    Knob("runs", int, 2, "runs of the training program", None, 1, MAX_RUNS),
    _IO_TILES,
)
def _mnist(arch, tiles_per_ipu, dtype, batch, hidden, steps, runs, io_tiles) -> Built:
    tiles = _target(arch, tiles_per_ipu).tiles_per_ipu
    if io_tiles >= tiles:
        raise OptionError(f"knob --io-tiles must be below the tiles per IPU ({tiles}), got {io_tiles}")
    g, io = _io_graphs(_target(arch, tiles_per_ipu, io_tiles=io_tiles))
    for lib_ in (popops, poplin, popnn, poprand):
        lib_.addCodelets(g)
    t = as_type(dtype)
    x = poplin.createMatMulInputLHS(g, t, (batch, 784), (784, hidden), "images")
    labels = g.addVariable(t, [batch, 10], "labels")
    map_linearly(g, labels)
    label_index = g.addVariable(UNSIGNED_INT, [batch], "labelIndex")
    g.setTileMapping(label_index, 0)
    num_correct = g.addVariable(UNSIGNED_INT, [1], "numCorrect")
    g.setTileMapping(num_correct, 0)
    seed = g.addVariable(UNSIGNED_INT, [2], "seed")
    g.setTileMapping(seed, 0)
    images_in = g.addHostToDeviceFIFO("images", t, batch * 784)
    labels_in = g.addHostToDeviceFIFO("labels", t, batch * 10)
    index_in = g.addHostToDeviceFIFO("labelIndex", UNSIGNED_INT, batch)
    seed_in = g.addHostToDeviceFIFO("seed", UNSIGNED_INT, 2)
    correct_out = g.addDeviceToHostFIFO("numCorrect", UNSIGNED_INT, 1)
    init = P.Sequence(name="init")
    init.add(P.Copy(seed_in, seed))
    poprand.setSeed(g, seed, 0, init, "init")
    step = P.Sequence(name="trainingStep")
    prefetch = P.Sequence(name="prefetch")
    for stream, tensor, name in (
        (images_in, x, "images"),
        (labels_in, labels, "labels"),
        (index_in, label_index, "labelIndex"),
    ):
        _stream_in(io, stream, tensor, step, prefetch, name)
    h, W1, b1 = _dense(g, x, 784, hidden, step, "Layer1", t)
    popnn.nonLinearityInPlace(g, "SIGMOID", h, step, "Layer1/Fwd/Nonlinearity")
    hx = g.clone(h, "Layer1/Fwd/activations")
    step.add(P.Copy(h, hx))
    y, W2, b2 = _dense(g, hx, hidden, 10, step, "Layer3", t)
    popnn.nonLinearityInPlace(g, "SIGMOID", y, step, "Layer3/Fwd/Nonlinearity")
    deltas, loss = popnn.calcLoss(g, y, labels, "SUM_SQUARED", step, "Layer5/Bwd/LossSumSquared")
    popnn.calcAccuracy(g, y, label_index, num_correct, step, "Layer5/Accuracy")
    d3 = popnn.nonLinearityInputGradient(g, "SIGMOID", y, deltas, step, "Layer3/Bwd/Nonlinearity")
    dW2 = poplin.matMul(g, hx.transpose(), d3, step, "Layer3/Wu")
    dh = poplin.matMul(g, d3, W2.transpose(), step, "Layer3/Bwd")
    d1 = popnn.nonLinearityInputGradient(g, "SIGMOID", hx, dh, step, "Layer1/Bwd/Nonlinearity")
    dW1 = poplin.matMul(g, x.transpose(), d1, step, "Layer1/Wu")
    db1 = popops.reduce(g, d1, [0], step, "ADD", debugPrefix="Layer1/Wu/ReduceBias")
    db2 = popops.reduce(g, d3, [0], step, "ADD", debugPrefix="Layer3/Wu/ReduceBias")
    for target_, grad, name in (
        (W1, dW1, "Layer1/Wu/weights"),
        (W2, dW2, "Layer3/Wu/weights"),
        (b1, db1, "Layer1/Wu/biases"),
        (b2, db2, "Layer3/Wu/biases"),
    ):
        popops.scaledAddTo(g, target_, grad, -0.01, step, name)
    step.add(P.WriteUndef(deltas))
    if io is not None:
        step.add(prefetch)
    train = P.Sequence(P.Repeat(steps, step, name="trainingLoop"), P.Copy(num_correct, correct_out), name="train")
    if io is not None:
        train = P.Sequence(prefetch, train, name="train")

    def setup(engine: Engine) -> None:
        rng = np.random.default_rng(5)
        engine.connectStream("seed", np.array([7, 11], dtype=np.uint32))
        engine.connectStream("images", rng.random(batch * 784 * steps).astype(t.numpy))
        engine.connectStream("labels", np.eye(10, dtype=t.numpy)[rng.integers(0, 10, batch * steps)].reshape(-1))
        engine.connectStream("labelIndex", rng.integers(0, 10, batch * steps).astype(np.uint32))
        engine.connectStream("numCorrect", np.zeros(1, dtype=np.uint32))

    return Built(g, [init, train], [0] + [1] * runs, setup=setup)


@preset(
    "cnn",
    "a small convolutional network: convolutions, ReLU, a dense layer, loss and its update",
    _ARCH,
    _TILES,
    _DTYPE,
    Knob("batch", int, 4, "batch size"),
    Knob("channels", int, 32, "channels of each conv"),
    Knob("layers", int, 3, "convolution layers", None, 1, MAX_LAYERS),
    Knob("size", int, 16, "input height and width"),
    Knob("classes", int, 10, "output classes"),
)
def _cnn(arch, tiles_per_ipu, dtype, batch, channels, layers, size, classes) -> Built:
    g = Graph(_target(arch, tiles_per_ipu))
    for lib_ in (popops, poplin, popnn):
        lib_.addCodelets(g)
    t = as_type(dtype)
    prog = P.Sequence(name="cnn")
    in_chans = 4
    params = poplin.ConvParams(batch, in_chans, channels, (size, size), (3, 3), (1, 1), (1, 1), t)
    x = poplin.createInput(g, params, "input")
    stream = g.addHostToDeviceFIFO("input", t, x.numElements())
    prog.add(P.Copy(stream, x))
    act = x
    for layer in range(layers):
        c_in = in_chans if layer == 0 else channels
        p = poplin.ConvParams(batch, c_in, channels, (size, size), (3, 3), (1, 1), (1, 1), t)
        w = poplin.createWeights(g, p, f"Layer{layer}/weights")
        act = poplin.convolution(g, act, w, p, prog, f"Layer{layer}/Fwd/Conv")
        popnn.nonLinearityInPlace(g, "RELU", act, prog, f"Layer{layer}/Fwd/Relu")
    flat = act.reshape((batch, channels * size * size))
    flat_copy = poplin.createMatMulInputLHS(g, t, flat.shape, (flat.shape[1], classes), "flatten")
    prog.add(P.Copy(flat, flat_copy))
    logits, W, b = _dense(g, flat_copy, flat.shape[1], classes, prog, "Dense", t)
    popnn.nonLinearityInPlace(g, "SIGMOID", logits, prog, "Dense/Fwd/Sigmoid")
    labels = g.addVariable(t, [batch, classes], "labels")
    map_linearly(g, labels)
    deltas, loss = popnn.calcLoss(g, logits, labels, "SUM_SQUARED", prog, "Loss")
    grad = popnn.nonLinearityInputGradient(g, "SIGMOID", logits, deltas, prog, "Dense/Bwd/Sigmoid")
    dW = poplin.matMul(g, flat_copy.transpose(), grad, prog, "Dense/Wu")
    popops.scaledAddTo(g, W, dW, -0.01, prog, "Dense/Wu/update")

    def setup(engine: Engine) -> None:
        engine.connectStream("input", np.zeros(x.numElements(), dtype=t.numpy))

    return Built(g, [prog], [0], setup=setup)


def _layer_norm(g: Graph, x, prog, name: str):
    """Normalise the last dimension of [rows, width] (mean and variance by reductions)."""
    rows, width = x.shape
    total = popops.reduce(g, x, [1], prog, "ADD", debugPrefix=f"{name}/mean")
    scale = g.addConstant(x.dtype, [1], [1.0 / width], f"{name}/inverseWidth")
    g.setTileMapping(scale, 0)
    mean = popops.mul(g, total, scale, prog, f"{name}/scaleMean")
    centred = popops.sub(g, x, mean.reshape((rows, 1)), prog, f"{name}/centre")
    sq = popops.reduce(g, centred, [1], prog, "SQUARE_ADD", debugPrefix=f"{name}/variance")
    inv = popops.map_unary(g, "RSQRT", sq, prog, f"{name}/rsqrt")
    popops.mulInPlace(g, centred, inv.reshape((rows, 1)), prog, f"{name}/normalise")
    return centred


def _transformer_layer(g: Graph, x, prog, name: str, heads: int, ffn: int, dtype):
    """One encoder layer: attention with `heads` heads, a feed-forward block, residuals, norms."""
    seq, hidden = x.shape
    dh = hidden // heads
    contexts = []
    for head in range(heads):
        q, _, _ = _dense(g, x, hidden, dh, prog, f"{name}/head{head}/Q", dtype)
        kk, _, _ = _dense(g, x, hidden, dh, prog, f"{name}/head{head}/K", dtype)
        v, _, _ = _dense(g, x, hidden, dh, prog, f"{name}/head{head}/V", dtype)
        scores = poplin.matMul(g, q, kk.transpose(), prog, f"{name}/head{head}/scores")
        top = popops.reduce(g, scores, [1], prog, "MAX", debugPrefix=f"{name}/head{head}/softmax/max")
        shifted = popops.sub(g, scores, top.reshape((seq, 1)), prog, f"{name}/head{head}/softmax/shift")
        e = popops.exp(g, shifted, prog, f"{name}/head{head}/softmax/exp")
        s = popops.reduce(g, e, [1], prog, "ADD", debugPrefix=f"{name}/head{head}/softmax/sum")
        popops.divInPlace(g, e, s.reshape((seq, 1)), prog, f"{name}/head{head}/softmax/normalise")
        contexts.append(poplin.matMul(g, e, v, prog, f"{name}/head{head}/context"))
    from .tensor import concat

    ctx = concat(contexts, 1)
    ctx_in = poplin.createMatMulInputLHS(g, dtype, (seq, hidden), (hidden, hidden), f"{name}/context")
    prog.add(P.Copy(ctx, ctx_in))
    attn, _, _ = _dense(g, ctx_in, hidden, hidden, prog, f"{name}/projection", dtype)
    popops.addInPlace(g, attn, x, prog, f"{name}/residual1")
    normed = _layer_norm(g, attn, prog, f"{name}/norm1")
    n_in = poplin.createMatMulInputLHS(g, dtype, (seq, hidden), (hidden, ffn), f"{name}/ffnIn")
    prog.add(P.Copy(normed, n_in))
    f1, _, _ = _dense(g, n_in, hidden, ffn, prog, f"{name}/ffn1", dtype)
    popnn.nonLinearityInPlace(g, "GELU", f1, prog, f"{name}/ffn1/gelu")
    f2, _, _ = _dense(g, f1, ffn, hidden, prog, f"{name}/ffn2", dtype)
    popops.addInPlace(g, f2, normed, prog, f"{name}/residual2")
    out = _layer_norm(g, f2, prog, f"{name}/norm2")
    nxt = poplin.createMatMulInputLHS(g, dtype, (seq, hidden), (hidden, dh), f"{name}/output")
    prog.add(P.Copy(out, nxt))
    return nxt


@preset(
    "bert-encoder",
    "BERT-style encoder layers: multi-head attention, feed-forward, layer norm",
    _ARCH,
    _TILES,
    _DTYPE,
    Knob("layers", int, 2, "encoder layers", None, 1, MAX_LAYERS),
    Knob("seq", int, 128, "sequence length"),
    Knob("hidden", int, 256, "hidden size"),
    Knob("heads", int, 4, "attention heads", None, 1, MAX_HEADS),
    Knob("ipus", int, 1, "IPUs (layers are placed on consecutive IPUs)", None, 1, MAX_IPUS),
)
def _bert(arch, tiles_per_ipu, dtype, layers, seq, hidden, heads, ipus) -> Built:
    if hidden % heads:
        raise OptionError(f"knob --hidden ({hidden}) must be a multiple of --heads ({heads})")
    target = _target(arch, tiles_per_ipu, ipus)
    g = Graph(target)
    for lib_ in (popops, poplin, popnn):
        lib_.addCodelets(g)
    t = as_type(dtype)
    prog = P.Sequence(name="encoder")
    x = poplin.createMatMulInputLHS(g, t, (seq, hidden), (hidden, hidden // heads), "embeddings")
    stream = g.addHostToDeviceFIFO("embeddings", t, seq * hidden)
    prog.add(P.Copy(stream, x))
    per_ipu = -(-layers // ipus)
    for layer in range(layers):
        ipu = layer // per_ipu
        sub = g.createVirtualGraph(ipu * target.tiles_per_ipu, (ipu + 1) * target.tiles_per_ipu) if ipus > 1 else g
        x = _transformer_layer(sub, x, prog, f"encoder/layer{layer}", heads, 4 * hidden, t)

    def setup(engine: Engine) -> None:
        engine.connectStream("embeddings", np.zeros(seq * hidden, dtype=t.numpy))

    return Built(g, [prog], [0], setup=setup)


@preset(
    "large",
    "a deep model spread over several Mk2 IPUs for scale tests (tens of thousands of compute sets)",
    Knob("ipus", int, 4, "IPUs", None, 1, MAX_IPUS),
    Knob("layers", int, 150, "encoder layers", None, 1, MAX_LAYERS),
    Knob("steps", int, 1, "training-loop iterations per run", None, 1, MAX_STEPS),
    Knob("seq", int, 64, "sequence length"),
    Knob("hidden", int, 128, "hidden size"),
    Knob("heads", int, 8, "attention heads", None, 1, MAX_HEADS),
    Knob("tiles-per-layer", int, 32, "tiles each layer uses"),
    _ARCH,
    _TILES,
)
def _large(ipus, layers, steps, seq, hidden, heads, tiles_per_layer, arch, tiles_per_ipu) -> Built:
    if hidden % heads:
        raise OptionError(f"knob --hidden ({hidden}) must be a multiple of --heads ({heads})")
    target = _target(arch, tiles_per_ipu, ipus)
    g = Graph(target)
    for lib_ in (popops, poplin, popnn):
        lib_.addCodelets(g)
    t = HALF
    total_tiles = g.num_tiles
    span = max(1, min(tiles_per_layer, total_tiles))
    body = P.Sequence(name="step")
    x = poplin.createMatMulInputLHS(
        g.createVirtualGraph(0, span), t, (seq, hidden), (hidden, hidden // heads), "embeddings"
    )
    stream = g.addHostToDeviceFIFO("embeddings", t, seq * hidden)
    prep = P.Sequence(P.Copy(stream, x), name="input")
    prepare = g.addFunction(prep, "prepareInput")
    body.add(P.Call(prepare))
    for layer in range(layers):
        first = (layer * span) % total_tiles
        first = min(first, total_tiles - span)
        sub = g.createVirtualGraph(first, first + span)
        x = _transformer_layer(sub, x, body, f"layer{layer}", heads, 4 * hidden, t)
    prog = P.Sequence(P.Repeat(steps, body, name="loop"), name="main")

    def setup(engine: Engine) -> None:
        engine.connectStream("embeddings", np.zeros(seq * hidden, dtype=np.float16))

    return Built(g, [prog], [0], setup=setup)


@functools.cache
def listing() -> list[tuple[str, str, tuple[Knob, ...]]]:
    """(name, summary, knobs) of every preset, in registration order."""
    return [(p.name, p.summary, p.knobs) for p in PRESETS.values()]
