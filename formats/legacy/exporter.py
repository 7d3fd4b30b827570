"""Writing legacy v1 graph and execution profiles (JSON or CBOR) from any profile.pop report.

The documents are assembled lazily: per-tile arrays stay in the report and are streamed row by
row while the output is written, so memory does not grow with the report. Values the importer
kept in table extras (unknown keys, and known values the tables cannot hold) are put back at
their JSON locations, which makes legacy -> pop -> legacy equivalent (see `equivalent`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

import cbor2
import numpy as np

from ..errors import InvalidInputError
from ..json_values import plain
from ..pop.reader import MatrixReader, ProfileReader
from ..streaming.tree import parse_json_path
from . import mapping as M

#: Rows read from a matrix at a time while writing.
ROW_BATCH = 256
#: The self-describe CBOR tag Poplar's serializeToCBOR output starts with.
CBOR_MAGIC = b"\xd9\xd9\xf7"


class Rows:
    """A 2-D array written row by row: `count` rows produced in order by `produce()`."""

    def __init__(self, count: int, produce: Callable[[], Iterator[np.ndarray]]) -> None:
        self.count = count
        self._produce = produce
        self.overrides: dict[int, Any] = {}

    def __iter__(self) -> Iterator[Any]:
        for index, row in enumerate(self._produce()):
            yield self.overrides.get(index, row)


# -- reading the report -------------------------------------------------------------------------


class _Report:
    """The queries the exporter needs, over a ProfileReader."""

    def __init__(self, reader: ProfileReader) -> None:
        self.r = reader
        t = reader.target
        self.tiles = int(t["tiles_per_replica"])
        self.all_tiles = int(t["num_tiles"])

    def matrix_rows(self, matrix: MatrixReader, rows: list[int]) -> Rows:
        width = self.tiles

        def produce() -> Iterator[np.ndarray]:
            for start in range(0, len(rows), ROW_BATCH):
                block = matrix.take(rows[start : start + ROW_BATCH])
                yield from block[:, :width]

        return Rows(len(rows), produce)

    def grouped(self, source: str, key: str, column: str, count: int, width: int) -> Rows:
        """Dense rows [key][tile] of one column of a sparse (key, tile, column) table or subquery."""
        sql = f"SELECT {key}, tile, {column} FROM {source} ORDER BY {key}, tile"
        reader = self.r

        def produce() -> Iterator[np.ndarray]:
            current = 0
            row = np.zeros(width, dtype=np.uint64)
            for k, tile, value in reader.export_rows(sql):
                if not 0 <= k < count:
                    continue
                while current < k:
                    yield row
                    row = np.zeros(width, dtype=np.uint64)
                    current += 1
                if 0 <= tile < width:
                    row[tile] = value
            while current < count:
                yield row
                row = np.zeros(width, dtype=np.uint64)
                current += 1

        return Rows(count, produce)


def _graph_profile(rep: _Report) -> dict:
    r = rep.r
    t = r.target
    tiles = rep.tiles
    ipus = int(t["ipus_per_replica"])
    doc: dict[str, Any] = {}
    target: dict[str, Any] = {
        "bytesPerIPU": int(t["bytes_per_tile"]) * int(t["tiles_per_ipu"]),
        "bytesPerTile": int(t["bytes_per_tile"]),
        "clockFrequency": float(t["clock_frequency"]),
        "numIPUs": ipus,
        "tilesPerIPU": int(t["tiles_per_ipu"]),
        "numTiles": tiles,
        "totalMemory": int(t["bytes_per_tile"]) * tiles,
        "minSyncDelay": int(t["min_sync_delay"]),
        "relativeSyncDelayByTile": np.array(
            r.column("SELECT relative_sync_delay FROM tiles WHERE id < ? ORDER BY id", (int(t["tiles_per_ipu"]),)),
            dtype=np.int64,
        ),
    }
    if t["type"] in M.TARGET_TYPES_BACK:
        target["type"] = M.TARGET_TYPES_BACK[t["type"]]
    doc["target"] = target
    doc["optimizationInfo"] = {
        name: float(value) for name, value in r.query("SELECT name, value FROM optimisation_metrics ORDER BY name")
    }
    g = r.graph
    doc["graph"] = {
        "numComputeSets": int(g["num_compute_sets"]),
        "numEdges": int(g["num_edges"]),
        "numVars": int(g["num_vars"]),
        "numVertices": int(g["num_vertices"]),
    }
    types = r.query("SELECT id, name, size FROM vertex_types ORDER BY id")
    num_vt = len(types)
    doc["vertexTypes"] = {
        "names": [name for _i, name, _s in types],
        "sizes": np.array([int(s) for _i, _n, s in types], dtype=np.int64),
    }
    doc["computeSets"] = _compute_sets(rep, num_vt)
    programs, exchange_of = _exchange_ids(rep)
    doc.update(_exchanges(rep, exchange_of))
    doc["programs"] = _programs(rep, programs, exchange_of)
    doc["controlPrograms"] = np.array(
        r.column("SELECT program FROM control_programs ORDER BY position"), dtype=np.int64
    )
    doc["functionPrograms"] = np.array(
        r.column("SELECT program FROM function_programs ORDER BY position"), dtype=np.int64
    )
    doc["memory"] = _memory(rep, num_vt)
    carried = _carried_graph(rep)
    if carried:
        doc["pva"] = carried
    return doc


def _carried_metadata(meta: dict, num_steps: int) -> dict[str, str]:
    """The metadata a conversion of the v1 profiles written would not give back by itself."""
    derived: dict[str, str] = {"poplar_version": "", "report_unstable": "0"}
    if meta.get("producer") == "pva convert":
        derived.update(producer="pva convert", producer_version=str(meta.get("producer_version")))
        derived["created"] = str(meta.get("created"))
    mode = _profiler_mode(meta, num_steps)
    if mode in M.PROFILER_MODES:
        derived["instrumentation_compute"], derived["instrumentation_external_exchange"] = M.PROFILER_MODES[mode]
    return {
        k: str(meta[k]) for k in M.CARRIED_METADATA if meta.get(k) is not None and str(meta[k]) != derived.get(k, "")
    }


def _carried_graph(rep: _Report) -> dict:
    """$.pva of the graph profile: the metadata and always-live variables a v1 profile has no place for."""
    r = rep.r
    carried: dict[str, Any] = {}
    metadata = _carried_metadata(r.metadata, r.query_row("SELECT count(*) FROM steps")[0])
    if metadata:
        carried["metadata"] = metadata
    rows = r.query("SELECT var, tile, bytes FROM always_live_vars ORDER BY var, tile")
    if rows:
        names = r.query(
            "SELECT id, name FROM variables WHERE id IN (SELECT DISTINCT var FROM always_live_vars) ORDER BY id"
        )
        table = np.array(rows, dtype=np.int64).reshape(len(rows), 3)
        carried["alwaysLiveVariables"] = {
            "ids": np.array([i for i, _n in names], dtype=np.int64),
            "names": [n for _i, n in names],
            "var": table[:, 0],
            "tile": table[:, 1],
            "bytes": table[:, 2],
        }
    return carried


def _carried_execution(rep: _Report, total_cycles: int, num_steps: int) -> dict:
    """$.pva of the execution profile: the runs, which a v1 profile has no place for (empty if one plain run)."""
    r = rep.r
    runs = r.query("SELECT id, name, microseconds_start, microseconds_end, first_step, num_steps FROM runs ORDER BY id")
    cycles = r.query('SELECT run, ipu, start, "end" FROM run_cycles_by_ipu ORDER BY run, ipu')
    ipus = int(r.target["ipus_per_replica"])
    if runs == [(0, "", 0, 0, 0, num_steps)] and cycles == [(0, ipu, 0, total_cycles) for ipu in range(ipus)]:
        return {}
    columns = ("run", "ipu", *M.CYCLE_TOTAL_COLUMNS)
    totals = np.array(r.query(f"SELECT {', '.join(columns)} FROM cycle_totals ORDER BY run, ipu"), dtype=np.int64)
    numbers = np.array([row[2:] for row in runs], dtype=np.int64).reshape(len(runs), 4)
    spans = np.array(cycles, dtype=np.int64).reshape(len(cycles), 4)
    if ipus > 1 and len(runs):
        # A v1 step's span is device-wide, and so is each run's, on every IPU.
        lows = np.full(len(runs), np.iinfo(np.int64).max, dtype=np.int64)
        highs = np.zeros(len(runs), dtype=np.int64)
        np.minimum.at(lows, spans[:, 0], spans[:, 2])
        np.maximum.at(highs, spans[:, 0], spans[:, 3])
        spans[:, 2], spans[:, 3] = lows[spans[:, 0]], highs[spans[:, 0]]
    return {
        "runs": {
            "names": [row[1] for row in runs],
            "microsecondsStart": numbers[:, 0],
            "microsecondsEnd": numbers[:, 1],
            "firstStep": numbers[:, 2],
            "numSteps": numbers[:, 3],
        },
        "runCycles": {"run": spans[:, 0], "ipu": spans[:, 1], "start": spans[:, 2], "end": spans[:, 3]},
        "cycleTotals": dict(zip(("run", "ipu", *M.CYCLE_TOTAL_COLUMNS), totals.reshape(-1, len(columns)).T)),
    }


def _compute_sets(rep: _Report, num_vt: int) -> dict:
    r = rep.r
    rows = r.query(
        "SELECT compute_set, name, estimated_cycles_row, active_cycles_row FROM compute_sets ORDER BY compute_set"
    )
    section: dict[str, Any] = {"names": [name for _cs, name, _e, _a in rows]}
    vertices: dict[int, list[tuple[int, int, int]]] = {}
    for cs, vt, count, estimate in r.query(
        "SELECT compute_set, vertex_type, count, estimated_cycles FROM compute_set_vertices ORDER BY id"
    ):
        vertices.setdefault(cs, []).append((vt, count, estimate))
    if vertices:
        section["vertexCounts"] = [
            np.array([c for _v, c, _e in vertices.get(cs, [])], dtype=np.int64) for cs, *_ in rows
        ]
        section["vertexTypes"] = [
            np.array([v for v, _c, _e in vertices.get(cs, [])], dtype=np.int64) for cs, *_ in rows
        ]
    estimates: dict[str, Any] = {}
    for key, column, matrix in (
        ("cyclesByTile", 2, "compute_set_estimated_cycles_by_tile"),
        ("activeCyclesByTile", 3, "compute_set_active_cycles_by_tile"),
    ):
        indexes = [row[column] for row in rows]
        stored = r.matrix(matrix)
        if rows and all(i is not None for i in indexes) and stored is not None:
            estimates[key] = rep.matrix_rows(stored, indexes)
    if estimates and vertices:
        dense = []
        for cs, *_ in rows:
            row = np.zeros(num_vt, dtype=np.int64)
            for vt, _count, estimate in vertices.get(cs, []):
                if 0 <= vt < num_vt:
                    row[vt] = estimate
            dense.append(row)
        estimates["activeCyclesByVertexType"] = dense
    if estimates:
        section["cycleEstimates"] = estimates
    return section


def _exchange_ids(rep: _Report) -> tuple[list[tuple], dict[int, tuple[str, int]]]:
    """Programs, and the (family, exchange id) of each exchange program."""
    programs = rep.r.query("SELECT id, type, name, compute_set, exchange, call_target FROM programs ORDER BY id")
    stored = _has_legacy_exchange_ids(rep.r)
    exchange_of: dict[int, tuple[str, int]] = {}
    counters = dict.fromkeys(M.EXCHANGE_SECTIONS, 0)
    for pid, kind, _name, _cs, exchange, _call in programs:
        family = M.EXCHANGE_FAMILY.get(kind)
        if family is None:
            continue
        if stored:
            if exchange is not None:
                exchange_of[pid] = (family, int(exchange))
        else:  # a report without legacy exchanges: number each exchange program in program order
            exchange_of[pid] = (family, counters[family])
            counters[family] += 1
    return programs, exchange_of


def _has_legacy_exchange_ids(reader: ProfileReader) -> bool:
    """Whether exchange ids come from a legacy profile (else the exporter numbers exchange programs)."""
    return bool(
        reader.query_row(
            "SELECT (SELECT count(*) FROM exchanges) + (SELECT count(*) FROM programs WHERE exchange IS NOT NULL)"
        )[0]
    )


def _exchanges(rep: _Report, exchange_of: dict[int, tuple[str, int]]) -> dict:
    r = rep.r
    sections: dict[str, dict] = {}
    stored = r.query("SELECT family, exchange, kind, row FROM exchanges ORDER BY family, kind, exchange")
    by_family_kind: dict[tuple[str, str], dict[int, int]] = {}
    if stored or _has_legacy_exchange_ids(r):
        for family, exchange, kind, row in stored:
            by_family_kind.setdefault((family, kind), {})[int(exchange)] = int(row)
    else:
        vectors = {(p, k): row for p, k, row in r.query("SELECT program, kind, row FROM program_vectors")}
        for pid, (family, exchange) in exchange_of.items():
            for kind in ("bytes_received", "bytes_sent", "estimated_cycles", "code_bytes"):
                if (pid, kind) in vectors:
                    by_family_kind.setdefault((family, kind), {})[exchange] = vectors[(pid, kind)]
    for family, (key, arrays) in M.EXCHANGE_SECTIONS.items():
        section = {}
        for array_key, kind in arrays.items():
            rows = by_family_kind.get((family, kind))
            if not rows:
                continue
            matrix = r.matrix(f"program_{kind}_by_tile")
            if matrix is None:
                continue
            count = max(rows) + 1
            order = [rows.get(i) for i in range(count)]
            section[array_key] = _rows_with_gaps(rep, matrix, order)
        if section:
            sections[key] = section
    return sections


def _rows_with_gaps(rep: _Report, matrix: MatrixReader, order: list[int | None]) -> Rows:
    present = [row for row in order if row is not None]
    inner = rep.matrix_rows(matrix, present)

    def produce() -> Iterator[np.ndarray]:
        rows = iter(inner)
        for row in order:
            yield next(rows) if row is not None else np.zeros(rep.tiles, dtype=np.uint64)

    return Rows(len(order), produce)


def _programs(rep: _Report, programs: list[tuple], exchange_of: dict[int, tuple[str, int]]) -> list:
    r = rep.r
    children: dict[int, list[int]] = {}
    for parent, child in r.query("SELECT parent, child FROM program_children ORDER BY parent, position"):
        children.setdefault(parent, []).append(child)
    functions = r.column("SELECT program FROM function_programs ORDER BY position")
    position_of: dict[int, int] = {}
    for position, program in enumerate(functions):
        position_of.setdefault(program, position)
    out = []
    for pid, kind, name, cs, _exchange, call_target in programs:
        entry: dict[str, Any] = {"type": M.PROGRAM_TYPES_BACK.get(kind, kind)}
        if name:
            entry["name"] = name
        if pid in children:
            entry["children"] = np.array(children[pid], dtype=np.int64)
        if cs is not None:
            entry["computeSet"] = int(cs)
        if pid in exchange_of:
            entry["exchange"] = exchange_of[pid][1]
        if call_target is not None and call_target in position_of:
            entry["target"] = position_of[call_target]
        out.append(entry)
    return out


def _memory(rep: _Report, num_vt: int) -> dict:
    r = rep.r
    tiles = rep.tiles
    memory: dict[str, Any] = {}
    columns = list(M.BY_TILE.items()) + [
        ("alwaysLive", "always_live_bytes"),
        ("notAlwaysLive", "not_always_live_bytes"),
    ]
    rows = r.query(f"SELECT tile, {', '.join(c for _k, c in columns)} FROM memory_by_tile ORDER BY tile")
    if rows:
        table = np.zeros((len(columns), tiles), dtype=np.int64)
        for row in rows:
            if 0 <= row[0] < tiles:
                table[:, row[0]] = row[1:]
        memory["byTile"] = {key: table[i] for i, (key, _c) in enumerate(columns[: len(M.BY_TILE)])}
    categories = r.query("SELECT id, name FROM var_categories ORDER BY id")
    present = r.query("SELECT category, region, overlapped FROM memory_by_category ORDER BY category")
    matrix = r.matrix("memory_category_by_tile")
    if present and matrix is not None:
        values = matrix.rows()
        names = dict(categories)
        index = {cid: i for i, (cid, _n) in enumerate(categories)}
        by_category: dict[str, Any] = {}
        for cid, region, overlapped in present:
            if cid not in index or region not in M.REGIONS:
                continue
            column = 6 * index[cid] + 2 * M.REGIONS.index(region) + int(bool(overlapped))
            entry = by_category.setdefault(names[cid], {})
            entry.setdefault(region, {})[M.OVERLAPS[int(bool(overlapped))]] = values[:tiles, column].astype(np.int64)
        for name, entry in by_category.items():
            i = next(k for k, (_c, n) in enumerate(categories) if n == name)
            entry["total"] = values[:tiles, 6 * i : 6 * i + 6].sum(axis=1).astype(np.int64)
        memory["byCategory"] = by_category
    num_cs = r.query_row("SELECT count(*) FROM compute_sets")[0]
    for key, source, first, count in (
        ("byComputeSet", "compute_set_memory", "compute_set", num_cs),
        ("byVertexType", "vertex_memory", "vertex_type", num_vt),
    ):
        if not r.query_row(f"SELECT count(*) FROM {source}")[0]:
            continue
        section = {name: rep.grouped(source, first, column, count, tiles) for name, column in M.VERTEX_MEMORY.items()}
        total_sql = " + ".join(M.VERTEX_MEMORY.values())
        section["totalBytes"] = rep.grouped(
            f"(SELECT {first}, tile, {total_sql} AS t FROM {source})", first, "t", count, tiles
        )
        memory[key] = section
    liveness: dict[str, Any] = {}
    if rows:
        liveness["alwaysLive"] = {"bytesByTile": table[len(M.BY_TILE)]}
        liveness["notAlwaysLive"] = {"maxBytesByTile": table[len(M.BY_TILE) + 1]}
    steps = r.query("SELECT id, program, parent, not_always_live_bytes FROM liveness_steps ORDER BY id")
    if steps:
        nodes: dict[int, dict] = {}
        roots: list[dict] = []
        for sid, program, parent, size in steps:
            node = {"bytes": int(size), "children": [], "program": int(program)}
            nodes[sid] = node
            (nodes[parent]["children"] if parent in nodes else roots).append(node)
        liveness.setdefault("notAlwaysLive", {})["byProgram"] = roots
    if liveness:
        memory["liveness"] = liveness
    return memory


def _profiler_mode(meta: dict, num_steps: int) -> str | None:
    """The profilerMode of the execution profile written, or None if none is."""
    mode = meta.get("legacy_profiler_mode")
    if mode is not None or not num_steps:
        return mode
    return {
        "Tile": "COMPUTE_SETS",
        "Device": "SINGLE_TILE_COMPUTE_SETS",
        "Ipu": "SINGLE_TILE_COMPUTE_SETS",
        "Vertex": "VERTICES",
    }.get(meta.get("instrumentation_compute", "Off"), "IPU_MODEL")


def _execution_profile(rep: _Report) -> dict | None:
    r = rep.r
    meta = r.metadata
    num_steps = r.query_row("SELECT count(*) FROM steps")[0]
    mode = _profiler_mode(meta, num_steps)
    if mode is None:
        return None
    doc: dict[str, Any] = {"profilerMode": mode}
    matrix = r.matrix("compute_set_cycles_by_tile")
    if matrix is not None:
        doc["computeSetCyclesByTile"] = rep.matrix_rows(matrix, list(range(matrix.num_rows)))
    measured = r.query(
        "SELECT compute_set, measured_cycles FROM compute_sets WHERE measured_cycles IS NOT NULL ORDER BY compute_set"
    )
    if measured:
        values = np.zeros(measured[-1][0] + 1, dtype=np.int64)
        for cs, value in measured:
            values[cs] = value
        doc["computeSetCycles"] = values
    vertex_rows = r.query("SELECT vertex, compute_set, vertex_type, cycles FROM vertex_cycles ORDER BY vertex")
    if vertex_rows:
        array = np.array(vertex_rows, dtype=np.int64)
        doc["vertexCycles"] = array[:, 3]
        doc["vertexComputeSet"] = array[:, 1]
        doc["vertexType"] = array[:, 2]
    for family, key in M.EXCHANGE_CYCLES.items():
        rows = dict(
            r.query("SELECT exchange, row FROM exchanges WHERE family = ? AND kind = 'exchange_cycles'", (family,))
        )
        cycles = r.matrix("program_exchange_cycles_by_tile")
        if rows and cycles is not None:
            order = [rows.get(i) for i in range(max(rows) + 1)]
            doc[key] = _rows_with_gaps(rep, cycles, order)
    if num_steps or r.query_row("SELECT count(*) FROM runs")[0]:
        doc["simulation"] = _simulation(rep)
        carried = _carried_execution(rep, int(doc["simulation"]["cycles"]), num_steps)
        if carried:
            doc["pva"] = carried
    return doc


def _simulation(rep: _Report) -> dict:
    r = rep.r
    total = r.query_row(
        'SELECT coalesce(sum(c), 0) FROM (SELECT max("end" - start) AS c FROM run_cycles_by_ipu GROUP BY run)'
    )[0]
    simulation: dict[str, Any] = {"cycles": int(total)}
    totals = r.query_row(
        "SELECT count(*), sum(active_compute), sum(compute), sum(internal_exchange), "
        "sum(inter_ipu_exchange), sum(stream_copy_begin + stream_copy + stream_copy_end), sum(sync) "
        "FROM cycle_totals"
    )
    if totals[0]:
        simulation["tileCycles"] = dict(
            zip(
                ("activeCompute", "compute", "doExchange", "globalExchange", "streamCopy", "sync"),
                (int(v or 0) for v in totals[1:]),
            )
        )
    programs = {pid: (kind, exchange) for pid, kind, exchange in r.query("SELECT id, type, exchange FROM programs")}
    stored = _has_legacy_exchange_ids(r)
    exchange_of = {}
    if not stored:
        counters: dict[str, int] = {}
        for pid in sorted(programs):
            family = M.EXCHANGE_FAMILY.get(programs[pid][0])
            if family:
                exchange_of[pid] = counters.get(family, 0)
                counters[family] = exchange_of[pid] + 1
    # Per-step tiles the importer shared out of computeSetCyclesByTile are not written back.
    has_tiles = r.has_matrix("step_cycles_by_tile") and "legacy_step_cycles_by_tile" not in r.metadata
    simulation["steps"] = _Steps(rep, programs, exchange_of, has_tiles)
    return simulation


class _Steps:
    """The simulation steps, produced one at a time."""

    SQL = (
        "SELECT s.id, s.type, s.program, s.compute_set, s.name, s.sync_type, s.cycles_overlapped, "
        "max(b.tile_cycles_max), sum(b.active_tiles), min(b.cycles_base + b.all_cycles_from_min), "
        "max(b.cycles_base + b.all_cycles_to_max), avg(b.thread_balance), avg(b.tile_balance), "
        "avg(b.active_tile_balance), sum(b.data_in), sum(b.data_out), avg(b.data_balance) "
        "FROM steps s LEFT JOIN steps_by_ipu b ON b.step_id = s.id AND b.profiled = 1 "
        "GROUP BY s.id ORDER BY s.id"
    )

    def __init__(self, rep: _Report, programs: dict, exchange_of: dict, has_tiles: bool) -> None:
        self.rep = rep
        self.programs = programs
        self.exchange_of = exchange_of
        self.has_tiles = has_tiles
        self.count = rep.r.query_row("SELECT count(*) FROM steps")[0]
        self.overrides: dict[int, Any] = {}

    def __iter__(self) -> Iterator[dict]:
        r = self.rep.r
        tiles = self.rep.tiles
        matrix = r.matrix("step_cycles_by_tile") if self.has_tiles else None
        chunk: np.ndarray | None = None
        chunk_first = 0
        for row in r.export_rows(self.SQL):
            (
                sid,
                kind,
                program,
                cs,
                name,
                sync_type,
                overlapped,
                cycles,
                active,
                first,
                last,
                thread,
                tile_balance,
                active_balance,
                data_in,
                data_out,
                data_balance,
            ) = row
            legacy = M.PROGRAM_TYPES_BACK.get(kind, kind)
            step: dict[str, Any] = {"type": legacy}
            # Poplar's Sync steps hold only syncType; their timing, when known, is written too (readers
            # ignore keys they do not know), else tileCycles.sync has no steps to add up to.
            timed = legacy != "Sync" or bool(cycles) or bool(last)
            if timed:
                step.update(
                    tileBalance=float(tile_balance or 0.0),
                    activeTiles=int(active or 0),
                    activeTileBalance=float(active_balance or 0.0),
                    cycles=int(cycles or 0),
                    cyclesFrom=int(first or 0),
                    cyclesTo=int(last or 0),
                )
            if program is not None:
                step["program"] = int(program)
            if name:
                step["name"] = name
            if legacy == "Sync":
                if sync_type is not None:
                    step["syncType"] = sync_type
            else:
                if legacy in ("DoExchange", "StreamCopy", "GlobalExchange", "CopySharedStructure"):
                    step["totalData"] = int(max(data_in or 0, data_out or 0))
                    step["dataBalance"] = float(data_balance or 0.0)
                if legacy == "OnTileExecute":
                    step["threadBalance"] = float(thread or 0.0)
                if cs is not None:
                    step["computeSet"] = int(cs)
                if program is not None and program in self.programs:
                    family = M.EXCHANGE_FAMILY.get(self.programs[program][0])
                    exchange = self.exchange_of.get(program, self.programs[program][1])
                    if family is not None and exchange is not None:
                        step[M.STEP_EXCHANGE_FIELD[family]] = int(exchange)
                if legacy in ("OnTileExecute", "DoExchange", "CopySharedStructure"):
                    step["cyclesOverlapped"] = int(overlapped or 0)
            if matrix is not None and timed:
                if chunk is None or not chunk_first <= sid < chunk_first + len(chunk):
                    chunk_first = sid
                    chunk = matrix.rows(sid, sid + ROW_BATCH)
                step["cyclesByTile"] = chunk[sid - chunk_first, :tiles]
            if sid in self.overrides:
                step = self.overrides[sid]
            yield step


# -- putting back kept values -------------------------------------------------------------------


def apply_extras(doc: dict, patches: list[tuple[str, Any]]) -> None:
    """Set each (JSON location, value) in the document, creating objects on the way."""
    parsed = []
    for path, value in patches:
        try:
            parts = parse_json_path(path)
        except ValueError:
            continue
        parsed.append((len(parts), path, parts, value))
    for _depth, _path, parts, value in sorted(parsed, key=lambda p: (p[0], p[1])):
        if parts:
            _set(doc, parts, value)


def _set(node: Any, parts: list, value: Any) -> None:
    for position, part in enumerate(parts[:-1]):
        following = parts[position + 1]
        if isinstance(node, dict) and isinstance(part, str):
            child = node.get(part)
            if child is None or not isinstance(child, (dict, list, Rows, _Steps, np.ndarray)):
                child = [] if isinstance(following, int) else {}
                node[part] = child
            node = child
        elif isinstance(part, int):
            if isinstance(node, (Rows, _Steps)):
                if part >= node.count:
                    return
                rest = parts[position + 1 :]
                base = node.overrides.get(part)
                if base is None:
                    base = _nth(node, part)
                base = plain(base)
                _set(base, rest, value)
                node.overrides[part] = base
                return
            if isinstance(node, np.ndarray):
                return
            if not isinstance(node, list) or part >= len(node):
                return
            if isinstance(node[part], np.ndarray):
                node[part] = node[part].tolist()
            node = node[part]
        else:
            return
    last = parts[-1]
    if isinstance(node, dict) and isinstance(last, str):
        node[last] = value
    elif isinstance(last, int):
        if isinstance(node, (Rows, _Steps)) and last < node.count:
            node.overrides[last] = value
        elif isinstance(node, list) and last < len(node):
            node[last] = value
        elif isinstance(node, list) and last == len(node):
            node.append(value)


def _nth(rows: Any, index: int) -> Any:
    for i, row in enumerate(rows):
        if i == index:
            return row
    return None


def _patches(reader: ProfileReader, source: str) -> list[tuple[str, Any]]:
    return [
        (path, json.loads(value))
        for path, value in reader.query("SELECT path, value FROM extras WHERE source = ? ORDER BY path", (source,))
    ]


# -- encoders -----------------------------------------------------------------------------------


def _json_number_list(values: np.ndarray) -> bytes:
    if values.dtype.kind == "f":
        return ("[" + ",".join(json.dumps(float(v), allow_nan=False) for v in values.tolist()) + "]").encode()
    return ("[" + ",".join(map(str, values.tolist())) + "]").encode()


def write_json(value: Any, out: BinaryIO) -> None:
    """Write a document (with lazy parts) as compact JSON with sorted keys, as Poplar did."""
    if isinstance(value, dict):
        out.write(b"{")
        for position, key in enumerate(sorted(value)):
            if position:
                out.write(b",")
            out.write(json.dumps(key).encode() + b":")
            write_json(value[key], out)
        out.write(b"}")
    elif isinstance(value, np.ndarray):
        out.write(_json_number_list(value))
    elif isinstance(value, (list, Rows, _Steps)):
        out.write(b"[")
        for position, item in enumerate(value):
            if position:
                out.write(b",")
            write_json(item, out)
        out.write(b"]")
    elif isinstance(value, (np.integer,)):
        out.write(str(int(value)).encode())
    else:
        out.write(json.dumps(value, allow_nan=False).encode())


def _cbor_head(major: int, argument: int) -> bytes:
    if argument < 24:
        return bytes([(major << 5) | argument])
    for info, size in ((24, 1), (25, 2), (26, 4), (27, 8)):
        if argument < 1 << (8 * size):
            return bytes([(major << 5) | info]) + argument.to_bytes(size, "big")
    raise ValueError(f"CBOR argument {argument} too large")


def write_cbor(value: Any, out: BinaryIO) -> None:
    """Write a document (with lazy parts) as CBOR, maps with sorted keys."""
    if isinstance(value, dict):
        out.write(_cbor_head(5, len(value)))
        for key in sorted(value):
            out.write(cbor2.dumps(key))
            write_cbor(value[key], out)
    elif isinstance(value, np.ndarray):
        out.write(cbor2.dumps(value.tolist()))
    elif isinstance(value, (Rows, _Steps)):
        out.write(_cbor_head(4, value.count))
        written = 0
        for item in value:
            write_cbor(item, out)
            written += 1
        if written != value.count:
            raise InvalidInputError(f"internal error: expected {value.count} rows, wrote {written}")
    elif isinstance(value, list):
        out.write(_cbor_head(4, len(value)))
        for item in value:
            write_cbor(item, out)
    elif isinstance(value, np.integer):
        out.write(cbor2.dumps(int(value)))
    else:
        out.write(cbor2.dumps(value))


# -- the export ---------------------------------------------------------------------------------


def legacy_documents(reader: ProfileReader) -> tuple[dict, dict | None, list[tuple[str, Any]]]:
    """The graph profile, the execution profile (None without execution data) and wrapper patches."""
    rep = _Report(reader)
    graph = _graph_profile(rep)
    apply_extras(graph, _patches(reader, M.SOURCE_GRAPH))
    execution = _execution_profile(rep)
    patches = _patches(reader, M.SOURCE_EXECUTION)
    if execution is None and patches:
        execution = {}
    if execution is not None:
        apply_extras(execution, patches)
    return graph, execution, _patches(reader, "legacy-profile")
