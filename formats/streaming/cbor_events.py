"""Incremental CBOR events for legacy profiles (``poplar::serializeToCBOR``).

The walker reads container headers itself and hands whole items that fit in the read window to
cbor2's C decoder, so long arrays of numbers decode in bulk while memory stays bounded. Declared
lengths are checked against the bytes left in the file before anything is allocated. RFC 8746
typed arrays become numeric runs; the self-describe tag 55799 is skipped.
"""

from __future__ import annotations

import datetime
import io
import math
import os
import struct
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import cbor2
import numpy as np

from .runs import NonFiniteNumberError, Run, Spool, non_finite_message, spelling
from .tree import MAX_DEPTH, ByteSource, InputProblem, NonFiniteProblem, json_path, parse_json_path

#: Bytes kept ahead in the buffer; items that fit are decoded by cbor2 in one call.
WINDOW = 4 << 20
#: Numbers decoded per bulk call inside a long array.
NUMBERS_PER_CALL = 1 << 16

_SELF_DESCRIBE = 55799
#: RFC 8746 typed array tags and their numpy dtypes.
TYPED_ARRAYS = {
    64: ">u1",
    65: ">u2",
    66: ">u4",
    67: ">u8",
    68: ">u1",
    69: "<u2",
    70: "<u4",
    71: "<u8",
    72: ">i1",
    73: ">i2",
    74: ">i4",
    75: ">i8",
    77: "<i2",
    78: "<i4",
    79: "<i8",
    80: ">f2",
    81: ">f4",
    82: ">f8",
    84: "<f2",
    85: "<f4",
    86: "<f8",
}


def _typed_array(tag: int, data: bytes) -> np.ndarray:
    dtype = np.dtype(TYPED_ARRAYS[tag])
    if len(data) % dtype.itemsize:
        raise ValueError(
            f"typed array (tag {tag}) of {len(data)} bytes is not a whole number of {dtype.itemsize}-byte values"
        )
    array = np.frombuffer(data, dtype=dtype)
    return array.astype(dtype.newbyteorder("="), copy=False)


def _is_number(value: Any) -> bool:
    return type(value) is int or type(value) is float


class _Normaliser:
    """Turns cbor2 values into document values: numeric lists become Runs, odd types are refused."""

    def __init__(self, spool: Spool | None) -> None:
        self.spool = spool

    def run_of(self, values: list | np.ndarray, offset: int = -1) -> Run:
        run = Run(offset)
        array = values if isinstance(values, np.ndarray) else np.array(values)
        run.add(array, self.spool)
        return run

    def __call__(self, value: Any, depth: int = 0, where: str = "") -> Any:
        if depth > MAX_DEPTH:
            raise ValueError(f"{where or 'value'}: nesting deeper than {MAX_DEPTH} levels")
        kind = type(value)
        if kind is int or kind is str or kind is bool or value is None:
            return value
        if kind is float:
            if not math.isfinite(value):
                raise NonFiniteNumberError(non_finite_message(spelling(value)), where)
            return value
        if kind is list or kind is tuple:
            if value and all(_is_number(v) for v in value):
                array = np.array(value)
                if array.dtype.kind == "O":
                    raise ValueError(f"{where or 'value'}: number does not fit in 64 bits")
                try:
                    return self.run_of(array)
                except NonFiniteNumberError as exc:
                    raise NonFiniteNumberError(str(exc), where + exc.where) from None
            return [self(v, depth + 1, f"{where}[{i}]") for i, v in enumerate(value)]
        if kind is dict or isinstance(value, Mapping):
            out = {}
            for key, item in value.items():
                if not isinstance(key, str):
                    raise ValueError(f"{where or 'value'}: map key {key!r} is not a text string")
                out[key] = self(item, depth + 1, where + json_path([key])[1:])
            return out
        if isinstance(value, cbor2.CBORTag):
            if value.tag == _SELF_DESCRIBE:
                return self(value.value, depth + 1, where)
            if value.tag in TYPED_ARRAYS and isinstance(value.value, bytes):
                return self.run_of(_typed_array(value.tag, value.value))
            raise ValueError(f"{where or 'value'}: unsupported CBOR tag {value.tag}")
        if isinstance(value, (datetime.datetime, datetime.date)):
            raise ValueError(f"{where or 'value'}: unexpected date/time value (CBOR tag 0/1)")
        if isinstance(value, (bytes, bytearray)):
            raise ValueError(f"{where or 'value'}: unexpected byte string of {len(value)} bytes")
        raise ValueError(f"{where or 'value'}: unsupported CBOR value of type {type(value).__name__}")


class CborWalker:
    """Yields parse events for one CBOR document read from a binary file."""

    def __init__(self, raw: ByteSource, spool: Spool | None, *, progress: Callable[[int], None] | None = None) -> None:
        self._raw = raw
        self._progress = progress
        self._normalise = _Normaliser(spool)
        self._size: int | None = None
        fileno = getattr(raw, "fileno", None)
        if fileno is not None:
            try:
                self._size = os.fstat(fileno()).st_size
            except (OSError, io.UnsupportedOperation):
                self._size = None
        self._buf = b""
        self._pos = 0
        self._base = 0
        self._eof = False

    # -- buffer ---------------------------------------------------------------------------

    @property
    def offset(self) -> int:
        return self._base + self._pos

    def _ensure(self, count: int) -> bool:
        """Make `count` bytes available from the current position; False if the input ends first."""
        while len(self._buf) - self._pos < count:
            if self._eof:
                return False
            chunk = self._raw.read(max(WINDOW, count))
            if self._progress is not None:
                self._progress(len(chunk))
            if not chunk:
                self._eof = True
                return False
            self._buf = self._buf[self._pos :] + chunk
            self._base += self._pos
            self._pos = 0
        return True

    def _need(self, count: int) -> None:
        if not self._ensure(count):
            raise InputProblem("unexpected end of input", self._base + len(self._buf))

    def _take(self, count: int) -> bytes:
        self._need(count)
        data = self._buf[self._pos : self._pos + count]
        self._pos += count
        return data

    def _remaining_bytes(self) -> int | None:
        return None if self._size is None else self._size - self.offset

    # -- headers --------------------------------------------------------------------------

    def _header(self) -> tuple[int, int, int | None]:
        """(major type, additional info, argument or None for indefinite) of the next item."""
        start = self.offset
        self._need(1)
        initial = self._buf[self._pos]
        self._pos += 1
        major, info = initial >> 5, initial & 31
        if info < 24:
            return major, info, info
        if info <= 27:
            size = 1 << (info - 24)
            return major, info, int.from_bytes(self._take(size), "big")
        if info == 31 and major in (2, 3, 4, 5, 7):
            return major, info, None
        raise InputProblem(f"invalid CBOR initial byte 0x{initial:02x}", start)

    def _check_length(self, count: int, unit: int, what: str, at: int) -> None:
        left = self._remaining_bytes()
        if left is not None and count * unit > left:
            raise InputProblem(f"{what} declares {count:,} items but only {left:,} bytes of input remain", at)

    # -- bulk decoding --------------------------------------------------------------------

    def _try_decode(self, limit: int) -> tuple[bool, Any]:
        """Decode the next item with cbor2 if it ends within `limit` bytes of the buffer."""
        self._ensure(limit)
        fp = io.BytesIO(self._buf)  # shares the buffer; decoding stops at its end (the window)
        fp.seek(self._pos)
        start = self.offset
        try:
            value = cbor2.CBORDecoder(fp).decode()
        except (cbor2.CBORDecodeEOF, RecursionError):
            return False, None  # too big or too deep for one call: the walker opens it instead
        except (cbor2.CBORDecodeError, ValueError, OverflowError, MemoryError) as exc:
            if "nesting depth" in str(exc) or "recursion" in str(exc):
                return False, None
            raise InputProblem(f"invalid CBOR ({exc})", start) from None
        self._pos = fp.tell()
        try:
            return True, self._normalise(value)
        except NonFiniteNumberError as exc:
            raise NonFiniteProblem(str(exc), start, parts=parse_json_path("$" + exc.where)) from None
        except ValueError as exc:
            raise InputProblem(str(exc), start) from None

    def _numbers(self, count: int) -> list:
        """Decode up to `count` consecutive items in one cbor2 call (all must be small)."""
        header = b"\x9b" + struct.pack(">Q", count)
        self._ensure(9 * count)
        window = self._buf[self._pos : self._pos + 9 * count]
        fp = io.BytesIO(header + window)
        try:
            values = cbor2.CBORDecoder(fp).decode()
        except (cbor2.CBORDecodeError, ValueError, OverflowError, RecursionError):
            return []
        self._pos += fp.tell() - len(header)
        return values

    # -- the walk -------------------------------------------------------------------------

    def events(self) -> Iterator[tuple[str, Any]]:
        """The parse events of the document."""
        stack: list[list] = []  # [is_map, remaining items or None, expecting a key]
        yield from self._item(stack, top=True)
        while stack:
            frame = stack[-1]
            is_map, remaining, expecting_key = frame
            if remaining is None:
                self._need(1)
                if self._buf[self._pos] == 0xFF:
                    self._pos += 1
                    if is_map and not expecting_key:
                        raise InputProblem("map ends after a key without a value", self.offset - 1)
                    stack.pop()
                    yield ("end_map" if is_map else "end_array"), None
                    continue
            elif remaining == 0:
                stack.pop()
                yield ("end_map" if is_map else "end_array"), None
                continue
            if is_map and expecting_key:
                at = self.offset
                major, _info, argument = self._header()
                if major != 3 or argument is None:
                    if major == 3:
                        raise InputProblem("indefinite-length map keys are not supported", at)
                    raise InputProblem("map key is not a text string", at)
                self._check_length(argument, 1, "text string", at)
                try:
                    key = self._take(argument).decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise InputProblem(f"map key is not valid UTF-8 ({exc.reason})", at) from None
                frame[2] = False
                yield "map_key", key
                continue
            if is_map:
                frame[2] = True
            if remaining is not None:
                frame[1] = remaining - 1
                if not is_map and remaining > 1 and self._next_is_number():
                    yield from self._number_stretch(stack)
                    continue
            yield from self._item(stack)
        if self._ensure(1):
            raise InputProblem("unexpected data after the end of the document", self.offset)

    def _next_is_number(self) -> bool:
        if not self._ensure(1):
            return False
        initial = self._buf[self._pos]
        return initial >> 5 in (0, 1) or initial in (0xF9, 0xFA, 0xFB)

    def _number_stretch(self, stack: list) -> Iterator[tuple[str, Any]]:
        """The next items of a definite-length array decoded in one cbor2 call, numbers as splices."""
        frame = stack[-1]
        count = min(frame[1] + 1, NUMBERS_PER_CALL)
        start = self.offset
        values = self._numbers(count)
        if not values:
            yield from self._item(stack)
            return
        frame[1] -= len(values) - 1
        numbers: list = []
        try:
            for value in values:
                if _is_number(value):
                    numbers.append(value)
                    continue
                if numbers:
                    yield "splice", self._numbers_run(numbers, start)
                    numbers = []
                try:
                    item = self._normalise(value, 1, "")
                except NonFiniteNumberError as exc:
                    raise NonFiniteProblem(str(exc), start, parts=parse_json_path("$" + exc.where)) from None
                yield "value", item
            if numbers:
                yield "splice", self._numbers_run(numbers, start)
        except ValueError as exc:
            raise InputProblem(f"invalid value ({exc})", start) from None

    def _numbers_run(self, numbers: list, start: int) -> Run:
        try:
            return self._normalise.run_of(numbers, start)
        except NonFiniteNumberError as exc:
            index = parse_json_path("$" + exc.where)[0]
            raise NonFiniteProblem(str(exc), start, index=index if isinstance(index, int) else None) from None

    def _item(self, stack: list, top: bool = False) -> Iterator[tuple[str, Any]]:
        """Events of the next item; containers too big for the window are opened, not decoded."""
        while True:
            self._ensure(9)
            at = self.offset
            if not self._ensure(1):
                raise InputProblem("unexpected end of input" if not top else "empty document", at)
            initial = self._buf[self._pos]
            major = initial >> 5
            if major != 6:
                break
            _major, _info, tag = self._header()
            if tag == _SELF_DESCRIBE:
                continue
            if tag in TYPED_ARRAYS:
                yield from self._typed_array(tag, at)
                return
            self._pos = at - self._base
            break
        if major in (4, 5, 6):
            done, value = self._try_decode(WINDOW)
            if done:
                yield "value", value
                return
            if major == 6:
                raise InputProblem("tagged value larger than the read window", at)
            _major, _info, argument = self._header()
            if argument is not None:
                self._check_length(argument, 2 if major == 5 else 1, "map" if major == 5 else "array", at)
            if len(stack) >= MAX_DEPTH:
                raise InputProblem(f"nesting deeper than {MAX_DEPTH} levels", at)
            stack.append([major == 5, argument, True])
            yield ("start_map" if major == 5 else "start_array"), None
            return
        if major in (2, 3):
            _m, _i, argument = self._peek_length()
            if argument is not None:
                self._check_length(argument, 1, "string", at)
                done, value = self._try_decode(argument + 9)
            else:
                done, value = self._try_decode(WINDOW)
            if not done:
                raise InputProblem("unexpected end of input inside a string", at)
            yield "value", value
            return
        done, value = self._try_decode(9)
        if not done:
            raise InputProblem("unexpected end of input", at)
        if value is cbor2.undefined or isinstance(value, cbor2.CBORSimpleValue):
            raise InputProblem(f"unsupported CBOR simple value {value!r}", at)
        yield "value", value

    def _peek_length(self) -> tuple[int, int, int | None]:
        self._ensure(9)
        at = self._pos
        header = self._header()
        self._pos = at
        return header

    def _typed_array(self, tag: int, at: int) -> Iterator[tuple[str, Any]]:
        major, _info, length = self._header()
        if major != 2 or length is None:
            raise InputProblem(f"typed array (tag {tag}) must hold a definite-length byte string", at)
        self._check_length(length, 1, "typed array", at)
        dtype = np.dtype(TYPED_ARRAYS[tag])
        if length % dtype.itemsize:
            raise InputProblem(
                f"typed array (tag {tag}) of {length} bytes is not a whole number of {dtype.itemsize}-byte values", at
            )
        run = Run(at)
        left = length
        step = (WINDOW // dtype.itemsize) * dtype.itemsize
        try:
            while left:
                piece = self._take(min(left, step))
                run.add(_typed_array(tag, piece), self._normalise.spool)
                left -= len(piece)
        except NonFiniteNumberError as exc:
            index = parse_json_path("$" + exc.where)[0]
            assert isinstance(index, int), "Run.add locates a bad value by its index"
            raise NonFiniteProblem(str(exc), at, index=(length - left) // dtype.itemsize + index) from None
        except ValueError as exc:
            raise InputProblem(f"invalid typed array ({exc})", at) from None
        yield "value", run


def cbor_events(
    raw: ByteSource, spool: Spool | None, *, progress: Callable[[int], None] | None = None
) -> Iterator[tuple[str, Any]]:
    """Parse events of a CBOR document (same vocabulary as json_events, plus ``value``)."""
    return CborWalker(raw, spool, progress=progress).events()
