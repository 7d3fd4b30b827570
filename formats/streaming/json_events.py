"""Incremental JSON events for legacy profiles: ijson for the structure, numpy for number arrays.

Legacy profiles are dominated by long arrays of integers (per-tile vectors). Parsing each number
as an ijson event costs a Python round trip per value, so a filter sits between the file and
ijson: it finds arrays that start with a number, parses their numbers in bulk (C speed), stores
them as a `Run` (spooled to disk when long), and hands ijson a short placeholder string in their
place. ijson (its C backend when available) parses the remaining structure and validates the
grammar; the placeholder comes back as a ``splice`` event. Memory stays bounded by the read
buffer and the batch size, whatever the size of the input.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

import numpy as np

from .runs import Run, Spool, non_finite_message
from .tree import ByteSource, InputProblem, NonFiniteProblem

try:  # the C backend is ~10x faster; fall back to whatever ijson picks
    import ijson.backends.yajl2_c as _ijson
except ImportError:  # pragma: no cover - depends on the ijson build
    import ijson as _ijson

from ijson.common import JSONError as _IjsonError

#: Bytes read from the file at a time.
READ_SIZE = 1 << 20
#: Longest stretch of number text parsed in one go; longer arrays are parsed in pieces.
BATCH_BYTES = 4 << 20
#: Bytes ijson asks for at a time (also the uncertainty of syntax-error positions).
IJSON_BUFFER = 64 << 10

_INTERESTING = re.compile(rb'["\[]')
_STRING_STOP = re.compile(rb'["\\]')
_SPACE = re.compile(rb"[ \t\r\n]*")
_NUMBER_TEXT = re.compile(rb"[0-9,.eE+\- \t\r\n]*")


def _span_end(pattern: re.Pattern[bytes], buf: bytes, pos: int) -> int:
    """Where the span of `pattern` starting at `pos` ends (the patterns above also match nothing)."""
    match = pattern.match(buf, pos)
    assert match is not None, "the pattern matches the empty string"
    return match.end()


_NUMBER_CHARS = b"0123456789,.eE+- \t\r\n"
_NUMBER_START = frozenset(b"-0123456789")
#: What JavaScript writes for non-finite numbers; JSON has no such literals (RFC 8259, section 6).
_NON_FINITE = re.compile(rb"-?(?:NaN|Infinity)")
#: Letters of those literals: held back at the end of a buffer so a literal split between two
#: reads is still seen whole.
_LITERAL_TAIL = frozenset(b"-NaIinfty")
_WHITESPACE = b" \t\r\n"

_NORMAL, _STRING, _RUN = range(3)


_DIGITS_AND_COMMA = b"0123456789,"
_INT64_MAX = np.iinfo(np.int64).max
_POWERS_OF_TEN = np.array([10**k for k in range(19)], dtype=np.int64)


def _compact_integers(text: bytes, checked: bool = False) -> np.ndarray | None:
    """Fast path: `text` is non-negative integers separated by bare commas; None if not sure.

    `checked` says the caller already knows `text` holds only digits and commas. Leading zeros,
    empty items and numbers of 19 or more digits are left to the exact parser: they are caught
    because the digits of the parsed values, plus the commas, must account for every byte.
    """
    if not text or (not checked and text.translate(None, _DIGITS_AND_COMMA)):
        return None
    if text[0] == 0x2C or text[-1] == 0x2C:
        return None
    try:
        array = np.fromstring(text, dtype=np.int64, sep=",")
    except ValueError:
        return None
    if not array.size:
        return None
    digits = array.size  # every value has one digit, plus one per power of ten it reaches
    for power in _POWERS_OF_TEN[1:]:
        above = int(np.count_nonzero(array >= power))
        if not above:
            break
        digits += above
    if digits + array.size - 1 != len(text) or array.max() == _INT64_MAX:
        return None  # a leading zero, an empty item or a saturated 19+ digit number
    return array


def parse_numbers(text: bytes, compact: bool = False) -> np.ndarray:
    """The numbers of a comma-separated JSON number list (no brackets), strictly checked.

    Raises json.JSONDecodeError (with the position in `text`) for anything that is not valid
    JSON number syntax.
    """
    fast = _compact_integers(text, compact)
    if fast is not None:
        return fast
    values = json.loads(b"[" + text + b"]")  # only numbers: the text matched _NUMBER_TEXT
    if not values:
        return np.zeros(0, dtype=np.int64)
    array = np.array(values)
    if array.dtype.kind == "O":
        raise ValueError("number does not fit in 64 bits")
    return array


class RunFilter:
    """A file-like reader that replaces arrays of numbers by placeholders, collecting them as Runs.

    ``read`` returns the filtered JSON text for ijson. Problems inside a number array are raised
    (as InputProblem) from the read *after* the one that returned everything before the array,
    so the event consumer knows the exact JSON location when it sees the exception.
    """

    def __init__(self, raw: ByteSource, spool: Spool | None, *, progress: Callable[[int], None] | None = None) -> None:
        self._raw = raw
        self._spool = spool
        self._progress = progress
        self.nonce = "\x00pva-run-" + secrets.token_hex(8) + ":"
        self._nonce_bytes = json.dumps(self.nonce).encode()[:-1]  # opening quote and escaped text
        self.runs: dict[str, Run] = {}
        self._counter = 0
        self._buf = b""
        self._pos = 0
        self._base = 0  # input offset of _buf[0]
        self._lines = 1  # line number at _buf[0]
        self._line_start = 0  # input offset where that line starts
        self._eof = False
        self._state = _NORMAL
        self._escape = False
        self._run: Run | None = None
        self._run_start = 0
        self._pending_error: InputProblem | None = None
        self._out: list[bytes] = []
        self._out_size = 0
        self._started = False
        self.last_output_offset = 0  # input offset reached by the last chunk returned

    # -- positions ------------------------------------------------------------------------

    def position(self, offset: int) -> tuple[int, int]:
        """Line and column (1-based) of an input offset inside the current buffer."""
        index = offset - self._base
        line = self._lines + self._buf.count(b"\n", 0, index)
        newline = self._buf.rfind(b"\n", 0, index)
        start = self._base + newline + 1 if newline >= 0 else self._line_start
        return line, offset - start + 1

    def _problem(self, message: str, offset: int) -> InputProblem:
        line, column = self.position(offset)
        return InputProblem(message, offset, line, column)

    # -- input ----------------------------------------------------------------------------

    def _fill(self) -> bool:
        """Read more input; False at end of file."""
        if self._eof:
            return False
        chunk = self._raw.read(READ_SIZE)
        if self._progress is not None:
            self._progress(len(chunk))
        if not chunk:
            self._eof = True
            return False
        if not self._started:
            self._started = True
            if chunk.startswith(b"\xef\xbb\xbf"):
                chunk = chunk[3:]
                self._base = 3
                self._line_start = 3
        if self._pos:
            dropped = self._buf[: self._pos]
            newlines = dropped.count(b"\n")
            if newlines:
                self._lines += newlines
                self._line_start = self._base + dropped.rfind(b"\n") + 1
            self._base += self._pos
            self._buf = self._buf[self._pos :] + chunk
            self._pos = 0
        else:
            self._buf += chunk
        return True

    def _emit(self, data: bytes) -> None:
        if data:
            self._out.append(data)
            self._out_size += len(data)

    # -- runs -----------------------------------------------------------------------------

    def _add_numbers(self, text: bytes, offset: int, compact: bool = False) -> None:
        try:
            array = parse_numbers(text, compact)
        except json.JSONDecodeError as exc:
            bad = offset + max(0, exc.pos - 1)
            raise self._problem(f"invalid number array: {exc.msg}", bad) from None
        assert self._run is not None, "numbers are added inside an open run"
        try:
            self._run.add(array, self._spool)
        except ValueError as exc:
            raise self._problem(f"invalid number array: {exc}", offset) from None

    def _placeholder(self) -> bytes:
        key = f"{self._counter}"
        self._counter += 1
        assert self._run is not None, "a placeholder closes an open run"
        self.runs[key] = self._run
        self._run = None
        return b"[" + self._nonce_bytes + key.encode() + b'"'

    # -- the filter -----------------------------------------------------------------------

    def _scan(self) -> None:
        """Move input to output until enough output is ready or the input ends."""
        while self._out_size < IJSON_BUFFER and self._pending_error is None:
            buf = self._buf
            if self._state == _NORMAL:
                match = _INTERESTING.search(buf, self._pos)
                if match is None:
                    cut = len(buf)
                    while not self._eof and cut > self._pos and buf[cut - 1] in _LITERAL_TAIL:
                        cut -= 1
                    if not self._finite(self._pos, cut):
                        return
                    self._emit(buf[self._pos : cut])
                    self._pos = cut
                    if not self._fill():
                        if self._pos < len(self._buf):
                            continue
                        return
                    continue
                at = match.start()
                if not self._finite(self._pos, at):
                    return
                if buf[at] == 0x22:  # '"'
                    self._emit(buf[self._pos : at + 1])
                    self._pos = at + 1
                    self._state = _STRING
                    continue
                after = _span_end(_SPACE, buf, at + 1)
                if after == len(buf) and not self._eof:
                    self._emit(buf[self._pos : at])
                    self._pos = at
                    if not self._fill():
                        self._emit(self._buf[self._pos :])
                        self._pos = len(self._buf)
                    continue
                if after < len(buf) and buf[after] in _NUMBER_START:
                    self._emit(buf[self._pos : at])
                    self._run = Run(self._base + at)
                    self._run_start = self._base + at
                    self._pos = after
                    self._state = _RUN
                    continue
                self._emit(buf[self._pos : at + 1])
                self._pos = at + 1
            elif self._state == _STRING:
                if self._escape:
                    if self._pos >= len(buf):
                        if not self._fill():
                            return
                        continue
                    self._emit(buf[self._pos : self._pos + 1])
                    self._pos += 1
                    self._escape = False
                    continue
                match = _STRING_STOP.search(buf, self._pos)
                if match is None:
                    self._emit(buf[self._pos :])
                    self._pos = len(buf)
                    if not self._fill():
                        return
                    continue
                at = match.start()
                self._emit(buf[self._pos : at + 1])
                self._pos = at + 1
                if buf[at] == 0x5C:  # backslash
                    self._escape = True
                else:
                    self._state = _NORMAL
            else:
                self._scan_run()

    def _scan_run(self) -> None:
        buf = self._buf
        close = buf.find(b"]", self._pos)
        if close >= 0:
            text = buf[self._pos : close]
            rest = text.translate(None, _DIGITS_AND_COMMA)
            if not rest:  # the common case: bare integers up to the closing bracket
                try:
                    self._add_numbers(text, self._base + self._pos, compact=True)
                except InputProblem as problem:
                    self._fail(problem)
                    return
                self._emit(self._placeholder() + b"]")
                self._pos = close + 1
                self._state = _NORMAL
                return
            end = close if not rest.translate(None, _NUMBER_CHARS) else _span_end(_NUMBER_TEXT, buf, self._pos)
        else:
            end = _span_end(_NUMBER_TEXT, buf, self._pos)
        if end == len(buf) and not self._eof:
            if end - self._pos > BATCH_BYTES:
                comma = buf.rfind(b",", self._pos, end)
                if comma > self._pos:
                    try:
                        self._add_numbers(buf[self._pos : comma], self._base + self._pos)
                    except InputProblem as problem:
                        self._fail(problem)
                        return
                    self._pos = comma + 1
            self._fill()
            return
        text = buf[self._pos : end]
        start = self._base + self._pos
        try:
            if end == len(buf):
                raise self._problem("unexpected end of input inside an array of numbers", self._base + end)
            terminator = buf[end]
            if terminator in b"NI":  # NaN or [-]Infinity inside the array: reported at its index
                token = end - 1 if text.endswith(b"-") else end
                before = buf[self._pos : token].rstrip(_WHITESPACE)
                if before:
                    if not before.endswith(b","):
                        raise self._problem(
                            f"expected ',' or ']' in an array of numbers, found {chr(terminator)!r}", self._base + end
                        )
                    self._add_numbers(before[:-1], start)
                    self._emit(self._placeholder() + b",")
                else:
                    self._run = None
                    self._emit(b"[")
                self._pos = token
                self._state = _NORMAL
                return
            if terminator == 0x5D:  # ']'
                self._add_numbers(text, start)
                self._emit(self._placeholder() + b"]")
                self._pos = end + 1
                self._state = _NORMAL
                return
            stripped = text.rstrip(_WHITESPACE)
            if stripped.endswith(b",") and terminator not in b",]":
                # an array that goes on with strings, objects or arrays
                self._add_numbers(stripped[:-1], start)
                self._emit(self._placeholder() + b",")
                self._pos = end
                self._state = _NORMAL
                return
            self._add_numbers(stripped, start)
            raise self._problem(
                f"expected ',' or ']' in an array of numbers, found {chr(terminator)!r}", self._base + end
            )
        except InputProblem as problem:
            self._fail(problem)

    def _finite(self, start: int, stop: int) -> bool:
        """False (with the problem pending) if structural text start..stop holds NaN or an infinity."""
        match = _NON_FINITE.search(self._buf, start, stop)
        if match is None:
            return True
        self._emit(self._buf[start : match.start()])
        self._pos = match.start()
        line, column = self.position(self._base + match.start())
        self._fail(
            NonFiniteProblem(non_finite_message(match.group().decode()), self._base + match.start(), line, column)
        )
        return False

    def _fail(self, problem: InputProblem) -> None:
        self._pending_error = problem
        self._run = None
        self._state = _NORMAL

    def read(self, size: int = -1) -> bytes:
        """Filtered JSON text for ijson (b'' at the end)."""
        if size == 0:
            return b""
        if not self._out and self._pending_error is not None:
            problem, self._pending_error = self._pending_error, None
            raise problem
        self._scan()
        data = b"".join(self._out)
        self._out.clear()
        self._out_size = 0
        self.last_output_offset = self._base + self._pos
        return data


def json_events(
    raw: ByteSource, spool: Spool | None, *, progress: Callable[[int], None] | None = None
) -> Iterator[tuple[str, Any]]:
    """Parse events of a JSON document (ijson basic_parse vocabulary plus ``splice``)."""
    source = RunFilter(raw, spool, progress=progress)
    nonce = source.nonce
    runs = source.runs
    size = len(nonce)
    try:
        for event, value in _ijson.basic_parse(source, buf_size=IJSON_BUFFER, use_float=True):
            if event == "string" and value.startswith(nonce):
                run = runs.pop(value[size:], None)
                if run is None:
                    raise InputProblem("unexpected string (reserved placeholder text)")
                yield "splice", run
            else:
                yield event, value
    except _IjsonError as exc:
        text = exc.args[0] if exc.args else str(exc)
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        first = text.strip().splitlines()[0] if text.strip() else "invalid JSON"
        offset = source.last_output_offset
        if "premature EOF" in first:
            raise InputProblem(
                "unexpected end of input (premature EOF): the file is truncated", offset, approximate=True
            ) from None
        if "integer overflow" in first:
            raise InputProblem("integer too large (it does not fit in 64 bits)", offset, approximate=True) from None
        raise InputProblem(f"invalid JSON ({first})", offset, approximate=True) from None
    except UnicodeDecodeError as exc:
        raise InputProblem(f"invalid UTF-8 ({exc.reason})", source.last_output_offset, approximate=True) from None


def open_binary(path: str | os.PathLike[str]) -> BinaryIO:
    """Open a file for unbuffered-enough binary reading."""
    return open(path, "rb", buffering=READ_SIZE)
