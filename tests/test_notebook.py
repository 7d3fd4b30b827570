"""pva in a notebook: the HTML a report, its parts, its lists and query results show, offline and bounded,
and a notebook run in a Jupyter kernel that shows them."""

from __future__ import annotations

import re

import pytest

import pva
from pva import notebook, notebook_tables

#: Every element and attribute name of the HTML and SVG the notebook module writes (no script, no link).
ALLOWED_TAGS = {
    "div", "table", "thead", "tbody", "tr", "th", "td", "b", "svg", "rect", "line", "text", "title",
    "polygon", "circle",
}  # fmt: skip


def offline(page: str) -> None:
    """The HTML refers to nothing outside itself and runs no script."""
    tags = set(re.findall(r"<([a-z]+)[\s>/]", page))
    assert tags <= ALLOWED_TAGS, tags - ALLOWED_TAGS
    assert re.findall(r"https?://[^\"' ]+", page) == ["http://www.w3.org/2000/svg"] * page.count("<svg xmlns")
    assert " on" not in re.sub(r">[^<]*<", "><", page)  # no event handler attribute


def largest_tile(report) -> tuple[int, int]:
    memory = report.compilation.memoryArray("total.includingGaps")
    tile = int(memory.argmax())
    return tile, int(memory[tile])


def test_report_shows_the_first_figures_and_charts(sample):
    with pva.openReport(sample.path) as report:
        page = report._repr_html_()
        tile, size = largest_tile(report)
        tiles = report.compilation.target.numTiles
        total = int(report.compilation.memoryArray("total.includingGaps").sum())
    offline(page)
    assert "IpuModel Ipu2: 2 IPU(s) × 4 tiles = 8 tiles" in page and tiles == 8
    assert f"tile {tile}: {size:,} B" in page and (tile, size) == (6, 19_546)
    assert f'memory used</th><td style="{notebook_tables.CELL_STYLE}">{total:,} B' in page and total == 120_083
    assert "1,832 (1.4 µs)" in page  # the cycles of the two runs
    assert page.count("<svg") == 3 + 3  # memory, liveness and cycle charts, and a share bar per compute set
    assert page.count('fill="#4e79a7"><title>tile') == 8  # a bar per tile of the memory chart
    # the top compute sets, largest first, with their measured cycles
    assert re.findall(r">(layer1/fwd|layer1/bwd|init/copy)</td><td[^>]*>([\d,]+)<", page) == [
        ("layer1/fwd", "319"),
        ("layer1/bwd", "182"),
        ("init/copy", "180"),
    ]


def test_compilation_and_execution_reports(sample, compile_only):
    with pva.openReport(sample.path) as report:
        compilation = report.compilation._repr_html_()
        execution = report.execution._repr_html_()
    offline(compilation)
    offline(execution)
    assert "Memory by tile" in compilation and "Live memory by liveness step" in compilation
    assert "Tile-cycles by kind" not in compilation
    assert "2 run(s), 11 steps" in execution and "Tile-cycles by kind" in execution
    assert "compute 48.4%" in execution
    with pva.openReport(compile_only.path) as report:
        page = report._repr_html_()
        assert "no execution profile" in report.execution._repr_html_()
    assert "no execution profile (compile-only report)" in page and "Tile-cycles" not in page


def test_lists_show_their_length_and_first_items(sample):
    with pva.openReport(sample.path) as report:
        c = report.compilation
        tiles = c.tiles._repr_html_()
        steps = report.execution.steps._repr_html_()
        programs = c.programs._repr_html_()
        variables = c.variables._repr_html_()
        first_tile = c.tiles[0].memory.total
        try:
            pva.Report.listPrintLength(3)
            short = c.programs._repr_html_()
        finally:
            pva.Report.listPrintLength(10)
        empty = c.programs[:0]
    for page in (tiles, steps, programs, variables):
        offline(page)
    assert "8 items (Tile)" in tiles and tiles.count("&lt;Tile ") == 8
    assert f">{first_tile.includingGaps:,}</td>" in tiles and f">{first_tile.excludingGaps:,}</td>" in tiles
    assert "11 items (ExecutionStep)" in steps and "… and 1 more" in steps
    assert "cycles (longest IPU)" in steps
    assert "18 items" in programs and "… and 8 more" in programs
    assert "18 items" in short and short.count("<tr>") == 3 and "… and 15 more" in short
    assert "8 items (Variable)" in variables and "&#x27;var0&#x27;" in variables
    assert isinstance(empty, list)


def test_query_results(sample):
    with pva.openReport(sample.path) as report:
        rows = report.sql("SELECT compute_set, name FROM compute_sets ORDER BY compute_set")._repr_html_()
        many = report.sql("SELECT id FROM programs")._repr_html_()
        stream = report.sql_stream("SELECT id, name FROM programs")._repr_html_()
    offline(rows)
    assert "3 rows × 2 columns" in rows and ">layer1/bwd</td>" in rows
    assert "18 rows × 1 column" in many and "… and 8 more rows" in many
    assert "query of 2 columns" in stream and "id, name" in stream


def test_trace_report(simulated):
    (path,) = simulated.glob("*.pvti")
    with pva.openTrace(path) as trace:
        page = notebook_tables.trace_html(trace)
        processes = trace.processes
    offline(page)
    assert f"{len(processes):,}, {sum(len(p.threads) for p in processes):,} threads" in page
    assert f">{processes[0].pid:,}</td>" in page


def test_a_report_of_many_tiles_stays_small(tmp_path):
    """5,888 tiles on 4 IPUs: the memory chart groups them into MEMORY_BARS bars, the page stays small."""
    from simulator.presets import run_preset

    run_preset("matmul", {"ipus": 4, "m": 256, "k": 256, "n": 256}, str(tmp_path), timestamp=1_700_000_000.0)
    with pva.openReport(tmp_path / "profile.pop") as report:
        page = report._repr_html_()
        tiles = report.compilation.tiles._repr_html_()
        assert report.compilation.target.numTiles == 5888
    offline(page)
    assert page.count("<title>tiles ") == notebook.MEMORY_BARS
    assert "46 tiles a bar" in page
    assert len(page.encode()) < 40_000
    assert "5,888 items (Tile)" in tiles and tiles.count("<tr>") == 10


def test_a_report_converted_from_a_text_summary(tmp_path):
    """Poplar's printProfileSummary text has figures for the whole device, and no liveness or execution."""
    import pathlib

    from formats.convert import convert

    sample = pathlib.Path(__file__).parent / "data" / "samples"
    convert([sample / "graphcore_printProfileSummary_graph__tf-docs_adder-example_SDK0.9.txt"], tmp_path / "p.pop")
    with pva.openReport(tmp_path / "p.pop") as report:
        page = report._repr_html_()
    offline(page)
    assert "1 IPU(s) × 1,216 tiles = 1,216 tiles, 262,144 B" in page
    assert "tile 0: 49,184 B (48.0 kB) (18.8% of a tile)" in page
    assert "no liveness recorded" in page and "no execution profile (compile-only report)" in page
    assert "Poplar" not in page  # the text names no Poplar version


def test_a_closed_report(sample):
    report = pva.openReport(sample.path)
    report.close()
    assert "(closed)" in report._repr_html_()


# -- a notebook run in a kernel ----------------------------------------------------------------

CELLS = [
    "import pva\nreport = pva.openReport({path!r})\nreport",
    "report.compilation",
    "report.execution",
    "report.compilation.tiles",
    "report.execution.steps",
    "report.sql('SELECT compute_set, name FROM compute_sets ORDER BY compute_set')",
    "report.sql_stream('SELECT type, count(*) AS n FROM steps GROUP BY type ORDER BY type').to_polars()",
]


def test_a_notebook_shows_the_report(simulated, tmp_path, monkeypatch):
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))  # the kernel's connection file
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))  # the kernel's history
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    pytest.importorskip("polars")
    path = str(simulated / "profile.pop")
    book = nbformat.v4.new_notebook()
    book.cells = [nbformat.v4.new_code_cell(source.format(path=path)) for source in CELLS]
    nbclient.NotebookClient(
        book, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    html = [cell.outputs[0]["data"].get("text/html", "") for cell in book.cells]
    plain = [cell.outputs[0]["data"]["text/plain"] for cell in book.cells]
    with pva.openReport(path) as report:
        tile, size = largest_tile(report)
        tiles = report.compilation.target.numTiles
        sets = len(report.compilation.computeSets)
        steps = len(report.execution.steps)
        types = report.sql("SELECT count(DISTINCT type) FROM steps")[0][0]
    assert "<svg" in html[0] and "Memory by tile" in html[0] and "Top compute sets by cycles" in html[0]
    assert f"tile {tile}: {size:,} B" in html[0]
    assert f"= {tiles:,} tiles" in html[0] and plain[0].startswith("<Report 'profile.pop'")
    assert "CompilationReport of" in html[1] and "Live memory by liveness step" in html[1]
    assert "ExecutionReport of" in html[2] and f"{steps:,} steps" in html[2]
    assert f"{tiles:,} items (Tile)" in html[3]
    assert f"{steps:,} items (ExecutionStep)" in html[4]
    assert f"{sets:,} rows × 2 columns" in html[5]
    assert f"shape: ({types}, 2)" in html[6] or f"shape: ({types}, 2)" in plain[6]
    for page in html[:6]:
        offline(page)


def test_a_trace_shows_its_processes_in_a_notebook():
    import pathlib

    source = pathlib.Path(__file__).parent / "data" / "kineto" / "cpu_only_rank34.json.gz"
    with pva.openTrace(source) as trace:
        page = trace._repr_html_()
        processes = list(trace.processes)
    assert page.startswith('<div class="pva"') and "TraceReport cpu_only_rank34.json.gz" in page
    assert "<script" not in page and "http" not in page
    assert processes and all(p.name in page for p in processes if p.name)
