"""`pva html`: a self-contained HTML report of one report, or two side by side.

>>> from pva.analysis.html import write_html                                   # doctest: +SKIP
>>> write_html(["profile.pop"], "report.html")                        # doctest: +SKIP
"""

from __future__ import annotations

import os

from formats.profile_reader import ProfileReader

from ..compare import compare
from .chart_data import Limits, report_data
from .output import atomic_file, check_output
from .render import render_page

__all__ = ["Limits", "html_report", "write_html"]


def html_report(paths: list[str | os.PathLike[str]], *, limits: Limits = Limits(), threshold: float = 0.05,
                title: str | None = None, compress: bool | None = None) -> str:
    """The HTML page of one report, or of two reports compared side by side (A = paths[0])."""
    if not 1 <= len(paths) <= 2:
        raise ValueError(f"expected one report, or two to compare, not {len(paths)}")
    readers: list[ProfileReader] = []
    try:
        for path in paths:
            readers.append(ProfileReader(path))
        datasets = [report_data(reader, limits) for reader in readers]
        differences = compare(readers[0], readers[1]) if len(readers) == 2 else None
    finally:
        for reader in readers:
            reader.close()
    return render_page(datasets, title=title, differences=differences, threshold=threshold, compress=compress)


def write_html(paths: list[str | os.PathLike[str]], output: str | os.PathLike[str], **options) -> int:
    """Write the HTML page to `output` atomically; returns its size in bytes."""
    check_output(output)
    page = html_report(paths, **options).encode("utf-8")
    with atomic_file(output) as temporary:
        with open(temporary, "wb") as handle:
            handle.write(page)
    return len(page)
