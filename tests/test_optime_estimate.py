"""`pva optime` (operator time cost) and `pva estimate` (Cerebras-style compile report)."""

from __future__ import annotations

import json

import pytest

from formats.pop.reader import ProfileReader
from pva.analysis.estimate import estimate, format_compile_report
from pva.analysis.optime import operator_times, step_cycles_counted_once
from pva.cli import main


def _step_times(sample):
    """Each step's cycles of the run, every cycle counted once (overlapping steps by rank)."""
    reader = ProfileReader(sample.path)
    try:
        kinds = {step: kind for step, kind, *_ in reader.steps_labelled(100)}
        return step_cycles_counted_once(reader, kinds)
    finally:
        reader.close()


def test_total_mode_shares_add_up_and_are_sorted(sample):
    reader = ProfileReader(sample.path)
    rows = operator_times(reader, "total")
    reader.close()
    assert sum(r.share for r in rows) == pytest.approx(1.0)
    assert [r.share for r in rows] == sorted((r.share for r in rows), reverse=True)
    times = _step_times(sample)
    total = sum(times.values())
    by_type = {r.type: r.cycles for r in rows}
    # stream copy steps 0-2, syncs 6-7, the exchange 3 and the global exchange 10 keep their own kinds
    assert by_type["StreamCopy"] == pytest.approx(times[0] + times[1] + times[2])
    assert by_type["Sync"] == pytest.approx(times[6] + times[7])
    assert by_type["GlobalExchange"] == pytest.approx(times[10])
    # step 5 has measured vertex cycles 400 (ScaledAdd) and 60 (SumVertex): its time splits 400:60
    assert by_type["SumVertex"] >= times[5] * 60 / 460
    assert sum(by_type.values()) == pytest.approx(total)


def test_each_mode_lists_operators_in_first_run_order(sample):
    reader = ProfileReader(sample.path)
    rows = operator_times(reader, "each")
    reader.close()
    names = [r.name for r in rows]
    assert names[3:6] == ["layer1/fwd/ExchangePre", "init/copy", "layer1/fwd"]
    assert rows[4].type == "poplar_rt::DstStridedCopyDA32"
    times = _step_times(sample)
    assert rows[5].cycles == pytest.approx(times[5] + times[8])  # layer1/fwd ran in steps 5 and 8
    assert sum(r.share for r in rows) == pytest.approx(1.0)


def test_optime_cli(sample, capsys, compile_only):
    assert main(["optime", sample.path, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data[0]["type"] == "StreamCopy" and sum(d["percent"] for d in data) == pytest.approx(100, abs=0.01)
    assert main(["optime", sample.path, "--mode", "each"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[3].split()[:3] == ["3", "DoExchange", "layer1/fwd/ExchangePre"]
    assert lines[3].endswith("%")
    assert main(["optime", compile_only.path]) == 0
    assert "compilation information only" in capsys.readouterr().out


def test_estimate_follows_the_delta_t_rules(sample):
    reader = ProfileReader(sample.path)
    est = estimate(reader)
    exchange = reader.matrix("program_estimated_cycles_by_tile")
    vectors = {(p, k): r for p, k, r in reader.query("SELECT program, kind, row FROM program_vectors")}
    reader.close()
    estimates = sample.matrix("compute_set_estimated_cycles_by_tile")
    by_name = {k.name: k for k in est.kernels}
    assert list(by_name) == ["init/copy", "layer1/fwd", "layer1/bwd"]
    init = by_name["init/copy"]
    assert init.compute_dt == int(estimates[0].max())
    # programs 2 (StreamCopyMid) and 4 (DoExchange) run before the first OnTileExecute
    expected_transmission = int(exchange.row(vectors[(2, "estimated_cycles")]).max()) + int(
        exchange.row(vectors[(4, "estimated_cycles")]).max()
    )
    assert init.transmission_dt == expected_transmission
    assert not init.overlaps and init.delta_t == init.compute_dt + init.transmission_dt  # same tiles: sum
    fwd = by_name["layer1/fwd"]
    assert fwd.executions == 3  # inside Repeat(3)
    assert fwd.transmission_dt == 0 and fwd.delta_t == fwd.compute_dt == int(estimates[1].max())
    assert fwd.active_pes == 8 and fwd.compute_cycles == int(estimates[1].sum())
    time = init.delta_t + 3 * fwd.delta_t + by_name["layer1/bwd"].delta_t
    assert est.samples_per_second == pytest.approx(1.33e9 / time)
    assert est.compute_samples_per_second == pytest.approx(
        1.33e9 / (init.compute_dt + 3 * fwd.compute_dt + by_name["layer1/bwd"].compute_dt)
    )
    assert est.active_pes_fraction == 1.0


def test_kernel_overlapping_exchange_on_other_tiles_uses_max():
    from pva.analysis.estimate import Kernel

    kernel = Kernel(
        "k", compute_dt=100, transmission_dt=40, overlaps=True, active_pes=4, compute_cycles=200, executions=1
    )
    assert kernel.delta_t == 100 and kernel.utilization == 0.5
    kernel.overlaps = False
    assert kernel.delta_t == 140


def test_compile_report_layout(sample, tmp_path, capsys):
    assert main(["estimate", sample.path, "-o", str(tmp_path)]) == 0
    text = (tmp_path / "compile_report.txt").read_text()
    lines = text.splitlines()
    assert lines[0] == "Estimated Overall Performance" and lines[1] == "-" * 31
    for line, label in zip(
        lines[2:7],
        ("Samples/s:", "Compute Samples/s:", "Transmission Samples/s:", "Active PEs:", "Compute Utilization:"),
    ):
        assert line.startswith(label) and line[30] != " " and line[29] == " "
    assert lines[5] == "Active PEs:                   100%"
    assert lines[8].startswith("| Kernel Name ") and lines[8].rstrip().endswith("| Compute Utilization |")
    assert set(lines[10].replace("|", "").strip()) == set()  # the blank first row
    assert lines[11].startswith("| init/copy ") and lines[11].endswith("% |")
    assert lines[-1].startswith("+-")
    reader = ProfileReader(sample.path)
    assert text == format_compile_report(estimate(reader))
    reader.close()


def test_exchange_sync_and_stream_copies_keep_their_kind_with_debug_types(simulated):
    """Issue 15 item 5: with debug op types, exchange and sync steps are not the neighbouring operator's."""
    import pva

    with pva.openReport(simulated / "profile.pop", simulated / "debug.cbor") as report:
        total = report.operator_times("total")
        each = report.operator_times("each")
        reader = report._reader
        step_kinds = [row[1] for row in reader.steps_labelled()]
        times = step_cycles_counted_once(reader, {row[0]: row[1] for row in reader.steps_labelled()})
        exchange = sum(times.get(row[0], 0) for row in reader.steps_labelled() if row[1] == "DoExchange")
        sync = sum(times.get(row[0], 0) for row in reader.steps_labelled() if row[1] == "Sync")
    by_type = {r.type: r.cycles for r in total}
    assert "DoExchange" in step_kinds and "Sync" in step_kinds
    assert by_type["DoExchange"] == pytest.approx(exchange)
    assert by_type["Sync"] == pytest.approx(sync)
    assert all(r.name for r in each)
    for row in each:
        if row.name.endswith("/ExchangePre"):
            assert row.type == "DoExchange", row
    assert "Internal sync" in {r.name for r in each if r.type == "Sync"}


def test_estimate_prints_n_a_where_a_rate_does_not_apply(simulated, tmp_path, capsys):
    """Issue 15 item 6: a kernel with no transmission has no transmission rate: n/a, null in JSON."""
    assert main(["estimate", str(simulated / "profile.pop"), "-o", str(tmp_path)]) == 0
    capsys.readouterr()
    text = (tmp_path / "compile_report.txt").read_text()
    assert "inf" not in text
    rows = [line.split("|") for line in text.splitlines() if line.startswith("| ") and "Kernel Name" not in line]
    without = [cells for cells in rows if cells[4].strip() == "n/a"]
    assert without and all(float(cells[2]) == float(cells[3]) for cells in without)
    assert main(["estimate", str(simulated / "profile.pop"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    kernels = [k for k in data["kernels"] if k["transmission_delta_t"] == 0]
    assert kernels and len(kernels) == len(without)
