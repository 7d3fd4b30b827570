"""`pva estimate REPORT`: compile-time throughput estimates written as a Cerebras compile_report.txt."""

from __future__ import annotations

import pva

from ._common import print_json


def register(sub) -> None:
    parser = sub.add_parser(
        "estimate",
        help="write compile_report.txt: Cerebras-style throughput estimates from a compilation report",
        description=(
            "Estimate throughput from a compilation report and write it in the layout of Cerebras' "
            "compile_report.txt: overall Samples/s, Compute and Transmission Samples/s, Active PEs, Compute "
            "Utilization, and a table per kernel. Kernels are compute sets, PEs are tiles, transmission is the "
            "exchanges before each compute set; the delta-T rules are in docs/cli.md, under pva estimate."
        ),
        epilog="Example: pva estimate profile.pop -o out/ && cat out/compile_report.txt",
    )
    parser.add_argument("report", help="a profile.pop file")
    parser.add_argument(
        "-o",
        "--output",
        default=".",
        metavar="PATH",
        help="directory (or file name) for compile_report.txt (default: current directory)",
    )
    parser.add_argument("--batch-size", type=int, default=1, help="samples per execution of the program (default 1)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON instead of writing the file")
    parser.set_defaults(run=run)


def run(args) -> int:
    with pva.openReport(args.report) as report:
        est = report.estimate(batch_size=args.batch_size)
    if args.json:
        print_json(est.as_dict())
        return 0
    print(f"wrote {est.write_compile_report(args.output)}")
    return 0
