"""Sniffing: what kind of file is at a path, from its first bytes, without trusting it."""

from __future__ import annotations

import enum
import os
import re
import stat
import struct
import urllib.parse
from typing import BinaryIO

from .errors import InvalidInputError, NotAFileError, NotAReportError, ReportNotFoundError, ReportPermissionError
from .pop.schema import PROFILE_APPLICATION_ID, TRACE_APPLICATION_ID

SQLITE_MAGIC = b"SQLite format 3\x00"
ARROW_MAGIC = b"ARROW1"


class FileKind(enum.Enum):
    """Kinds of file pva recognises."""

    PROFILE = "a pva report (profile.pop)"
    TRACE = "a pva trace file"
    SQLITE = "a SQLite database"
    JSON = "a JSON document"
    CBOR = "a CBOR document"
    ARROW = "an Arrow IPC file"
    TEXT = "a text file"
    EMPTY = "an empty file"
    BINARY = "binary data of unknown kind"


def _expected(what: str) -> str:
    """'a report file', 'an input file', 'a debug information file (debug.cbor)': `what` as a file."""
    noun = what if "file" in what.split() else f"{what} file"
    return ("an " if noun[:1].lower() in "aeiou" else "a ") + noun


def check_regular_file(path: str | os.PathLike[str], what: str = "report") -> os.stat_result:
    """Stat `path`, raising the matching PvaError unless it is a readable regular file."""
    name = os.fspath(path)
    expected = _expected(what)
    try:
        info = os.stat(name)
    except FileNotFoundError:
        raise ReportNotFoundError(f"{name!r}: no such file; expected {expected}", name) from None
    except PermissionError:
        raise ReportPermissionError(f"{name!r}: permission denied; expected a readable {what}", name) from None
    except OSError as exc:
        raise ReportNotFoundError(f"{name!r}: cannot be read ({exc.strerror}); expected {expected}", name) from None
    if stat.S_ISDIR(info.st_mode):
        raise NotAFileError(f"{name!r}: is a directory; expected {expected}", name)
    if not stat.S_ISREG(info.st_mode):
        raise NotAFileError(f"{name!r}: is not a regular file; expected {expected}", name)
    if not os.access(name, os.R_OK):
        raise ReportPermissionError(f"{name!r}: permission denied; expected a readable {what}", name)
    return info


def read_text_file(path: str | os.PathLike[str], what: str, max_bytes: int) -> str:
    """The whole of a UTF-8 text file of at most `max_bytes` bytes (a `what`, for the errors)."""
    name = os.fspath(path)
    info = check_regular_file(name, what)
    if info.st_size > max_bytes:
        raise InvalidInputError(
            f"{name!r}: byte 0: {info.st_size:,} bytes is too large for a {what} (at most {max_bytes:,})", name
        )
    with open(name, "rb") as handle:
        data = handle.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotAReportError(
            f"{name!r}: byte {exc.start}: expected a {what} in UTF-8 text, found bytes that are not UTF-8", name
        ) from None


#: The first bytes of gzip-compressed data.
GZIP_MAGIC = b"\x1f\x8b"


def read_head(path: str | os.PathLike[str], size: int = 4096) -> bytes:
    """The first `size` bytes of a file."""
    name = os.fspath(path)
    try:
        with open(name, "rb") as handle:
            return handle.read(size)
    except PermissionError:
        raise ReportPermissionError(f"{name!r}: permission denied", name) from None


def kind_of_bytes(head: bytes) -> FileKind:
    """The kind of file that starts with `head`."""
    if not head:
        return FileKind.EMPTY
    if head.startswith(SQLITE_MAGIC):
        if len(head) >= 72:
            (app_id,) = struct.unpack(">I", head[68:72])
            if app_id == PROFILE_APPLICATION_ID:
                return FileKind.PROFILE
            if app_id == TRACE_APPLICATION_ID:
                return FileKind.TRACE
        return FileKind.SQLITE
    if head.startswith(ARROW_MAGIC):
        return FileKind.ARROW
    stripped = head.lstrip(b" \t\r\n\xef\xbb\xbf")
    if stripped[:1] in (b"{", b"["):
        return FileKind.JSON
    if head[:3] == b"\xd9\xd9\xf7" or (head[0] >> 5) == 5:
        return FileKind.CBOR
    if _looks_like_text(head):
        return FileKind.TEXT
    return FileKind.BINARY


def _looks_like_text(head: bytes) -> bool:
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A multi-byte character cut at the end of the sample is still text.
        if exc.start < len(head) - 4:
            return False
        text = head[: exc.start].decode("utf-8")
    printable = sum(ch.isprintable() or ch in "\t\r\n\f" for ch in text)
    return printable >= 0.95 * max(1, len(text))


def sniff(path: str | os.PathLike[str]) -> FileKind:
    """The kind of the file at `path` (which must be a readable regular file)."""
    check_regular_file(path, "file")
    return kind_of_bytes(read_head(path, 4096))


def describe_bytes(head: bytes) -> str:
    """A short description of a file's start for error messages."""
    kind = kind_of_bytes(head)
    if kind in (FileKind.TEXT, FileKind.JSON):
        first = head[:40].decode("utf-8", "replace").splitlines()[0] if head.strip() else ""
        return f"{kind.value} starting with {first!r}"
    if kind is FileKind.BINARY:
        return f"{kind.value} (first bytes {head[:8].hex(' ')})"
    return kind.value


# -- what an input to `pva convert` is ----------------------------------------------------------

#: Top-level keys of a legacy (v1) graph profile, as Poplar wrote them.
LEGACY_GRAPH_KEYS = frozenset(
    {
        "target",
        "optimizationInfo",
        "graph",
        "vertexTypes",
        "computeSets",
        "exchanges",
        "externalExchanges",
        "hostExchanges",
        "programs",
        "controlPrograms",
        "functionPrograms",
        "memory",
    }
)
#: Top-level keys of a legacy (v1) execution profile.
LEGACY_EXECUTION_KEYS = frozenset(
    {
        "profilerMode",
        "programTrace",
        "simulation",
        "computeSetCyclesByTile",
        "computeSetCycles",
        "vertexCycles",
        "vertexComputeSet",
        "vertexType",
        "externalExchangeCycles",
        "hostExchangeCycles",
    }
)
#: Keys that carry an explicit format marker in newer (v2) profiles.
_FORMAT_MARKER_KEYS = ("profilerFormat", "profileFormat", "formatVersion", "format", "version")
#: Bytes read when sniffing a document's top-level keys.
SNIFF_BYTES = 1 << 20


class InputKind(enum.Enum):
    """Kinds of input `pva convert` recognises (and, for some, refuses)."""

    LEGACY_GRAPH = "a legacy Poplar graph profile (v1)"
    LEGACY_EXECUTION = "a legacy Poplar execution profile (v1)"
    LEGACY_COMBINED = "a legacy Poplar profile holding graphProfile and executionProfile (v1)"
    LEGACY_PRE_2019 = "a pre-2019 Poplar report (the old getGraphReport/getExecutionReport format)"
    LEGACY_V2 = "a Poplar v2 'experimental' profile (profiler.format=experimental)"
    LEGACY_V3 = "a SQLite profile that is not a pva report (a Poplar v3 'unstable' profile or a Graphcore profile.pop)"
    POPLAR_TEXT_SUMMARY = "a Poplar text profile summary (printProfileSummary output)"
    CHROME_TRACE = "a Chrome trace event JSON file"
    CEREBRAS_COMPILE_REPORT = "a Cerebras compile report (compile_report.txt)"
    PVA_REPORT = "a pva report (profile.pop)"
    PVA_TRACE = "a pva trace file"
    UNKNOWN = "a file of unknown kind"


class InputInfo:
    """What `classify_input` found: the kind, the encoding and the top-level keys seen."""

    __slots__ = ("path", "kind", "encoding", "keys", "detail")

    def __init__(self, path: str, kind: InputKind, encoding: str, keys: tuple[str, ...] = (), detail: str = ""):
        self.path = path
        self.kind = kind
        self.encoding = encoding  # json, cbor, text, sqlite or binary
        self.keys = keys
        self.detail = detail

    def describe(self) -> str:
        """The kind in words, with the encoding and detail when they help."""
        text = self.kind.value
        if self.kind in (InputKind.LEGACY_GRAPH, InputKind.LEGACY_EXECUTION, InputKind.LEGACY_COMBINED):
            text += f" in {self.encoding.upper()}"
        if self.detail:
            text += f" ({self.detail})"
        return text

    def __repr__(self) -> str:
        return f"<InputInfo {self.path!r} {self.kind.name} {self.encoding}>"


_PRE_2019_TEXT = (
    re.compile(r"^Memory Usage\s+:", re.M),
    re.compile(r"^\s*Step #\d+:", re.M),
    re.compile(r"Max tile memory \(tile \d+\): \d+"),
)
_SUMMARY_TEXT = (
    re.compile(r"^Target:\s*$", re.M),
    re.compile(r"^\s*Memory Usage:\s*$", re.M),
    re.compile(r"^\s*Total cycles:\s+[\d,]+", re.M),
    re.compile(r"^\s*Execution:\s*$", re.M),
)


def _top_level(path: str, encoding: str) -> tuple[str, tuple[str, ...], tuple[str, ...], dict]:
    """(container kind, top-level keys, keys of the first array item, small top-level values)."""
    from .streaming.cbor_events import cbor_events
    from .streaming.json_events import json_events
    from .streaming.tree import InputProblem, NonFiniteProblem

    keys: list[str] = []
    item_keys: list[str] = []
    values: dict = {}
    container = ""
    depth = 0
    with open(path, "rb") as raw:
        limited = _Limited(raw, SNIFF_BYTES)
        events = json_events(limited, None) if encoding == "json" else cbor_events(limited, None)
        current = None
        try:
            for event, value in events:
                if depth == 0 and event in ("start_map", "start_array"):
                    container = "object" if event == "start_map" else "array"
                elif depth == 0 and event == "value":
                    container = "object" if isinstance(value, dict) else "array" if isinstance(value, list) else ""
                    if isinstance(value, dict):
                        keys = list(value)
                        values = {k: v for k, v in value.items() if isinstance(v, (str, int, float))}
                    elif isinstance(value, list) and value and isinstance(value[0], dict):
                        item_keys = list(value[0])
                    break
                if event in ("start_map", "start_array"):
                    depth += 1
                    continue
                if event in ("end_map", "end_array"):
                    depth -= 1
                    if depth == 1 and container == "array" and item_keys:
                        break
                    if depth == 0:
                        break
                    continue
                if depth == 1 and event == "map_key":
                    keys.append(value)
                    current = value
                elif depth == 1 and container == "object" and current is not None and event in ("string", "number"):
                    values[current] = value
                elif depth == 1 and container == "object" and event == "value" and current is not None:
                    if isinstance(value, (str, int, float)):
                        values[current] = value
                elif depth == 2 and container == "array" and event == "map_key":
                    item_keys.append(value)
                elif depth == 1 and container == "array" and event == "value" and isinstance(value, dict):
                    item_keys = list(value)
                    break
                if len(keys) > 64:
                    break
        except NonFiniteProblem:
            _refuse_non_finite(path, encoding)
        except (InputProblem, ValueError, OSError):
            pass
    return container, tuple(keys), tuple(item_keys), values


def _refuse_non_finite(path: str, encoding: str) -> None:
    """Raise the located InvalidInputError for a NaN or infinity met while sniffing."""
    from .streaming.cbor_events import cbor_events
    from .streaming.json_events import json_events
    from .streaming.tree import build_tree

    with open(path, "rb") as raw:
        limited = _Limited(raw, SNIFF_BYTES)
        build_tree(json_events(limited, None) if encoding == "json" else cbor_events(limited, None), path)


class _Limited:
    """A binary reader that ends after `limit` bytes."""

    def __init__(self, raw: BinaryIO, limit: int) -> None:
        self._raw = raw
        self._left = limit

    def read(self, size: int = -1) -> bytes:
        if self._left <= 0:
            return b""
        if size is None or size < 0 or size > self._left:
            size = self._left
        data = self._raw.read(size)
        self._left -= len(data)
        return data


def _marker(values: dict) -> str | None:
    for key in _FORMAT_MARKER_KEYS:
        value = values.get(key)
        if value is None:
            continue
        text = str(value).lower()
        if "experimental" in text or text in ("2", "v2", "2.0") or "unstable" in text:
            return f"{key} = {value!r}"
    return None


def classify_input(path: str | os.PathLike[str]) -> InputInfo:
    """What an input file for `pva convert` is, from its first bytes and top-level keys."""
    name = os.fspath(path)
    check_regular_file(name, "input file")
    head = read_head(name, 4096)
    if head[:2] == GZIP_MAGIC:
        return _classify_gzip(name)
    kind = kind_of_bytes(head)
    if kind is FileKind.PROFILE:
        return InputInfo(name, InputKind.PVA_REPORT, "sqlite")
    if kind is FileKind.TRACE:
        return InputInfo(name, InputKind.PVA_TRACE, "sqlite")
    if kind is FileKind.SQLITE:
        return InputInfo(name, InputKind.LEGACY_V3, "sqlite", detail=_sqlite_tables(name))
    if kind in (FileKind.JSON, FileKind.CBOR):
        encoding = "json" if kind is FileKind.JSON else "cbor"
        container, keys, item_keys, values = _top_level(name, encoding)
        found = set(keys)
        marker = _marker(values)
        if marker:
            return InputInfo(name, InputKind.LEGACY_V2, encoding, keys, marker)
        if container == "array" and {"ph", "name"} & set(item_keys) or "traceEvents" in found:
            return InputInfo(name, InputKind.CHROME_TRACE, encoding, keys)
        if {"graphProfile", "executionProfile"} & found:
            return InputInfo(name, InputKind.LEGACY_COMBINED, encoding, keys)
        if LEGACY_GRAPH_KEYS & found:
            return InputInfo(name, InputKind.LEGACY_GRAPH, encoding, keys)
        if LEGACY_EXECUTION_KEYS & found:
            return InputInfo(name, InputKind.LEGACY_EXECUTION, encoding, keys)
        if {"graphReport", "executionReport", "computeSetReport", "tileReport"} & found:
            return InputInfo(name, InputKind.LEGACY_PRE_2019, encoding, keys)
        shown = ", ".join(keys[:12]) + (", ..." if len(keys) > 12 else "")
        detail = f"a JSON {container or 'value'}" if encoding == "json" else f"a CBOR {container or 'value'}"
        if keys:
            detail += f" with top-level keys {shown}"
        return InputInfo(name, InputKind.UNKNOWN, encoding, keys, detail)
    if kind is FileKind.TEXT:
        text = head.decode("utf-8", "replace").lstrip("\ufeff")
        if text.lstrip().startswith("Estimated Overall Performance"):
            return InputInfo(name, InputKind.CEREBRAS_COMPILE_REPORT, "text")
        if any(p.search(text) for p in _PRE_2019_TEXT):
            return InputInfo(name, InputKind.LEGACY_PRE_2019, "text", detail="its text summary")
        if sum(bool(p.search(text)) for p in _SUMMARY_TEXT) >= 1 and (
            "Total Tiles:" in text or "Tiles per IPU:" in text or "Total cycles:" in text or "Memory Usage:" in text
        ):
            return InputInfo(name, InputKind.POPLAR_TEXT_SUMMARY, "text")
        return InputInfo(name, InputKind.UNKNOWN, "text", detail=describe_bytes(head))
    return InputInfo(name, InputKind.UNKNOWN, "binary", detail=describe_bytes(head))


def _classify_gzip(name: str) -> InputInfo:
    """A gzip-compressed input: a Chrome trace (`.json.gz`, as the PyTorch profiler writes) or nothing known."""
    import gzip
    import zlib

    try:
        with gzip.open(name, "rb") as raw:
            text = raw.read(SNIFF_BYTES)
    except (OSError, EOFError, zlib.error) as exc:
        return InputInfo(name, InputKind.UNKNOWN, "gzip", detail=f"damaged gzip-compressed data ({exc})")
    stripped = text.lstrip(b" \t\r\n\xef\xbb\xbf")
    if stripped[:1] in (b"{", b"[") and (b'"traceEvents"' in text or b'"ph"' in text):
        return InputInfo(name, InputKind.CHROME_TRACE, "json.gz")
    return InputInfo(name, InputKind.UNKNOWN, "gzip", detail=f"gzip-compressed {describe_bytes(text[:4096])}")


def _sqlite_tables(path: str) -> str:
    import sqlite3

    try:
        uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro"
        conn = sqlite3.connect(uri, uri=True)
        try:
            names = [
                row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            ]
        finally:
            conn.close()
    except sqlite3.Error as exc:
        return f"unreadable: {exc}"
    if {"steps_by_ipu", "compute_sets", "programs"} <= set(names):
        return "its tables look like a Graphcore profile.pop"
    shown = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
    return f"tables: {shown}" if names else "no tables"
