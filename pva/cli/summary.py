"""`pva summary REPORT`: the profile summary, laid out as Poplar's printProfileSummary."""

from __future__ import annotations

import sys

import pva

from ._common import print_json


def register(sub) -> None:
    parser = sub.add_parser(
        "summary",
        help="print the profile summary (target, graph, memory, liveness, execution)",
        description=(
            "Print the profile summary in the layout of Poplar's printProfileSummary: target, graph, memory usage "
            "(with and without gaps, by region, by data type, vertex data), the by-tile histogram, variable storage "
            "liveness and execution. Colour follows --colours, CLICOLOR, CLICOLOR_FORCE and NO_COLOR. For a trace: "
            "busy time per process and thread, the events with the most total and self time (--top), and the share "
            "of the traced time per category."
        ),
        epilog="Example: pva summary profile.pop --show-execution-steps | less -R",
    )
    parser.add_argument(
        "report",
        help="a profile.pop file, or a trace (a .pvti trace file, or a Chrome / PyTorch profiler trace .json or .json.gz)",
    )
    parser.add_argument("--show-var-storage", action="store_true", help="show liveness for each program step")
    parser.add_argument("--show-optimizations", action="store_true", help="show compile optimisation metrics")
    parser.add_argument("--show-execution-steps", action="store_true", help="show every execution step")
    parser.add_argument("--show-per-ipu-memory", action="store_true", help="show memory usage of each IPU")
    parser.add_argument(
        "--execution-totals",
        action="store_true",
        help="print Execution as totals over all tiles (the older layout) instead of tile averages",
    )
    parser.add_argument(
        "--colours",
        "--colors",
        choices=("auto", "true", "false"),
        default="auto",
        help="colour the output (default: when writing to a terminal)",
    )
    parser.add_argument("--top", type=int, default=10, metavar="N", help="for a trace: events listed (default 10)")
    parser.add_argument("--json", action="store_true", help="print the summary figures as JSON")
    parser.set_defaults(run=run)


def run(args) -> int:
    if pva.isTrace(args.report):
        from ..analysis import trace_commands

        return trace_commands.summary(args)
    with pva.openReport(args.report) as report:
        if args.json:
            print_json(report.summary())
            return 0
        pva.printProfileSummary(
            report,
            sys.stdout,
            showVarStorage=args.show_var_storage,
            showOptimizations=args.show_optimizations,
            showExecutionSteps=args.show_execution_steps,
            showPerIpuMemoryUsage=args.show_per_ipu_memory,
            executionTotals=args.execution_totals,
            colours=None if args.colours == "auto" else args.colours == "true",
        )
    return 0
