"""The client-style scripts of issue 3, unmodified, on a simulated report, checked against plain SQL."""

from __future__ import annotations

import fnmatch
import sqlite3

import pytest
from test_client_scripts_compilation import run


def _sql(path, query, params=()):
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute(query, params).fetchall()
    finally:
        conn.close()


def test_counts_and_version(simulated):
    path = str(simulated / "profile.pop")
    out = run(
        """
        import sys
        import pva
        report = pva.openReport(sys.argv[1])
        print(report.compilation.graph.numComputeSets)
        print(report.compilation.target.numTiles)
        print(report.poplarVersion.string)
    """,
        path,
    )
    ((cs,),) = _sql(path, "SELECT count(*) FROM compute_sets")
    ((version,),) = _sql(path, "SELECT value FROM metadata WHERE key = 'poplar_version'")
    assert out.splitlines() == [str(cs), "64", version]


def test_total_memory_and_peak_liveness(simulated):
    path = str(simulated / "profile.pop")
    out = run(
        """
        import sys
        import pva
        r = pva.openReport(sys.argv[1])
        tiles = r.compilation.tiles
        print(sum(tile.memory.total.includingGaps for tile in tiles))
        print(sum(t.memory.alwaysLiveBytes for t in tiles)
              + max(s.notAlwaysLiveMemory.bytes for s in r.compilation.livenessProgramSteps))
    """,
        path,
    )
    ((total, always),) = _sql(path, "SELECT sum(total_including_gaps), sum(always_live_bytes) FROM memory_by_tile")
    ((peak,),) = _sql(path, "SELECT max(not_always_live_bytes) FROM liveness_steps")
    assert out.split() == [str(total), str(always + peak)]


@pytest.mark.parametrize("more_than", [1, 0])
def test_visitor_over_programs_by_number_of_vertex_types(simulated, more_than):
    path = str(simulated / "profile.pop")
    out = run(
        """
        import sys
        import pva

        class TestVisitor(pva.ProgramVisitor):
            def visitOnTileExecute(self, onTileExecute):
                if len(onTileExecute.computeset.vertices) > int(sys.argv[2]):
                    print(onTileExecute.name)

        report = pva.openReport(sys.argv[1])
        v = TestVisitor()
        for p in report.compilation.programs:
            p.accept(v)
    """,
        path,
        str(more_than),
    )
    expected = _sql(
        path,
        "SELECT coalesce(nullif(p.name, ''), cs.name) FROM programs p JOIN compute_sets cs "
        "ON cs.compute_set = p.compute_set WHERE p.type = 'OnTileExecute' AND "
        "(SELECT count(*) FROM compute_set_vertices v WHERE v.compute_set = p.compute_set) > ? "
        "ORDER BY p.id",
        (more_than,),
    )
    assert out.splitlines() == [name for (name,) in expected]
    if more_than == 0:
        assert len(expected) > 10


def test_glob_matching_compute_set_names(simulated):
    path = str(simulated / "profile.pop")
    out = run(
        """
        import fnmatch, sys
        import pva
        report = pva.openReport(sys.argv[1])
        for cs in report.compilation.computeSets:
            if fnmatch.fnmatch(cs.name, "Layer*/Fwd/*"):
                print(cs.name)
    """,
        path,
    )
    names = [name for (name,) in _sql(path, "SELECT name FROM compute_sets ORDER BY compute_set")]
    assert out.splitlines() == [n for n in names if fnmatch.fnmatch(n, "Layer*/Fwd/*")]
    assert out.strip()


def test_per_ipu_code_sums(simulated):
    path = str(simulated / "profile.pop")
    out = run(
        """
        import sys
        import pva
        report = pva.openReport(sys.argv[1])
        for ipu in report.compilation.ipus:
            print(sum(t.memory.category.vertexCode.total for t in ipu.tiles),
                  sum(t.memory.category.internalExchangeCode.total for t in ipu.tiles))
    """,
        path,
    )
    rows = dict(
        _sql(
            path,
            "SELECT c.name, sum(m.total) FROM memory_by_category m JOIN var_categories c ON c.id = m.category "
            "GROUP BY c.name",
        )
    )
    assert out.split() == [str(rows["vertexCode"]), str(rows["internalExchangeCode"])]
