"""Charts and command output that read at a glance: memory excluding gaps by default, titles that name
the report, labels that fit, readable program types, --json on html and plot, one size format."""

from __future__ import annotations

import json
import os
import re

import pytest

import pva
from formats.pop.reader import ProfileReader
from pva.analysis.chart_options import format_size
from pva.analysis.html import chart_data
from pva.cli import main

matplotlib = pytest.importorskip("matplotlib", reason="pva plot needs matplotlib (pip install 'pva[plot]')")

from pva.analysis import plots  # noqa: E402


@pytest.fixture(scope="module")
def reader(simulated):
    opened = ProfileReader(simulated / "profile.pop")
    yield opened
    opened.close()


def _draw(figure):
    figure.canvas.draw()
    return figure.canvas.get_renderer()


@pytest.mark.parametrize(
    "size, text", [(0, "0 B"), (1023, "1,023 B"), (83_251, "81.3 kB"), (638_976, "624.0 kB"), (5 * 1024**3, "5.0 GB")]
)
def test_one_size_format(size, text):
    assert format_size(size) == text == pva.format_size(size)


def test_memory_plot_excludes_gaps_and_fits_the_data(reader):
    mem = chart_data.memory(reader)
    assert mem["gaps"] is not None and mem["names"][mem["gaps"]] == "gaps"
    limit = mem["limit"]
    assert mem["largest_excluding"] < 0.25 * limit < mem["largest"]  # gaps dominate this report
    figure = plots.plot_memory(reader)
    _draw(figure)
    ax = figure.axes[0]
    labels = [text.get_text() for text in figure.legends[0].get_texts()]
    assert "gaps" not in labels and "tile limit" not in labels
    top = ax.get_ylim()[1]
    assert mem["largest_excluding"] <= top <= 1.1 * mem["largest_excluding"]
    assert ax.get_ylabel() == "memory per tile"
    assert "excluding gaps" in figure._suptitle.get_text()
    with_gaps = plots.plot_memory(reader, including_gaps=True)
    _draw(with_gaps)
    labels = [text.get_text() for text in with_gaps.legends[0].get_texts()]
    assert "gaps" in labels and "tile limit" in labels
    assert with_gaps.axes[0].get_ylim()[1] >= limit


def test_html_memory_chart_has_a_gaps_toggle_and_an_excluding_scale(simulated, tmp_path):
    out = tmp_path / "r.html"
    pva.write_html([simulated / "profile.pop"], out, compress=False)
    page = out.read_text()
    assert '<div class="toolbar memory-gaps">' in page and 'data-gaps="including"' in page
    data = json.loads(re.search(r'<script type="application/json" id="pva-data">(.*?)</script>', page, re.S).group(1))
    shared = data["shared"]
    opened = ProfileReader(simulated / "profile.pop")
    try:
        mem = chart_data.memory(opened)
    finally:
        opened.close()
    assert shared["memory_data_max_excluding"] == int(mem["largest_excluding"] * 1.08)
    assert shared["memory_data_max_excluding"] < shared["memory_data_max"]
    assert 'let memoryGaps = "excluding";' in page


def test_titles_name_the_report_directory_and_program(reader, simulated):
    expected = f"{simulated.name} (mnist-mlp)"
    assert plots.report_title(reader) == expected
    for kind, plotter in (
        ("memory", plots.plot_memory),
        ("liveness", plots.plot_liveness),
        ("timeline", plots.plot_timeline),
        ("vertex-types", plots.plot_vertex_types),
    ):
        figure = plotter(reader)
        titles = [figure._suptitle.get_text() if figure._suptitle else ""] + [ax.get_title() for ax in figure.axes]
        assert any(expected in t for t in titles), (kind, titles)
        assert not any("profile.pop" in t for t in titles)
        named = plotter(reader, title="baseline run")
        titles = [named._suptitle.get_text() if named._suptitle else ""] + [ax.get_title() for ax in named.axes]
        assert any("baseline run" in t for t in titles), kind


def test_liveness_peak_label_is_inside_the_figure_and_off_the_bars(reader):
    for only in (False, True):
        figure = plots.plot_liveness(reader, not_always_live_only=only)
        renderer = _draw(figure)
        ax = figure.axes[0]
        (label,) = [t for t in ax.texts if t.get_text().startswith("peak:")]
        box = label.get_window_extent(renderer)
        frame = figure.bbox
        assert frame.x0 <= box.x0 and box.x1 <= frame.x1 and box.y1 <= frame.y1, (box, frame)
        assert box.y0 >= ax.get_window_extent(renderer).y1 - 1  # above the plot area, not over the bars
    assert ax.get_ylabel() == "not-always-live memory (all tiles)"
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "always live" not in legend


def test_vertex_types_axis_has_no_offset_and_whole_names(reader):
    figure = plots.plot_vertex_types(reader)
    renderer = _draw(figure)
    ax = figure.axes[0]
    assert ax.xaxis.get_offset_text().get_text() == ""
    assert all("e" not in t.get_text().replace("estimated", "") for t in ax.get_xticklabels())
    names = [t.get_text() for t in ax.get_yticklabels()]
    assert "popops::BinaryOp1DInPlaceSupervisor<popops::expr::BinaryOpType::ADD,half>" in names
    for tick in ax.get_yticklabels():
        assert tick.get_window_extent(renderer).x0 >= 0


def test_program_type_text_is_readable():
    for name in ("Sequence", "Sync", "OnTileExecute", "Repeat"):
        assert chart_data.contrast_on_white(chart_data.text_colour(name)) >= 4.5, name
    assert chart_data.contrast_on_white(chart_data.TYPE_COLOURS["Sequence"]) < 2  # the chart colour alone is not


def test_html_and_plot_print_json_and_sizes_one_way(simulated, tmp_path, capsys):
    report = str(simulated / "profile.pop")
    page = tmp_path / "r.html"
    assert main(["html", report, "-o", str(page), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"path": str(page.resolve()), "bytes": os.path.getsize(page)}
    image = tmp_path / "m.png"
    assert main(["plot", report, "--kind", "memory", "-o", str(image), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"path": str(image.resolve()), "bytes": os.path.getsize(image)}
    assert main(["html", report, "-o", str(page)]) == 0
    assert capsys.readouterr().out == f"wrote {page} ({format_size(os.path.getsize(page))})\n"
    assert main(["info", report]) == 0
    out = capsys.readouterr().out
    assert f"({format_size(os.path.getsize(report))})" in out and "624.0 kB per tile" in out


def test_plot_flags(simulated, tmp_path, capsys):
    report = str(simulated / "profile.pop")
    assert (
        main(
            ["plot", report, "--kind", "memory", "-o", str(tmp_path / "g.png"), "--including-gaps", "--title", "run A"]
        )
        == 0
    )
    assert main(["plot", report, "--kind", "liveness", "-o", str(tmp_path / "l.png"), "--not-always-live-only"]) == 0
    assert capsys.readouterr().out.count("wrote ") == 2


CEREBRAS = """Estimated Overall Performance
Samples/s: 2321.9
Compute Samples/s: 2321.9
Transmission Samples/s: 2430.7
Active PEs: 93%
Compute Utilization: 80%
+--------------+-----------+-------------------+------------------------+------------+---------------------+
| Kernel Name | Samples/s | Compute Samples/s | Transmission Samples/s | Active PEs | Compute Utilization |
+--------------+-----------+-------------------+------------------------+------------+---------------------+
| | | | | | |
| fc_para42.fc | 2321.9 | 2321.9 | 14311.7 | 5203 | 100% |
"""


def test_info_prints_not_recorded(tmp_path, capsys):
    from formats.convert import convert

    source = tmp_path / "compile_report.txt"
    source.write_text(CEREBRAS)
    convert([source], tmp_path / "p.pop")
    assert main(["info", str(tmp_path / "p.pop")]) == 0
    out = capsys.readouterr().out
    assert "not recorded" in out and "0.0 MHz" not in out and "0 B per tile" not in out
    assert main(["info", str(tmp_path / "p.pop"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["target"]["clock_frequency"] is None and data["target"]["tiles_per_ipu"] is None
    assert data["target"]["num_tiles"] is None


def test_html_summary_card_prints_not_recorded(tmp_path):
    from formats.convert import convert

    source = tmp_path / "compile_report.txt"
    source.write_text(CEREBRAS)
    convert([source], tmp_path / "p.pop")
    pva.write_html([tmp_path / "p.pop"], tmp_path / "r.html")
    page = (tmp_path / "r.html").read_text()
    cards = dict(
        re.findall(r'data-key="((?:target|graph)\.[a-z_]+)" data-value="[^"]*"><dt>[^<]*</dt><dd>(.*?)</dd>', page)
    )
    for key in (
        "target.tiles_per_ipu",
        "target.num_tiles",
        "target.bytes_per_tile",
        "target.clock_frequency",
        "graph.num_edges",
    ):
        assert cards[key] == "<small>not recorded</small>", key
    assert cards["graph.num_compute_sets"] == "1"
    assert "0.0 MHz" not in page
