"""The README's tour runs as written: every input it uses, it makes itself."""

import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def tour_commands() -> list[str]:
    """The commands of the README's tour, in order, without their comments."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## A tour", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return [line.split("  #", 1)[0].strip() for line in block.splitlines() if line.strip()]


def test_the_tour_runs_as_written(tmp_path):
    commands = tour_commands()
    assert commands[0].startswith("pva simulate --list") and len(commands) >= 15
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for command in commands:
        argv = shlex.split(command)
        if argv[0] == "sqlite3":
            if shutil.which("sqlite3") is None:
                continue
        else:
            assert argv[0] == "pva", command
            argv = [sys.executable, "-m", "pva", *argv[1:]]
        result = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        allowed = (0, 1) if argv[3:4] == ["diff"] or command.startswith("pva diff") else (0,)
        assert result.returncode in allowed, f"{command}\nexit {result.returncode}\n{result.stderr[-2000:]}"
    assert (tmp_path / "mm" / "report.html").stat().st_size > 10_000
    assert (tmp_path / "mm-back.pop").exists()


def test_the_tour_is_short_enough_to_read():
    assert len(tour_commands()) <= 20


def test_command_1_installs_the_extras_the_tour_needs():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    command_1 = next(line for line in text.splitlines() if line.startswith("python3 -m venv") and "simulate" in line)
    installed = set(re.search(r'pip install "\.\[([a-z,]+)\]"', command_1).group(1).split(","))
    # the commands that import an optional dependency, and the extra of pyproject.toml that brings it
    needs = {"query": "query", "plot": "plot"}
    used = {shlex.split(c)[1] for c in tour_commands() if c.startswith("pva ")}
    assert {needs[c] for c in used if c in needs} <= installed
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    assert installed <= set(extras)
