"""Many reports as one dataset: Parquet files any engine reads, with fleet analyses that run on DuckDB or Spark.

>>> import pva.dataset                                                       # doctest: +SKIP
>>> pva.dataset.add_reports("fleet", ["nightly/profile.pop"], labels={"sdk": "3.1"})  # doctest: +SKIP
>>> pva.dataset.trend("fleet", "cycles", by="created")                       # doctest: +SKIP
pyarrow.Table ...
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from formats.fleet.limits import DEFAULT_LIMITS, Limits, QueryLimitError
from formats.fleet.metrics import METRICS, regressions_sql, trend_sql

if TYPE_CHECKING:
    import pyarrow as pa

    from formats.fleet.dataset import AddOutcome

__all__ = [
    "parse_labels",
    "METRICS",
    "AddOutcome",
    "Limits",
    "QueryLimitError",
    "add_reports",
    "find_reports",
    "is_dataset",
    "query",
    "register_spark",
    "regressions",
    "regressions_sql",
    "trend",
    "trend_sql",
]


def __getattr__(name: str):
    # AddOutcome lives with the dataset writer, which loads Arrow: import it on first use.
    if name == "AddOutcome":
        from formats.fleet.dataset import AddOutcome

        return AddOutcome
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def parse_labels(labels: list[str]) -> dict[str, str]:
    """Labels given as KEY=VALUE strings, as a dict; a malformed label raises InvalidInputError."""
    from formats.fleet.dataset import parse_labels

    return parse_labels(labels)


def is_dataset(path: str | os.PathLike[str]) -> bool:
    """Whether a directory is a dataset written by `add_reports`."""
    from formats.fleet.dataset import is_dataset

    return is_dataset(path)


def find_reports(directory: str | os.PathLike[str]) -> Iterator[str]:
    """Every *.pop file under a directory, recursively, in a stable order."""
    from formats.fleet.dataset import iter_reports

    return iter_reports(directory)


def add_reports(
    dataset: str | os.PathLike[str],
    reports: Iterable[str | os.PathLike[str]],
    labels: dict[str, str] | None = None,
    progress: Callable[[AddOutcome], None] | None = None,
) -> list[AddOutcome]:
    """Add report files to a dataset (created if absent); one outcome per file: added, present or skipped.

    Each report is added whole or not at all; a file that is not a sound report is skipped with a
    reason and never enters the dataset.
    """
    from formats.fleet.dataset import DatasetWriter

    with DatasetWriter(dataset) as writer:
        return writer.add(reports, labels, progress)


def query(dataset: str | os.PathLike[str], sql: str, limits: Limits = DEFAULT_LIMITS) -> pa.Table:
    """Run one SELECT over a dataset on DuckDB; every table has a first column report_id."""
    from formats.fleet import sql as fleet_sql

    return fleet_sql.query_dataset(os.fspath(dataset), sql, limits).to_arrow()


def register_spark(spark, dataset: str | os.PathLike[str]) -> list[str]:
    """Register every table of a dataset (a directory or an s3a://, abfss://... URI) as a Spark SQL view."""
    from formats.fleet import sql as fleet_sql

    return fleet_sql.register_spark(spark, os.fspath(dataset))


def trend(
    dataset: str | os.PathLike[str], metric: str, by: str = "created", limits: Limits = DEFAULT_LIMITS
) -> pa.Table:
    """A metric per report (and per compute set for compute_set_cycles), ordered by a reports column or a label.

    Columns: by_value, report_id, key, value. Metrics: see METRICS.
    """
    return query(dataset, trend_sql(metric, by), limits)


def regressions(
    dataset: str | os.PathLike[str],
    baseline_label: str,
    candidate_label: str,
    threshold: float = 0.05,
    metric: str = "compute_set_cycles",
    limits: Limits = DEFAULT_LIMITS,
) -> pa.Table:
    """Mean of a metric in the reports labelled `candidate_label` (key=value) against `baseline_label`, worst first.

    Columns: key, baseline, candidate, ratio, baseline_reports, candidate_reports, regressed
    (candidate > baseline * (1 + threshold)).
    """
    return query(dataset, regressions_sql(baseline_label, candidate_label, threshold, metric), limits)
