"""`pva diff A B`: compare two reports side by side and flag regressions (exit status 1)."""

from __future__ import annotations

import pva

from ._common import print_json


def register(sub) -> None:
    parser = sub.add_parser(
        "diff",
        help="compare two reports; exit status 1 if a regression is flagged",
        description=(
            "Compare two reports side by side: target, memory in total, per category and per IPU, liveness peak, "
            "execution cycles, steps per program type, and estimated and measured cycles per compute set (matched "
            "by name). Two traces (trace files or Chrome / PyTorch profiler traces) are compared by traced time, "
            "span, events, flows and the self time of each operator (event name). Rows are sorted by absolute change. A figure that grew by more than --threshold percent is "
            "flagged as a regression, and then the exit status is 1 (for CI)."
        ),
        epilog="Example: pva diff baseline/profile.pop new/profile.pop --threshold 2 || echo 'regression'",
    )
    parser.add_argument("a", help="the baseline report")
    parser.add_argument("b", help="the report to compare with it")
    parser.add_argument(
        "--threshold",
        type=float,
        default=5.0,
        metavar="PERCENT",
        help="growth (percent) above which a figure is a regression (default 5)",
    )
    parser.add_argument("--all", action="store_true", help="also list figures that did not change")
    parser.add_argument(
        "--top", type=int, default=20, metavar="N", help="rows per section at most (default 20; 0 for all)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(run=run)


def _fmt(value) -> str:
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.1f}"
    if isinstance(value, (int, float)):
        return f"{int(value):,}"
    return "" if value is None else str(value)


def run(args) -> int:
    if pva.isTrace(args.a) and pva.isTrace(args.b):
        from ..analysis import trace_commands

        differences = trace_commands.differences(args.a, args.b)
    else:
        with pva.openReport(args.a) as a, pva.openReport(args.b) as b:
            differences = pva.compare(a, b)
    threshold = args.threshold / 100
    shown = [d for d in differences if args.all or d.change is None or d.change != 0]
    flagged = [d for d in shown if d.is_regression(threshold)]
    if args.json:
        print_json(
            {
                "a": args.a,
                "b": args.b,
                "threshold_percent": args.threshold,
                "regressions": len(flagged),
                "differences": [
                    {
                        "section": d.section,
                        "item": d.item,
                        "a": d.a,
                        "b": d.b,
                        "change": d.change,
                        "percent": None if d.relative is None else 100 * d.relative,
                        "regression": d.is_regression(threshold),
                    }
                    for d in shown
                ],
            }
        )
        return 1 if flagged else 0
    print(f"A: {args.a}\nB: {args.b}")
    if not shown:
        print("\nno differences")
    section = None
    count = 0
    width = max((len(d.item) for d in shown), default=10)
    for d in shown:
        if d.section != section:
            section = d.section
            count = 0
            print(f"\n{section}:")
            print(f"  {'':<{width}} {'A':>16} {'B':>16} {'change':>16} {'%':>8}")
        count += 1
        if args.top and count > args.top:
            if count == args.top + 1:
                print("  ... (more rows; use --top 0 to see all)")
            continue
        rel = "" if d.relative is None else f"{100 * d.relative:+.1f}%"
        change = "" if d.change is None else f"{d.change:+,.0f}"
        mark = "  REGRESSION" if d.is_regression(threshold) else ""
        print(f"  {d.item:<{width}} {_fmt(d.a):>16} {_fmt(d.b):>16} {change:>16} {rel:>8}{mark}")
    print(f"\n{len(flagged)} regression(s) above {args.threshold:g}%")
    return 1 if flagged else 0
