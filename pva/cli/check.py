"""`pva check REPORT`: validate a report completely and list every problem found."""

from __future__ import annotations

from formats.check import check_report

from ._common import add_json_flag, print_json


def register(sub) -> None:
    parser = sub.add_parser(
        "check",
        help="validate a report: storage, schema, Arrow chunks and invariants",
        description=(
            "Validate a report completely: SQLite integrity, format version, every table against schemas/, every "
            "Arrow chunk readable and of its declared shape, references between tables, and the invariants readers "
            "rely on (steps add up to runs, categories add up to tile totals). Exit status 1 if anything is wrong."
        ),
        epilog="Example: pva check profile.pop || echo 'report is damaged'",
    )
    parser.add_argument("report", help="a profile.pop file")
    add_json_flag(parser)
    parser.set_defaults(run=run)


def run(args) -> int:
    problems = check_report(args.report)
    if args.json:
        print_json({"path": args.report, "ok": not problems,
                    "problems": [{"check": p.check, "location": p.location, "message": p.message} for p in problems]})
    elif problems:
        print(f"{args.report}: {len(problems)} problem(s)")
        for problem in problems:
            print(f"  {problem}")
    else:
        print(f"{args.report}: ok")
    return 1 if problems else 0
