"""The HTML pieces of pva's notebook display, and the tables that show lists, query results and traces.

Nothing here reads a report: the summaries with charts (pva.notebook) build on these pieces.
The HTML has inline styles only, no script and no network resource.
"""

from __future__ import annotations

import html
import os
from collections.abc import Callable, Sequence
from typing import Any

from formats.errors import PvaError

#: Rows of a query result shown.
QUERY_ROWS = 10
#: Characters of a name or value shown in a table cell (longer ones are cut).
MAX_CELL = 80

BOX_STYLE = "font-family: sans-serif; font-size: 13px; line-height: 1.35; max-width: 680px"
TABLE_STYLE = "border-collapse: collapse; margin: 4px 0 8px 0"
CELL_STYLE = "padding: 1px 10px 1px 0; text-align: left; vertical-align: top"
NUMBER_STYLE = "padding: 1px 10px 1px 0; text-align: right; font-variant-numeric: tabular-nums"
MUTED_STYLE = "opacity: 0.7"


# -- pieces ---------------------------------------------------------------------------------


def escape(value: object) -> str:
    text = "" if value is None else str(value)
    if len(text) > MAX_CELL:
        text = text[: MAX_CELL - 1] + "…"
    return html.escape(text, quote=True)


def number(value: object) -> str:
    return "not recorded" if value is None else f"{int(value):,}"  # type: ignore[call-overload]


def percent(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def html_box(title: str, parts: Sequence[str]) -> str:
    body = "".join(parts)
    return f'<div class="pva" style="{BOX_STYLE}"><div style="font-weight: bold; margin-bottom: 4px">{title}</div>{body}</div>'


def html_heading(text: str) -> str:
    return f'<div style="font-weight: bold; margin-top: 6px">{escape(text)}</div>'


def html_facts(pairs: Sequence[tuple[str, str]]) -> str:
    """A two-column table of labels and values (values are HTML)."""
    rows = "".join(
        f'<tr><th style="{CELL_STYLE}; font-weight: normal; {MUTED_STYLE}">{escape(k)}</th><td style="{CELL_STYLE}">{v}</td></tr>'
        for k, v in pairs
    )
    return f'<table style="{TABLE_STYLE}">{rows}</table>'


def html_table(header: Sequence[str], rows: Sequence[Sequence[str]], numeric: Sequence[bool] | None = None) -> str:
    """A table with a header row; cells are HTML; `numeric` columns are right-aligned."""
    numeric = numeric or [False] * len(header)
    head = "".join(f'<th style="{NUMBER_STYLE if n else CELL_STYLE}">{escape(h)}</th>' for h, n in zip(header, numeric))
    body = "".join(
        "<tr>"
        + "".join(f'<td style="{NUMBER_STYLE if n else CELL_STYLE}">{c}</td>' for c, n in zip(row, numeric))
        + "</tr>"
        for row in rows
    )
    return f'<div style="overflow-x: auto"><table style="{TABLE_STYLE}"><thead><tr style="border-bottom: 1px solid #999">{head}</tr></thead><tbody>{body}</tbody></table></div>'


def html_note(text: str) -> str:
    return f'<div style="{MUTED_STYLE}">{text}</div>'


def html_failed(what: str, error: PvaError) -> str:
    return html_box(escape(what), [html_note(f"cannot be summarised: {escape(error)}")])


def trace_html(trace: Any, rows: int = 10) -> str:
    """A TraceReport: completeness, and its processes with their threads (the first `rows`)."""
    name = escape(os.path.basename(trace.path))
    try:
        processes = list(trace.processes)
        state = "complete" if trace.isComplete else "incomplete: the recorder did not close it"
        table = [
            [
                number(p.pid),
                escape(p.name),
                number(len(p.threads)),
                escape(", ".join(t.name or str(t.tid) for t in p.threads)),
            ]
            for p in processes[:rows]
        ]
    except PvaError as exc:
        return html_failed(f"TraceReport {trace.path}", exc)
    threads = sum(len(p.threads) for p in processes)
    more = [html_note(f"… and {len(processes) - rows:,} more processes")] if len(processes) > rows else []
    parts = [
        html_facts([("recording", state), ("processes", f"{len(processes):,}, {threads:,} threads")]),
        html_table(["pid", "process", "threads", "thread names"], table, [True, False, True, False]),
        *more,
    ]
    return html_box(f"TraceReport {name}", parts)


# -- lists and query results ----------------------------------------------------------------

#: Columns shown for the items of a list, by the name of a class of the item: (heading, value).
_ITEM_COLUMNS: dict[str, tuple[tuple[str, Callable[[Any], object], bool], ...]] = {
    "Tile": (
        ("memory incl. gaps (B)", lambda t: f"{t.memory.total.includingGaps:,}", True),
        ("excl. gaps (B)", lambda t: f"{t.memory.total.excludingGaps:,}", True),
    ),
    "Program": (("name", lambda p: p.name, False),),
    "ExecutionStep": (("cycles (longest IPU)", lambda s: f"{max((i.cycles for i in s.ipus), default=0):,}", True),),
}


def _item_columns(items: Sequence[Any]) -> tuple[tuple[str, Callable[[Any], object], bool], ...]:
    """The columns for the items: those of a class every item shares, else none."""
    for cls in type(items[0]).__mro__:
        columns = _ITEM_COLUMNS.get(cls.__name__)
        if columns and all(cls.__name__ in {c.__name__ for c in type(i).__mro__} for i in items):
            return columns
    return ()


def list_html(items: Sequence[Any], shown: int) -> str:
    """A list of pva objects: its length and a table of its first `shown` items."""
    count = len(items)
    head = list(items[: max(0, shown)])
    kinds = sorted({type(i).__name__ for i in head})
    title = f"{count:,} item{'s' if count != 1 else ''}" + (f" ({', '.join(kinds)})" if kinds else "")
    if not head:
        return html_box(escape(title), [])
    columns = _item_columns(head)
    try:
        rows = [
            [number(k), escape(repr(item))] + [escape(get(item)) for _h, get, _n in columns]
            for k, item in enumerate(head)
        ]
    except PvaError as exc:
        return html_failed(title, exc)
    header = ["#", "item"] + [h for h, _g, _n in columns]
    numeric = [True, False] + [n for _h, _g, n in columns]
    more = [html_note(f"… and {count - len(head):,} more (Report.listPrintLength sets how many are shown)")]
    return html_box(escape(title), [html_table(header, rows, numeric), *(more if count > len(head) else [])])


def _cell(value: object) -> str:
    if isinstance(value, bytes):
        return escape(f"<{len(value):,} bytes>")
    if isinstance(value, float):
        return escape(f"{value:,.6g}")
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return escape(value)


def rows_html(columns: Sequence[str], rows: Sequence[tuple], count: int) -> str:
    """The rows of a query: its size and a table of the first QUERY_ROWS rows."""
    head = list(rows[:QUERY_ROWS])
    numeric = [
        bool(head) and all(isinstance(r[i], (int, float)) or r[i] is None for r in head) for i in range(len(columns))
    ]
    table = html_table(list(columns), [[_cell(v) for v in row] for row in head], numeric)
    title = f"{count:,} row{'s' if count != 1 else ''} × {len(columns):,} column{'s' if len(columns) != 1 else ''}"
    more = [html_note(f"… and {count - len(head):,} more rows (to_pandas() or to_polars() for all of them)")]
    return html_box(escape(title), [table, *(more if count > len(head) else [])])


def stream_html(columns: Sequence[str], hint: str) -> str:
    """A streamed query result, which is not read to be shown: its columns."""
    return html_box(
        f"query of {len(columns):,} columns", [html_note(escape(", ".join(columns))), html_note(escape(hint))]
    )
