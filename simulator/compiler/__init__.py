"""The graph compiler: validation, lowering, liveness and memory allocation.

`compile_graph` turns a Graph and its control programs into an `Executable`: the lowered
program tree, per-compute-set cycle estimates, exchange plans, lowered variables with their
tile placement, and liveness per program step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .. import codelets as lib
from .. import programs as P
from ..errors import GraphError
from ..graph import Graph, GraphState
from .computesets import CSInfo, VertexTypeTable, analyse
from .exchange import host_plan
from .liveness import Liveness, LivenessResult
from .lowering import Lowerer, LProg
from .memory import CATEGORIES, ClassTable, LoweredVars, MemoryResult, allocate, assign_lanes, build_lowered_vars
from .regions import Sparse

if TYPE_CHECKING:
    from ..target import Target

__all__ = ["CATEGORIES", "Executable", "compile_graph"]


class Executable:
    """A compiled graph: everything the engine runs and the report describes."""

    def __init__(self) -> None:
        self.state: GraphState | None = None
        self.target: Target | None = None
        self.n_tiles = 0
        self.compute_sets: list = []
        self.cs_infos: list[CSInfo | None] = []
        self.progs: list[LProg] = []
        self.root: LProg | None = None
        self.functions: list[LProg] = []
        self.user_programs: list[LProg] = []
        self.types: VertexTypeTable | None = None
        self.classes: ClassTable | None = None
        self.liveness: LivenessResult | None = None
        self.lowered: LoweredVars | None = None
        self.memory: MemoryResult | None = None
        self.item_classes: dict[str, int] = {}
        self.message_classes: dict = {}
        self.phases: list[tuple[str, float]] = []

    @property
    def num_ipus(self) -> int:
        assert self.target is not None, "compiled"
        return self.n_tiles // self.target.tiles_per_ipu


def _validate(state) -> None:
    for var in state.vars:
        gaps = var.unmapped()
        if gaps:
            shown = ", ".join(f"{a}..{b - 1}" for a, b in gaps[:3]) + (" ..." if len(gaps) > 3 else "")
            missing = sum(b - a for a, b in gaps)
            raise GraphError(
                f"variable {var.name!r} (id {var.id}, shape {list(var.shape)}) has {missing} element(s) without a "
                f"tile mapping (elements {shown}); map them with graph.setTileMapping before creating the Engine"
            )


def _always_live_items(exe: Executable, instrumentation: dict) -> dict[str, np.ndarray]:
    """Bytes by tile of every always-live category the compiler creates."""
    n = exe.n_tiles
    assert exe.types is not None and exe.target is not None, "compiled"
    items = {
        name: np.zeros(n, dtype=np.int64)
        for name in (
            "controlCode",
            "vertexCode",
            "vertexInstanceState",
            "vertexFieldData",
            "vectorListDescriptor",
            "copyDescriptor",
            "internalExchangeCode",
            "globalExchangeCode",
            "globalExchangePacketHeader",
            "hostExchangeCode",
            "hostExchangePacketHeader",
            "stack",
            "instrumentationResults",
            "sharedCodeStorage",
            "sharedDataStorage",
        )
    }
    worker_stack = np.full(n, lib.DEFAULT_WORKER_STACK, dtype=np.int64)
    shared_code: dict[str, np.ndarray] = {}
    for vtype, memory in zip(exe.types.types, exe.types.memory):
        used = memory["count"] > 0
        items["vertexCode"] += np.where(used, vtype.code_bytes, 0)
        items["vertexInstanceState"] += memory["vertex_data"] + memory["padding"]
        items["vertexFieldData"] += memory["edge_ptr"]
        items["vectorListDescriptor"] += memory["descriptor"]
        items["copyDescriptor"] += memory["copy_ptr"]
        worker_stack = np.where(used, np.maximum(worker_stack, vtype.worker_stack), worker_stack)
        if vtype.shared_code_bytes:
            lib_code = shared_code.setdefault(vtype.library, np.zeros(n, dtype=np.int64))
            np.maximum(lib_code, np.where(used, vtype.shared_code_bytes, 0), out=lib_code)
        items["sharedDataStorage"] += np.where(used, vtype.shared_data_bytes, 0)
    for lib_code in shared_code.values():
        items["sharedCodeStorage"] += lib_code
    items["stack"] += lib.SUPERVISOR_STACK + 6 * worker_stack
    control = items["controlCode"]
    for prog in exe.progs:
        every, extra = prog.code
        if every:
            control += every
        if extra is not None and extra.idx.size:
            control[extra.idx] += extra.val
        plan = prog.plan
        if plan is None:
            continue
        if prog.type == "DoExchange":
            items["internalExchangeCode"][plan.code.idx] += plan.code.val
        elif prog.type == "GlobalExchange":
            assert plan.packets is not None, "a global exchange's plan counts its packets"
            items["globalExchangeCode"][plan.code.idx] += plan.code.val
            items["globalExchangePacketHeader"][plan.packets.idx] += 16 * plan.packets.val
        elif prog.type == "StreamCopyMid":
            assert plan.packets is not None, "a host exchange's plan counts its packets"
            items["hostExchangeCode"][plan.code.idx] += plan.code.val
            items["hostExchangePacketHeader"][plan.packets.idx] += plan.packets.val
    level = instrumentation.get("compute", "Off")
    if level != "Off" or instrumentation.get("external_exchange") == "Tile":
        results = items["instrumentationResults"]
        results += 4
        tiles_per_ipu = exe.target.tiles_per_ipu
        for info in exe.cs_infos:
            if info is None:
                continue
            if level == "Tile":
                results[info.vertex_tiles.idx] += 8
            elif level == "Vertex":
                results[info.vertex_tiles.idx] += 8 + 4 * info.vertex_tiles.val
            elif level == "Device":
                results[0] += 8
            elif level == "Ipu":
                results[np.arange(0, n, tiles_per_ipu)] += 8
        if instrumentation.get("external_exchange") == "Tile":
            for prog in exe.progs:
                if prog.type in ("StreamCopyMid", "GlobalExchange") and prog.plan is not None:
                    results[prog.plan.cycles.idx] += 8
    return items


def compile_graph(
    graph: Graph, programs, instrumentation: dict | None = None, progress=None, tracer=None
) -> Executable:
    """Compile `graph` with its control programs (a program or a list of programs)."""
    import time

    instrumentation = instrumentation or {"compute": "Off", "external_exchange": "Off"}
    state = graph.state
    target = state.target
    exe = Executable()
    exe.state = state
    exe.target = target
    exe.n_tiles = state.num_tiles
    n = exe.n_tiles
    user = list(programs) if isinstance(programs, (list, tuple)) else [programs]
    for i, p in enumerate(user):
        if not isinstance(p, P.Program):
            raise GraphError(f"program {i} given to the Engine is a {type(p).__name__}, not a program")

    def phase(name):
        return tracer.phase(name) if tracer is not None else _Null()

    t0 = time.perf_counter()
    with phase("validate"):
        _validate(state)
    from .regions import GlobalMapping

    state.frozen_mapping = GlobalMapping(state)
    types = exe.types = VertexTypeTable(n)
    exe.compute_sets = list(state.compute_sets)
    exe.cs_infos = [None] * len(exe.compute_sets)
    exe.classes = ClassTable(state, n)
    elem_size = np.array([v.dtype.size for v in state.vars], dtype=np.int64)

    def get_info(cs_id: int) -> CSInfo:
        while len(exe.cs_infos) < len(exe.compute_sets):
            exe.cs_infos.append(None)
        info = exe.cs_infos[cs_id]
        if info is None:
            info = analyse(state, exe.compute_sets[cs_id], target, types, n, elem_size)
            exe.cs_infos[cs_id] = info
            if progress is not None and info.origin == "user":
                progress.advance()
        return info

    try:
        with phase("lower programs"):
            lowerer = Lowerer(state, target, n, exe.compute_sets, get_info, exe.classes)
            root, lowered_user = _control_program(lowerer, exe, user, get_info)
    finally:
        state.frozen_mapping = None
    lowerer.compact([root] + [lowerer.function_roots[fn.id] for fn in state.functions])
    exe.progs = lowerer.progs
    exe.message_classes = lowerer._msg_classes
    exe.root = root
    exe.user_programs = lowered_user
    exe.functions = [lowerer.function_roots[fn.id] for fn in state.functions]
    exe.phases.append(("lower", time.perf_counter() - t0))

    with phase("liveness"):
        _liveness(exe, root)
    with phase("allocate memory"):
        _allocate(exe, instrumentation)
    return exe


def _control_program(lowerer: Lowerer, exe: Executable, user: list, get_info) -> tuple:
    """The lowered control program (its root) and the lowered user programs: read the program id
    from the host, broadcast it, switch on it; every compute set analysed."""
    state, target, classes, n = exe.state, exe.target, exe.classes, exe.n_tiles
    assert state is not None and target is not None and classes is not None, "set by compile_graph"
    root_debug = [state.debug.new("controlProgram", "poplar", {"kind": "controlProgram"}, locate=False)]
    root = lowerer.new("Sequence", "", root_debug)
    # the control program: read the program id from the host, broadcast it, switch on it
    program_id = classes.new("programId", "controlId", Sparse([0], [4], n))
    lowered_user = []
    for p in user:
        lowered = lowerer.lower(p)
        node = lowered[0] if len(lowered) == 1 else lowerer._single(lowered, lowerer._debug(p))
        lowered_user.append(node)
    for fn in state.functions:
        lowerer.lower_function(fn)
    for cs_id in range(len(exe.compute_sets)):
        get_info(cs_id)
    plan = host_plan(target, n, Sparse([0], [4], n), Sparse([], [], n), Sparse([0], [1], n))
    code = Sparse([0], [8], n)
    begin = lowerer.new("StreamCopyBegin", "programId", root_debug, plan=plan, code=(0, code))
    mid = lowerer.new("StreamCopyMid", "programId", root_debug, plan=plan, sct="Host", code=(0, code))
    end = lowerer.new("StreamCopyEnd", "programId", root_debug, plan=plan, code=(0, code))
    mid.defs = mid.kills = 1 << program_id
    mid.classes = [program_id]
    bcast, bcast_class = lowerer.broadcast(
        0, 4, 1 << program_id, "switchControlBroadcast/ExchangePre", root_debug, "broadcastProgramId"
    )
    switch = lowerer.new(
        "OnEveryTileSwitch",
        "",
        root_debug,
        code=(8 + 4 * len(user), None),
        extra=("program", len(user)),
        uses=1 << bcast_class,
    )
    switch.classes = [bcast_class]
    switch.children = lowered_user
    root.children = lowerer._with_syncs([begin, mid, end, lowerer._sync("Internal", root_debug)] + bcast + [switch])
    return root, lowered_user


def _liveness(exe: Executable, root) -> None:
    """The liveness of every class over the program steps; classes live throughout become always live."""
    state, target, classes, n = exe.state, exe.target, exe.classes, exe.n_tiles
    assert state is not None and target is not None and classes is not None, "set by compile_graph"
    always = 0
    for _kind, tensor in state.host_handles.values():
        for v in tensor.variable_ids():
            always |= 1 << v
    liveness = Liveness(exe.progs, classes.liveness_classes(), n, target.tiles_per_ipu, always)
    exe.liveness = liveness.run(root)
    for cls in liveness.promote_always_live():
        classes.always_live[cls] = True


def _allocate(exe: Executable, instrumentation: dict) -> None:
    """The lowered variables of every tile, their lanes and their memory."""
    target, classes, live, n = exe.target, exe.classes, exe.liveness, exe.n_tiles
    assert target is not None and classes is not None and live is not None, "set by compile_graph"
    accessed: set[int] = set()
    for info in exe.cs_infos:
        if info is not None:
            accessed |= info.reads | info.writes
    items = _always_live_items(exe, instrumentation)
    exe.lowered, exe.item_classes = build_lowered_vars(classes, n, items, accessed)
    num_classes = len(classes) + len(exe.item_classes)
    nal = np.zeros(num_classes, dtype=bool)
    nal[: len(classes)] = ~np.array(classes.always_live, dtype=bool)
    inter = np.zeros(num_classes, dtype=np.int64)
    inter[: len(classes)] = np.array(classes.interleaved, dtype=np.int64)
    lanes = assign_lanes(exe.lowered, num_classes, live.intervals, nal, inter)
    exe.memory = allocate(
        exe.lowered,
        lanes,
        n,
        target.bytesPerTile,
        target.arch.interleaved_memory_start,
        live.peak_by_tile,
        target.arch.memory_element_bytes,
    )


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
