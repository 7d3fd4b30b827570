"""Start-up of the command line: whole processes, beside the sqlite3 shell and a bare Python."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from .timing import alternate

#: Each command must finish, as a whole process, within this many milliseconds (issue 16).
STARTUP_LIMIT_MS = 150.0


def _command(*args: str) -> list[str]:
    """The `pva` console script of this Python environment, or `python -m pva` without one."""
    script = os.path.join(os.path.dirname(sys.executable), "pva")
    return [script, *args] if os.path.exists(script) else [sys.executable, "-m", "pva", *args]


def _installed_env() -> dict[str, str]:
    """The environment of an installed package: Python may cache bytecode, as pip compiles it on install."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _runner(argv: list[str]):
    env = _installed_env()

    def run() -> int:
        return subprocess.run(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=env
        ).returncode

    return run


def commands(report: str) -> dict[str, list[str]]:
    """The measured commands and the baselines, by name."""
    sides = {
        "pva --help": _command("--help"),
        "pva info": _command("info", report),
        'pva sql "select 1"': _command("sql", report, "select 1"),
        "python -c pass": [sys.executable, "-c", "pass"],
    }
    shell = shutil.which("sqlite3")
    if shell:
        sides['sqlite3 "select 1"'] = [shell, "-readonly", report, "select 1"]
    return sides


def measure(report: str, repeat: int) -> dict[str, float]:
    """Median milliseconds of each command, run alternately `repeat` times after an untimed first round.

    The first round writes the bytecode cache a pip install would have written.
    """
    argvs = commands(report)
    medians, _times, _results = alternate({name: _runner(argv) for name, argv in argvs.items()}, repeat)
    return {name: seconds * 1e3 for name, seconds in medians.items()}
