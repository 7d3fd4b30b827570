"""The code blocks of README.md and docs/guide.md, and the values their comments say they give.

A line of a Python block that is one expression followed by a comment holding a Python literal
(`report.row_count("programs")  # 149`, `print(names)  # ['a', 'b']`) states the value the
expression gives (for `print(x)`, the value of x). Running the blocks records each such value,
so a test can compare them, and

    python tests/support/doc_examples.py --update

runs the blocks of both files (in a temporary directory, with the inputs they name) and writes
the values they give into the comments: the printed values of the docs are generated, not typed.
"""

from __future__ import annotations

import ast
import dataclasses
import io
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
import tokenize
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[2]
#: The documents whose blocks run, relative to ROOT.
DOCUMENTS = ("README.md", "docs/guide.md")


@dataclasses.dataclass
class Block:
    """A fenced code block: its language, text and the line of the document its text starts on."""

    document: str
    language: str
    text: str
    line: int


@dataclasses.dataclass
class Stated:
    """A value a comment states, and the value the expression gave when the block ran."""

    document: str
    line: int
    comment: str
    expected: Any
    actual: Any = None
    ran: bool = False


def blocks(document: str) -> list[Block]:
    """Every fenced block of a document, in order."""
    text = (ROOT / document).read_text(encoding="utf-8")
    found = []
    for match in re.finditer(r"^```(\w+)\n(.*?)^```", text, re.S | re.M):
        line = text.count("\n", 0, match.start(2)) + 1
        found.append(Block(document, match.group(1), match.group(2), line))
    return found


def _comments(text: str) -> dict[int, tuple[int, str]]:
    """line -> (column, text) of each comment of Python source."""
    out = {}
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT:
            out[token.start[0]] = (token.start[1], token.string[1:].strip())
    return out


def _literal(comment: str) -> tuple[bool, Any]:
    try:
        value = ast.literal_eval(comment)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False, None
    # a literal with `...` in it describes a shape ({'vertex_type': ..., ...}), not a value
    return "Ellipsis" not in repr(value), value


class _Recorder(ast.NodeTransformer):
    """Wraps each one-line expression statement that has a literal comment in a call that records its value."""

    def __init__(self, block: Block, stated: list[Stated]) -> None:
        self.block, self.stated = block, stated
        self.comments = _comments(block.text)

    def visit_Expr(self, node: ast.Expr) -> ast.AST:
        comment = self.comments.get(node.lineno)
        if comment is None or node.end_lineno != node.lineno:
            return node
        ok, expected = _literal(comment[1])
        if not ok:
            return node
        value = node.value
        is_print = isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "print"
        if is_print:
            if len(value.args) != 1 or value.keywords:
                return node
            value = value.args[0]
        index = len(self.stated)
        self.stated.append(Stated(self.block.document, self.block.line + node.lineno - 1, comment[1], expected))
        call = ast.Call(ast.Name("__doc_value__", ast.Load()), [ast.Constant(index), value], [])
        node.value = ast.Call(ast.Name("print", ast.Load()), [call], []) if is_print else call
        return ast.fix_missing_locations(node)


def run_python(block: Block, namespace: dict, stated: list[Stated]) -> None:
    """Run a Python block in `namespace`, recording the values its literal comments state."""
    tree = _Recorder(block, stated).visit(ast.parse(block.text))

    def record(index: int, value: Any) -> Any:
        stated[index].actual, stated[index].ran = value, True
        return value

    namespace["__doc_value__"] = record
    exec(compile(tree, f"{block.document}:{block.line}", "exec"), namespace)


def shell_lines(block: Block) -> list[str]:
    """The commands of a shell block, without comments and blank lines."""
    lines = []
    for raw in block.text.splitlines():
        line = raw.split("  #", 1)[0].strip()
        if line and not line.startswith("#"):
            lines.append(line)
    return lines


def run_shell(command: str, cwd: pathlib.Path, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run a documented command line with this interpreter's `pva` and tools first on PATH."""
    bin_dir = os.path.dirname(sys.executable)
    env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""), PYTHONPATH=str(ROOT))
    return subprocess.run(
        command, shell=True, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def prepare(workdir: pathlib.Path) -> None:
    """The inputs the examples name and do not make themselves: profile.pop, debug.cbor and host.pvti.

    They are a simulated mnist-mlp run (several runs, debug information, a host trace), as the
    guide's `pva simulate --preset mnist-mlp --tiles-per-ipu 64 -o run` makes it; and mm/, as the
    README's tour makes it.
    """
    for command in (
        "pva simulate --preset mnist-mlp --tiles-per-ipu 64 -o prepared",
        "pva simulate --preset matmul --m 512 --k 256 --n 512 -o mm",
    ):
        done = run_shell(command, workdir)
        assert done.returncode == 0, done.stderr
    prepared = workdir / "prepared"
    shutil.copy(prepared / "profile.pop", workdir / "profile.pop")
    shutil.copy(prepared / "debug.cbor", workdir / "debug.cbor")
    (trace,) = prepared.glob("*.pvti")
    shutil.copy(trace, workdir / "host.pvti")


def formatted(value: Any) -> str:
    """A value as a doc comment writes it."""
    return repr(value)


def update(stated: list[Stated]) -> int:
    """Write the values given into the comments that state them; returns how many changed."""
    changed = 0
    for document in DOCUMENTS:
        path = ROOT / document
        lines = path.read_text(encoding="utf-8").split("\n")
        for s in stated:
            if s.document != document or not s.ran or s.actual == s.expected:
                continue
            line = lines[s.line - 1]
            at = line.rindex("# " + s.comment)
            lines[s.line - 1] = line[:at] + "# " + formatted(s.actual)
            changed += 1
        path.write_text("\n".join(lines), encoding="utf-8")
    return changed


def run_documents(workdir: pathlib.Path) -> list[Stated]:
    """Run the Python and shell blocks of the documents in `workdir`; the values stated and given.

    README.md: command 1 after its installation, the Python example and the tools block (the tour
    has its own test, tests/test_readme_tour.py). docs/guide.md: every block, in order.
    """
    prepare(workdir)
    stated: list[Stated] = []
    for document in DOCUMENTS:
        namespace: dict = {"__name__": "__doc__"}
        for block in blocks(document):
            if block.language == "python":
                cwd = os.getcwd()
                os.chdir(workdir)
                try:
                    run_python(block, namespace, stated)
                finally:
                    os.chdir(cwd)
            elif block.language in ("bash", "sh"):
                for command in shell_lines(block):
                    run_documented_command(document, command, workdir)
    return stated


def run_documented_command(document: str, command: str, workdir: pathlib.Path) -> None:
    """Run one command of a shell block as written, or skip it with the reason in `SKIPPED`."""
    words = shlex.split(command)
    if document == "README.md" and "pip install" in command:
        if "pytest" in command:
            return  # command 2 runs this very suite
        command = command.split("&& ", 3)[-1]  # command 1 after its set-up: the venv is this one
    elif document == "README.md" and words[0] == "pva":
        return  # the tour: tests/test_readme_tour.py runs it
    if words[0] == "sqlite3" and shutil.which("sqlite3") is None:
        SKIPPED.append(f"{command}: no sqlite3 shell")
        return
    if words[0] == "datasette":
        if shutil.which("datasette", path=os.path.dirname(sys.executable)) is None:
            SKIPPED.append(f"{command}: datasette is not installed")
            return
        command += " --get /-/databases.json"  # the same arguments, answered without a server
    done = run_shell(command, workdir)
    assert done.returncode == 0, f"{document}: {command}\nexit {done.returncode}\n{done.stderr[-2000:]}"


#: Commands not run, with the reason.
SKIPPED: list[str] = []


def main() -> int:
    import tempfile

    if sys.argv[1:] != ["--update"]:
        print(__doc__)
        return 2
    with tempfile.TemporaryDirectory() as directory:
        workdir = pathlib.Path(directory)
        stated = run_documents(workdir)
    print(f"{update(stated)} value(s) written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
