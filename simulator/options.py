"""Engine options (poplar OptionFlags) and the POPLAR_ENGINE_OPTIONS environment variable."""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import OptionError

ENVIRONMENT_VARIABLE = "POPLAR_ENGINE_OPTIONS"
LEVELS = {"tile": "Tile", "vertex": "Vertex", "device": "Device", "ipu": "Ipu"}

#: Every option the engine accepts: name -> (kind, default, description).
KNOWN: dict[str, tuple[str, Any, str]] = {
    "debug.instrument": ("bool", None, "instrument compute and external exchanges"),
    "debug.instrumentCompute": ("bool", None, "instrument compute cycles (defaults to debug.instrument)"),
    "debug.instrumentExternalExchange": ("bool", None, "instrument host and inter-IPU exchanges"),
    "debug.computeInstrumentationLevel": ("level", "tile", "tile, vertex, device or ipu"),
    "debug.allowOutOfMemory": ("bool", True, "run even if a tile is over its memory (the IPU Model always can)"),
    "autoReport.all": ("bool", False, "write every report and enable instrumentation"),
    "autoReport.directory": ("str", ".", "directory the reports are written to"),
    "autoReport.outputGraphProfile": ("bool", None, "write the compilation part of profile.pop"),
    "autoReport.outputExecutionProfile": ("bool", None, "write the execution part of profile.pop"),
    "autoReport.outputDebugInfo": ("bool", None, "write debug.cbor"),
    "autoReport.outputLoweredVars": ("bool", None, "keep lowered variables in profile.pop (always done)"),
    "autoReport.executionProfileProgramRunCount": ("int", 2, "runs of each program kept in the profile"),
    "profiler.replicaToProfile": ("int", None, "the one replica whose execution is profiled"),
    "profiler.format": ("str", "v3", "profile format; only v3 (profile.pop) is written"),
}


def _bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise OptionError(f"option {name!r} expects true or false, got {value!r}")


def _int(name: str, value: Any) -> int:
    try:
        out = int(str(value).strip())
    except ValueError:
        raise OptionError(f"option {name!r} expects an integer, got {value!r}") from None
    if out < 0:
        raise OptionError(f"option {name!r} expects a non-negative integer, got {value!r}")
    return out


def _parse_one(name: str, value: Any, source: str) -> Any:
    spec = KNOWN.get(name)
    if spec is None:
        close = difflib.get_close_matches(name, KNOWN, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else f"; known options: {', '.join(sorted(KNOWN))}"
        raise OptionError(f"unknown engine option {name!r} in {source}{hint}")
    kind = spec[0]
    if kind == "bool":
        return _bool(name, value)
    if kind == "int":
        return _int(name, value)
    if kind == "level":
        level = str(value).strip().lower()
        if level not in LEVELS:
            raise OptionError(f"option {name!r} expects one of {', '.join(LEVELS)}, got {value!r}")
        return level
    if name == "profiler.format" and str(value) != "v3":
        raise OptionError(f"option 'profiler.format' supports only v3 (profile.pop), got {value!r}")
    return str(value)


def parse_environment(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The options in POPLAR_ENGINE_OPTIONS (a JSON object), or none."""
    environ = os.environ if environ is None else environ
    text = environ.get(ENVIRONMENT_VARIABLE, "")
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OptionError(
            f'{ENVIRONMENT_VARIABLE} must be a JSON object such as \'{{"debug.instrument": "true"}}\'; '
            f"it is not valid JSON ({exc.msg} at character {exc.pos})"
        ) from None
    except RecursionError:
        raise OptionError(f"{ENVIRONMENT_VARIABLE} must be a JSON object; it is nested too deeply to read") from None
    if not isinstance(data, dict):
        raise OptionError(f"{ENVIRONMENT_VARIABLE} must be a JSON object, got {type(data).__name__}")
    return {str(k): _parse_one(str(k), v, ENVIRONMENT_VARIABLE) for k, v in data.items()}


@dataclass
class EngineOptions:
    """Resolved options: what to instrument and which reports to write where."""

    values: dict[str, Any]
    compute: str  # Off, Tile, Vertex, Device, Ipu
    external_exchange: str  # Off, Tile
    graph_profile: bool
    execution_profile: bool
    debug_info: bool
    directory: str
    run_count: int
    replica_to_profile: int | None
    allow_out_of_memory: bool

    @property
    def any_report(self) -> bool:
        return self.graph_profile or self.execution_profile or self.debug_info

    def as_text(self) -> dict[str, str]:
        """Every option with its effective value, as text (compilation_parameters)."""
        out = {}
        for name, (_kind, default, _) in sorted(KNOWN.items()):
            value = self.values.get(name, default)
            if name == "debug.instrument" and value is None:
                value = self.compute != "Off" or self.external_exchange != "Off"
            elif name == "debug.instrumentCompute" and value is None:
                value = self.compute != "Off"
            elif name == "debug.instrumentExternalExchange" and value is None:
                value = self.external_exchange != "Off"
            elif name == "autoReport.outputGraphProfile" and value is None:
                value = self.graph_profile
            elif name == "autoReport.outputExecutionProfile" and value is None:
                value = self.execution_profile
            elif name in ("autoReport.outputDebugInfo",) and value is None:
                value = self.debug_info
            elif value is None:
                continue
            out[name] = ("true" if value else "false") if isinstance(value, bool) else str(value)
        return out


def resolve(options: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None) -> EngineOptions:
    """Options given to the Engine, overridden by POPLAR_ENGINE_OPTIONS, with defaults applied."""
    values: dict[str, Any] = {}
    for name, value in (options or {}).items():
        values[str(name)] = _parse_one(str(name), value, "the Engine options")
    values.update(parse_environment(environ))
    report_all = values.get("autoReport.all", False)
    instrument = values.get("debug.instrument")
    if instrument is None:
        instrument = report_all
    compute_on = values.get("debug.instrumentCompute")
    compute_on = instrument if compute_on is None else compute_on
    external_on = values.get("debug.instrumentExternalExchange")
    external_on = instrument if external_on is None else external_on
    level = LEVELS[values.get("debug.computeInstrumentationLevel", "tile")]

    def flag(name: str) -> bool:
        value = values.get(name)
        return report_all if value is None else value

    replica = values.get("profiler.replicaToProfile")
    return EngineOptions(
        values=values,
        compute=level if compute_on else "Off",
        external_exchange="Tile" if external_on else "Off",
        graph_profile=flag("autoReport.outputGraphProfile"),
        execution_profile=flag("autoReport.outputExecutionProfile"),
        debug_info=flag("autoReport.outputDebugInfo"),
        directory=values.get("autoReport.directory", "."),
        run_count=values.get("autoReport.executionProfileProgramRunCount", 2),
        replica_to_profile=replica,
        allow_out_of_memory=values.get("debug.allowOutOfMemory", True),
    )
