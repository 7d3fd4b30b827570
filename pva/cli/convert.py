"""`pva convert IN... -o OUT`: legacy Poplar profiles, Cerebras compile reports and Chrome traces in."""

from __future__ import annotations

import sys

from ._common import add_json_flag, print_json


def register(sub) -> None:
    parser = sub.add_parser(
        "convert",
        help="convert legacy Poplar profiles, Chrome traces or Cerebras compile reports into pva files",
        description=(
            "Detect what the inputs are and convert them, writing OUT atomically. Legacy Poplar v1 graph and "
            "execution profiles (JSON or CBOR; two files, or one with graphProfile and executionProfile) and "
            "Cerebras compile_report.txt files become a profile.pop report, and so does printProfileSummary text "
            "that has a Target section; a Chrome trace event JSON file becomes a pva trace file (read it with "
            "pva.openTrace). Older and newer Poplar generations "
            "(pre-2019, v2 'experimental', v3 SQLite) are recognised and refused."
        ),
        epilog="Example: pva convert graph.json execution.json -o profile.pop",
    )
    parser.add_argument("inputs", nargs="+", metavar="IN", help="input files")
    parser.add_argument("-o", "--output", required=True, metavar="OUT", help="the file to write")
    progress = parser.add_mutually_exclusive_group()
    progress.add_argument(
        "--progress",
        dest="progress",
        action="store_true",
        default=None,
        help="show a progress bar (default: when standard error is a terminal)",
    )
    progress.add_argument("--no-progress", dest="progress", action="store_false", help="never show a progress bar")
    add_json_flag(parser)
    parser.set_defaults(run=run)


def run(args) -> int:
    from formats.progress import Progress

    from ..file_operations import convert

    bar = Progress(sys.stderr, enabled=args.progress)
    try:
        result = convert(args.inputs, args.output, progress=bar)
    finally:
        bar.finish()
    if args.json:
        print_json(
            {
                "output": result.output,
                "inputs": result.inputs,
                "kinds": result.kinds,
                "unknown_keys": result.unknown_keys,
                "warnings": result.warnings,
            }
        )
    else:
        for warning in result.warnings:
            print(f"pva convert: warning: {warning}", file=sys.stderr)
        print(f"wrote {result.output} from {', '.join(result.kinds)}")
    return 0
