"""The compilation object model: target, graph, versions, tiles, IPUs, replicas, memory, compute sets."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_compilation_builder import (  # noqa: F401  (fixture)
    CATEGORY_NAMES,
    COMPUTE_SETS,
    CS_VERTEX_TYPES,
    NUM_IPUS,
    NUM_REPLICAS,
    TILES,
    TILES_PER_IPU,
    VERTEX_TYPES,
    model,
)

import pva
from formats.pop.writer import ProfileWriter
from pva.compilation import CATEGORIES


@pytest.fixture(scope="module")
def report(model):
    with pva.openReport(model.path, model.debug_path) as opened:
        yield opened


@pytest.fixture(scope="module")
def comp(report):
    return report.compilation


@pytest.fixture(scope="module")
def minimal(tmp_path_factory):
    """A report with a target and nothing else."""
    path = tmp_path_factory.mktemp("minimal") / "profile.pop"
    with ProfileWriter(path) as w:
        w.set_target(num_ipus=1, tiles_per_ipu=4, bytes_per_tile=1024, type="Cpu", architecture="Unknown")
    with pva.openReport(path) as opened:
        yield opened


# -- report-level objects --------------------------------------------------------------------


def test_poplar_version(report):
    v = report.poplarVersion
    assert (v.string, v.major, v.minor, v.point, v.packageHash) == ("3.2.0 (8d5b1c2e3f)", 3, 2, 0, "8d5b1c2e3f")
    assert (v.majorVer, v.minorVer, v.pointVer) == (3, 2, 0)
    assert str(v) == "3.2.0 (8d5b1c2e3f)"
    assert repr(v) == "<PoplarVersion '3.2.0 (8d5b1c2e3f)'>"


def test_poplar_version_unparsable_is_zero(minimal):
    v = minimal.poplarVersion
    assert (v.string, v.major, v.minor, v.point, v.packageHash) == ("", 0, 0, 0, "")


def test_profile_report_version(report, minimal):
    v = report.version
    assert (v.major, v.minor, v.point, v.isUnstableFormat) == (1, 0, 0, True)
    assert (v.majorVer, v.minorVer, v.pointVer) == (1, 0, 0)
    assert minimal.version.isUnstableFormat is False
    assert repr(v) == "<ProfileReportVersion 1.0.0 (unstable)>"


def test_instrumentation_settings_and_enums(report, minimal):
    s = report.instrumentationSettings
    Compute = pva.InstrumentationSettings.ComputeInstrumentationLevel
    External = pva.InstrumentationSettings.ExternalExchangeInstrumentationLevel
    assert s.compute == Compute.Vertex and s.externalExchange == External.Tile
    assert minimal.instrumentationSettings.compute == Compute.Off
    assert {m: int(Compute[m]) for m in Compute.__members__} == {
        "Off": 0,
        "Vertex": 1,
        "Tile": 2,
        "Ipu": 3,
        "Device": 4,
        "Unknown": 5,
    }
    assert {m: int(External[m]) for m in External.__members__} == {"Off": 0, "Tile": 1, "Unknown": 2}
    assert repr(Compute.Device) == "<ComputeInstrumentationLevel.Device: 4>"
    assert repr(s) == "<InstrumentationSettings compute=Vertex externalExchange=Tile>"


def test_every_class_is_in_pva_and_pva_core():
    names = [
        "PoplarVersion",
        "ProfileReportVersion",
        "InstrumentationSettings",
        "Graph",
        "Target",
        "VertexInstances",
        "VertexType",
        "Variable",
        "VariableSize",
        "VariableCategory",
        "LoweredVariable",
        "LoweredVariables",
        "LoweredVariableBrief",
        "EquivalenceClass",
        "VertexMemory",
        "NotAlwaysLiveMemory",
        "MemoryOverlap",
        "CategoryMemory",
        "Categories",
        "MemoryWithAndWithoutGaps",
        "Memory",
        "Tile",
        "IPU",
        "Replica",
        "ComputeSet",
        "LivenessProgramStep",
        "CompilationReport",
        "DebugContext",
        "DebugContextLocation",
        "Program",
        "ProgramVisitor",
        "OperationAnalysis",
        "Operation",
        "EngineOption",
        "Report",
        "openReport",
        "NotPresentError",
        "NoSuchObjectError",
    ]
    for name in names:
        assert getattr(pva, name) is getattr(pva.pva_core, name), name
        assert name in pva.__all__, name
    assert pva.DebugContext.Filter is pva.pva_core.DebugContext.Filter


# -- target and graph ------------------------------------------------------------------------


def test_target_members(comp):
    t = comp.target
    assert (t.numIPUs, t.tilesPerIpu, t.numTiles) == (4, 4, 16)
    assert (t.bytesPerTile, t.bytesPerIPU, t.bytesPerIpu, t.totalMemory) == (
        638976,
        4 * 638976,
        4 * 638976,
        16 * 638976,
    )
    assert t.clockFrequency == 1330000000.0 and isinstance(t.clockFrequency, float)
    assert (t.numReplicas, t.ipusPerReplica, t.tilesPerReplica, t.memoryPerReplica) == (2, 2, 8, 8 * 638976)
    assert t.type == pva.Target.Type.Ipu
    assert t.architecture == pva.IPU.Architecture.Ipu2
    assert (t.minSyncDelay, t.supervisorInstrFetchDelay, t.interleavedMemoryStart) == (11, 3, 524288)
    assert list(t.memoryElementOffsets) == [0, 32768, 65536] and list(t.memoryRegionOffsets) == [0, 524288]
    assert (t.tileMemoryBaseAddress, t.tilesPerSuperTile, t.numWorkerContexts) == (0x4C000, 2, 6)
    assert (t.exchangeBytesPerCycle, t.memcpyBytesPerCycle, t.instructionBytes) == (4, 8, 4)
    assert t.supportsSuperTileSendReceive is True
    assert (t.globalSyncCycles, t.globalExchangePacketBytes) == (150, 256)
    assert (t.tileLocalSyncSyncDelay, t.tileLocalSyncExitDelay, t.numStrideBits, t.dataPathWidth) == (7, 5, 10, 128)
    assert (t.fp8ConvUnitMaxPipelineDepth, t.fp16ConvUnitMaxPipelineDepth, t.fp32ConvUnitMaxPipelineDepth) == (2, 3, 4)
    assert (
        t.fp8ConvUnitInputLoadElemsPerCycle,
        t.fp16ConvUnitInputLoadElemsPerCycle,
        t.fp32ConvUnitInputLoadElemsPerCycle,
    ) == (32, 16, 8)
    assert (
        t.fp16InFp16OutConvUnitsPerTile,
        t.fp16InFp32OutConvUnitsPerTile,
        t.fp32InFp32OutConvUnitsPerTile,
        t.fp8InFp16OutConvUnitsPerTile,
    ) == (16, 8, 4, 32)
    assert (
        t.convUnitCoeffLoadBytesPerCycle,
        t.workerInstrFetchDelay,
        t.maxImmediateOffsetInRunInstr,
        t.rptCountMax,
        t.atomicStoreGranularity,
    ) == (16, 12, 65535, 4095, 4)
    assert repr(t) == "<Target Ipu Ipu2: 4 IPU(s) x 4 tiles, 638,976 B/tile, 1,330 MHz>"


def test_target_details_not_present_are_zero_or_false(minimal):
    t = minimal.compilation.target
    zero = [
        "minSyncDelay",
        "tilesPerSuperTile",
        "numWorkerContexts",
        "exchangeBytesPerCycle",
        "memcpyBytesPerCycle",
        "instructionBytes",
        "globalSyncCycles",
        "globalExchangePacketBytes",
        "tileLocalSyncSyncDelay",
        "tileLocalSyncExitDelay",
        "numStrideBits",
        "dataPathWidth",
        "fp8ConvUnitMaxPipelineDepth",
        "fp16ConvUnitMaxPipelineDepth",
        "fp32ConvUnitMaxPipelineDepth",
        "fp8ConvUnitInputLoadElemsPerCycle",
        "fp16ConvUnitInputLoadElemsPerCycle",
        "fp32ConvUnitInputLoadElemsPerCycle",
        "fp16InFp16OutConvUnitsPerTile",
        "fp16InFp32OutConvUnitsPerTile",
        "fp32InFp32OutConvUnitsPerTile",
        "fp8InFp16OutConvUnitsPerTile",
        "convUnitCoeffLoadBytesPerCycle",
        "workerInstrFetchDelay",
        "maxImmediateOffsetInRunInstr",
        "rptCountMax",
        "atomicStoreGranularity",
    ]
    assert {name: getattr(t, name) for name in zero} == dict.fromkeys(zero, 0)
    assert t.supportsSuperTileSendReceive is False
    assert list(t.memoryElementOffsets) == [] and list(t.memoryRegionOffsets) == []
    assert t.type == pva.Target.Type.Cpu and t.architecture == pva.IPU.Architecture.Unknown


def test_two_ipu_mk2_figures(tmp_path):
    path = tmp_path / "mk2.pop"
    with ProfileWriter(path) as w:
        w.set_target(num_ipus=2, tiles_per_ipu=1472, bytes_per_tile=638976, type="Ipu")
    with pva.openReport(str(path)) as report:
        t = report.compilation.target
        assert (
            t.bytesPerTile,
            t.bytesPerIPU,
            t.totalMemory,
            t.tilesPerIpu,
            t.numTiles,
            t.tilesPerReplica,
            t.numReplicas,
            t.ipusPerReplica,
            t.memoryPerReplica,
            t.clockFrequency,
        ) == (638976, 940572672, 1881145344, 1472, 2944, 2944, 1, 2, 1881145344, 1330000000.0)
        assert len(report.compilation.tiles) == 2944


def test_target_type_enum_behaves_like_pybind(comp):
    Type = pva.Target.Type
    assert list(Type.__members__) == ["Ipu", "IpuModel", "Cpu", "Unknown"]
    names = {Type.Ipu: "Ipu", Type.IpuModel: "IpuModel", Type.Cpu: "Cpu", Type.Unknown: "Unknown"}
    assert names[comp.target.type] == "Ipu"
    assert comp.target.type.name == "Ipu" and comp.target.type.value == 0
    assert type(comp.target.type) is type(Type.Cpu)
    assert list(pva.IPU.Architecture.__members__) == ["Ipu1", "Ipu2", "Ipu21", "Ipu30", "Unknown"]


def test_graph(comp, minimal):
    g = comp.graph
    assert (g.numComputeSets, g.numEdges, g.numVars, g.numVertices) == (3, 77, 8, 42)
    assert g.optimisationMetrics == {"fusedOps": 4.0}
    assert minimal.compilation.graph.optimisationMetrics == {}
    assert repr(g) == "<Graph 42 vertices, 77 edges, 8 variables, 3 compute sets>"


def test_parameters_and_timestamp(comp, minimal):
    assert [(o.name, o.value) for o in comp.compilationParameters] == [
        ("debug.instrument", "true"),
        ("opt.enableLoopUnroll", "false"),
    ]
    assert [tuple(o) for o in comp.targetParameters] == [("ipuLinkTopology", "ring")]
    assert comp.timestamp == "2026-11-21T08:30:00Z"
    assert minimal.compilation.timestamp == "" and list(minimal.compilation.compilationParameters) == []


# -- tiles, IPUs, replicas -------------------------------------------------------------------


def test_tiles_ipus_and_replicas_describe_the_same_tiles(comp):
    tiles = comp.tiles
    assert len(tiles) == 16 and [t.tileId for t in tiles] == list(range(16))
    assert len(comp.ipus) == NUM_IPUS and len(comp.replicas) == NUM_REPLICAS
    for k, ipu in enumerate(comp.ipus):
        assert ipu.id == k and ipu.architecture == pva.IPU.Architecture.Ipu2
        assert ipu.tiles == tiles[k * TILES_PER_IPU : (k + 1) * TILES_PER_IPU]
        assert all(a is b for a, b in zip(ipu.tiles, tiles[k * TILES_PER_IPU :]))
    for r, replica in enumerate(comp.replicas):
        assert replica.replicaId == r
        assert [i.id for i in replica.ipus] == [2 * r, 2 * r + 1]
        assert [t for i in replica.ipus for t in i.tiles] == tiles[r * TILES : (r + 1) * TILES]
    assert repr(comp.ipus[2]) == "<IPU 2 Ipu2, tiles 8..11, replica 1>"
    assert repr(comp.replicas[1]) == "<Replica 1: IPUs 2..3>"
    assert repr(tiles[5]) == "<Tile 5 (IPU 1, tile 1)>"


def test_tile_members(comp):
    delays = [3, 2, 1, 0] * 4
    assert [t.relativeSyncDelay for t in comp.tiles] == delays
    assert all(t.clockFrequency == 1.33e9 for t in comp.tiles)
    assert comp.tiles[3] == comp.tiles[3] and comp.tiles[3] != comp.tiles[4]
    assert len({comp.tiles[1], comp.tiles[1], comp.tiles[2]}) == 2


def test_memory_per_tile_and_replicas_share_it(comp, model):
    for tile in comp.tiles:
        (t, total, total_gaps, inter, inter_gaps, non, non_gaps, over, over_gaps, always, not_always) = (
            model.memory_rows[tile.tileId % TILES]
        )
        m = tile.memory
        assert (m.total.excludingGaps, m.total.includingGaps) == (total, total_gaps)
        assert (m.interleaved.excludingGaps, m.interleaved.includingGaps) == (inter, inter_gaps)
        assert (m.nonInterleaved.excludingGaps, m.nonInterleaved.includingGaps) == (non, non_gaps)
        assert (m.overflowed.excludingGaps, m.overflowed.includingGaps) == (over, over_gaps)
        assert (m.alwaysLiveBytes, m.notAlwaysLiveBytes) == (always, not_always)
    assert comp.tiles[7].memory.overflowed.excludingGaps == 50
    assert comp.tiles[7].memory.overflowed.includingGaps == 60
    assert comp.tiles[0].memory.total.includingGaps == comp.tiles[8].memory.total.includingGaps


def test_categories_every_category(comp, model):
    for tile in (0, 3, 7, 15):
        categories = comp.tiles[tile].memory.category
        for index, name in enumerate(CATEGORY_NAMES):
            cat = getattr(categories, name)
            v = model.categories[tile % TILES, 6 * index : 6 * index + 6].tolist()
            assert (cat.interleaved.nonOverlapped, cat.interleaved.overlapped) == (v[0], v[1])
            assert (cat.nonInterleaved.nonOverlapped, cat.nonInterleaved.overlapped) == (v[2], v[3])
            assert (cat.overflowed.nonOverlapped, cat.overflowed.overlapped) == (v[4], v[5])
            assert cat.interleaved.total == v[0] + v[1]
            assert cat.total == sum(v)
    assert comp.tiles[0].memory.category.stack.total == 1024
    assert comp.tiles[2].memory.category.vertexCode.interleaved.nonOverlapped == 302
    assert comp.tiles[7].memory.category.variable.overflowed.nonOverlapped == 50
    assert comp.tiles[0].memory.category.dwarf.total == 0
    assert set(CATEGORIES) >= {"dwarf", "vertexCode", "internalExchangeCode", "controlId", "message"}
    assert len(CATEGORIES) == 26


def test_categories_sum_to_total(comp):
    for tile in comp.tiles:
        cat = tile.memory.category
        assert sum(getattr(cat, name).total for name in CATEGORIES) == tile.memory.total.excludingGaps


def test_memory_absent_is_zero(minimal):
    tile = minimal.compilation.tiles[2]
    assert tile.memory.total.includingGaps == 0 and tile.memory.alwaysLiveBytes == 0
    assert tile.memory.category.vertexCode.total == 0
    assert list(tile.memory.vertices) == []


def test_vertex_memory(comp, model):
    for tile in (0, 4, 8 + 4):
        got = [
            (
                v.type.name,
                v.codeBytes,
                v.copyPtrBytes,
                v.descriptorBytes,
                v.edgePtrBytes,
                v.paddingBytes,
                v.vertexDataBytes,
            )
            for v in comp.tiles[tile].memory.vertices
        ]
        expected = [
            (VERTEX_TYPES[vt][1], code, copy, desc, edge, pad, data)
            for t, vt, code, copy, desc, edge, pad, data in model.vertex_memory
            if t == tile % TILES
        ]
        assert got == expected and got


def test_memory_objects_repr(comp):
    m = comp.tiles[0].memory
    assert repr(m.total) == "<MemoryWithAndWithoutGaps excluding 2,368 B, including 2,368 B>"
    assert repr(m.category.stack) == "<CategoryMemory 1,024 B>"
    assert repr(m.category.stack.nonInterleaved) == "<MemoryOverlap 1,024 B not overlapped, 0 B overlapped>"
    assert repr(m) == "<Memory of tile 0: 2,368 B including gaps, 1,876 B always live>"
    assert repr(m.category) == "<Categories of tile 0: stack 1,024 B, controlCode 512 B, variable 448 B>"
    vertex = comp.tiles[0].memory.vertices[0]
    assert repr(vertex) == "<VertexMemory poplar_rt::DstStridedCopyDA32: code 100 B, data 16 B>"
    instances = comp.computeSets[1].vertices[0]
    assert repr(instances) == f"<VertexInstances {instances.count:,} x poplin::ConvPartial1x1Out<half>>"


# -- compute sets and vertices ---------------------------------------------------------------


def test_compute_sets(comp, model):
    sets = comp.computeSets
    assert [cs.name for cs in sets] == COMPUTE_SETS
    for index, cs in enumerate(sets):
        assert list(cs.estimatedCyclesByTile) == model.estimates[index].tolist()
        vertices = cs.vertices
        assert [v.type.name for v in vertices] == [VERTEX_TYPES[vt][1] for vt in CS_VERTEX_TYPES[index]]
        for v, vt in zip(vertices, CS_VERTEX_TYPES[index]):
            counts = model.vertex_counts[(index, vt)]
            assert v.count == int(counts.sum())
            assert list(v.countByTile) == counts.tolist()
            assert v.estimatedCycles == 10 * (vt + 1)
    assert sets[1] == comp.computeSets[1] and hash(sets[1]) == hash(comp.computeSets[1])
    assert repr(sets[1]) == "<ComputeSet 1 'layer/fwd'>"


def test_compute_set_variables(comp, model):
    cs = comp.computeSets[1]
    expected = sorted(var for c, var in model.compute_set_vars if c == 1)
    assert list(cs.varIds) == expected
    assert [v._id for v in cs.vars] == expected
    assert [v.name for v in cs.vars] == ["acts/0", "acts/1", "acts/2"]
    assert list(comp.computeSets[2].vars) == [] and list(comp.computeSets[2].varIds) == []


def test_compute_set_debug_contexts(comp):
    assert [d.id for d in comp.computeSets[1].debugContexts] == [7]
    assert [d.id for d in comp.computeSets[0].debugContexts] == [4]
    assert list(comp.computeSets[2].debugContexts) == []


def test_vertex_type(comp):
    types = {v.type.name: v.type for cs in comp.computeSets for v in cs.vertices}
    conv = types["poplin::ConvPartial1x1Out<half>"]
    assert (conv.size, conv.source) == (24, pva.VertexType.Source.Asm)
    assert types["popops::Reduce<float>"].source == pva.VertexType.Source.CPlusPlus
    assert list(pva.VertexType.Source.__members__) == ["Asm", "CPlusPlus", "Unknown"]
    assert conv == comp.computeSets[1].vertices[0].type and conv != types["popops::Reduce<float>"]
    assert repr(conv) == "<VertexType poplin::ConvPartial1x1Out<half> (24 B)>"


def test_compute_set_without_estimates_is_empty(tmp_path):
    path = tmp_path / "p.pop"
    with ProfileWriter(path) as w:
        w.set_target(num_ipus=1, tiles_per_ipu=4, bytes_per_tile=1024)
        w.insert("compute_sets", ("compute_set", "name"), [(0, "cs")])
    with pva.openReport(path) as report:
        cs = report.compilation.computeSets[0]
        assert list(cs.estimatedCyclesByTile) == [] and list(cs.vertices) == []
        assert not cs.estimatedCyclesByTile


# -- numpy additions -------------------------------------------------------------------------


def test_memory_array_matches_objects(comp):
    for field in (
        "total.includingGaps",
        "total.excludingGaps",
        "interleaved.includingGaps",
        "nonInterleaved.excludingGaps",
        "overflowed.includingGaps",
        "alwaysLiveBytes",
        "notAlwaysLiveBytes",
    ):
        expected = []
        for tile in comp.tiles:
            value = tile.memory
            for part in field.split("."):
                value = getattr(value, part)
            expected.append(value)
        array = comp.memoryArray(field)
        assert array.dtype == np.uint64 and array.shape == (16,)
        assert array.tolist() == expected, field
    assert comp.memoryArray().tolist() == [t.memory.total.includingGaps for t in comp.tiles]
    with pytest.raises(ValueError, match="unknown memory field 'total'"):
        comp.memoryArray("total")


def test_category_memory_array(comp, model):
    vertex_code = comp.categoryMemoryArray("vertexCode")
    assert vertex_code.tolist() == [t.memory.category.vertexCode.total for t in comp.tiles]
    assert vertex_code.tolist() == [300 + t for t in range(TILES)] * 2
    overlapped = comp.categoryMemoryArray("variable", "interleaved.overlapped")
    assert overlapped.tolist() == [t.memory.category.variable.interleaved.overlapped for t in comp.tiles]
    every = comp.categoryMemoryArray()
    assert list(every) == CATEGORY_NAMES
    assert every["stack"].tolist() == [1024] * 16
    assert sum(every.values()).tolist() == comp.memoryArray("total.excludingGaps").tolist()
    with pytest.raises(ValueError, match="unknown memory category 'nope'"):
        comp.categoryMemoryArray("nope")
    with pytest.raises(ValueError, match="unknown category field"):
        comp.categoryMemoryArray("stack", "sideways")


def test_vertex_count_arrays(comp, model):
    per_cs = [sum(model.vertex_counts[(cs, vt)] for vt in CS_VERTEX_TYPES[cs]) for cs in range(3)]
    for cs in range(3):
        assert comp.computeSets[cs].vertexCountArray().tolist() == per_cs[cs].tolist()
    assert comp.vertexCountArray().tolist() == (sum(per_cs).tolist()) * 2
    assert comp.vertexCountArray().tolist() == [
        sum(v.countByTile[t % TILES] for cs in comp.computeSets for v in cs.vertices) for t in range(16)
    ]


def test_numpy_arrays_from_lists(comp):
    cs = comp.computeSets[0]
    array = np.array(cs.estimatedCyclesByTile, dtype=np.uint64)
    assert array.dtype == np.uint64 and array.tolist() == list(cs.estimatedCyclesByTile)
    vector = cs.estimatedCyclesByTile
    vector[0] = 123456  # a modified list gives numpy its new contents
    assert np.asarray(vector)[0] == 123456
    assert json.dumps(cs.vertices[0].countByTile).startswith("[")


def test_minimal_numpy_arrays_are_zero(minimal):
    comp = minimal.compilation
    assert comp.memoryArray().tolist() == [0, 0, 0, 0]
    assert comp.categoryMemoryArray("stack").tolist() == [0, 0, 0, 0]
    assert comp.vertexCountArray().tolist() == [0, 0, 0, 0]


# -- lists -----------------------------------------------------------------------------------


def test_lists_behave_like_python_lists(comp):
    tiles = comp.tiles
    assert tiles and len(tiles) == 16
    assert tiles[-1].tileId == 15 and tiles[-16].tileId == 0
    assert [t.tileId for t in tiles] == [t.tileId for t in tiles]  # repeatable iteration
    assert list(tiles) == tiles
    assert max(tiles, key=lambda t: t.memory.total.includingGaps).tileId == 7
    assert not comp.computeSets[2].vars
    assert isinstance(tiles, list)


def test_list_repr_follows_list_print_length(report, comp):
    try:
        report.listPrintLength(2)
        assert repr(comp.tiles) == "[<Tile 0 (IPU 0, tile 0)>, <Tile 1 (IPU 0, tile 1)>, ... (+14 more)]"
        report.listPrintLength(0)
        assert repr(comp.ipus) == "[... (+4 more)]"
    finally:
        report.listPrintLength(10)
    with pytest.raises(ValueError):
        report.listPrintLength(-1)


def test_compilation_repr(comp):
    assert repr(comp) == "<CompilationReport 4 IPU(s), 16 tiles, 3 compute sets, 32 programs>"


def test_report_debug_info_path(report, minimal, model):
    assert report.debugInfoPath == model.debug_path
    assert minimal.debugInfoPath is None
