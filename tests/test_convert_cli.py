"""`pva convert` and `pva export` from the command line: detection, exit codes, one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from legacy_builders import complete_graph_profile, execution_profile, write_cbor, write_json

from formats.detect import InputKind, classify_input
from pva.cli import main


def _run(argv, capsys):
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_convert_legacy_pair_then_export_every_format(tmp_path, capsys):
    graph = complete_graph_profile()
    g = write_json(tmp_path / "graph.json", graph)
    x = write_cbor(tmp_path / "execution.cbor", execution_profile(graph, "IPU_MODEL"))
    code, out, err = _run(["convert", g, x, "-o", str(tmp_path / "p.pop"), "--no-progress"], capsys)
    assert code == 0 and err == ""
    assert out.startswith(f"wrote {tmp_path / 'p.pop'} from a legacy Poplar graph profile (v1) in JSON")
    for fmt, name in (
        ("parquet", "pq"),
        ("hdf5", "m.h5"),
        ("csv", "csv"),
        ("chrome-trace", "t.json"),
        ("legacy-json", "legacy.json"),
        ("legacy-cbor", "legacy"),
    ):
        code, out, err = _run(["export", str(tmp_path / "p.pop"), "--format", fmt, "-o", str(tmp_path / name)], capsys)
        assert code == 0, err
        assert os.path.exists(tmp_path / name)
    assert sorted(os.listdir(tmp_path / "legacy")) == ["execution.cbor", "graph.cbor", "manifest.json"]


def test_convert_reports_warnings_and_json(tmp_path, capsys):
    source = write_json(tmp_path / "g.json", {"target": {"numIPUs": 1, "tilesPerIPU": 2, "extra": 1}})
    code, out, err = _run(["convert", source, "-o", str(tmp_path / "p.pop"), "--json"], capsys)
    assert code == 0
    result = json.loads(out)
    assert result["unknown_keys"] == 1 and result["warnings"] == [
        "1 unknown key(s) kept in table extras, e.g. $.target.extra"
    ]


@pytest.mark.parametrize(
    "content, expected",
    [
        (b"", "an empty file"),
        (b"\x00\x01\x02binary", "binary data"),
        (
            b'{"target": {"numIPUs": 1, "tilesPerIPU": 2}, "memory": {"byTile": {"total": [1]}}}',
            "$.memory.byTile.total: expected 2 values (one per tile), found 1",
        ),
        (b'{"target": {"numIPUs": 1, "tilesPerIPU": 2', "unexpected end of input"),
        (b'{"format": "experimental"}', "a Poplar v2 'experimental' profile"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, content, expected):
    source = tmp_path / "in.json"
    source.write_bytes(content)
    code, out, err = _run(["convert", str(source), "-o", str(tmp_path / "p.pop")], capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("pva convert: error: ")
    assert expected in err and str(source) in err
    assert not (tmp_path / "p.pop").exists()


def test_missing_input_and_same_output(tmp_path, capsys):
    code, _out, err = _run(["convert", str(tmp_path / "nope.json"), "-o", str(tmp_path / "p.pop")], capsys)
    assert code == 2 and "no such file" in err
    source = write_json(tmp_path / "g.json", {"target": {"numIPUs": 1, "tilesPerIPU": 2}})
    code, _out, err = _run(["convert", source, "-o", source], capsys)
    assert code == 2 and "would overwrite an input" in err


def test_export_bad_report_exits_2(tmp_path, capsys):
    (tmp_path / "x.pop").write_text("not sqlite")
    code, _out, err = _run(["export", str(tmp_path / "x.pop"), "-f", "parquet", "-o", str(tmp_path / "o")], capsys)
    assert code == 2 and err.startswith("pva export: error: ") and err.count("\n") == 1


@pytest.mark.parametrize(
    "content, kind",
    [
        (b'{"graphProfile": {}, "executionProfile": {}}', InputKind.LEGACY_COMBINED),
        (b'{"computeSets": {"names": []}, "target": {}}', InputKind.LEGACY_GRAPH),
        (b'{"profilerMode": "NONE"}', InputKind.LEGACY_EXECUTION),
        (b'[{"ph": "X", "name": "a", "ts": 0, "dur": 1}]', InputKind.CHROME_TRACE),
        (b'{"schemaVersion": 1, "deviceProperties": [], "traceEvents": []}', InputKind.CHROME_TRACE),
        (b"Estimated Overall Performance\n-----\nSamples/s:  1.0\n", InputKind.CEREBRAS_COMPILE_REPORT),
        (b"Target:\n  Number of IPUs:         1\n  Tiles per IPU:          1,216\n", InputKind.POPLAR_TEXT_SUMMARY),
        (b'{"version": "v2", "profile": []}', InputKind.LEGACY_V2),
    ],
)
def test_input_kinds_are_detected(tmp_path, content, kind):
    path = tmp_path / "input"
    path.write_bytes(content)
    assert classify_input(path).kind is kind


def test_cbor_detection_and_graph_keys_after_a_long_first_section(tmp_path):
    graph = complete_graph_profile(tiles_per_ipu=2000)
    path = write_cbor(tmp_path / "g.cbor", graph)
    info = classify_input(path)
    assert info.kind is InputKind.LEGACY_GRAPH and info.encoding == "cbor"


def test_progress_bar_draws_on_request(tmp_path):
    source = write_json(tmp_path / "g.json", complete_graph_profile())
    result = subprocess.run(
        [sys.executable, "-m", "pva", "convert", source, "-o", str(tmp_path / "p.pop"), "--progress"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "p.pop").exists()


def test_simulated_report_through_the_cli(tmp_path, capsys):
    from pva.cli import command_modules

    if "simulate" not in command_modules():
        pytest.skip("pva simulate is not available")
    code, _out, err = _run(["simulate", "--preset", "tutorial3", "-o", str(tmp_path / "sim")], capsys)
    assert code == 0, err
    report = str(tmp_path / "sim" / "profile.pop")
    code, _out, err = _run(["export", report, "-f", "legacy-json", "-o", str(tmp_path / "legacy.json")], capsys)
    assert code == 0, err
    code, _out, err = _run(["convert", str(tmp_path / "legacy.json"), "-o", str(tmp_path / "again.pop")], capsys)
    assert code == 0, err
    code, _out, err = _run(
        ["export", str(tmp_path / "again.pop"), "-f", "legacy-json", "-o", str(tmp_path / "again.json")], capsys
    )
    assert code == 0, err
    from formats.legacy.equivalence import differences

    first = json.loads((tmp_path / "legacy.json").read_text())
    second = json.loads((tmp_path / "again.json").read_text())
    assert differences(first, second, derived=()) == []
    if "estimate" in command_modules():
        code, _out, err = _run(["estimate", report, "-o", str(tmp_path / "sim")], capsys)
        assert code == 0, err
        from formats.cerebras.importer import read_compile_report

        estimate = read_compile_report(tmp_path / "sim" / "compile_report.txt")
        code, _out, err = _run(
            ["convert", str(tmp_path / "sim" / "compile_report.txt"), "-o", str(tmp_path / "cs.pop")], capsys
        )
        assert code == 0, err
        import pva

        with pva.openReport(tmp_path / "cs.pop") as converted:
            assert [cs.name for cs in converted.compilation.computeSets] == [k.name for k in estimate.kernels]
