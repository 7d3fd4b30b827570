"""pva html: the chart data read from a report, the self-contained page, and the command's errors.

The browser end-to-end test is in test_html_browser.py; it reuses `write_medium_report` below.
"""

from __future__ import annotations

import base64
import html.parser
import json
import math
import os
import re
import subprocess
import sys
import zlib

import numpy as np
import pytest
from reportbuilder import BYTES_PER_TILE, TILES_PER_IPU

from formats.pop.reader import ProfileReader
from formats.pop.writer import ProfileWriter
from pva.analysis.compare import compare
from pva.analysis.html import Limits, chart_data, html_report
from pva.analysis.html.render import render_page
from pva.analysis.summary import live_variables_by_step, summary_data
from pva.compilation import CATEGORIES

# -- a medium-sized report: two Mk2 IPUs, enough tiles and steps to be downsampled ----------------

MEDIUM_TILES_PER_IPU = 1472
MEDIUM_IPUS = 2
MEDIUM_OOM_TILES = (100, 101, 1800, 2000, 2943)
MEDIUM_LIVENESS_STEPS = 3000
MEDIUM_PEAK_STEP = 2222
MEDIUM_STEPS = 3000
_MEDIUM_KINDS = (
    "StreamCopyBegin",
    "StreamCopyMid",
    "StreamCopyEnd",
    "DoExchange",
    "OnTileExecute",
    "Sync",
    "OnTileExecute",
    "DoExchange",
    "OnTileExecute",
    "GlobalExchange",
)
_MEDIUM_CATEGORIES = (
    "variable",
    "vertexCode",
    "controlCode",
    "internalExchangeCode",
    "vertexInstanceState",
    "constant",
    "stack",
    "message",
    "copyDescriptor",
    "outputEdge",
)


def write_medium_report(path, seed: int = 11) -> dict:
    """A plausible two-IPU report (memory, liveness, programs, 3,000 steps); returns what the tests check."""
    rng = np.random.default_rng(seed)
    tiles = MEDIUM_IPUS * MEDIUM_TILES_PER_IPU
    names = list(CATEGORIES)
    tile_axis = np.arange(tiles)
    with ProfileWriter(path, producer="pva-tests", producer_version="1", poplar_version="3.1.0 (tests)") as w:
        w.set_target(
            num_ipus=MEDIUM_IPUS,
            tiles_per_ipu=MEDIUM_TILES_PER_IPU,
            bytes_per_tile=BYTES_PER_TILE,
            type="IpuModel",
            architecture="Ipu2",
        )
        w.set_graph(num_compute_sets=60, num_edges=12_345, num_vars=678, num_vertices=9_876)
        w.insert("var_categories", ("id", "name", "description"), [(i, n, CATEGORIES[n]) for i, n in enumerate(names)])
        per_tile = np.zeros((tiles, 6 * len(names)), dtype=np.uint64)
        wave = 1 + 0.5 * np.sin(tile_axis / 97.0) + 0.25 * np.cos(tile_axis / 13.0)
        for k, name in enumerate(_MEDIUM_CATEGORIES):
            size = (120_000 // (k + 1.6)) * wave * rng.uniform(0.8, 1.2, size=tiles)
            per_tile[:, 6 * names.index(name) + 2] = size.astype(np.uint64)
        per_tile[:, 6 * names.index("vertexCode")] = 9_000  # interleaved
        per_tile[list(MEDIUM_OOM_TILES), 6 * names.index("variable") + 2] += BYTES_PER_TILE
        total = per_tile.sum(axis=1).astype(np.int64)
        gaps = rng.integers(0, 6_000, size=tiles)
        including = total + gaps
        w.insert(
            "memory_by_tile",
            (
                "tile",
                "total",
                "total_including_gaps",
                "interleaved",
                "interleaved_including_gaps",
                "non_interleaved",
                "non_interleaved_including_gaps",
                "overflowed",
                "overflowed_including_gaps",
                "always_live_bytes",
                "not_always_live_bytes",
            ),
            [
                (
                    t,
                    int(total[t]),
                    int(including[t]),
                    9_000,
                    9_000,
                    int(total[t]) - 9_000,
                    int(including[t]) - 9_000,
                    0,
                    0,
                    int(total[t]) // 3,
                    int(total[t]) - int(total[t]) // 3,
                )
                for t in range(tiles)
            ],
        )
        w.matrix("memory_category_by_tile").append(per_tile)

        # programs: root Sequence of blocks, each a Sequence of work; a Repeat; a Call of the function
        programs = [(0, "Sequence", "", None, None, None)]
        children = []
        cs_names = [f"model/layer{c // 6}/{('fwd', 'bwd', 'update')[c % 3]}/conv{c}" for c in range(60)]
        w.insert(
            "compute_sets",
            ("compute_set", "name", "num_vertices", "estimated_cycles_max", "estimated_cycles_total"),
            [(c, cs_names[c], 100 + c, 400 + 37 * c, (400 + 37 * c) * 900) for c in range(60)],
        )
        w.insert(
            "vertex_types", ("id", "name"), [(v, f"poplin::ConvPartial1x1Out<half,float,true,{v}>") for v in range(12)]
        )
        w.insert(
            "compute_set_vertices",
            ("id", "compute_set", "vertex_type", "count", "estimated_cycles"),
            [(c, c, c % 12, 100 + c, 50) for c in range(60)],
        )
        for block in range(20):
            seq = len(programs)
            programs.append((seq, "Sequence", f"block{block}", None, None, None))
            children.append((0, block, seq))
            for k, kind in enumerate(("DoExchange", "OnTileExecute", "Sync", "OnTileExecute")):
                pid = len(programs)
                cs = (block * 3 + k) % 60 if kind == "OnTileExecute" else None
                programs.append(
                    (pid, kind, f"block{block}/{kind.lower()}{k}" if kind != "OnTileExecute" else "", cs, None, None)
                )
                children.append((seq, k, pid))
        repeat = len(programs)
        programs.append((repeat, "Repeat", "loop", None, 4, None))
        children.append((0, 20, repeat))
        children.append((repeat, 0, 1))
        function = len(programs)
        programs.append((function, "Sequence", "function", None, None, None))
        call = len(programs)
        programs.append((call, "Call", "", None, None, function))
        children.append((0, 21, call))
        children.append((function, 0, 3))
        w.insert("programs", ("id", "type", "name", "compute_set", "repeat_count", "call_target"), programs)
        w.insert("program_children", ("parent", "position", "child"), children)
        w.insert("control_programs", ("position", "program"), [(0, 0)])
        w.insert("function_programs", ("position", "program"), [(0, function)])

        # liveness: a smooth curve with one clear peak, and classes of variables live around it
        steps = np.arange(MEDIUM_LIVENESS_STEPS)
        curve = (40e6 + 25e6 * np.sin(steps / 300.0) ** 2 + 5e6 * steps / MEDIUM_LIVENESS_STEPS).astype(np.int64)
        curve[MEDIUM_PEAK_STEP] = int(curve.max()) + 7_000_000
        w.insert(
            "liveness_steps",
            ("id", "program", "parent", "depth", "not_always_live_bytes"),
            [
                (int(s), 1 + int(s) % (len(programs) - 1), None if s == 0 else 0, 0 if s == 0 else 1, int(curve[s]))
                for s in steps
            ],
        )
        w.insert("variables", ("id", "name"), [(v, f"model/layer{v}/activations") for v in range(30)])
        w.insert(
            "equivalence_class_steps",
            ("class", "start", "end"),
            [(c, MEDIUM_PEAK_STEP - 50 * c, MEDIUM_PEAK_STEP + 1 + 10 * c) for c in range(30)],
        )
        w.insert(
            "vars_info",
            ("id", "tile", "name", "size_bytes", "category", "equivalence_class", "unlowered_var"),
            [
                (i, i % tiles, f"act{i}", 1024 * (1 + i % 30), names.index("variable"), i % 30, i % 30)
                for i in range(900)
            ],
        )

        # execution: two runs; each IPU's steps follow one another on its own cycle counter
        half = MEDIUM_STEPS // 2
        w.insert(
            "runs",
            ("id", "name", "first_step", "num_steps"),
            [(0, "warm-up", 0, half), (1, "main", half, MEDIUM_STEPS - half)],
        )
        kinds = [_MEDIUM_KINDS[s % len(_MEDIUM_KINDS)] for s in range(MEDIUM_STEPS)]
        ote_programs = [p for p in programs if p[1] == "OnTileExecute"]
        step_rows = []
        for s, kind in enumerate(kinds):
            if kind == "OnTileExecute":
                prog = ote_programs[s % len(ote_programs)]
                step_rows.append((s, int(s >= half), kind, prog[0], prog[3]))
            else:
                step_rows.append((s, int(s >= half), kind, None, None))
        w.insert("steps", ("id", "run", "type", "program", "compute_set"), step_rows)
        lengths = rng.integers(50, 3_000, size=(MEDIUM_STEPS, MEDIUM_IPUS))
        lengths[MEDIUM_STEPS // 3] = 400_000  # one long step
        clock = np.zeros(MEDIUM_IPUS, dtype=np.int64) + 1_000
        base = clock.copy()
        by_ipu = []
        for s in range(MEDIUM_STEPS):
            if s == half:
                base = clock.copy()
            for ipu in range(MEDIUM_IPUS):
                frm = int(clock[ipu] - base[ipu])
                n = int(lengths[s, ipu])
                window = (frm, frm + 5, frm + 2, frm + n // 2, frm + n, frm + 3 * n // 4)
                by_ipu.append((s, ipu, n * 1000, 1000, int(base[ipu]), *window, *window, n))
                clock[ipu] += n
        w.insert(
            "steps_by_ipu",
            (
                "step_id",
                "ipu",
                "cycles",
                "active_tiles",
                "cycles_base",
                "all_cycles_from_min",
                "all_cycles_from_max",
                "all_cycles_from_avg",
                "all_cycles_to_min",
                "all_cycles_to_max",
                "all_cycles_to_avg",
                "active_cycles_from_min",
                "active_cycles_from_max",
                "active_cycles_from_avg",
                "active_cycles_to_min",
                "active_cycles_to_max",
                "active_cycles_to_avg",
                "tile_cycles_max",
            ),
            by_ipu,
        )
        w.insert(
            "run_cycles_by_ipu",
            ("run", "ipu", "start", "end"),
            [(0, i, 1_000, int(base[i])) for i in range(MEDIUM_IPUS)]
            + [(1, i, int(base[i]), int(clock[i])) for i in range(MEDIUM_IPUS)],
        )
        w.insert(
            "step_vertex_cycles",
            ("step_id", "compute_set", "vertex_type", "count", "cycles"),
            [
                (s, r[4], r[4] % 12, 10, int(lengths[s, 0]) * 6)
                for s, r in enumerate(step_rows)
                if r[2] == "OnTileExecute"
            ],
        )
    return {"path": os.fspath(path), "including": including, "per_tile": per_tile, "curve": curve, "lengths": lengths}


@pytest.fixture(scope="module")
def medium(tmp_path_factory):
    return write_medium_report(tmp_path_factory.mktemp("medium") / "medium.pop")


@pytest.fixture
def sample_reader(sample):
    reader = ProfileReader(sample.path)
    yield reader
    reader.close()


# -- chart data -------------------------------------------------------------------------------


def test_summary_figures_are_the_reports(sample, sample_reader):
    s = chart_data.summary(sample_reader)
    assert s["source"] == "profile.pop"
    assert s["target"]["num_ipus"] == 2 and s["target"]["num_tiles"] == 8
    assert s["graph"] == {"num_compute_sets": 3, "num_edges": 40, "num_vars": 12, "num_vertices": 20}
    run_lengths = {}
    for run, _ipu, start, end in sample.rows("run_cycles_by_ipu"):
        run_lengths[run] = max(run_lengths.get(run, 0), end - start)
    assert s["execution"]["total_cycles"] == sum(run_lengths.values())
    assert s["execution"]["microseconds"] == pytest.approx(sum(run_lengths.values()) / 1330)
    assert s["memory"]["including_gaps"] == sum(r[2] for r in sample.rows("memory_by_tile"))
    assert s["producer"] == "pva-tests 1"


def test_memory_stacks_add_up_to_each_tiles_memory_including_gaps(sample, sample_reader):
    mem = chart_data.memory(sample_reader)
    assert mem["limit"] == BYTES_PER_TILE and mem["bucket"] == 1 and not mem["downsampled"]
    assert len(mem["ipus"]) == 2
    including = {r[0]: r[2] for r in sample.rows("memory_by_tile")}
    for ipu in mem["ipus"]:
        stacked = np.sum(ipu["series"], axis=0)
        tiles = range(ipu["first_tile"], ipu["first_tile"] + TILES_PER_IPU)
        assert stacked.tolist() == [including[t] for t in tiles]
        assert ipu["oom_count"] == 0
    # categories are stacked largest first, and the gaps (64 bytes per tile number) come last
    per_category = sample.matrix("memory_category_by_tile").reshape(8, -1, 6).sum(axis=2).sum(axis=0)
    largest = list(CATEGORIES)[int(np.argmax(per_category))]
    assert mem["names"][0] == largest
    assert mem["names"][-1] == "gaps"
    assert [int(v) for v in mem["ipus"][1]["series"][-1]] == [64 * t for t in range(4, 8)]


def test_memory_is_downsampled_per_ipu_and_keeps_every_out_of_memory_tile(medium):
    reader = ProfileReader(medium["path"])
    try:
        mem = chart_data.memory(reader, Limits(max_tiles=512))
    finally:
        reader.close()
    assert mem["bucket"] == 3 and mem["downsampled"]
    assert mem["tiles_out_of_memory"] == len(MEDIUM_OOM_TILES)
    including = medium["including"]
    for ipu in mem["ipus"]:
        lo = ipu["first_tile"]
        part = including[lo : lo + MEDIUM_TILES_PER_IPU]
        assert len(ipu["max"]) == math.ceil(MEDIUM_TILES_PER_IPU / 3)
        assert ipu["max"].tolist() == [int(part[i : i + 3].max()) for i in range(0, MEDIUM_TILES_PER_IPU, 3)]
        expected_oom = [t for t in MEDIUM_OOM_TILES if lo <= t < lo + MEDIUM_TILES_PER_IPU]
        assert ipu["oom_tiles"].tolist() == expected_oom and ipu["oom_count"] == len(expected_oom)
        assert int(np.sum(ipu["oom"])) == len(expected_oom)
        assert ipu["peak_bytes"] == int(part.max())
        # bar heights are the mean of their tiles (rounded per category)
        stacked = np.sum(ipu["series"], axis=0)
        means = [part[i : i + 3].mean() for i in range(0, MEDIUM_TILES_PER_IPU, 3)]
        assert np.allclose(stacked, means, atol=len(mem["names"]))
    assert len(mem["names"]) == 8 + 2  # top 8 categories, "other", gaps
    assert mem["names"][8].startswith("other (")


def test_liveness_peak_and_its_variables(sample, sample_reader):
    live = chart_data.liveness(sample_reader)
    assert live["always_live"] == sum(r[9] for r in sample.rows("memory_by_tile"))
    values = [r[4] for r in sample.rows("liveness_steps")]
    assert live["not_always_live"].tolist() == values
    peak = live["peak"]
    assert peak["step"] == 3 and peak["not_always_live"] == 4096
    assert peak["total"] == live["always_live"] + 4096
    assert (peak["program_type"], peak["program"]) == ("DoExchange", "layer1/fwd/ExchangePre")
    expected = dict(live_variables_by_step(sample_reader))[3]
    assert dict(peak["variables"]) == expected
    assert [v for _n, v in peak["variables"]] == sorted(expected.values(), reverse=True)


def test_liveness_downsampling_keeps_the_peak(medium):
    reader = ProfileReader(medium["path"])
    try:
        live = chart_data.liveness(reader, Limits(max_liveness_points=1000))
    finally:
        reader.close()
    assert live["bucket"] == 3 and live["downsampled"] and len(live["not_always_live"]) == 1000
    curve = medium["curve"]
    assert live["not_always_live"].tolist() == [int(curve[i : i + 3].max()) for i in range(0, len(curve), 3)]
    assert live["peak"]["step"] == MEDIUM_PEAK_STEP and live["peak"]["not_always_live"] == int(curve.max())
    # the variables live at the peak: all 30 classes contain it, each class holds 30 pieces
    names = [n for n, _b in live["peak"]["variables"]]
    assert len(names) == 10 and names[0] == "model/layer29/activations"
    assert live["peak"]["variables"][0][1] == 30 * 1024 * 30


def test_timeline_segments_are_the_steps_per_ipu(sample, sample_reader):
    tl = chart_data.timeline(sample_reader)
    assert not tl["downsampled"]
    rows = sorted(sample.rows("steps_by_ipu"), key=lambda r: (r[1], r[5] + r[6], r[0]))
    t0 = min(r[5] + r[6] for r in rows)
    types = {r[0]: r[2] for r in sample.rows("steps")}
    for ipu in tl["ipus"]:
        mine = [r for r in rows if r[1] == ipu["ipu"]]
        assert ipu["start"].tolist() == [r[5] + r[6] - t0 for r in mine]
        assert ipu["end"].tolist() == [r[5] + r[10] - t0 for r in mine]
        assert [tl["types"][k] for k in ipu["kind"]] == [types[r[0]] for r in mine]
        assert ipu["count"].tolist() == [1] * len(mine)
    assert tl["span"] == max(r[5] + r[10] for r in rows) - t0


def test_timeline_merges_short_steps_but_accounts_for_every_step(medium):
    reader = ProfileReader(medium["path"])
    try:
        tl = chart_data.timeline(reader, Limits(timeline_resolution=500))
        full = chart_data.timeline(reader, Limits(timeline_resolution=0))
    finally:
        reader.close()
    assert tl["downsampled"] and not full["downsampled"]
    for merged, exact in zip(tl["ipus"], full["ipus"]):
        assert merged["steps"] == exact["steps"] == MEDIUM_STEPS
        assert int(merged["count"].sum()) == MEDIUM_STEPS
        assert len(merged["start"]) <= 2 * 500 + 2
        assert merged["start"][0] == exact["start"][0] and merged["end"].max() == exact["end"].max()
        assert np.all(np.diff(merged["start"]) >= 0)
        # the long step is never merged, and keeps its kind and its step id
        long_step = MEDIUM_STEPS // 3
        at = int(np.flatnonzero(merged["step"] == long_step)[0])
        assert merged["count"][at] == 1
        assert merged["end"][at] - merged["start"][at] == 400_000
        assert tl["types"][merged["kind"][at]] == _MEDIUM_KINDS[long_step % len(_MEDIUM_KINDS)]


def test_compute_set_cycles_are_the_longest_ipu_of_each_execution(sample, sample_reader):
    cs = chart_data.compute_sets(sample_reader)
    longest: dict[int, int] = {}
    for r in sample.rows("steps_by_ipu"):
        longest[r[0]] = max(longest.get(r[0], 0), r[18])
    expected: dict[int, list[int]] = {}
    for step, _run, _type, _program, compute_set, _name, _sync in sample.rows("steps"):
        if compute_set is not None:
            expected.setdefault(compute_set, []).append(longest[step])
    by_id = {row["id"]: row for row in cs["rows"]}
    for compute_set, values in expected.items():
        assert by_id[compute_set]["executions"] == len(values)
        assert by_id[compute_set]["cycles"] == sum(values)
    assert [r["cycles"] for r in cs["rows"]] == sorted((r["cycles"] for r in cs["rows"]), reverse=True)
    assert by_id[1]["estimated_max"] == sample.rows("compute_sets")[1][5]
    assert sum(r["percent"] for r in cs["rows"]) == pytest.approx(100)


def test_program_tree(sample_reader):
    tree = chart_data.program_tree(sample_reader)
    assert tree["count"] == 18
    assert tree["control"].tolist() == [0] and tree["functions"].tolist() == [11]
    assert tree["children_count"][0] == 12 and tree["children_count"][6] == 1
    assert tree["children"][:12].tolist() == [1, 2, 3, 4, 5, 6, 10, 13, 14, 15, 16, 17]
    assert tree["types"][tree["type"][8]] == "OnTileExecute"
    assert tree["labels"][tree["label"][5]] == "init/copy"  # unnamed OnTileExecute: its compute set's name
    assert dict(zip(tree["repeat"]["program"].tolist(), tree["repeat"]["count"].tolist())) == {6: 3}
    assert tree["calls"]["program"].tolist() == [10] and tree["calls"]["target"].tolist() == [11]
    executed = dict(zip(tree["executed"]["program"].tolist(), tree["executed"]["count"].tolist()))
    assert executed[8] == 2 and executed[5] == 1 and 0 not in executed


def test_compile_only_report_has_no_execution_charts(compile_only):
    reader = ProfileReader(compile_only.path)
    try:
        data = chart_data.report_data(reader)
    finally:
        reader.close()
    assert data["timeline"] is None and data["vertex_types"] is None
    assert data["memory"] is not None and data["liveness"] is not None
    assert data["compute_sets"]["measured"] is False
    page = render_page([data])
    assert "No execution profile" in page and 'data-chart="timeline"' not in _markup(page)


def test_limits_are_checked():
    with pytest.raises(ValueError, match="max_tiles"):
        Limits(max_tiles=0)
    Limits(timeline_resolution=0)


# -- the page ---------------------------------------------------------------------------------


class _Card(html.parser.HTMLParser):
    """Collects the summary cards' data-key/data-value pairs, and every external reference."""

    def __init__(self) -> None:
        super().__init__()
        self.cards: list[dict[str, str]] = []
        self.references: list[str] = []
        self.tags: set[str] = set()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.add(tag)
        if "summary" in (a.get("class") or "").split():
            self.cards.append({})
        if "data-key" in a and self.cards:
            self.cards[-1][a["data-key"]] = a.get("data-value")
        for name in ("src", "href", "action", "data", "poster"):
            if a.get(name):
                self.references.append(a[name])


def _markup(page: str) -> str:
    """The page without the contents of its scripts."""
    return re.sub(r"(<script[^>]*>).*?(</script>)", r"\1\2", page, flags=re.S)


def _payload(page: str) -> dict:
    match = re.search(
        r'<script type="application/json" id="pva-data"( data-encoding="deflate-base64")?>(.*?)</script>', page, re.S
    )
    assert match
    if match.group(1):
        return json.loads(zlib.decompress(base64.b64decode(match.group(2))))
    return json.loads(match.group(2).replace("<\\/", "</"))


def test_page_is_self_contained_and_shows_the_summary(sample):
    page = html_report([sample.path])
    parser = _Card()
    parser.feed(page)
    assert all(ref.startswith("#") for ref in parser.references), parser.references
    assert (
        "http:" not in page
        and "https:" not in page
        and "//" not in re.sub(r"<script>.*?</script>", "", page, flags=re.S)
    )
    assert "link" not in parser.tags and "img" not in parser.tags and "iframe" not in parser.tags
    assert "default-src 'none'" in page  # the browser refuses any network access
    (card,) = parser.cards
    reader = ProfileReader(sample.path)
    try:
        figures = summary_data(reader)
    finally:
        reader.close()
    assert card["target.num_ipus"] == "2" and card["target.num_tiles"] == "8"
    assert card["graph.num_vertices"] == "20" and card["graph.num_compute_sets"] == "3"
    assert int(card["execution.total_cycles"]) == figures["execution"]["total_cycles"]
    assert float(card["execution.microseconds"]) == pytest.approx(figures["execution"]["microseconds"])
    assert int(card["memory.including_gaps"]) == figures["memory"]["including_gaps"]
    assert int(card["liveness.max_live_bytes"]) == figures["liveness"]["max_live_bytes"]
    assert f"{figures['execution']['total_cycles']:,}</dd>" in page
    data = _payload(page)
    assert len(data["reports"]) == 1 and data["reports"][0]["memory"]["limit"] == BYTES_PER_TILE
    assert _markup(page).count('data-chart="memory"') == 2


def test_large_data_is_deflated_and_decodes_to_the_same_payload(sample):
    plain = _payload(html_report([sample.path], compress=False))
    packed_page = html_report([sample.path], compress=True)
    assert 'data-encoding="deflate-base64"' in packed_page
    assert _payload(packed_page) == plain


def test_downsampling_is_stated_on_the_page(medium):
    page = html_report([medium["path"]], limits=Limits(timeline_resolution=500))
    for what in ("memory", "liveness", "timeline"):
        assert f'data-downsampled="{what}"' in page
    assert "1,472 tiles of each IPU are shown as 491 bars of 3 tiles" in page
    assert "3,000 liveness steps are shown as 1,500 bars of 2 steps" in page
    assert "5 tile(s) out of memory" not in page  # per IPU: 2 on IPU 0, 3 on IPU 1
    assert "2 tile(s) out of memory: 100, 101" in page and "3 tile(s) out of memory: 1800, 2000, 2943" in page
    small = html_report(
        [medium["path"]], limits=Limits(max_tiles=2000, max_liveness_points=5000, timeline_resolution=0)
    )
    assert "data-downsampled" not in small


def test_compare_page_highlights_differences(sample, compile_only):
    page = html_report([sample.path, compile_only.path], threshold=0.05)
    parser = _Card()
    parser.feed(page)
    a, b = parser.cards
    assert a["execution.total_cycles"] != "0" and b["execution.total_cycles"] == "0"
    assert 'class="kv changed" data-key="execution.total_cycles"' in page
    assert '<small class="delta better">' in page  # B has fewer cycles
    reader_a, reader_b = ProfileReader(sample.path), ProfileReader(compile_only.path)
    try:
        differences = compare(reader_a, reader_b)
    finally:
        reader_a.close()
        reader_b.close()
    changed = [d for d in differences if d.change is None or d.change != 0]
    assert f"{len(changed):,} figures differ" in page
    regressions = sum(d.is_regression(0.05) for d in changed)
    assert f'data-regressions="{regressions}"' in page
    assert page.count('<tr class="improvement">') == sum(
        1 for d in changed if d.change and d.change < 0 and d.section != "target"
    )
    data = _payload(page)
    assert len(data["reports"]) == 2 and data["reports"][1]["timeline"] is None
    assert page.count('class="col" data-report="1"') == 7  # summary and six sections


def test_compare_of_a_report_with_itself_has_no_differences(sample):
    page = html_report([sample.path, sample.path])
    assert "The reports do not differ" in page and "kv changed" not in page


# -- the command ------------------------------------------------------------------------------


def _pva(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "pva", *args], capture_output=True, text=True, cwd=cwd)


def test_cli_writes_the_page(sample, tmp_path):
    out = tmp_path / "report.html"
    result = _pva("html", sample.path, "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"wrote {out} (")
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert os.listdir(tmp_path) == ["report.html"]
    compare_out = tmp_path / "compare.html"
    result = _pva("html", sample.path, sample.path, "--compare", "-o", str(compare_out), "--title", "A & B")
    assert result.returncode == 0, result.stderr
    assert "<title>A &amp; B</title>" in compare_out.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "args, message",
    [
        (["--compare"], "--compare needs exactly two reports"),
        (["EXTRA"], "expected one report, got 2; add --compare"),
        (["--max-tiles", "0"], "max_tiles must be an integer of at least 1"),
    ],
)
def test_cli_usage_errors(sample, tmp_path, args, message):
    out = tmp_path / "report.html"
    argv = ["html", sample.path] + [sample.path if a == "EXTRA" else a for a in args] + ["-o", str(out)]
    result = _pva(*argv)
    assert result.returncode == 2
    assert message in result.stderr
    assert not out.exists()


def test_cli_bad_input_leaves_the_previous_output_untouched(tmp_path):
    bad = tmp_path / "bad.pop"
    bad.write_bytes(b"not a report at all" * 100)
    out = tmp_path / "report.html"
    out.write_text("previous", encoding="utf-8")
    result = _pva("html", str(bad), "-o", str(out))
    assert result.returncode == 2
    assert result.stderr.startswith("pva html: error: ") and result.stderr.count("\n") == 1
    assert str(bad) in result.stderr
    assert out.read_text(encoding="utf-8") == "previous"
    assert sorted(os.listdir(tmp_path)) == ["bad.pop", "report.html"]
    missing = _pva("html", str(tmp_path / "missing.pop"), "-o", str(out))
    assert missing.returncode == 2 and "missing.pop" in missing.stderr


def test_cli_bad_output_path(sample, tmp_path):
    result = _pva("html", sample.path, "-o", str(tmp_path / "no" / "such" / "dir" / "r.html"))
    assert result.returncode == 2
    assert "does not exist" in result.stderr and result.stderr.count("\n") == 1
    result = _pva("html", sample.path, "-o", str(tmp_path))
    assert result.returncode == 2 and "found a directory" in result.stderr


def test_the_memory_caption_gives_the_largest_tile_as_the_gaps_toggle_counts_it(simulated):
    import re
    import sqlite3

    path = simulated / "profile.pop"
    with sqlite3.connect(path) as db:
        tiles = db.execute("SELECT tiles_per_ipu FROM target").fetchone()[0]
        tile, excluding = db.execute(
            "SELECT tile, total FROM memory_by_tile WHERE tile < ? ORDER BY total DESC, tile LIMIT 1", (tiles,)
        ).fetchone()
        including = db.execute(
            "SELECT max(total_including_gaps) FROM memory_by_tile WHERE tile < ?", (tiles,)
        ).fetchone()[0]
    db.close()
    page = html_report([str(path)])
    shown = re.search(r'<span class="caption-gaps" data-gaps="excluding">largest tile (\d+) with ([\d,]+) B', page)
    assert (int(shown.group(1)), int(shown.group(2).replace(",", ""))) == (tile, excluding)
    hidden = re.search(
        r'<span class="caption-gaps" data-gaps="including" hidden>largest tile \d+ with ([\d,]+) B', page
    )
    assert int(hidden.group(1).replace(",", "")) == including != excluding
    # the page starts with excluding gaps selected, and the script swaps the two with the toggle
    assert 'let memoryGaps = "excluding";' in page and "span.hidden = span.dataset.gaps !== v;" in page
