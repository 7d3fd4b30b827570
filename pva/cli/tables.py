"""`pva tables REPORT`: the tables and per-tile matrices of a report, with sizes and meanings."""

from __future__ import annotations

from formats.profile_reader import ProfileReader
from formats.schema import profile_matrices, profile_schema

from ._tables import add_format_options, write_rows


def register(sub) -> None:
    parser = sub.add_parser(
        "tables",
        help="list a report's tables with row counts and descriptions",
        description="List the SQL tables of a report with their row counts and descriptions (from schemas/), "
        "then the per-tile matrices stored as Arrow data.",
        epilog="Example: pva tables profile.pop --json",
    )
    parser.add_argument("report", help="a profile.pop file")
    parser.add_argument("--columns", metavar="TABLE", help="list the columns of one table instead")
    add_format_options(parser)
    parser.set_defaults(run=run)


def run(args) -> int:
    reader = ProfileReader(args.report)
    try:
        schema = profile_schema()
        if args.columns:
            spec = schema.tables.get(args.columns)
            columns = reader.file.tables.get(args.columns)
            if columns is None:
                from formats.errors import InvalidInputError

                raise InvalidInputError(
                    f"{reader.path!r}: no table {args.columns!r}; expected one of {', '.join(sorted(reader.file.tables))}",
                    reader.path,
                )
            described = {c.name: c for c in spec.columns} if spec else {}
            rows = [(name, described[name].type if name in described else "", described[name].description
                     if name in described else "(not in this pva version's schema)") for name in columns]
            write_rows(("column", "type", "description"), rows, args.format)
            return 0
        rows = []
        for name, spec in schema.tables.items():
            count = reader.row_count(name)
            rows.append(("table", name, count, spec.description))
        declared = profile_matrices()["matrices"]
        for name, num_rows, num_cols, chunks, size in reader.matrix_storage():
            spec = declared.get(name, {})
            description = f"{num_rows:,} x {num_cols:,} {spec.get('unit', '')}, {chunks} Arrow chunk(s), " \
                          f"{size:,} bytes stored. {spec.get('description', '')}"
            rows.append(("matrix", name, num_rows, description))
        write_rows(("kind", "name", "rows", "description"), rows, args.format)
    finally:
        reader.close()
    return 0
