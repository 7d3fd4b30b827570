"""Building a document tree from parse events, with arrays of numbers kept as Runs.

Event sources (json_events, cbor_events) yield ``(event, value)`` pairs in the vocabulary of
ijson's basic_parse, plus ``("splice", Run)`` for a stretch of numbers inside an array and
``("value", v)`` for a complete value decoded in bulk. Sources signal bad bytes by raising
`InputProblem`; the builder adds the JSON location (``$.memory.byTile.total[12]``) it had
reached, so every message names both the file and the place in the document.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from decimal import Decimal
from typing import Any, Protocol

from ..errors import InvalidInputError
from .runs import NonFiniteNumberError, Run, non_finite_message, spelling

#: Deepest nesting accepted; legacy profiles nest about ten levels.
MAX_DEPTH = 200

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ByteSource(Protocol):
    """What an event source reads: a binary file, or a window on one (only `read` is used)."""

    def read(self, size: int = -1, /) -> bytes: ...


class InputProblem(Exception):  # noqa: N818 (an event-source signal, turned into InvalidInputError)
    """Raised by an event source: what is wrong with the bytes, and where (if known)."""

    def __init__(
        self,
        message: str,
        offset: int | None = None,
        line: int | None = None,
        column: int | None = None,
        approximate: bool = False,
    ) -> None:
        super().__init__(message)
        self.offset = offset
        self.line = line
        self.column = column
        self.approximate = approximate

    def where(self) -> str:
        """The byte position as text, or '' when unknown."""
        if self.offset is None:
            return ""
        text = f"byte {self.offset:,}"
        if self.line is not None:
            text += f", line {self.line}, column {self.column}"
        return (" near " if self.approximate else " at ") + text


class NonFiniteProblem(InputProblem):
    """A NaN or an infinity where a number belongs (JSON and the legacy formats have none).

    ``parts`` locate it inside the value being read; ``index`` (if not None) is its position
    among numbers that follow the items already read into the current array.
    """

    def __init__(
        self,
        message: str,
        offset: int | None = None,
        line: int | None = None,
        column: int | None = None,
        *,
        parts: list | None = None,
        index: int | None = None,
    ) -> None:
        super().__init__(message, offset, line, column)
        self.parts = parts or []
        self.index = index


class Splice:
    """A stretch of numbers inside an array (the array may also hold other values)."""

    __slots__ = ("run",)

    def __init__(self, run: Run) -> None:
        self.run = run


def location(parts: Iterable[str | int]) -> str:
    """A JSON location such as ``$.computeSets.names[3]`` from keys and indices."""
    out = ["$"]
    for part in parts:
        if isinstance(part, int):
            out.append(f"[{part}]")
        elif _IDENTIFIER.match(part):
            out.append(f".{part}")
        else:
            out.append("[" + _quote(part) + "]")
    return "".join(out)


def _quote(key: str) -> str:
    text = key.replace("\\", "\\\\").replace('"', '\\"')
    if len(text) > 60:
        text = text[:57] + "..."
    return f'"{text}"'


def describe(value: Any) -> str:
    """A short description of a value for messages: its JSON type and, if short, the value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        text = repr(value)
        return f"the number {text if len(text) <= 30 else text[:27] + '...'}"
    if isinstance(value, str):
        return f"the string {_quote(value)}"
    if isinstance(value, Run):
        return f"an array of {value.count:,} numbers"
    if isinstance(value, list):
        return f"an array of {len(value):,} items"
    if isinstance(value, dict):
        return f"an object with {len(value):,} keys"
    return type(value).__name__


def _frame_parts(stack: list) -> list[str | int]:
    parts: list[str | int] = []
    for container, key, index in stack:
        if isinstance(container, dict):
            if key is not None:
                parts.append(key)
        else:
            parts.append(index)
    return parts


def _number(value: Any) -> int | float:
    if isinstance(value, (bool, int)):
        return value
    if isinstance(value, Decimal):
        if value == value.to_integral_value() and abs(value.adjusted()) < 40:
            return int(value)
        value = float(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise NonFiniteNumberError(non_finite_message(spelling(value)))
        return value
    raise ValueError(f"unexpected number type {type(value).__name__}")


def _finish_array(items: list) -> Any:
    if len(items) == 1 and isinstance(items[0], Splice):
        return items[0].run
    if not any(isinstance(item, Splice) for item in items):
        return items
    out: list = []
    for item in items:
        if isinstance(item, Splice):
            out.extend(item.run.tolist())
        else:
            out.append(item)
    return out


def build_tree(
    events: Iterable[tuple[str, Any]], name: str, *, max_depth: int = MAX_DEPTH, prefix: Iterable[str | int] = ()
) -> Any:
    """The document the events describe; arrays of numbers become `Run` objects.

    Raises InvalidInputError naming `name` (the input path) and the JSON location of the fault
    (`prefix` locates the value when the events describe part of a larger document).
    """
    prefix = list(prefix)
    stack: list[list] = []  # [container, current key, index of the next item]
    root: Any = None
    have_root = False
    iterator = iter(events)
    while True:
        try:
            event, value = next(iterator)
        except StopIteration:
            break
        except InputProblem as problem:
            parts = prefix + _frame_parts(stack)
            if isinstance(problem, NonFiniteProblem):
                if problem.index is not None and stack and isinstance(stack[-1][0], list):
                    last = parts[-1]
                    assert isinstance(last, int), "an array's part of the location is its index"
                    parts[-1] = last + problem.index
                parts += problem.parts
            where = location(parts) if have_root or stack or prefix or parts else "the start of the document"
            raise InvalidInputError(f"{name!r}: {where}{problem.where()}: {problem}", name) from None
        try:
            if event == "map_key":
                stack[-1][1] = value
                continue
            if event == "start_map" or event == "start_array":
                if len(stack) >= max_depth:
                    raise ValueError(f"nesting deeper than {max_depth} levels")
                stack.append([{} if event == "start_map" else [], None, 0])
                continue
            if event == "end_map":
                value = stack.pop()[0]
            elif event == "end_array":
                value = _finish_array(stack.pop()[0])
            elif event == "splice" and not stack:
                pass  # numbers at the top of a partial stream: the Run is the value
            elif event == "splice":
                frame = stack[-1]
                frame[0].append(Splice(value))
                frame[2] += value.count
                continue
            elif event == "number":
                value = _number(value)
            if not stack:
                root = value
                have_root = True
                continue
            frame = stack[-1]
            container = frame[0]
            if isinstance(container, dict):
                container[frame[1]] = value
            else:
                container.append(value)
                frame[2] += 1
        except ValueError as exc:
            raise InvalidInputError(f"{name!r}: {location(prefix + _frame_parts(stack))}: {exc}", name) from None
    if stack or not have_root:
        raise InvalidInputError(f"{name!r}: {location(prefix + _frame_parts(stack))}: unexpected end of input", name)
    return root


def json_path(parts: Iterable[str | int]) -> str:
    """An exact, parseable JSON location (keys that are not identifiers are JSON-quoted)."""
    out = ["$"]
    for part in parts:
        if isinstance(part, int):
            out.append(f"[{part}]")
        elif _IDENTIFIER.match(part):
            out.append(f".{part}")
        else:
            out.append("[" + json.dumps(part) + "]")
    return "".join(out)


_PATH_TOKEN = re.compile(r'\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]')


def parse_json_path(text: str) -> list[str | int]:
    """The keys and indices of a location written by `json_path`."""
    if not text.startswith("$"):
        raise ValueError(f"a JSON location starts with '$', got {text!r}")
    parts: list[str | int] = []
    position = 1
    while position < len(text):
        match = _PATH_TOKEN.match(text, position)
        if match is None:
            raise ValueError(f"cannot parse JSON location {text!r} at character {position}")
        key, index, quoted = match.groups()
        parts.append(key if key is not None else int(index) if index is not None else json.loads(quoted))
        position = match.end()
    return parts
