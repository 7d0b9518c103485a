"""Schemathesis against the OpenAPI document a real replica serves (embedded mode, real
HTTP): whatever a client sends that the schema allows — or not — no request gets a 5xx,
and every answer matches the documented status codes and schemas."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from sparkpoint.checkpoint import JobGraph, OperatorSpec
from sparkpoint.client import CoordinatorClient
from tests.service.support import start_alone


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root: Path = tmp_path_factory.mktemp("openapi")
    service = start_alone(root, {"state.savepoints.dir": str(root / "savepoints")})
    with CoordinatorClient(service.address, retry_for_s=10) as client:
        # A real job, so that generated requests for it reach the coordinator.
        client.register_job(JobGraph("string", (OperatorSpec("string", 1, 128),)), {})
    yield service.address
    service.stop()


CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


def test_api_conforms_to_its_openapi_document(served: str) -> None:
    schema = schemathesis.openapi.from_url(f"{served}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 12, [op.label for op in operations]
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=15,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            database=None,
        )
        def conforms(case: schemathesis.Case) -> None:
            case.call_and_validate(checks=CHECKS)

        conforms()
