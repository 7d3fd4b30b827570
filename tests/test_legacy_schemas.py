"""The legacy JSON Schemas: cases.json checked by pva's checker and by the reference jsonschema."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from formats.legacy.schema_check import Checker, SchemaViolationError, check_document, load_schema
from formats.streaming.json_events import json_events
from formats.streaming.tree import build_tree, location

CASES = json.loads(resources.files("schemas").joinpath("legacy", "cases.json").read_text(encoding="utf-8"))["cases"]


def _ids(case):
    return f"{case['schema']}:{case['description']}"


def _as_tree(document):
    """The document as the converter sees it: parsed from JSON text, number arrays as Runs."""
    import io

    return build_tree(json_events(io.BytesIO(json.dumps(document).encode()), None), "case.json")


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_case_agrees_with_pva_checker(case):
    from formats.errors import InvalidInputError

    checker = Checker(load_schema(case["schema"]))
    try:
        tree = _as_tree(case["document"])
    except InvalidInputError as exc:  # the JSON reader itself refuses numbers beyond 64 bits
        assert not case["valid"] and f"{case['location']} " in str(exc), str(exc)
        return
    if case["valid"]:
        checker.check(tree)
        return
    with pytest.raises(SchemaViolationError) as caught:
        checker.check(tree)
    assert location(caught.value.parts) == case["location"]


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_case_agrees_with_reference_jsonschema(case):
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(load_schema(case["schema"]))
    errors = list(validator.iter_errors(case["document"]))
    assert (not errors) == case["valid"], [e.message for e in errors]


def test_schemas_are_valid_draft_2020_12():
    jsonschema = pytest.importorskip("jsonschema")
    for name in ("graph_profile", "execution_profile"):
        jsonschema.Draft202012Validator.check_schema(load_schema(name))


def test_cases_cover_both_schemas_and_both_outcomes():
    seen = {(c["schema"], c["valid"]) for c in CASES}
    assert seen == {
        ("graph_profile", True),
        ("graph_profile", False),
        ("execution_profile", True),
        ("execution_profile", False),
    }


def test_unknown_keys_are_reported_with_their_location():
    tree = _as_tree(
        {
            "target": {"numIPUs": 1, "tilesPerIPU": 2, "newField": 3},
            "programs": [{"type": "Sequence", "colour": "red"}],
            "extra": [1, 2],
        }
    )
    result = check_document(tree, "graph_profile", name="g.json")
    found = {location(parts): value for parts, value in result.unknown}
    assert set(found) == {"$.target.newField", "$.programs[0].colour", "$.extra"}
    assert found["$.programs[0].colour"] == "red"


def test_violation_message_names_file_location_and_values():
    tree = _as_tree({"target": {"numIPUs": 1, "tilesPerIPU": 2}, "memory": {"byTile": {"total": [3, 4, -7]}}})
    with pytest.raises(Exception) as caught:
        check_document(tree, "graph_profile", name="g.json")
    assert str(caught.value) == "'g.json': $.memory.byTile.total[2]: expected a number >= 0, found the number -7"
