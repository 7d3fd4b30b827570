"""`pva check REPORT`: validate a report completely and list every problem found."""

from __future__ import annotations

from ._common import add_json_flag, print_json


def register(sub) -> None:
    parser = sub.add_parser(
        "check",
        help="validate a report: storage, schema, Arrow chunks and invariants",
        description=(
            "Validate a report completely: SQLite integrity, format version, every table against schemas/, every "
            "Arrow chunk readable and of its declared shape, references between tables, and the invariants readers "
            "rely on (steps add up to runs, categories add up to tile totals, stored counts match the rows they "
            "count). A progress bar is drawn on a terminal. Exit status 1 if anything is wrong, 2 if the file is "
            "not a report."
        ),
        epilog="Example: pva check profile.pop || echo 'report is damaged'",
    )
    parser.add_argument("report", help="a profile.pop file")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="check only the structure and the counts (tables, columns, every stored count against "
        "its rows, every matrix shape against its table): seconds on any size",
    )
    add_json_flag(parser)
    parser.set_defaults(run=run)


def run(args) -> int:
    from formats.progress import Progress

    from ..file_operations import check, check_notes

    problems = check(args.report, quick=args.quick, progress=Progress())
    notes = check_notes(args.report)
    if args.json:
        print_json(
            {
                "path": args.report,
                "ok": not problems,
                "quick": args.quick,
                "notes": notes,
                "problems": [{"check": p.check, "location": p.location, "message": p.message} for p in problems],
            }
        )
        return 1 if problems else 0
    if problems:
        print(f"{args.report}: {len(problems)} problem(s)")
        for problem in problems:
            print(f"  {problem}")
    else:
        print(
            f"{args.report}: ok"
            + (" (structure and counts; run without --quick for every check)" if args.quick else "")
        )
    for note in notes:
        print(f"  note: {note}")
    return 1 if problems else 0
