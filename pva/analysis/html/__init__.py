"""`pva html`: a self-contained HTML report of one report, or two side by side.

>>> pva.write_html(["profile.pop"], "report.html")                    # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import os

from ..compare import compare
from ..report_source import opened
from .chart_data import Limits, report_data
from .output import atomic_file, check_output
from .render import render_page

__all__ = ["Limits", "html_report", "write_html"]


def html_report(
    reports: list,
    *,
    limits: Limits | None = None,
    threshold: float = 0.05,
    title: str | None = None,
    compress: bool | None = None,
) -> str:
    """The HTML page of one report, or of two compared side by side (A = reports[0]); Reports or paths."""
    if not 1 <= len(reports) <= 2:
        raise ValueError(f"expected one report, or two to compare, not {len(reports)}")
    limits = Limits() if limits is None else limits
    with contextlib.ExitStack() as stack:
        readers = [stack.enter_context(opened(report)) for report in reports]
        datasets = [report_data(reader, limits) for reader in readers]
        differences = compare(readers[0], readers[1]) if len(readers) == 2 else None
    return render_page(datasets, title=title, differences=differences, threshold=threshold, compress=compress)


def write_html(reports: list, output: str | os.PathLike[str], **options) -> int:
    """Write the HTML page of one report or two (Reports or paths) to `output` atomically; returns its size in bytes.

    Options are those of html_report: limits, threshold, title, compress.
    """
    check_output(output)
    page = html_report(reports, **options).encode("utf-8")
    with atomic_file(output) as temporary, open(temporary, "wb") as handle:
        handle.write(page)
    return len(page)
