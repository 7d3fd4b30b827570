"""The fleet metrics, and the SQL of trend() and regressions() over a dataset: text only, no engine."""

from __future__ import annotations

import re

from ..errors import InvalidInputError

#: A label key: what ``--label KEY=VALUE`` and ``trend --by KEY`` accept.
LABEL = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")

#: Metrics of trend() and regressions(): (SQL giving report_id, key, value per report; what it measures).
METRICS = {
    "compute_set_cycles": (
        (
            "SELECT s.report_id, cs.name AS key, CAST(sum(b.cycles) AS BIGINT) AS value "
            "FROM steps s JOIN steps_by_ipu b ON b.report_id = s.report_id AND b.step_id = s.id "
            "JOIN compute_sets cs ON cs.report_id = s.report_id AND cs.compute_set = s.compute_set "
            "GROUP BY s.report_id, cs.name"
        ),
        "cycles of each compute set, summed over its executions and IPUs",
    ),
    "cycles": (
        ("SELECT report_id, '' AS key, CAST(sum(total) AS BIGINT) AS value FROM cycle_totals GROUP BY report_id"),
        "total cycles of all runs, summed over IPUs",
    ),
    "memory": (
        (
            "SELECT report_id, '' AS key, CAST(sum(total_including_gaps) AS BIGINT) AS value FROM memory_by_tile "
            "GROUP BY report_id"
        ),
        "memory of one replica including gaps [bytes]",
    ),
    "overflow_tiles": (
        (
            "SELECT report_id, '' AS key, CAST(sum(CASE WHEN overflowed_including_gaps > 0 THEN 1 ELSE 0 END) AS BIGINT) "
            "AS value FROM memory_by_tile GROUP BY report_id"
        ),
        "tiles whose memory overflows",
    ),
    "max_tile_memory": (
        (
            "SELECT report_id, '' AS key, CAST(max(total_including_gaps) AS BIGINT) AS value FROM memory_by_tile "
            "GROUP BY report_id"
        ),
        "memory of the fullest tile including gaps [bytes]",
    ),
}
#: Columns of the reports table a trend may be ordered by.
TREND_BY = ("created", "added", "poplar_version", "producer_version", "path", "architecture")


def metric_sql(metric: str) -> str:
    if metric not in METRICS:
        raise InvalidInputError(f"unknown metric {metric!r}; expected one of {', '.join(METRICS)}")
    return METRICS[metric][0]


def trend_sql(metric: str, by: str = "created") -> str:
    """SQL of a metric per report (and per key), ordered by a reports column or a label's value."""
    if by in TREND_BY:
        source, order = "", f"r.{by}"
    elif LABEL.match(by):
        source = f"LEFT JOIN report_labels l ON l.report_id = r.report_id AND l.key = '{by}' "
        order = "l.value"
    else:
        raise InvalidInputError(f"trend by {by!r}: expected one of {', '.join(TREND_BY)} or a label key")
    return (
        f"SELECT {order} AS by_value, m.report_id, m.key, m.value "
        f"FROM ({metric_sql(metric)}) m JOIN reports r ON r.report_id = m.report_id {source}"
        f"ORDER BY by_value NULLS LAST, m.key, m.report_id"
    )


def _label_filter(label: str) -> tuple[str, str]:
    key, sep, value = label.partition("=")
    if not sep or not LABEL.match(key):
        raise InvalidInputError(f"label {label!r}: expected key=value")
    return key, value.replace("'", "''")


def regressions_sql(
    baseline_label: str, candidate_label: str, threshold: float = 0.05, metric: str = "compute_set_cycles"
) -> str:
    """SQL comparing the mean of a metric over two labelled groups of reports, worst ratio first.

    A key regresses when candidate > baseline * (1 + threshold); keys missing from either group are
    left out.
    """
    if not (0 <= threshold < 1e6):
        raise InvalidInputError(f"threshold {threshold!r}: expected a non-negative fraction such as 0.05")
    (bk, bv), (ck, cv) = _label_filter(baseline_label), _label_filter(candidate_label)
    group = (
        "SELECT m.key, avg(CAST(m.value AS DOUBLE)) AS value, count(*) AS reports "
        "FROM ({metric}) m JOIN report_labels l ON l.report_id = m.report_id "
        "WHERE l.key = '{k}' AND l.value = '{v}' GROUP BY m.key"
    )
    base = group.format(metric=metric_sql(metric), k=bk, v=bv)
    cand = group.format(metric=metric_sql(metric), k=ck, v=cv)
    return (
        f"SELECT b.key, b.value AS baseline, c.value AS candidate, "
        f"CASE WHEN b.value = 0 THEN NULL ELSE c.value / b.value END AS ratio, "
        f"b.reports AS baseline_reports, c.reports AS candidate_reports, "
        f"c.value > b.value * {1 + threshold!r} AS regressed "
        f"FROM ({base}) b JOIN ({cand}) c ON c.key = b.key "
        f"ORDER BY ratio DESC NULLS LAST, b.key"
    )
