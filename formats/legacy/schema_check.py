"""Checking legacy documents against the JSON Schemas in schemas/legacy.

The checker implements the part of JSON Schema (draft 2020-12) those schemas use: type, enum,
properties, additionalProperties, required, items, minimum, maximum, anyOf, and local $ref /
$defs. It understands `Run` values (arrays of numbers kept out of memory) through their type
summary, so checking never reads a per-tile array back. Besides the first violation it reports
the keys the schema does not describe, which the converter keeps and counts.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from ..errors import InvalidInputError
from ..streaming.runs import Run
from ..streaming.tree import describe, location

#: Schema files shipped in schemas/legacy, by short name.
SCHEMA_FILES = {
    "graph_profile": "graph_profile.schema.json",
    "execution_profile": "execution_profile.schema.json",
}


@functools.cache
def load_schema(name: str) -> dict:
    """A schema of schemas/legacy by short name (graph_profile, execution_profile)."""
    text = resources.files("schemas").joinpath("legacy", SCHEMA_FILES[name]).read_text(encoding="utf-8")
    return json.loads(text)


class SchemaViolationError(ValueError):
    """A value does not match the schema; `parts` locate it."""

    def __init__(self, parts: list, message: str) -> None:
        super().__init__(message)
        self.parts = list(parts)
        self.message = message


@dataclass
class CheckResult:
    """Keys found that the schema does not describe: (location parts, value) pairs."""

    unknown: list[tuple[list, Any]] = field(default_factory=list)


_JSON_TYPES = {
    "object": "an object",
    "array": "an array",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "null": "null",
}


def _is_type(value: Any, kind: str) -> bool:
    if kind == "object":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, (list, Run))
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "null":
        return value is None
    if isinstance(value, bool):
        return False
    if kind == "number":
        return isinstance(value, (int, float))
    if kind == "integer":
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    raise ValueError(f"unsupported schema type {kind!r}")


class Checker:
    """Checks documents against one schema (with its $defs)."""

    def __init__(self, schema: dict) -> None:
        self.root = schema

    def _resolve(self, schema: dict) -> dict:
        seen = 0
        while "$ref" in schema:
            ref = schema["$ref"]
            if not ref.startswith("#/"):
                raise ValueError(f"only local $ref is supported, got {ref!r}")
            target: Any = self.root
            for part in ref[2:].split("/"):
                target = target[part]
            extra = {k: v for k, v in schema.items() if k != "$ref"}
            schema = {**target, **extra} if extra else target
            seen += 1
            if seen > 64:
                raise ValueError(f"$ref loop at {ref!r}")
        return schema

    def check(self, value: Any) -> CheckResult:
        """Raise SchemaViolationError at the first mismatch; return the unknown keys otherwise."""
        result = CheckResult()
        self._check(value, self.root, [], result)
        return result

    def _check(self, value: Any, schema: dict, parts: list, result: CheckResult) -> None:
        schema = self._resolve(schema)
        types = schema.get("type")
        if types is not None:
            kinds = [types] if isinstance(types, str) else types
            if not any(_is_type(value, k) for k in kinds):
                wanted = " or ".join(_JSON_TYPES.get(k, k) for k in kinds)
                raise SchemaViolationError(parts, f"expected {wanted}, found {describe(value)}")
        if "enum" in schema and not any(_same(value, option) for option in schema["enum"]):
            options = ", ".join(json.dumps(o) for o in schema["enum"])
            raise SchemaViolationError(parts, f"expected one of {options}, found {describe(value)}")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            self._bounds(value, schema, parts)
        if "anyOf" in schema:
            failures = []
            for option in schema["anyOf"]:
                try:
                    self._check(value, option, parts, CheckResult())
                    break
                except SchemaViolationError as exc:
                    failures.append(exc.message)
            else:
                raise SchemaViolationError(parts, "; or ".join(failures))
        if isinstance(value, dict):
            self._object(value, schema, parts, result)
        elif isinstance(value, Run):
            if "items" in schema:
                self._run(value, self._resolve(schema["items"]), parts)
        elif isinstance(value, list) and "items" in schema:
            items = schema["items"]
            for index, item in enumerate(value):
                parts.append(index)
                self._check(item, items, parts, result)
                parts.pop()

    def _bounds(self, value: int | float, schema: dict, parts: list) -> None:
        low = schema.get("minimum")
        high = schema.get("maximum")
        if low is not None and value < low:
            raise SchemaViolationError(parts, f"expected a number >= {low}, found {describe(value)}")
        if high is not None and value > high:
            raise SchemaViolationError(parts, f"expected a number <= {high}, found {describe(value)}")

    def _object(self, value: dict, schema: dict, parts: list, result: CheckResult) -> None:
        for key in schema.get("required", ()):
            if key not in value:
                raise SchemaViolationError(parts, f"the required key {key!r} is missing")
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            parts.append(key)
            if key in properties:
                self._check(item, properties[key], parts, result)
            elif extra is False:
                raise SchemaViolationError(parts, f"unexpected key {key!r}")
            elif extra is True:
                result.unknown.append((list(parts), item))
            else:
                self._check(item, extra, parts, result)
            parts.pop()

    def _run(self, run: Run, items: dict, parts: list) -> None:
        """Check an array of numbers against an items schema using its summary."""
        if run.count == 0:
            return
        types = items.get("type")
        kinds = [types] if isinstance(types, str) else (types or [])
        if kinds and not any(k in ("number", "integer") for k in kinds):
            self._check(run.array()[0].item(), items, parts + [0], CheckResult())
        if "integer" in kinds and "number" not in kinds and not run.is_integral:
            values = run.array()
            index = int((values % 1 != 0).argmax())
            raise SchemaViolationError(parts + [index], f"expected an integer, found {describe(values[index].item())}")
        low, high = items.get("minimum"), items.get("maximum")
        if (low is not None and run.minimum < low) or (high is not None and run.maximum > high):
            values = run.array()
            bad = values < low if low is not None and run.minimum < low else values > high
            index = int(bad.argmax())
            self._bounds(values[index].item(), items, parts + [index])
        if "enum" in items or "anyOf" in items:
            for index, number in enumerate(run.tolist()):
                self._check(number, items, parts + [index], CheckResult())


def _same(value: Any, option: Any) -> bool:
    if isinstance(value, bool) or isinstance(option, bool):
        return value is option
    return (
        value == option and type(value) in (type(option), int, float)
        if isinstance(option, (int, float))
        else value == option
    )


def check_document(value: Any, schema_name: str, *, name: str, prefix: list | tuple = ()) -> CheckResult:
    """Check a document against a legacy schema; raise InvalidInputError naming file and location."""
    try:
        result = Checker(load_schema(schema_name)).check(value)
    except SchemaViolationError as exc:
        where = location(list(prefix) + exc.parts)
        raise InvalidInputError(f"{name!r}: {where}: {exc.message}", name) from None
    if prefix:
        result.unknown = [(list(prefix) + parts, item) for parts, item in result.unknown]
    return result
