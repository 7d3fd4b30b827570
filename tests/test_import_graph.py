"""No import circle anywhere in the product or the benchmarks, and every arrow points DESIGN's way."""

from __future__ import annotations

import pytest
from import_graph import PACKAGES, circles, graph, wrong_arrows


@pytest.fixture(scope="module")
def edges():
    return graph()


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_circle(edges, package):
    found = [c for c in circles(edges) if any(m.split(".")[0] == package for m in c)]
    assert found == []


@pytest.mark.parametrize("package", PACKAGES)
def test_arrows_point_the_designed_way(edges, package):
    assert [pair for pair in wrong_arrows(edges) if pair[0].split(".")[0] == package] == []


def test_the_graph_sees_function_level_and_type_checking_imports(edges):
    # pva.cli.simulate imports the simulator inside the command's function; the graph must see it.
    assert any(t.startswith("simulator") for t in edges["pva.cli.simulate"])
    assert "formats.pop.reader" in edges["pva.report"] or any(t.startswith("formats") for t in edges["pva.report"])


def test_circles_are_found():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
