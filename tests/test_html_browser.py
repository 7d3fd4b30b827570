"""End to end: `pva html` pages opened in headless Chromium (Debian's /usr/bin/chromium, no network).

For each input (the sample report, a simulated report, a report converted from a legacy Poplar
JSON profile) the page is written with `pva html`, a probe script is put first in its <head>, and
Chromium dumps the DOM after running it. The probe records every console error or warning,
uncaught exception, failed promise and refused resource, measures the coloured pixels of every
chart, and tries the controls (timeline zoom, table sort, tree unfolding, memory scale). The
tests assert that nothing went wrong, that every chart drew, and that the summary card shows
the report's numbers (computed here with plain SQL); then they save a screenshot.

Set PVA_UPDATE_SCREENSHOTS=1 to also write docs/images/html-report.png (the README's picture)
from the simulated report. Set CHROMIUM to use another Chromium binary.
"""

from __future__ import annotations

import html.parser
import json
import os
import pathlib
import shutil
import sqlite3
import subprocess
import sys
import tempfile

import pytest
from test_html_report import MEDIUM_IPUS, MEDIUM_OOM_TILES, MEDIUM_TILES_PER_IPU, write_medium_report

from pva.analysis.html import Limits, html_report
from pva.cli import command_modules

ROOT = pathlib.Path(__file__).resolve().parents[1]
SIMULATED_PRESET = "mnist-mlp"


def _find_chromium() -> str | None:
    for candidate in (
        os.environ.get("CHROMIUM"),
        "/usr/bin/chromium",
        shutil.which("chromium"),
        shutil.which("chromium-browser"),
    ):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


CHROMIUM = _find_chromium()
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="Chromium is not installed: the HTML browser test needs headless Chromium (Debian: apt-get install "
    "--no-install-recommends chromium; or set CHROMIUM to its path)",
)

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--mute-audio",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--hide-scrollbars",
]

#: Put first in the page's <head>: records problems and probes the charts once the page is ready.
PROBE = """<script>(function () {
  var root = document.documentElement, errors = [];
  function record(kind, message) {
    errors.push(kind + ": " + message);
    root.setAttribute("data-test-errors", JSON.stringify(errors));
  }
  root.setAttribute("data-test-errors", "[]");
  window.addEventListener("error", function (e) {
    if (e.target && e.target !== window) record("resource", e.target.src || e.target.href || e.target.tagName);
    else record("uncaught", e.message + " at " + e.filename + ":" + e.lineno);
  }, true);
  window.addEventListener("unhandledrejection", function (e) { record("unhandled rejection", String(e.reason)); });
  document.addEventListener("securitypolicyviolation", function (e) {
    record("refused by the content security policy", e.violatedDirective + " " + e.blockedURI);
  });
  ["error", "warn"].forEach(function (level) {
    var original = console[level];
    console[level] = function () {
      record("console." + level, Array.prototype.map.call(arguments, String).join(" "));
      return original.apply(console, arguments);
    };
  });
  function colouredFraction(canvas) {
    var data = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data, n = 0;
    for (var i = 0; i < data.length; i += 4) {
      var hi = Math.max(data[i], data[i + 1], data[i + 2]), lo = Math.min(data[i], data[i + 1], data[i + 2]);
      if (hi - lo > 40) n++;
    }
    return n / (canvas.width * canvas.height);
  }
  function set(name, value) { root.setAttribute("data-test-" + name, JSON.stringify(value)); }
  function step(name, fn) { try { fn(); } catch (err) { record("probe " + name, String(err && err.stack || err)); } }
  function probe() {
    if (root.getAttribute("data-pva-ready") !== "1") { setTimeout(probe, 25); return; }
    document.querySelectorAll("canvas").forEach(function (c) {
      c.setAttribute("data-test-coloured", String(colouredFraction(c)));
    });
    step("timeline", function () {
      var c = document.querySelector('canvas[data-chart="timeline"]');
      if (!c) return;
      var before = [+c.dataset.viewLo, +c.dataset.viewHi], r = c.getBoundingClientRect();
      c.dispatchEvent(new WheelEvent("wheel", { deltaY: -240, clientX: r.left + r.width / 2,
                                               clientY: r.top + r.height / 2, bubbles: true, cancelable: true }));
      var zoomed = [+c.dataset.viewLo, +c.dataset.viewHi];
      c.parentElement.querySelector('button[data-action="zoom-in"]').click();
      var button = [+c.dataset.viewLo, +c.dataset.viewHi];
      c.dispatchEvent(new MouseEvent("dblclick", { bubbles: true }));
      set("zoom", { before: before, wheel: zoomed, button: button, reset: [+c.dataset.viewLo, +c.dataset.viewHi],
                    marks: +c.dataset.marks });
    });
    step("sort", function () {
      var table = document.querySelector("table.compute-sets");
      if (!table) return;
      var names = function () { return Array.from(table.tBodies[0].rows).map(function (tr) {
        return tr.cells[0].textContent; }); };
      table.tHead.rows[0].cells[0].click();
      var byName = names();
      var cycles = function () { return Array.from(table.tBodies[0].rows).map(function (tr) {
        return +tr.cells[2].dataset.value; }); };
      table.tHead.rows[0].cells[2].click();
      var first = [cycles(), table.tHead.rows[0].cells[2].getAttribute("aria-sort")];
      table.tHead.rows[0].cells[2].click();
      var second = [cycles(), table.tHead.rows[0].cells[2].getAttribute("aria-sort")];
      set("sort", { by_name: byName, first: first, second: second });
    });
    step("memory scale", function () {
      var button = document.querySelector('.memory-scale button[data-scale="data"]');
      if (!button) return;
      button.click();
      var scales = Array.from(document.querySelectorAll('canvas[data-chart="memory"]')).map(function (c) {
        return c.dataset.scale; });
      set("scale", scales);
    });
    var tree = document.querySelector(".tree[data-report]"), closed = null, nodes = 0;
    step("tree", function () {
      if (!tree) return;
      nodes = +tree.dataset.nodes;
      closed = tree.querySelector("details:not([open])");
      if (closed) closed.open = true;
    });
    setTimeout(function () {
      step("tree", function () {
        if (tree) set("tree", { before: nodes, after: +tree.dataset.nodes, opened: !!closed,
                               open_details: tree.querySelectorAll("details[open]").length });
      });
      root.setAttribute("data-test-done", "1");
    }, 100);
  }
  window.addEventListener("load", function () { setTimeout(probe, 0); });
})();</script>"""


class _Dom(html.parser.HTMLParser):
    """The parts of the dumped DOM the tests look at."""

    def __init__(self) -> None:
        super().__init__()
        self.root: dict[str, str] = {}
        self.canvases: list[dict[str, str]] = []
        self.cards: list[dict[str, tuple[str, str]]] = []
        self.trees: list[dict[str, str]] = []
        self.downsampled: list[str] = []
        self._dd: tuple[dict, str] | None = None

    def handle_starttag(self, tag, attrs):
        a = {k: v or "" for k, v in attrs}
        classes = a.get("class", "").split()
        if tag == "html":
            self.root = a
        elif tag == "canvas":
            self.canvases.append(a)
        elif tag == "div" and "summary" in classes and "card" in classes:
            self.cards.append({})
        elif tag == "div" and "kv" in classes and self.cards:
            self._dd = (a, "")
        elif tag == "div" and "tree" in classes:
            self.trees.append(a)
        if "data-downsampled" in a:
            self.downsampled.append(a["data-downsampled"])

    def handle_data(self, data):
        if self._dd is not None:
            self._dd = (self._dd[0], self._dd[1] + " " + data)

    def handle_endtag(self, tag):
        if tag == "div" and self._dd is not None:
            attrs, text = self._dd
            self.cards[-1][attrs["data-key"]] = (attrs.get("data-value", ""), " ".join(text.split()))
            self._dd = None


def _chromium(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    profile = tempfile.mkdtemp(prefix="pva-test-chromium-")
    try:
        return subprocess.run(
            [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True, text=True, timeout=timeout
        )
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def open_page(page: pathlib.Path) -> _Dom:
    """Open `page` (with the probe) in headless Chromium and parse the DOM it leaves."""
    probed = page.with_name(page.stem + ".probe.html")
    text = page.read_text(encoding="utf-8")
    assert text.count("<head>") == 1
    probed.write_text(text.replace("<head>", "<head>" + PROBE, 1), encoding="utf-8")
    result = _chromium("--window-size=1280,1000", "--virtual-time-budget=30000", "--dump-dom", probed.as_uri())
    assert "<html" in result.stdout, f"Chromium returned no page (status {result.returncode}):\n{result.stderr[-3000:]}"
    dom = _Dom()
    dom.feed(result.stdout)
    assert dom.root.get("data-test-done") == "1", f"the probe did not finish: {dom.root}"
    return dom


def screenshot(page: pathlib.Path, out: pathlib.Path, height: int = 2300) -> pathlib.Path:
    result = _chromium(
        f"--window-size=1280,{height}", "--virtual-time-budget=10000", f"--screenshot={out}", page.as_uri()
    )
    assert out.exists(), f"no screenshot (status {result.returncode}):\n{result.stderr[-3000:]}"
    return out


def _assert_not_blank_png(path: pathlib.Path, width: int) -> None:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and 20_000 < len(data) < 8_000_000
    image = pytest.importorskip("PIL.Image").open(path).convert("RGB")
    assert image.size[0] == width
    colours = image.getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 50  # text, charts and cards, not a blank page


# -- inputs ---------------------------------------------------------------------------------------


def _pva(*args: str) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", "pva", *args], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, f"pva {' '.join(args)} failed:\n{result.stderr}"
    return result


def _sample_input(request, tmp: pathlib.Path) -> pathlib.Path:
    return pathlib.Path(request.getfixturevalue("sample").path)


def _simulated_input(request, tmp: pathlib.Path) -> pathlib.Path:
    """A report of the simulator's MNIST training loop (tutorial 5 style) on one Mk2 IPU."""
    out = tmp / "simulated"
    if "simulate" in command_modules():
        _pva("simulate", "--preset", SIMULATED_PRESET, "-o", str(out))
    else:  # `pva simulate` is not in this tree yet: run the same preset through the simulator's API
        presets = pytest.importorskip("simulator.presets")
        presets.run_preset(SIMULATED_PRESET, {}, directory=str(out))
    (report,) = sorted(out.rglob("*.pop"))
    return report


def _converted_input(request, tmp: pathlib.Path) -> pathlib.Path:
    """A report converted by `pva convert` from a legacy (v1) Poplar JSON graph and execution profile."""
    if "convert" not in command_modules():
        pytest.skip("pva convert is not in this tree")
    legacy = pytest.importorskip("legacy_builders")
    graph = legacy.complete_graph_profile(num_ipus=2, tiles_per_ipu=16)
    source = tmp / "legacy.json"
    source.write_text(
        json.dumps({"graphProfile": graph, "executionProfile": legacy.execution_profile(graph, "IPU_MODEL")}),
        encoding="utf-8",
    )
    report = tmp / "converted.pop"
    _pva("convert", str(source), "-o", str(report))
    return report


INPUTS = {"sample": _sample_input, "simulated": _simulated_input, "converted": _converted_input}


def _expected_summary(path: pathlib.Path) -> dict[str, float]:
    """The summary card's figures computed with plain SQL on the report."""
    con = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    try:
        one = lambda sql: con.execute(sql).fetchone()[0]  # noqa: E731
        target = dict(
            zip(
                ("num_ipus", "tiles_per_ipu", "num_tiles", "bytes_per_tile", "num_replicas", "clock"),
                con.execute(
                    "SELECT num_ipus, tiles_per_ipu, num_tiles, bytes_per_tile, num_replicas, "
                    "clock_frequency FROM target"
                ).fetchone(),
            )
        )
        graph = dict(
            zip(
                ("num_vertices", "num_edges", "num_vars", "num_compute_sets"),
                con.execute("SELECT num_vertices, num_edges, num_vars, num_compute_sets FROM graph").fetchone(),
            )
        )
        cycles = one(
            'SELECT coalesce(sum(l), 0) FROM (SELECT max("end" - start) AS l FROM run_cycles_by_ipu GROUP BY run)'
        )
        always = one("SELECT coalesce(sum(always_live_bytes), 0) FROM memory_by_tile")
        peak = one("SELECT coalesce(max(not_always_live_bytes), 0) FROM liveness_steps")
        expected = {f"target.{k}": v for k, v in target.items() if k != "clock"}
        expected.update({f"graph.{k}": v for k, v in graph.items()})
        expected.update(
            {
                "execution.total_cycles": cycles,
                "execution.microseconds": cycles / target["clock"] * 1e6,
                "execution.steps": one("SELECT count(*) FROM steps"),
                "execution.runs": one("SELECT count(*) FROM runs"),
                "memory.including_gaps": one("SELECT coalesce(sum(total_including_gaps), 0) FROM memory_by_tile"),
                "memory.excluding_gaps": one("SELECT coalesce(sum(total), 0) FROM memory_by_tile"),
                "memory.tiles_out_of_memory": one(
                    f"SELECT count(*) FROM memory_by_tile WHERE total_including_gaps > {target['bytes_per_tile']}"
                ),
                "liveness.always_live_bytes": always,
                "liveness.peak_not_always_live_bytes": peak,
                "liveness.max_live_bytes": always + peak,
            }
        )
        expected["_ipus_per_replica"] = one("SELECT ipus_per_replica FROM target")
        expected["_memory_rows"] = one("SELECT count(*) FROM memory_by_tile")
        expected["_liveness_steps"] = one("SELECT count(*) FROM liveness_steps")
        expected["_profiled_steps"] = one("SELECT count(*) FROM steps_by_ipu WHERE profiled = 1")
        expected["_vertex_cycles"] = one("SELECT count(*) FROM step_vertex_cycles") + one(
            "SELECT count(*) FROM compute_set_vertices v JOIN steps s ON s.compute_set = v.compute_set "
            "WHERE v.estimated_cycles > 0"
        )
        return expected
    finally:
        con.close()


def _assert_healthy(dom: _Dom) -> None:
    assert json.loads(dom.root["data-test-errors"]) == []
    assert dom.root.get("data-pva-ready") == "1" and dom.root.get("data-pva-failures") == "0"
    for canvas in dom.canvases:
        what = f"{canvas['data-chart']} chart of report {canvas['data-report']}"
        assert canvas.get("data-drawn") == "1", what
        assert int(canvas["data-marks"]) > 0, what
        assert float(canvas["data-test-coloured"]) > 0.004, f"{what} is blank"


def _assert_summary(card: dict[str, tuple[str, str]], expected: dict[str, float]) -> None:
    for key, value in expected.items():
        if key.startswith("_"):
            continue
        shown_value, text = card[key]
        if key == "execution.microseconds":
            assert float(shown_value) == pytest.approx(value, rel=1e-9), key
            if expected["execution.runs"]:
                assert f"{value:,.1f} \u00b5s" in text, (key, text)
        else:
            assert int(shown_value) == value, key
            assert f"{int(value):,}" in text, (key, text)


# -- tests ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(INPUTS))
def test_report_page_in_chromium(name, request, tmp_path):
    report = INPUTS[name](request, tmp_path)
    page = tmp_path / f"{name}.html"
    _pva("html", str(report), "-o", str(page))
    dom = open_page(page)
    _assert_healthy(dom)
    expected = _expected_summary(report)
    (card,) = dom.cards
    _assert_summary(card, expected)

    charts = [c["data-chart"] for c in dom.canvases]
    assert charts.count("memory") == (expected["_ipus_per_replica"] if expected["_memory_rows"] else 0)
    assert charts.count("liveness") == (1 if expected["_liveness_steps"] else 0)
    assert charts.count("timeline") == (1 if expected["_profiled_steps"] else 0)
    assert charts.count("vertex-types") == (1 if expected["_vertex_cycles"] else 0)
    assert len(dom.trees) == 1 and int(dom.trees[0]["data-nodes"]) > 0

    if expected["_profiled_steps"]:
        zoom = json.loads(dom.root["data-test-zoom"])
        (lo0, hi0), (lo1, hi1), (lo2, hi2), reset = zoom["before"], zoom["wheel"], zoom["button"], zoom["reset"]
        assert hi1 - lo1 < hi0 - lo0 and hi2 - lo2 < hi1 - lo1 and reset == [lo0, hi0]
    sort = json.loads(dom.root["data-test-sort"])
    assert sort["by_name"] == sorted(sort["by_name"], key=str.lower, reverse=True)
    assert sort["first"] == [sorted(sort["first"][0], reverse=True), "descending"]
    assert sort["second"] == [sorted(sort["first"][0]), "ascending"]
    tree = json.loads(dom.root["data-test-tree"])
    if tree["opened"]:
        assert tree["after"] > tree["before"]
    if expected["_memory_rows"]:
        assert json.loads(dom.root["data-test-scale"]) == ["data"] * expected["_ipus_per_replica"]

    shot = screenshot(page, tmp_path / f"{name}.png")
    _assert_not_blank_png(shot, 1280)
    if name == "simulated" and os.environ.get("PVA_UPDATE_SCREENSHOTS") == "1":
        _save_readme_image(shot)


def _save_readme_image(shot: pathlib.Path) -> None:
    """docs/images/html-report.png: the top of the page, reduced to a palette to stay small."""
    image_module = pytest.importorskip("PIL.Image")
    image = image_module.open(shot).convert("RGB")
    image = image.crop((0, 0, image.size[0], min(image.size[1], 2300)))
    image = image.quantize(colors=256, method=image_module.Quantize.MEDIANCUT, dither=image_module.Dither.NONE)
    target = ROOT / "docs" / "images" / "html-report.png"
    target.parent.mkdir(parents=True, exist_ok=True)
    image.save(target, optimize=True)
    assert target.stat().st_size < 1_000_000


def test_compare_page_in_chromium(sample, compile_only, tmp_path):
    page = tmp_path / "compare.html"
    _pva("html", sample.path, compile_only.path, "--compare", "-o", str(page))
    dom = open_page(page)
    _assert_healthy(dom)
    assert [c["data-report"] for c in dom.canvases if c["data-chart"] == "memory"] == ["0", "0", "1", "1"]
    assert {c["data-report"] for c in dom.canvases if c["data-chart"] == "timeline"} == {"0"}
    a, b = dom.cards
    expected_a = _expected_summary(pathlib.Path(sample.path))
    expected_b = _expected_summary(pathlib.Path(compile_only.path))
    _assert_summary(a, expected_a)
    _assert_summary(b, expected_b)
    cycles_a = expected_a["execution.total_cycles"]
    assert b["execution.total_cycles"][1] == f"Total cycles 0 {-cycles_a:+,} (-100.0%)"  # B's change from A
    assert len(dom.trees) == 2
    screenshot(page, tmp_path / "compare.png", height=1400)


def test_large_compressed_page_in_chromium(tmp_path):
    """A 2-IPU report with 2,944 tiles and 3,000 steps: downsampled, deflated data, out-of-memory marks."""
    report = write_medium_report(tmp_path / "medium.pop")["path"]
    page = tmp_path / "medium.html"
    page.write_text(html_report([report], compress=True, limits=Limits(timeline_resolution=500)), encoding="utf-8")
    assert 'data-encoding="deflate-base64"' in page.read_text(encoding="utf-8")
    dom = open_page(page)
    _assert_healthy(dom)
    memory = [c for c in dom.canvases if c["data-chart"] == "memory"]
    assert len(memory) == MEDIUM_IPUS
    bucket = -(-MEDIUM_TILES_PER_IPU // 512)  # tiles per bar: 1,472 tiles in at most 512 bars
    marked_bars = {(t // MEDIUM_TILES_PER_IPU, t % MEDIUM_TILES_PER_IPU // bucket) for t in MEDIUM_OOM_TILES}
    assert sum(int(c["data-oom-marks"]) for c in memory) == len(marked_bars) == 4
    assert sorted(dom.downsampled) == ["liveness", "memory", "timeline"]
    _assert_summary(dom.cards[0], _expected_summary(pathlib.Path(report)))
    assert dom.cards[0]["memory.tiles_out_of_memory"][0] == str(len(MEDIUM_OOM_TILES))
    _assert_not_blank_png(screenshot(page, tmp_path / "medium.png", height=1600), 1280)


#: Put first in the page's <head>: where every chart is, and whether it is drawn, at the load event itself
#: (no timers and no virtual time: what a print, a PDF or a screenshot taken at load would show).
AT_LOAD = """<script>window.addEventListener("load", function () {
  var found = [];
  document.querySelectorAll("canvas").forEach(function (c) {
    var r = c.getBoundingClientRect();
    found.push({chart: c.dataset.chart, x: r.left + window.scrollX, y: r.top + window.scrollY, w: r.width,
                h: r.height, drawn: c.dataset.drawn || ""});
  });
  document.documentElement.setAttribute("data-test-at-load", JSON.stringify(found));
  var memory = Array.from(document.querySelectorAll('canvas[data-chart="memory"]'));
  var legend = document.querySelector(".legend-gaps");
  var gaps = {before: memory.map(function (c) { return c.dataset.gaps; }), legend_before: !legend.hidden};
  var button = document.querySelector('.memory-gaps button[data-gaps="including"]');
  if (button) button.click();
  gaps.after = memory.map(function (c) { return c.dataset.gaps; });
  gaps.legend_after = !legend.hidden;
  document.documentElement.setAttribute("data-test-gaps", JSON.stringify(gaps));
});</script>"""


def test_charts_are_complete_when_the_page_loads(tmp_path):
    """Issue 15 item 9: the deflated page draws its charts before the load event, so a screenshot taken
    without a virtual-time budget shows them."""
    report = write_medium_report(tmp_path / "medium.pop")["path"]
    page = tmp_path / "medium.html"
    page.write_text(html_report([report], compress=True, limits=Limits(timeline_resolution=500)), encoding="utf-8")
    text = page.read_text(encoding="utf-8")
    assert 'data-encoding="deflate-base64"' in text
    probed = tmp_path / "medium.at-load.html"
    probed.write_text(text.replace("<head>", "<head>" + AT_LOAD, 1), encoding="utf-8")
    height = 1600
    result = _chromium(f"--window-size=1280,{height}", "--dump-dom", probed.as_uri())
    dom = _Dom()
    dom.feed(result.stdout)
    charts = json.loads(dom.root["data-test-at-load"])
    assert {c["chart"] for c in charts} >= {"memory", "liveness", "timeline"}
    assert all(c["drawn"] == "1" for c in charts), charts
    # memory is drawn excluding gaps until the toggle asks for them (issue 15 item 8)
    gaps = json.loads(dom.root["data-test-gaps"])
    assert gaps == {
        "before": ["excluding"] * MEDIUM_IPUS,
        "after": ["including"] * MEDIUM_IPUS,
        "legend_before": False,
        "legend_after": True,
    }
    out = tmp_path / "at-load.png"
    result = _chromium(f"--window-size=1280,{height}", f"--screenshot={out}", page.as_uri())
    assert out.exists(), f"no screenshot (status {result.returncode}):\n{result.stderr[-3000:]}"
    image = pytest.importorskip("PIL.Image").open(out).convert("RGB")
    visible = [c for c in charts if c["y"] + c["h"] <= image.size[1] and c["w"] > 0]
    assert any(c["chart"] == "memory" for c in visible)
    for chart in visible:
        box = (int(chart["x"]), int(chart["y"]), int(chart["x"] + chart["w"]), int(chart["y"] + chart["h"]))
        import numpy as np

        pixels = np.asarray(image.crop(box), dtype=np.int16).reshape(-1, 3)
        coloured = int(((pixels.max(axis=1) - pixels.min(axis=1)) > 40).sum())
        assert coloured / len(pixels) > 0.01, (chart, coloured)
