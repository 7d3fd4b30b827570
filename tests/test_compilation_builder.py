"""A consistent compilation report (and its debug.cbor) written through the formats writers.

`write_model_report` writes a 4-IPU, 2-replica report in which every figure derives from the
lowered variables (liveness, always-live memory, categories, tile totals), every program kind
appears, and debug contexts of four layers own programs, compute sets and variables. It
returns `Model`, the plain-Python description the tests compute their expectations from.
The tests at the end check the builder itself.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest

from formats.debug.debug_cbor import write_debug_info
from formats.pop.reader import ProfileReader
from formats.pop.writer import MEMORY_REGIONS, ProfileWriter
from pva.compilation import CATEGORIES

NUM_IPUS = 4
TILES_PER_IPU = 4
NUM_REPLICAS = 2
TILES = NUM_IPUS * TILES_PER_IPU // NUM_REPLICAS  # tiles per replica
NUM_STEPS = 13
CATEGORY_NAMES = list(CATEGORIES)

#: (id, type, name, compute_set, repeat_count, sync_type, stream_copy_type, call_target, num_tiles)
PROGRAMS = [
    (0, "Sequence", "", None, None, None, None, None, None),
    (1, "StreamCopyBegin", "copyIn", None, None, None, None, None, None),
    (2, "StreamCopyMid", "copyIn", None, None, None, "RemoteBuffer", None, None),
    (3, "StreamCopyEnd", "copyIn", None, None, None, None, None, None),
    (4, "DoExchange", "fwd/ExchangePre", None, None, None, None, None, None),
    (5, "OnTileExecute", "", 0, None, None, None, None, None),
    (6, "Repeat", "", None, 5, None, None, None, None),
    (7, "Sequence", "body", None, None, None, None, None, None),
    (8, "OnTileExecute", "layer/fwd", 1, None, None, None, None, None),
    (9, "Sync", "", None, None, "GS2", None, None, None),
    (10, "Call", "callFn", None, None, None, None, 11, None),
    (11, "Sequence", "fn", None, None, None, None, None, None),
    (12, "OnTileExecute", "layer/bwd", 2, None, None, None, None, None),
    (13, "DoExchange", "bwd/exchange", None, None, None, None, None, None),
    (14, "GlobalExchange", "gx", None, None, "GS1", None, None, None),
    (15, "WriteUndef", "", None, None, None, None, None, None),
    (16, "Sans", "", None, None, None, None, None, 8),
    (17, "SyncAns", "", None, None, None, None, None, 4),
    (18, "RepeatWhile", "while", None, None, None, None, None, None),
    (19, "OnTileSwitch", "tileSwitch", None, None, None, None, None, None),
    (20, "OnEveryTileSwitch", "switch", None, None, None, None, None, None),
    (21, "IfElse", "if", None, None, None, None, None, None),
    (22, "SetLocalConsensus", "", None, None, None, None, None, None),
    (23, "SetLocalConsensusFromVar", "", None, None, None, None, None, None),
    (24, "GetGlobalConsensus", "", None, None, None, None, None, None),
    (25, "CodeCopy", "", None, None, None, None, None, None),
    (26, "Block", "", None, None, None, None, None, None),
    (27, "Unknown", "", None, None, None, None, None, None),
    (28, "Execute", "exec", None, None, None, None, None, None),
    (29, "Repeat", "uncounted", None, None, None, None, None, None),
    (30, "Call", "callFnAgain", None, None, None, None, 11, None),
    (31, "NotAKnownType", "odd", None, None, None, None, None, None),
]
CHILDREN = {
    0: [1, 2, 3, 4, 5, 6, 10, 14, 15, 16, 17, 18, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31],
    6: [7],
    7: [8, 9],
    11: [12, 13],
    18: [19],
    19: [20],
}
CONTROL_PROGRAMS = [0]
FUNCTIONS = [11]
#: liveness steps: (program, parent step, depth)
STEPS = [
    (0, None, 0),
    (1, 0, 1),
    (2, 0, 1),
    (3, 0, 1),
    (4, 0, 1),
    (5, 0, 1),
    (6, 0, 1),
    (8, 6, 2),
    (9, 6, 2),
    (10, 0, 1),
    (12, 9, 2),
    (13, 9, 2),
    (14, 0, 1),
]
assert len(STEPS) == NUM_STEPS
LIVENESS_TILES = [0, 5]

VARIABLES = ["weights", "acts", "grads", "msg", "controlCode", "vertexCode", "internalExchangeCode", "stack"]
#: equivalence classes and their liveness intervals [start, end)
CLASSES = {0: [(0, 13)], 1: [(5, 9)], 2: [(7, 8), (10, 13)], 3: [(4, 5)], 4: [(2, 6)], 5: []}

VERTEX_TYPES = [
    (0, "poplar_rt::DstStridedCopyDA32", 12, "Asm"),
    (1, "poplin::ConvPartial1x1Out<half>", 24, "Asm"),
    (2, "popops::Reduce<float>", 8, "CPlusPlus"),
]
COMPUTE_SETS = ["init/zero", "layer/fwd", "layer/bwd"]
CS_VERTEX_TYPES = {0: [0], 1: [1, 2], 2: [2]}


@dataclasses.dataclass
class Lowered:
    """One lowered variable as written."""

    id: int
    tile: int
    name: str
    size: int
    alignment: int
    offset: int
    category: str
    allocated: int
    constant: int
    always_live: int
    executable: int
    vertex_code: int
    lowest_256k: int
    start_section: int
    in_interleaved_mem: int
    accessed_in_vertex: int
    equivalence_class: int
    unlowered_var: int | None
    alloc_order: int


@dataclasses.dataclass
class Model:
    """What was written, in plain Python, for tests to compute expectations from."""

    path: str
    debug_path: str
    lowered: list[Lowered]
    categories: np.ndarray  # (TILES, 6 * categories)
    memory_rows: list[tuple]
    vertex_counts: dict[tuple[int, int], np.ndarray]  # (cs, vertex type) -> per tile
    estimates: dict[int, np.ndarray]
    vectors: dict[tuple[int, str], np.ndarray]  # (program, kind) -> per tile
    vertex_memory: list[tuple]
    program_vars: list[tuple[int, int]]
    compute_set_vars: list[tuple[int, int]]
    constraints: list[tuple[int, str, int]]
    contexts: list[dict]
    refs: list[tuple[str, int, int]]

    def live(self, step: int, tiles=range(TILES)) -> list[Lowered]:
        """Allocated, not always-live lowered variables on `tiles` whose class is live in `step`."""
        tiles = set(tiles)
        return [
            v
            for v in self.lowered
            if v.allocated
            and not v.always_live
            and v.tile in tiles
            and any(s <= step < e for s, e in CLASSES[v.equivalence_class])
        ]

    def live_bytes(self, step: int, tiles=range(TILES)) -> int:
        return sum(v.size for v in self.live(step, tiles))

    def live_by_variable(self, step: int, tiles=range(TILES)) -> dict[str, int]:
        found: dict[str, int] = {}
        for v in self.live(step, tiles):
            name = VARIABLES[v.unlowered_var] if v.unlowered_var is not None else v.name
            found[name] = found.get(name, 0) + v.size
        return found

    def always_live(self, tile: int | None = None) -> dict[str, int]:
        found: dict[str, int] = {}
        for v in self.lowered:
            if v.always_live and (tile is None or v.tile == tile):
                found[VARIABLES[v.unlowered_var]] = found.get(VARIABLES[v.unlowered_var], 0) + v.size
        return found

    def category_total(self, name: str, tile: int) -> int:
        base = 6 * CATEGORY_NAMES.index(name)
        return int(self.categories[tile, base : base + 6].sum())


def _lowered_variables() -> list[Lowered]:
    pieces = []
    for tile in range(TILES):
        plan = [
            ("controlCode", 512, "controlCode", 1, 5, 4),
            ("vertexCode", 300 + tile, "vertexCode", 1, 5, 5),
            ("internalExchangeCode", 40 + 4 * tile, "internalExchangeCode", 1, 5, 6),
            ("stack", 1024, "stack", 1, 5, 7),
            (f"weights/{tile}", 256 + 16 * tile, "variable", 0, 0, 0),
            (f"acts/{tile}", 128 + 8 * tile, "variable", 0, 1, 1),
        ]
        if tile % 2 == 0:
            plan.append((f"grads/{tile}", 64, "variable", 0, 2, 2))
        if tile < 4:
            plan.append((f"msg/{tile}", 32, "message", 0, 3, 3))
        if tile in (0, 5):
            plan.append(("<anon>", 12, "multiple", 0, 4, None))
        if tile == 7:
            plan.append(("acts/spill", 999, "variable", 0, 1, 1))
        offset = 0
        for order, (name, size, category, always, cls, var) in enumerate(plan):
            alignment = 8 if name.startswith("weights") else 4
            offset = (offset + alignment - 1) // alignment * alignment
            pieces.append(
                Lowered(
                    id=len(pieces),
                    tile=tile,
                    name=name,
                    size=size,
                    alignment=alignment,
                    offset=offset,
                    category=category,
                    allocated=0 if name == "acts/spill" else 1,
                    constant=int(name == "controlCode"),
                    always_live=always,
                    executable=int(category in ("vertexCode", "controlCode")),
                    vertex_code=int(category == "vertexCode"),
                    lowest_256k=int(category == "vertexCode"),
                    start_section=int(category == "controlCode"),
                    in_interleaved_mem=int(name.startswith("acts")),
                    accessed_in_vertex=int(name.startswith("weights")),
                    equivalence_class=cls,
                    unlowered_var=var,
                    alloc_order=order,
                )
            )
            offset += size
    return pieces


def _debug_contexts() -> tuple[list[dict], list[tuple[str, int, int]]]:
    where = {"fileName": "model.py", "functionName": "forward"}
    contexts = [
        {
            "id": 1,
            "layer": "poptorch",
            "name": "model/linear",
            "parents": [],
            "location": {**where, "lineNumber": 10},
            "data": {"op_name": "linear/MatMul", "op_type": "MatMul"},
        },
        {
            "id": 2,
            "layer": "popart",
            "name": "MatMul",
            "parents": [1],
            "location": {**where, "lineNumber": 10},
            "data": {"op_name": "linear/MatMul", "op_type": "MatMul", "tensorId": "t1", "inputs": ["x", "w"]},
        },
        {"id": 3, "layer": "poplibs", "name": "matMul", "parents": [2], "location": None, "data": {"api": "matMul"}},
        {"id": 4, "layer": "poplar", "name": "convolution", "parents": [3], "location": None, "data": {}},
        {
            "id": 5,
            "layer": "poptorch",
            "name": "relu",
            "parents": [],
            "location": {**where, "lineNumber": 12},
            "data": {"op_name": "relu/Relu", "op_type": "Relu"},
        },
        {
            "id": 6,
            "layer": "popart",
            "name": "Relu",
            "parents": [5],
            "location": {**where, "lineNumber": 12},
            "data": {"op_name": "relu/Relu", "op_type": "Relu"},
        },
        {"id": 7, "layer": "poplibs", "name": "map", "parents": [6], "location": None, "data": {}},
        {
            "id": 8,
            "layer": "popart",
            "name": "Call",
            "parents": [],
            "location": None,
            "data": {"op_name": "Call", "op_type": "Call", "replacedDebugContextIds": "[2,6]"},
        },
        {"id": 9, "layer": "poplibs", "name": "copy", "parents": [], "location": None, "data": {}},
        {
            "id": 10,
            "layer": "popart",
            "name": "Add",
            "parents": [],
            "location": None,
            "data": {"op_name": "unused/Add", "op_type": "Add"},
        },
        {"id": 11, "layer": "poplar", "name": "fnBody", "parents": [8], "location": None, "data": {}},
        {"id": 12, "layer": "poplibs", "name": "stream", "parents": [], "location": None, "data": {}},
        {
            "id": 13,
            "layer": "poplar",
            "name": "shared",
            "parents": [3, 7],
            "location": {"fileName": "lib.cpp", "lineNumber": 7, "functionName": ""},
            "data": {},
        },
    ]
    refs = [
        ("program", 4, 3),
        ("program", 5, 4),
        ("program", 8, 7),
        ("program", 10, 8),
        ("program", 30, 8),
        ("program", 12, 11),
        ("program", 13, 11),
        ("program", 1, 12),
        ("program", 2, 12),
        ("program", 3, 12),
        ("program", 14, 9),
        ("compute_set", 1, 7),
        ("compute_set", 0, 4),
        ("variable", 0, 2),
        ("variable", 1, 6),
        ("variable", 3, 13),
    ]
    return contexts, refs


def write_model_report(directory: str | os.PathLike[str], *, with_debug: bool = True) -> Model:
    """Write profile.pop (and debug.cbor) into `directory` and return what was written."""
    directory = os.fspath(directory)
    path = os.path.join(directory, "profile.pop")
    debug_path = os.path.join(directory, "debug.cbor")
    rng = np.random.default_rng(11)
    lowered = _lowered_variables()
    contexts, refs = _debug_contexts()
    with ProfileWriter(path, producer="pva-tests-model", poplar_version="3.2.0 (8d5b1c2e3f)") as w:
        w.set_metadata(
            instrumentation_compute="Vertex",
            instrumentation_external_exchange="Tile",
            compilation_timestamp="2026-11-21T08:30:00Z",
            report_unstable="1",
        )
        w.set_target(
            num_ipus=NUM_IPUS,
            tiles_per_ipu=TILES_PER_IPU,
            bytes_per_tile=638976,
            clock_frequency=1.33e9,
            type="Ipu",
            architecture="Ipu2",
            num_replicas=NUM_REPLICAS,
            relative_sync_delay_by_tile=[3, 2, 1, 0],
            min_sync_delay=11,
            supervisor_instr_fetch_delay=3,
            interleaved_memory_start=524288,
            memory_element_offsets=[0, 32768, 65536],
            memory_region_offsets=[0, 524288],
            tile_memory_base_address=0x4C000,
            tiles_per_super_tile=2,
            num_worker_contexts=6,
            exchange_bytes_per_cycle=4,
            memcpy_bytes_per_cycle=8,
            instruction_bytes=4,
            supports_super_tile_send_receive=1,
            global_sync_cycles=150,
            global_exchange_packet_bytes=256,
            tile_local_sync_sync_delay=7,
            tile_local_sync_exit_delay=5,
            num_stride_bits=10,
            data_path_width=128,
            fp8_conv_unit_max_pipeline_depth=2,
            fp16_conv_unit_max_pipeline_depth=3,
            fp32_conv_unit_max_pipeline_depth=4,
            fp8_conv_unit_input_load_elems_per_cycle=32,
            fp16_conv_unit_input_load_elems_per_cycle=16,
            fp32_conv_unit_input_load_elems_per_cycle=8,
            fp16_in_fp16_out_conv_units_per_tile=16,
            fp16_in_fp32_out_conv_units_per_tile=8,
            fp32_in_fp32_out_conv_units_per_tile=4,
            fp8_in_fp16_out_conv_units_per_tile=32,
            conv_unit_coeff_load_bytes_per_cycle=16,
            worker_instr_fetch_delay=12,
            max_immediate_offset_in_run_instr=65535,
            rpt_count_max=4095,
            atomic_store_granularity=4,
        )
        w.set_graph(num_compute_sets=3, num_edges=77, num_vars=len(VARIABLES), num_vertices=42)
        w.insert("optimisation_metrics", ("name", "value"), [("fusedOps", 4.0)])
        w.insert(
            "compilation_parameters",
            ("name", "value"),
            [("opt.enableLoopUnroll", "false"), ("debug.instrument", "true")],
        )
        w.insert("target_parameters", ("name", "value"), [("ipuLinkTopology", "ring")])

        # vertices and compute sets
        w.insert("vertex_types", ("id", "name", "size", "source"), VERTEX_TYPES)
        vertex_counts, estimates, cs_rows, vertex_rows = {}, {}, [], []
        for cs, name in enumerate(COMPUTE_SETS):
            estimate = rng.integers(5, 400, size=TILES).astype(np.uint64)
            estimates[cs] = estimate
            er = w.matrix("compute_set_estimated_cycles_by_tile").append(estimate)
            ar = w.matrix("compute_set_active_cycles_by_tile").append(estimate // 2)
            total = 0
            for vt in CS_VERTEX_TYPES[cs]:
                counts = rng.integers(0, 4, size=TILES).astype(np.uint64)
                counts[cs] += 1  # at least one instance somewhere
                vertex_counts[(cs, vt)] = counts
                cr = w.matrix("vertex_count_by_tile").append(counts)
                vertex_rows.append((len(vertex_rows), cs, vt, int(counts.sum()), 10 * (vt + 1), cr))
                total += int(counts.sum())
            cs_rows.append((cs, name, total, er, ar, int(estimate.max()), int(estimate.sum())))
        w.insert(
            "compute_sets",
            (
                "compute_set",
                "name",
                "num_vertices",
                "estimated_cycles_row",
                "active_cycles_row",
                "estimated_cycles_max",
                "estimated_cycles_total",
            ),
            cs_rows,
        )
        w.insert(
            "compute_set_vertices",
            ("id", "compute_set", "vertex_type", "count", "estimated_cycles", "count_by_tile_row"),
            vertex_rows,
        )

        # programs
        w.insert(
            "programs",
            (
                "id",
                "type",
                "name",
                "compute_set",
                "repeat_count",
                "sync_type",
                "stream_copy_type",
                "call_target",
                "num_tiles",
            ),
            PROGRAMS,
        )
        w.insert(
            "program_children",
            ("parent", "position", "child"),
            [(p, i, c) for p, kids in CHILDREN.items() for i, c in enumerate(kids)],
        )
        w.insert("control_programs", ("position", "program"), list(enumerate(CONTROL_PROGRAMS)))
        w.insert("function_programs", ("position", "program"), list(enumerate(FUNCTIONS)))
        vectors = {}

        def vector(program: int, kind: str, values) -> None:
            values = np.asarray(values, dtype=np.uint64)
            vectors[(program, kind)] = values
            w.add_program_vector(program, kind, values)

        for program, *_ in PROGRAMS:
            if program not in (28, 31):  # two programs without control code
                vector(program, "control_code", rng.integers(0, 200, size=TILES))
        for program in (2, 4, 13, 14):
            vector(program, "bytes_received", rng.integers(0, 5000, size=TILES))
            vector(program, "bytes_sent", rng.integers(0, 5000, size=TILES))
            vector(program, "estimated_cycles", rng.integers(0, 700, size=TILES))
        for program in (4, 13):
            vector(program, "code_bytes", rng.integers(0, 90, size=TILES))
        vector(14, "exchange_cycles", rng.integers(0, 300, size=TILES))
        vector(14, "sync_cycles", rng.integers(0, 40, size=TILES))

        # variables
        w.insert(
            "var_categories",
            ("id", "name", "description"),
            [(i, name, CATEGORIES[name]) for i, name in enumerate(CATEGORY_NAMES)],
        )
        w.insert("variables", ("id", "name"), list(enumerate(VARIABLES)))
        fields = [f.name for f in dataclasses.fields(Lowered)]
        rows = []
        for piece in lowered:
            row = dataclasses.asdict(piece)
            row["category"] = CATEGORY_NAMES.index(piece.category)
            rows.append(tuple(row[f] for f in fields))
        w.insert("vars_info", tuple("size_bytes" if f == "size" else f for f in fields), rows)
        by_name = {(v.tile, v.name): v.id for v in lowered}
        constraints = [
            (by_name[(0, "weights/0")], "element", by_name[(0, "acts/0")]),
            (by_name[(0, "weights/0")], "element", by_name[(0, "stack")]),
            (by_name[(0, "acts/0")], "region", by_name[(0, "grads/0")]),
        ]
        w.insert("lowered_var_constraints", ("var", "kind", "other"), constraints)
        w.insert(
            "equivalence_class_steps",
            ("class", "start", "end"),
            [(c, s, e) for c, spans in CLASSES.items() for s, e in spans],
        )
        program_vars = [
            (5, by_name[(0, "weights/0")]),
            (5, by_name[(0, "acts/0")]),
            (13, by_name[(2, "grads/2")]),
            (4, by_name[(1, "msg/1")]),
        ]
        compute_set_vars = [(1, by_name[(1, "acts/1")]), (1, by_name[(2, "acts/2")]), (1, by_name[(0, "acts/0")])]
        w.insert("program_vars", ("program", "var"), program_vars)
        w.insert("compute_set_vars", ("compute_set", "var"), compute_set_vars)
        w.insert("debug_context_refs", ("kind", "object", "debug_context"), refs)

        # memory: every byte comes from a lowered variable
        categories = np.zeros((TILES, 6 * len(CATEGORY_NAMES)), dtype=np.uint64)
        for v in lowered:
            if not v.allocated:
                continue
            base = 6 * CATEGORY_NAMES.index(v.category)
            region = 0 if v.in_interleaved_mem or v.vertex_code else 2
            overlapped = 0 if v.always_live or v.equivalence_class == 0 else 1
            categories[v.tile, base + region + overlapped] += v.size
        categories[7, 6 * CATEGORY_NAMES.index("variable") + 4] += 50  # tile 7 overflows
        memory_rows = []
        for tile in range(TILES):
            row = categories[tile]
            inter = int(row[0::6].sum() + row[1::6].sum())
            non = int(row[2::6].sum() + row[3::6].sum())
            over = int(row[4::6].sum() + row[5::6].sum())
            total = inter + non + over
            always = sum(v.size for v in lowered if v.tile == tile and v.always_live)
            peak = max(sum(v.size for v in _live(lowered, s) if v.tile == tile) for s in range(NUM_STEPS))
            memory_rows.append(
                (
                    tile,
                    total,
                    total + 8 * tile,
                    inter,
                    inter + 4,
                    non,
                    non + 8 * tile - 4 * (tile > 0),
                    over,
                    over + 10 * (over > 0),
                    always,
                    peak,
                )
            )
        w.insert(
            "memory_by_tile",
            (
                "tile",
                "total",
                "total_including_gaps",
                "interleaved",
                "interleaved_including_gaps",
                "non_interleaved",
                "non_interleaved_including_gaps",
                "overflowed",
                "overflowed_including_gaps",
                "always_live_bytes",
                "not_always_live_bytes",
            ),
            memory_rows,
        )
        w.matrix("memory_category_by_tile").append(categories)
        by_category = []
        for c in range(len(CATEGORY_NAMES)):
            for ri, region in enumerate(MEMORY_REGIONS):
                for overlapped in (0, 1):
                    column = categories[:, 6 * c + 2 * ri + overlapped]
                    if column.any():
                        by_category.append((c, region, overlapped, int(column.sum()), int(column.max())))
        w.insert("memory_by_category", ("category", "region", "overlapped", "total", "max"), by_category)
        vertex_memory = [
            (t, vt, 100 + 10 * vt + t, 2 * vt, 4, 8 + t, vt, 16 * (vt + 1))
            for t in range(TILES)
            for vt in (0, 1, 2)
            if (t + vt) % 3 != 2
        ]
        w.insert(
            "vertex_memory",
            (
                "tile",
                "vertex_type",
                "code_bytes",
                "copy_ptr_bytes",
                "descriptor_bytes",
                "edge_ptr_bytes",
                "padding_bytes",
                "vertex_data_bytes",
            ),
            vertex_memory,
        )

        # liveness
        w.insert(
            "liveness_steps",
            ("id", "program", "parent", "depth", "not_always_live_bytes"),
            [
                (i, p, parent, depth, sum(v.size for v in _live(lowered, i)))
                for i, (p, parent, depth) in enumerate(STEPS)
            ],
        )
        per_ipu = TILES_PER_IPU
        w.insert(
            "liveness_step_ipus",
            ("step", "ipu", "bytes"),
            [
                (i, ipu, sum(v.size for v in _live(lowered, i) if v.tile // per_ipu == ipu))
                for i in range(NUM_STEPS)
                for ipu in range(TILES // per_ipu)
            ],
        )
        w.insert("liveness_tiles", ("tile",), [(t,) for t in LIVENESS_TILES])
        always_rows = {}
        for v in lowered:
            if v.always_live:
                key = (v.unlowered_var, v.tile)
                always_rows[key] = always_rows.get(key, 0) + v.size
        w.insert("always_live_vars", ("var", "tile", "bytes"), [(k[0], k[1], b) for k, b in always_rows.items()])
    if with_debug:
        write_debug_info(debug_path, contexts)
    return Model(
        path=path,
        debug_path=debug_path,
        lowered=lowered,
        categories=categories,
        memory_rows=memory_rows,
        vertex_counts=vertex_counts,
        estimates=estimates,
        vectors=vectors,
        vertex_memory=vertex_memory,
        program_vars=program_vars,
        compute_set_vars=compute_set_vars,
        constraints=constraints,
        contexts=contexts,
        refs=refs,
    )


def _live(lowered: list[Lowered], step: int) -> list[Lowered]:
    return [
        v
        for v in lowered
        if v.allocated and not v.always_live and any(s <= step < e for s, e in CLASSES[v.equivalence_class])
    ]


@pytest.fixture(scope="session")
def model(tmp_path_factory) -> Model:
    """The model report with its debug information."""
    return write_model_report(tmp_path_factory.mktemp("model"))


# -- the builder's own checks ----------------------------------------------------------------


def test_model_categories_add_up_to_tile_totals(model):
    for tile, total, *_rest in model.memory_rows:
        assert int(model.categories[tile].sum()) == total


def test_model_report_opens_and_holds_every_program_kind(model):
    reader = ProfileReader(model.path)
    try:
        types = set(reader.column("SELECT type FROM programs"))
        assert reader.target["tiles_per_replica"] == TILES
    finally:
        reader.close()
    import pva

    subclassed = {t for t in pva.Program.Type.__members__ if hasattr(pva, f"{t}Program")}
    assert subclassed <= types
    assert len(subclassed) == 23


def test_model_always_live_and_peak_agree_with_memory_rows(model):
    for tile, *_rest, always, peak in model.memory_rows:
        assert always == sum(model.always_live(tile).values())
        assert peak == max(model.live_bytes(s, [tile]) for s in range(NUM_STEPS))
