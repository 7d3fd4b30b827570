"""The hostile inputs at the sizes of a real attack, each command run in a child process: the exit
status a user relies on, and the child's peak resident memory within the bound docs/reliability.md
states (a measurement of memory, not of time; the timeout only guards against a hang)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import hostile_inputs
import pytest

pytestmark = pytest.mark.slow

#: The child reports its own peak: VmHWM, the high-water mark of this process image (ru_maxrss
#: would also count the parent's memory at the fork that started it).
_CHILD = (
    "import json, resource, sys\n"
    "from pva.cli import main\n"
    "status = main(sys.argv[1:])\n"
    "sys.stdout.flush()\n"
    "try:\n"
    "    with open('/proc/self/status') as f:\n"
    "        peak = next(int(l.split()[1]) * 1024 for l in f if l.startswith('VmHWM:'))\n"
    "except (OSError, StopIteration):\n"
    "    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024\n"
    "print(json.dumps({'status': status, 'peak': peak}), file=sys.stderr)\n"
)
#: Peak resident memory a command may reach on these inputs [bytes]: the interpreter, numpy, pyarrow
#: and DuckDB loaded, and nothing in proportion to what the input declares.
_BOUND = 600 << 20


def _run(*args: str, cwd=None) -> tuple[int, int, str]:
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    *messages, last = child.stderr.strip().splitlines()
    outcome = json.loads(last)
    return outcome["status"], outcome["peak"], "\n".join(messages)


@pytest.fixture(scope="module")
def full_size(tmp_path_factory):
    """A report of a 1,472-tile IPU (the mnist-mlp preset), as the attacks started from."""
    from simulator.presets import run_preset

    directory = tmp_path_factory.mktemp("full")
    run_preset("mnist-mlp", {}, str(directory), timestamp=1_700_000_000.0)
    return directory / "profile.pop"


def test_twenty_thousand_categories(full_size, tmp_path):
    path = hostile_inputs.many_categories(full_size, tmp_path / "cats.pop", 20_000)
    for command in (["summary", path], ["html", path, "-o", str(tmp_path / "r.html")], ["check", path]):
        status, peak, err = _run(*command)
        assert status == (1 if command[0] == "check" else 2), err
        assert peak < _BOUND, (command[0], peak)


def test_planted_columns_of_900_mb(full_size, tmp_path):
    path = hostile_inputs.planted_generated_columns(full_size, tmp_path / "gen.pop", size=900_000_000)
    cases = [
        (["query", path, "SELECT * FROM target", "--format", "csv"], 0),
        (["dataset", "add", str(tmp_path / "fleet"), path, "--no-progress"], 1),
        (["check", path], 1),
        (["summary", path], 0),
    ]
    for command, expected in cases:
        status, peak, err = _run(*command)
        assert status == expected, (command[0], err)
        assert peak < _BOUND, (command[0], peak)


def test_a_query_whose_plan_doubles_at_each_of_20_levels(full_size):
    query = hostile_inputs.nested_union_query(20)
    status, peak, err = _run("query", str(full_size), query, "--timeout", "10", "--memory-limit", "200MB")
    assert status == 2 and "expands to more than" in err
    assert peak < _BOUND


def test_a_doubling_dag_of_40_levels(full_size, tmp_path):
    path = hostile_inputs.doubling_dag(full_size, tmp_path / "dag.pop", 40)
    status, peak, err = _run("estimate", path, "--json")
    assert status == 0, err
    assert peak < _BOUND
