"""pva plot: PNG (and SVG/PDF) charts drawn with matplotlib, checked for size and content."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("matplotlib", reason="pva plot needs matplotlib (pip install 'pva[plot]')")

from matplotlib import image as mpimg
from test_html_report import write_medium_report

from pva.analysis.chart_options import format_size
from pva.analysis.plots import KINDS, write_plot
from pva.cli import main


@pytest.fixture
def pva(capsys):
    """Run the command line in this process: returncode, stdout and stderr."""

    def run(*args):
        capsys.readouterr()
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return SimpleNamespace(returncode=code, stdout=out, stderr=err)

    return run


def _pixels(path) -> np.ndarray:
    image = mpimg.imread(path)
    assert image.ndim == 3 and image.shape[2] in (3, 4)
    return image[:, :, :3]


def _assert_chart(path, width_px: int, min_height: int, max_height: int) -> np.ndarray:
    size = os.path.getsize(path)
    assert 8_000 < size < 3_000_000, size
    pixels = _pixels(path)
    height, width = pixels.shape[:2]
    assert width == width_px and min_height <= height <= max_height, (width, height)
    # not blank: varied pixels, and a real share of coloured (not grey) ink from the chart itself
    assert pixels.std() > 0.05
    colour = pixels.max(axis=2) - pixels.min(axis=2)
    assert (colour > 0.15).mean() > 0.01
    return pixels


@pytest.mark.parametrize(
    "kind, min_height, max_height",
    [
        ("memory", 500, 700),
        ("liveness", 400, 500),
        ("timeline", 200, 350),
        ("vertex-types", 150, 300),
    ],
)
def test_each_kind_draws_a_png(pva, sample, tmp_path, kind, min_height, max_height):
    out = tmp_path / f"{kind}.png"
    result = pva("plot", sample.path, "--kind", kind, "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"wrote {out} ({format_size(os.path.getsize(out))})\n"
    _assert_chart(out, 1200, min_height, max_height)
    assert os.listdir(tmp_path) == [f"{kind}.png"]


def test_memory_plot_marks_the_tile_limit_and_out_of_memory_tiles(tmp_path):
    report = write_medium_report(tmp_path / "medium.pop")["path"]
    out = tmp_path / "memory.png"
    size = write_plot(report, "memory", out, width=10, dpi=80)
    assert size == os.path.getsize(out)
    pixels = _assert_chart(out, 800, 300, 600)
    red = (pixels[:, :, 0] > 0.75) & (pixels[:, :, 1] < 0.3) & (pixels[:, :, 2] < 0.3)
    # the dashed limit line spans most of each panel's width, and markers sit above it
    rows_with_red = np.flatnonzero(red.sum(axis=1) > 0.3 * pixels.shape[1])
    assert rows_with_red.size >= 2


def test_size_and_resolution_options(pva, sample, tmp_path):
    out = tmp_path / "liveness.png"
    assert (
        pva(
            "plot", sample.path, "--kind", "liveness", "-o", str(out), "--width", "6", "--height", "3", "--dpi", "50"
        ).returncode
        == 0
    )
    assert _pixels(out).shape[:2] == (150, 300)


@pytest.mark.parametrize("extension, magic", [(".svg", b"<?xml"), (".pdf", b"%PDF")])
def test_other_formats_follow_the_extension(pva, sample, tmp_path, extension, magic):
    out = tmp_path / f"timeline{extension}"
    assert pva("plot", sample.path, "--kind", "timeline", "-o", str(out)).returncode == 0
    assert out.read_bytes().startswith(magic)


def test_a_compile_only_report_has_no_timeline(pva, compile_only, tmp_path):
    out = tmp_path / "timeline.png"
    result = pva("plot", compile_only.path, "--kind", "timeline", "-o", str(out))
    assert result.returncode == 2
    assert result.stderr == (
        f"pva plot: error: {compile_only.path!r}: cannot draw --kind timeline: the report has no execution profile\n"
    )
    assert not out.exists() and os.listdir(tmp_path) == []
    # its memory still plots
    assert pva("plot", compile_only.path, "--kind", "memory", "-o", str(out)).returncode == 0


@pytest.mark.parametrize(
    "output, message",
    [
        ("chart.jpg", "expected a file name ending in .png, .svg, .pdf"),
        ("missing-dir/chart.png", "does not exist"),
    ],
)
def test_bad_output_names(pva, sample, tmp_path, output, message):
    result = pva("plot", sample.path, "--kind", "memory", "-o", str(tmp_path / output))
    assert result.returncode == 2 and message in result.stderr and result.stderr.count("\n") == 1
    assert os.listdir(tmp_path) == []


def test_bad_report_leaves_no_output(pva, tmp_path):
    bad = tmp_path / "bad.pop"
    bad.write_text("not sqlite", encoding="utf-8")
    out = tmp_path / "memory.png"
    result = pva("plot", str(bad), "--kind", "memory", "-o", str(out))
    assert result.returncode == 2 and str(bad) in result.stderr
    assert sorted(os.listdir(tmp_path)) == ["bad.pop"]


def test_kinds_are_the_documented_ones():
    assert KINDS == ("memory", "liveness", "timeline", "vertex-types")
    with pytest.raises(ValueError, match="unknown plot kind"):
        write_plot("x.pop", "pie", "x.png")


def test_command_line_end_to_end(sample, tmp_path):
    """The console entry point in a fresh process: Agg needs no display."""
    out = tmp_path / "vertex-types.png"
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "MPLBACKEND")}
    result = subprocess.run(
        [sys.executable, "-m", "pva", "plot", sample.path, "--kind", "vertex-types", "-o", str(out)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    _assert_chart(out, 1200, 150, 300)


LONG = 1_000_000


@pytest.fixture(scope="module")
def long_names(tmp_path_factory, simulated):
    """The simulated report with a 1 MB program name, and every program, compute set and vertex type named at 1 MB."""
    import shutil
    import sqlite3

    path = tmp_path_factory.mktemp("long") / "profile.pop"
    shutil.copy(simulated / "profile.pop", path)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE metadata SET value = printf('%.*c', ?, 'p') WHERE key = 'program_name'", (LONG,))
        db.execute("UPDATE programs SET name = printf('%.*c', ?, 'q') || id", (LONG,))
        db.execute("UPDATE compute_sets SET name = printf('%.*c', ?, 'c') || compute_set", (LONG,))
        db.execute("UPDATE vertex_types SET name = printf('%.*c', ?, 'v') || name", (LONG,))
    db.close()
    return path


@pytest.mark.parametrize("kind", KINDS)
def test_long_names_are_cut_for_display_in_plots(long_names, kind):
    from matplotlib.text import Text

    from pva.analysis import plots
    from pva.analysis.report_source import opened

    plotter = {"vertex-types": plots.plot_vertex_types}.get(kind) or getattr(plots, f"plot_{kind}")
    with opened(str(long_names)) as reader:
        figure = plotter(reader, title=None)
    texts = [t.get_text() for t in figure.findobj(Text)]
    assert max(len(t) for t in texts) <= 300
    title = next(t for t in texts if "profile.pop" in t or "long" in t)
    assert "p" * 40 in title and "\u2026" in title
    # a user's own long title, with math markup, is cut and drawn as text
    with opened(str(long_names)) as reader:
        figure = plotter(reader, title="$\\frac{$" + "t" * LONG)
    out = io.BytesIO()
    figure.savefig(out, format="png")
    assert max(len(t.get_text()) for t in figure.findobj(Text)) <= 300


def test_long_names_are_cut_for_display_in_html(long_names, simulated):
    from pva.analysis.html import html_report

    page = html_report([str(long_names), str(simulated / "profile.pop")], compress=False)
    assert len(page) < 600_000 and "q" * 300 not in page and "c" * 300 not in page and "p" * 300 not in page
    assert "c" * 100 + "\u2026" in page
