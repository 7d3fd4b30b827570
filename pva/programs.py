"""Programs of every kind and the ProgramVisitor (libpva Program, its subclasses, visitor)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from itertools import repeat
from typing import TYPE_CHECKING, Any

from formats.gcpause import gc_paused
from formats.lazy_import import lazy_module

from .errors import InconsistentReportError
from .lists_and_enums import PvaEnum, PvaList
from .vectors import TileVector

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy")

if TYPE_CHECKING:
    from .context import ReportContext


__all__ = [
    "BlockProgram",
    "CallProgram",
    "CodeCopyProgram",
    "DoExchangeProgram",
    "GetGlobalConsensusProgram",
    "GlobalExchangeProgram",
    "IfElseProgram",
    "ImplicitSyncProgram",
    "OnEveryTileSwitchProgram",
    "OnTileExecuteProgram",
    "OnTileSwitchProgram",
    "Program",
    "ProgramVisitor",
    "RepeatProgram",
    "RepeatWhileProgram",
    "SansProgram",
    "SequenceProgram",
    "SetLocalConsensusFromVarProgram",
    "SetLocalConsensusProgram",
    "StreamCopyBeginProgram",
    "StreamCopyEndProgram",
    "StreamCopyMidProgram",
    "SyncAnsProgram",
    "SyncProgram",
    "UnknownProgram",
    "WriteUndefProgram",
]


class Program:
    """Base class of every program; equal (and hashed) by program id."""

    class Type(PvaEnum):
        """Type of program (seed 004, Program::Type, in libpva order)."""

        Unknown = 0
        Sequence = 1
        OnTileExecute = 2
        Repeat = 3
        RepeatWhile = 4
        OnTileSwitch = 5
        OnEveryTileSwitch = 6
        IfElse = 7
        DoExchange = 8
        GlobalExchange = 9
        StreamCopyBegin = 10
        StreamCopyMid = 11
        StreamCopyEnd = 12
        WriteUndef = 13
        Sync = 14
        SetLocalConsensus = 15
        SetLocalConsensusFromVar = 16
        GetGlobalConsensus = 17
        Sans = 18
        Call = 19
        SyncAns = 20
        CodeCopy = 21
        Block = 22
        Execute = 23
        UnloweredWhile = 24
        UnloweredExecuteDst = 25
        UnloweredSwitch = 26
        OnTileCopy = 27
        Copy = 28
        CrossReplicaCopy = 29
        StreamCopy = 30
        InstrumentationPlaceholder = 31

    class SyncType(PvaEnum):
        """Type of synchronisation: Internal (one IPU), group syncs GS1..GS4, or Unknown."""

        Internal = 0
        GS1 = 1
        GS2 = 2
        GS3 = 3
        GS4 = 4
        Unknown = 5

    __slots__ = ("_c", "_id", "_type")

    #: The ProgramVisitor method `accept` calls.
    _visit = "visitProgram"

    def __init__(self, context: ReportContext, program_id: int, type_: Program.Type) -> None:
        self._c = context
        self._id = program_id
        self._type = type_

    @property
    def _name(self) -> str:
        """The stored name ("" when none), read with every other program's on first use."""
        return self._c.program_table.name_of(self._id)

    @property
    def _row(self) -> tuple:
        """The stored details (formats.pop.query.compilation.PROGRAM_DETAIL_COLUMNS), read in bulk on first use."""
        return self._c.program_table.details_of(self._id)

    @property
    def name(self) -> str:
        """The program name; may be empty."""
        return self._name

    @property
    def type(self) -> Program.Type:
        """The type of the program."""
        return self._type

    @property
    def children(self) -> PvaList:
        """Child programs in order; may be empty."""
        return self._c.program_table.children_of(self._id)

    @property
    def debugContexts(self) -> PvaList:
        """The debug contexts of the program; may be empty (always empty without debug information)."""
        return self._c.debug_contexts_of("program", self._id)

    @property
    def vars(self) -> PvaList:
        """The lowered variables the program uses, by id."""
        return self._c.program_table.vars_of(self._id)

    @property
    def controlCodeByTile(self) -> TileVector:
        """Control code of this program and its children on each tile in bytes; may be empty."""
        return self._c.program_table.vector(self._id, "control_code")

    def accept(self, visitor: ProgramVisitor) -> None:
        """Call the visitor method for this program's kind (exactly one call, no recursion)."""
        getattr(visitor, self._visit)(self)

    def tileArray(self, name: str) -> np.ndarray:
        """A per-tile vector of this program as a uint64 numpy array (pva addition).

        `name` is the libpva property, e.g. ``"controlCodeByTile"`` or, for exchanges,
        ``"bytesReceivedByTile"``; the array is empty when the report has no such vector.
        """
        kind = _VECTOR_KINDS.get(name)
        if kind is None or not isinstance(getattr(type(self), name, None), property):
            names = sorted(n for n in _VECTOR_KINDS if isinstance(getattr(type(self), n, None), property))
            raise ValueError(f"{type(self).__name__} has no per-tile vector {name!r}; it has {', '.join(names)}")
        return self._c.program_table.array(self._id, kind)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Program) and other._id == self._id and other._c is self._c

    def __hash__(self) -> int:
        return hash(self._id)

    def __repr__(self) -> str:
        name = self.name
        shown = f" {name!r}" if name else ""
        return f"<{type(self).__name__} {self._id} {self._type.name}{shown}>"


#: libpva per-tile vector properties and the program_vectors kind that stores each.
_VECTOR_KINDS = {
    "controlCodeByTile": "control_code",
    "bytesReceivedByTile": "bytes_received",
    "bytesSentByTile": "bytes_sent",
    "estimatedCyclesByTile": "estimated_cycles",
    "exchangeCyclesByTile": "exchange_cycles",
    "syncCyclesByTile": "sync_cycles",
    "codeBytesByTile": "code_bytes",
}


def _vector_property(kind: str, doc: str) -> property:
    return property(lambda self: self._c.program_table.vector(self._id, kind), doc=doc)


class UnknownProgram(Program):
    """A program of a kind the report does not identify."""

    __slots__ = ()
    _visit = "visitUnknown"

    def accept(self, visitor: ProgramVisitor) -> None:
        visitor.visitUnknown(self)  # the method named by _visit, called without getattr


class SequenceProgram(Program):
    """Runs its children in order."""

    __slots__ = ()
    _visit = "visitSequence"

    def accept(self, visitor: ProgramVisitor) -> None:
        visitor.visitSequence(self)  # the method named by _visit, called without getattr


class OnTileExecuteProgram(Program):
    """Executes a compute set."""

    __slots__ = ()
    _visit = "visitOnTileExecute"

    def accept(self, visitor: ProgramVisitor) -> None:
        visitor.visitOnTileExecute(self)  # the method named by _visit, called without getattr

    @property
    def computeset(self) -> Any:  # pva.compilation.ComputeSet
        """The compute set this program executes."""
        cs = self._row[0]
        sets = self._c.compute_sets
        if cs is None or not 0 <= cs < len(sets):
            raise InconsistentReportError(
                f"{self._c.reader.path!r}: OnTileExecute program {self._id} refers to compute set {cs!r}, "
                f"but the report has {len(sets)}",
                self._c.reader.path,
            )
        return sets[cs]

    @property
    def name(self) -> str:
        """The program name, based on the compute set's name."""
        if self._name:
            return self._name
        cs = self._row[0]
        return self.computeset.name if cs is not None else ""

    @property
    def vars(self) -> PvaList:
        """The lowered variables used: the program's own and its compute set's, by id."""
        own = self._c.program_table.vars_of(self._id)
        cs = self._row[0]
        if cs is None:
            return own
        merged = {v._id: v for v in self.computeset.vars}
        merged.update((v._id, v) for v in own)
        return PvaList(merged[i] for i in sorted(merged))


class RepeatProgram(Program):
    """Repeats its body."""

    __slots__ = ()
    _visit = "visitRepeat"

    def accept(self, visitor: ProgramVisitor) -> None:
        visitor.visitRepeat(self)  # the method named by _visit, called without getattr

    @property
    def hasRepeatCount(self) -> bool:
        """Whether this Repeat has a hard-coded repeat count."""
        return self._row[1] is not None

    @property
    def repeatCount(self) -> int:
        """How many times it repeats; 0 if not hard-coded."""
        return self._row[1] or 0


class RepeatWhileProgram(Program):
    """Repeats its body while a condition holds."""

    __slots__ = ()
    _visit = "visitRepeatWhile"

    def accept(self, visitor: ProgramVisitor) -> None:
        visitor.visitRepeatWhile(self)  # the method named by _visit, called without getattr


class OnTileSwitchProgram(Program):
    """Selects a child by a value held on each tile."""

    __slots__ = ()
    _visit = "visitOnTileSwitch"

    def accept(self, visitor: ProgramVisitor) -> None:
        visitor.visitOnTileSwitch(self)  # the method named by _visit, called without getattr


class OnEveryTileSwitchProgram(Program):
    """Selects a child by a value broadcast to every tile."""

    __slots__ = ()
    _visit = "visitOnEveryTileSwitch"

    def accept(self, visitor: ProgramVisitor) -> None:
        visitor.visitOnEveryTileSwitch(self)  # the method named by _visit, called without getattr


class IfElseProgram(Program):
    """Runs one of two children."""

    __slots__ = ()
    _visit = "visitIfElse"

    def accept(self, visitor: ProgramVisitor) -> None:
        visitor.visitIfElse(self)  # the method named by _visit, called without getattr


class DoExchangeProgram(Program):
    """An internal exchange between tiles of one IPU."""

    __slots__ = ()
    _visit = "visitDoExchange"

    def accept(self, visitor: ProgramVisitor) -> None:
        visitor.visitDoExchange(self)  # the method named by _visit, called without getattr

    bytesReceivedByTile = _vector_property("bytes_received", "Bytes received on each tile.")
    bytesSentByTile = _vector_property("bytes_sent", "Bytes sent on each tile.")
    estimatedCyclesByTile = _vector_property("estimated_cycles", "Estimated cycles on each tile.")
    codeBytesByTile = _vector_property("code_bytes", "Exchange code on each tile in bytes.")


class GlobalExchangeProgram(Program):
    """An exchange between IPUs."""

    __slots__ = ()
    _visit = "visitGlobalExchange"

    def accept(self, visitor: ProgramVisitor) -> None:
        visitor.visitGlobalExchange(self)  # the method named by _visit, called without getattr

    bytesReceivedByTile = _vector_property("bytes_received", "Bytes received on each tile.")
    bytesSentByTile = _vector_property("bytes_sent", "Bytes sent on each tile.")
    estimatedCyclesByTile = _vector_property("estimated_cycles", "Estimated cycles on each tile.")
    exchangeCyclesByTile = _vector_property("exchange_cycles", "Exchange cycles on each tile.")
    syncCyclesByTile = _vector_property("sync_cycles", "Sync cycles on each tile.")

    @property
    def syncType(self) -> Program.SyncType:
        """The synchronisation used."""
        return Program.SyncType.parse(self._row[2])


class StreamCopyBeginProgram(Program):
    """The beginning of a stream copy (host or remote buffer)."""

    __slots__ = ()
    _visit = "visitStreamCopyBegin"

    def accept(self, visitor: ProgramVisitor) -> None:
        visitor.visitStreamCopyBegin(self)  # the method named by _visit, called without getattr


class StreamCopyMidProgram(Program):
    """The data transfer of a stream copy."""

    class StreamCopyType(PvaEnum):
        """The source or destination of the stream copy."""

        Host = 0
        RemoteBuffer = 1
        Mixed = 2
        Unknown = 3

    __slots__ = ()
    _visit = "visitStreamCopyMid"

    def accept(self, visitor: ProgramVisitor) -> None:
        visitor.visitStreamCopyMid(self)  # the method named by _visit, called without getattr

    bytesReceivedByTile = _vector_property("bytes_received", "Bytes received on each tile.")
    bytesSentByTile = _vector_property("bytes_sent", "Bytes sent on each tile.")
    estimatedCyclesByTile = _vector_property("estimated_cycles", "Estimated cycles on each tile.")

    @property
    def streamCopyType(self) -> StreamCopyMidProgram.StreamCopyType:
        """Whether the copy is with the host, a remote buffer, or both."""
        return StreamCopyMidProgram.StreamCopyType.parse(self._row[3])


class StreamCopyEndProgram(Program):
    """The end of a stream copy."""

    __slots__ = ()
    _visit = "visitStreamCopyEnd"

    def accept(self, visitor: ProgramVisitor) -> None:
        visitor.visitStreamCopyEnd(self)  # the method named by _visit, called without getattr


class WriteUndefProgram(Program):
    """Marks variables as undefined (ends their liveness)."""

    __slots__ = ()
    _visit = "visitWriteUndef"

    def accept(self, visitor: ProgramVisitor) -> None:
        visitor.visitWriteUndef(self)  # the method named by _visit, called without getattr


class SyncProgram(Program):
    """A synchronisation."""

    __slots__ = ()
    _visit = "visitSync"

    def accept(self, visitor: ProgramVisitor) -> None:
        visitor.visitSync(self)  # the method named by _visit, called without getattr

    @property
    def syncType(self) -> Program.SyncType:
        """The type of synchronisation."""
        return Program.SyncType.parse(self._row[2])


class ImplicitSyncProgram(SyncProgram):
    """A sync the execution trace adds between steps; always Internal, never has children."""

    __slots__ = ("_own_name", "_own_row")

    def __init__(
        self, context: ReportContext, program_id: int | None, type_: Program.Type, name: str, row: Any
    ) -> None:
        super().__init__(context, program_id, type_)  # type: ignore[arg-type]
        self._own_name = name
        self._own_row = tuple(row)

    @property
    def _name(self) -> str:
        return self._own_name

    @property
    def _row(self) -> tuple:
        return self._own_row

    @property
    def children(self) -> PvaList:
        """Always empty."""
        return PvaList()

    @property
    def syncType(self) -> Program.SyncType:
        """Always Internal."""
        return Program.SyncType.Internal

    @property
    def vars(self) -> PvaList:
        """Always empty."""
        return PvaList()

    @property
    def controlCodeByTile(self) -> TileVector:
        """Always empty."""
        return TileVector()

    @property
    def debugContexts(self) -> PvaList:
        """Always empty."""
        return PvaList()

    def __eq__(self, other: object) -> bool:
        if self._id is None:
            return isinstance(other, ImplicitSyncProgram) and other._id is None and other._name == self._name
        return super().__eq__(other)

    def __hash__(self) -> int:
        return hash(("ImplicitSync", self._name)) if self._id is None else hash(self._id)


class SetLocalConsensusProgram(Program):
    """Sets the local consensus flag."""

    __slots__ = ()
    _visit = "visitSetLocalConsensus"

    def accept(self, visitor: ProgramVisitor) -> None:
        visitor.visitSetLocalConsensus(self)  # the method named by _visit, called without getattr


class SetLocalConsensusFromVarProgram(Program):
    """Sets the local consensus flag from a variable."""

    __slots__ = ()
    _visit = "visitSetLocalConsensusFromVar"

    def accept(self, visitor: ProgramVisitor) -> None:
        visitor.visitSetLocalConsensusFromVar(self)  # the method named by _visit, called without getattr


class GetGlobalConsensusProgram(Program):
    """Reads the global consensus."""

    __slots__ = ()
    _visit = "visitGetGlobalConsensus"

    def accept(self, visitor: ProgramVisitor) -> None:
        visitor.visitGetGlobalConsensus(self)  # the method named by _visit, called without getattr


class SansProgram(Program):
    """A sync-and-notify across tiles."""

    __slots__ = ()
    _visit = "visitSans"

    def accept(self, visitor: ProgramVisitor) -> None:
        visitor.visitSans(self)  # the method named by _visit, called without getattr

    @property
    def numTiles(self) -> int:
        """Tiles involved."""
        return self._row[5] or 0


class CallProgram(Program):
    """Calls a function."""

    __slots__ = ()
    _visit = "visitCall"

    def accept(self, visitor: ProgramVisitor) -> None:
        visitor.visitCall(self)  # the method named by _visit, called without getattr

    @property
    def target(self) -> Program:
        """The program this Call invokes."""
        return self._c.program_table.get(self._row[4])


class SyncAnsProgram(Program):
    """A non-participatory sync."""

    __slots__ = ()
    _visit = "visitSyncAns"

    def accept(self, visitor: ProgramVisitor) -> None:
        visitor.visitSyncAns(self)  # the method named by _visit, called without getattr

    @property
    def numTiles(self) -> int:
        """Tiles involved."""
        return self._row[5] or 0


class CodeCopyProgram(Program):
    """Copies code into place."""

    __slots__ = ()
    _visit = "visitCodeCopy"

    def accept(self, visitor: ProgramVisitor) -> None:
        visitor.visitCodeCopy(self)  # the method named by _visit, called without getattr


class BlockProgram(Program):
    """A block of programs."""

    __slots__ = ()
    _visit = "visitBlock"

    def accept(self, visitor: ProgramVisitor) -> None:
        visitor.visitBlock(self)  # the method named by _visit, called without getattr


#: The class of each program type; types without a class of their own use Program.
PROGRAM_CLASSES: dict[Program.Type, type[Program]] = {
    Program.Type.Unknown: UnknownProgram,
    Program.Type.Sequence: SequenceProgram,
    Program.Type.OnTileExecute: OnTileExecuteProgram,
    Program.Type.Repeat: RepeatProgram,
    Program.Type.RepeatWhile: RepeatWhileProgram,
    Program.Type.OnTileSwitch: OnTileSwitchProgram,
    Program.Type.OnEveryTileSwitch: OnEveryTileSwitchProgram,
    Program.Type.IfElse: IfElseProgram,
    Program.Type.DoExchange: DoExchangeProgram,
    Program.Type.GlobalExchange: GlobalExchangeProgram,
    Program.Type.StreamCopyBegin: StreamCopyBeginProgram,
    Program.Type.StreamCopyMid: StreamCopyMidProgram,
    Program.Type.StreamCopyEnd: StreamCopyEndProgram,
    Program.Type.WriteUndef: WriteUndefProgram,
    Program.Type.Sync: SyncProgram,
    Program.Type.SetLocalConsensus: SetLocalConsensusProgram,
    Program.Type.SetLocalConsensusFromVar: SetLocalConsensusFromVarProgram,
    Program.Type.GetGlobalConsensus: GetGlobalConsensusProgram,
    Program.Type.Sans: SansProgram,
    Program.Type.Call: CallProgram,
    Program.Type.SyncAns: SyncAnsProgram,
    Program.Type.CodeCopy: CodeCopyProgram,
    Program.Type.Block: BlockProgram,
}


#: Program.Type and class of each type name stored in the programs table.
#: Programs' vectors looked up one by one before every program's matrix rows are read at once.
_VECTOR_LOOKUPS = 256

_TYPE_BY_NAME = dict(Program.Type.__members__)
_CLASS_BY_NAME = {name: PROGRAM_CLASSES.get(type_, Program) for name, type_ in _TYPE_BY_NAME.items()}
#: Set one slot of a program without a Python frame (the slots Program.__init__ sets).
_SLOTS: dict[str, Any] = dict(vars(Program))  # the slot descriptors, read without mypy's instance-attribute rule
_SET_C, _SET_ID, _SET_TYPE = _SLOTS["_c"].__set__, _SLOTS["_id"].__set__, _SLOTS["_type"].__set__
#: Runs an iterator to its end, keeping nothing.
_consume: Callable[[Iterable[Any]], None] = deque(maxlen=0).extend


class ProgramVisitor:
    """Base class of program visitors: override the visit<Kind> methods you need.

    `program.accept(visitor)` calls exactly one method, the one for the program's kind, and
    does not visit children. Methods you do not override do nothing. A subclass that defines
    ``__init__`` should call ``super().__init__()``.

    >>> class Names(ProgramVisitor):                                   # doctest: +SKIP
    ...     def visitOnTileExecute(self, program):
    ...         print(program.name)
    >>> for program in report.compilation.programs:                    # doctest: +SKIP
    ...     program.accept(Names())
    """

    def __init__(self) -> None:
        pass

    def __repr__(self) -> str:
        base = ProgramVisitor.__dict__
        own = sorted(
            name
            for name in dir(type(self))
            if name.startswith("visit") and getattr(type(self), name) is not base.get(name)
        )
        return f"<{type(self).__name__} visiting {', '.join(own) if own else 'nothing'}>"

    def visitUnknown(self, unknown: UnknownProgram) -> None: ...
    def visitSequence(self, sequence: SequenceProgram) -> None: ...
    def visitOnTileExecute(self, onTileExecute: OnTileExecuteProgram) -> None: ...
    def visitRepeat(self, repeat: RepeatProgram) -> None: ...
    def visitRepeatWhile(self, repeatWhile: RepeatWhileProgram) -> None: ...
    def visitOnTileSwitch(self, onTileSwitch: OnTileSwitchProgram) -> None: ...
    def visitOnEveryTileSwitch(self, onEveryTileSwitch: OnEveryTileSwitchProgram) -> None: ...
    def visitIfElse(self, ifElse: IfElseProgram) -> None: ...
    def visitDoExchange(self, doExchange: DoExchangeProgram) -> None: ...
    def visitGlobalExchange(self, globalExchange: GlobalExchangeProgram) -> None: ...
    def visitStreamCopyBegin(self, streamCopyBegin: StreamCopyBeginProgram) -> None: ...
    def visitStreamCopyMid(self, streamCopyMid: StreamCopyMidProgram) -> None: ...
    def visitStreamCopyEnd(self, streamCopyEnd: StreamCopyEndProgram) -> None: ...
    def visitWriteUndef(self, writeUndef: WriteUndefProgram) -> None: ...
    def visitSync(self, sync: SyncProgram) -> None: ...
    def visitSetLocalConsensus(self, setLocalConsensus: SetLocalConsensusProgram) -> None: ...
    def visitSetLocalConsensusFromVar(self, setLocalConsensusFromVar: SetLocalConsensusFromVarProgram) -> None: ...
    def visitGetGlobalConsensus(self, getGlobalConsensus: GetGlobalConsensusProgram) -> None: ...
    def visitSans(self, sans: SansProgram) -> None: ...
    def visitCall(self, call: CallProgram) -> None: ...
    def visitSyncAns(self, syncAns: SyncAnsProgram) -> None: ...
    def visitCodeCopy(self, codeCopy: CodeCopyProgram) -> None: ...
    def visitBlock(self, block: BlockProgram) -> None: ...
    def visitProgram(self, program: Program) -> None: ...


class ProgramTable:
    """Every program of a report, shared by all program objects.

    Making the objects reads only the id and type of each program, with the garbage collector
    paused; names and the other columns are read for all programs at once on first use.
    """

    def __init__(self, context: ReportContext) -> None:
        self._c = context
        reader = context.reader
        self._path = reader.path
        count, low, high, unique = reader.program_id_range()
        #: Whether the ids are 0..count-1, so that an id is its position (checked again on each look-up).
        self._dense = count == 0 or (unique and low == 0 and high == count - 1)
        if self._dense:
            types = reader.program_types(count)
            if len(types) != count:
                raise InconsistentReportError(f"{self._path!r}: table programs changed while it was read", self._path)
            ids: range | list = range(count)
        else:
            rows = reader.program_kinds()
            ids = [row[0] for row in rows]
            types = [row[1] for row in rows]
        unknown = Program.Type.Unknown
        with gc_paused():  # the objects form no cycles: collections would only walk them again and again
            # made without a Python frame per program: object.__new__, then each slot set by C loops
            made: list[Program] = list(map(object.__new__, map(_CLASS_BY_NAME.get, types, repeat(UnknownProgram))))
            _consume(map(_SET_C, made, repeat(context)))
            _consume(map(_SET_ID, made, ids))
            _consume(map(_SET_TYPE, made, map(_TYPE_BY_NAME.get, types, repeat(unknown))))
            self.all: list[Program] = made
        self._positions: dict | None = None
        self._names: list[str] | None = None
        self._details: list[tuple] | None = None
        self._children: dict[int, list[int]] | None = None
        self._vectors: dict[tuple[int, str], int] | None = None
        self._vector_lookups = 0

    def _position(self, program_id: Any) -> int | None:
        """The index in `all` of the program with an id, or None."""
        if (
            self._dense
            and type(program_id) is int
            and 0 <= program_id < len(self.all)
            and (self.all[program_id]._id == program_id)
        ):
            return program_id
        if self._positions is None:
            self._positions = {program._id: index for index, program in enumerate(self.all)}
        try:
            return self._positions.get(program_id)
        except TypeError:  # an unhashable id
            return None

    def get(self, program_id: int | None) -> Program:
        """The program with an id, or an InconsistentReportError naming the missing id."""
        position = self._position(program_id)
        if position is None:
            raise InconsistentReportError(
                f"{self._path!r}: program {program_id!r} is referenced but not defined", self._path
            )
        return self.all[position]

    def list_of(self, ids: Any) -> PvaList:
        """Programs for a sequence of ids."""
        get = self.get
        return PvaList(get(i) for i in ids)

    def _index(self, program_id: int) -> int:
        """The index in `all` of a program of this table, by its id."""
        if self._dense:
            return program_id  # made from range(count): every program's id is its index
        position = self._position(program_id)
        assert position is not None, program_id
        return position

    def name_of(self, program_id: int) -> str:
        """The stored name of a program of this table ("" when none)."""
        names = self._names
        if names is None:
            with gc_paused():
                loaded = self._c.reader.program_names()
            if len(loaded) != len(self.all):
                raise InconsistentReportError(f"{self._path!r}: table programs changed while it was read", self._path)
            names = self._names = [name or "" for name in loaded]
        return names[self._index(program_id)]

    def details_of(self, program_id: int) -> tuple:
        """The stored details of a program of this table (formats.pop.query.compilation.PROGRAM_DETAIL_COLUMNS)."""
        details = self._details
        if details is None:
            with gc_paused():
                details = self._c.reader.program_details()
            if len(details) != len(self.all):
                raise InconsistentReportError(f"{self._path!r}: table programs changed while it was read", self._path)
            self._details = details
        return details[self._index(program_id)]

    def _children_map(self) -> dict[int, list[int]]:
        if self._children is None:
            children: dict[int, list[int]] = {}
            for parent, child in self._c.reader.program_children():
                children.setdefault(parent, []).append(child)
            self._children = children
        return self._children

    def children_of(self, program_id: int) -> PvaList:
        """The children of a program, in order."""
        return self.list_of(self._children_map().get(program_id, ()))

    def _vector_row(self, program_id: int, kind: str) -> int | None:
        """The matrix row of a program's vector: looked up one by one at first, then, once
        `_VECTOR_LOOKUPS` have been asked for, every program's read at once."""
        if self._vectors is None:
            self._vector_lookups += 1
            if self._vector_lookups <= _VECTOR_LOOKUPS:
                return self._c.reader.program_vector_row(program_id, kind)
            self._vectors = {(program, k): row for program, k, row in self._c.reader.program_vector_rows()}
        return self._vectors.get((program_id, kind))

    def array(self, program_id: int, kind: str) -> np.ndarray:
        """A per-tile vector of a program as uint64; empty when not recorded."""
        row = self._vector_row(program_id, kind)
        return self._c.reader.matrix_row(f"program_{kind}_by_tile", row)

    def vector(self, program_id: int, kind: str) -> TileVector:
        """A per-tile vector of a program as a list; empty when not recorded."""
        return self._c.vectors.get(("program", program_id, kind), lambda: self.array(program_id, kind))

    def vars_of(self, program_id: int) -> PvaList:
        """Lowered variables used by a program, by id."""
        from .variables import lowered_variables_from_rows

        rows = self._c.reader.lowered_variables_of_program(program_id)
        return lowered_variables_from_rows(self._c.lowered_variables, rows)

    def ordered(self, owned: set[int], *, inline_calls: bool) -> list[int]:
        """The ids in `owned` in program-tree order (depth first from the control programs).

        With `inline_calls` a Call program is followed by the programs of the function it
        calls (recursively, once per call); otherwise functions follow the control programs.
        Owned programs the walk does not reach come last, by id.
        """
        if not owned:
            return []
        children = self._children_map()
        position = self._position
        everything = self.all
        reader = self._c.reader
        roots = reader.control_program_ids()
        functions = reader.function_program_ids()

        def kids(pid: int) -> list[int]:
            found = children.get(pid, [])
            if inline_calls:
                at = position(pid)
                program = None if at is None else everything[at]
                if isinstance(program, CallProgram) and program._row[4] is not None:
                    return [*found, program._row[4]]
            return found

        memo: dict[int, tuple[int, ...]] = {}
        result: list[int] = []
        for root in roots if inline_calls else [*roots, *functions]:
            result.extend(_expand(root, owned, memo, kids))
        if inline_calls:
            reached = set(result)
            for function in functions:
                if function not in memo:
                    result.extend(p for p in _expand(function, owned, memo, kids) if p not in reached)
        else:
            result = list(dict.fromkeys(result))  # first occurrence of each, in order
        reached = set(result)
        result.extend(sorted(p for p in owned if p not in reached))
        return result


def _expand(root: int, owned: set[int], memo: dict[int, tuple[int, ...]], kids: Any) -> tuple[int, ...]:
    """The owned programs of the tree under `root`, depth first; a program on its own path is skipped."""
    if root in memo:
        return memo[root]
    on_path: set[int] = set()
    stack: list[tuple[int, bool]] = [(root, False)]
    while stack:
        pid, done = stack.pop()
        if done:
            on_path.discard(pid)
            parts: list[int] = [pid] if pid in owned else []
            for kid in kids(pid):
                parts.extend(memo.get(kid, ()))
            memo[pid] = tuple(parts) if parts else ()
            continue
        if pid in memo or pid in on_path:
            continue
        on_path.add(pid)
        stack.append((pid, True))
        for kid in reversed(kids(pid)):
            if kid not in memo and kid not in on_path:
                stack.append((kid, False))
    return memo.get(root, ())
