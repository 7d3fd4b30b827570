"""`pva sql REPORT "SELECT ..."`: read-only SQL on a report, as a table, CSV or JSON."""

from __future__ import annotations

from ..file_operations import SQL_EXAMPLE, SQL_MEMORY_LIMIT, SQL_TIMEOUT
from ._tables import add_format_options, write_rows


def register(sub) -> None:
    parser = sub.add_parser(
        "sql",
        help="run read-only SQL on a report",
        description=(
            "Run one read-only SQL statement on a report. Writes, ATTACH and extension loading are refused and "
            "the file is never modified. A query is stopped (exit 2) past its time or memory limit. Rows are "
            "streamed as they are found. `pva tables REPORT` lists the tables."
        ),
        epilog=f'Example: pva sql profile.pop "{SQL_EXAMPLE}"',
    )
    parser.add_argument("report", help="a profile.pop file (or a pva trace file)")
    parser.add_argument("query", help="one SQL statement (SELECT, WITH or a read-only PRAGMA)")
    parser.add_argument(
        "--param", action="append", default=[], metavar="VALUE", help="a value for a ? placeholder (repeat for several)"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=SQL_TIMEOUT,
        metavar="SECONDS",
        help=f"stop a query that runs longer (default {SQL_TIMEOUT:g}; 0 for no limit); exit 2",
    )
    parser.add_argument(
        "--memory-limit",
        type=float,
        default=SQL_MEMORY_LIMIT / 2**20,
        metavar="MB",
        help=f"stop a query that needs more memory (default {SQL_MEMORY_LIMIT // 2**20}; 0 for no limit); exit 2",
    )
    add_format_options(parser)
    parser.set_defaults(run=run)


def run(args) -> int:
    from ..file_operations import sql

    result = sql(
        args.report,
        args.query,
        args.param,
        timeout=args.timeout or None,
        memory_limit=int(args.memory_limit * 2**20) or None,
    )
    try:
        write_rows(result.columns, result.rows, args.format)
    finally:
        result.close()
    return 0
