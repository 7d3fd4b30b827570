"""A small, fully populated report written through the formats writer, with its expected values.

Tests use it until a test needs a simulated report: every table and every matrix of the schema
gets rows, and everything written is recorded so tests can compare what they read back.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import sqlite3

import numpy as np

from formats.pop.schema import profile_schema
from formats.pop.writer import MEMORY_REGIONS, ProfileWriter
from pva.compilation import CATEGORIES

TILES_PER_IPU = 4
NUM_IPUS = 2
BYTES_PER_TILE = 638976
CLOCK = 1.33e9


@dataclasses.dataclass
class SampleReport:
    """What was written: rows per table (with their columns) and arrays per matrix."""

    path: str
    tables: dict[str, tuple[tuple[str, ...], list[tuple]]] = dataclasses.field(default_factory=dict)
    matrices: dict[str, list[np.ndarray]] = dataclasses.field(default_factory=dict)
    target: dict = dataclasses.field(default_factory=dict)

    def rows(self, table: str) -> list[tuple]:
        return self.tables[table][1]

    def matrix(self, name: str) -> np.ndarray:
        return np.vstack(self.matrices[name])


class _Recorder:
    def __init__(self, writer: ProfileWriter, sample: SampleReport) -> None:
        self.w = writer
        self.sample = sample

    def put(self, table: str, columns: tuple[str, ...], rows: list[tuple]) -> None:
        self.w.insert(table, columns, rows)
        old_columns, old_rows = self.sample.tables.get(table, (columns, []))
        assert old_columns == columns
        self.sample.tables[table] = (columns, old_rows + list(rows))

    def vector(self, name: str, values) -> int:
        array = np.asarray(values, dtype=np.uint64)
        self.sample.matrices.setdefault(name, []).append(array.reshape(1, -1))
        return self.w.matrix(name).append(array)

    def program_vector(self, program: int, kind: str, values) -> None:
        array = np.asarray(values, dtype=np.uint64)
        row = self.vector(f"program_{kind}_by_tile", array)
        self.sample.tables.setdefault("program_vectors", (("program", "kind", "row", "total", "min", "max"), []))
        self.sample.tables["program_vectors"][1].append(
            (program, kind, row, int(array.sum()), int(array.min()), int(array.max()))
        )
        self.w.insert(
            "program_vectors",
            ("program", "kind", "row", "total", "min", "max"),
            [(program, kind, row, int(array.sum()), int(array.min()), int(array.max()))],
        )


def changed_copy(source: str | os.PathLike[str], target: str | os.PathLike[str], sql: str, params=()) -> str:
    """A copy of a report at `target`, changed by one SQL statement (for tests of damaged or edited files)."""
    shutil.copyfile(source, target)
    connection = sqlite3.connect(target)
    try:
        connection.execute(sql, params)
        connection.commit()
    finally:
        connection.close()
    return str(target)


def write_sample_report(
    path: str | os.PathLike[str],
    *,
    with_execution: bool = True,
    seed: int = 7,
    chunk_bytes: int = 2 << 20,
    compression: str | None = "zstd",
) -> SampleReport:
    """Write the sample report to `path` and return everything written."""
    rng = np.random.default_rng(seed)
    sample = SampleReport(path=os.fspath(path))
    tiles = TILES_PER_IPU * NUM_IPUS
    with ProfileWriter(
        path,
        producer="pva-tests",
        producer_version="1",
        poplar_version="3.1.0 (a027fa0bd5)",
        chunk_bytes=chunk_bytes,
        compression=compression,
    ) as w:
        r = _Recorder(w, sample)
        w.set_metadata(
            instrumentation_compute="Tile",
            instrumentation_external_exchange="Off",
            compilation_timestamp="2026-11-20T10:00:00Z",
        )
        sample.target = w.set_target(
            num_ipus=NUM_IPUS,
            tiles_per_ipu=TILES_PER_IPU,
            bytes_per_tile=BYTES_PER_TILE,
            clock_frequency=CLOCK,
            type="IpuModel",
            architecture="Ipu2",
            relative_sync_delay_by_tile=[0, 1, 2, 3],
            min_sync_delay=17,
            num_worker_contexts=6,
            exchange_bytes_per_cycle=4,
            memory_element_offsets=[0, 65536],
            memory_region_offsets=[0, 524288],
            supports_super_tile_send_receive=1,
            tiles_per_super_tile=2,
        )
        w.set_graph(num_compute_sets=3, num_edges=40, num_vars=12, num_vertices=20)
        r.put("optimisation_metrics", ("name", "value"), [("mergedCopies", 3.0), ("removedVars", 1.5)])
        r.put("compilation_parameters", ("name", "value"), [("debug.instrument", "true"), ("opt.level", "2")])
        r.put("target_parameters", ("name", "value"), [("ipuLinkDomainSize", "64")])

        # vertex types, compute sets and their vertices
        r.put(
            "vertex_types",
            ("id", "name", "size", "source"),
            [
                (0, "poplar_rt::DstStridedCopyDA32", 12, "Asm"),
                (1, "popops::ScaledAddSupervisor<float,float,true>", 16, "Asm"),
                (2, "SumVertex", 8, "CPlusPlus"),
            ],
        )
        cs_rows, vertex_rows = [], []
        for cs, name in enumerate(["init/copy", "layer1/fwd", "layer1/bwd"]):
            estimate = rng.integers(10, 500, size=tiles, dtype=np.uint64)
            active = estimate // 3
            er = r.vector("compute_set_estimated_cycles_by_tile", estimate)
            ar = r.vector("compute_set_active_cycles_by_tile", active)
            cs_rows.append((cs, name, 4 + cs, er, ar, int(estimate.max()), int(estimate.sum())))
            for k, vt in enumerate({0: [0], 1: [1, 2], 2: [2]}[cs]):
                counts = rng.integers(0, 3, size=tiles, dtype=np.uint64)
                cr = r.vector("vertex_count_by_tile", counts)
                vertex_rows.append((len(vertex_rows), cs, vt, int(counts.sum()), 100 * (k + 1), cr))
        r.put(
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
        r.put(
            "compute_set_vertices",
            ("id", "compute_set", "vertex_type", "count", "estimated_cycles", "count_by_tile_row"),
            vertex_rows,
        )

        # programs
        programs = [
            (0, "Sequence", "", None, None, None, None, None, None),
            (1, "StreamCopyBegin", "copyIn", None, None, None, None, None, None),
            (2, "StreamCopyMid", "copyIn", None, None, None, "Host", None, None),
            (3, "StreamCopyEnd", "copyIn", None, None, None, None, None, None),
            (4, "DoExchange", "layer1/fwd/ExchangePre", None, None, None, None, None, None),
            (5, "OnTileExecute", "", 0, None, None, None, None, None),
            (6, "Repeat", "", None, 3, None, None, None, None),
            (7, "Sequence", "loop", None, None, None, None, None, None),
            (8, "OnTileExecute", "layer1/fwd", 1, None, None, None, None, None),
            (9, "Sync", "", None, None, "Internal", None, None, None),
            (10, "Call", "", None, None, None, None, 11, None),
            (11, "Sequence", "function", None, None, None, None, None, None),
            (12, "OnTileExecute", "layer1/bwd", 2, None, None, None, None, None),
            (13, "GlobalExchange", "gx", None, None, "GS1", None, None, None),
            (14, "WriteUndef", "", None, None, None, None, None, None),
            (15, "Sans", "", None, None, None, None, None, 8),
            (16, "SyncAns", "", None, None, None, None, None, 4),
            (17, "Repeat", "whileish", None, None, None, None, None, None),
        ]
        r.put(
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
            programs,
        )
        children = {0: [1, 2, 3, 4, 5, 6, 10, 13, 14, 15, 16, 17], 6: [7], 7: [8, 9], 11: [12]}
        r.put(
            "program_children",
            ("parent", "position", "child"),
            [(p, i, c) for p, cs in children.items() for i, c in enumerate(cs)],
        )
        r.put("control_programs", ("position", "program"), [(0, 0)])
        r.put("function_programs", ("position", "program"), [(0, 11)])
        for program in range(len(programs)):
            r.program_vector(program, "control_code", rng.integers(0, 64, size=tiles))
        for program in (2, 4, 13):
            r.program_vector(program, "bytes_received", rng.integers(0, 4096, size=tiles))
            r.program_vector(program, "bytes_sent", rng.integers(0, 4096, size=tiles))
            r.program_vector(program, "estimated_cycles", rng.integers(0, 900, size=tiles))
        r.program_vector(4, "code_bytes", rng.integers(0, 300, size=tiles))
        r.program_vector(13, "exchange_cycles", rng.integers(0, 300, size=tiles))
        r.program_vector(13, "sync_cycles", rng.integers(0, 50, size=tiles))

        # categories, variables and lowered variables
        categories = list(CATEGORIES)
        r.put(
            "var_categories",
            ("id", "name", "description"),
            [(i, name, CATEGORIES[name]) for i, name in enumerate(categories)],
        )
        r.put("variables", ("id", "name"), [(i, f"var{i}") for i in range(6)] + [(6, "controlCode"), (7, "stack")])
        lowered = []
        for tile in range(tiles):
            for k, var in enumerate((0, 1, 2)):
                lowered.append(
                    (
                        len(lowered),
                        tile,
                        f"var{var}/t{tile}",
                        64 * (var + 1),
                        8,
                        128 * k,
                        categories.index("variable"),
                        0,
                        var,
                        var,
                        tile * 3 + k,
                    )
                )
            lowered.append(
                (
                    len(lowered),
                    tile,
                    "controlCode",
                    512,
                    4,
                    1024,
                    categories.index("controlCode"),
                    1,
                    0,
                    6,
                    tile * 3 + 3,
                )
            )
        r.put(
            "vars_info",
            (
                "id",
                "tile",
                "name",
                "size_bytes",
                "alignment",
                "offset",
                "category",
                "always_live",
                "equivalence_class",
                "unlowered_var",
                "alloc_order",
            ),
            lowered,
        )
        r.put("lowered_var_constraints", ("var", "kind", "other"), [(0, "element", 1), (1, "region", 2)])
        r.put("equivalence_class_steps", ("class", "start", "end"), [(0, 0, 4), (1, 2, 6), (2, 3, 5), (2, 6, 8)])
        r.put("program_vars", ("program", "var"), [(5, 0), (5, 1), (8, 2), (4, 3)])
        r.put("compute_set_vars", ("compute_set", "var"), [(0, 0), (1, 1), (1, 2)])
        r.put("debug_context_refs", ("kind", "object", "debug_context"), [("program", 5, 2), ("compute_set", 1, 3)])

        # memory: categories add up to tile totals
        cols = 6 * len(categories)
        per_tile = np.zeros((TILES_PER_IPU * NUM_IPUS, cols), dtype=np.uint64)
        memory_rows = []
        for tile in range(tiles):
            for name in ("variable", "controlCode", "vertexCode", "stack", "message"):
                c = categories.index(name)
                per_tile[tile, 6 * c + 2] = rng.integers(100, 5000)  # nonInterleaved, nonOverlapped
                per_tile[tile, 6 * c + 3] = rng.integers(0, 500)  # nonInterleaved, overlapped
            per_tile[tile, 6 * categories.index("vertexCode")] = rng.integers(100, 900)  # interleaved
            inter = int(per_tile[tile, 0::6].sum() + per_tile[tile, 1::6].sum())
            non = int(per_tile[tile, 2::6].sum() + per_tile[tile, 3::6].sum())
            total = inter + non
            memory_rows.append(
                (
                    tile,
                    total,
                    total + 64 * tile,
                    inter,
                    inter,
                    non,
                    non + 64 * tile,
                    0,
                    0,
                    total // 2,
                    total - total // 2,
                )
            )
        r.put(
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
        sample.matrices["memory_category_by_tile"] = [per_tile]
        w.matrix("memory_category_by_tile").append(per_tile)
        by_category = []
        for c in range(len(categories)):
            for ri, region in enumerate(MEMORY_REGIONS):
                for overlapped in (0, 1):
                    column = per_tile[:, 6 * c + 2 * ri + overlapped]
                    if column.any():
                        by_category.append((c, region, overlapped, int(column.sum()), int(column.max())))
        r.put("memory_by_category", ("category", "region", "overlapped", "total", "max"), by_category)
        r.put(
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
            [(t, vt, 100 + t, 4, 8, 12 + vt, 2, 40 + vt) for t in range(tiles) for vt in (0, 1)],
        )

        # liveness
        r.put(
            "liveness_steps",
            ("id", "program", "parent", "depth", "not_always_live_bytes"),
            [
                (0, 0, None, 0, 0),
                (1, 1, 0, 1, 512),
                (2, 2, 0, 1, 2048),
                (3, 4, 0, 1, 4096),
                (4, 5, 0, 1, 3072),
                (5, 6, 0, 1, 1024),
                (6, 8, 5, 2, 3072),
                (7, 9, 5, 2, 1536),
            ],
        )
        r.put(
            "liveness_step_ipus",
            ("step", "ipu", "bytes"),
            [(s, i, b // 2) for s, b in enumerate([0, 512, 2048, 4096, 3072, 1024, 3072, 1536]) for i in (0, 1)],
        )
        r.put("liveness_tiles", ("tile",), [(0,), (5,)])
        r.put(
            "always_live_vars",
            ("var", "tile", "bytes"),
            [(6, t, 512) for t in range(tiles)] + [(7, t, 1024) for t in range(tiles)],
        )

        if with_execution:
            _write_execution(r, rng, tiles)
        _write_legacy_tables(r, np.random.default_rng(seed + 1000), tiles, with_execution)
    return sample


def _write_legacy_tables(r: _Recorder, rng, tiles: int, with_execution: bool) -> None:
    """Tables that hold legacy (v1) profile data; a separate generator keeps the values above unchanged."""
    rows_of = {(p, k): row for p, k, row, *_ in r.sample.rows("program_vectors")}
    r.put(
        "exchanges",
        ("family", "exchange", "kind", "row"),
        [
            ("internal", 0, "bytes_received", rows_of[(4, "bytes_received")]),
            ("internal", 0, "bytes_sent", rows_of[(4, "bytes_sent")]),
            ("internal", 0, "code_bytes", rows_of[(4, "code_bytes")]),
            ("external", 0, "bytes_received", rows_of[(13, "bytes_received")]),
            ("external", 0, "exchange_cycles", rows_of[(13, "exchange_cycles")]),
            ("host", 0, "bytes_sent", rows_of[(2, "bytes_sent")]),
        ],
    )
    r.put(
        "compute_set_memory",
        (
            "compute_set",
            "tile",
            "code_bytes",
            "copy_ptr_bytes",
            "descriptor_bytes",
            "edge_ptr_bytes",
            "padding_bytes",
            "vertex_data_bytes",
        ),
        [(cs, t, 64 + t, 0, 4 * cs, 8, 0, 16 + cs) for cs in (1, 2) for t in range(tiles)],
    )
    r.put(
        "compile_estimates",
        (
            "id",
            "kernel",
            "compute_set",
            "samples_per_second",
            "compute_samples_per_second",
            "transmission_samples_per_second",
            "active_pes",
            "active_pes_percent",
            "compute_utilization_percent",
        ),
        [
            (0, None, None, 2321.9, 2321.9, 2430.7, None, 93, 80),
            (1, "fc_para42.fc", 1, 2321.9, 2321.9, 14311.7, 5203, None, 100),
        ],
    )
    if with_execution:
        for _cs in range(3):
            r.vector("compute_set_cycles_by_tile", rng.integers(0, 300, size=tiles))
        r.put(
            "vertex_cycles",
            ("vertex", "compute_set", "vertex_type", "cycles"),
            [(v, v % 3, v % 3, int(c)) for v, c in enumerate(rng.integers(1, 90, size=6))],
        )


def _write_execution(r: _Recorder, rng, tiles: int) -> None:
    step_programs = [
        (1, "StreamCopyBegin"),
        (2, "StreamCopyMid"),
        (3, "StreamCopyEnd"),
        (4, "DoExchange"),
        (5, "OnTileExecute"),
        (8, "OnTileExecute"),
        (9, "Sync"),
        (None, "Sync"),
        (8, "OnTileExecute"),
        (12, "OnTileExecute"),
        (13, "GlobalExchange"),
    ]
    runs = [("first run", 0, 6), ("second", 6, 5)]
    r.put(
        "runs",
        ("id", "name", "microseconds_start", "microseconds_end", "first_step", "num_steps"),
        [(i, name, 1000 * i, 1000 * i + 400, first, count) for i, (name, first, count) in enumerate(runs)],
    )
    steps, by_ipu, cycles = [], [], []
    clock = {0: 0, 1: 0}
    run_bounds = []
    for run_id, (_name, first, count) in enumerate(runs):
        start = dict(clock)
        for s in range(first, first + count):
            program, kind = step_programs[s]
            cs = {5: 0, 8: 1, 12: 2}.get(program)
            steps.append(
                (
                    s,
                    run_id,
                    kind,
                    program,
                    cs,
                    "" if program else "implicitSync",
                    "Internal" if kind == "Sync" else None,
                )
            )
            vec = rng.integers(0 if kind != "OnTileExecute" else 5, 200, size=tiles, dtype=np.uint64)
            cycles.append(vec)
            for ipu in (0, 1):
                part = vec[ipu * TILES_PER_IPU : (ipu + 1) * TILES_PER_IPU]
                frm = clock[ipu] - start[ipu]
                length = int(part.max())
                active = int((part > 0).sum())
                by_ipu.append(
                    (
                        s,
                        ipu,
                        1,
                        int(part.sum()),
                        active,
                        start[ipu],
                        frm,
                        frm,
                        frm,
                        frm + int(part.min()),
                        frm + length,
                        frm + int(part.mean()),
                        frm,
                        frm,
                        frm,
                        frm + int(part.min()),
                        frm + length,
                        frm + int(part.mean()),
                        length,
                        0.5,
                        round(float(part.mean() / max(1, length)), 6),
                        0.75,
                        16 * ipu,
                        32 * ipu,
                        0.25,
                    )
                )
                clock[ipu] += length
        run_bounds.append((run_id, dict(start), dict(clock)))
    r.put("steps", ("id", "run", "type", "program", "compute_set", "name", "sync_type"), steps)
    r.put(
        "steps_by_ipu",
        profile_schema().tables["steps_by_ipu"].column_names,
        by_ipu,
    )
    for vec in cycles:
        r.vector("step_cycles_by_tile", vec)
    r.put(
        "run_cycles_by_ipu",
        ("run", "ipu", "start", "end"),
        [(run, ipu, start[ipu], end[ipu]) for run, start, end in run_bounds for ipu in (0, 1)],
    )
    r.put("run_parameters", ("run", "name", "value"), [(0, "debug.instrument", "true")])
    extra = r.vector("step_compute_set_cycles_by_tile", rng.integers(0, 50, size=tiles))
    r.put(
        "step_compute_sets",
        ("step_id", "position", "compute_set", "cycles_row"),
        [(4, 0, 0, None), (5, 0, 1, None), (8, 0, 1, None), (9, 0, 2, None), (9, 1, 1, extra)],
    )
    r.put(
        "step_vertex_cycles",
        ("step_id", "compute_set", "vertex_type", "count", "cycles"),
        [(5, 1, 1, 4, 400), (5, 1, 2, 2, 60)],
    )
    r.put(
        "cycle_totals",
        (
            "run",
            "ipu",
            "active_compute",
            "compute",
            "inter_ipu_exchange",
            "stream_copy_begin",
            "stream_copy",
            "stream_copy_end",
            "internal_exchange",
            "sync",
            "total",
        ),
        [(run, ipu, 10, 60, 5, 1, 7, 1, 20, 30, 124) for run in (0, 1) for ipu in (0, 1)],
    )
    r.put(
        "blocks",
        ("id", "tile", "program", "cycles_from", "cycles_to", "is_stream_copy", "is_common", "is_overflow"),
        [(0, 0, 5, 10, 90, 0, 0, 0), (1, 0, 2, 100, 140, 1, 0, 0), (2, 3, None, 5, 9, 0, 1, 1)],
    )
    r.put("extras", ("source", "path", "value"), [("tests", "$.unknownKey", '{"a": 1}')])
