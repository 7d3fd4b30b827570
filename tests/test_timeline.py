"""Timelines that hide no work: the lanes of pva.analysis.timeline, and the plot and HTML page that draw them.

The matmul of the README's tour has a Sync of 64 idle tiles (cycles 532 to 5,017) spanning the other
tiles' exchange (531 to 1,929) and compute set (1,929 to 4,904). Each kind's share of what is drawn
on an IPU's path lane must be its share of the run, measured here from the pixels of the PNG and
the rectangles the page's own script fills (run in Node), against shares computed from the raw
steps with plain SQL and a per-cycle painter.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import sqlite3
import subprocess
from pathlib import Path

import numpy as np
import pytest

from pva.analysis.html import html_report
from pva.analysis.html.chart_data import TYPE_COLOURS
from pva.analysis.timeline import lanes, merge_short, partition
from pva.cli import main

ROOT = Path(__file__).resolve().parents[1]
MATMUL = ["--preset", "matmul", "--m", "512", "--k", "256", "--n", "512"]


# -- the lanes ------------------------------------------------------------------------------


def test_partition_gives_each_point_to_the_highest_rank():
    # A spans B and C; B outranks A, C does not.
    start, end, index = partition([0, 10, 40], [100, 20, 50], [1, 2, 0])
    assert list(zip(start.tolist(), end.tolist(), index.tolist())) == [(0, 10, 0), (10, 20, 1), (20, 100, 0)]


def test_a_sync_spanning_work_owns_only_the_cycles_nothing_else_runs_in():
    # exchange 531-1929, compute 1929-4904, Sync of idle tiles 532-5017 (the matmul's steps 7 to 9)
    found = lanes([531, 1929, 532], [1929, 4904, 5017], [2, 3, 0])
    path = list(zip(*(a.tolist() for a in found["path"])))
    assert path == [(531, 1929, 0), (1929, 4904, 1), (4904, 5017, 2)]
    assert list(zip(*(a.tolist() for a in found["overlapped"]))) == [(532, 4904, 2)]


def test_compute_owns_a_cycle_before_exchange_and_a_later_step_before_an_earlier_one():
    found = lanes([0, 50], [100, 150], [2, 2])
    assert list(zip(*(a.tolist() for a in found["path"]))) == [(0, 50, 0), (50, 150, 1)]
    assert list(zip(*(a.tolist() for a in found["overlapped"]))) == [(50, 100, 0)]
    found = lanes([0, 50], [100, 150], [3, 2])  # an exchange starting under a compute set
    assert list(zip(*(a.tolist() for a in found["path"]))) == [(0, 100, 0), (100, 150, 1)]


def test_the_path_covers_every_busy_cycle_once():
    rng = np.random.default_rng(7)
    start = rng.integers(0, 10_000, 400)
    end = start + rng.integers(0, 300, 400)
    found = lanes(start, end, rng.integers(0, 4, 400))
    ps, pe, _pi = found["path"]
    assert np.all(ps[1:] >= pe[:-1])
    busy = np.zeros(10_400, dtype=bool)
    for s, e in zip(start, end):
        busy[s:e] = True
    assert int((pe - ps).sum()) == int(busy.sum())


def test_merging_keeps_the_type_with_the_most_cycles():
    start = np.array([0, 1, 2, 3])
    end = np.array([1, 2, 3, 100])
    start, end, kind, _step, count = merge_short(start, end, np.array([0, 1, 1, 2]), np.arange(4), 2, 0, 100)
    assert count.tolist() == [3, 1] and kind.tolist() == [1, 2] and end.tolist() == [3, 100]


# -- the matmul, drawn ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def matmul(tmp_path_factory):
    directory = tmp_path_factory.mktemp("mm")
    assert main(["simulate", *MATMUL, "-o", str(directory)]) == 0
    return directory / "profile.pop"


def _expected_shares(path: Path) -> dict[str, float]:
    """Each type's share of the run's cycles, from plain SQL: steps painted sync first, compute last, each rank in
    order of start, so a cycle shows the highest-ranked, latest step covering it."""
    with sqlite3.connect(path) as db:
        rows = db.execute(
            "SELECT s.type, b.cycles_base + b.all_cycles_from_min, b.cycles_base + b.all_cycles_to_max "
            "FROM steps s JOIN steps_by_ipu b ON b.step_id = s.id WHERE b.ipu = 0 ORDER BY s.id"
        ).fetchall()
    t0, t1 = min(r[1] for r in rows), max(r[2] for r in rows)
    owner = np.full(t1 - t0, "", dtype=object)
    rank = {"Sync": 0, "StreamCopyBegin": 1, "StreamCopyMid": 1, "StreamCopyEnd": 1, "OnTileExecute": 3}
    for kind, start, end in sorted(rows, key=lambda r: (rank.get(r[0], 2), r[1])):
        owner[start - t0 : end - t0] = kind
    kinds, counts = np.unique(owner, return_counts=True)
    return {str(k): 100 * int(c) / owner.size for k, c in zip(kinds, counts)}


def test_the_matmul_shares_are_those_of_its_steps(matmul):
    shares = _expected_shares(matmul)
    # 6,489 cycles: 3,752 computing, 2,213 exchanging, 491 in syncs, 33 copying streams
    assert shares["OnTileExecute"] == pytest.approx(100 * 3752 / 6489)
    assert shares["DoExchange"] == pytest.approx(100 * 2213 / 6489)
    assert shares["Sync"] == pytest.approx(100 * 491 / 6489)


def _colour(hex_colour: str) -> np.ndarray:
    return np.array([int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)])


def test_the_plot_shows_each_kind_for_its_share_of_the_run(matmul, tmp_path):
    pytest.importorskip("matplotlib")
    from matplotlib import image as mpimg

    from pva.analysis.plots import PATH_LANE, plot_timeline
    from pva.analysis.report_source import opened

    with opened(str(matmul)) as reader:
        figure = plot_timeline(reader)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, facecolor="white")
    pixels = mpimg.imread(io.BytesIO(buffer.getvalue()))[:, :, :3]
    ax = figure.axes[0]
    (x0, y), (x1, _y) = ax.transData.transform([(0, PATH_LANE[0] + PATH_LANE[1] / 2), (ax.get_xlim()[1], 0)])
    row = pixels[pixels.shape[0] - int(round(y)), int(round(x0)) : int(round(x1))]
    expected = _expected_shares(matmul)
    for kind, share in expected.items():
        drawn = np.all(np.abs(row - _colour(TYPE_COLOURS[kind])) < 0.02, axis=1).mean() * 100
        assert drawn == pytest.approx(share, abs=2), kind
    # the idle tiles' Sync is still there, in the overlapped lane below
    (_x, y_low) = ax.transData.transform([(2000, 0.29)])[0]
    below = pixels[pixels.shape[0] - int(round(y_low)), int(round(x0)) : int(round(x1))]
    assert (np.abs(below - 1).max(axis=1) > 0.05).mean() > 0.6


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js to run the page's script")
def test_the_html_page_fills_each_kind_for_its_share_of_the_run(matmul, tmp_path):
    page = html_report([str(matmul)])
    data = re.search(r'<script type="application/json" id="pva-data">(.*?)</script>', page, re.S).group(1)
    (tmp_path / "data.json").write_text(data, encoding="utf-8")
    script = ROOT / "pva" / "analysis" / "html" / "assets" / "report.js"
    done = subprocess.run(
        ["node", str(ROOT / "tests" / "support" / "page_canvas.js"), str(script), str(tmp_path / "data.json")]
        + ["timeline", "1", "1000"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    rects = json.loads(done.stdout)[0]["rects"]
    path = [r for r in rects if r[3] == 26]
    overlapped = [r for r in rects if r[3] == 8]
    left, right = min(r[0] for r in path), max(r[0] + r[2] for r in path)
    by_colour: dict[str, float] = {}
    for _x, _y, w, _h, colour, _alpha in path:
        by_colour[colour] = by_colour.get(colour, 0.0) + w
    for kind, share in _expected_shares(matmul).items():
        assert 100 * by_colour.get(TYPE_COLOURS[kind], 0.0) / (right - left) == pytest.approx(share, abs=2), kind
    # the rectangles of a lane never overlap, so none hides another
    for lane in (path, overlapped):
        spans = sorted((r[0], r[0] + r[2]) for r in lane)
        assert all(b[0] >= a[1] - 1e-6 for a, b in zip(spans, spans[1:]))
    assert {r[4] for r in overlapped} == {TYPE_COLOURS["Sync"]} and all(r[5] < 1 for r in overlapped)
    # the legend gives the same shares
    legend = re.findall(r"(OnTileExecute|DoExchange|Sync) \((\d+\.\d)%\)", page)
    assert dict(legend) == {"OnTileExecute": "57.8", "DoExchange": "34.1", "Sync": "7.6"}


@pytest.mark.parametrize("preset", ["matmul", "mnist-mlp", "bert-encoder", "large", "conv", "tutorial3"])
def test_the_drawn_shares_add_up_to_the_run_on_presets(preset, tmp_path):
    from test_simulator_presets import SMALL

    from formats.pop.reader import ProfileReader
    from pva.analysis.html import chart_data
    from simulator.presets import run_preset

    run_preset(preset, SMALL[preset], str(tmp_path), timestamp="2024-01-01T00:00:00Z")
    reader = ProfileReader(str(tmp_path / "profile.pop"))
    try:
        tl = chart_data.timeline(reader)
    finally:
        reader.close()
    assert sum(share for _name, share in chart_data.timeline_shares(tl)) == pytest.approx(100.0)
    for ipu in tl["ipus"]:
        run = ipu["end_cycle"] - ipu["first_cycle"]
        assert int(ipu["cycles_by_type"].sum()) + ipu["idle_cycles"] == run
        # the path's segments never overlap
        assert np.all(ipu["start"][1:] >= ipu["end"][:-1])
