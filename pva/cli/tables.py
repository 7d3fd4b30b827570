"""`pva tables REPORT`: the tables and per-tile matrices of a report, with sizes and meanings."""

from __future__ import annotations

import shutil
import textwrap

import pva

from ._tables import add_format_options, write_rows

#: Narrowest the description column is wrapped to, however narrow the terminal.
MIN_DESCRIPTION = 24
#: Lines of a table's description in the listing (the first clause; --format json gives it whole).
LISTING_LINES = 2


def register(sub) -> None:
    parser = sub.add_parser(
        "tables",
        help="list a report's tables with row counts and descriptions",
        description="List the SQL tables of a report with their row counts and descriptions (from schemas/), "
        "then the per-tile matrices stored as Arrow data. The table shows the first clause of each description, "
        "wrapped between words to the terminal width; --format json or csv gives them whole.",
        epilog="Example: pva tables profile.pop --json",
    )
    parser.add_argument("report", help="a profile.pop file")
    parser.add_argument("--columns", metavar="TABLE", help="list the columns of one table instead")
    add_format_options(parser)
    parser.set_defaults(run=run)


def first_clause(text: str) -> str:
    """A description's first clause: up to its first colon, semicolon or full stop."""
    cut = min((i for i in (text.find(": "), text.find("; "), text.find(". ")) if i >= 10), default=-1)
    return text if cut < 0 else text[:cut]


def wrap_last_column(
    header: tuple[str, ...], rows: list[tuple], width: int, max_lines: int | None = None
) -> list[tuple]:
    """Rows whose last cell is wrapped between words so that each line of their table fits in `width`
    characters (a word longer than the column keeps its line); at most `max_lines` lines a cell, the
    last ending in an ellipsis when cut.

    A wrapped cell continues on following rows whose other cells are empty.
    """
    if not rows:
        return rows
    texts = [list(header[:-1])] + [["" if v is None else str(v) for v in row[:-1]] for row in rows]
    used = sum(max(len(row[i]) for row in texts) + 2 for i in range(len(header) - 1))
    room = max(MIN_DESCRIPTION, width - used)
    wrapped = []
    for row in rows:
        text = str(row[-1])
        lines = textwrap.wrap(text, room, break_long_words=False, break_on_hyphens=False) or [""]
        if max_lines is not None and len(lines) > max_lines:
            lines = textwrap.wrap(
                text, room, break_long_words=False, break_on_hyphens=False, max_lines=max_lines, placeholder=" ..."
            )
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
        width = shutil.get_terminal_size().columns
        if args.columns:
            rows = wrap_last_column(header, rows, width)
        else:
            rows = [(*row[:-1], first_clause(str(row[-1]))) for row in rows]
            rows = wrap_last_column(header, rows, width, LISTING_LINES)
    write_rows(header, rows, args.format)
    if args.format == "table" and not args.columns:
        print("(descriptions cut to their first clause; --format json gives them whole)")
    return 0
