"""`pva html REPORT -o report.html`: a self-contained visual report (or two reports side by side)."""

from __future__ import annotations

import os

import pva
from formats.errors import InvalidInputError

from ._common import print_json


def non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError(text)
    return value


def register(sub) -> None:
    parser = sub.add_parser(
        "html",
        help="write a self-contained HTML report with charts (or compare two reports side by side)",
        description=(
            "Write one HTML file holding every script, style and figure inline, so it opens in any browser with "
            "the network off: a summary card; memory per tile by category with the tile limit and out-of-memory "
            "tiles, per IPU; liveness over the program steps with the peak and its largest variables; a zoomable "
            "execution timeline per IPU; cycles by vertex type and by compute set (sortable tables); the program "
            "tree. Large reports are downsampled for display and the page says so. With --compare and two reports, "
            "they are shown side by side and their differences are highlighted. For a trace: a zoomable timeline "
            "of every thread with its flows, and the trace summary's tables."
        ),
        epilog="Examples: pva html profile.pop -o report.html; pva html a.pop b.pop --compare -o compare.html",
    )
    parser.add_argument("reports", nargs="+", metavar="REPORT", help="a profile.pop file (two with --compare)")
    parser.add_argument(
        "-o", "--output", default="report.html", metavar="FILE", help="the HTML file to write (default: report.html)"
    )
    parser.add_argument("--compare", action="store_true", help="show two reports side by side (A first, then B)")
    parser.add_argument(
        "--threshold",
        type=float,
        default=5.0,
        metavar="PERCENT",
        help="with --compare: growth (percent) above which a figure is a regression (default 5)",
    )
    parser.add_argument("--title", help="page title (default: from the file names)")
    parser.add_argument(
        "--max-tiles",
        type=non_negative_int,
        default=pva.ChartLimits.max_tiles,
        metavar="N",
        help=f"bars per IPU in the memory chart; more tiles are grouped (default {pva.ChartLimits.max_tiles})",
    )
    parser.add_argument(
        "--timeline-resolution",
        type=non_negative_int,
        default=pva.ChartLimits.timeline_resolution,
        metavar="N",
        help="segments per IPU in the timeline; shorter steps are merged (default "
        f"{pva.ChartLimits.timeline_resolution}; 0 keeps every step)",
    )
    parser.add_argument(
        "--max-rows",
        type=non_negative_int,
        default=pva.ChartLimits.max_table_rows,
        metavar="N",
        help=f"rows of the compute set table (default {pva.ChartLimits.max_table_rows})",
    )
    parser.add_argument("--json", action="store_true", help="print the path and size written as JSON")
    parser.add_argument(
        "--no-compress",
        action="store_true",
        help="store the page's data as plain JSON even when it is large (by default data over 1 MB "
        "is deflated; the page inflates it itself before it finishes loading)",
    )
    parser.set_defaults(run=run)


def run(args) -> int:
    if not args.compare and len(args.reports) == 1 and pva.isTrace(args.reports[0]):
        from ..analysis import trace_commands

        args.report = args.reports[0]
        return trace_commands.html(args)
    if args.compare and len(args.reports) != 2:
        raise InvalidInputError(f"--compare needs exactly two reports (A and B), got {len(args.reports)}")
    if not args.compare and len(args.reports) != 1:
        raise InvalidInputError(f"expected one report, got {len(args.reports)}; add --compare to compare two")
    try:
        limits = pva.ChartLimits(
            max_tiles=args.max_tiles, timeline_resolution=args.timeline_resolution, max_table_rows=args.max_rows
        )
    except ValueError as exc:
        raise InvalidInputError(str(exc)) from exc
    size = pva.write_html(
        args.reports,
        args.output,
        limits=limits,
        threshold=args.threshold / 100,
        title=args.title,
        compress=False if args.no_compress else None,
    )
    if args.json:
        print_json({"path": os.path.abspath(args.output), "bytes": size})
        return 0
    print(f"wrote {args.output} ({pva.format_size(size)})")
    return 0
