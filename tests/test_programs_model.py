"""Programs of every kind, their members and per-tile vectors, and the ProgramVisitor."""

from __future__ import annotations

import numpy as np
import pytest
from test_compilation_builder import CHILDREN, PROGRAMS, model  # noqa: F401  (fixture)

import pva

SEED_TYPES = [
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
]
#: The visit methods of seed 004's ProgramVisitor, in order.
SEED_VISITS = [
    "visitUnknown",
    "visitSequence",
    "visitOnTileExecute",
    "visitRepeat",
    "visitRepeatWhile",
    "visitOnTileSwitch",
    "visitOnEveryTileSwitch",
    "visitIfElse",
    "visitDoExchange",
    "visitGlobalExchange",
    "visitStreamCopyBegin",
    "visitStreamCopyMid",
    "visitStreamCopyEnd",
    "visitWriteUndef",
    "visitSync",
    "visitSetLocalConsensus",
    "visitSetLocalConsensusFromVar",
    "visitGetGlobalConsensus",
    "visitSans",
    "visitCall",
    "visitSyncAns",
    "visitCodeCopy",
    "visitBlock",
    "visitProgram",
]


@pytest.fixture(scope="module")
def report(model):
    with pva.openReport(model.path, model.debug_path) as opened:
        yield opened


@pytest.fixture(scope="module")
def programs(report):
    return {p._id: p for p in report.compilation.programs}


def test_program_type_enum_is_the_seeds():
    assert list(pva.Program.Type.__members__) == SEED_TYPES
    assert [int(pva.Program.Type[n]) for n in SEED_TYPES] == list(range(len(SEED_TYPES)))
    assert list(pva.Program.SyncType.__members__) == ["Internal", "GS1", "GS2", "GS3", "GS4", "Unknown"]
    assert list(pva.StreamCopyMidProgram.StreamCopyType.__members__) == ["Host", "RemoteBuffer", "Mixed", "Unknown"]
    assert pva.pva_core.Program.Type.StreamCopyMid is pva.Program.Type.StreamCopyMid


def test_enum_idioms_clients_use(programs):
    PType = pva.Program.Type
    p = programs[2]
    assert p.type == PType.StreamCopyMid
    assert p.type in [PType.StreamCopyBegin, PType.StreamCopyMid, PType.StreamCopyEnd]
    assert p.type not in {PType.Sync, PType.GlobalExchange}
    assert {PType.StreamCopyMid: "mid"}[p.type] == "mid"
    assert p.type.name == "StreamCopyMid" and p.type.value == 11 and int(p.type) == 11
    assert "OnTileExecute" in PType.__members__ and PType.OnTileExecute == PType.OnTileExecute
    assert type(p.type) is type(PType.Sync)
    assert repr(PType.Sync) == "<Type.Sync: 14>"


def test_python_class_name_is_the_cpp_name(programs):
    for program_id, type_name, *_ in PROGRAMS:
        program = programs[program_id]
        if type_name == "Execute":
            assert type(program).__name__ == "Program"
            assert program.type == pva.Program.Type.Execute
        elif type_name == "NotAKnownType":
            assert type(program).__name__ == "UnknownProgram"
            assert program.type == pva.Program.Type.Unknown
        else:
            assert type(program).__name__ == f"{type_name}Program"
            assert program.type.name == type_name
        assert isinstance(program, pva.Program)
    assert isinstance(programs[9], pva.SyncProgram) and issubclass(pva.ImplicitSyncProgram, pva.SyncProgram)


def test_programs_is_flat_and_in_id_order(report):
    comp = report.compilation
    assert [p._id for p in comp.programs] == [row[0] for row in PROGRAMS]
    assert [p._id for p in comp.controlPrograms] == [0]
    assert [p._id for p in comp.functions] == [11]
    nested = {c for kids in CHILDREN.values() for c in kids}
    assert nested <= {p._id for p in comp.programs}


def test_common_members(programs, model):
    for program_id, type_name, name, *_ in PROGRAMS:
        program = programs[program_id]
        assert program._id == program_id
        assert [c._id for c in program.children] == CHILDREN.get(program_id, [])
        expected_cc = model.vectors.get((program_id, "control_code"))
        assert list(program.controlCodeByTile) == ([] if expected_cc is None else expected_cc.tolist())
        if type_name != "OnTileExecute":
            assert program.name == name
    assert programs[5].name == "init/zero"  # from its compute set
    assert programs[8].name == "layer/fwd"
    assert list(programs[28].controlCodeByTile) == []


def test_vars_of_programs(programs, model):
    by_program: dict[int, list[int]] = {}
    for program, var in model.program_vars:
        by_program.setdefault(program, []).append(var)
    assert [v._id for v in programs[13].vars] == by_program[13]
    assert [v._id for v in programs[4].vars] == by_program[4]
    assert [v.name for v in programs[5].vars] == ["weights/0", "acts/0"]
    # OnTileExecute: its own and its compute set's variables
    cs_vars = sorted(var for cs, var in model.compute_set_vars if cs == 1)
    assert [v._id for v in programs[8].vars] == cs_vars
    assert list(programs[0].vars) == []


def test_program_debug_contexts(programs):
    assert [d.id for d in programs[4].debugContexts] == [3]
    assert [d.id for d in programs[30].debugContexts] == [8]
    assert list(programs[0].debugContexts) == []


def test_on_tile_execute(report, programs):
    ote = programs[8]
    assert ote.computeset.name == "layer/fwd"
    assert ote.computeset == report.compilation.computeSets[1]
    assert len(ote.computeset.vertices) == 2


def test_repeat(programs):
    assert programs[6].hasRepeatCount is True and programs[6].repeatCount == 5
    assert programs[29].hasRepeatCount is False and programs[29].repeatCount == 0


def test_exchange_vectors(programs, model):
    for program_id, cls in (
        (4, pva.DoExchangeProgram),
        (13, pva.DoExchangeProgram),
        (14, pva.GlobalExchangeProgram),
        (2, pva.StreamCopyMidProgram),
    ):
        program = programs[program_id]
        assert isinstance(program, cls)
        assert list(program.bytesReceivedByTile) == model.vectors[(program_id, "bytes_received")].tolist()
        assert list(program.bytesSentByTile) == model.vectors[(program_id, "bytes_sent")].tolist()
        assert list(program.estimatedCyclesByTile) == model.vectors[(program_id, "estimated_cycles")].tolist()
    assert list(programs[4].codeBytesByTile) == model.vectors[(4, "code_bytes")].tolist()
    assert list(programs[14].exchangeCyclesByTile) == model.vectors[(14, "exchange_cycles")].tolist()
    assert list(programs[14].syncCyclesByTile) == model.vectors[(14, "sync_cycles")].tolist()
    assert programs[14].syncType == pva.Program.SyncType.GS1
    assert programs[2].streamCopyType == pva.StreamCopyMidProgram.StreamCopyType.RemoteBuffer
    assert not hasattr(programs[1], "bytesReceivedByTile")


def test_sync_call_sans(programs):
    assert programs[9].syncType == pva.Program.SyncType.GS2
    assert programs[10].target is programs[11] and programs[30].target is programs[11]
    assert programs[16].numTiles == 8 and programs[17].numTiles == 4


def test_tile_array(programs, model):
    array = programs[4].tileArray("codeBytesByTile")
    assert array.dtype == np.uint64 and array.tolist() == model.vectors[(4, "code_bytes")].tolist()
    assert programs[0].tileArray("controlCodeByTile").tolist() == model.vectors[(0, "control_code")].tolist()
    assert programs[28].tileArray("controlCodeByTile").size == 0
    assert (
        np.array(programs[14].syncCyclesByTile, dtype=np.uint64).tolist() == model.vectors[(14, "sync_cycles")].tolist()
    )
    with pytest.raises(ValueError, match="SequenceProgram has no per-tile vector 'bytesSentByTile'"):
        programs[0].tileArray("bytesSentByTile")


def test_programs_are_hashable_and_equal_by_id(report):
    first = {p for p in report.compilation.programs if p.type == pva.Program.Type.OnTileExecute}
    second = set(report.compilation.programs)
    assert second - first == {p for p in report.compilation.programs if p.type != pva.Program.Type.OnTileExecute}
    programs = report.compilation.programs
    assert programs[3] == report.compilation.programs[3] and programs[3] != programs[4]
    assert hash(programs[3]) == hash(report.compilation.programs[3])


def test_reprs(programs):
    assert repr(programs[8]) == "<OnTileExecuteProgram 8 OnTileExecute 'layer/fwd'>"
    assert repr(programs[0]) == "<SequenceProgram 0 Sequence>"
    assert repr(programs[28]) == "<Program 28 Execute 'exec'>"


# -- the visitor -----------------------------------------------------------------------------


def test_visitor_has_a_method_for_every_kind():
    for name in SEED_VISITS:
        assert callable(getattr(pva.ProgramVisitor, name)), name
    assert pva.ProgramVisitor().visitOnTileExecute(None) is None
    assert repr(pva.ProgramVisitor()) == "<ProgramVisitor visiting nothing>"

    class Two(pva.ProgramVisitor):
        def visitSync(self, sync):
            pass

        def visitCall(self, call):
            pass

    assert repr(Two()) == "<Two visiting visitCall, visitSync>"


class Recorder(pva.ProgramVisitor):
    """Records every call it receives, for every visit method."""

    def __init__(self):
        self.calls = []
        super().__init__()


for _name in SEED_VISITS:
    setattr(Recorder, _name, lambda self, program, _n=_name: self.calls.append((_n, program._id)))


def test_accept_calls_exactly_the_kinds_method_and_does_not_recurse(programs):
    for program_id, type_name, *_ in PROGRAMS:
        visitor = Recorder()
        programs[program_id].accept(visitor)
        if type_name == "Execute":
            expected = "visitProgram"
        elif type_name == "NotAKnownType":
            expected = "visitUnknown"
        else:
            expected = f"visit{type_name}"
        assert visitor.calls == [(expected, program_id)]


def test_unoverridden_methods_do_nothing(report):
    class OnlyOte(pva.ProgramVisitor):
        def __init__(self):
            super().__init__()
            self.names = []

        def visitOnTileExecute(self, onTileExecute):
            self.names.append(onTileExecute.name)

    visitor = OnlyOte()
    for program in report.compilation.programs:
        program.accept(visitor)
    assert visitor.names == ["init/zero", "layer/fwd", "layer/bwd"]


def test_visitor_sets_from_two_traversals_can_be_subtracted(report):
    class Collect(pva.ProgramVisitor):
        def __init__(self):
            super().__init__()
            self.exchanges = set()

        def visitDoExchange(self, doExchange):
            self.exchanges.add(doExchange)

    everything, some = Collect(), Collect()
    for program in report.compilation.programs:
        program.accept(everything)
    for program in report.compilation.programs[:5]:
        program.accept(some)
    assert {p._id for p in everything.exchanges - some.exchanges} == {13}


def test_implicit_sync_program(report):
    comp = report.compilation
    sync = pva.ImplicitSyncProgram(
        comp, None, pva.Program.Type.Sync, "implicitSync", [None, None, "Internal", None, None, None]
    )
    again = pva.ImplicitSyncProgram(
        comp, None, pva.Program.Type.Sync, "implicitSync", [None, None, "Internal", None, None, None]
    )
    assert sync.syncType == pva.Program.SyncType.Internal and list(sync.children) == []
    assert sync.name == "implicitSync" and list(sync.vars) == [] and list(sync.controlCodeByTile) == []
    assert sync == again and len({sync, again}) == 1
    visitor = Recorder()
    sync.accept(visitor)
    assert visitor.calls == [("visitSync", None)]


def test_sample_report_programs(sample):
    with pva.openReport(sample.path) as report:
        programs = report.compilation.programs
        assert len(programs) == 18
        assert [type(p).__name__ for p in programs[:3]] == [
            "SequenceProgram",
            "StreamCopyBeginProgram",
            "StreamCopyMidProgram",
        ]
        assert programs[5].name == "init/copy"
        assert programs[17].hasRepeatCount is False


def test_every_program_class_accepts_into_the_method_its_kind_names(report):
    """Each class's accept calls its visit method directly: the one `_visit` names, for the class
    itself and for every subclass; a program of a type without a class of its own visits visitProgram."""
    from pva import programs as module

    classes = [c for c in vars(module).values() if isinstance(c, type) and issubclass(c, pva.Program)]
    assert len(classes) >= 24
    for cls in classes:
        calls: list = []
        visitor = type("Recorder", (), {cls._visit: lambda self, program, calls=calls: calls.append(program)})()
        program = object.__new__(cls)
        program.accept(visitor)
        assert calls == [program], cls.__name__
        assert cls._visit == ("visitProgram" if cls is pva.Program else f"visit{cls.__name__[: -len('Program')]}") or (
            cls.__name__ == "ImplicitSyncProgram" and cls._visit == "visitSync"
        )


def test_a_type_name_holding_the_separator_is_an_unknown_program(model, tmp_path):
    """Types are read as one string split at a separator; a name holding it falls back to a JSON read."""
    import shutil
    import sqlite3

    path = tmp_path / "profile.pop"
    shutil.copyfile(model.path, path)
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE programs SET type = 'Sequence' || char(31) || 'Call' WHERE id = 1")
        conn.execute("UPDATE programs SET type = 7 WHERE id = 2")
    conn.close()
    with pva.openReport(str(path)) as damaged, pva.openReport(model.path) as sound:
        kinds = [p.type for p in damaged.compilation.programs]
        expected = [p.type for p in sound.compilation.programs]
    assert kinds[1] == kinds[2] == pva.Program.Type.Unknown
    assert kinds[:1] + kinds[3:] == expected[:1] + expected[3:]
