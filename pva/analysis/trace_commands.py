"""The commands' answers for a trace (info, summary, optime, diff, html, export): what each prints,
given its parsed arguments. A trace is a trace file or a Chrome trace event JSON file (.json,
.json.gz), converted on the fly to a temporary trace file (pva.openTrace)."""

from __future__ import annotations

import json
import sys

from ..trace import openTrace
from . import trace_stats


def _print_json(data: object) -> None:
    json.dump(data, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def _warn(command: str, trace) -> None:
    for warning in trace.importWarnings:
        print(f"pva {command}: warning: {warning}", file=sys.stderr)


def info(args) -> int:
    """`pva info TRACE`."""
    with openTrace(args.report) as trace:
        _warn("info", trace)
        found = trace_stats.trace_info(trace)
    if args.json:
        _print_json(found)
    else:
        print("\n".join(trace_stats.info_lines(found)))
    return 0


def summary(args) -> int:
    """`pva summary TRACE`."""
    with openTrace(args.report) as trace:
        _warn("summary", trace)
        found = trace_stats.trace_summary(trace, top=getattr(args, "top", 10) or 0)
    if args.json:
        _print_json(found)
    else:
        print("\n".join(trace_stats.summary_lines(found)))
    return 0


def optime(args) -> int:
    """`pva optime TRACE --mode total|each`: shares of the traced time by self time."""
    with openTrace(args.report) as trace:
        _warn("optime", trace)
        rows = trace_stats.operator_times(trace, args.mode, args.type_arg)
    if args.json:
        _print_json(
            [
                {"index": r.index, "type": r.type, "name": r.name, "us": r.cycles, "percent": round(100 * r.share, 3)}
                for r in rows
            ]
        )
        return 0
    if not rows:
        print("no events: the trace is empty")
        return 0
    type_width = min(60, max(len(r.type) for r in rows))
    if args.mode == "total":
        for r in rows:
            print(f"{r.type:<{type_width}} {100 * r.share:7.3f}%")
    else:
        index_width = len(str(rows[-1].index))
        named = any(r.name != r.type for r in rows)  # types from args: the event's name too
        name_width = min(60, max(len(r.name) for r in rows)) if named else 0
        for r in rows:
            name = f" {r.name:<{name_width}}" if named else ""
            print(f"{r.index:>{index_width}} {r.type:<{type_width}}{name} {100 * r.share:7.3f}%")
    return 0


def differences(a_path: str, b_path: str, type_arg: str | None = None) -> list:
    """`pva diff A B` of two traces: trace_stats.trace_differences."""
    with openTrace(a_path) as a, openTrace(b_path) as b:
        return trace_stats.trace_differences(a, b, type_arg)


def html(args) -> int:
    """`pva html TRACE -o page.html`."""
    from .trace_html import write_trace_html

    with openTrace(args.report) as trace:
        _warn("html", trace)
        written = write_trace_html(trace, args.output)
    print(f"wrote {written}")
    return 0
