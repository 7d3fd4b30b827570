"""The analyses ask the query layer (formats/pop/query) and never hold SQL of their own."""

from __future__ import annotations

import ast
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
ANALYSIS = ROOT / "pva" / "analysis"
#: Modules another change moves onto the query layer.
EXEMPT = {"fleet_query.py"}

_SQL = re.compile(r"\bSELECT\b.*\bFROM\b", re.DOTALL)


def sql_strings(path: pathlib.Path) -> list[tuple[int, str]]:
    """(line, text) of every string constant of a module that reads like SQL (SELECT ... FROM).

    Implicitly concatenated and f-string parts are joined, so a query split over lines is found.
    """
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        elif isinstance(node, ast.JoinedStr):
            text = "".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
        else:
            continue
        if _SQL.search(text):
            found.append((node.lineno, text[:80]))
    return found


def analysis_modules() -> list[pathlib.Path]:
    return sorted(p for p in ANALYSIS.rglob("*.py") if p.name not in EXEMPT)


def test_the_scan_finds_sql(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        'Q = ("SELECT name "\n     "FROM vertex_types")\nR = f"SELECT {1} FROM t"\nS = "FROM here"\nT = "select the tiles from"\n'
    )
    assert [line for line, _ in sql_strings(module)] == [1, 3]


def test_no_sql_in_analysis_modules():
    modules = analysis_modules()
    assert any(p.name == "summary.py" for p in modules) and any(p.parent.name == "html" for p in modules)
    offenders = [f"{p.relative_to(ROOT)}:{line}: {text!r}" for p in modules for line, text in sql_strings(p)]
    assert not offenders, "SQL belongs in formats/pop/query:\n" + "\n".join(offenders)


def test_query_mixins_do_not_shadow_each_other():
    """Two mixins of the query layer defining one name would silently answer with one of them."""
    from formats.pop.query import ReportQueries

    owners: dict[str, str] = {}
    clashes = []
    for cls in ReportQueries.__mro__[1:]:
        if cls is object:
            continue
        for name in vars(cls):
            if name.startswith("__"):
                continue
            if name in owners:
                clashes.append(f"{name}: {owners[name]} and {cls.__name__}")
            owners[name] = cls.__name__
    assert "tile_memory" in owners and not clashes, clashes
