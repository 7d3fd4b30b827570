"""Legacy (v1) Poplar graph and execution profiles built for tests, following the Poplar user guide.

`complete_graph_profile` fills every section and key the documentation describes; `execution_profile`
builds the execution profile of any profilerMode. Values are random but consistent (array lengths,
indices into programs, compute sets, exchanges and vertex types).
"""

from __future__ import annotations

import numpy as np

PROFILER_MODES = (
    "NONE",
    "CPU",
    "IPU_MODEL",
    "COMPUTE_SETS",
    "SINGLE_TILE_COMPUTE_SETS",
    "VERTICES",
    "EXTERNAL_EXCHANGES",
    "HOST_EXCHANGES",
)
CATEGORY_NAMES = ("controlCode", "variable", "vertexCode", "stack", "internalExchangeCode", "vertexInstanceState")


def _vec(rng, size, high=5000):
    return [int(v) for v in rng.integers(0, high, size=size)]


def _mat(rng, rows, size, high=5000):
    return [_vec(rng, size, high) for _ in range(rows)]


def complete_graph_profile(*, num_ipus: int = 2, tiles_per_ipu: int = 4, seed: int = 3) -> dict:
    """A graph profile with every documented section and key."""
    rng = np.random.default_rng(seed)
    tiles = num_ipus * tiles_per_ipu
    vertex_types = ["popops::ScaledAddSupervisor<float,float,true>", "poplar_rt::ShortMemcpy", "SumVertex<float>"]
    cs_names = ["init/zero", "layer1/fwd", "layer1/bwd", "Copy_a_to_b"]
    vertex_counts = [[2, 1], [5], [1, 3], [4]]
    vertex_type_ids = [[0, 1], [2], [0, 2], [1]]
    by_type = []
    for counts, types in zip(vertex_counts, vertex_type_ids):
        row = [0] * len(vertex_types)
        for c, t in zip(counts, types):
            row[t] = 11 * c + t
        by_type.append(row)
    cycles = _mat(rng, len(cs_names), tiles, 900)
    active = [[v // 3 for v in row] for row in cycles]
    programs = [
        {"children": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11], "type": "Sequence"},  # 0
        {"computeSet": 0, "type": "OnTileExecute"},  # 1
        {
            "exchange": 0,
            "memoryByInstruction": {
                "delay": 24,
                "exchange": 0,
                "other": 0,
                "receiveAddress": 16,
                "receiveFormat": 0,
                "receiveMux": 32,
                "send": 8,
                "sendWithPutAddress": 0,
                "sendWithPutFormat": 0,
                "sendWithPutMux": 0,
                "total": 80,
            },
            "name": "/ExchangePre",
            "type": "DoExchange",
        },  # 2
        {"computeSet": 1, "name": "layer1/fwd", "type": "OnTileExecute"},  # 3
        {"exchange": 0, "name": "progIdCopy/GlobalPre/GlobalExchange", "type": "GlobalExchange"},  # 4
        {"exchange": 1, "type": "StreamCopy"},  # 5
        {"children": [13], "type": "Repeat"},  # 6
        {"children": [14], "type": "RepeatWhileTrue"},  # 7
        {"children": [15, 16], "type": "If"},  # 8
        {"target": 0, "type": "Call"},  # 9
        {"type": "Sync"},  # 10
        {"type": "WriteUndef"},  # 11
        {"children": [15], "name": "function", "type": "Sequence"},  # 12
        {"computeSet": 2, "type": "OnTileExecute"},  # 13
        {"type": "SetLocalConsensusFromVar"},  # 14
        {"computeSet": 3, "type": "OnTileExecute"},  # 15
        {"children": [], "type": "Switch"},  # 16
        {"exchange": 1, "name": "/ExchangePost", "type": "DoExchange"},  # 17
    ]
    categories = {}
    for name in CATEGORY_NAMES:
        entry = {
            region: {"nonOverlapped": _vec(rng, tiles, 3000), "overlapped": _vec(rng, tiles, 200)}
            for region in ("interleaved", "nonInterleaved", "overflowed")
        }
        entry["total"] = [
            sum(
                entry[r][o][t]
                for r in ("interleaved", "nonInterleaved", "overflowed")
                for o in ("nonOverlapped", "overlapped")
            )
            for t in range(tiles)
        ]
        categories[name] = entry
    inter = [
        sum(categories[c]["interleaved"][o][t] for c in categories for o in ("nonOverlapped", "overlapped"))
        for t in range(tiles)
    ]
    non = [
        sum(categories[c]["nonInterleaved"][o][t] for c in categories for o in ("nonOverlapped", "overlapped"))
        for t in range(tiles)
    ]
    over = [
        sum(categories[c]["overflowed"][o][t] for c in categories for o in ("nonOverlapped", "overlapped"))
        for t in range(tiles)
    ]

    def vertex_memory(rows):
        section = {
            key: _mat(rng, rows, tiles, 400)
            for key in (
                "codeBytes",
                "copyPtrBytes",
                "descriptorBytes",
                "edgePtrBytes",
                "paddingBytes",
                "vertexDataBytes",
            )
        }
        section["totalBytes"] = [[sum(section[k][r][t] for k in section) for t in range(tiles)] for r in range(rows)]
        return section

    return {
        "target": {
            "type": "IPU",
            "bytesPerIPU": 638976 * tiles_per_ipu,
            "bytesPerTile": 638976,
            "clockFrequency": 1330000000.0,
            "numIPUs": num_ipus,
            "tilesPerIPU": tiles_per_ipu,
            "numTiles": tiles,
            "totalMemory": 638976 * tiles,
            "relativeSyncDelayByTile": _vec(rng, tiles_per_ipu, 20),
            "minSyncDelay": 17,
        },
        "optimizationInfo": {"cycleEstimateRatio": 0.75, "mergedCopies": 3.0},
        "graph": {"numComputeSets": len(cs_names), "numEdges": 24, "numVars": 111, "numVertices": 16},
        "vertexTypes": {"names": vertex_types, "sizes": [16, 12, 8]},
        "computeSets": {
            "names": cs_names,
            "vertexCounts": vertex_counts,
            "vertexTypes": vertex_type_ids,
            "cycleEstimates": {
                "activeCyclesByTile": active,
                "activeCyclesByVertexType": by_type,
                "cyclesByTile": cycles,
            },
        },
        "exchanges": {
            "bytesReceivedByTile": _mat(rng, 2, tiles),
            "bytesSentByTile": _mat(rng, 2, tiles),
            "codeBytesByTile": _mat(rng, 2, tiles, 300),
            "cyclesByTile": _mat(rng, 2, tiles, 700),
        },
        "externalExchanges": {
            "bytesReceivedByTile": _mat(rng, 1, tiles),
            "bytesSentByTile": _mat(rng, 1, tiles),
            "estimatedCyclesByTile": _mat(rng, 1, tiles, 900),
        },
        "hostExchanges": {
            "bytesReceivedByTile": _mat(rng, 2, tiles),
            "bytesSentByTile": _mat(rng, 2, tiles),
            "estimatedCyclesByTile": _mat(rng, 2, tiles, 900),
        },
        "programs": programs,
        "controlPrograms": [0],
        "functionPrograms": [12],
        "memory": {
            "byTile": {
                "interleaved": inter,
                "interleavedIncludingGaps": [v + 8 for v in inter],
                "nonInterleaved": non,
                "nonInterleavedIncludingGaps": [v + 64 for v in non],
                "overflowed": over,
                "overflowedIncludingGaps": over,
                "total": [a + b + c for a, b, c in zip(inter, non, over)],
                "totalIncludingGaps": [a + b + c + 100 for a, b, c in zip(inter, non, over)],
            },
            "byCategory": categories,
            "byComputeSet": vertex_memory(len(cs_names)),
            "byVertexType": vertex_memory(len(vertex_types)),
            "liveness": {
                "alwaysLive": {"bytesByTile": _vec(rng, tiles, 9000)},
                "notAlwaysLive": {
                    "maxBytesByTile": _vec(rng, tiles, 9000),
                    "byProgram": [
                        {
                            "bytes": 4096,
                            "children": [
                                {"bytes": 1024, "children": [], "program": 1},
                                {
                                    "bytes": 2048,
                                    "children": [{"bytes": 512, "children": [], "program": 13}],
                                    "program": 6,
                                },
                            ],
                            "program": 0,
                        }
                    ],
                },
            },
        },
    }


def execution_profile(graph: dict, mode: str, *, seed: int = 5) -> dict:
    """An execution profile of `mode` for `graph` (complete_graph_profile's program layout)."""
    rng = np.random.default_rng(seed)
    tiles = graph["target"]["numTiles"]
    num_cs = len(graph["computeSets"]["names"])
    doc: dict = {"profilerMode": mode}
    if mode in ("NONE", "CPU"):
        return doc
    if mode == "COMPUTE_SETS":
        doc["computeSetCyclesByTile"] = _mat(rng, num_cs, tiles, 1000)
    elif mode == "SINGLE_TILE_COMPUTE_SETS":
        doc["computeSetCycles"] = _vec(rng, num_cs, 5000)
    elif mode == "VERTICES":
        doc["vertexCycles"] = _vec(rng, 16, 300)
        doc["vertexComputeSet"] = [int(v) for v in rng.integers(0, num_cs, 16)]
        doc["vertexType"] = [int(v) for v in rng.integers(0, len(graph["vertexTypes"]["names"]), 16)]
    elif mode == "EXTERNAL_EXCHANGES":
        doc["externalExchangeCycles"] = _mat(rng, 1, tiles, 2000)
    elif mode == "HOST_EXCHANGES":
        doc["hostExchangeCycles"] = _mat(rng, 2, tiles, 2000)
    doc["programTrace"] = [0, 0]

    def common(program, cycles, start):
        return {
            "activeTileBalance": 0.875,
            "activeTiles": tiles - 1,
            "cycles": cycles,
            "cyclesFrom": start,
            "cyclesTo": start + cycles,
            "program": program,
            "tileBalance": 0.5,
        }

    steps = []
    clock = 0
    for _run in range(2):
        for program, kind in (
            (1, "OnTileExecute"),
            (2, "DoExchange"),
            (3, "OnTileExecute"),
            (None, "Sync"),
            (4, "GlobalExchange"),
            (5, "StreamCopy"),
            (15, "OnTileExecute"),
        ):
            if kind == "Sync":
                steps.append({"syncType": "External", "type": "Sync"})
                continue
            cycles = int(rng.integers(10, 500))
            step = common(program, cycles, clock)
            step["type"] = kind
            name = graph["programs"][program].get("name")
            if name:
                step["name"] = name
            if kind == "OnTileExecute":
                step.update(computeSet=graph["programs"][program]["computeSet"], cyclesOverlapped=3, threadBalance=0.25)
            else:
                step.update(dataBalance=0.625, totalData=int(rng.integers(100, 10000)))
                field = {"DoExchange": "exchange", "GlobalExchange": "externalExchange", "StreamCopy": "hostExchange"}[
                    kind
                ]
                step[field] = graph["programs"][program]["exchange"]
                if kind == "DoExchange":
                    step["cyclesOverlapped"] = 0
            steps.append(step)
            clock += cycles
    doc["simulation"] = {
        "cycles": clock,
        "tileCycles": {
            "activeCompute": 1349,
            "compute": 8094,
            "copySharedStructure": 0,
            "doExchange": 2070,
            "globalExchange": 0,
            "streamCopy": 16,
            "sync": 26238,
        },
        "steps": steps,
    }
    return doc


def write_json(path, document, *, indent=None) -> str:
    """Write a document as JSON (compact like serializeToJSON, or pretty-printed)."""
    import json

    with open(path, "w", encoding="utf-8") as handle:
        json.dump(document, handle, indent=indent)
    return str(path)


def write_cbor(path, document, *, typed_arrays: bool = False) -> str:
    """Write a document as CBOR with the self-describe tag, optionally with RFC 8746 typed arrays."""
    import cbor2

    def convert(value):
        if isinstance(value, dict):
            return {k: convert(v) for k, v in value.items()}
        if isinstance(value, list):
            if typed_arrays and len(value) > 2 and all(type(v) is int and 0 <= v < 2**32 for v in value):
                return cbor2.CBORTag(70, np.asarray(value, dtype="<u4").tobytes())
            return [convert(v) for v in value]
        return value

    with open(path, "wb") as handle:
        handle.write(b"\xd9\xd9\xf7" + cbor2.dumps(convert(document)))
    return str(path)
