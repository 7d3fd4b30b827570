"""A fleet dataset on disk: many reports as Hive-partitioned Parquet tables, added one whole report at a time.

Layout of a dataset directory::

    _pva_dataset.json                    manifest: layout version and the schema of every table
    <table>/report_id=<id>/part-0.parquet  the rows of one report (one directory per table)
    reports/report_id=<id>/part-0.parquet  one row per report; written last: it commits the report
    report_labels/report_id=<id>/...       the user labels of a report (key, value)

Every profile.pop table but the raw matrix chunks becomes a table of the same name; every per-tile
matrix becomes a table named after the matrix with columns ``row_index`` and ``cells`` (a list,
one value per column, usually per tile). ``report_id`` is a content hash of the report file, so adding a report twice is a
no-op. A report is visible once its ``reports`` partition exists; readers list only those, so a
crash mid-add leaves partitions nobody reads, removed by the next add.
"""

from __future__ import annotations

import contextlib
import ctypes
import datetime
import errno
import fcntl
import functools
import hashlib
import json
import os
import re
import shutil
import stat
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Self

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..atomic import AtomicOutput
from ..errors import CorruptReportError, InvalidInputError, PvaError, ReportNotFoundError
from ..pop.arrow_sqlite import ArrowSqlite, adbc_connect
from ..pop.arrow_tables import arrow_schema, table_to_arrow
from ..pop.check import STRUCTURE_CHECKS, check_report
from ..pop.reader import ProfileReader
from ..pop.schema import PROFILE_FORMAT, profile_matrices, profile_schema
from .metrics import LABEL

#: Version of the directory layout (the manifest refuses a newer one).
LAYOUT_VERSION = 1
MANIFEST = "_pva_dataset.json"
LOCK = "_pva_dataset.lock"
STAGING = "_pva_staging"
PART = "part-0.parquet"
#: Tables of the dataset itself, beside the report's own tables.
REPORTS = "reports"
LABELS = "report_labels"
#: Report tables not copied: the raw Arrow chunks of the matrices and their index (copied decoded).
SKIPPED = frozenset({"matrix_chunks", "matrices"})
#: Reports (or bytes of reports) staged before they are made durable together and committed.
GROUP_REPORTS = 64
GROUP_BYTES = 1 << 30
#: Parquet compression of every file written.
COMPRESSION = "zstd"

#: Errors of the machine, not of a report: they stop an add (exit 2) instead of skipping a report.
_MACHINE_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO})
_PARTITION = re.compile(r"^report_id=([0-9a-f]{32})$")
_REPORT_ID = re.compile(r"^[0-9a-f]{32}$")
#: A table name a manifest may hold: a plain SQL identifier, never a path.
_TABLE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
_TYPE_NAMES = {
    pa.int64(): "int64",
    pa.float64(): "float64",
    pa.string(): "string",
    pa.binary(): "binary",
    pa.list_(pa.int64()): "list<int64>",
    pa.bool_(): "bool",
}
_TYPES = {name: t for t, name in _TYPE_NAMES.items()}

REPORTS_SCHEMA = pa.schema(
    [
        ("path", pa.string()),  # absolute path of the file when it was added
        ("file_size", pa.int64()),  # size of the report file [bytes]
        ("producer", pa.string()),
        ("producer_version", pa.string()),
        ("format_version", pa.string()),  # format version of the file as added (tables are upgraded)
        ("poplar_version", pa.string()),
        ("created", pa.string()),  # creation time the report records (ISO 8601)
        ("added", pa.string()),  # when it entered the dataset (ISO 8601, UTC)
        ("target_type", pa.string()),
        ("architecture", pa.string()),
        ("num_ipus", pa.int64()),
        ("num_tiles", pa.int64()),
        ("tiles_per_ipu", pa.int64()),
        ("num_replicas", pa.int64()),
        ("bytes_per_tile", pa.int64()),
        ("clock_frequency", pa.float64()),
        ("labels", pa.string()),  # the labels as a JSON object (also in table report_labels)
    ]
)
LABELS_SCHEMA = pa.schema([("key", pa.string()), ("value", pa.string())])


def matrix_table_schema() -> pa.Schema:
    """Schema of a matrix's table: the row number and its cells, one value per column (usually a tile)."""
    return pa.schema([("row_index", pa.int64()), ("cells", pa.list_(pa.int64()))])


def report_tables() -> list[str]:
    """The profile.pop tables a dataset holds, in schema order."""
    return [name for name in profile_schema().tables if name not in SKIPPED]


def base_schemas() -> dict[str, pa.Schema]:
    """The schema of every table of a dataset written by this version (without report_id)."""
    return dict(_base_schemas())


@functools.cache
def _base_schemas() -> dict[str, pa.Schema]:
    out = {REPORTS: REPORTS_SCHEMA, LABELS: LABELS_SCHEMA}
    for name in report_tables():
        out[name] = pa.schema([pa.field(f.name, f.type) for f in _normative(name)])
    for name in profile_matrices()["matrices"]:
        out[name] = matrix_table_schema()
    return out


@functools.cache
def _normative(table: str) -> pa.Schema:
    """The Arrow schema of a profile.pop table (cached: schemas are immutable)."""
    return arrow_schema(table)


def report_id(path: str | os.PathLike[str]) -> str:
    """Content hash of a report file: 32 hex digits of its SHA-256."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()[:32]


def parse_labels(items: list[str]) -> dict[str, str]:
    """`key=value` strings as a dict; keys are short names of letters, digits and _ . : -."""
    labels: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not LABEL.match(key):
            raise InvalidInputError(f"label {item!r}: expected key=value with a key of letters, digits, _ . : -")
        labels[key] = value
    return labels


# -- the manifest ------------------------------------------------------------------------------


@dataclass
class Manifest:
    """The dataset's schema: for each table its columns in order, and whether it has any partition."""

    tables: dict[str, list[tuple[str, pa.DataType]]] = field(default_factory=dict)
    populated: set[str] = field(default_factory=set)
    #: Tables whose files do not all have every column (readers then unify the files' schemas by name).
    varied: set[str] = field(default_factory=set)
    #: Reports whose partitions a commit under way is moving into the tables: the only partitions an
    #: interrupted add may leave, and the only ones the next add removes.
    uncommitted: set[str] = field(default_factory=set)

    def schema(self, table: str) -> pa.Schema:
        """The table's columns (without report_id) as an Arrow schema."""
        return pa.schema([pa.field(n, t) for n, t in self.tables[table]])

    def to_json(self) -> dict:
        return {
            "format": "pva-dataset",
            "layout_version": LAYOUT_VERSION,
            "report_format": f"{PROFILE_FORMAT[0]}.{PROFILE_FORMAT[1]}",
            "partitioning": ["report_id"],
            "tables": {
                name: {
                    "columns": [[n, _TYPE_NAMES[t]] for n, t in cols],
                    "populated": name in self.populated,
                    "varied": name in self.varied,
                }
                for name, cols in self.tables.items()
            },
            "uncommitted": sorted(self.uncommitted),
        }

    @classmethod
    def from_json(cls, data: dict, path: str) -> Manifest:
        if not isinstance(data, dict) or data.get("format") != "pva-dataset":
            raise InvalidInputError(f"{path!r}: expected a pva dataset manifest, found something else", path)
        if data.get("layout_version") != LAYOUT_VERSION:
            raise InvalidInputError(
                f"{path!r}: dataset layout version {data.get('layout_version')!r}; this pva "
                f"reads version {LAYOUT_VERSION}",
                path,
            )
        manifest = cls()
        try:
            newer = _newer_format(data.get("report_format"))
            for name, spec in data["tables"].items():
                _check_table_name(name, path, newer)
                manifest.tables[name] = [(str(n), _TYPES[t]) for n, t in spec["columns"]]
                if spec.get("populated"):
                    manifest.populated.add(name)
                if spec.get("varied"):
                    manifest.varied.add(name)
            for rid in data.get("uncommitted", []):
                if not isinstance(rid, str) or not _REPORT_ID.match(rid):
                    raise InvalidInputError(
                        f"{path!r}: tampered dataset manifest: uncommitted report {rid!r} is not a report id "
                        f"(expected 32 hex digits); refusing to touch the dataset",
                        path,
                    )
                manifest.uncommitted.add(rid)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            if isinstance(exc, PvaError):
                raise
            raise InvalidInputError(f"{path!r}: damaged dataset manifest ({type(exc).__name__}: {exc})", path) from None
        return manifest

    def evolve(self, table: str, schema: pa.Schema) -> bool:
        """Add the columns of `schema` the table lacks; returns whether anything changed.

        A column whose type differs from the one recorded raises: the schema only ever grows.
        """
        known = dict(self.tables.get(table, []))
        changed = table not in self.tables
        columns = list(self.tables.get(table, []))
        for f in schema:
            if f.name in known:
                if known[f.name] != f.type:
                    raise InvalidInputError(
                        f"table {table!r} column {f.name!r} is {f.type} in this report but "
                        f"{known[f.name]} in the dataset; a column never changes type"
                    )
            else:
                columns.append((f.name, f.type))
                changed = True
        self.tables[table] = columns
        return changed


def _newer_format(value: object) -> bool:
    """Whether a manifest's report format is a later version than this pva's (it may name later tables)."""
    if not isinstance(value, str):
        return False
    major, _, minor = value.partition(".")
    if not (major.isdigit() and minor.isdigit()):
        return False
    return (int(major), int(minor)) > PROFILE_FORMAT[:2]


def _check_table_name(name: object, path: str, newer: bool) -> None:
    """Refuse a manifest table that is not a plain table name of the schema (a later version's may be new)."""
    if not isinstance(name, str) or not _TABLE_NAME.match(name):
        raise InvalidInputError(
            f"{path!r}: tampered dataset manifest: table {name!r} is not a plain table name (expected lower-case "
            f"letters, digits and _); refusing to touch the dataset",
            path,
        )
    if name not in _base_schemas() and not newer:
        raise InvalidInputError(
            f"{path!r}: tampered dataset manifest: {name!r} is not a table of a pva dataset of format "
            f"{PROFILE_FORMAT[0]}.{PROFILE_FORMAT[1]}; refusing to touch the dataset",
            path,
        )


def is_dataset(path: str | os.PathLike[str]) -> bool:
    """Whether `path` is a directory holding a dataset manifest."""
    return os.path.isfile(os.path.join(os.fspath(path), MANIFEST))


def read_manifest(dataset: str | os.PathLike[str]) -> Manifest:
    """The manifest of a dataset directory."""
    root = os.fspath(dataset)
    path = os.path.join(root, MANIFEST)
    if not os.path.isdir(root):
        raise ReportNotFoundError(f"{root!r}: no such directory; expected a pva dataset", root)
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except FileNotFoundError:
        raise InvalidInputError(
            f"{root!r}: not a pva dataset (no {MANIFEST}); create one with 'pva dataset add {root} REPORT...'", root
        ) from None
    except (OSError, ValueError) as exc:
        raise InvalidInputError(f"{path!r}: cannot read the dataset manifest ({exc})", path) from None
    return Manifest.from_json(data, path)


def _write_manifest(root: str, manifest: Manifest) -> None:
    with AtomicOutput(os.path.join(root, MANIFEST)) as out, open(out.path, "w", encoding="utf-8") as handle:
        json.dump(manifest.to_json(), handle, indent=1)
        handle.write("\n")


# -- reading a dataset ---------------------------------------------------------------------------


def committed_reports(dataset: str | os.PathLike[str]) -> list[str]:
    """The report ids whose add completed, sorted."""
    reports = os.path.join(os.fspath(dataset), REPORTS)
    ids = []
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(reports):
            match = _PARTITION.match(entry.name)
            if match:  # a partition directory is moved into place whole, its file inside
                ids.append(match.group(1))
    return sorted(ids)


def table_files(dataset: str | os.PathLike[str], table: str, ids: list[str] | None = None) -> list[str]:
    """The Parquet files of a table that belong to committed reports (all of them, or those in `ids`)."""
    root = os.fspath(dataset)
    wanted = set(committed_reports(root) if ids is None else ids)
    files = []
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(os.path.join(root, table)):
            match = _PARTITION.match(entry.name)
            if match and match.group(1) in wanted:
                files.append(os.path.join(entry.path, PART))
    return sorted(files)


# -- adding reports ------------------------------------------------------------------------------


@dataclass
class AddOutcome:
    """What happened to one input of an add."""

    path: str
    status: str  # "added", "present" (already in the dataset) or "skipped"
    report_id: str = ""
    reason: str = ""
    bytes: int = 0
    rows: int = 0


class DatasetWriter:
    """Appends reports to a dataset directory; one writer at a time (an exclusive lock on the dataset)."""

    def __init__(self, dataset: str | os.PathLike[str]) -> None:
        self.root = os.path.abspath(os.fspath(dataset))
        if os.path.lexists(self.root) and not os.path.isdir(self.root):
            raise InvalidInputError(
                f"{self.root!r}: is a file; expected a dataset directory (or nothing there)", self.root
            )
        if os.path.isdir(self.root) and not is_dataset(self.root) and os.listdir(self.root):
            raise InvalidInputError(
                f"{self.root!r}: a non-empty directory that is not a pva dataset (no {MANIFEST}); "
                f"expected a dataset or a new directory",
                self.root,
            )
        parent = os.path.dirname(self.root)
        if not os.path.isdir(parent):
            raise ReportNotFoundError(f"cannot create {self.root!r}: directory {parent!r} does not exist", self.root)
        os.makedirs(self.root, exist_ok=True)
        self._lock = open(os.path.join(self.root, LOCK), "a+b")  # noqa: SIM115 - held until close()
        try:
            fcntl.flock(self._lock.fileno(), fcntl.LOCK_EX)
            if is_dataset(self.root):
                self.manifest = read_manifest(self.root)
            else:
                self.manifest = Manifest()
                for name, schema in base_schemas().items():
                    self.manifest.evolve(name, schema)
                _write_manifest(self.root, self.manifest)
            self.committed = set(committed_reports(self.root))
            self._staged: set[str] = set()
            self._table_dirs: set[str] = set()
            self._pending = Manifest(tables=dict(self.manifest.tables))  # the schema with the staged reports
            self._check_layout()
            self._remove_leftovers()
        except BaseException:
            self._lock.close()
            raise

    def close(self) -> None:
        """Release the dataset."""
        if not self._lock.closed:
            self._lock.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _check_layout(self) -> None:
        """Refuse a dataset whose table folders (or staging folder) are not real directories inside it."""
        for name in [STAGING, *self.manifest.tables]:
            path = os.path.join(self.root, name)
            try:
                mode = os.lstat(path).st_mode
            except FileNotFoundError:
                continue
            if not stat.S_ISDIR(mode):
                kind = "a symbolic link" if stat.S_ISLNK(mode) else "not a directory"
                raise InvalidInputError(
                    f"{path!r}: is {kind}; expected the dataset's own folder of table {name!r}; "
                    f"refusing to write to the dataset",
                    path,
                )

    def _remove_leftovers(self) -> None:
        """Remove what an interrupted add of ours left: staged files, and the partitions of the reports the
        manifest records as being committed that never were. Nothing else is ever removed."""
        staging = os.path.join(self.root, STAGING)
        if os.path.isdir(staging) and not os.path.islink(staging):
            shutil.rmtree(staging, ignore_errors=True)
        leftovers = self.manifest.uncommitted - self.committed
        for table in self.manifest.tables:
            for rid in sorted(leftovers):
                path = os.path.join(self.root, table, f"report_id={rid}")
                with contextlib.suppress(FileNotFoundError):
                    if stat.S_ISDIR(os.lstat(path).st_mode):
                        shutil.rmtree(path, ignore_errors=True)
        if self.manifest.uncommitted:
            self.manifest.uncommitted = set()
            _write_manifest(self.root, self.manifest)

    def add(
        self,
        paths: Iterable[str | os.PathLike[str]],
        labels: dict[str, str] | None = None,
        progress: Callable[[AddOutcome], None] | None = None,
    ) -> list[AddOutcome]:
        """Add reports: each checked, upgraded to the current tables, and written whole or not at all.

        Reports are staged in groups, made durable together, then committed one by one. A file
        that is not a readable, consistent report is skipped with the reason; errors of the
        machine (a full disk) propagate, leaving the reports committed so far.
        """
        try:
            return self._add(paths, labels, progress)
        except OSError as exc:
            if exc.errno not in _MACHINE_ERRORS:
                raise
            for rid in list(self._staged):
                self._unstage(rid)
            raise InvalidInputError(
                f"{self.root!r}: cannot write the dataset ({os.strerror(exc.errno).lower()}); "
                f"the reports committed before this one are in it, nothing else",
                self.root,
            ) from None

    def _add(
        self,
        paths: Iterable[str | os.PathLike[str]],
        labels: dict[str, str] | None,
        progress: Callable[[AddOutcome], None] | None,
    ) -> list[AddOutcome]:
        outcomes: list[AddOutcome] = []
        group: list[tuple[AddOutcome, dict[str, pa.Schema]]] = []
        group_bytes = 0
        for path in paths:
            outcome, written = self._prepare(os.fspath(path), labels or {})
            if written is None:
                outcomes.append(outcome)
                if progress:
                    progress(outcome)
                continue
            group.append((outcome, written))
            group_bytes += outcome.bytes
            if len(group) >= GROUP_REPORTS or group_bytes >= GROUP_BYTES:
                outcomes.extend(self._commit(group, progress))
                group, group_bytes = [], 0
        outcomes.extend(self._commit(group, progress))
        return outcomes

    def _prepare(self, path: str, labels: dict[str, str]) -> tuple[AddOutcome, dict[str, pa.Schema] | None]:
        """Check a report and stage its partitions; (outcome, schemas of the tables staged) or (outcome, None)."""
        try:
            size = os.stat(path).st_size
            rid = report_id(path)
        except OSError as exc:
            return AddOutcome(path, "skipped", reason=f"cannot be read ({exc.strerror or exc})"), None
        if rid in self.committed or rid in self._staged:
            return AddOutcome(path, "present", rid, bytes=size), None
        problem = _quick_check(path)
        if problem:
            return AddOutcome(path, "skipped", rid, reason=problem, bytes=size), None
        try:
            written, rows = self._stage(path, rid, size, labels)
        except PvaError as exc:
            self._unstage(rid)
            return AddOutcome(path, "skipped", rid, reason=str(exc), bytes=size), None
        except BaseException:
            self._unstage(rid)
            raise
        probe = Manifest(tables=dict(self._pending.tables))
        try:
            for table, schema in written.items():
                probe.evolve(table, schema)
        except InvalidInputError as exc:  # a column of another type than the dataset's
            self._unstage(rid)
            return AddOutcome(path, "skipped", rid, reason=str(exc), bytes=size), None
        self._pending = probe
        self._staged.add(rid)
        return AddOutcome(path, "added", rid, bytes=size, rows=rows), written

    def _staged_dir(self, table: str, rid: str) -> str:
        """Where a partition is written before its commit: outside the table, which engines glob."""
        return os.path.join(self.root, STAGING, table, f"report_id={rid}")

    def _unstage(self, rid: str) -> None:
        for table in self.manifest.tables:
            shutil.rmtree(self._staged_dir(table, rid), ignore_errors=True)

    def _stage(self, path: str, rid: str, size: int, labels: dict[str, str]) -> tuple[dict[str, pa.Schema], int]:
        """Write every table of the report beside its final place; returns the schema of each table and the rows."""
        written: dict[str, pa.Schema] = {}
        rows = 0

        def put(table: str, data: pa.Table) -> None:
            nonlocal rows
            if data.num_rows == 0:
                return  # no file: every column of the manifest is in some file of its table
            written[table] = data.schema
            directory = self._staged_dir(table, rid)
            os.makedirs(directory)
            pq.write_table(data, os.path.join(directory, PART), compression=COMPRESSION)
            rows += data.num_rows

        reader = ProfileReader(path)
        try:
            source = _TableSource(reader)
            try:
                for table in report_tables():
                    put(table, source.read(table))
            finally:
                source.close()
            for name in profile_matrices()["matrices"]:
                matrix = reader.matrix(name)
                if matrix is not None:
                    put(name, _matrix_table(matrix))
            meta, target = reader.metadata, reader.target
            put(
                LABELS,
                pa.Table.from_pylist([{"key": k, "value": v} for k, v in sorted(labels.items())], schema=LABELS_SCHEMA),
            )
            put(
                REPORTS,
                pa.Table.from_pylist(
                    [
                        {
                            "path": os.path.abspath(path),
                            "file_size": size,
                            "producer": meta.get("producer", ""),
                            "producer_version": meta.get("producer_version", ""),
                            "format_version": f"{reader.version[0]}.{reader.version[1]}",
                            "poplar_version": meta.get("poplar_version", ""),
                            "created": meta.get("created", ""),
                            "added": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                            "target_type": target["type"],
                            "architecture": target["architecture"],
                            "num_ipus": target["num_ipus"],
                            "num_tiles": target["num_tiles"],
                            "tiles_per_ipu": target["tiles_per_ipu"],
                            "num_replicas": target["num_replicas"],
                            "bytes_per_tile": target["bytes_per_tile"],
                            "clock_frequency": float(target["clock_frequency"]),
                            "labels": json.dumps(labels, sort_keys=True),
                        }
                    ],
                    schema=REPORTS_SCHEMA,
                ),
            )
        finally:
            reader.close()
        return written, rows

    def _commit(
        self, group: list[tuple[AddOutcome, dict[str, pa.Schema]]], progress: Callable[[AddOutcome], None] | None
    ) -> list[AddOutcome]:
        """Grow the schema, make the staged files durable, then commit each report (its reports partition last)."""
        if not group:
            return []
        evolved = Manifest(
            tables=dict(self.manifest.tables), populated=set(self.manifest.populated), varied=set(self.manifest.varied)
        )
        before = {t: len(c) for t, c in evolved.tables.items()}
        for outcome, written in group:
            for table, schema in written.items():
                evolved.evolve(table, schema)
                if os.path.isdir(self._staged_dir(table, outcome.report_id)):
                    evolved.populated.add(table)
        for outcome, written in group:  # a file without every column of its table: readers unify by name
            for table, schema in written.items():
                if os.path.isdir(self._staged_dir(table, outcome.report_id)) and schema.names != [
                    n for n, _ in evolved.tables[table]
                ]:
                    evolved.varied.add(table)
        for table in self.manifest.populated:
            if len(evolved.tables[table]) != before.get(table):
                evolved.varied.add(table)  # columns added after files were written without them
        _sync(self.root, [os.path.join(self._staged_dir(t, o.report_id), PART) for o, w in group for t in w])
        evolved.uncommitted = {outcome.report_id for outcome, _ in group}
        _write_manifest(self.root, evolved)  # records what the renames below may leave, before the first
        self.manifest = evolved
        self._pending = Manifest(tables=dict(evolved.tables))
        done = []
        for outcome, written in group:
            rid = outcome.report_id
            for table in [t for t in written if t != REPORTS] + [REPORTS]:
                staged = self._staged_dir(table, rid)
                if os.path.isdir(staged):
                    if table not in self._table_dirs:
                        os.makedirs(os.path.join(self.root, table), exist_ok=True)
                        self._table_dirs.add(table)
                    os.rename(staged, os.path.join(self.root, table, f"report_id={rid}"))
            self.committed.add(rid)
            self._staged.discard(rid)
            done.append(outcome)
            if progress:
                progress(outcome)
        _sync(self.root, [os.path.join(self.root, t) for t in self.manifest.populated])
        self.manifest.uncommitted = set()
        _write_manifest(self.root, self.manifest)
        return done


def _sync(root: str, paths: list[str]) -> None:
    """Make files (or directories) durable: one syncfs of the file system where Linux has it, else an fsync each."""
    libc = _libc()
    if libc is not None:
        fd = os.open(root, os.O_RDONLY)
        try:
            if libc.syncfs(fd) == 0:
                return
        finally:
            os.close(fd)
    for path in paths:
        with contextlib.suppress(FileNotFoundError, IsADirectoryError, PermissionError):
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


@functools.cache
def _libc():
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc if hasattr(libc, "syncfs") else None
    except OSError:
        return None


def _quick_check(path: str) -> str:
    """'' if the report opens and its storage is sound (`pva check` structure checks); else the first problem."""
    try:
        problems = check_report(path, only=STRUCTURE_CHECKS)
    except PvaError as exc:
        return str(exc)
    if not problems:
        return ""
    first = problems[0]
    if first.check == "open":
        return first.message
    more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
    return f"damaged report: {first.check}: {first.location}: {first.message}{more}"


def _matrix_table(matrix) -> pa.Table:
    """A matrix as rows (row_index, cells) with int64 values."""
    batches = []
    schema = matrix_table_schema()
    for first, block in matrix.iter_chunks():
        values = np.ascontiguousarray(block, dtype=np.uint64).reshape(block.shape[0], -1)
        if values.size and int(values.max()) > np.iinfo(np.int64).max:
            raise CorruptReportError(
                f"{matrix.source.path!r}: matrix {matrix.name!r} holds a value beyond 2^63", matrix.source.path
            )
        count, width = values.shape
        offsets = pa.array(np.arange(count + 1, dtype=np.int64) * width, pa.int32())
        lists = pa.ListArray.from_arrays(offsets, pa.array(values.reshape(-1).view(np.int64)))
        rows = pa.array(np.arange(first, first + count, dtype=np.int64))
        batches.append(pa.record_batch([rows, lists], schema=schema))
    return pa.Table.from_batches(batches, schema=schema)


class _TableSource:
    """Reads whole tables of a report into Arrow: through the ADBC SQLite driver where installed (native
    code), else through sqlite3; typed and completed to the current schema (older versions upgraded)."""

    def __init__(self, reader: ProfileReader) -> None:
        self.reader = reader
        self.conn = adbc_connect(reader.path)

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()

    def read(self, table: str, columns: list[str] | None = None) -> pa.Table:
        present = list(self.reader.file.tables.get(table, ()))
        return read_table(self.reader, self.conn, table, present, columns)


def read_table(
    reader, conn: ArrowSqlite | None, table: str, present: list[str], columns: list[str] | None = None
) -> pa.Table:
    """A report table as Arrow in the current schema: `columns` of it (all when None), with columns of a
    later format version kept and columns the file lacks (an older version) as nulls."""
    normative = _normative(table)
    names = normative.names
    wanted = columns if columns is not None else names + [c for c in present if c not in names]
    stored = [c for c in wanted if c in present]
    if not stored:
        (count,) = reader.query_one(f'SELECT count(*) FROM "{table}"')
        data = pa.table({"_": pa.nulls(count, pa.int64())}).drop_columns(["_"])
    elif conn is None:
        data = _read_sqlite3(reader, table, stored, normative)
    else:
        quoted = ", ".join(f'"{c}"' for c in stored)
        try:
            data = conn.arrow(f'SELECT {quoted} FROM "{table}"')
        except Exception as exc:
            raise CorruptReportError(
                f"{reader.path!r}: table {table!r} cannot be read ({str(exc).splitlines()[0]})", reader.path
            ) from None
    arrays, fields = [], []
    for name in wanted:
        target = normative.field(name).type if name in names else None
        if name in data.column_names:
            column = data.column(name)
            if target is None:
                target = pa.string() if pa.types.is_null(column.type) else column.type
            if column.type != target:
                try:
                    column = column.cast(target)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
                    raise CorruptReportError(
                        f"{reader.path!r}: table {table!r} column {name!r} holds values that are not {target} ({exc})",
                        reader.path,
                    ) from None
        else:
            column = pa.nulls(data.num_rows, target or pa.string())
        arrays.append(column)
        fields.append(pa.field(name, target or pa.string()))
    if not arrays:
        return data
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def _read_sqlite3(reader: ProfileReader, table: str, stored: list[str], normative: pa.Schema) -> pa.Table:
    """Columns of a table through Python's sqlite3 (without the ADBC driver): slower, same result."""
    known = [c for c in stored if c in normative.names]
    data = table_to_arrow(reader, table, known) if known else None
    extra = [c for c in stored if c not in normative.names]
    if extra:
        quoted = ", ".join(f'"{c}"' for c in extra)
        rows = reader.file.query(f'SELECT {quoted} FROM "{table}"')
        columns = {c: pa.array([r[i] for r in rows]) for i, c in enumerate(extra)}
        data = pa.table(columns) if data is None else data.append_column(extra[0], columns.pop(extra[0]))
        for name, values in columns.items():
            data = data.append_column(name, values)
    assert data is not None
    return data


def iter_reports(root: str | os.PathLike[str]) -> Iterator[str]:
    """Every regular file under `root` (recursively, sorted) that could be a report: *.pop files."""
    for directory, dirs, files in os.walk(os.fspath(root)):
        dirs.sort()
        for name in sorted(files):
            if name.endswith(".pop"):
                yield os.path.join(directory, name)
