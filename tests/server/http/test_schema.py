"""Schemathesis against the OpenAPI document on the real small model: whatever it sends (valid data
and deliberately invalid data), no 5xx, and every response's status, content type, headers and body
conform to the schema.

Cases are generated with schemathesis' Python API and hypothesis directly (its pytest plugin does
not load under this pytest); the schema is the one ``/openapi.json`` serves, checked equal below.
After each operation's cases the server must still answer a normal completion as it did before any
(greedy decoding: the same text). ``FIMBLE_FUZZ_HTTP_EXAMPLES`` raises the number of cases per
operation and mode (``make fuzz``), ``FIMBLE_FUZZ_HTTP_REPORT`` writes the counts as JSON.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from fimble.server.http import HttpSettings
from fimble.server.http.app import ENDPOINTS
from fimble.server.http.openapi import openapi_document
from tests.server.http.conftest import Served, serve_model

pytestmark = pytest.mark.model

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
DOCUMENT = openapi_document(ENDPOINTS, secured=False)
SCHEMA = schemathesis.openapi.from_dict(DOCUMENT)
OPERATIONS = [result.ok() for result in SCHEMA.get_all_operations()]
EXAMPLES = int(os.environ.get("FIMBLE_FUZZ_HTTP_EXAMPLES", "25"))
COUNTS: dict[str, int] = {"cases": 0, "operations_checked": 0, "server_errors": 0}
CHECK = {"input_prefix": "def area(width, height):\n    return ", "input_suffix": "\n", "n_predict": 4}


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    # A few tokens per generation and a small body limit keep hundreds of cases within CI's time.
    for served in serve_model(HttpSettings(max_tokens_cap=4, default_max_tokens=4, max_body_bytes=64 * 1024)):
        with served.client() as client:
            served.baseline = client.post("/infill", json=CHECK).json()["content"]  # type: ignore[attr-defined]
        yield served
    report = os.environ.get("FIMBLE_FUZZ_HTTP_REPORT")
    if report:
        Path(report).write_text(json.dumps({**COUNTS, "examples_per_operation_and_mode": EXAMPLES}, indent=2))


def test_served_document_is_the_tested_one(served: Served) -> None:
    with served.client() as client:
        assert client.get("/openapi.json").json() == DOCUMENT


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=lambda m: m.value)
@pytest.mark.parametrize("operation", OPERATIONS, ids=lambda op: op.label)
def test_operation_conforms(
    served: Served, operation: schemathesis.APIOperation, mode: GenerationMode
) -> None:
    if mode is GenerationMode.NEGATIVE and operation.method.upper() == "GET":
        pytest.skip("nothing to make invalid: no request body")

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def run(case: schemathesis.Case) -> None:
        COUNTS["cases"] += 1
        case.call_and_validate(base_url=served.url, checks=CHECKS, timeout=120)

    run()
    with served.client() as client:  # and then it still answers as it did before
        answer = client.post("/infill", json=CHECK)
    assert answer.status_code == 200 and answer.json()["content"] == served.baseline  # type: ignore[attr-defined]
    COUNTS["operations_checked"] += 1
