"""Control programs (poplar::program): Sequence, Repeat, Execute, Copy, If, Switch, Call and more."""

from __future__ import annotations

from collections.abc import Sequence as _Seq
from typing import Any

from .debug import _location, current_scope
from .errors import GraphError
from .graph import ComputeSet, DataStream, Function, RemoteBuffer
from .tensor import Tensor

SYNC_TYPES = {
    "internal": "Internal",
    "global": "GS1",
    "external": "External",
    "gs1": "GS1",
    "gs2": "GS2",
    "gs3": "GS3",
    "gs4": "GS4",
}


class Program:
    """Base class of every control program."""

    kind = "Program"

    def __init__(self, name: str = "") -> None:
        self.name = name or ""
        self.location = _location()
        self.scope = current_scope()
        self.debug_ids: list[int] | None = None  # its debug context, once lowered

    def children(self) -> list[Program]:
        return []

    def __repr__(self) -> str:
        return f"<{type(self).__name__}{' ' + repr(self.name) if self.name else ''}>"


class Sequence(Program):
    """Run programs one after the other."""

    kind = "Sequence"

    def __init__(self, *programs: Program, name: str = "") -> None:
        super().__init__(name)
        self.programs: list[Program] = []
        for p in programs:
            if isinstance(p, _Seq) and not isinstance(p, Program):
                for q in p:
                    self.add(q)
            else:
                self.add(p)

    def add(self, program: Program) -> Sequence:
        if not isinstance(program, Program):
            raise GraphError(f"Sequence.add expects a program, got {type(program).__name__}")
        self.programs.append(program)
        return self

    def children(self) -> list[Program]:
        return list(self.programs)


class Repeat(Program):
    """Run `body` `count` times."""

    kind = "Repeat"

    def __init__(self, count: int, body: Program, name: str = "") -> None:
        super().__init__(name)
        if int(count) < 0:
            raise GraphError(f"Repeat count must be non-negative, got {count}")
        self.count = int(count)
        self.body = body

    def children(self) -> list[Program]:
        return [self.body]


class RepeatWhileTrue(Program):
    """Run `cond`, then `body` while `predicate` (a one-element tensor) is true after `cond`.

    `simulatedIterations` is how many times the body runs when the engine runs without data.
    """

    kind = "RepeatWhile"
    until = False

    def __init__(
        self,
        cond: Program,
        predicate: Tensor,
        body: Program,
        name: str = "",
        simulatedIterations: int = 1,
        maxIterations: int = 1_000_000,
    ) -> None:
        super().__init__(name)
        if predicate.numElements() != 1:
            raise GraphError(
                f"the predicate of {type(self).__name__} must have one element, got {predicate.numElements()}"
            )
        self.cond = cond
        self.predicate = predicate
        self.body = body
        self.simulated_iterations = int(simulatedIterations)
        self.max_iterations = int(maxIterations)

    def children(self) -> list[Program]:
        return [self.cond, self.body]


class RepeatWhileFalse(RepeatWhileTrue):
    """Like RepeatWhileTrue, but loops while the predicate is false."""

    until = True


class Execute(Program):
    """Run the vertices of a compute set."""

    kind = "Execute"

    def __init__(self, computeSet: ComputeSet, name: str = "") -> None:
        if not isinstance(computeSet, ComputeSet):
            raise GraphError(f"Execute expects a ComputeSet, got {type(computeSet).__name__}")
        super().__init__(name)
        self.compute_set = computeSet


class Copy(Program):
    """Copy tensor to tensor, stream to tensor, tensor to stream, or to and from a remote buffer."""

    kind = "Copy"

    def __init__(self, src, dst, offset: int = 0, name: str = "", optimiseMemory: bool = False) -> None:
        super().__init__(name)
        ok = (Tensor, DataStream, RemoteBuffer)
        if not isinstance(src, ok) or not isinstance(dst, ok):
            raise GraphError(
                f"Copy expects tensors, streams or remote buffers, got {type(src).__name__} and {type(dst).__name__}"
            )
        if not isinstance(src, Tensor) and not isinstance(dst, Tensor):
            raise GraphError("Copy needs a tensor on at least one side")
        if isinstance(src, Tensor) and isinstance(dst, Tensor):
            if src.numElements() != dst.numElements():
                raise GraphError(f"Copy between tensors of {src.numElements()} and {dst.numElements()} elements")
            if src.dtype != dst.dtype:
                raise GraphError(f"Copy between tensors of types {src.dtype} and {dst.dtype}")
        if optimiseMemory and not (isinstance(src, DataStream) or isinstance(dst, DataStream)):
            raise GraphError("optimiseMemory applies to a copy to or from a data stream")
        self.src = src
        self.dst = dst
        self.offset = int(offset)
        # a stream copy rearranged on the host: each tile exchanges its data in memory order
        # (Poplar's Copy(stream, tensor, optimiseMemory))
        self.optimiseMemory = bool(optimiseMemory)


class If(Program):
    """Run `then` if `predicate` (one element) is non-zero, else `else_`."""

    kind = "If"

    def __init__(
        self, predicate: Tensor, then: Program, else_: Program | None = None, name: str = "", simulatedValue: Any = None
    ) -> None:
        super().__init__(name)
        if predicate.numElements() != 1:
            raise GraphError(f"the predicate of If must have one element, got {predicate.numElements()}")
        self.predicate = predicate
        self.then = then
        self.else_ = else_ if else_ is not None else Sequence()
        self.simulated_value = simulatedValue

    def children(self) -> list[Program]:
        return [self.then, self.else_]


class Switch(Program):
    """Run the case whose value equals `control` (one integer element), else `default`."""

    kind = "Switch"

    def __init__(
        self, control: Tensor, cases=(), default: Program | None = None, name: str = "", simulatedValue: Any = None
    ) -> None:
        super().__init__(name)
        if control.numElements() != 1:
            raise GraphError(f"the control tensor of Switch must have one element, got {control.numElements()}")
        self.control = control
        self.cases: list[tuple[int, Program]] = []
        for value, program in cases:
            self.add(value, program)
        self.default = default if default is not None else Sequence()
        self.simulated_value = simulatedValue

    def add(self, value: int, program: Program) -> Switch:
        if any(v == int(value) for v, _ in self.cases):
            raise GraphError(f"Switch already has a case for {value}")
        self.cases.append((int(value), program))
        return self

    def children(self) -> list[Program]:
        return [p for _, p in self.cases] + [self.default]


class Call(Program):
    """Run a function added with Graph.addFunction."""

    kind = "Call"

    def __init__(self, function: Function, name: str = "") -> None:
        if not isinstance(function, Function):
            raise GraphError(f"Call expects a Function from graph.addFunction, got {type(function).__name__}")
        super().__init__(name)
        self.function = function


class WriteUndef(Program):
    """Mark a tensor's contents as undefined: its variables are dead from here."""

    kind = "WriteUndef"

    def __init__(self, tensor: Tensor, name: str = "") -> None:
        super().__init__(name)
        self.tensor = tensor


class Sync(Program):
    """Synchronise tiles: 'internal' (one IPU) or 'global' (all IPUs)."""

    kind = "Sync"

    def __init__(self, syncType: str = "internal", name: str = "") -> None:
        super().__init__(name)
        found = SYNC_TYPES.get(str(syncType).lower())
        if found is None or found == "External":
            raise GraphError(f"sync type must be 'internal' or 'global', got {syncType!r}")
        self.sync_type = found


class PrintTensor(Program):
    """Copy a tensor to the host and print it with a title."""

    kind = "PrintTensor"

    def __init__(self, title, tensor: Tensor | None = None, name: str = "") -> None:
        if tensor is None:
            title, tensor = "", title
        super().__init__(name)
        if not isinstance(tensor, Tensor):
            raise GraphError(f"PrintTensor expects a Tensor, got {type(tensor).__name__}")
        self.title = str(title)
        self.tensor = tensor
