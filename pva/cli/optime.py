"""`pva optime REPORT --mode total|each`: the share of execution time per operator type or operator."""

from __future__ import annotations

import os

import pva

from ._common import print_json


def register(sub) -> None:
    parser = sub.add_parser(
        "optime",
        help="share of execution time per operator type (total) or per operator (each)",
        description=(
            "Operator time cost, after SigmaStar's get_op_time_cost.py. In total mode, the share of execution time "
            "of each operator type in descending order; in each mode, every operator (compute set or exchange "
            "program) in the order it first ran. Types are the op_type of the programs' debug contexts when "
            "debug information is present (debug.cbor beside the report, or --debug), else vertex types; exchange "
            "and sync steps count under their own kind. Shares divide the run's time with each cycle counted once: "
            "where steps overlap (on one IPU, as a Sync of idle tiles spans other tiles' exchange and compute, or "
            "across IPUs) a cycle goes to compute, then exchange, then stream copy, then sync, and among steps of "
            "one kind to the one that started last. For a trace, an event is an operator and its type is its name (or "
            "args[KEY] with --type-arg); shares are of the traced time (the busy time of all threads) by self "
            "time, so nested events count once and the shares add up to 100%%."
        ),
        epilog="Example: pva optime profile.pop --mode each | head -20",
    )
    parser.add_argument(
        "report",
        help="a profile.pop file, or a trace (a .pvti trace file, or a Chrome / PyTorch profiler trace .json or .json.gz)",
    )
    parser.add_argument("--mode", choices=("total", "each"), default="total", help="total (default) or each")
    parser.add_argument(
        "--debug",
        metavar="DEBUG_CBOR",
        help="debug information for operator types (default: debug.cbor beside the report, if any)",
    )
    parser.add_argument("--no-debug", action="store_true", help="ignore debug information: types are vertex types")
    parser.add_argument(
        "--type-arg",
        metavar="KEY",
        help="for a trace: take an event's operator type from args[KEY] where it has one (default: its name)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(run=run)


def run(args) -> int:
    if pva.isTrace(args.report):
        from ..analysis import trace_commands

        return trace_commands.optime(args)
    debug = None
    if not args.no_debug:
        debug = args.debug
        if debug is None:
            beside = os.path.join(os.path.dirname(os.path.abspath(args.report)), "debug.cbor")
            debug = beside if os.path.isfile(beside) else None
    with pva.openReport(args.report, debug or None) as report:
        rows = report.operator_times(args.mode)
    if args.json:
        print_json(
            [
                {
                    "index": r.index,
                    "type": r.type,
                    "name": r.name,
                    "cycles": round(r.cycles, 3),
                    "percent": round(100 * r.share, 3),
                }
                for r in rows
            ]
        )
        return 0
    if not rows:
        print("no execution steps: the report holds compilation information only")
        return 0
    type_width = max(len(r.type) for r in rows)
    if args.mode == "total":
        for r in rows:
            print(f"{r.type:<{type_width}} {100 * r.share:7.3f}%")
    else:
        index_width = len(str(rows[-1].index))
        name_width = max(len(r.name) for r in rows)
        for r in rows:
            print(f"{r.index:>{index_width}} {r.type:<{type_width}} {r.name:<{name_width}} {100 * r.share:7.3f}%")
    return 0
