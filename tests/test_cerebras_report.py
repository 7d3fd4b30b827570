"""Cerebras compile_report.txt: the real head, the documented table, rounding quirks, bad input."""

from __future__ import annotations

import pathlib
import sqlite3

import pytest

import pva
from formats.cerebras.importer import SAMPLE, convert_cerebras, parse_compile_report, read_compile_report
from formats.errors import InvalidInputError, NotAReportError

SAMPLES = pathlib.Path(__file__).resolve().parent / "data" / "samples"

#: The documentation's example (2.0.3 rendering, with +---+ rules and the blank first row).
DOCUMENTED = """Estimated Overall Performance
Samples/s: 2321.9
Compute Samples/s: 2321.9
Transmission Samples/s: 2430.7
Active PEs: 93%
Compute Utilization: 80%
+-------------------------------------------------------------------------------------------+----------------+-------------------+------------------------+------------+---------------------+
| Kernel Name | Samples/s | Compute Samples/s | Transmission Samples/s | Active PEs | Compute Utilization |
+-------------------------------------------------------------------------------------------+----------------+-------------------+------------------------+------------+---------------------+
| | | | | | |
| fc_para42.fc | 2321.9 | 2321.9 | 14311.7 | 5203 | 100% |
| fc_para30.fc.lib_fc | 2321.9 | 2321.9 | 14311.7 | 5301 | 100% |
"""

#: An older rendering: aligned columns, leading-space rows, no rules; and the fc_mnist head with 0%.
ALIGNED = """Estimated Overall Performance
-------------------------------
Samples/s:                    1270553.1
Compute Samples/s:            1270553.1
Transmission Samples/s:       2607362.0
Active PEs:                   0%
Compute Utilization:          74%

 | Kernel Name                 |   Samples/s | Compute Samples/s | Transmission Samples/s | Active PEs | Compute Utilization |
 |                             |             |                   |                        |            |                     |
 | fc_mnist.dense_1            |   1270553.1 |         1270553.1 |              2607362.0 |        317 |                  74% |
 | fc_mnist.dense_2            |   4812233.0 |         4812233.0 |              2607362.0 |         85 |                   0% |
"""


def test_real_head_parses():
    report = read_compile_report(SAMPLES / "cerebras_compile_report_HEAD7__alcf-unet-severstal.txt")
    o = report.overall
    assert (o.samples_per_second, o.compute_samples_per_second, o.transmission_samples_per_second) == (
        14724.2,
        17287.7,
        14724.2,
    )
    assert (o.active_pes_percent, o.compute_utilization_percent) == (62, 52)
    assert report.kernels == () and report.limited_by == "transmission"


def test_documented_kernel_table():
    report = parse_compile_report(DOCUMENTED)
    assert report.overall.active_pes_percent == 93
    assert [
        (k.name, k.samples_per_second, k.transmission_samples_per_second, k.active_pes, k.compute_utilization_percent)
        for k in report.kernels
    ] == [("fc_para42.fc", 2321.9, 14311.7, 5203, 100), ("fc_para30.fc.lib_fc", 2321.9, 14311.7, 5301, 100)]


def test_aligned_layout_and_zero_percent():
    report = parse_compile_report(ALIGNED)
    assert report.overall.active_pes_percent == 0 and report.overall.compute_utilization_percent == 74
    assert report.kernels[1].compute_utilization_percent == 0 and report.kernels[1].active_pes == 85
    assert report.limited_by == "compute"


def test_values_start_at_column_31():
    line = SAMPLE.splitlines()[2]
    assert line.index("14724.2") == 30


@pytest.mark.parametrize(
    "text, where, message",
    [
        (SAMPLE.replace("62%", "62.4%"), "line 6, column 31", "expected a whole percentage such as 62%, found '62.4%'"),
        (SAMPLE.replace("17287.7", "fast"), "line 4, column 31", "expected samples per second"),
        (
            SAMPLE.replace("Compute Utilization:          52%\n", ""),
            "line 6",
            "the overall estimate lacks Compute Utilization",
        ),
        (
            DOCUMENTED.replace("| 5203 |", "| 52o3 |"),
            "line 11, column 46",
            "expected a count of active PEs, found '52o3'",
        ),
        (DOCUMENTED.replace("| 100% |\n| fc_para30", "| 1.5 |\n| fc_para30"), "line 11", "expected a whole percentage"),
        (DOCUMENTED + "| a | b |\n", "line 13, column 1", "expected 6 cells"),
    ],
)
def test_bad_values_name_line_and_column(text, where, message):
    with pytest.raises(InvalidInputError) as caught:
        parse_compile_report(text, "compile_report.txt")
    assert str(caught.value).startswith(f"'compile_report.txt': {where}"), str(caught.value)
    assert message in str(caught.value)


def test_other_text_is_not_a_compile_report():
    with pytest.raises(NotAReportError, match="expected a Cerebras compile report"):
        parse_compile_report("Target:\n  Number of IPUs: 1\n", "x.txt")


def test_converted_report_is_queryable(tmp_path):
    source = tmp_path / "compile_report.txt"
    source.write_text(DOCUMENTED)
    convert_cerebras(source, tmp_path / "cs.pop")
    with pva.openReport(tmp_path / "cs.pop") as report:
        assert [cs.name for cs in report.compilation.computeSets] == ["fc_para42.fc", "fc_para30.fc.lib_fc"]
        assert report.compilation.target.type == pva.Target.Type.Unknown
    with sqlite3.connect(f"file:{tmp_path / 'cs.pop'}?mode=ro", uri=True) as conn:
        rows = conn.execute(
            "SELECT kernel, samples_per_second, active_pes, active_pes_percent, "
            "compute_utilization_percent FROM compile_estimates ORDER BY id"
        ).fetchall()
    conn.close()
    assert rows == [
        (None, 2321.9, None, 93, 80),
        ("fc_para42.fc", 2321.9, 5203, None, 100),
        ("fc_para30.fc.lib_fc", 2321.9, 5301, None, 100),
    ]
