"""Printing rows as an aligned table, CSV or JSON (shared by sql, tables and other commands)."""

from __future__ import annotations

import csv
import itertools
import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

from formats.json_values import plain

#: Rows a table's column widths are measured on; the rest are streamed in those widths.
TABLE_SAMPLE_ROWS = 1000


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bytes):
        return f"<{len(value):,} bytes>"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def write_rows(
    columns: Sequence[str], rows: Iterable[Sequence[Any]], fmt: str = "table", out: TextIO | None = None
) -> int:
    """Write rows in `fmt` (table, csv or json); returns the number of rows written."""
    out = out or sys.stdout
    count = 0
    if fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        for row in rows:
            writer.writerow(["" if v is None else plain(v) for v in row])
            count += 1
        return count
    if fmt == "json":
        out.write("[")
        for row in rows:
            out.write(",\n  " if count else "\n  ")
            out.write(json.dumps({c: plain(v) for c, v in zip(columns, row)}, allow_nan=False, default=str))
            count += 1
        out.write("\n]\n" if count else "]\n")
        return count
    rows = iter(rows)
    materialised = [[_cell(v) for v in row] for row in itertools.islice(rows, TABLE_SAMPLE_ROWS)]
    widths = [len(c) for c in columns]
    for row in materialised:
        widths = [max(w, len(v)) for w, v in zip(widths, row)]
    right = [
        all(_is_number(row[i]) for row in materialised if row[i]) and any(row[i] for row in materialised)
        for i in range(len(columns))
    ]

    def line(values):
        return "  ".join(v.rjust(w) if r else v.ljust(w) for v, w, r in zip(values, widths, right)).rstrip()

    out.write(line(list(columns)) + "\n")
    out.write("  ".join("-" * w for w in widths) + "\n")
    for row in materialised:
        out.write(line(row) + "\n")
    count = len(materialised)
    for row in rows:  # past the sample: streamed in the sample's widths
        out.write(line([_cell(v) for v in row]) + "\n")
        count += 1
    return count


def _is_number(text: str) -> bool:
    try:
        float(text.replace(",", ""))
    except ValueError:
        return False
    return True


def add_format_options(parser) -> None:
    """Add --format with --csv and --json shorthands."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--format", choices=("table", "csv", "json"), default="table", help="output format")
    group.add_argument("--csv", dest="format", action="store_const", const="csv", help="same as --format csv")
    group.add_argument("--json", dest="format", action="store_const", const="json", help="same as --format json")
