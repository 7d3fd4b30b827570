"""`pva query DIR "SQL"`: one SQL query over every report in a directory tree."""

from __future__ import annotations

from ..analysis.multi import query_reports
from ._tables import add_format_options, write_rows


def register(sub) -> None:
    parser = sub.add_parser(
        "query",
        help="SQL over every report under a directory, each row tagged with its report",
        description=(
            "Treat every *.pop report under DIR as one dataset: each report table gains a first column `report` "
            "(the report's path relative to DIR) and a table `reports` lists them. The query runs in DuckDB "
            "(pip install 'pva[query]') with file access disabled."
        ),
        epilog=(
            "Example: pva query runs/ \"SELECT report, sum(total_including_gaps) AS bytes FROM memory_by_tile "
            "GROUP BY report ORDER BY bytes DESC\""
        ),
    )
    parser.add_argument("directory", help="a directory searched recursively for *.pop reports (or one report)")
    parser.add_argument("query", help="one SQL statement in DuckDB's dialect")
    add_format_options(parser)
    parser.set_defaults(run=run)


def run(args) -> int:
    table = query_reports(args.directory, args.query)
    columns = table.column_names
    rows = zip(*(table.column(i).to_pylist() for i in range(table.num_columns))) if columns else iter(())
    write_rows(columns, rows, args.format)
    return 0
