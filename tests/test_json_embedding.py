"""Names of every character class survive into the HTML page's embedded JSON, and DebugContext.json is valid JSON."""

from __future__ import annotations

import json
import math
import re
import shutil
import sqlite3

import cbor2

from pva.analysis.html.render import _data_script
from pva.cli import main

#: Names a program, a compute set or a variable may have: markup, comment openers, quotes, escapes,
#: separators JavaScript treats as line ends, controls, astral characters, an empty name.
NAMES = [
    "<!--",
    "-->",
    "</script>",
    "<script>alert(1)</script>",
    "a & b",
    "'\"",
    "back\\slash",
    "\u2028\u2029",
    "tab\tnew\nline",
    "\x01\x1f\x7f",
    "é中文🚀",
    "",
    "]]>",
    "<\\!--",
    "${x}",
    "\ufeffbom",
]


def _embedded(page: str) -> str:
    match = re.search(r'<script type="application/json" id="pva-data">(.*?)</script>', page, re.DOTALL)
    assert match, "no embedded data"
    return match.group(1)


def test_embedded_json_escapes_every_angle_bracket():
    script = _data_script({"names": NAMES}, compress=False)
    text = _embedded(script)
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == {"names": NAMES}


def test_names_of_every_character_class_reach_the_page_intact(sample, tmp_path):
    path = tmp_path / "names.pop"
    shutil.copyfile(sample.path, path)
    conn = sqlite3.connect(path)
    ids = [row[0] for row in conn.execute("SELECT id FROM programs ORDER BY id")]
    for k, cs in enumerate(ids):
        conn.execute("UPDATE programs SET name = ? WHERE id = ?", ("|".join(NAMES) + str(k), cs))
    conn.commit()
    conn.close()
    out = tmp_path / "page.html"
    assert main(["html", str(path), "-o", str(out), "--no-compress"]) == 0
    page = out.read_text(encoding="utf-8")
    assert 'data-encoding="deflate-base64"' not in page
    data = json.loads(_embedded(page))
    found = set()

    def strings(value):
        if isinstance(value, str):
            found.add(value)
        elif isinstance(value, list):
            for item in value:
                strings(item)
        elif isinstance(value, dict):
            for item in value.values():
                strings(item)

    strings(data)
    expected = {"|".join(NAMES) + str(k) for k in range(len(ids))}
    assert expected & found, sorted(found)[-20:]  # SQLite text ends at a NUL, so names hold none
    assert "<!--" not in _embedded(page)


def test_debug_context_json_is_valid_json_always(tmp_path):
    import pva
    from formats.debug.debug_cbor import json_plain

    huge = 10**5000
    assert json_plain({"n": math.nan, "i": math.inf, "big": huge, "ok": 10**30}) == {
        "n": None,
        "i": None,
        "big": hex(huge),
        "ok": 10**30,
    }
    report_dir = tmp_path / "run"
    from simulator.presets import run_preset

    run_preset("tutorial1", {"tiles-per-ipu": 16}, str(report_dir), timestamp=1_700_000_000.0)
    debug = report_dir / "debug.cbor"
    document = cbor2.loads(debug.read_bytes())
    context = document["contexts"][0]
    context.update({"nan": math.nan, "inf": -math.inf, "huge": huge})
    patched = tmp_path / "debug.cbor"
    patched.write_bytes(cbor2.dumps(document))
    with pva.openReport(report_dir / "profile.pop", patched) as report:
        found = next(c for c in report.compilation.debugContexts() if c.id == context["id"])
        value = json.loads(found.json)  # the standard module: NaN would parse, so check the text too
    assert "NaN" not in found.json and "Infinity" not in found.json
    assert value["nan"] is None and value["inf"] is None and value["huge"] == hex(huge)
