"""SQL over many reports: DuckDB over a dataset's Parquet files or over loose report files, Spark views
of a dataset, and the fleet analyses (trend, regressions) as SQL that runs on either engine.

Every query runs with limits: one SELECT (or EXPLAIN) statement of bounded length and expansion,
time and memory limits enforced by a watchdog that interrupts the engine (while it plans too),
DuckDB's memory limit, no extension installs or loads, DuckDB's temporary files in a private
directory of pva's removed afterwards, and file access confined to the dataset directory (none
at all over loose reports).
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import functools
import json
import os
import re
import shutil
import struct
import tempfile
import time
from collections.abc import Iterator
from typing import NoReturn

import pyarrow as pa

from ..detect import FileKind, check_regular_file, kind_of_bytes, read_head
from ..errors import InvalidInputError, PvaError
from ..pop.arrow_sqlite import adbc_connect
from ..pop.reader import ProfileReader
from ..pop.schema import PROFILE_FORMAT, split_user_version
from . import dataset as ds
from .limits import DEFAULT_LIMITS, Limits, QueryLimitError
from .query_bounds import Watchdog, check_query_size

#: Rows per streamed batch.
BATCH_ROWS = 8192
#: Most threads reading loose reports at once, and the fewest reports worth starting them for (a
#: report takes about as long to read as starting a pool of threads).
_READ_THREADS = 8
_THREADED_FROM = 8
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_STAR = re.compile(r"(?<!count\()\*", re.IGNORECASE)


def _duckdb():
    try:
        import duckdb
    except ImportError:  # pragma: no cover - depends on the installation
        raise InvalidInputError("pva query needs DuckDB: pip install 'pva[query]'") from None
    return duckdb


def private_temp_directory() -> str:
    """A new directory of pva's own, readable by this user only, for DuckDB's temporary files (DuckDB
    otherwise uses, and allows reading, ``.tmp`` in the working directory)."""
    return tempfile.mkdtemp(prefix="pva-duckdb-")


def connect(limits: Limits, allowed: tuple[str, ...] | list[str] = (), temp_directory: str | None = None):
    """A DuckDB connection with the limits set, reading only under `allowed` directories, then locked.

    Its temporary files go to `temp_directory` (a `private_temp_directory`; the caller removes it).
    """
    duckdb = _duckdb()
    config = {
        "autoinstall_known_extensions": False,
        "autoload_known_extensions": False,
        "memory_limit": limits.memory,
        "temp_directory": temp_directory or _process_temp_directory(),
    }
    if limits.threads:
        config["threads"] = limits.threads
    try:
        con = duckdb.connect(config=config)
    except duckdb.Error as exc:
        raise InvalidInputError(f"bad query limits ({str(exc).splitlines()[0]})") from None
    if allowed:
        con.execute(
            "SET allowed_directories = $dirs", {"dirs": [os.path.join(os.path.abspath(d), "") for d in allowed]}
        )
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    return con


@functools.cache
def _process_temp_directory() -> str:
    """The private temporary directory of the connections this process keeps open, removed at exit."""
    path = private_temp_directory()
    atexit.register(shutil.rmtree, path, True)
    return path


@functools.lru_cache(maxsize=4)
def _loose_database(memory: str, threads: int | None):
    """A locked DuckDB database with no file access, shared by loose queries of the same limits.

    Each query runs on its own cursor and holds its tables as temporary tables of that cursor, so
    queries do not see each other's data, and a repeated query pays no start-up of an engine.
    """
    return connect(Limits(timeout=None, memory=memory, threads=threads))


def check_statement(con, sql: str, where: str) -> None:
    """Refuse anything but exactly one SELECT (or EXPLAIN) statement."""
    duckdb = _duckdb()
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise InvalidInputError(f"{where!r}: query failed: {str(exc).splitlines()[0]}", where) from None
    if len(statements) != 1:
        raise InvalidInputError(f"{where!r}: expected one SQL statement, found {len(statements)}", where)
    kind = statements[0].type
    if kind not in (duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN):
        name = str(kind).rsplit(".", 1)[-1]
        raise InvalidInputError(f"{where!r}: only SELECT queries are allowed, found a {name} statement", where)


def words(sql: str) -> set[str]:
    """The identifiers of an SQL text (a superset of the tables and columns it names)."""
    return set(_WORD.findall(sql))


# -- views over a dataset ------------------------------------------------------------------------


def dataset_views(con, dataset: str, sql: str) -> list[str]:
    """Create a view over the committed partitions of every dataset table the SQL names; returns their names."""
    manifest = ds.read_manifest(dataset)
    used = words(sql)
    ids = ds.committed_reports(dataset)
    made = []
    for table in manifest.tables:
        if table not in used:
            continue
        schema = manifest.schema(table)
        files = ds.table_files(dataset, table, ids) if table in manifest.populated else []
        con.execute(f'CREATE VIEW "{table}" AS {_duckdb_select(table, schema, files, table in manifest.varied)}')
        made.append(table)
    return made


def _duckdb_select(table: str, schema: pa.Schema, files: list[str], varied: bool) -> str:
    """A SELECT of the table's columns in manifest order over its Parquet files.

    Every column of the manifest is in some file of a populated table; where files differ
    (`varied`), DuckDB unifies them by name and a file without a column reads as nulls.
    """
    if not files:
        nulls = ", ".join(
            ["CAST(NULL AS VARCHAR) AS report_id"]
            + [f'CAST(NULL AS {_duck_type(f.type)}) AS "{f.name}"' for f in schema]
        )
        return f"SELECT {nulls} WHERE false"
    listing = "[" + ", ".join(_literal(f) for f in files) + "]"
    unify = "union_by_name = true, " if varied else ""
    source = f"read_parquet({listing}, hive_partitioning = true, {unify}hive_types = {{'report_id': VARCHAR}})"
    columns = ["report_id"] + [f'"{f.name}"' for f in schema]
    return f"SELECT {', '.join(columns)} FROM {source}"


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _duck_type(t: pa.DataType) -> str:
    return {
        pa.int64(): "BIGINT",
        pa.float64(): "DOUBLE",
        pa.string(): "VARCHAR",
        pa.binary(): "BLOB",
        pa.bool_(): "BOOLEAN",
        pa.list_(pa.int64()): "BIGINT[]",
    }[t]


# -- views over loose reports --------------------------------------------------------------------


def loose_views(con, paths: list[str], labels: list[str], sql: str) -> dict:
    """Register the tables the SQL names, read from each report (only the columns it names), tagged `report`.

    Returns statistics: reports, tables and bytes of the files.
    """
    used = words(sql)
    star = bool(_STAR.search(sql))
    schemas = ds.base_schemas()
    tables = [t for t in ds.report_tables() if t in used]
    columns = {t: None if star else [c for c in schemas[t].names if c in used] for t in tables}
    catalogue_used = "reports" in used

    def read_one(path: str, label: str) -> tuple[dict, dict[str, pa.Table]]:
        report = _open_report(path, tables)
        try:
            metadata = report.metadata if catalogue_used else {}
            row = {
                "report": label,
                "path": os.path.abspath(path),
                "producer": metadata.get("producer", ""),
                "poplar_version": metadata.get("poplar_version", ""),
                "num_tiles": report.target["num_tiles"],
                "num_ipus": report.target["num_ipus"],
                "file_size": report.file_size,
            }
            data = {}
            for table in tables:
                part = ds.read_table(report, report.arrow, table, report.columns(table), columns[table])
                data[table] = part.add_column(0, "report", pa.repeat(pa.scalar(label, pa.string()), part.num_rows))
            return row, data
        finally:
            report.close()

    # SQLite and the ADBC driver release the GIL while they read: one thread per CPU reads reports side by side
    workers = min(len(paths), os.cpu_count() or 1, _READ_THREADS)
    if workers > 1 and len(paths) >= _THREADED_FROM:
        with concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="pva-query") as pool:
            results = list(pool.map(read_one, paths, labels))
    else:
        results = [read_one(path, label) for path, label in zip(paths, labels)]
    catalogue = [row for row, _data in results]
    size = sum(row["file_size"] for row in catalogue)
    parts: dict[str, list[pa.Table]] = {t: [data[t] for _row, data in results] for t in tables}
    del results
    # A query over several tables is planned from statistics that DuckDB keeps only for its own tables, so
    # its joins over registered Arrow tables run many times slower: those are copied into temporary tables.
    # A query over one table scans it once, and the Arrow data is read in place.
    copy = len(tables) + ("reports" in used) > 1
    if "reports" in used:
        _query_table(con, "reports", pa.Table.from_pylist(catalogue), copy)
    for table in list(parts):
        _query_table(con, table, pa.concat_tables(parts.pop(table), promote_options="permissive"), copy)
    return {"reports": len(paths), "tables": len(tables), "bytes": size}


def _query_table(con, name: str, data: pa.Table, copy: bool) -> None:
    """`data` as a table of this connection only (a copy, or the Arrow data in place), gone when it closes."""
    if not copy:
        con.register(name, data)
        return
    con.register("_pva_source", data)
    try:
        con.execute(f'CREATE TEMP TABLE "{name}" AS SELECT * FROM _pva_source')
    finally:
        con.unregister("_pva_source")


class _LooseReport:
    """What a loose query needs of one report: its metadata, target, table columns and an Arrow connection.

    With the ADBC driver a report is opened lightly (header, version, the tables the query uses);
    without it, or when anything looks wrong, through ProfileReader, whose checks name the problem.
    """

    def __init__(self, path: str, tables: list[str], light: bool) -> None:
        self.path = path
        self.file_size = os.path.getsize(path)
        self.reader: ProfileReader | None = None
        self.arrow = None
        if light:  # one connection, the ADBC driver's, for the header tables and the query's tables
            self.arrow = adbc_connect(path)
            self._metadata: dict | None = None  # read when the catalogue asks for it
            try:
                # every table is read by the names of its stored columns: a generated column planted in the
                # file (not in table_info) is never evaluated
                self._columns = {
                    t: [r["name"] for r in self._rows(f"SELECT name FROM pragma_table_info('{t}')")]
                    for t in {"target", *tables}
                }
                names = ", ".join(f'"{c}"' for c in self._columns["target"])
                rows = self._rows(f"SELECT {names} FROM target")
                if len(rows) != 1:
                    raise ValueError("target")
                self.target = rows[0]
            except BaseException:
                self.close()
                raise
        else:
            self.reader = ProfileReader(path)
            self._metadata, self.target = self.reader.metadata, self.reader.target
            self._columns = {t: list(self.reader.file.tables.get(t, ())) for t in tables}
            if tables:
                self.arrow = adbc_connect(path)

    def _rows(self, sql: str) -> list[dict]:
        assert self.arrow is not None
        return self.arrow.arrow(sql).to_pylist()

    @property
    def metadata(self) -> dict:
        if self._metadata is None:
            self._metadata = {row["key"]: row["value"] for row in self._rows("SELECT key, value FROM metadata")}
        return self._metadata

    def columns(self, table: str) -> list[str]:
        return self._columns[table]

    def query_one(self, sql: str):
        if self.reader is not None:
            return self.reader.query_one(sql)
        assert self.arrow is not None
        table = self.arrow.arrow(sql)
        return tuple(column[0].as_py() for column in table.columns) if table.num_rows else None

    @property
    def file(self):  # the sqlite3 fallback of read_table reads through the ProfileReader
        assert self.reader is not None
        return self.reader.file

    def close(self) -> None:
        if self.arrow is not None:
            self.arrow.close()
        if self.reader is not None:
            self.reader.close()


def _open_report(path: str, tables: list[str]) -> _LooseReport:
    """A loose report opened for a query: lightly where its header says it is a report of a version we read."""
    light = _adbc_available() and _plain_report(path)
    if light:
        from adbc_driver_manager import Error as AdbcError

        try:
            report = _LooseReport(path, tables, light=True)
            expected = ds.base_schemas()
            if all(set(expected[t].names) <= set(report.columns(t)) for t in tables) and isinstance(
                report.target.get("num_tiles"), int
            ):
                return report
            report.close()
        except (AdbcError, PvaError, ValueError, KeyError, TypeError):
            pass
    return _LooseReport(path, tables, light=False)  # raises the precise error of a bad file


def _plain_report(path: str) -> bool:
    """Whether the header is a profile report's of the major version this package reads (not WAL mode)."""
    try:
        check_regular_file(path, "report")
        head = read_head(path, 100)
    except (OSError, PvaError):
        return False
    if kind_of_bytes(head) is not FileKind.PROFILE or len(head) < 100:
        return False
    (user_version,) = struct.unpack(">I", head[60:64])
    return split_user_version(user_version)[0] == PROFILE_FORMAT[0] and head[18:20] == b"\x01\x01"


@functools.cache
def _adbc_available() -> bool:
    try:
        import adbc_driver_sqlite  # noqa: F401
    except ImportError:
        return False
    return True


# -- running -------------------------------------------------------------------------------------


class Result:
    """A query's result: its column names and its rows as a stream of Arrow record batches.

    Iterating runs under the query's time limit; close() (or exhausting it) stops the watchdog.
    """

    def __init__(self, con, sql: str, where: str, limits: Limits, temp_directory: str | None = None) -> None:
        self._duckdb = _duckdb()
        self.where = where
        self.limits = limits
        self._con = con
        self._temp_directory = temp_directory
        self.started = time.perf_counter()
        self._watchdog: Watchdog | None = Watchdog(con, limits)  # from before DuckDB plans the query
        with self._errors():
            relation = con.sql(sql)
            to_reader = getattr(relation, "to_arrow_reader", None) or relation.fetch_record_batch
            self._reader = to_reader(BATCH_ROWS)
        self.schema: pa.Schema = self._reader.schema
        self.columns = list(self.schema.names)

    @contextlib.contextmanager
    def _errors(self):
        duckdb = self._duckdb
        try:
            yield
        except (duckdb.Error, pa.ArrowException) as exc:
            reason = self._watchdog.reason if self._watchdog is not None else None
            self.close()
            self._raise(exc, reason)
        else:
            reason = self._watchdog.reason if self._watchdog is not None else None
            if reason is not None:  # the limit passed while the engine would not be interrupted
                self.close()
                self._raise(None, reason)

    def _raise(self, exc: BaseException | None, reason: str | None) -> NoReturn:
        duckdb = self._duckdb
        if reason == "memory" or isinstance(exc, duckdb.OutOfMemoryException):
            raise QueryLimitError(
                f"{self.where!r}: the query needs more than its memory limit of "
                f"{self.limits.memory}; raise it with --memory-limit",
                self.where,
            ) from None
        if reason == "time" or isinstance(exc, duckdb.InterruptException):
            raise QueryLimitError(
                f"{self.where!r}: the query ran past its time limit of {self.limits.timeout or 0:g} s; "
                f"raise it with --timeout",
                self.where,
            ) from None
        raise InvalidInputError(f"{self.where!r}: query failed: {str(exc).splitlines()[0]}", self.where) from None

    def batches(self) -> Iterator[pa.RecordBatch]:
        """The rows, one record batch at a time."""
        try:
            while True:
                with self._errors():
                    try:
                        batch = self._reader.read_next_batch()
                    except StopIteration:
                        return
                yield batch
        finally:
            self.close()

    def rows(self) -> Iterator[tuple]:
        """The rows as tuples, streamed."""
        for batch in self.batches():
            columns = [c.to_pylist() for c in batch.columns]
            yield from zip(*columns)

    def to_arrow(self) -> pa.Table:
        """Every row as one Arrow table."""
        return pa.Table.from_batches(list(self.batches()), schema=self.schema)

    def close(self) -> None:
        """Stop the watchdog, release the engine and remove its temporary files."""
        if self._watchdog is not None:
            self._watchdog.stop()
            self._watchdog = None
        with contextlib.suppress(Exception):
            self._con.close()
        if self._temp_directory is not None:
            shutil.rmtree(self._temp_directory, ignore_errors=True)
            self._temp_directory = None


def query_dataset(dataset: str, sql: str, limits: Limits = DEFAULT_LIMITS) -> Result:
    """Run one SELECT over a dataset's tables (each with a first column report_id) on DuckDB."""
    root = os.path.abspath(dataset)
    ds.read_manifest(root)
    temp = private_temp_directory()
    try:
        con = connect(limits, [root], temp)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    try:
        check_statement(con, sql, dataset)
        check_query_size(con, sql, dataset, limits)
        dataset_views(con, root, sql)
    except BaseException:
        con.close()
        shutil.rmtree(temp, ignore_errors=True)
        raise
    return Result(con, sql, dataset, limits, temp)


def query_loose(
    paths: list[str], labels: list[str], sql: str, where: str, limits: Limits = DEFAULT_LIMITS
) -> tuple[Result, dict]:
    """Run one SELECT over loose report files (each table with a first column `report`) on DuckDB."""
    con = _loose_database(limits.memory, limits.threads).cursor()
    try:
        check_statement(con, sql, where)
        check_query_size(con, sql, where, limits)
        stats = loose_views(con, paths, labels, sql)
        return Result(con, sql, where, limits), stats
    except BaseException:
        con.close()
        raise


# -- Spark ---------------------------------------------------------------------------------------


def register_spark(spark, dataset: str) -> list[str]:
    """Register every table of a dataset as a Spark SQL temporary view; returns the view names.

    `dataset` is a local directory or any URI Spark's file systems read (s3a://, abfss://, hdfs://).
    Each view holds the committed reports only (a semi-join with the reports table), with the
    dataset's schema (columns missing from older partitions read as nulls).
    """
    from pyspark.sql import types as T

    base = dataset.rstrip("/")
    text = _spark_read_text(spark, f"{base}/{ds.MANIFEST}")
    try:
        manifest = ds.Manifest.from_json(json.loads(text), f"{base}/{ds.MANIFEST}")
    except ValueError as exc:
        raise InvalidInputError(f"{base!r}: cannot read the dataset manifest ({exc})", base) from None
    spark_types = {
        pa.int64(): T.LongType(),
        pa.float64(): T.DoubleType(),
        pa.string(): T.StringType(),
        pa.binary(): T.BinaryType(),
        pa.bool_(): T.BooleanType(),
        pa.list_(pa.int64()): T.ArrayType(T.LongType()),
    }

    def frame(table: str):
        schema = T.StructType(
            [T.StructField(n, spark_types[t], True) for n, t in manifest.tables[table]]
            + [T.StructField("report_id", T.StringType(), True)]
        )
        if table not in manifest.populated:
            df = spark.createDataFrame([], schema)
        else:
            df = (
                spark.read.schema(schema)
                .option("basePath", f"{base}/{table}")
                .option("mergeSchema", "true")
                .parquet(f"{base}/{table}/report_id=*")
            )
        return df.select("report_id", *[f"`{n}`" for n, _ in manifest.tables[table]])

    reports = frame(ds.REPORTS)
    committed = reports.select("report_id")
    names = []
    for table in manifest.tables:
        df = reports if table == ds.REPORTS else frame(table).join(committed, "report_id", "left_semi")
        df.createOrReplaceTempView(table)
        names.append(table)
    return names


def _spark_read_text(spark, uri: str) -> str:
    """A small text file through Spark's Hadoop file systems (Spark's readers skip names starting with '_')."""
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(uri)
    try:
        stream = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()).open(path)
    except Exception as exc:
        raise InvalidInputError(
            f"{uri!r}: cannot be read; expected a pva dataset manifest ({str(exc).splitlines()[0][:200]})", uri
        ) from None
    try:
        return jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
    finally:
        stream.close()
