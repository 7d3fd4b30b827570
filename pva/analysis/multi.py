"""Many reports as one dataset: SQL over every report under a directory, through DuckDB."""

from __future__ import annotations

import os
import pathlib
import re

import pyarrow as pa

from formats.arrow_tables import table_to_arrow
from formats.errors import InvalidInputError
from formats.profile_reader import ProfileReader
from formats.schema import profile_schema


def find_reports(root: str | os.PathLike[str]) -> list[pathlib.Path]:
    """Every *.pop file under `root` (or `root` itself if it is a file), sorted."""
    path = pathlib.Path(root)
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise InvalidInputError(f"{os.fspath(root)!r}: no such directory; expected a directory of reports",
                                os.fspath(root))
    return sorted(p for p in path.rglob("*.pop") if p.is_file())


def tables_in(sql: str) -> list[str]:
    """The report tables an SQL text refers to (whole-word matches of schema table names)."""
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", sql))
    return [name for name in profile_schema().tables if name in words and name not in ("matrix_chunks",)]


def query_reports(root: str | os.PathLike[str], sql: str) -> pa.Table:
    """Run one SQL query over every report under `root`; each table gains a first column `report`.

    A table `reports(report, path, producer, poplar_version, num_tiles, num_ipus, file_size)` lists
    the reports. The engine is DuckDB with file system access disabled, so the query reads only
    the reports' tables.
    """
    try:
        import duckdb
    except ImportError:  # pragma: no cover - depends on the installation
        raise InvalidInputError("pva query needs DuckDB: pip install 'pva[query]'") from None
    paths = find_reports(root)
    if not paths:
        raise InvalidInputError(f"{os.fspath(root)!r}: no *.pop reports found", os.fspath(root))
    base = pathlib.Path(root) if pathlib.Path(root).is_dir() else pathlib.Path(root).parent
    wanted = tables_in(sql)
    per_table: dict[str, list[pa.Table]] = {name: [] for name in wanted}
    catalogue = []
    for path in paths:
        label = str(path.relative_to(base)) if path.is_relative_to(base) else str(path)
        reader = ProfileReader(path)
        try:
            catalogue.append({
                "report": label, "path": str(path.resolve()), "producer": reader.metadata.get("producer", ""),
                "poplar_version": reader.metadata.get("poplar_version", ""),
                "num_tiles": reader.target["num_tiles"], "num_ipus": reader.target["num_ipus"],
                "file_size": path.stat().st_size,
            })
            for name in wanted:
                table = table_to_arrow(reader, name)
                per_table[name].append(table.add_column(0, "report", pa.array([label] * table.num_rows, pa.string())))
        finally:
            reader.close()
    con = duckdb.connect(config={"enable_external_access": False})
    try:
        con.register("reports", pa.Table.from_pylist(catalogue))
        for name, tables in per_table.items():
            con.register(name, pa.concat_tables(tables))
        try:
            relation = con.sql(sql)
            if relation is None:  # a statement without a result
                return pa.table({})
            to_arrow = getattr(relation, "to_arrow_table", None) or relation.arrow  # DuckDB 2 / 1
            return to_arrow()
        except duckdb.Error as exc:
            raise InvalidInputError(f"{os.fspath(root)!r}: query failed: {str(exc).splitlines()[0]}",
                                    os.fspath(root)) from None
    finally:
        con.close()
