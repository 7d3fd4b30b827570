"""README.md and docs/guide.md run as written: command 1, every Python example and shell command, and every value
a comment says an expression gives (see tests/support/doc_examples.py, which also writes those values)."""

from __future__ import annotations

import pytest
from doc_examples import SKIPPED, blocks, run_documents

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def stated(tmp_path_factory):
    pytest.importorskip("matplotlib")
    return run_documents(tmp_path_factory.mktemp("docs"))


def test_every_block_ran_and_every_stated_value_is_the_one_given(stated):
    wrong = [
        f"{s.document}:{s.line}: says {s.expected!r}, gives {s.actual!r}"
        for s in stated
        if s.ran and s.actual != s.expected
    ]
    assert wrong == [], "run `python tests/support/doc_examples.py --update`:\n" + "\n".join(wrong)
    assert {s.document for s in stated} == {"docs/guide.md"}
    assert len([s for s in stated if s.ran]) >= 5
    assert all(s.ran for s in stated if "guide" in s.document and "no execution data" not in s.comment)


def test_the_guide_states_the_figures_of_a_simulated_run(stated):
    given = {s.comment: s.actual for s in stated if s.ran}
    assert given["'pva simulator'"] == "pva simulator"
    # the stale figures of issue reports past: 127 programs, 161917 cycles
    assert 127 not in given.values() and 161917 not in given.values()


def test_the_readme_python_example_and_tools_block_are_found():
    languages = [b.language for b in blocks("README.md")]
    assert languages.count("python") == 1 and languages.count("bash") >= 3
    text = "".join(b.text for b in blocks("README.md"))
    assert "datasette --immutable mm/profile.pop" in text
    assert 'pip install ".[query,plot]"' in text
    print("skipped:", SKIPPED)
