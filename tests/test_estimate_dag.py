"""`pva estimate` walks a program DAG once per program, not once per path: a Sequence whose child
appears twice at each of 40 levels is estimated as 2^40 runs of the program."""

from __future__ import annotations

import json

import hostile_inputs

from pva.cli import main


def _kernels(path, capsys) -> list[dict]:
    assert main(["estimate", str(path), "--json"]) == 0
    return json.loads(capsys.readouterr().out)["kernels"]


def test_a_doubling_dag_of_40_levels_is_estimated_as_2_to_the_40_runs(simulated, tmp_path, capsys):
    source = simulated / "profile.pop"
    before = _kernels(source, capsys)
    path = hostile_inputs.doubling_dag(source, tmp_path / "dag.pop", 40)
    after = _kernels(path, capsys)
    assert len(before) == len(after) == 38
    for kernel, doubled in zip(before, after):
        assert doubled["name"] == kernel["name"]
        assert doubled["executions"] == kernel["executions"] << 40
        assert doubled["compute_delta_t"] == kernel["compute_delta_t"]
        assert doubled["active_pes"] == kernel["active_pes"]


def test_one_level_matches_running_the_program_twice(simulated, tmp_path, capsys):
    source = simulated / "profile.pop"
    before = _kernels(source, capsys)
    after = _kernels(hostile_inputs.doubling_dag(source, tmp_path / "dag1.pop", 1), capsys)
    assert [k["executions"] for k in after] == [2 * k["executions"] for k in before]
    assert all(a["transmission_delta_t"] >= b["transmission_delta_t"] for a, b in zip(after, before))
