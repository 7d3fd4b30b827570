"""`pva simulate`: build and run a bundled model on the IPU-Model simulator and write its reports."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

from ..errors import InvalidInputError, PvaError
from ._common import print_json


def register(sub) -> None:
    parser = sub.add_parser(
        "simulate",
        help="run a bundled model on the IPU-Model simulator and write profile.pop, debug.cbor and a trace",
        description=(
            "Build a preset model (the Poplar tutorials, single matmul or convolution layers, networks), compile "
            "and run it on the bundled IPU-Model simulator, and write the reports to a directory laid out as "
            "Poplar's autoReport.directory. Preset knobs follow the preset name; see --list."
        ),
        epilog="Examples: pva simulate --list\n"
        "          pva simulate --preset matmul --m 512 --k 256 --n 1024 --dtype half --arch ipu2 -o out",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,  # a preset knob such as --n must never be read as an abbreviation of --no-progress
    )
    parser.add_argument("--list", action="store_true", help="list the presets and their knobs")
    parser.add_argument("--preset", metavar="NAME", help="the preset to run")
    parser.add_argument("-o", "--output", metavar="DIR", default=".", help="report directory (default: .)")
    parser.add_argument(
        "--engine-option",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="a Poplar engine option, e.g. debug.computeInstrumentationLevel=vertex (repeatable)",
    )
    parser.add_argument(
        "--timestamp",
        metavar="WHEN",
        help="creation time recorded in the report, ISO 8601 or seconds since 1970 (for byte-identical reruns)",
    )
    parser.add_argument(
        "--progress",
        dest="progress",
        action="store_true",
        default=None,
        help="show a progress bar on standard error even when it is not a terminal",
    )
    parser.add_argument("--no-progress", dest="progress", action="store_false", help="never show a progress bar")
    parser.add_argument(
        "--functional",
        dest="functional",
        action="store_true",
        default=None,
        help="run vertices on data (the tutorials do by default)",
    )
    parser.add_argument("--no-functional", dest="functional", action="store_false", help="time the model only")
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")
    # Preset knobs (--m, --batch-size, ...) are parsed in run(), so that building the parser, and
    # `pva --help`, never imports the simulator.
    parser.set_defaults(run=run, _parser=parser, accepts_extra_arguments=True)


def _listing(as_json: bool) -> int:
    from simulator.presets import listing

    items = listing()
    if as_json:
        print_json(
            [
                {
                    "name": name,
                    "summary": summary,
                    "knobs": [
                        {
                            "name": k.name,
                            "type": k.type.__name__,
                            "default": k.default,
                            "help": k.help,
                            "choices": list(k.choices) if k.choices else None,
                        }
                        for k in knobs
                    ],
                }
                for name, summary, knobs in items
            ]
        )
        return 0
    for name, summary, knobs in items:
        print(f"{name}: {summary}")
        for k in knobs:
            choices = f" ({'|'.join(map(str, k.choices))})" if k.choices else ""
            print(f"    --{k.name:<16} {k.help}{choices}; {_default(k.default)}")
    return 0


def _default(value) -> str:
    """How --list shows a knob's default: the value, or "no default (unset)" when it is empty."""
    if value is None or value == "" or value == [] or value == {}:
        return "no default (unset)"
    return f"default {value}"


def _joined_values(words: list[str], known: dict[str, bool]) -> list[str]:
    """The knob words with each value that starts with '-' (a negative number such as -1e3, or a
    padding such as -1,2), which argparse takes for an option, joined to its knob as --name=value."""
    out: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        name = word[2:] if word.startswith("--") else None
        following = words[i + 1] if i + 1 < len(words) else ""
        if name in known and not known[name] and following.startswith("-") and not following.startswith("--"):
            out.append(f"{word}={following}")
            i += 2
            continue
        out.append(word)
        i += 1
    return out


def _knobs(args, presets) -> dict[str, str]:
    """The preset knobs given after the command's own options, by name."""
    known: dict[str, bool] = {}  # knob name: whether it may be given without a value
    for preset in presets.values():
        for knob in preset.knobs:
            known[knob.name] = known.get(knob.name, True) and knob.is_flag
    parser = args._parser
    knob_parser = argparse.ArgumentParser(prog=parser.prog, add_help=False, allow_abbrev=False)
    knob_parser.error = parser.error  # type: ignore[method-assign]
    for name, is_flag in sorted(known.items()):
        if is_flag:
            knob_parser.add_argument(f"--{name}", dest=name, nargs="?", const="true")
        else:
            knob_parser.add_argument(f"--{name}", dest=name)
    values, unknown = knob_parser.parse_known_args(_joined_values(getattr(args, "extra_arguments", []), known))
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)} (see --list for the presets' knobs)")
    return {name: value for name, value in vars(values).items() if value is not None}


def _previous_trace(directory: str) -> str | None:
    """The host trace the simulator wrote beside the report now in `directory`, if there is one.

    It is the .pvti named, in libpvti's style, for the creation time of that report, which must be
    a report of pva's simulator; a trace of any other name, or one that is not a trace, is not ours.
    """
    import datetime
    import re

    import pva
    from simulator.hosttrace import trace_file_name

    try:
        with pva.openReport(os.path.join(directory, "profile.pop")) as report:
            producer, created = report.metadata.get("producer"), report.metadata.get("created")
        moment = datetime.datetime.fromisoformat(str(created).replace("Z", "+00:00")).timestamp()
    except (PvaError, ValueError, OSError):
        return None
    if producer != "pva simulator":
        return None
    prefix = trace_file_name(moment, 0).removesuffix("_0.pvti")
    for name in sorted(os.listdir(directory)):
        if re.fullmatch(re.escape(prefix) + r"_\d+\.pvti", name):
            try:
                pva.openTrace(os.path.join(directory, name)).close()
            except PvaError:
                continue
            return name
    return None


def _written_files(engine, directory: str | None, previous_trace: str | None) -> list[str]:
    """The reports this run wrote in `directory`; the previous run's trace is removed once the new one is there."""
    from simulator.hosttrace import trace_file_name

    if directory is None:
        return []
    options = engine.options
    trace = trace_file_name(engine.timestamp.timestamp())
    names = [
        name
        for name, wanted in (
            ("profile.pop", options.graph_profile or options.execution_profile),
            ("debug.cbor", options.debug_info),
            (trace, True),
        )
        if wanted and os.path.isfile(os.path.join(directory, name))
    ]
    if previous_trace and previous_trace != trace and trace in names:
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(directory, previous_trace))
    return sorted(names)


def run(args) -> int:
    if args.list:
        return _listing(args.json)
    if not args.preset:
        args._parser.error("give --preset NAME (see --list)")
    from simulator.errors import OptionError
    from simulator.presets import PRESETS, run_preset

    preset = PRESETS.get(args.preset)
    if preset is None:
        raise OptionError(f"unknown preset {args.preset!r}; available: {', '.join(PRESETS)}")
    knobs = _knobs(args, PRESETS)
    options = {}
    for item in args.engine_option:
        key, sep, value = item.partition("=")
        if not sep:
            raise OptionError(f"--engine-option expects KEY=VALUE, got {item!r}")
        options[key.strip()] = value.strip()
    directory = os.path.abspath(args.output)
    if os.path.lexists(directory) and not os.path.isdir(directory):
        raise InvalidInputError(
            f"{directory!r}: {'is a file' if os.path.isfile(directory) else 'is not a directory'}; expected a "
            "directory to write the reports to (or nothing there)",
            directory,
        )
    previous_trace = _previous_trace(directory)
    engine = run_preset(
        args.preset,
        knobs,
        directory,
        options,
        timestamp=args.timestamp,
        progress=args.progress,
        output=None if args.json else sys.stdout,  # plans and printed tensors as they come
        functional=args.functional,
    )
    exe = engine.exe
    # the engine options (POPLAR_ENGINE_OPTIONS, --engine-option) may send the reports elsewhere or
    # turn them off; the cycles are those of the runs the execution profile records
    written = os.path.abspath(engine.options.directory) if engine.options.any_report else None
    profiled = sum(engine.runs_recorded.values())  # executionProfileProgramRunCount runs of each program
    summary = {
        "preset": args.preset,
        "directory": written,
        "files": _written_files(engine, written, previous_trace if written == directory else None),
        "programs": len(exe.progs),
        "compute_sets": len(exe.compute_sets),
        "runs": engine.run_count,
        "profiled_runs": profiled,
        "cycles": int(engine.clock.max()) if profiled and engine.clock.size else None,
        "printed": engine.printed,
    }
    if args.json:
        print_json(summary)
        return 0
    if summary["cycles"] is None:
        cycles = "no run profiled (autoReport options)"
    elif profiled < engine.run_count:
        cycles = f"{summary['cycles']:,} cycles on the busiest IPU in the {profiled} profiled run(s)"
    else:
        cycles = f"{summary['cycles']:,} cycles on the busiest IPU"
    print(
        f"{args.preset}: {summary['programs']:,} programs, {summary['compute_sets']:,} compute sets, "
        f"{summary['runs']} run(s), {cycles}"
    )
    if written:
        print(f"reports in {written}: {', '.join(summary['files'])}")
    else:
        print("no reports written (autoReport options)")
    return 0


def main(argv=None) -> int:  # pragma: no cover - convenience for python -m
    from . import main as cli_main

    return cli_main(["simulate"] + list(sys.argv[1:] if argv is None else argv))


__all__ = ["PvaError", "register", "run"]
