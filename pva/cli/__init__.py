"""The `pva` command line: a thin shell over the public library; one module per command."""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import re
import sys

from formats import __version__

from ..errors import PvaError

#: The command modules of pva/cli, in `pva --help` order (a test checks every module is listed).
COMMANDS = (
    "info",
    "summary",
    "sql",
    "tables",
    "simulate",
    "convert",
    "export",
    "check",
    "dataset",
    "diff",
    "estimate",
    "html",
    "optime",
    "plot",
    "query",
)


def command_modules() -> list[str]:
    """Names of the command modules in pva/cli, in help order."""
    return list(COMMANDS)


EXIT_OK = 0
EXIT_FLAGGED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 3


_INVALID_CHOICE = re.compile(r"argument COMMAND: invalid choice: '([^']*)'")


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors exit with status 2 and a one-line hint."""

    #: The parser of each command, by name (set on the top-level parser).
    commands: dict[str, argparse.ArgumentParser] = {}

    def error(self, message: str):  # type: ignore[override]
        self.print_usage(sys.stderr)
        match = _INVALID_CHOICE.match(message)
        if match:
            commands = command_modules()
            close = difflib.get_close_matches(match.group(1), commands, n=1)
            hint = f"did you mean {close[0]}?" if close else "run 'pva --help' for the list"
            message = f"unknown command {match.group(1)!r}; {hint}"
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message}\n")


def build_parser(only: str | None = None) -> _Parser:
    """The parser of every command, or of the command `only` alone (a command run needs no other)."""
    parser = _Parser(
        prog="pva",
        description="Read, query, convert and compare accelerator profile reports (profile.pop).",
        epilog="Run 'pva COMMAND --help' for a command's options and an example.",
    )
    parser.add_argument("--version", action="version", version=f"pva {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in [only] if only in COMMANDS else command_modules():
        importlib.import_module(f"pva.cli.{name}").register(sub)
    parser.commands = dict(sub.choices)
    for command in parser.commands.values():
        _add_force(command)
    return parser


#: A usage naming the option -o (a command that writes a file or directory).
_WRITES_OUTPUT = re.compile(r"[\s\[]-o\s")
#: Arguments that name the input files of a command: no output of the command replaces them.
_INPUT_ARGUMENTS = ("report", "reports", "inputs", "a", "b")


def _add_force(command: argparse.ArgumentParser) -> None:
    """Give every command that writes a file named by -o the --force that lets it replace a file pva did not write."""
    if _WRITES_OUTPUT.search(command.format_usage()):
        command.add_argument(
            "--force",
            action="store_true",
            help="replace the -o file even if pva did not write it (never one of the inputs)",
        )


def _run(args: argparse.Namespace) -> int:
    """Run the command under the output rules: its inputs are never replaced; --force names its -o file."""
    from ..file_operations import output_rules

    inputs: list[str] = []
    for name in _INPUT_ARGUMENTS:
        value = getattr(args, name, None)
        inputs.extend([value] if isinstance(value, str) else value if isinstance(value, list) else [])
    forced = [args.output] if getattr(args, "force", False) and getattr(args, "output", None) else []
    with output_rules(inputs=inputs, force=forced):
        return int(args.run(args) or EXIT_OK)


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 1 flagged, 2 bad usage or input, 3 a bug)."""
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv[0] if argv else None)
    args, unknown = parser.parse_known_args(argv)
    if unknown and getattr(args, "accepts_extra_arguments", False):
        args.extra_arguments = unknown
    elif unknown:
        # Name the subcommand and show its usage, not the top-level one.
        owner = parser.commands.get(args.command, parser)
        owner.error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.command is None:
        parser.print_help()
        return EXIT_OK
    try:
        return _run(args)
    except PvaError as exc:
        print(f"pva {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        return EXIT_OK
    except KeyboardInterrupt:
        print(f"pva {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if os.environ.get("PVA_DEBUG"):
            raise
        print(
            f"pva {args.command}: internal error: {type(exc).__name__}: {exc} (this is a bug in pva; "
            f"set PVA_DEBUG=1 for the traceback and please report it)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
