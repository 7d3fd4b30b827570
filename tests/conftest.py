"""Shared fixtures: reports written through the formats writer."""

from __future__ import annotations

import pytest

from reportbuilder import write_sample_report


@pytest.fixture(scope="session")
def sample(tmp_path_factory):
    """The sample report (compilation and execution) and everything written to it."""
    path = tmp_path_factory.mktemp("sample") / "profile.pop"
    return write_sample_report(path)


@pytest.fixture(scope="session")
def compile_only(tmp_path_factory):
    """The sample report without execution data."""
    path = tmp_path_factory.mktemp("compile_only") / "profile.pop"
    return write_sample_report(path, with_execution=False)
