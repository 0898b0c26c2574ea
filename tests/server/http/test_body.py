"""Body field validation and the schemas generated from the same field lists."""

from __future__ import annotations

import pytest

from fimble.server.http.body import Field, HttpError, object_schema, parse_fields

FIELDS = (
    Field("n", "integer", minimum=0, maximum=10),
    Field("t", "number"),
    Field("s", "string"),
    Field("b", "boolean"),
    Field("stop", "stop"),
    Field("prompt", "prompt"),
    Field("extra", "extra"),
    Field("opts", "object"),
    Field("req", "string", required=True),
)


def test_valid_values_are_converted() -> None:
    body = {
        "req": "r",
        "n": 3.0,
        "t": 1,
        "stop": "\n",
        "prompt": ["p"],
        "extra": [{"filename": "a", "text": "x"}],
        "s": None,
        "unknown": [1],
    }
    out = parse_fields(body, FIELDS)
    assert out == {"req": "r", "n": 3, "t": 1, "stop": ("\n",), "prompt": "p", "extra": (("a", "x"),)}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({}, "'req' is required"),
        ({"req": 1}, "'req' must be a string"),
        ({"req": "r", "n": True}, "'n' must be a integer"),
        ({"req": "r", "n": 1.5}, "must be an integer"),
        ({"req": "r", "n": 11}, "at most 10"),
        ({"req": "r", "t": "1"}, "'t' must be a number"),
        ({"req": "r", "b": 0}, "true or false"),
        ({"req": "r", "stop": [1]}, "list of strings"),
        ({"req": "r", "prompt": ["a", "b"]}, "token ids are not accepted"),
        ({"req": "r", "extra": [{"text": 3}]}, "extra[0]"),
        ({"req": "r", "extra": [{"text": "x", "filename": 2}]}, "extra[0].filename"),
        ({"req": "r", "opts": []}, "'opts' must be an object"),
    ],
)
def test_wrong_values_are_422_naming_the_field(body: dict[str, object], message: str) -> None:
    with pytest.raises(HttpError, match=message.replace("[", r"\[").replace("]", r"\]")) as err:
        parse_fields(body, FIELDS)
    assert err.value.status == 422


def test_schema_allows_null_for_optional_fields_and_extra_fields() -> None:
    schema = object_schema(FIELDS)
    assert schema["required"] == ["req"] and schema["additionalProperties"] is True
    assert schema["properties"]["n"] == {"type": ["integer", "null"], "minimum": 0, "maximum": 10}
    assert {"type": "null"} in schema["properties"]["stop"]["anyOf"]
    assert schema["properties"]["req"] == {"type": "string"}
