"""`pva tables REPORT`: the tables and per-tile matrices of a report, with sizes and meanings."""

from __future__ import annotations

import shutil
import textwrap

import pva

from ._tables import add_format_options, write_rows

#: Narrowest the description column is wrapped to, however narrow the terminal.
MIN_DESCRIPTION = 24


def register(sub) -> None:
    parser = sub.add_parser(
        "tables",
        help="list a report's tables with row counts and descriptions",
        description="List the SQL tables of a report with their row counts and descriptions (from schemas/), "
        "then the per-tile matrices stored as Arrow data. Descriptions are wrapped to the terminal width.",
        epilog="Example: pva tables profile.pop --json",
    )
    parser.add_argument("report", help="a profile.pop file")
    parser.add_argument("--columns", metavar="TABLE", help="list the columns of one table instead")
    add_format_options(parser)
    parser.set_defaults(run=run)


def wrap_last_column(header: tuple[str, ...], rows: list[tuple], width: int) -> list[tuple]:
    """Rows whose last cell is wrapped so that each line of their table fits in `width` characters.

    A wrapped cell continues on following rows whose other cells are empty.
    """
    if not rows:
        return rows
    texts = [list(header[:-1])] + [["" if v is None else str(v) for v in row[:-1]] for row in rows]
    used = sum(max(len(row[i]) for row in texts) + 2 for i in range(len(header) - 1))
    room = max(MIN_DESCRIPTION, width - used)
    wrapped = []
    for row in rows:
        lines = textwrap.wrap(str(row[-1]), room) or [""]
        wrapped.append((*row[:-1], lines[0]))
        wrapped += [(*("" for _ in row[:-1]), line) for line in lines[1:]]
    return wrapped


def run(args) -> int:
    with pva.openReport(args.report) as report:
        header: tuple[str, ...]
        if args.columns:
            header, rows = ("column", "type", "description"), report.column_info(args.columns)
        else:
            header, rows = ("kind", "name", "rows", "description"), report.table_info()
    if args.format == "table":
        rows = wrap_last_column(header, rows, shutil.get_terminal_size().columns)
    write_rows(header, rows, args.format)
    return 0
