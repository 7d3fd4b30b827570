"""`pva plot REPORT --kind KIND -o FILE.png`: one chart of the HTML report as an image (matplotlib)."""

from __future__ import annotations

import os

import pva

from ._common import print_json


def register(sub) -> None:
    parser = sub.add_parser(
        "plot",
        help="draw memory, liveness, timeline or vertex-type charts as PNG, SVG or PDF (matplotlib)",
        description=(
            "Draw one chart of a report as an image for papers and CI artefacts, with matplotlib (Agg backend, no "
            "display needed): memory (per tile by category, one panel per IPU, tile limit and out-of-memory tiles), "
            "liveness (always live plus not always live over the program steps, peak marked), timeline (execution "
            "steps per IPU coloured by program type) or vertex-types (cycles of the largest vertex types). The "
            "image format follows the file extension: .png, .svg or .pdf. Needs the plot extra: "
            "pip install 'pva[plot]'."
        ),
        epilog="Example: pva plot profile.pop --kind memory -o memory.png",
    )
    parser.add_argument("report", help="a profile.pop file")
    parser.add_argument("--kind", required=True, choices=pva.PLOT_KINDS, help="which chart to draw")
    parser.add_argument("-o", "--output", required=True, metavar="FILE", help="the image to write (.png, .svg or .pdf)")
    parser.add_argument("--width", type=float, default=12.0, metavar="INCHES", help="figure width (default 12)")
    parser.add_argument(
        "--height", type=float, default=None, metavar="INCHES", help="figure height (default: from the chart's content)"
    )
    parser.add_argument("--dpi", type=float, default=100, help="pixels per inch (default 100)")
    parser.add_argument(
        "--title", help="how the chart's title names the report (default: its directory and program name)"
    )
    parser.add_argument(
        "--including-gaps",
        action="store_true",
        help="memory: stack the gaps too (default: memory excluding gaps, the scale fitting it)",
    )
    parser.add_argument(
        "--not-always-live-only", action="store_true", help="liveness: draw the not-always-live memory alone"
    )
    parser.add_argument("--json", action="store_true", help="print the path and size written as JSON")
    parser.set_defaults(run=run)


def run(args) -> int:
    size = pva.write_plot(
        args.report,
        args.kind,
        args.output,
        width=args.width,
        height=args.height,
        dpi=args.dpi,
        title=args.title,
        including_gaps=args.including_gaps,
        not_always_live_only=args.not_always_live_only,
    )
    if args.json:
        print_json({"path": os.path.abspath(args.output), "bytes": size})
        return 0
    print(f"wrote {args.output} ({pva.format_size(size)})")
    return 0
