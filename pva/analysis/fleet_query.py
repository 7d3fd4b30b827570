"""SQL over many reports through DuckDB: a dataset's Parquet files, or every report under a directory."""

from __future__ import annotations

import os
import pathlib
from typing import TYPE_CHECKING

from formats.errors import InvalidInputError
from formats.fleet.limits import DEFAULT_LIMITS, Limits
from formats.fleet.limits import end_process as end_process  # for the command line at a stuck limit

if TYPE_CHECKING:
    import pyarrow as pa

    from formats.fleet.sql import Result

    from ..results import ArrowStream

#: Loose reports beyond which `pva query` suggests building a dataset.
SUGGEST_DATASET_REPORTS = 20


def find_reports(root: str | os.PathLike[str]) -> list[pathlib.Path]:
    """Every *.pop file under `root` (or `root` itself if it is a file), sorted."""
    path = pathlib.Path(root)
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise InvalidInputError(
            f"{os.fspath(root)!r}: no such directory; expected a directory of reports", os.fspath(root)
        )
    return sorted(p for p in path.rglob("*.pop") if p.is_file())


def run_query(root: str | os.PathLike[str], sql: str, limits: Limits = DEFAULT_LIMITS) -> tuple[Result, dict]:
    """Run one SELECT over a dataset (if `root` is one) or over the reports under `root`.

    Over a dataset every table has a first column `report_id` and `reports` lists the reports;
    over loose reports each table gains a first column `report` (the path relative to `root`) and
    `reports(report, path, producer, poplar_version, num_tiles, num_ipus, file_size)` lists them.
    Returns the streamed result and what was read (kind, reports, bytes, seconds).
    """
    from formats.fleet import sql as fleet_sql
    from formats.fleet.dataset import is_dataset

    where = os.fspath(root)
    if is_dataset(root):
        result = fleet_sql.query_dataset(where, sql, limits)
        return result, {"kind": "dataset"}
    paths = find_reports(root)
    if not paths:
        raise InvalidInputError(f"{where!r}: no *.pop reports found", where)
    base = pathlib.Path(root) if pathlib.Path(root).is_dir() else pathlib.Path(root).parent
    labels = [str(p.relative_to(base)) if p.is_relative_to(base) else str(p) for p in paths]
    result, stats = fleet_sql.query_loose([str(p) for p in paths], labels, sql, where, limits)
    stats["kind"] = "reports"
    return result, stats


def query_reports(root: str | os.PathLike[str], sql: str, limits: Limits = DEFAULT_LIMITS) -> pa.Table:
    """Run one SQL query over a dataset or every report under `root`, as one Arrow table."""
    result, _ = run_query(root, sql, limits)
    return result.to_arrow()


def query_stream(root: str | os.PathLike[str], sql: str, limits: Limits = DEFAULT_LIMITS) -> ArrowStream:
    """Run one SQL query over a dataset or every report under `root`; its rows stream as Arrow batches."""
    from ..results import ArrowStream

    result, _ = run_query(root, sql, limits)
    return ArrowStream(result.batches(), result.schema, result.close, os.fspath(root))
