"""The built wheel is complete: schemas ship inside it and the console script works."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> pathlib.Path:
    out = tmp_path_factory.mktemp("wheel")
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(out), str(ROOT)],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        pytest.fail(f"building the wheel failed:\n{result.stdout}\n{result.stderr}")
    (path,) = out.glob("pva-*.whl")
    return path


def test_wheel_contains_packages_and_schemas(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for expected in (
        "pva/__init__.py",
        "formats/__init__.py",
        "simulator/__init__.py",
        "schemas/profile.sql",
        "schemas/profile_matrices.json",
        "pva/py.typed",
    ):
        assert expected in names, expected
    assert not any(name.startswith("tests/") for name in names)


def test_installed_wheel_works_outside_the_source_tree(wheel, tmp_path, sample):
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
    )
    env = dict(os.environ, PYTHONPATH=str(target))
    code = (
        "import pva, formats.pop.schema as s; "
        f"assert pva.__file__.startswith({str(target)!r}), pva.__file__; "
        f"print(len(s.profile_schema().tables), pva.openReport({sample.path!r}).compilation.target.numTiles)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    from formats.pop.schema import profile_schema

    assert out.stdout.split() == [str(len(profile_schema().tables)), "8"]
    cli = subprocess.run(
        [sys.executable, "-m", "pva", "info", "--json", sample.path],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert cli.returncode == 0, cli.stderr
    assert '"num_tiles": 8' in cli.stdout
