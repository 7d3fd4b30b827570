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

import hashlib
import io
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import cbor2

from .atomic import AtomicOutput, output_error
from .detect import FileKind, check_regular_file, describe_bytes, kind_of_bytes
from .errors import (
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


class DebugInfoReader:
    """A debug.cbor file, read and checked in full: its contexts by id.

    Raises a PvaError naming the path: ReportNotFoundError and friends when the file cannot
    be read, NotAReportError when it is not debug information, CorruptReportError when its
    CBOR is damaged, UnsupportedVersionError for a newer major format, and
    InconsistentReportError when contexts name unknown parents or form a cycle.
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
        try:
            document = cbor2.loads(raw)
        except (cbor2.CBORDecodeError, ValueError, TypeError, OverflowError, RecursionError, MemoryError) as exc:
            raise CorruptReportError(f"{where}: the {_WHAT} is damaged or truncated ({exc})", self.path) from None
        if not isinstance(document, dict) or "contexts" not in document:
            found = type(document).__name__ if not isinstance(document, dict) else "a map without 'contexts'"
            raise NotAReportError(
                f"{where}: expected a {_WHAT}: a CBOR map with key 'contexts', found {found}", self.path
            )
        self.version = self._check_version(document.get(FORMAT_KEY))
        contexts = document["contexts"]
        if not isinstance(contexts, list):
            raise NotAReportError(
                f"{where}: expected 'contexts' to be an array, found {type(contexts).__name__}", self.path
            )
        records: dict[int, DebugRecord] = {}
        for index, item in enumerate(contexts):
            record = self._parse(item, index)
            if record.id in records:
                raise InconsistentReportError(f"{where}: debug context id {record.id} appears twice", self.path)
            records[record.id] = record
        for record in records.values():
            missing = [p for p in record.parents if p not in records]
            if missing:
                raise InconsistentReportError(
                    f"{where}: debug context {record.id} names parent(s) {missing} that the file does not hold",
                    self.path,
                )
        _check_acyclic({r.id: r.parents for r in records.values() if r.parents}, self.path, InconsistentReportError)
        self.records = records

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
        where = f"{self.path!r}: context #{index}"
        if not isinstance(item, dict):
            raise NotAReportError(f"{where}: expected a map, found {type(item).__name__}", self.path)
        context_id = item.get("id")
        if not isinstance(context_id, int) or isinstance(context_id, bool) or context_id < 1:
            raise NotAReportError(f"{where}: expected an integer 'id' >= 1, found {context_id!r}", self.path)
        layer = item.get("layer", "")
        name = item.get("name", "")
        if not isinstance(layer, str) or not isinstance(name, str):
            raise NotAReportError(f"{where} (id {context_id}): expected text 'layer' and 'name'", self.path)
        parents = item.get("parentIds", [])
        if not isinstance(parents, list) or not all(
            isinstance(p, int) and not isinstance(p, bool) and p >= 1 for p in parents
        ):
            raise NotAReportError(
                f"{where} (id {context_id}): expected 'parentIds' to be an array of ids >= 1, found {parents!r}",
                self.path,
            )
        location = item.get("location")
        parsed_location = None
        if location is not None:
            if not isinstance(location, dict):
                raise NotAReportError(f"{where} (id {context_id}): expected 'location' to be a map", self.path)
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
                    self.path,
                )
            parsed_location = (file_name, line, function)
        data = {k: v for k, v in item.items() if k not in RESERVED_KEYS}
        problem = _not_json(data)
        if problem:
            raise NotAReportError(
                f"{where} (id {context_id}): expected data of text keys and JSON values, found {problem}", self.path
            )
        return DebugRecord(context_id, layer, name, tuple(parents), parsed_location, data)
