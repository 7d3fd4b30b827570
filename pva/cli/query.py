"""`pva query DATASET|DIR "SQL"`: one SQL query over a fleet dataset or every report in a directory tree."""

from __future__ import annotations

import sys
import time

from ..analysis.fleet_query import SUGGEST_DATASET_REPORTS, Limits, end_process, run_query
from ..errors import PvaError
from ..file_operations import QUERY_EXAMPLE
from ._tables import add_format_options, write_rows


class _LimitArgumentError(PvaError):
    pass


def register(sub) -> None:
    parser = sub.add_parser(
        "query",
        help="SQL over a fleet dataset or every report under a directory, each row tagged with its report",
        description=(
            "Run one SELECT in DuckDB's dialect (pip install 'pva[query]') over many reports. Over a dataset "
            "built by 'pva dataset add', every table has a first column report_id and the table reports lists "
            "the reports; only the Parquet files and columns the query needs are read. Over a directory, every "
            "*.pop report under it is read and each table gains a first column `report` (the report's path "
            "relative to DIR). One statement only; no file access, no extensions; time and memory are limited."
        ),
        epilog=f'Example: pva query fleet/ "{QUERY_EXAMPLE}"',
    )
    parser.add_argument(
        "directory", help="a dataset, a directory searched recursively for *.pop reports, or one report"
    )
    parser.add_argument("query", help="one SELECT statement in DuckDB's dialect")
    parser.add_argument(
        "--timeout",
        type=float,
        default=Limits.timeout,
        metavar="SECONDS",
        help=f"stop a query that runs longer (default {Limits.timeout:g}; 0: no limit)",
    )
    parser.add_argument(
        "--memory-limit",
        default=Limits.memory,
        metavar="SIZE",
        help=f"DuckDB's memory limit, e.g. 512MB or 8GB (default {Limits.memory})",
    )
    add_format_options(parser)
    parser.set_defaults(run=run)


def _stuck(args):
    """What to do when DuckDB ignores the interrupt at a limit (it does while it plans): end the process."""

    def stop(reason: str) -> None:
        limit = f"time limit of {args.timeout:g} s" if reason == "time" else f"memory limit of {args.memory_limit}"
        option = "--timeout" if reason == "time" else "--memory-limit"
        end_process(
            f"pva query: error: {args.directory!r}: the query ran past its {limit} while DuckDB planned or ran it "
            f"and would not stop; raise it with {option} or simplify the query"
        )

    return stop


def run(args) -> int:
    if args.timeout < 0:
        raise _LimitArgumentError(f"--timeout {args.timeout:g}: expected a number of seconds >= 0")
    limits = Limits(timeout=args.timeout or None, memory=args.memory_limit, on_stuck=_stuck(args))
    started = time.perf_counter()
    result, stats = run_query(args.directory, args.query, limits)
    try:
        write_rows(result.columns, result.rows(), args.format)
    finally:
        result.close()
    if stats["kind"] == "reports" and stats["reports"] >= SUGGEST_DATASET_REPORTS:
        seconds = time.perf_counter() - started
        print(
            f"note: read {stats['reports']} reports ({stats['bytes'] / 1e6:,.1f} MB) in {seconds:.2f} s; "
            f"a dataset answers such queries from Parquet without reading the reports again: "
            f"pva dataset add DATASET --from {args.directory}",
            file=sys.stderr,
        )
    return 0
