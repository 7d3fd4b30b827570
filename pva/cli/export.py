"""`pva export REPORT --format FMT -o OUT`: open formats out (Parquet, HDF5, CSV, Chrome trace, legacy)."""

from __future__ import annotations

import os
import sys

from ..file_operations import EXPORT_FORMATS
from ._common import add_json_flag, print_json


def register(sub) -> None:
    parser = sub.add_parser(
        "export",
        help="export a report (or a trace file) to Parquet, HDF5, CSV, Chrome trace JSON or legacy Poplar JSON",
        description=(
            "Write a report in an open format, atomically. parquet and csv write a directory (tables/, "
            "matrices/ and manifest.json); hdf5 writes one file of per-tile matrices; chrome-trace writes a JSON "
            "file for chrome://tracing or ui.perfetto.dev from a report's execution or from a trace file; "
            "legacy-json and legacy-cbor write the Poplar v1 graph and execution profiles: one combined document "
            "when OUT ends in .json/.cbor, else a directory with graph and execution files."
        ),
        epilog="Example: pva export profile.pop --format parquet -o profile-parquet",
    )
    parser.add_argument("report", help="a profile.pop report (or, for chrome-trace, a trace file)")
    parser.add_argument(
        "--format",
        "-f",
        required=True,
        choices=tuple(EXPORT_FORMATS),
        help="the format to write: " + "; ".join(f"{k}: {e.description}" for k, e in EXPORT_FORMATS.items()),
    )
    parser.add_argument("-o", "--output", required=True, metavar="OUT", help="the file or directory to write")
    add_json_flag(parser)
    parser.set_defaults(run=run)


def run(args) -> int:
    from ..file_operations import export

    written = export(args.report, args.format, args.output)
    if _is_standard_output(args.output):
        print("wrote " + ", ".join(written), file=sys.stderr)  # standard output holds the export itself
    elif args.json:
        print_json({"format": args.format, "written": written})
    else:
        print("wrote " + ", ".join(written))
    return 0


def _is_standard_output(path: str) -> bool:
    """Whether `path` is this process's standard output (``-o /dev/stdout``)."""
    try:
        there, out = os.stat(path), os.fstat(sys.stdout.fileno())
    except (OSError, ValueError):
        return False
    return (there.st_dev, there.st_ino) == (out.st_dev, out.st_ino)
