"""ExecutionStep.ipus hands out Ipu objects that keep their step whatever the caller holds on to.

Walking the steps reuses Ipu objects nobody holds any more (pva/execution.py, _StepIpus.ipus_of);
these tests hold them in every way a script might and check each one still reads its own step.
"""

from __future__ import annotations

import sys
import threading

import pytest

import pva
from pva.execution import _UNSHARED


def _cycles(sample) -> dict[tuple[int, int], int]:
    columns, rows = sample.tables["steps_by_ipu"]
    return {(row[columns.index("step_id")], row[columns.index("ipu")]): row[columns.index("cycles")] for row in rows}


@pytest.fixture
def report(sample):
    with pva.openReport(sample.path) as opened:
        yield opened


def test_reference_counts_can_tell_held_objects_on_this_interpreter():
    assert _UNSHARED == 2  # CPython with the GIL: reuse is on, so the tests below exercise it


def test_a_walk_reads_every_step(report, sample):
    cycles = _cycles(sample)
    steps = report.execution.steps
    assert sum(step.ipus[0].cycles for step in steps) == sum(cycles[(s, 0)] for s in range(len(steps)))
    assert [step.ipus[1].cycles for step in steps] == [cycles[(s, 1)] for s in range(len(steps))]


def test_objects_the_caller_holds_keep_their_step(report, sample):
    cycles = _cycles(sample)
    steps = report.execution.steps
    one = steps[1].ipus[0]  # an object taken out of its list
    whole = steps[2].ipus  # a list
    pair = tuple(steps[3].ipus)  # objects copied into another container
    keyed = {steps[4].ipus[1]: "key"}  # an object as a dict key
    walked = [step.ipus[0].cycles for step in steps]  # meanwhile, a walk reuses free objects
    walked_again = [step.ipus[1].cycles for step in steps]
    assert walked == [cycles[(s, 0)] for s in range(len(steps))]
    assert walked_again == [cycles[(s, 1)] for s in range(len(steps))]
    assert (one.cycles, one._r, one.id) == (cycles[(1, 0)], 1, 0)
    assert [(ipu.cycles, ipu.id) for ipu in whole] == [(cycles[(2, 0)], 0), (cycles[(2, 1)], 1)]
    assert [ipu.cycles for ipu in pair] == [cycles[(3, 0)], cycles[(3, 1)]]
    (key,) = keyed
    assert key.cycles == cycles[(4, 1)] and keyed[steps[4].ipus[1]] == "key"  # equal, and its hash is unchanged


def test_a_loop_variable_keeps_its_object_while_the_next_step_is_read(report, sample):
    cycles = _cycles(sample)
    previous = None
    for step in report.execution.steps:
        current = step.ipus[0]
        if previous is not None:
            assert previous._r == step._id - 1 and previous.cycles == cycles[(step._id - 1, 0)]
        assert current.cycles == cycles[(step._id, 0)]
        previous = current


def test_a_list_changed_and_dropped_does_not_change_later_lists(report):
    steps = report.execution.steps
    changed = steps[0].ipus
    changed.reverse()
    changed.append("not an Ipu")
    del changed
    assert [ipu.id for ipu in steps[1].ipus] == [0, 1]
    assert all(isinstance(ipu, pva.Ipu) and ipu._r == 5 for ipu in steps[5].ipus)


def test_lists_are_new_each_time(report):
    step = report.execution.steps[3]
    first, second = step.ipus, step.ipus
    assert first is not second and first == second  # equal Ipu objects (same step and IPU)
    assert first[0] is not second[0]


def test_threads_walking_at_once_read_their_own_steps(report, sample):
    cycles = _cycles(sample)
    steps = report.execution.steps
    expected = [cycles[(s, 0)] for s in range(len(steps))] * 300
    results, errors = [], []

    def walk():
        try:
            results.append([step.ipus[0].cycles for _ in range(300) for step in steps])
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=walk) for _ in range(4)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert not errors and len(results) == 4
    assert all(result == expected for result in results)
