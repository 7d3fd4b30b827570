"""Shared fixtures: reports written through the formats writer."""

from __future__ import annotations

import pathlib
import sys

import pytest

# Shared helpers (report builders, corpora, workers) live in tests/support and are imported by name.
sys.path.insert(0, str(pathlib.Path(__file__).parent / "support"))

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


@pytest.fixture(scope="session")
def simulated(tmp_path_factory):
    """Directory of a small simulated training run (mnist-mlp on 64-tile IPUs): profile.pop, debug.cbor, trace."""
    from simulator.presets import run_preset

    directory = tmp_path_factory.mktemp("simulated")
    run_preset("mnist-mlp", {"tiles-per-ipu": 64}, str(directory), timestamp=1_700_000_000.0)
    return directory


@pytest.fixture(scope="session")
def converted(tmp_path_factory):
    """A report converted from a legacy v1 JSON profile (graph and COMPUTE_SETS execution profile)."""
    import legacy_builders

    from formats.convert import convert

    directory = tmp_path_factory.mktemp("converted")
    graph = legacy_builders.complete_graph_profile()
    source = legacy_builders.write_json(
        directory / "profile.json",
        {"graphProfile": graph, "executionProfile": legacy_builders.execution_profile(graph, "COMPUTE_SETS")},
    )
    output = directory / "profile.pop"
    convert([source], output)
    return output


#: Modules whose tests run for many seconds each (hostile corpora, kills, concurrency, resource
#: bounds, fuzzing, the benchmark smoke run). `python -m pytest -m "not slow"` leaves them out.
SLOW_MODULES = {
    "test_hostile_reports",
    "test_crash_safety",
    "test_concurrency",
    "test_resource_bounds",
    "test_fuzz_reader",
    "test_fuzz_converters",
    "test_benchmarks_smoke",
    "test_readme_tour",
    "test_html_browser",
    "test_simulator_calibration",
    "test_packaging",
}


def pytest_collection_modifyitems(config, items):
    """Mark every test of the slow modules `slow`."""
    for item in items:
        if item.module is not None and item.module.__name__.rsplit(".", 1)[-1] in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
