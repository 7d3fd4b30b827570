"""The events of a Chrome trace event JSON file, one at a time, in bounded memory.

Two readers give the same values: `read_trace_items` (ijson, exact about every fault and its
location, and accepting an array whose closing bracket is missing) and `read_trace_items_fast`
(orjson over blocks of whole events, several times faster; `read_trace_blocks_fast` gives
the same a block at a time, its status naming the keys found after the events array), which raises `NotFastError` as soon as it
meets anything it cannot be sure to read as the exact reader does (a syntax error, a missing
bracket, integers beyond 64 bits, deep nesting); the caller then starts again with the exact
reader.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO, Protocol

import orjson

from ..errors import InvalidInputError
from ..json_values import plain
from ..streaming.json_events import json_events
from ..streaming.tree import MAX_DEPTH, InputProblem, build_tree, describe, location

#: Bytes of events parsed in one orjson call (a single larger event is parsed whole).
FAST_BLOCK = 1 << 20
#: Most bytes read while looking for the traceEvents key of the object form.
_HEAD_LIMIT = 64 << 20
#: Nesting the fast reader accepts: well below the exact reader's limit (legacy.tree.MAX_DEPTH).
_FAST_DEPTH = MAX_DEPTH - 10
_TRACE_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
#: An integer literal of 19 or more digits may not fit in 64 bits: the exact reader decides those that do not.
_LONG_DIGITS = re.compile(rb"(?<![0-9.])(-?)([0-9]{19,})(?![.eE0-9])")
#: Digits as "0" and every other byte as " ", to find runs of 19 digits at memory speed first.
_DIGITS_AS_ZEROS = bytes(0x30 if 0x30 <= byte <= 0x39 else 0x20 for byte in range(256))
_NINETEEN_ZEROS = b"0" * 19
#: An array of number characters only, one of them a '.', 'e' or 'E': numbers that may mix with integers.
_FRACTION_ARRAY = re.compile(rb"\[[-+0-9.eE, \t\r\n]*[.eE][-+0-9.eE, \t\r\n]*\]")
_NOT_BRACKETS = bytes(byte for byte in range(256) if byte not in b"{}[]")
_SPACE = b" \t\r\n"


class Readable(Protocol):
    """A binary file open for reading (only `read` is used)."""

    def read(self, size: int = -1, /) -> bytes: ...


class NotFastError(Exception):
    """The fast reader met input that only the exact reader reads faithfully."""


def _one_value(first: tuple[str, Any], events: Iterator) -> Iterator[tuple[str, Any]]:
    yield first
    if first[0] not in ("start_map", "start_array"):
        return
    depth = 1
    for event in events:
        yield event
        kind = event[0]
        if kind == "start_map" or kind == "start_array":
            depth += 1
        elif kind == "end_map" or kind == "end_array":
            depth -= 1
            if depth == 0:
                return


def read_trace_items(
    raw: BinaryIO, name: str, *, progress: Callable[[int], None] | None = None
) -> tuple[Iterator[tuple[list, Any]], dict, dict]:
    """The trace events of a Chrome trace file as (JSON location parts, value), one at a time.

    Also returns the other top-level keys (filled in as they are read; complete once the
    iterator is exhausted) and a status dict (``truncated`` when the array was never closed).
    """
    others: dict = {}
    status = {"truncated": False}
    events = json_events(raw, None, progress=progress)

    def items() -> Iterator[tuple[list, Any]]:
        try:
            first = next(events)
        except StopIteration:
            raise InvalidInputError(f"{name!r}: the file holds no JSON value", name) from None
        except InputProblem as problem:
            raise InvalidInputError(f"{name!r}: the start of the document{problem.where()}: {problem}", name) from None
        if first[0] == "start_array":
            yield from _array_items(events, [], name, status)
            return
        if first[0] != "start_map":
            value = build_tree(_one_value(first, events), name)
            raise InvalidInputError(
                f"{name!r}: $: expected an array of trace events or an object with "
                f"traceEvents, found {describe(value)}",
                name,
            )
        found = False
        while True:
            try:
                event = next(events)
            except StopIteration:
                return
            except InputProblem as problem:
                raise InvalidInputError(f"{name!r}: $ (top level){problem.where()}: {problem}", name) from None
            if event[0] == "end_map":
                break
            key = event[1]
            try:
                start = next(events)
            except InputProblem as problem:
                raise InvalidInputError(f"{name!r}: {location([key])}{problem.where()}: {problem}", name) from None
            if key == "traceEvents" and start[0] == "start_array":
                found = True
                yield from _array_items(events, ["traceEvents"], name, status)
                if status["truncated"]:
                    return
            else:
                others[key] = plain(build_tree(_one_value(start, events), name, prefix=[key]))
        if not found:
            raise InvalidInputError(
                f"{name!r}: $: expected a traceEvents array, found top-level keys {', '.join(others) or 'none'}", name
            )
        try:
            next(events)
        except StopIteration:
            pass
        except InputProblem as problem:
            raise InvalidInputError(f"{name!r}: $ (after the end){problem.where()}: {problem}", name) from None

    return items(), others, status


def _array_items(events: Iterator, prefix: list, name: str, status: dict) -> Iterator[tuple[list, Any]]:
    index = 0
    while True:
        try:
            first = next(events)
        except StopIteration:
            status["truncated"] = True
            return
        except InputProblem as problem:
            if "premature EOF" in str(problem) or "incomplete" in str(problem).lower():
                status["truncated"] = True  # Chrome accepts an array whose ']' is missing
                return
            raise InvalidInputError(
                f"{name!r}: {location(prefix + [index])}{problem.where()}: {problem}", name
            ) from None
        if first[0] == "end_array":
            return
        parts = prefix + [index]
        value = build_tree(_one_value(first, events), name, prefix=parts)
        yield parts, value
        index += 1


def read_trace_items_fast(
    raw: Readable, *, progress: Callable[[int], None] | None = None
) -> tuple[Iterator[tuple[list, Any]], dict, dict]:
    """As `read_trace_items`, with orjson over blocks of whole events; raises NotFastError (possibly after
    yielding some items) where the exact reader must decide."""
    others: dict = {}
    status = {"truncated": False}
    return _FastReader(raw, progress, status).items(others), others, status


def read_trace_blocks_fast(
    raw: Readable, *, progress: Callable[[int], None] | None = None
) -> tuple[Iterator[tuple[list, int, list]], dict, dict]:
    """As `read_trace_items_fast`, a block of events at a time: (JSON location of the array, index of
    the block's first event in it, the events)."""
    others: dict = {}
    status: dict = {"truncated": False}
    return _FastReader(raw, progress, status).blocks(others), others, status


class _FastReader:
    def __init__(self, raw: Readable, progress: Callable[[int], None] | None, status: dict) -> None:
        self._raw = raw
        self._status = status
        self._progress = progress
        self._buf = b""
        self._pos = 0
        self._eof = False

    def _fill(self, size: int) -> None:
        """Have at least `size` bytes from the current position in the buffer, unless the file ends first."""
        if len(self._buf) - self._pos >= size or self._eof:
            return
        parts = [self._buf[self._pos :]]
        have = len(parts[0])
        while have < size:
            data = self._raw.read(max(size - have, FAST_BLOCK))
            if not data:
                self._eof = True
                break
            if self._progress is not None:
                self._progress(len(data))
            parts.append(data)
            have += len(data)
        self._buf = b"".join(parts)
        self._pos = 0

    def _skip_space(self) -> int:
        """The next byte that is not white space (-1 at the end of the file)."""
        while True:
            buf = self._buf
            pos = self._pos
            while pos < len(buf) and buf[pos] in _SPACE:
                pos += 1
            self._pos = pos
            if pos < len(buf):
                return buf[pos]
            if self._eof:
                return -1
            self._fill(FAST_BLOCK)

    def items(self, others: dict) -> Iterator[tuple[list, Any]]:
        for prefix, first, events in self.blocks(others):
            for offset, event in enumerate(events):
                yield prefix + [first + offset], event

    def blocks(self, others: dict) -> Iterator[tuple[list, int, list]]:
        self._fill(FAST_BLOCK)
        first = self._skip_space()
        if first == ord("["):
            prefix: list = []
        elif first == ord("{"):
            others.update(self._head())
            prefix = ["traceEvents"]
        else:
            raise NotFastError("not an array or an object")
        self._pos += 1  # the array's '['
        index = 0
        while True:
            self._fill(FAST_BLOCK)
            byte = self._skip_space()
            if byte == ord("]"):
                self._pos += 1
                break
            if index:
                if byte != ord(","):
                    raise NotFastError("no comma between events")
                self._pos += 1
                if self._skip_space() == ord("]"):
                    raise NotFastError("a comma before the closing bracket")
            events = self._block()
            yield prefix, index, events
            index += len(events)
        if prefix:
            tail = self._tail()
            self._status["keys_after_events"] = list(tail)
            others.update(tail)
        elif self._skip_space() != -1:
            raise NotFastError("text after the array")

    def _head(self) -> dict:
        """The keys of the object form before traceEvents (the position moves to its '[')."""
        while True:
            match = _TRACE_EVENTS_KEY.search(self._buf, self._pos)
            if match is not None or self._eof or len(self._buf) - self._pos > _HEAD_LIMIT:
                break
            self._fill(len(self._buf) - self._pos + FAST_BLOCK)
        if match is None:
            raise NotFastError("no traceEvents key near the start")
        head = self._buf[self._pos : match.start()]
        if b"traceEvents" in head or _long_integer(head):
            raise NotFastError("an earlier traceEvents text or a long integer")
        try:
            document = orjson.loads(head + b'"traceEvents":[]}')
        except orjson.JSONDecodeError:
            raise NotFastError("the keys before traceEvents") from None
        self._pos = match.end() - 1
        return {key: plain(_exact_like(value, 1)) for key, value in document.items() if key != "traceEvents"}

    def _tail(self) -> dict:
        """The keys of the object form after the traceEvents array."""
        while not self._eof:
            self._fill(len(self._buf) - self._pos + FAST_BLOCK)
        rest = self._buf[self._pos :]
        self._buf, self._pos = b"", 0
        text = rest.lstrip(_SPACE)
        if text.startswith(b","):
            text = b"{" + text[1:]
        elif text.startswith(b"}"):
            text = b"{" + text
        else:
            raise NotFastError("no comma or brace after traceEvents")
        if b"traceEvents" in text or _long_integer(text):
            raise NotFastError("another traceEvents text or a long integer")
        try:
            document = orjson.loads(text)
        except orjson.JSONDecodeError:
            raise NotFastError("the keys after traceEvents") from None
        return {key: plain(_exact_like(value, 1)) for key, value in document.items()}

    def _block(self) -> list:
        """The next whole events (at least one), parsed in one orjson call."""
        size = FAST_BLOCK
        while True:
            self._fill(size + 1)
            buf, pos = self._buf, self._pos
            limit = min(len(buf), pos + size)
            cut = buf.rfind(b"}", pos, limit)
            while cut >= 0:
                after = cut + 1
                while after < len(buf) and buf[after] in _SPACE:
                    after += 1
                if after < len(buf) and buf[after] in b",]":
                    data = b"[" + buf[pos : cut + 1] + b"]"
                    try:
                        events = orjson.loads(data)
                    except orjson.JSONDecodeError as exc:
                        if exc.pos < len(data) - 1:
                            raise NotFastError("invalid JSON") from None
                        cut = buf.rfind(b"}", pos, cut)  # the cut fell inside an event
                        continue
                    if _long_integer(data):
                        raise NotFastError("a long integer")
                    self._pos = cut + 1
                    shallow = _shallow(data)
                    if not shallow or (b"[" in data[1:-1] and _may_mix_numbers(data)):  # nesting, or arrays to remake
                        return [_exact_like(event, 1) for event in events]
                    return events
                cut = buf.rfind(b"}", pos, cut)
            if self._eof and limit >= len(buf):
                raise NotFastError("the array is not closed")
            size *= 2


def _shallow(data: bytes, rounds: int = 8) -> bool:
    """Whether the brackets of `data` nest at most `rounds` deep (False too when brackets in strings
    leave them unbalanced): innermost pairs are removed, a round at a time."""
    brackets = data.translate(None, _NOT_BRACKETS)
    for _ in range(rounds):
        if not brackets:
            return True
        brackets = brackets.replace(b"{}", b"").replace(b"[]", b"")
    return not brackets


def _may_mix_numbers(data: bytes) -> bool:
    """Whether an array of `data` may hold numbers with a fraction or an exponent (which makes the
    exact reader give floats for all its numbers): an array of number characters only with a '.',
    'e' or 'E' among them. Arrays of integers only, as Kineto's input dims, need no change."""
    return _FRACTION_ARRAY.search(data) is not None


def _long_integer(text: bytes) -> bool:
    """Whether `text` may hold an integer literal beyond 64 bits (signed), which the exact reader
    refuses (19-digit ones that fit, such as Kineto's baseTimeNanoseconds, are read as they are)."""
    if text.translate(_DIGITS_AS_ZEROS).find(_NINETEEN_ZEROS) < 0:
        return False
    for match in _LONG_DIGITS.finditer(text):
        value = int(match.group(2))
        if value >= (1 << 63) + (match.group(1) == b"-"):
            return True
    return False


def _exact_like(value: Any, depth: int) -> Any:
    """`value` (from orjson) as the exact reader gives it: an array of numbers that holds a float
    is all floats (the exact reader parses number arrays in bulk)."""
    kind = type(value)
    if kind is dict:
        if depth > _FAST_DEPTH:
            raise NotFastError("deep nesting")
        for key, inner in value.items():
            inner_kind = type(inner)
            if inner_kind is dict or inner_kind is list:
                value[key] = _exact_like(inner, depth + 1)
        return value
    if kind is list:
        if depth > _FAST_DEPTH:
            raise NotFastError("deep nesting")
        if value and (type(value[0]) is int or type(value[0]) is float):
            kinds = {type(item) for item in value}
            if kinds == {int, float}:
                return [float(item) for item in value]
            if kinds <= {int, float}:
                return value
        for index, inner in enumerate(value):
            inner_kind = type(inner)
            if inner_kind is dict or inner_kind is list:
                value[index] = _exact_like(inner, depth + 1)
        return value
    return value
