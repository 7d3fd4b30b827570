"""Names shared by the legacy importer and exporter: how legacy v1 names map to profile.pop."""

from __future__ import annotations

from ..pop.categories import CATEGORIES  # noqa: F401  (re-exported)
from ..pop.categories import MEMORY_REGIONS as REGIONS  # noqa: F401  (re-exported)
from ..pop.schema import profile_schema

#: extras.source of values kept from each legacy document.
SOURCE_GRAPH = "legacy-graph-profile"
SOURCE_EXECUTION = "legacy-execution-profile"

#: target.type (legacy) -> target.type (profile.pop).
TARGET_TYPES = {"CPU": "Cpu", "IPU": "Ipu", "IPU_MODEL": "IpuModel"}
TARGET_TYPES_BACK = {v: k for k, v in TARGET_TYPES.items()}

#: Program and step type tags (legacy) -> Program.Type names (profile.pop).
PROGRAM_TYPES = {
    "Sequence": "Sequence",
    "OnTileExecute": "OnTileExecute",
    "Repeat": "Repeat",
    "RepeatWhile": "RepeatWhile",
    "RepeatWhileTrue": "RepeatWhile",
    "RepeatWhileFalse": "RepeatWhile",
    "If": "IfElse",
    "IfElse": "IfElse",
    "Switch": "OnTileSwitch",
    "SetLocalConsensusFromVar": "SetLocalConsensusFromVar",
    "Sync": "Sync",
    "DoExchange": "DoExchange",
    "GlobalExchange": "GlobalExchange",
    "StreamCopy": "StreamCopyMid",
    "WriteUndef": "WriteUndef",
    "Call": "Call",
    "CopySharedStructure": "Unknown",
    "Execute": "Execute",
    "Copy": "Copy",
}
#: Program.Type names whose legacy tag differs from the name (the others are written as they are).
PROGRAM_TYPES_BACK = {
    "StreamCopyMid": "StreamCopy",
    "OnTileSwitch": "Switch",
    "IfElse": "IfElse",
    "RepeatWhile": "RepeatWhile",
    "Unknown": "Unknown",
}

#: Every Program.Type name of the format (programs.type may hold any of them).
PVA_PROGRAM_TYPES = frozenset(
    {
        "Unknown",
        "Sequence",
        "OnTileExecute",
        "Repeat",
        "RepeatWhile",
        "OnTileSwitch",
        "OnEveryTileSwitch",
        "IfElse",
        "DoExchange",
        "GlobalExchange",
        "StreamCopyBegin",
        "StreamCopyMid",
        "StreamCopyEnd",
        "WriteUndef",
        "Sync",
        "SetLocalConsensus",
        "SetLocalConsensusFromVar",
        "GetGlobalConsensus",
        "Sans",
        "Call",
        "SyncAns",
        "CodeCopy",
        "Block",
        "Execute",
        "UnloweredWhile",
        "UnloweredExecuteDst",
        "UnloweredSwitch",
        "OnTileCopy",
        "Copy",
        "CrossReplicaCopy",
        "StreamCopy",
        "InstrumentationPlaceholder",
    }
)

#: Step types of the legacy simulation, in their documented spelling.
STEP_TYPES = ("OnTileExecute", "StreamCopy", "CopySharedStructure", "Sync", "DoExchange", "GlobalExchange")

#: The exchange family each exchange program type uses, and the step field naming its exchange.
EXCHANGE_FAMILY = {"DoExchange": "internal", "GlobalExchange": "external", "StreamCopyMid": "host"}
STEP_EXCHANGE_FIELD = {"internal": "exchange", "external": "externalExchange", "host": "hostExchange"}

#: Legacy exchange sections and the per-tile arrays each holds, with the program vector kind.
EXCHANGE_SECTIONS = {
    "internal": (
        "exchanges",
        {
            "bytesReceivedByTile": "bytes_received",
            "bytesSentByTile": "bytes_sent",
            "cyclesByTile": "estimated_cycles",
            "codeBytesByTile": "code_bytes",
        },
    ),
    "external": (
        "externalExchanges",
        {
            "bytesReceivedByTile": "bytes_received",
            "bytesSentByTile": "bytes_sent",
            "estimatedCyclesByTile": "estimated_cycles",
        },
    ),
    "host": (
        "hostExchanges",
        {
            "bytesReceivedByTile": "bytes_received",
            "bytesSentByTile": "bytes_sent",
            "estimatedCyclesByTile": "estimated_cycles",
        },
    ),
}
#: Measured exchange cycles of the execution profile, by family.
EXCHANGE_CYCLES = {"external": "externalExchangeCycles", "host": "hostExchangeCycles"}

OVERLAPS = ("nonOverlapped", "overlapped")

#: memory.byTile keys -> memory_by_tile columns.
BY_TILE = {
    "total": "total",
    "totalIncludingGaps": "total_including_gaps",
    "interleaved": "interleaved",
    "interleavedIncludingGaps": "interleaved_including_gaps",
    "nonInterleaved": "non_interleaved",
    "nonInterleavedIncludingGaps": "non_interleaved_including_gaps",
    "overflowed": "overflowed",
    "overflowedIncludingGaps": "overflowed_including_gaps",
}
#: memory.byComputeSet / byVertexType keys -> columns of compute_set_memory / vertex_memory.
VERTEX_MEMORY = {
    "codeBytes": "code_bytes",
    "copyPtrBytes": "copy_ptr_bytes",
    "descriptorBytes": "descriptor_bytes",
    "edgePtrBytes": "edge_ptr_bytes",
    "paddingBytes": "padding_bytes",
    "vertexDataBytes": "vertex_data_bytes",
}

#: profilerMode -> (instrumentation_compute, instrumentation_external_exchange) metadata.
PROFILER_MODES = {
    "NONE": ("Off", "Off"),
    "CPU": ("Off", "Off"),
    "IPU_MODEL": ("Off", "Off"),
    "COMPUTE_SETS": ("Tile", "Off"),
    "SINGLE_TILE_COMPUTE_SETS": ("Device", "Off"),
    "VERTICES": ("Vertex", "Off"),
    "EXTERNAL_EXCHANGES": ("Off", "Tile"),
    "HOST_EXCHANGES": ("Off", "Tile"),
}

#: tileCycles keys -> cycle_totals columns.
TILE_CYCLES = {
    "activeCompute": "active_compute",
    "compute": "compute",
    "doExchange": "internal_exchange",
    "globalExchange": "inter_ipu_exchange",
    "streamCopy": "stream_copy",
    "sync": "sync",
}


def guess_architecture(tiles_per_ipu: int, bytes_per_tile: int, clock: float) -> str:
    """The IPU architecture a legacy target most likely had (legacy profiles do not say)."""
    if tiles_per_ipu == 1216 or bytes_per_tile == 262144:
        return "Ipu1"
    if tiles_per_ipu == 1472 or bytes_per_tile == 638976:
        return "Ipu21" if clock >= 1.75e9 else "Ipu2"
    return "Unknown"


#: Metadata of a report that a v1 profile has no place for; the export carries it in $.pva.metadata.
CARRIED_METADATA = (
    "poplar_version",
    "producer",
    "producer_version",
    "created",
    "program_name",
    "compilation_timestamp",
    "debug_info_id",
    "instrumentation_compute",
    "instrumentation_external_exchange",
    "report_unstable",
)

#: Columns of cycle_totals (besides run and ipu) the export carries in $.pva.cycleTotals when there are runs.
CYCLE_TOTAL_COLUMNS = profile_schema().tables["cycle_totals"].column_names[2:]
