"""The analyses from Python: Report methods and pva functions, on the sample and a simulated report."""

from __future__ import annotations

import io
import pathlib
import subprocess
import sys

import pytest
from reportbuilder import changed_copy

import pva
from formats.pop.reader import ProfileReader
from pva.analysis.estimate import estimate, format_compile_report
from pva.analysis.optime import step_cycles_counted_once


def _step_times(sample) -> dict[int, int]:
    """Each step's cycles of the run, every cycle counted once (pva optime's rule)."""
    reader = ProfileReader(sample.path)
    try:
        return step_cycles_counted_once(reader, {row[0]: row[1] for row in reader.steps_labelled()})
    finally:
        reader.close()


@pytest.fixture
def changed(sample, tmp_path):
    """The sample with tile 3 using twice its memory (including gaps)."""
    sql = "UPDATE memory_by_tile SET total_including_gaps = total_including_gaps * 2 WHERE tile = 3"
    return pathlib.Path(changed_copy(sample.path, tmp_path / "changed.pop", sql))


# -- facts of the file ------------------------------------------------------------------------


def test_metadata_and_row_counts(sample):
    with pva.openReport(sample.path) as report:
        assert (report.metadata["producer"], report.metadata["producer_version"]) == ("pva-tests", "1")
        assert report.metadata["poplar_version"] == report.poplarVersion.string == "3.1.0 (a027fa0bd5)"
        report.metadata["producer"] = "changed"  # a copy: the report is not affected
        assert report.metadata["producer"] != "changed"
        assert report.row_count("programs") == len(sample.rows("programs")) == 18
        assert report.row_count("steps") == len(sample.rows("steps"))
        with pytest.raises(pva.PvaError, match="no table 'nope'; expected one of"):
            report.row_count("nope")


def test_table_counts_info_and_columns(sample):
    with pva.openReport(sample.path) as report:
        counts = report.table_counts()
        assert counts["programs"] == 18 and counts["memory_by_tile"] == len(sample.rows("memory_by_tile"))
        info = {name: (kind, rows, description) for kind, name, rows, description in report.table_info()}
        assert info["programs"][:2] == ("table", 18)
        assert info["programs"][2].startswith("Programs of every Program.Type")
        kind, rows, description = info["step_cycles_by_tile"]
        assert (kind, rows) == ("matrix", 11) and description.startswith("11 x 8 cycles, ")
        columns = report.column_info("steps_by_ipu")
        assert ("cycles_base", "INTEGER", "cycle counter of this IPU at the start of the run [cycles]") in columns
        with pytest.raises(pva.PvaError, match="no table 'nope'"):
            report.column_info("nope")


# -- summary ----------------------------------------------------------------------------------


def test_summary_figures(sample):
    memory = sample.rows("memory_by_tile")
    with pva.openReport(sample.path) as report:
        data = report.summary()
        text = io.StringIO()
        pva.printProfileSummary(report, text)
    assert data["memory"]["excluding_gaps"] == sum(row[1] for row in memory)
    assert data["memory"]["including_gaps"] == sum(row[2] for row in memory)
    assert data["liveness"]["always_live_bytes"] == sum(row[9] for row in memory)
    assert data["execution"]["runs"] == len(sample.rows("runs"))
    assert data["execution"]["steps"] == len(sample.rows("steps"))
    assert data["execution"]["tile_cycles"]["compute"] == 240
    assert data["execution"]["cycles_by_vertex_type"][0] == {
        "vertex_type": "popops::ScaledAddSupervisor<float,float,true>",
        "instances": 9,
        "cycles": 400,
    }
    assert f"Total:             {data['memory']['excluding_gaps']:>13,} B" in text.getvalue()


def test_summary_of_a_simulated_report(simulated):
    with pva.openReport(simulated / "profile.pop") as report:
        data = report.summary()
        graph = report.compilation.graph
        assert data["target"]["tiles_per_ipu"] == report.compilation.target.tilesPerIpu == 64
        assert data["graph"] == {
            "num_compute_sets": graph.numComputeSets,
            "num_edges": graph.numEdges,
            "num_vars": graph.numVars,
            "num_vertices": graph.numVertices,
        }
        assert data["execution"]["runs"] == len(report.execution.runs) > 0
        (expected,) = report.sql(
            'SELECT sum(length) FROM (SELECT max("end" - start) AS length FROM run_cycles_by_ipu GROUP BY run)'
        )[0]
    assert data["execution"]["total_cycles"] == expected > 0
    assert data["execution"]["cycles_by_vertex_type_estimated"]  # the simulator records no vertex cycles


# -- compare ----------------------------------------------------------------------------------


def test_compare_finds_the_change(sample, changed):
    tile3 = next(row for row in sample.rows("memory_by_tile") if row[0] == 3)[2]
    with pva.openReport(sample.path) as a, pva.openReport(changed) as b:
        differences = pva.compare(a, b)
        assert [(d.section, d.item, d.change) for d in a.compare(b)] == [
            (d.section, d.item, d.change) for d in differences
        ]
        same = a.compare(a)
        with pytest.raises(TypeError, match="expected a pva Report"):
            pva.compare(a, str(changed))
    by_item = {(d.section, d.item): d for d in differences}
    grew = by_item[("memory", "total including gaps")]
    assert grew.change == tile3 and grew.is_regression(0.05)
    assert by_item[("memory by IPU", "IPU 0")].change == tile3
    assert all(d.change == 0 for d in same)
    assert {d.section for d in differences if d.change} == {"memory", "memory by IPU"}


# -- operator times ---------------------------------------------------------------------------


def test_operator_times(sample):
    times = _step_times(sample)
    with pva.openReport(sample.path) as report:
        total = report.operator_times()
        each = report.operator_times("each")
        with pytest.raises(ValueError, match="mode must be 'total' or 'each'"):
            report.operator_times("some")
    by_type = {r.type: r.cycles for r in total}
    assert by_type["StreamCopy"] == pytest.approx(times[0] + times[1] + times[2])
    assert by_type["Sync"] == pytest.approx(times[6] + times[7])
    assert sum(r.share for r in total) == pytest.approx(1.0)
    assert [r.name for r in each][3:6] == ["layer1/fwd/ExchangePre", "init/copy", "layer1/fwd"]
    assert each[5].cycles == pytest.approx(times[5] + times[8])


def test_operator_types_come_from_debug_information(simulated):
    with pva.openReport(simulated / "profile.pop", simulated / "debug.cbor") as report:
        typed = {r.type for r in report.operator_times()}
        untyped = {r.type for r in report.operator_times(debug=False)}
    assert {"MatMul", "NonLinearity", "Loss"} <= typed
    assert any(t.startswith("poplin::ConvPartial1x1Out<") for t in untyped) and "MatMul" not in untyped
    with pva.openReport(simulated / "profile.pop") as report:  # no debug information given
        assert {r.type for r in report.operator_times()} == untyped


# -- estimate ---------------------------------------------------------------------------------


def test_estimate(sample, tmp_path):
    estimates = sample.matrix("compute_set_estimated_cycles_by_tile")
    with pva.openReport(sample.path) as report:
        est = report.estimate()
        four = report.estimate(batch_size=4)
    reader = ProfileReader(sample.path)
    expected_text = format_compile_report(estimate(reader))
    reader.close()
    assert [k.name for k in est.kernels] == ["init/copy", "layer1/fwd", "layer1/bwd"]
    assert est.kernels[0].compute_dt == int(estimates[0].max())
    assert four.samples_per_second == pytest.approx(4 * est.samples_per_second)
    data = est.as_dict()
    assert data["kernels"][0]["name"] == "init/copy" and data["active_pes_percent"] == 100 * est.active_pes_fraction
    assert est.compile_report() == expected_text
    written = est.write_compile_report(tmp_path)
    assert written == str(tmp_path / "compile_report.txt")
    assert (tmp_path / "compile_report.txt").read_text() == expected_text
    assert est.write_compile_report(tmp_path / "named.txt") == str(tmp_path / "named.txt")
    with pytest.raises(TypeError):
        est.write_compile_report(0)


# -- charts -----------------------------------------------------------------------------------


def test_write_html(sample, compile_only, tmp_path):
    with pva.openReport(sample.path) as report, pva.openReport(compile_only.path) as other:
        size = report.write_html(tmp_path / "one.html", compress=False)
        page = pva.html_report([report], compress=False)
        assert page == pva.html_report([sample.path], compress=False)
        both = report.write_html(tmp_path / "two.html", compare_with=other, limits=pva.ChartLimits(max_tiles=4))
    assert size == (tmp_path / "one.html").stat().st_size == len(page.encode("utf-8"))
    assert (tmp_path / "one.html").read_text(encoding="utf-8") == page
    assert both == (tmp_path / "two.html").stat().st_size
    assert pva.write_html([sample.path], tmp_path / "three.html", compress=False) == size


def test_write_plot(sample, tmp_path):
    pytest.importorskip("matplotlib")
    with pva.openReport(sample.path) as report:
        size = report.write_plot("memory", tmp_path / "memory.png", width=6, dpi=50)
        svg = pva.write_plot(report, "liveness", tmp_path / "liveness.svg")
        with pytest.raises(pva.PvaError, match="unknown plot kind 'pie'"):
            report.write_plot("pie", tmp_path / "pie.png")
    assert size == (tmp_path / "memory.png").stat().st_size
    assert (tmp_path / "memory.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert svg == (tmp_path / "liveness.svg").stat().st_size and b"<svg" in (tmp_path / "liveness.svg").read_bytes()
    assert set(pva.PLOT_KINDS) == {"memory", "liveness", "timeline", "vertex-types"}


# -- import cost ------------------------------------------------------------------------------


def test_importing_pva_and_building_the_parser_loads_no_analysis():
    code = (
        "import sys, pva, pva.cli; pva.cli.build_parser(); "
        "print(sorted(m for m in ('matplotlib', 'sqlite_utils', 'pva.analysis.html', 'pva.analysis.plots', "
        "'pva.analysis.compare', 'pva.analysis.estimate', 'pva.analysis.optime', 'pva.analysis.summary') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["info", "{report}"], ["sql", "{report}", "select 1"], ["dataset", "--help"], ["query", "--help"]],
    ids=["help", "info", "sql", "dataset-help", "query-help"],
)
def test_the_quick_commands_load_no_arrays_no_simulator(sample, argv):
    """`pva --help`, `pva info` and `pva sql` start in well under 150 ms because they load none of these."""
    argv = [a.format(report=sample.path) for a in argv]
    code = (
        "import sys, contextlib, io\n"
        "from pva.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n"
        f"        main({argv!r})\n"
        "    except SystemExit as e:\n"
        "        assert e.code in (0, None), e.code\n"
        "print(sorted(m for m in ('numpy', 'pyarrow', 'simulator', 'duckdb', 'h5py', 'matplotlib') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_running_a_command_imports_no_other_command_module(sample):
    code = (
        "import sys, contextlib, io\n"
        "from pva.cli import COMMANDS, main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    main(['info', {str(sample.path)!r}])\n"
        "print(sorted(c for c in COMMANDS if f'pva.cli.{c}' in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['info']"


# -- bad values -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("statement", "column", "found"),
    [
        ("UPDATE memory_by_tile SET total = 'lots' WHERE tile = 2", "memory_by_tile.total", "str 'lots'"),
        ("UPDATE vertex_types SET name = x'00ff'", "vertex_types.name", "bytes b'\\x00\\xff'"),
    ],
)
def test_a_value_of_the_wrong_type_is_a_damaged_report(sample, tmp_path, capsys, statement, column, found):
    from pva.cli import main

    path = changed_copy(sample.path, tmp_path / "damaged.pop", statement)
    with pva.openReport(path) as report, pytest.raises(pva.PvaError) as caught:
        report.summary()
    assert (
        str(caught.value) == f"{str(path)!r}: {column} should be "
        f"{'INTEGER' if column.endswith('total') else 'TEXT'}, found {found}"
    )
    assert main(["summary", str(path)]) == 2
    assert f"{column} should be" in capsys.readouterr().err


def test_sql_refuses_a_statement_that_is_not_text(sample):
    with pva.openReport(sample.path) as report, pytest.raises(TypeError, match="must be a str, not int"):
        report.sql(0)
