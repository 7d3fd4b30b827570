"""The compilation report: target, graph, tiles, memory, compute sets (libpva section 2.1)."""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING, Any

from formats.lazy_import import lazy_module

from .context import ReportContext
from .debug import DebugContext, DebugInfo
from .errors import InconsistentReportError
from .lists_and_enums import EngineOption, PvaEnum, PvaList, refuse_pickle
from .liveness import LivenessProgramStep
from .model_errors import NotPresentError
from .program_table import ProgramTable
from .tile_memory import (
    CATEGORIES,
    CATEGORY_FIELDS,
    MEMORY_FIELDS,
    Memory,
    MemoryTables,
)
from .variables import (
    LoweredVariables,
    Variable,
    VariableCategory,
    VariableSize,
    lowered_variables_from_rows,
)
from .vectors import TileVector, read_only

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy")

if TYPE_CHECKING:
    from formats.pop.reader import ProfileReader


__all__ = [
    "CompilationReport",
    "ComputeSet",
    "Graph",
    "IPU",
    "Replica",
    "Target",
    "Tile",
    "VertexInstances",
    "VertexType",
]

# -- target and graph -----------------------------------------------------------------------


class IPU:
    """One IPU of the target: its tiles and architecture."""

    class Architecture(PvaEnum):
        """IPU architectures."""

        Ipu1 = 0
        Ipu2 = 1
        Ipu21 = 2
        Ipu30 = 3
        Unknown = 4

    __slots__ = ("_c", "_id")

    def __init__(self, compilation: CompilationReport, ipu_id: int) -> None:
        self._c = compilation
        self._id = ipu_id

    @property
    def id(self) -> int:
        """The global IPU id."""
        return self._id

    @property
    def tiles(self) -> PvaList:
        """The tiles on this IPU."""
        per_ipu = self._c.target.tilesPerIpu
        return PvaList(self._c._tiles[self._id * per_ipu : (self._id + 1) * per_ipu])

    @property
    def architecture(self) -> IPU.Architecture:
        """The architecture of this IPU."""
        return self._c._ipu_architectures[self._id]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IPU) and other._c is self._c and other._id == self._id

    def __hash__(self) -> int:
        return hash(("IPU", self._id))

    def __repr__(self) -> str:
        t = self._c.target
        return (
            f"<IPU {self._id} {self.architecture.name}, tiles {self._id * t.tilesPerIpu:,}.."
            f"{(self._id + 1) * t.tilesPerIpu - 1:,}, replica {self._id // t.ipusPerReplica}>"
        )


class Target:
    """The target hardware (libpva Target)."""

    class Type(PvaEnum):
        """Kinds of target."""

        Ipu = 0
        IpuModel = 1
        Cpu = 2
        Unknown = 3

    __slots__ = ("_row",)

    def __init__(self, row: dict) -> None:
        self._row = row

    numIPUs = property(lambda self: self._row["num_ipus"], doc="IPU chips in the system.")
    tilesPerIpu = property(lambda self: self._row["tiles_per_ipu"], doc="Tiles on each IPU.")
    numTiles = property(lambda self: self._row["num_tiles"], doc="Total number of tiles.")
    bytesPerTile = property(lambda self: self._row["bytes_per_tile"], doc="Memory of one tile in bytes.")
    bytesPerIPU = property(lambda self: self._row["bytes_per_ipu"], doc="Memory of one IPU in bytes.")
    bytesPerIpu = property(
        lambda self: self._row["bytes_per_ipu"], doc="Memory of one IPU in bytes (the C++ spelling of bytesPerIPU)."
    )
    totalMemory = property(lambda self: self._row["total_memory"], doc="Total memory in bytes.")
    clockFrequency = property(lambda self: float(self._row["clock_frequency"]), doc="Tile clock in Hz.")
    numReplicas = property(lambda self: self._row["num_replicas"], doc="Number of replicas.")
    ipusPerReplica = property(lambda self: self._row["ipus_per_replica"], doc="IPUs in a replica.")
    tilesPerReplica = property(lambda self: self._row["tiles_per_replica"], doc="Tiles in a replica.")
    memoryPerReplica = property(lambda self: self._row["memory_per_replica"], doc="Memory of a replica in bytes.")

    @property
    def type(self) -> Target.Type:
        """The target type."""
        return Target.Type.parse(self._row["type"])

    @property
    def architecture(self) -> IPU.Architecture:
        """The IPU architecture."""
        return IPU.Architecture.parse(self._row["architecture"])

    @property
    def memoryElementOffsets(self) -> PvaList:
        """Offsets of each memory element (address ranges without simultaneous access)."""
        return PvaList(json.loads(self._row["memory_element_offsets"] or "[]"))

    @property
    def memoryRegionOffsets(self) -> PvaList:
        """Offsets of each memory region (contiguous elements with the same access characteristics)."""
        return PvaList(json.loads(self._row["memory_region_offsets"] or "[]"))

    @property
    def supportsSuperTileSendReceive(self) -> bool:
        """Whether a supertile tile may use the supertile's whole exchange bandwidth; False if unknown."""
        return bool(self._row["supports_super_tile_send_receive"])

    def __repr__(self) -> str:
        return (
            f"<Target {self.type.name} {self.architecture.name}: {self.numIPUs} IPU(s) x "
            f"{self.tilesPerIpu:,} tiles, {self.bytesPerTile:,} B/tile, {self.clockFrequency / 1e6:,.0f} MHz>"
        )


def _target_detail(column: str, doc: str) -> property:
    return property(lambda self: self._row.get(column, 0) or 0, doc=doc + " Returns 0 if not present.")


for _name, _column in {
    "minSyncDelay": "min_sync_delay",
    "supervisorInstrFetchDelay": "supervisor_instr_fetch_delay",
    "interleavedMemoryStart": "interleaved_memory_start",
    "tileMemoryBaseAddress": "tile_memory_base_address",
    "tilesPerSuperTile": "tiles_per_super_tile",
    "numWorkerContexts": "num_worker_contexts",
    "exchangeBytesPerCycle": "exchange_bytes_per_cycle",
    "memcpyBytesPerCycle": "memcpy_bytes_per_cycle",
    "instructionBytes": "instruction_bytes",
    "globalSyncCycles": "global_sync_cycles",
    "globalExchangePacketBytes": "global_exchange_packet_bytes",
    "tileLocalSyncSyncDelay": "tile_local_sync_sync_delay",
    "tileLocalSyncExitDelay": "tile_local_sync_exit_delay",
    "numStrideBits": "num_stride_bits",
    "dataPathWidth": "data_path_width",
    "fp8ConvUnitMaxPipelineDepth": "fp8_conv_unit_max_pipeline_depth",
    "fp16ConvUnitMaxPipelineDepth": "fp16_conv_unit_max_pipeline_depth",
    "fp32ConvUnitMaxPipelineDepth": "fp32_conv_unit_max_pipeline_depth",
    "fp8ConvUnitInputLoadElemsPerCycle": "fp8_conv_unit_input_load_elems_per_cycle",
    "fp16ConvUnitInputLoadElemsPerCycle": "fp16_conv_unit_input_load_elems_per_cycle",
    "fp32ConvUnitInputLoadElemsPerCycle": "fp32_conv_unit_input_load_elems_per_cycle",
    "fp16InFp16OutConvUnitsPerTile": "fp16_in_fp16_out_conv_units_per_tile",
    "fp16InFp32OutConvUnitsPerTile": "fp16_in_fp32_out_conv_units_per_tile",
    "fp32InFp32OutConvUnitsPerTile": "fp32_in_fp32_out_conv_units_per_tile",
    "fp8InFp16OutConvUnitsPerTile": "fp8_in_fp16_out_conv_units_per_tile",
    "convUnitCoeffLoadBytesPerCycle": "conv_unit_coeff_load_bytes_per_cycle",
    "workerInstrFetchDelay": "worker_instr_fetch_delay",
    "maxImmediateOffsetInRunInstr": "max_immediate_offset_in_run_instr",
    "rptCountMax": "rpt_count_max",
    "atomicStoreGranularity": "atomic_store_granularity",
}.items():
    setattr(Target, _name, _target_detail(_column, _name + "."))


class Graph:
    """Basic counts of the graph (libpva Graph)."""

    __slots__ = ("_row", "_reader")

    def __init__(self, row: dict, reader: ProfileReader) -> None:
        self._row = row
        self._reader = reader

    __reduce_ex__ = refuse_pickle

    numComputeSets = property(lambda self: self._row["num_compute_sets"], doc="Number of compute sets.")
    numEdges = property(lambda self: self._row["num_edges"], doc="Number of edges.")
    numVars = property(lambda self: self._row["num_vars"], doc="Number of variables.")
    numVertices = property(lambda self: self._row["num_vertices"], doc="Number of vertices.")

    @property
    def optimisationMetrics(self) -> dict[str, float]:
        """Internal metrics of the graph optimisations: a map from strings to floats."""
        return {name: float(value) for name, value in self._reader.optimisation_metrics()}

    def __repr__(self) -> str:
        return (
            f"<Graph {self.numVertices:,} vertices, {self.numEdges:,} edges, {self.numVars:,} variables, "
            f"{self.numComputeSets:,} compute sets>"
        )


class Replica:
    """One replica of the graph."""

    __slots__ = ("_c", "_id")

    def __init__(self, compilation: CompilationReport, replica_id: int) -> None:
        self._c = compilation
        self._id = replica_id

    @property
    def replicaId(self) -> int:
        """The replica id."""
        return self._id

    @property
    def ipus(self) -> PvaList:
        """The IPUs of this replica."""
        per = self._c.target.ipusPerReplica
        return PvaList(self._c._ipus[self._id * per : (self._id + 1) * per])

    def __repr__(self) -> str:
        per = self._c.target.ipusPerReplica
        return f"<Replica {self._id}: IPUs {self._id * per}..{(self._id + 1) * per - 1}>"


class Tile:
    """One tile (libpva Tile)."""

    __slots__ = ("_c", "tileId")

    def __init__(self, compilation: CompilationReport, tile_id: int) -> None:
        self._c = compilation
        self.tileId = tile_id

    @property
    def memory(self) -> Memory:
        """Memory use of this tile (the same on every replica)."""
        return self._c._memories[self.tileId]

    @property
    def relativeSyncDelay(self) -> int:
        """Sync delay relative to the target's minimum, in cycles."""
        return self._c._tile_columns[0][self.tileId]

    @property
    def clockFrequency(self) -> float:
        """Tile clock in Hz."""
        return self._c._tile_columns[1][self.tileId]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Tile) and other._c is self._c and other.tileId == self.tileId

    def __hash__(self) -> int:
        return hash(("Tile", self.tileId))

    def __repr__(self) -> str:
        per_ipu = self._c.target.tilesPerIpu
        return f"<Tile {self.tileId} (IPU {self.tileId // per_ipu}, tile {self.tileId % per_ipu})>"


# -- vertices and compute sets --------------------------------------------------------------


class VertexType:
    """A vertex type (libpva VertexType)."""

    class Source(PvaEnum):
        """How the vertex type is implemented."""

        Asm = 0
        CPlusPlus = 1
        Unknown = 2

    __slots__ = ("_id", "name", "size", "_source")

    def __init__(self, vertex_type_id: int, name: str, size: int, source: str) -> None:
        self._id = vertex_type_id
        self.name = name
        self.size = size
        self._source = source

    @property
    def source(self) -> VertexType.Source:
        """How the vertex type is implemented."""
        return VertexType.Source.parse(self._source)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, VertexType) and other._id == self._id and other.name == self.name

    def __hash__(self) -> int:
        return hash(("VertexType", self._id))

    def __repr__(self) -> str:
        return f"<VertexType {self.name} ({self.size} B)>"


class VertexInstances:
    """The instances of one vertex type in a compute set (libpva VertexInstances)."""

    __slots__ = ("_c", "_type", "count", "estimatedCycles", "_count_row")

    def __init__(self, compilation: Any, vertex_type: int, count: int, estimated_cycles: int, count_row: Any) -> None:
        self._c = compilation
        self._type = vertex_type
        self.count = count
        self.estimatedCycles = estimated_cycles
        self._count_row = count_row

    @property
    def type(self) -> VertexType:
        """The vertex type."""
        return self._c._vertex_type(self._type)

    @property
    def countByTile(self) -> TileVector:
        """Instances on each tile; empty if not recorded."""
        name, row = "vertex_count_by_tile", self._count_row
        return self._c._context.vectors.get((name, row), lambda: self._c._reader.matrix_row(name, row))

    def __repr__(self) -> str:
        return f"<VertexInstances {self.count:,} x {self.type.name}>"


class ComputeSet:
    """A compute set (libpva ComputeSet)."""

    __slots__ = ("_c", "_id", "name", "_estimate_row", "_vertices")

    def __init__(self, compilation: CompilationReport, cs_id: int, name: str, estimate_row: Any) -> None:
        self._c = compilation
        self._id = cs_id
        self.name = name
        self._estimate_row = estimate_row
        self._vertices: list[VertexInstances] | None = None

    @property
    def vertices(self) -> PvaList:
        """The vertex instances of this compute set, one entry per vertex type."""
        if self._vertices is None:
            rows = self._c._reader.compute_set_vertices(self._id)
            self._vertices = [VertexInstances(self._c, *row) for row in rows]
        return PvaList(self._vertices)

    @property
    def estimatedCyclesByTile(self) -> TileVector:
        """Estimated cycles on each tile; empty if estimates are unavailable."""
        name, row = "compute_set_estimated_cycles_by_tile", self._estimate_row
        return self._c._context.vectors.get((name, row), lambda: self._c._reader.matrix_row(name, row))

    @property
    def vars(self) -> PvaList:
        """The lowered variables the compute set uses, by id."""
        rows = self._c._reader.lowered_variables_of_compute_set(self._id)
        return lowered_variables_from_rows(self._c.loweredVariables, rows)

    @property
    def varIds(self) -> PvaList:
        """The ids of the lowered variables the compute set uses, ascending."""
        return PvaList(self._c._reader.compute_set_variable_ids(self._id))

    @property
    def debugContexts(self) -> PvaList:
        """The debug contexts of the compute set; may be empty (always without debug information)."""
        return self._c._context.debug_contexts_of("compute_set", self._id)

    def vertexCountArray(self) -> np.ndarray:
        """Vertices of this compute set on each tile of a replica, all types together (pva addition)."""
        rows = [v._count_row for v in self.vertices if v._count_row is not None]
        return self._c._sum_vertex_rows(rows)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ComputeSet) and other._c is self._c and other._id == self._id

    def __hash__(self) -> int:
        return hash(("ComputeSet", self._id))

    def __repr__(self) -> str:
        return f"<ComputeSet {self._id} {self.name!r}>"


# -- the report -----------------------------------------------------------------------------

#: memoryArray fields: tile.memory attribute paths and their memory_by_tile columns.
#: Variables looked up by id one by one before every variable is read at once.
_VARIABLES_ASKED = 256
#: Tiles asked for their always-live variables one by one before every tile's are read at once.
_ALWAYS_LIVE_TILES_ASKED = 16


class CompilationReport:
    """Information known at the end of graph compilation (libpva CompilationReport)."""

    def __init__(self, reader: ProfileReader, report: Any) -> None:
        self._reader = reader
        self._report = report
        self._always_live_by_tile: dict[int, list] | None = None
        self._always_live_asked: set[int] = set()
        self._variables_asked: dict[int, Variable] = {}
        self._context = context = ReportContext(reader, report, lambda: self.target, Tile, IPU)
        context.install(
            program_table=lambda: ProgramTable(context),
            compute_sets=lambda: self._compute_sets,
            lowered_variables=lambda: LoweredVariables(context),
            debug_info=lambda: self._debug_info,
            variable=self._variable,
            sized_variables=self._sized_variables,
            category=self._category,
        )

    __reduce_ex__ = refuse_pickle

    def __repr__(self) -> str:
        if self._reader.file.closed:
            return "<CompilationReport (closed)>"
        t = self.target
        return (
            f"<CompilationReport {t.numIPUs} IPU(s), {t.numTiles:,} tiles, "
            f"{self.graph.numComputeSets:,} compute sets, {len(self._program_table.all):,} programs>"
        )

    def _repr_html_(self) -> str:
        from .notebook import compilation_html  # how a notebook shows the compilation report

        return compilation_html(self)

    # -- target, graph and hardware --

    @functools.cached_property
    def target(self) -> Target:
        """The target hardware."""
        return Target(self._reader.target)

    @functools.cached_property
    def graph(self) -> Graph:
        """Counts of the graph."""
        return Graph(self._reader.graph, self._reader)

    @functools.cached_property
    def _tiles(self) -> list[Tile]:
        return [Tile(self, t) for t in range(self.target.numTiles)]

    @property
    def tiles(self) -> PvaList:
        """Every tile of the target, by tile id (all replicas)."""
        return PvaList(self._tiles)

    @functools.cached_property
    def _ipus(self) -> list[IPU]:
        return [IPU(self, i) for i in range(self.target.numIPUs)]

    @property
    def ipus(self) -> PvaList:
        """Every IPU of the target, by IPU id."""
        return PvaList(self._ipus)

    @functools.cached_property
    def _replicas(self) -> list[Replica]:
        return [Replica(self, r) for r in range(self.target.numReplicas)]

    @property
    def replicas(self) -> PvaList:
        """Every replica."""
        return PvaList(self._replicas)

    @functools.cached_property
    def _compute_sets(self) -> list[ComputeSet]:
        rows = self._reader.compute_sets()
        for index, row in enumerate(rows):
            if row[0] != index:
                raise InconsistentReportError(
                    f"{self._reader.path!r}: compute set ids must be 0..{len(rows) - 1}, found id {row[0]} "
                    f"at position {index}",
                    self._reader.path,
                )
        return [ComputeSet(self, *row) for row in rows]

    @property
    def computeSets(self) -> PvaList:
        """Every compute set, indexed by compute set id."""
        return PvaList(self._compute_sets)

    @property
    def compilationParameters(self) -> PvaList:
        """Options used during compilation, as (name, value) engine options."""
        return PvaList(EngineOption(n, v) for n, v in self._reader.compilation_parameters())

    @property
    def targetParameters(self) -> PvaList:
        """Parameters describing the target, as (name, value) engine options."""
        return PvaList(EngineOption(n, v) for n, v in self._reader.target_parameters())

    @property
    def timestamp(self) -> str:
        """Date and time of compilation; empty if not recorded."""
        return self._reader.metadata.get("compilation_timestamp", "")

    # -- programs (see programs.py) --

    @property
    def _program_table(self) -> ProgramTable:
        return self._context.program_table

    @property
    def programs(self) -> PvaList:
        """Every program, nested ones included, in id order."""
        return PvaList(self._program_table.all)

    @property
    def controlPrograms(self) -> PvaList:
        """The control programs, in order."""
        return self._program_table.list_of(self._reader.control_program_ids())

    @property
    def functions(self) -> PvaList:
        """The functions (programs called by Call programs), in order."""
        return self._program_table.list_of(self._reader.function_program_ids())

    # -- variables and liveness --

    @property
    def variables(self) -> PvaList:
        """Every unlowered variable, by id."""
        return PvaList(self._variables_by_id.values())

    @functools.cached_property
    def loweredVariables(self) -> LoweredVariables:
        """Lowered variables by tile and by unlowered variable."""
        return self._context.lowered_variables

    @property
    def alwaysLiveVariables(self) -> PvaList:
        """Always-live variables with their size summed over the tiles of a replica, by name."""
        rows = self._reader.always_live_bytes_by_variable()
        return self._sized_variables((var, None, size) for var, size in rows)

    def alwaysLiveVariablesForTile(self, tileId: Any) -> PvaList:
        """Always-live variables on one tile (an id or a Tile) with their size there, by name."""
        tile = self._context.replica_tile(tileId)
        return self._sized_variables((var, None, size) for var, size in self._always_live_rows(tile))

    def _always_live_rows(self, tile: int) -> list:
        """(variable, bytes) always live on a tile: asked tile by tile at first, then, once a loop
        has asked for `_ALWAYS_LIVE_TILES_ASKED` tiles, read for every tile at once."""
        by_tile = self._always_live_by_tile
        if by_tile is None:
            self._always_live_asked.add(tile)
            if len(self._always_live_asked) <= _ALWAYS_LIVE_TILES_ASKED:
                return self._reader.always_live_variables_on_tile(tile)
            by_tile = self._always_live_by_tile = {}
            for row_tile, var, size in self._reader.always_live_variables_by_tile():
                by_tile.setdefault(row_tile, []).append((var, size))
        return by_tile.get(tile, [])

    @functools.cached_property
    def _liveness_steps(self) -> list[LivenessProgramStep]:
        rows = self._reader.liveness_steps()
        for index, row in enumerate(rows):
            if row[0] != index:
                raise InconsistentReportError(
                    f"{self._reader.path!r}: liveness step ids must be 0..{len(rows) - 1}, found id {row[0]} "
                    f"at position {index}",
                    self._reader.path,
                )
        return [LivenessProgramStep(self._context, *row) for row in rows]

    @property
    def livenessProgramSteps(self) -> PvaList:
        """Program steps with liveness information, depth first."""
        return PvaList(self._liveness_steps)

    @property
    def tilesWithLivenessInfo(self) -> PvaList:
        """Tiles whose per-tile liveness LivenessProgramStep.notAlwaysLiveMemoryForTile gives."""
        tiles = self._tiles
        return PvaList(
            tiles[t]
            for t in sorted(t for t in self._context.liveness_tiles if isinstance(t, int))
            if 0 <= t < len(tiles)
        )

    @property
    def allocationOrderByTile(self) -> PvaList:
        """For each tile of a replica, the ids of its lowered variables in allocation order."""
        order: list[list[int]] = [[] for _ in range(self.target.tilesPerReplica)]
        for tile, var_id in self._reader.allocation_order():
            if not isinstance(tile, int) or not 0 <= tile < len(order):
                raise InconsistentReportError(
                    f"{self._reader.path!r}: lowered variable {var_id} is on tile {tile!r}; a replica has "
                    f"{len(order)} tiles",
                    self._reader.path,
                )
            order[tile].append(var_id)
        return PvaList(PvaList(ids) for ids in order)

    # -- debug information --

    @functools.cached_property
    def _debug_info(self) -> DebugInfo | None:
        path = getattr(self._report, "_debug_path", None)
        return None if path is None else DebugInfo(path, self._context)

    @property
    def isDebugInfoPresent(self) -> bool:
        """True if the report was opened with debug information (debug.cbor)."""
        return self._debug_info is not None

    def _require_debug(self) -> DebugInfo:
        info = self._debug_info
        if info is None:
            path = self._reader.path
            raise NotPresentError(
                f"{path!r}: no debug information; open the report with openReport(profile, 'debug.cbor')", path
            )
        return info

    def debugContexts(self, filter: Any = None) -> PvaList:
        """Debug contexts selected by a DebugContext.Filter (or a layer name, or withoutParent), by id.

        Raises NotPresentError if isDebugInfoPresent is False.
        """
        info = self._require_debug()
        chosen = filter if isinstance(filter, DebugContext.Filter) else DebugContext.Filter(filter)
        return info.select(chosen)

    def debugContext(self, id: int) -> DebugContext:
        """The debug context with an id; raises NotPresentError if isDebugInfoPresent is False."""
        return self._require_debug().context(id)

    # -- numpy views (pva additions) --

    def memoryArray(self, field: str = "total.includingGaps") -> np.ndarray:
        """One memory figure of every tile as a uint64 array indexed by tile id (pva addition).

        `field` is the path below ``tile.memory``: ``"total.includingGaps"`` (default),
        ``"total.excludingGaps"``, ``"interleaved.*"``, ``"nonInterleaved.*"``, ``"overflowed.*"``,
        ``"alwaysLiveBytes"`` or ``"notAlwaysLiveBytes"``. The result equals
        ``[t.memory.<field> for t in tiles]``.
        """
        column = MEMORY_FIELDS.get(field)
        if column is None:
            raise ValueError(f"unknown memory field {field!r}; expected one of {', '.join(MEMORY_FIELDS)}")
        return self._per_tile(np.asarray(self._memory.columns[column], dtype=np.uint64))

    def categoryMemoryArray(self, category: str | None = None, field: str = "total") -> Any:
        """Memory of a category on every tile as a uint64 array indexed by tile id (pva addition).

        `field` is the path below ``tile.memory.category.<category>``: ``"total"`` (default),
        ``"nonInterleaved.overlapped"``, ``"interleaved.total"``, ... Without a category, a dict
        of every category's array.
        """
        columns = CATEGORY_FIELDS.get(field)
        if columns is None:
            raise ValueError(f"unknown category field {field!r}; expected one of {', '.join(CATEGORY_FIELDS)}")
        if category is None:
            return {
                name: self.categoryMemoryArray(name, field)
                for name in self._memory.category_names
                if isinstance(name, str)
            }
        if category not in CATEGORIES and category not in self._memory.category_matrix[1]:
            raise ValueError(f"unknown memory category {category!r}; expected one of {', '.join(CATEGORIES)}")
        matrix, bases = self._memory.category_matrix
        base = bases.get(category)
        if matrix is None or base is None:
            return read_only(np.zeros(self.target.numTiles, dtype=np.uint64))
        values = matrix[:, [base + c for c in columns]].sum(axis=1, dtype=np.uint64)
        return self._per_tile(values)

    def notAlwaysLiveMemoryArray(self, start: int | None = None, stop: int | None = None) -> np.ndarray:
        """Not-always-live bytes of liveness steps start..stop-1 on every tile of a replica, as a
        (steps, tiles) uint64 array (pva addition): row k, column t is
        ``livenessProgramSteps[start + k].notAlwaysLiveMemoryForTile(t).bytes`` for tiles with
        liveness information. It holds 8 bytes per step and tile: ask for a range on a large report.
        """
        count = len(self._liveness_steps)
        first, last, _ = slice(start, stop).indices(count)
        last = max(first, last)
        matrix = self._context.liveness_index.matrix(first, last, self.target.tilesPerReplica)
        return read_only(matrix.astype(np.uint64))

    def vertexCountArray(self) -> np.ndarray:
        """Vertices on every tile over all compute sets, as a uint64 array by tile id (pva addition)."""
        rows = self._reader.vertex_count_rows()
        return self._per_tile(self._sum_vertex_rows(rows))

    def _sum_vertex_rows(self, rows: Any) -> np.ndarray:
        total = np.zeros(self.target.tilesPerReplica, dtype=np.uint64)
        matrix = self._reader.matrix("vertex_count_by_tile")
        if not rows:
            return total
        if matrix is None:
            raise InconsistentReportError(
                f"{self._reader.path!r}: compute_set_vertices refers to rows of vertex_count_by_tile, "
                f"which the report does not have",
                self._reader.path,
            )
        rows = sorted(rows)
        if (
            len(rows) == matrix.num_rows
            and rows[0] == 0
            and rows[-1] == matrix.num_rows - 1
            and len(set(rows)) == len(rows)
        ):
            return matrix.sum_rows()
        for start in range(0, len(rows), 4096):
            total += matrix.take(rows[start : start + 4096]).sum(axis=0, dtype=np.uint64)
        return total

    def _per_tile(self, replica_values: np.ndarray) -> np.ndarray:
        """Values of one replica's tiles repeated for every replica."""
        replicas = self.target.numReplicas
        values = np.asarray(replica_values, dtype=np.uint64)
        return read_only(np.tile(values, replicas) if replicas > 1 else values.copy())

    # -- helpers shared by the lightweight objects --

    @functools.cached_property
    def _variables_by_id(self) -> dict[int, Variable]:
        return {i: Variable(self._context, i, name) for i, name in self._reader.variables()}

    def _variable(self, var_id: int) -> Variable:
        if var_id < 0:
            return Variable(self._context, var_id, self._context.artificial_variable_name(var_id))
        if "_variables_by_id" in self.__dict__ or len(self._variables_asked) >= _VARIABLES_ASKED:
            found = self._variables_by_id.get(var_id)
        else:  # a few variables asked for: by id, without reading every variable's name
            found = self._variables_asked.get(var_id)
            if found is None:
                name = self._reader.variable_name(var_id)
                if name is not None:
                    found = self._variables_asked[var_id] = Variable(self._context, var_id, name)
        if found is None:
            raise InconsistentReportError(
                f"{self._reader.path!r}: variable {var_id} is referenced but not in table variables", self._reader.path
            )
        return found

    def _sized_variables(self, rows: Any) -> PvaList:
        """VariableSize objects for (unlowered id or None, lowered name, size) rows, by name then id."""
        out = []
        artificial = None
        for var_id, name, size in rows:
            if var_id is None:
                if artificial is None:
                    artificial = self._context.artificial_ids
                if name not in artificial:
                    raise InconsistentReportError(
                        f"{self._reader.path!r}: expected a variable id, or the name of an artificial variable "
                        f"({', '.join(artificial) or 'none'}), found id NULL and name {name!r}",
                        self._reader.path,
                    )
                out.append(VariableSize(self._context, artificial[name], name, size))
            elif not isinstance(var_id, int):
                raise InconsistentReportError(
                    f"{self._reader.path!r}: expected an integer variable id, found {var_id!r}", self._reader.path
                )
            else:
                out.append(VariableSize(self._context, var_id, self._variable(var_id).name, size))
        out.sort(key=lambda v: (v.name, v._id))
        return PvaList(out)

    @functools.cached_property
    def _categories_by_id(self) -> dict[int, VariableCategory]:
        return {i: VariableCategory(i, name, description) for i, name, description in self._reader.category_rows()}

    def _category(self, category_id: int) -> VariableCategory:
        found = self._categories_by_id.get(category_id)
        if found is None:
            raise InconsistentReportError(
                f"{self._reader.path!r}: category {category_id} is referenced but not in var_categories",
                self._reader.path,
            )
        return found

    @functools.cached_property
    def _ipu_architectures(self) -> list[IPU.Architecture]:
        default = self.target.architecture
        found = [default] * self.target.numIPUs
        for ipu, architecture in self._reader.ipu_architectures():
            if isinstance(ipu, int) and 0 <= ipu < len(found):
                found[ipu] = IPU.Architecture.parse(architecture)
        return found

    @functools.cached_property
    def _memory(self) -> MemoryTables:
        return MemoryTables(self._reader, self.target.tilesPerReplica, self._vertex_type)

    @functools.cached_property
    def _memories(self) -> list[Memory]:
        tables = self._memory
        per_replica = [Memory(tables, t) for t in range(self.target.tilesPerReplica)]
        return per_replica * self.target.numReplicas

    @functools.cached_property
    def _tile_columns(self) -> tuple[list[int], list[float]]:
        count = self.target.numTiles
        delays = [0] * count
        clocks = [self.target.clockFrequency] * count
        for tile, delay, clock in self._reader.tile_clocks():
            if not isinstance(tile, int) or not 0 <= tile < count:
                raise InconsistentReportError(
                    f"{self._reader.path!r}: table tiles has tile {tile!r}; the target has {count} tiles",
                    self._reader.path,
                )
            delays[tile] = delay
            clocks[tile] = float(clock)
        return delays, clocks

    @functools.cached_property
    def _vertex_types(self) -> dict[int, VertexType]:
        return {row[0]: VertexType(*row) for row in self._reader.vertex_types()}

    def _vertex_type(self, vertex_type_id: int) -> VertexType:
        found = self._vertex_types.get(vertex_type_id)
        if found is None:
            raise InconsistentReportError(
                f"{self._reader.path!r}: vertex type {vertex_type_id} is referenced but not defined", self._reader.path
            )
        return found
