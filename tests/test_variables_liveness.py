"""Variables, categories, lowered variables, allocation order, always-live and liveness steps."""

from __future__ import annotations

import pytest
from test_compilation_builder import (  # noqa: F401  (fixture)
    CATEGORY_NAMES,
    CLASSES,
    LIVENESS_TILES,
    NUM_STEPS,
    STEPS,
    TILES,
    TILES_PER_IPU,
    VARIABLES,
    model,
)

import pva
from formats.pop.writer import ProfileWriter


@pytest.fixture(scope="module")
def report(model):
    with pva.openReport(model.path, model.debug_path) as opened:
        yield opened


@pytest.fixture(scope="module")
def comp(report):
    return report.compilation


# -- variables -------------------------------------------------------------------------------


def test_variables(comp):
    variables = comp.variables
    assert [(v._id, v.name) for v in variables] == list(enumerate(VARIABLES))
    assert variables[0] == comp.variables[0] and variables[0] != variables[1]
    assert {variables[0]: "w"}[comp.variables[0]] == "w"
    assert repr(variables[0]) == "<Variable 0 'weights'>"


def test_variable_debug_contexts(comp):
    assert [d.id for d in comp.variables[0].debugContexts] == [2]
    assert [d.id for d in comp.variables[3].debugContexts] == [13]
    assert list(comp.variables[2].debugContexts) == []


def test_lowered_variable_members(comp, model):
    for tile in (0, 5, 7):
        lowered = comp.loweredVariables.forTile(tile)
        expected = sorted((v for v in model.lowered if v.tile == tile), key=lambda v: (v.alloc_order, v.id))
        assert [v._id for v in lowered] == [v.id for v in expected]
        for got, want in zip(lowered, expected):
            assert (got.tileId, got.name, got.bytes, got.alignment, got.offset) == (
                want.tile,
                want.name,
                want.size,
                want.alignment,
                want.offset,
            )
            assert got.category.name == want.category
            assert got.category.id == CATEGORY_NAMES.index(want.category)
            assert (got.allocated, got.constant, got.alwaysLive, got.executable, got.vertexCode) == tuple(
                bool(x) for x in (want.allocated, want.constant, want.always_live, want.executable, want.vertex_code)
            )
            assert (got.lowest256KBytes, got.startSection, got.inInterleavedMem, got.accessedInVertex) == tuple(
                bool(x)
                for x in (want.lowest_256k, want.start_section, want.in_interleaved_mem, want.accessed_in_vertex)
            )
            assert got.equivalenceClass.id == want.equivalence_class
            assert [(i.start, i.end) for i in got.equivalenceClass.steps] == CLASSES[want.equivalence_class]
            assert got.hasUnloweredVar is (want.unlowered_var is not None)
            if want.unlowered_var is not None:
                assert got.unloweredVar == comp.variables[want.unlowered_var]
                assert got.unloweredVar.name == VARIABLES[want.unlowered_var]


def test_unlowered_var_of_anonymous_piece_raises(comp):
    anon = [v for v in comp.loweredVariables.forTile(0) if v.name == "<anon>"][0]
    assert anon.hasUnloweredVar is False
    with pytest.raises(pva.NotPresentError, match="has no unlowered variable") as info:
        anon.unloweredVar
    assert isinstance(info.value, RuntimeError) and isinstance(info.value, pva.PvaError)


def test_variable_category(comp):
    category = comp.loweredVariables.forTile(0)[0].category
    assert (category.id, category.name) == (CATEGORY_NAMES.index("controlCode"), "controlCode")
    assert category.description == pva.compilation.CATEGORIES["controlCode"]
    assert repr(category) == f"<VariableCategory {category.id} 'controlCode'>"


def test_constraints(comp, model):
    lowered = {v._id: v for v in comp.loweredVariables.forTile(0)}
    for var, kind, other in model.constraints:
        constraints = lowered[var].elementConstraints if kind == "element" else lowered[var].regionConstraints
        assert other in [v._id for v in constraints]
    weights = next(v for v in lowered.values() if v.name == "weights/0")
    assert [v.name for v in weights.elementConstraints] == ["stack", "acts/0"]
    assert list(weights.regionConstraints) == []


def test_for_var(comp, model):
    acts = comp.loweredVariables.forVar(comp.variables[1])
    assert [v._id for v in acts] == [v.id for v in model.lowered if v.unlowered_var == 1]
    assert [v._id for v in comp.loweredVariables.forVar(1)] == [v._id for v in acts]
    assert [v.tileId for v in comp.loweredVariables.forVar(2)] == [0, 2, 4, 6]
    assert list(comp.loweredVariables.forVar(99)) == []
    with pytest.raises(TypeError):
        comp.loweredVariables.forVar("weights")


def test_lowered_variables_are_equal_by_id(comp):
    a = comp.loweredVariables.forTile(1)
    b = comp.loweredVariables.forVar(0)
    assert a[4] == b[1] and hash(a[4]) == hash(b[1])
    assert repr(a[0]) == "<LoweredVariable 9 'controlCode' tile 1 512 B always live>"


def test_all_brief_vars(comp, model):
    brief = comp.loweredVariables.allBriefVars
    assert len(brief) == len(model.lowered)
    for got, want in zip(brief, model.lowered):
        assert (got.id, got.bytes, got.tileId, got.equivalenceClass.id) == (
            want.id,
            want.size,
            want.tile,
            want.equivalence_class,
        )
        assert [(i.start, i.end) for i in got.equivalenceClass.steps] == CLASSES[want.equivalence_class]
    # popliner's use: mark the steps in which each class is live
    live = {}
    for var in brief:
        marks = live.setdefault(var.equivalenceClass.id, [0] * NUM_STEPS)
        for interval in var.equivalenceClass.steps:
            marks[interval.start : interval.end] = [1] * (interval.end - interval.start)
    assert live[2] == [0] * 7 + [1] + [0, 0] + [1, 1, 1]


def test_for_tile_accepts_tiles_of_every_replica(comp):
    assert comp.loweredVariables.forTile(comp.tiles[9]) == comp.loweredVariables.forTile(1)
    with pytest.raises(pva.NoSuchObjectError, match="no tile 16"):
        comp.loweredVariables.forTile(16)
    with pytest.raises(TypeError):
        comp.loweredVariables.forTile("0")


def test_allocation_order_by_tile(comp, model):
    order = comp.allocationOrderByTile
    assert len(order) == TILES
    for tile in range(TILES):
        expected = [v.id for v in sorted((v for v in model.lowered if v.tile == tile), key=lambda v: v.alloc_order)]
        assert list(order[tile]) == expected


# -- always live -----------------------------------------------------------------------------


def test_always_live_variables(comp, model):
    assert [(v.name, v.size) for v in comp.alwaysLiveVariables] == sorted(model.always_live().items())
    assert sum(v.size for v in comp.alwaysLiveVariables) == sum(t.memory.alwaysLiveBytes for t in comp.tiles[:TILES])
    for tile in range(TILES):
        got = comp.alwaysLiveVariablesForTile(tile)
        assert [(v.name, v.size) for v in got] == sorted(model.always_live(tile).items())
        assert sum(v.size for v in got) == comp.tiles[tile].memory.alwaysLiveBytes
    assert [v.size for v in comp.alwaysLiveVariablesForTile(11)] == [v.size for v in comp.alwaysLiveVariablesForTile(3)]
    assert comp.alwaysLiveVariables[0] == comp.variables[VARIABLES.index("controlCode")]


# -- liveness steps --------------------------------------------------------------------------


def test_liveness_steps(comp, model):
    steps = comp.livenessProgramSteps
    assert len(steps) == NUM_STEPS
    assert [s.program._id for s in steps] == [p for p, _parent, _depth in STEPS]
    for index, step in enumerate(steps):
        memory = step.notAlwaysLiveMemory
        assert memory.bytes == model.live_bytes(index)
        assert [(v.name, v.size) for v in memory.variables] == sorted(model.live_by_variable(index).items())
        assert sum(v.size for v in memory.variables) == memory.bytes
    assert steps[0] == comp.livenessProgramSteps[0] and len({steps[1], comp.livenessProgramSteps[1]}) == 1


def test_not_always_live_per_tile(comp, model):
    assert [t.tileId for t in comp.tilesWithLivenessInfo] == LIVENESS_TILES
    for tile in LIVENESS_TILES:
        for index, step in enumerate(comp.livenessProgramSteps):
            memory = step.notAlwaysLiveMemoryForTile(tile)
            assert memory.bytes == model.live_bytes(index, [tile])
            assert [(v.name, v.size) for v in memory.variables] == sorted(model.live_by_variable(index, [tile]).items())
        peak = max(s.notAlwaysLiveMemoryForTile(tile).bytes for s in comp.livenessProgramSteps)
        assert peak == comp.tiles[tile].memory.notAlwaysLiveBytes
    step = comp.livenessProgramSteps[5]
    assert step.notAlwaysLiveMemoryForTile(comp.tiles[8]).bytes == step.notAlwaysLiveMemoryForTile(0).bytes
    with pytest.raises(
        pva.NotPresentError, match=r"tile 3 has no per-tile liveness information; tiles with it: \[0, 5\]"
    ):
        step.notAlwaysLiveMemoryForTile(3)


def test_not_always_live_per_ipu(comp, model):
    for index, step in enumerate(comp.livenessProgramSteps):
        for ipu in range(TILES // TILES_PER_IPU):
            tiles = range(ipu * TILES_PER_IPU, (ipu + 1) * TILES_PER_IPU)
            memory = step.notAlwaysLiveMemoryForIpu(ipu)
            assert memory.bytes == model.live_bytes(index, tiles)
            assert [(v.name, v.size) for v in memory.variables] == sorted(model.live_by_variable(index, tiles).items())
        assert step.notAlwaysLiveMemoryForIpu(3).bytes == step.notAlwaysLiveMemoryForIpu(1).bytes
        assert step.notAlwaysLiveMemoryForIpu(comp.ipus[2]).bytes == step.notAlwaysLiveMemoryForIpu(0).bytes
    with pytest.raises(pva.NoSuchObjectError, match="no IPU 4"):
        comp.livenessProgramSteps[0].notAlwaysLiveMemoryForIpu(4)


def test_not_always_live_bytes_for_variable(comp, model):
    for index, step in enumerate(comp.livenessProgramSteps):
        by_name = model.live_by_variable(index)
        for variable in comp.variables:
            assert step.notAlwaysLiveBytesForVariable(variable) == by_name.get(variable.name, 0)
        for variable in step.notAlwaysLiveMemory.variables:
            assert step.notAlwaysLiveBytesForVariable(variable) == variable.size
    assert comp.livenessProgramSteps[7].notAlwaysLiveBytesForVariable(1) == model.live_by_variable(7)["acts"]


def test_anonymous_pieces_share_an_artificial_variable(comp, model):
    anon = [v for v in comp.livenessProgramSteps[3].notAlwaysLiveMemory.variables if v.name == "<anon>"]
    assert len(anon) == 1 and anon[0]._id < 0 and anon[0].size == 24
    assert [v.tileId for v in comp.loweredVariables.forVar(anon[0])] == [0, 5]
    assert list(anon[0].debugContexts) == []


def test_liveness_variables_match_lowered_unlowered_vars(comp):
    """popliner's check: a lowered variable's unlowered variable keys the liveness variables."""
    step = comp.livenessProgramSteps[7]
    live = {v: v for v in step.notAlwaysLiveMemoryForTile(5).variables}
    for lowered in comp.loweredVariables.forTile(5):
        if lowered.hasUnloweredVar and lowered.unloweredVar in live and not lowered.alwaysLive:
            assert lowered.bytes == live[lowered.unloweredVar].size


def test_repr(comp):
    step = comp.livenessProgramSteps[7]
    assert (
        repr(step)
        == f"<LivenessProgramStep 7 OnTileExecute 'layer/fwd': {step.notAlwaysLiveMemory.bytes:,} B not always live>"
    )
    assert repr(step.notAlwaysLiveMemory) == f"<NotAlwaysLiveMemory {step.notAlwaysLiveMemory.bytes:,} B>"
    sized = step.notAlwaysLiveMemory.variables[-1]
    assert repr(sized) == f"<VariableSize 0 'weights' {sized.size:,} B>"
    brief = comp.loweredVariables.allBriefVars[10]
    assert repr(brief) == "<LoweredVariableBrief 10 tile 1 301 B class 5>"
    assert (
        repr(comp.loweredVariables.allBriefVars[6].equivalenceClass)
        == "<EquivalenceClass 2 live in steps [7..8, 10..13]>"
    )
    assert repr(comp.loweredVariables.allBriefVars[6].equivalenceClass.steps[0]) == "<Interval 7..8>"
    assert repr(comp.loweredVariables) == "<LoweredVariables 59 on 8 tiles>"


def test_no_liveness_or_variables(tmp_path):
    path = tmp_path / "empty.pop"
    with ProfileWriter(path) as w:
        w.set_target(num_ipus=1, tiles_per_ipu=2, bytes_per_tile=1024)
    with pva.openReport(path) as report:
        comp = report.compilation
        assert list(comp.livenessProgramSteps) == [] and list(comp.tilesWithLivenessInfo) == []
        assert list(comp.alwaysLiveVariables) == [] and list(comp.alwaysLiveVariablesForTile(1)) == []
        assert list(comp.variables) == [] and list(comp.loweredVariables.allBriefVars) == []
        assert [list(t) for t in comp.allocationOrderByTile] == [[], []]


def test_gapped_liveness_step_ids_are_reported(tmp_path):
    path = tmp_path / "gap.pop"
    with ProfileWriter(path) as w:
        w.set_target(num_ipus=1, tiles_per_ipu=2, bytes_per_tile=1024)
        w.insert("programs", ("id", "type"), [(0, "Sequence")])
        w.insert("liveness_steps", ("id", "program", "not_always_live_bytes"), [(0, 0, 0), (2, 0, 0)])
    with (
        pva.openReport(path) as report,
        pytest.raises(pva.InconsistentReportError, match="liveness step ids must be 0..1, found id 2"),
    ):
        report.compilation.livenessProgramSteps
