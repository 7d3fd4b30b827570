"""The presets' registry: knobs, the `preset` decorator, and building and running a preset.

A preset builds a graph and its programs from knobs (each with a type, a default and help),
then says which programs to run. `run_preset` compiles, runs and writes the reports. The knobs
the presets share (architecture, tiles, data type), their bounds and `flag` are here too.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..engine import Engine
from ..errors import OptionError
from ..graph import Graph
from ..target import Target


@dataclass(frozen=True)
class Knob:
    """One preset parameter."""

    name: str
    type: Callable[[Any], Any]  # int, float, str or flag
    default: Any
    help: str
    choices: tuple | None = None
    minimum: int | None = 1
    maximum: int | None = None  # counts that set how much the simulator builds or runs are bounded

    @property
    def is_flag(self) -> bool:
        """Whether the knob is yes or no, so that it may be given without a value (meaning yes)."""
        return self.type is flag


#: Upper bounds of the knobs that count what a preset builds or runs, so that no knob makes the
#: simulator build or run without end: an IPU-POD64's IPUs, and counts well past any real model's.
MAX_IPUS = 64
MAX_LAYERS = 1_000
MAX_HEADS = 1_024
MAX_STEPS = 10_000
MAX_RUNS = 1_000


@dataclass
class Built:
    """A built preset: the graph, its programs and how to run them."""

    graph: Graph
    programs: list
    runs: list[int]
    functional: bool = False
    setup: Callable[[Engine], None] | None = None
    notes: dict = field(default_factory=dict)
    printed: list[str] = field(default_factory=list)  # printed before the runs, as the tools print plans


@dataclass(frozen=True)
class Preset:
    name: str
    summary: str
    knobs: tuple[Knob, ...]
    build: Callable[..., Built]


_ARCH = Knob("arch", str, "ipu2", "IPU architecture", ("ipu1", "ipu2", "ipu21"), None)
_TILES = Knob("tiles-per-ipu", int, 0, "shrink each IPU to this many tiles (0: the full IPU)", None, 0)
_DTYPE = Knob("dtype", str, "half", "data type", ("half", "float"), None)


def flag(value: Any) -> bool:
    """A yes-or-no knob's value: true, false, 1, 0, yes, no, on or off, as boost's bool options."""
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise ValueError(value)


flag.__name__ = "bool"

PRESETS: dict[str, Preset] = {}


def preset(name: str, summary: str, *knobs: Knob):
    def register(fn):
        PRESETS[name] = Preset(name, summary, tuple(knobs), fn)
        return fn

    return register


def _target(arch: str, tiles_per_ipu: int, ipus: int = 1, replicas: int = 1, io_tiles: int = 0) -> Target:
    return Target(
        arch, num_ipus=ipus, tiles_per_ipu=tiles_per_ipu or None, replication_factor=replicas, io_tiles=io_tiles
    )


def resolve_knobs(name: str, values: dict[str, Any]) -> dict[str, Any]:
    """The knobs of preset `name` with defaults filled in; unknown or bad knobs raise OptionError."""
    found = PRESETS.get(name)
    if found is None:
        raise OptionError(f"unknown preset {name!r}; available: {', '.join(PRESETS)}")
    spec = {k.name: k for k in found.knobs}
    out = {k.name: k.default for k in found.knobs}
    for key, value in values.items():
        knob = spec.get(key.replace("_", "-"))
        if knob is None:
            raise OptionError(
                f"preset {name!r} has no knob --{key.replace('_', '-')}; its knobs are "
                f"{', '.join('--' + k for k in spec) or 'none'}"
            )
        try:
            if knob.type in (int, float) and isinstance(value, str) and "_" in value:
                raise ValueError(value)  # Python reads 1_0 as 10; a command line should not
            converted = knob.type(value)
            if knob.type is float and not math.isfinite(converted):
                raise ValueError(value)
        except (TypeError, ValueError, OverflowError):
            expected = {int: "a whole number", float: "a number", flag: "true or false"}.get(
                knob.type, knob.type.__name__
            )
            raise OptionError(f"knob --{knob.name} of preset {name!r} expects {expected}, got {value!r}") from None
        if knob.choices and converted not in knob.choices:
            raise OptionError(
                f"knob --{knob.name} of preset {name!r} must be one of {', '.join(map(str, knob.choices))}, "
                f"got {value!r}"
            )
        if knob.minimum is not None and knob.type is int and converted < knob.minimum:
            raise OptionError(f"knob --{knob.name} of preset {name!r} must be at least {knob.minimum}, got {converted}")
        if knob.maximum is not None and knob.type is int and converted > knob.maximum:
            raise OptionError(
                f"knob --{knob.name} of preset {name!r} must be at most {knob.maximum:,}, got {converted:,}"
            )
        out[knob.name] = converted
    return out


def build_preset(name: str, knobs: dict[str, Any] | None = None) -> Built:
    values = resolve_knobs(name, knobs or {})
    return PRESETS[name].build(**{k.replace("-", "_"): v for k, v in values.items()})


def run_preset(
    name: str,
    knobs: dict[str, Any] | None = None,
    directory: str = ".",
    options: dict | None = None,
    timestamp=None,
    progress=None,
    output=None,
    functional: bool | None = None,
) -> Engine:
    """Build, compile and run a preset, writing every report to `directory`; returns the closed engine.

    Sizes within the device's memory may still need more host memory than the process gets (the
    simulator keeps a few 8-byte indices for every element it lays out): that is an OptionError
    naming the preset and its knobs."""
    try:
        return _run_preset(name, knobs, directory, options, timestamp, progress, output, functional)
    except MemoryError:
        given = " ".join(f"--{k} {v}" for k, v in sorted((knobs or {}).items())) or "its defaults"
        raise OptionError(
            f"preset {name!r} with {given}: simulating it needs more host memory than this machine "
            "gives the process; choose smaller sizes"
        ) from None


def _run_preset(name, knobs, directory, options, timestamp, progress, output, functional) -> Engine:
    built = build_preset(name, knobs)
    engine_options = {"autoReport.all": "true", "autoReport.directory": directory}
    engine_options.update(options or {})
    engine = Engine(
        built.graph,
        built.programs,
        engine_options,
        timestamp=timestamp,
        progress=progress,
        output=output,
        functional=built.functional if functional is None else functional,
    )
    engine.program_name = name
    # the plans, as the tools print them, before the runs
    for line in built.printed:
        engine.print_line(line)
    try:
        engine.load()
        if built.setup is not None:
            built.setup(engine)
        total = len(built.runs)
        engine.progress.start("running", total)
        for index in built.runs:
            engine.run(index)
            engine.progress.advance()
        engine.progress.finish()
        engine.close()
    except BaseException:
        engine.abort()
        raise
    return engine


@functools.cache
def listing() -> list[tuple[str, str, tuple[Knob, ...]]]:
    """(name, summary, knobs) of every preset, in registration order."""
    return [(p.name, p.summary, p.knobs) for p in PRESETS.values()]
