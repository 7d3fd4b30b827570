"""`pva simulate` with inputs found wrong by exploratory runs: each is refused with exit status 2
and a message naming what was expected, or runs, but never hangs or fails as an internal error."""

from __future__ import annotations

import json

import pytest

from pva.cli import main as cli_main

SMALL = ["--preset", "gemm", "--tiles-per-ipu", "16", "--m", "8", "--k", "8", "--n", "8"]


def _simulate(capsys, *args) -> tuple[int, str, str]:
    code = cli_main(["simulate", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_proportion_below_one_byte_of_the_tile_plans_without_a_bound(tmp_path, capsys):
    # floor(1e-6 x 638,976) = 0 bytes, which poplin's doubling never raises
    code, out, _ = _simulate(capsys, *SMALL, "--available-memory-proportion", "1e-6", "-o", str(tmp_path / "o"))
    assert code == 0 and "cycles on the busiest IPU" in out


@pytest.mark.parametrize(
    "knobs, message",
    [
        (["--plan-constraints", "[" * 30_000 + "]" * 30_000], "nested too deeply"),
        (["--alpha", "nan"], "knob --alpha of preset 'gemm' expects a number, got 'nan'"),
        (["--m", "1_0"], "knob --m of preset 'gemm' expects a whole number, got '1_0'"),
    ],
)
def test_bad_knob_values_exit_2(tmp_path, capsys, knobs, message):
    code, _, err = _simulate(capsys, *SMALL, *knobs, "-o", str(tmp_path / "o"))
    assert code == 2 and message in err
    assert not (tmp_path / "o").exists()


def test_an_abbreviated_knob_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        cli_main(["simulate", *SMALL, "--alph", "2", "-o", str(tmp_path / "o")])
    assert exc.value.code == 2 and "unrecognized arguments: --alph 2" in capsys.readouterr().err


def test_a_negative_value_follows_its_knob(tmp_path, capsys):
    code, out, _ = _simulate(capsys, *SMALL, "--alpha", "-1e3", "--beta", "-2", "--json", "-o", str(tmp_path / "o"))
    assert code == 0 and json.loads(out)["cycles"] > 0


def test_an_output_directory_that_cannot_be_made_exits_2(tmp_path, capsys):
    (tmp_path / "afile").write_text("mine")
    code, _, err = _simulate(capsys, *SMALL, "-o", str(tmp_path / "afile" / "sub"))
    assert code == 2 and "expected a directory there or one that can be made" in err
    assert (tmp_path / "afile").read_text() == "mine"


@pytest.mark.parametrize("epoch", ["1.5", "1_0", "-5"])
def test_a_bad_source_date_epoch_exits_2(tmp_path, capsys, monkeypatch, epoch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", epoch)
    code, _, err = _simulate(capsys, *SMALL, "-o", str(tmp_path / "o"))
    assert code == 2 and f"SOURCE_DATE_EPOCH must be whole seconds since 1970, got {epoch!r}" in err


def test_too_deeply_nested_engine_options_exit_2(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("POPLAR_ENGINE_OPTIONS", "[" * 30_000 + "]" * 30_000)
    code, _, err = _simulate(capsys, *SMALL, "-o", str(tmp_path / "o"))
    assert code == 2 and "POPLAR_ENGINE_OPTIONS must be a JSON object; it is nested too deeply" in err


def test_a_timestamp_may_be_seconds(tmp_path, capsys):
    code, out, _ = _simulate(capsys, *SMALL, "--timestamp", "1700000000", "-o", str(tmp_path / "o"))
    assert code == 0 and "Tue_Nov_14_22-13-20_2023" in out
    # eight digits are a date first (ISO 8601's basic form)
    code, out, _ = _simulate(capsys, *SMALL, "--timestamp", "20240101", "-o", str(tmp_path / "p"))
    assert code == 0 and "Mon_Jan_01_00-00-00_2024" in out


def test_knob_values_that_start_with_a_dash_are_joined_to_their_knob():
    from pva.cli.simulate import _joined_values

    known = {"alpha": False, "padding": False, "report-plan": True}
    words = ["--alpha", "-1e3", "--padding", "-1,2", "--report-plan", "--alpha", "--padding"]
    assert _joined_values(words, known) == ["--alpha=-1e3", "--padding=-1,2", "--report-plan", "--alpha", "--padding"]


def test_the_summary_names_where_the_engine_options_sent_the_reports(tmp_path, capsys):
    elsewhere = tmp_path / "elsewhere"
    code, out, _ = _simulate(
        capsys, *SMALL, "--engine-option", f"autoReport.directory={elsewhere}", "--json", "-o", str(tmp_path / "o")
    )
    summary = json.loads(out)
    assert code == 0 and summary["directory"] == str(elsewhere) and "profile.pop" in summary["files"]
    code, out, _ = _simulate(capsys, *SMALL, "--engine-option", "autoReport.all=false", "-o", str(tmp_path / "p"))
    assert code == 0 and "no run profiled" in out and "no reports written" in out
    code, out, _ = _simulate(capsys, *SMALL, "--engine-option", "autoReport.all=false", "--json", "-o", str(tmp_path))
    summary = json.loads(out)
    assert (summary["directory"], summary["files"], summary["cycles"], summary["profiled_runs"]) == (None, [], None, 0)


def test_the_cycles_are_those_of_the_profiled_runs(tmp_path, capsys):
    knobs = ["--preset", "mnist-mlp", "--tiles-per-ipu", "16", "--batch", "2", "--hidden", "4", "--steps", "1"]
    # executionProfileProgramRunCount (2) runs of each program: the init run and two of the five
    code, out, _ = _simulate(capsys, *knobs, "--runs", "5", "-o", str(tmp_path / "o"))
    assert code == 0 and "6 run(s)" in out and "in the 3 profiled run(s)" in out
    code, out, _ = _simulate(capsys, *knobs, "--runs", "2", "-o", str(tmp_path / "p"))
    assert code == 0 and "3 run(s)" in out and "cycles on the busiest IPU\n" in out


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--preset", "matrix-vector", "--tiles-per-ipu", "16", "--rows", "10", "--cols", "7", "--split", "20"],
            "knob --split must be at most --cols (7)",
        ),
        (
            ["--preset", "tutorial1", "--tiles-per-ipu", "3"],
            "knob --tiles-per-ipu of preset 'tutorial1' must be at least 4",
        ),
        (
            ["--preset", "mnist-mlp", "--tiles-per-ipu", "16", "--io-tiles", "16"],
            "knob --io-tiles must be below the tiles per IPU (16), got 16",
        ),
    ],
)
def test_knobs_out_of_range_for_the_preset_name_the_knob(tmp_path, capsys, args, message):
    code, _, err = _simulate(capsys, *args, "-o", str(tmp_path / "o"))
    assert code == 2 and message in err


def test_backward_pass_of_a_convolution_whose_deltas_skip_the_input_runs(tmp_path, capsys):
    # kernel 4, stride 4, padding 3 on an 8 x 8 field: the gradient is 8 x 8 (it was an internal error)
    args = ["--preset", "conv", "--tiles-per-ipu", "16", "--height", "8", "--width", "8", "--kernel", "4"]
    args += ["--stride", "4", "--padding", "3", "--in-chans", "4", "--out-chans", "4", "--batch", "1"]
    code, out, _ = _simulate(capsys, *args, "--single-phase", "bwd", "-o", str(tmp_path / "o"))
    assert code == 0 and "cycles on the busiest IPU" in out
