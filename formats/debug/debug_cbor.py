"""debug.cbor: the debug contexts of a compiled graph, written and read as CBOR.

Layout (format 1.0): one CBOR map with the keys

* ``"pva_debug_info"``: the format version as text, ``"1.0"``;
* ``"contexts"``: an array (indefinite length when streamed) of maps, one per debug context:
  ``"id"`` (integer >= 1; 0 is the invalid id), ``"layer"`` (text, e.g. ``"poplibs"``),
  ``"name"`` (text), ``"parentIds"`` (array of ids), ``"location"`` (absent, or a map of
  ``"fileName"``, ``"lineNumber"``, ``"functionName"``) and any further keys of the context's
  data (``op_type``, ``op_name``, ``tensorId``, ...) at the same level, as Poplar's own debug
  information does.

Which programs, compute sets and variables a context owns is stored in the report
(table ``debug_context_refs``), not here.
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import cbor2

from ..atomic import AtomicOutput, output_error
from ..detect import FileKind, check_regular_file, describe_bytes, kind_of_bytes
from ..errors import (
    CorruptReportError,
    InconsistentReportError,
    InvalidInputError,
    NotAReportError,
    UnsupportedVersionError,
)

#: Format version written by `write_debug_info`.
DEBUG_INFO_FORMAT = (1, 0)
#: The key holding the format version.
FORMAT_KEY = "pva_debug_info"
#: The key holding the identifier the report it belongs to records (metadata ``debug_info_id``).
ID_KEY = "debug_info_id"
#: Keys of a context record with a fixed meaning; every other key is context data.
RESERVED_KEYS = ("id", "layer", "name", "parentIds", "location")
#: The id no debug context has (libpva DebugContext::INVALID_ID).
INVALID_ID = 0
#: The largest id a reader accepts (a signed 64-bit integer, as Poplar's DebugId).
_MAX_ID = (1 << 63) - 1

_WHAT = "debug information file (debug.cbor)"


@dataclass(frozen=True, slots=True)
class DebugRecord:
    """One debug context as stored: ids, layer, name, location and free-form data."""

    id: int
    layer: str
    name: str
    parents: tuple[int, ...]
    location: tuple[str, int, str] | None  # (fileName, lineNumber, functionName)
    data: dict[str, Any]


# -- writing ---------------------------------------------------------------------------------


def _check_json_able(value: Any, where: str) -> None:
    if value is None or isinstance(value, (bool, int, str)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInputError(f"{where}: expected a finite number, got {value!r}")
        return
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _check_json_able(item, f"{where}[{index}]")
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidInputError(f"{where}: expected text keys, got {key!r}")
            _check_json_able(item, f"{where}.{key}")
        return
    raise InvalidInputError(f"{where}: expected a JSON-able value, got {type(value).__name__}")


def _record(context: Any, index: int, path: str) -> dict[str, Any]:
    where = f"{path!r}: context #{index}"
    if not isinstance(context, Mapping):
        raise InvalidInputError(f"{where}: expected a dict, got {type(context).__name__}")
    unknown = set(context) - {"id", "layer", "name", "parents", "location", "data"}
    if unknown:
        raise InvalidInputError(f"{where}: unknown key(s) {', '.join(sorted(map(str, unknown)))}")
    context_id = context.get("id")
    if not isinstance(context_id, int) or isinstance(context_id, bool) or context_id < 1:
        raise InvalidInputError(f"{where}: 'id' must be an integer >= 1 (0 is the invalid id), got {context_id!r}")
    where = f"{path!r}: context {context_id}"
    layer = context.get("layer", "")
    name = context.get("name", "")
    for key, value in (("layer", layer), ("name", name)):
        if not isinstance(value, str):
            raise InvalidInputError(f"{where}: {key!r} must be a string, got {type(value).__name__}")
    parents = context.get("parents") or []
    if not isinstance(parents, (list, tuple)) or not all(
        isinstance(p, int) and not isinstance(p, bool) and p >= 1 for p in parents
    ):
        raise InvalidInputError(f"{where}: 'parents' must be a list of context ids >= 1, got {parents!r}")
    if context_id in parents:
        raise InvalidInputError(f"{where}: a context cannot be its own parent")
    record: dict[str, Any] = {"id": context_id, "layer": layer, "name": name, "parentIds": list(parents)}
    location = context.get("location")
    if location is not None:
        if not isinstance(location, Mapping):
            raise InvalidInputError(f"{where}: 'location' must be a dict or None, got {type(location).__name__}")
        file_name = location.get("fileName", "")
        line = location.get("lineNumber", 0)
        function = location.get("functionName", "")
        if not isinstance(file_name, str) or not isinstance(function, str):
            raise InvalidInputError(f"{where}: location fileName and functionName must be strings")
        if not isinstance(line, int) or isinstance(line, bool) or line < 0:
            raise InvalidInputError(f"{where}: location lineNumber must be an integer >= 0, got {line!r}")
        record["location"] = {"fileName": file_name, "lineNumber": line, "functionName": function}
    data = context.get("data") or {}
    if not isinstance(data, Mapping):
        raise InvalidInputError(f"{where}: 'data' must be a dict, got {type(data).__name__}")
    clash = [k for k in data if k in RESERVED_KEYS]
    if clash:
        raise InvalidInputError(f"{where}: data key(s) {', '.join(clash)} are reserved")
    _check_json_able(data, f"{where}: data")
    record.update(data)
    return record


def write_debug_info(path: str | os.PathLike[str], contexts: Iterable[Mapping[str, Any]]) -> int:
    """Write debug contexts to `path` (debug.cbor) atomically; return how many were written.

    Each context is a dict: ``id`` (int >= 1), ``layer`` (str), ``name`` (str), ``parents``
    (list of ids), ``location`` (``{"fileName", "lineNumber", "functionName"}`` or None) and
    ``data`` (a dict of JSON-able values such as ``op_type``, ``op_name``, ``tensorId``).
    Contexts are streamed: the iterable is consumed once. Ids must be unique and every parent
    must be one of the written contexts; otherwise InvalidInputError names the context and
    nothing is written.
    """
    out, count = stage_debug_info(path, contexts)
    out.commit()
    return count


def stage_debug_info(path: str | os.PathLike[str], contexts: Iterable[Mapping[str, Any]]) -> tuple[AtomicOutput, int]:
    """Write debug contexts as `write_debug_info` does, but leave the file under its temporary name.

    The file ends with its identifier (``debug_info_id``: a digest of the contexts), which its
    report records in its metadata (`read_debug_id` reads it back) so that a reader can refuse a
    debug.cbor of another report. Returns the uncommitted output (commit or abort it) and the
    number of contexts written.
    """
    target = os.fspath(path)
    seen: set[int] = set()
    parents_of: dict[int, list[int]] = {}
    count = 0
    import hashlib  # only writers need it: readers of a report start without it

    out = AtomicOutput(target)
    digest = hashlib.sha256()
    try:
        with open(out.path, "wb") as handle:
            handle.write(b"\xa3")  # a map of three pairs
            cbor2.dump(FORMAT_KEY, handle)
            cbor2.dump(f"{DEBUG_INFO_FORMAT[0]}.{DEBUG_INFO_FORMAT[1]}", handle)
            cbor2.dump("contexts", handle)
            handle.write(b"\x9f")  # an array of indefinite length
            buffer = io.BytesIO()
            encoder = cbor2.CBOREncoder(buffer)
            for index, context in enumerate(contexts):
                record = _record(context, index, target)
                context_id = record["id"]
                if context_id in seen:
                    raise InvalidInputError(f"{target!r}: context id {context_id} appears twice")
                seen.add(context_id)
                if record["parentIds"]:
                    parents_of[context_id] = record["parentIds"]
                encoder.encode(record)
                count += 1
                if buffer.tell() > 1 << 20:
                    digest.update(buffer.getvalue())
                    handle.write(buffer.getvalue())
                    buffer.seek(0)
                    buffer.truncate()
            digest.update(buffer.getvalue())
            handle.write(buffer.getvalue())
            handle.write(b"\xff")
            handle.write(_id_tail(digest.hexdigest()[:_ID_LENGTH]))
        for context_id, parents in parents_of.items():
            missing = [p for p in parents if p not in seen]
            if missing:
                raise InvalidInputError(
                    f"{target!r}: context {context_id} names parent(s) {missing} that are not among the contexts"
                )
        _check_acyclic(parents_of, target, InvalidInputError)
    except BaseException as exc:
        out.abort()
        translated = output_error(exc, target, only_machine=True) if isinstance(exc, OSError) else None
        if translated is not None:
            raise translated from None
        raise
    return out, count


def _not_json(value: Any) -> str | None:
    """What in a decoded CBOR value JSON cannot hold (a key that is not text, a tag, bytes, a value shared
    by reference), or None. Each container is visited once: CBOR value sharing (tags 28/29, which pva
    never writes) could otherwise make a few hundred bytes a tree of 2^25 leaves.
    """
    stack = [value]
    seen: set[int] = set()
    while stack:
        item = stack.pop()
        if item is None or isinstance(item, (bool, int, float, str)):
            continue
        if isinstance(item, (list, tuple, Mapping)):
            if id(item) in seen:
                return "a value shared by reference (CBOR tags 28/29, which pva never writes)"
            seen.add(id(item))
        if isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, Mapping):
            for key, inner in item.items():
                if not isinstance(key, str):
                    return f"the key {_short(key)}"
                stack.append(inner)
        else:
            return f"a value of type {type(item).__name__} ({_short(item)})"
    return None


#: Decimal digits Python converts an integer to text without refusing (sys.int_info.default_max_str_digits).
_MAX_DIGITS = 4300


def json_plain(value: Any) -> Any:
    """A decoded debug value as plain JSON: NaN and infinities as null, integers too long for decimal
    text (more than 4,300 digits) as hexadecimal strings ("0x..."). Shared values are refused on reading."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        if value.bit_length() > _MAX_DIGITS * 3:  # more than 4,300 decimal digits, possibly
            return hex(value)
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (list, tuple)):
        return [json_plain(item) for item in value]
    if isinstance(value, Mapping):
        return {str(key): json_plain(item) for key, item in value.items()}
    return str(value)


def context_json(layer: str, name: str, data: Mapping[str, Any]) -> str:
    """A debug context as a JSON string that is always valid JSON (see `json_plain`)."""
    import json

    return json.dumps(json_plain({"layer": layer, "name": name, **data}), allow_nan=False)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _check_acyclic(parents_of: Mapping[int, Iterable[int]], path: str, error: type) -> None:
    """Raise `error` if following parents ever leads back to where it started."""
    state: dict[int, int] = {}  # 1 = on the current path, 2 = done
    for start in parents_of:
        if state.get(start) == 2:
            continue
        stack: list[tuple[int, Any]] = [(start, iter(parents_of.get(start, ())))]
        state[start] = 1
        while stack:
            node, pending = stack[-1]
            advanced = False
            for parent in pending:
                mark = state.get(parent)
                if mark == 1:
                    raise error(
                        f"{path!r}: debug context {parent} is its own ancestor (a cycle through context {node})", path
                    )
                if mark is None:
                    state[parent] = 1
                    stack.append((parent, iter(parents_of.get(parent, ()))))
                    advanced = True
                    break
            if not advanced:
                state[node] = 2
                stack.pop()


# -- reading ---------------------------------------------------------------------------------


#: Characters of a debug information identifier (hexadecimal digits of a SHA-256 of its contexts).
_ID_LENGTH = 32


def _id_tail(debug_id: str) -> bytes:
    """The last bytes of a debug.cbor: its identifier key and value."""
    return cbor2.dumps(ID_KEY) + cbor2.dumps(debug_id)


def read_debug_id(path: str | os.PathLike[str]) -> str | None:
    """The identifier a debug.cbor records at its end (None if it has none), read without decoding it."""
    size = len(_id_tail("0" * _ID_LENGTH))
    with open(os.fspath(path), "rb") as handle:
        handle.seek(0, os.SEEK_END)
        if handle.tell() < size:
            return None
        handle.seek(-size, os.SEEK_END)
        tail = handle.read(size)
    key = cbor2.dumps(ID_KEY)
    if not tail.startswith(key):
        return None
    try:
        value = cbor2.loads(tail[len(key) :])
    except (cbor2.CBORDecodeError, ValueError):
        return None
    return value if isinstance(value, str) else None


def check_debug_pair(reader: Any, debug_path: str | os.PathLike[str]) -> None:
    """Refuse a debug.cbor that was not written with the report `reader` has open.

    The report records its debug information's identifier (metadata ``debug_info_id``) and the
    debug.cbor ends with the same; a report that records none (written before identifiers, or by
    a producer that writes its debug information apart) accepts any debug.cbor.
    """
    debug_path = os.fspath(debug_path)
    expected = reader.metadata.get(ID_KEY) or None
    if expected is None:
        return
    found = read_debug_id(debug_path)
    if expected == found:
        return
    if found is None:
        detail = f"the report's debug information is {expected}, the file carries no identifier"
    else:
        detail = f"the report's debug information is {expected}, the file is {found}"
    raise InconsistentReportError(
        f"{debug_path!r} is not the debug information of {reader.path!r} ({detail}); give the debug.cbor written "
        f"with that report",
        debug_path,
    )


#: Contexts turned into Python objects at a time when iterating.
_BATCH = 1 << 14


class DebugRecords(Mapping[int, DebugRecord]):
    """The contexts of a debug.cbor by id, kept compactly: columns of ids, layers and parents beside
    the file's bytes. A `DebugRecord` is made from its bytes when asked for (not kept); `layer_of`,
    `parents_of`, `children_of` and `select` answer from the columns alone.
    """

    def __init__(self, path: str, raw: bytes, layers: list[str], ids, codes, bounds, parent_counts, parents) -> None:
        """Columns in file order; `bounds` holds where each context starts, then where the last ends."""
        import numpy as np

        self.path = path
        self._raw = raw
        self._layers = layers
        ids = np.frombuffer(ids, dtype=np.int64)
        counts = np.frombuffer(parent_counts, dtype=np.int64)
        flat = np.frombuffer(parents, dtype=np.int64)
        codes = np.frombuffer(codes, dtype=np.int64).astype(np.int32)
        bounds = np.frombuffer(bounds, dtype=np.int64)
        starts, ends = bounds[:-1], bounds[1:]
        offsets = np.zeros(len(ids) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        if len(ids) > 1 and not bool(np.all(ids[1:] > ids[:-1])):
            order = np.argsort(ids, kind="stable")
            ids, codes, starts, ends, counts = ids[order], codes[order], starts[order], ends[order], counts[order]
            sorted_offsets = np.zeros(len(ids) + 1, dtype=np.int64)
            np.cumsum(counts, out=sorted_offsets[1:])
            gather = np.repeat(offsets[:-1][order] - sorted_offsets[:-1], counts) + np.arange(len(flat))
            flat, offsets = flat[gather], sorted_offsets
            repeated = np.flatnonzero(ids[1:] == ids[:-1])
            if len(repeated):
                raise InconsistentReportError(f"{path!r}: debug context id {int(ids[repeated[0]])} appears twice", path)
        self._ids, self._codes, self._starts, self._ends = ids, codes, starts, ends
        self._offsets, self._parents = offsets, flat
        self._parent_rows = self._check_parents()
        self._children: tuple[Any, Any] | None = None

    # -- checks --

    def _check_parents(self):
        """Row of each parent; InconsistentReportError for a parent that is not a context or for a cycle."""
        import numpy as np

        ids, flat, offsets = self._ids, self._parents, self._offsets
        rows = np.searchsorted(ids, flat)
        found = rows < len(ids)
        found[found] = ids[rows[found]] == flat[found]
        if not bool(found.all()):
            row = int(np.searchsorted(offsets, int(np.flatnonzero(~found)[0]), side="right")) - 1
            missing = [int(p) for p in flat[offsets[row] : offsets[row + 1]] if p not in self]
            raise InconsistentReportError(
                f"{self.path!r}: debug context {int(ids[row])} names parent(s) {missing} that the file does not hold",
                self.path,
            )
        child_rows = np.repeat(np.arange(len(ids)), np.diff(offsets))
        if not bool(np.all(rows < child_rows)):  # a parent after its child: look for a cycle
            self._check_acyclic(rows)
        return rows

    def _check_acyclic(self, parent_rows) -> None:
        """Depth-first search over the rows; a context met again on the current path is a cycle."""
        offsets = self._offsets.tolist()
        parent_rows = parent_rows.tolist()
        state = bytearray(len(self._ids))  # 0 new, 1 on the current path, 2 done
        for start in range(len(state)):
            if state[start] or offsets[start] == offsets[start + 1]:
                continue
            state[start] = 1
            stack = [(start, offsets[start])]
            while stack:
                node, at = stack[-1]
                if at == offsets[node + 1]:
                    state[node] = 2
                    stack.pop()
                    continue
                stack[-1] = (node, at + 1)
                parent = parent_rows[at]
                if state[parent] == 1:
                    raise InconsistentReportError(
                        f"{self.path!r}: debug context {int(self._ids[parent])} is its own ancestor "
                        f"(a cycle through context {int(self._ids[node])})",
                        self.path,
                    )
                if state[parent] == 0:
                    state[parent] = 1
                    stack.append((parent, offsets[parent]))

    # -- the mapping --

    def _row(self, context_id: object) -> int:
        """Row of a context id, or -1."""
        if not isinstance(context_id, int) or isinstance(context_id, bool) or not 1 <= context_id <= _MAX_ID:
            return -1
        ids = self._ids
        row = int(ids.searchsorted(context_id))
        return row if row < len(ids) and ids[row] == context_id else -1

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, context_id: object) -> bool:
        return self._row(context_id) >= 0

    def __iter__(self) -> Iterator[int]:
        ids = self._ids
        for start in range(0, len(ids), _BATCH):
            yield from ids[start : start + _BATCH].tolist()

    def __getitem__(self, context_id: int) -> DebugRecord:
        row = self._row(context_id)
        if row < 0:
            raise KeyError(context_id)
        return self._record(row)

    def _record(self, row: int) -> DebugRecord:
        item = cbor2.loads(self._raw[int(self._starts[row]) : int(self._ends[row])])
        return parse_context(item, row, self.path)

    def values(self) -> Iterator[DebugRecord]:  # type: ignore[override]
        """Every record, by id."""
        return (self._record(row) for row in range(len(self._ids)))

    def items(self) -> Iterator[tuple[int, DebugRecord]]:  # type: ignore[override]
        """Every (id, record), by id."""
        return ((int(self._ids[row]), self._record(row)) for row in range(len(self._ids)))

    # -- from the columns --

    def layer_of(self, context_id: int) -> str:
        """The layer of a context (KeyError if there is none with this id)."""
        row = self._row(context_id)
        if row < 0:
            raise KeyError(context_id)
        return self._layers[self._codes[row]]

    def parents_of(self, context_id: int) -> tuple[int, ...]:
        """The parent ids of a context (KeyError if there is none with this id)."""
        row = self._row(context_id)
        if row < 0:
            raise KeyError(context_id)
        return tuple(self._parents[self._offsets[row] : self._offsets[row + 1]].tolist())

    def children_of(self, context_id: int) -> tuple[int, ...]:
        """The child ids of a context, sorted; empty for an unknown id."""
        import numpy as np

        if self._children is None:
            child_rows = np.repeat(np.arange(len(self._ids)), np.diff(self._offsets))
            order = np.lexsort((child_rows, self._parent_rows))
            self._children = (self._parent_rows[order], self._ids[child_rows[order]])
        parent_rows, child_ids = self._children
        row = self._row(context_id)
        if row < 0:
            return ()
        low, high = parent_rows.searchsorted(row), parent_rows.searchsorted(row, side="right")
        return tuple(child_ids[low:high].tolist())

    def select_rows(self, layer: str = "", without_parent: bool = False) -> Iterator[tuple[int, int]]:
        """(row, id) of the contexts of a layer (any if empty) and, if asked, without parents; by id."""
        import numpy as np

        count = len(self._ids)
        mask = np.ones(count, dtype=bool)
        if layer:
            if layer not in self._layers:
                return iter(())
            mask &= self._codes == self._layers.index(layer)
        if without_parent:
            mask &= self._offsets[1:] == self._offsets[:-1]
        rows = np.flatnonzero(mask)
        ids = self._ids[rows]
        return (
            pair
            for start in range(0, len(rows), _BATCH)
            for pair in zip(rows[start : start + _BATCH].tolist(), ids[start : start + _BATCH].tolist())
        )


class _SharedValueError(Exception):
    """Raised by the decoder on CBOR value sharing (tags 28/29)."""


def _refuse_sharing(decoder: Any, *args: Any) -> Any:
    raise _SharedValueError()


#: Value sharing (tags 28/29) is refused as soon as it is met, before a shared value is expanded.
_SEMANTIC = {28: _refuse_sharing, 29: _refuse_sharing}
#: What each CBOR major type decodes to, for messages.
_MAJOR_NAMES = ("int", "int", "bytes", "str", "list", "dict", "CBORTag", "float or simple value")
_SHARED = "a value shared by reference (CBOR tags 28/29, which pva never writes)"
#: Keys of a context that has no location and no data.
_PLAIN_KEYS = frozenset({"id", "layer", "name", "parentIds"})
_NO_PARENTS: tuple[int, ...] = ()
#: Bytes the decoder reads ahead of each context (it seeks back to the context's end).
_READ_AHEAD = 256


def _header(raw: bytes, pos: int) -> tuple[int, int | None, int]:
    """The major type, argument (None for indefinite length) and end of the CBOR item head at `pos`."""
    if pos >= len(raw):
        raise EOFError(f"the file ends at byte {pos} inside the document")
    first = raw[pos]
    major, info = first >> 5, first & 0x1F
    if info < 24:
        return major, info, pos + 1
    if info == 31:
        return major, None, pos + 1
    if info > 27:
        raise ValueError(f"reserved additional information {info} at byte {pos}")
    size = 1 << (info - 24)
    if pos + 1 + size > len(raw):
        raise EOFError(f"the file ends at byte {len(raw)} inside an item head")
    return major, int.from_bytes(raw[pos + 1 : pos + 1 + size], "big"), pos + 1 + size


class DebugInfoReader:
    """A debug.cbor file, read and checked in full: its contexts by id (`records`, a `DebugRecords`).

    The contexts are decoded one at a time and kept as columns (ids, layers, parents) beside the
    file's bytes; a context's name, location and data are decoded again when asked for. Raises a
    PvaError naming the path: ReportNotFoundError and friends when the file cannot be read,
    NotAReportError when it is not debug information (or uses CBOR value sharing),
    CorruptReportError when its CBOR is damaged, UnsupportedVersionError for a newer major
    format, and InconsistentReportError when contexts repeat an id, name unknown parents or form
    a cycle.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        check_regular_file(self.path, _WHAT)
        with open(self.path, "rb") as handle:
            raw = handle.read()
        where = repr(self.path)
        if not raw:
            raise NotAReportError(f"{where}: is an empty file (0 bytes); expected a {_WHAT}", self.path)
        kind = kind_of_bytes(raw[:4096])
        if kind is not FileKind.CBOR:
            raise NotAReportError(
                f"{where}: expected a {_WHAT} (a CBOR map), found {describe_bytes(raw[:4096])}", self.path
            )
        self.version = DEBUG_INFO_FORMAT
        stream = io.BytesIO(raw)
        self._raw = raw
        self._stream = stream
        self._decoder = cbor2.CBORDecoder(stream, read_size=_READ_AHEAD, semantic_decoders=_SEMANTIC)
        self.records = self._document()
        del self._stream, self._decoder

    def _damaged(self, detail: object) -> CorruptReportError:
        return CorruptReportError(f"{self.path!r}: the {_WHAT} is damaged or truncated ({detail})", self.path)

    def _head(self, pos: int) -> tuple[int, int | None, int]:
        try:
            return _header(self._raw, pos)
        except (EOFError, ValueError) as exc:
            raise self._damaged(exc) from None

    def _decode(self, index: int | None = None) -> Any:
        """The next CBOR item of the stream (context #`index` if given)."""
        try:
            return self._decoder.decode()
        except cbor2.CBORDecodeError as exc:
            if isinstance(exc.__cause__, _SharedValueError):
                where = repr(self.path) if index is None else f"{self.path!r}: context #{index}"
                raise NotAReportError(
                    f"{where}: expected data of text keys and JSON values, found {_SHARED}", self.path
                ) from None
            raise self._damaged(exc) from None
        except (ValueError, TypeError, OverflowError, RecursionError, MemoryError) as exc:
            raise self._damaged(exc) from None

    def _document(self) -> DebugRecords:
        where = repr(self.path)
        raw, stream = self._raw, self._stream
        major, pairs, pos = self._head(0)
        if major != 5:
            raise NotAReportError(
                f"{where}: expected a {_WHAT}: a CBOR map with key 'contexts', found {_MAJOR_NAMES[major]}", self.path
            )
        records: DebugRecords | None = None
        version_seen = False
        done = 0
        while pairs is None or done < pairs:
            if pairs is None and pos < len(raw) and raw[pos] == 0xFF:
                break
            stream.seek(pos)
            key = self._decode()
            pos = stream.tell()
            if key == "contexts":
                records = self._contexts(pos)
                pos = self._end
            else:
                value = self._decode()
                pos = stream.tell()
                if key == FORMAT_KEY:
                    self.version = self._check_version(value)
                    version_seen = True
            done += 1
        if records is None:
            raise NotAReportError(
                f"{where}: expected a {_WHAT}: a CBOR map with key 'contexts', found a map without 'contexts'",
                self.path,
            )
        if not version_seen:
            self.version = DEBUG_INFO_FORMAT
        return records

    def _contexts(self, pos: int) -> DebugRecords:
        """Decode the contexts array at `pos` one context at a time into columns; set `_end`."""
        from array import array

        where = repr(self.path)
        raw, stream, decode = self._raw, self._stream, self._decode
        major, count, pos = self._head(pos)
        if major != 4:
            raise NotAReportError(
                f"{where}: expected 'contexts' to be an array, found {_MAJOR_NAMES[major]}", self.path
            )
        ids, starts, codes, parent_counts, parents = (array("q") for _ in range(5))
        layers: dict[str, int] = {}
        index = 0
        parse, plain_keys, most = self._parse, _PLAIN_KEYS, _MAX_ID
        stream.seek(pos)
        tell = stream.tell
        while count is None or index < count:
            if count is None:
                if pos >= len(raw):
                    raise self._damaged(f"the contexts array is not closed at byte {pos}")
                if raw[pos] == 0xFF:
                    pos += 1
                    break
            starts.append(pos)
            item = decode(index)
            pos = tell()
            # the common case (no location, no data) checked here; anything else by parse_context
            if type(item) is dict and item.keys() <= plain_keys:
                context_id = item.get("id")
                layer = item.get("layer", "")
                name = item.get("name", "")
                ids_of_parents = item.get("parentIds", _NO_PARENTS)
                if not (
                    type(context_id) is int
                    and 0 < context_id <= most
                    and type(layer) is str
                    and type(name) is str
                    and (
                        ids_of_parents is _NO_PARENTS
                        or type(ids_of_parents) is list
                        and all(type(p) is int and 0 < p <= most for p in ids_of_parents)
                    )
                ):
                    record = parse(item, index)
                    context_id, layer, ids_of_parents = record.id, record.layer, record.parents
            else:
                record = parse(item, index)
                context_id, layer, ids_of_parents = record.id, record.layer, record.parents
            ids.append(context_id)
            code = layers.get(layer)
            if code is None:
                code = layers[layer] = len(layers)
            codes.append(code)
            parent_counts.append(len(ids_of_parents))
            if ids_of_parents:
                parents.extend(ids_of_parents)
            index += 1
        starts.append(pos)
        self._end = pos
        return DebugRecords(self.path, raw, list(layers), ids, codes, starts, parent_counts, parents)

    def _check_version(self, text: Any) -> tuple[int, int]:
        if text is None:
            return DEBUG_INFO_FORMAT
        try:
            major, minor = (int(part) for part in str(text).split("."))
        except ValueError:
            raise NotAReportError(
                f"{self.path!r}: expected {FORMAT_KEY} 'major.minor', found {text!r}", self.path
            ) from None
        if major > DEBUG_INFO_FORMAT[0]:
            raise UnsupportedVersionError(
                f"{self.path!r}: debug information format {major}.{minor} is newer than this reader supports "
                f"({DEBUG_INFO_FORMAT[0]}.x); upgrade pva to read it",
                self.path,
            )
        return major, minor

    def _parse(self, item: Any, index: int) -> DebugRecord:
        return parse_context(item, index, self.path)


def parse_context(item: Any, index: int, path: str) -> DebugRecord:
    """A decoded context map checked and made a DebugRecord; NotAReportError names what is wrong."""
    where = f"{path!r}: context #{index}"
    if not isinstance(item, dict):
        raise NotAReportError(f"{where}: expected a map, found {type(item).__name__}", path)
    context_id = item.get("id")
    if not isinstance(context_id, int) or isinstance(context_id, bool) or not 1 <= context_id <= _MAX_ID:
        raise NotAReportError(f"{where}: expected an integer 'id' >= 1, found {context_id!r}", path)
    layer = item.get("layer", "")
    name = item.get("name", "")
    if not isinstance(layer, str) or not isinstance(name, str):
        raise NotAReportError(f"{where} (id {context_id}): expected text 'layer' and 'name'", path)
    parents = item.get("parentIds", [])
    if not isinstance(parents, list) or not all(
        isinstance(p, int) and not isinstance(p, bool) and 1 <= p <= _MAX_ID for p in parents
    ):
        raise NotAReportError(
            f"{where} (id {context_id}): expected 'parentIds' to be an array of ids >= 1, found {parents!r}",
            path,
        )
    location = item.get("location")
    parsed_location = None
    if location is not None:
        if not isinstance(location, dict):
            raise NotAReportError(f"{where} (id {context_id}): expected 'location' to be a map", path)
        file_name = location.get("fileName", "")
        line = location.get("lineNumber", 0)
        function = location.get("functionName", "")
        if not (
            isinstance(file_name, str)
            and isinstance(function, str)
            and isinstance(line, int)
            and not isinstance(line, bool)
            and line >= 0
        ):
            raise NotAReportError(
                f"{where} (id {context_id}): expected location fileName (text), lineNumber (integer >= 0) "
                f"and functionName (text), found {location!r}",
                path,
            )
        parsed_location = (file_name, line, function)
    data = {k: v for k, v in item.items() if k not in RESERVED_KEYS}
    problem = _not_json(data)
    if problem:
        raise NotAReportError(
            f"{where} (id {context_id}): expected data of text keys and JSON values, found {problem}", path
        )
    return DebugRecord(context_id, layer, name, tuple(parents), parsed_location, data)
