"""The commands call only the public API: nothing from formats but its errors and constants, no private names."""

from __future__ import annotations

import ast
import pathlib

import pytest

CLI = pathlib.Path(__file__).resolve().parent.parent / "pva" / "cli"
#: What a command may import from formats.
ALLOWED_MODULES = {
    "formats.errors",
    "formats.constants",
    "formats.json_values",  # the one JSON-plain walker, shared by formats and the table writer
    "formats.progress",  # the one progress reporter on a terminal
}
ALLOWED_NAMES = {("formats", "__version__")}


def violations(source: str) -> list[str]:
    """What a command module does that only the library may: import formats internals, touch private names."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [
                f"line {node.lineno}: import {a.name}"
                for a in node.names
                if a.name.split(".")[0] == "formats" and a.name not in ALLOWED_MODULES
            ]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "formats":
            if node.module not in ALLOWED_MODULES:
                found += [
                    f"line {node.lineno}: from {node.module} import {a.name}"
                    for a in node.names
                    if (node.module, a.name) not in ALLOWED_NAMES
                ]
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            own = isinstance(node.value, ast.Name) and node.value.id == "args"  # the command's own parsed arguments
            if not own:
                found.append(f"line {node.lineno}: .{node.attr}")
        elif isinstance(node, ast.Name) and node.id == "ProfileReader":
            found.append(f"line {node.lineno}: ProfileReader")
    return found


def test_the_scan_finds_what_it_forbids():
    source = (
        "import formats.pop.check\nfrom formats.pop.reader import ProfileReader\nfrom formats import __version__\n"
        "from formats.errors import PvaError\ndef run(args, report):\n    args._parser\n    return report._reader.metadata\n"
    )
    assert violations(source) == [
        "line 1: import formats.pop.check",
        "line 2: from formats.pop.reader import ProfileReader",
        "line 7: ._reader",
    ]


@pytest.mark.parametrize("module", [p.name for p in sorted(CLI.glob("*.py"))])
def test_command_uses_only_the_public_api(module):
    found = violations((CLI / module).read_text())
    assert not found, f"pva/cli/{module}: " + "; ".join(found)
