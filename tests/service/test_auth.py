"""REST authentication and the audit log against a real coordinator over real HTTP.

Every mutating route is found in the app itself, so a route added later is covered the
day it appears: refused without a token (401), refused for a role that may not (403),
let through for one that may.
"""

from __future__ import annotations

import logging
import re
import secrets
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from fastapi.routing import iter_route_contexts
from prometheus_client import REGISTRY

from sparkpoint.checkpoint import OperatorSubtaskState
from sparkpoint.client import CoordinatorClient, Credentials, Refused
from sparkpoint.config import load_config
from sparkpoint.ops.cli.main import main
from sparkpoint.service import Service, start_service
from sparkpoint.service.api.auth import TokenFileError, parse_tokens
from tests.support.waiting import wait_until

from .support import make_graph

JOB = "orders"
#: What a driver may call besides GETs, by route name; everything else needs an operator.
DRIVER_ROUTES = {"register_job", "heartbeat", "acknowledge", "decline", "plan", "rescale_applied"}
ROLES = ("read", "driver", "operator")


@pytest.fixture(scope="module")
def tokens() -> dict[str, str]:
    return {role: secrets.token_urlsafe(24) for role in ROLES}


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory, tokens: dict[str, str]) -> Iterator[Service]:
    root: Path = tmp_path_factory.mktemp("auth")
    token_file = root / "tokens"
    token_file.write_text(
        "# role name token\n" + "".join(f"{r} {r}-1 {t}\n" for r, t in tokens.items())
    )
    config = load_config(
        overrides={
            "high-availability.type": "none",
            "rest.port": "0",
            "rest.auth.token-file": str(token_file),
            "state.checkpoints.dir": str(root / "checkpoints"),
            "state.savepoints.dir": str(root / "savepoints"),
        },
        environ={},
    )
    assert config.security.auth_enabled  # on unless turned off
    svc = start_service(config)
    wait_until(svc.replica.is_ready, timeout=20, message="replica leads")
    yield svc
    svc.stop()


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _mutating_routes(service: Service) -> list[tuple[str, str, str]]:
    """(method, concrete path, route name) of every non-GET route the app serves."""
    app = service.server.config.app
    found = []
    for route in iter_route_contexts(app.routes):
        path = str(route.path).replace("{job_id}", JOB).replace("{checkpoint_id}", "1")
        path = re.sub(r"\{[^}]+\}", "x", path)
        for method in sorted(set(getattr(route, "methods", None) or ()) - {"GET", "HEAD"}):
            found.append((method, path, str(route.name)))
    assert found, "no mutating route found: the enumeration is broken"
    return found


def test_every_mutating_route_needs_a_token_and_the_right_role(
    service: Service, tokens: dict[str, str]
) -> None:
    routes = _mutating_routes(service)
    names = {name for _, _, name in routes}
    assert names >= DRIVER_ROUTES, "a driver route was renamed"
    with httpx.Client(base_url=service.address, timeout=10) as http:
        for method, path, name in routes:
            needed = "driver" if name in DRIVER_ROUTES else "operator"
            where = f"{method} {path}"
            bare = http.request(method, path, json={})
            assert bare.status_code == 401, (where, bare.text)
            assert bare.json()["error"] == "unauthenticated"
            assert bare.headers["www-authenticate"].startswith("Bearer")
            wrong = http.request(method, path, json={}, headers=_bearer("not-a-token-at-all"))
            assert (wrong.status_code, wrong.json()["error"]) == (401, "invalid_token"), where
            too_weak = ["read"] if needed == "driver" else ["read", "driver"]
            for role in too_weak:
                answer = http.request(method, path, json={}, headers=_bearer(tokens[role]))
                assert answer.status_code == 403, (where, role, answer.text)
                assert answer.json()["error"] == "forbidden"
                assert f"role '{role}'" in answer.json()["message"]
            strong = ["driver", "operator"] if needed == "driver" else ["operator"]
            for role in strong:  # past the gate: the endpoint's own answer (e.g. 404, 422)
                answer = http.request(method, path, json={}, headers=_bearer(tokens[role]))
                assert answer.status_code not in (401, 403), (where, role, answer.text)


def test_reads_need_a_read_token_and_probes_are_open(
    service: Service, tokens: dict[str, str]
) -> None:
    with httpx.Client(base_url=service.address, timeout=10) as http:
        for path in ("/healthz", "/readyz", "/metrics"):
            assert http.get(path).status_code == 200, path
        assert http.get("/v1/jobs").status_code == 401
        for role in ROLES:
            assert http.get("/v1/jobs", headers=_bearer(tokens[role])).status_code == 200


def test_coordinator_check_needs_no_token(service: Service) -> None:
    # `helm test` runs it in a pod that holds no token: it reads only the open probes.
    done = CliRunner().invoke(main, ["coordinator", "check", "--coordinator", service.address])
    assert done.exit_code == 0, done.output
    assert "is ready" in done.output


def test_the_right_roles_work_end_to_end_and_the_audit_log_names_them(
    service: Service, tokens: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="sparkpoint.audit")
    graph = make_graph(JOB)
    driver = CoordinatorClient(
        service.address, retry_for_s=10, credentials=Credentials(token=tokens["driver"])
    )
    operator = CoordinatorClient(
        service.address, retry_for_s=10, credentials=Credentials(token=tokens["operator"])
    )
    with driver, operator:
        driver.register_job(graph, {"interval_ms": 3_600_000})
        with pytest.raises(Refused) as refused:
            driver.trigger_checkpoint(JOB)
        assert refused.value.status == 403
        cid = operator.trigger_checkpoint(JOB)
        acks = [
            (op.uid, i, OperatorSubtaskState())
            for op in graph.operators
            for i in range(op.parallelism)
        ]
        assert driver.acknowledge(JOB, cid, acks)["status"] == "completed"
    lines = [r.getMessage() for r in caplog.records if r.name == "sparkpoint.audit"]
    assert f"POST /v1/jobs caller=driver-1 job={JOB} status=200" in lines
    assert any(
        line.startswith(f"POST /v1/jobs/{JOB}/checkpoints caller=driver-1 job={JOB} status=403")
        and "refused=forbidden" in line
        for line in lines
    ), lines
    assert f"POST /v1/jobs/{JOB}/checkpoints caller=operator-1 job={JOB} status=202" in lines
    assert not any("/acks" in line for line in lines)  # steady driver traffic: not audited
    everything = "\n".join(r.getMessage() for r in caplog.records)
    assert not any(token in everything for token in tokens.values())
    forbidden = REGISTRY.get_sample_value("sparkpoint_rest_refusals_total", {"reason": "forbidden"})
    assert forbidden and forbidden >= 1


def test_protected_metrics_need_a_token(tmp_path: Path, tokens: dict[str, str]) -> None:
    token_file = tmp_path / "tokens"
    token_file.write_text(f"read prometheus {tokens['read']}\n")
    config = load_config(
        overrides={
            "high-availability.type": "none",
            "rest.port": "0",
            "rest.auth.token-file": str(token_file),
            "rest.auth.protect-metrics": "true",
            "state.checkpoints.dir": str(tmp_path / "checkpoints"),
        },
        environ={},
    )
    svc = start_service(config)
    try:
        with httpx.Client(base_url=svc.address, timeout=10) as http:
            assert http.get("/metrics").status_code == 401
            assert http.get("/metrics", headers=_bearer(tokens["read"])).status_code == 200
            assert http.get("/healthz").status_code == 200
    finally:
        svc.stop()


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("admin alice 0123456789abcdef0123", "role 'admin'"),
        ("read alice short", "shorter than 16"),
        ("read alice", "expected '<role> <name> <token>'"),
        ("read a 0123456789abcdef0\nread a 0123456789abcdef1", "twice"),
        ("# nothing\n\n", "no tokens"),
    ],
)
def test_a_bad_token_file_is_refused_without_quoting_tokens(text: str, problem: str) -> None:
    with pytest.raises(TokenFileError, match=re.escape(problem)) as refused:
        parse_tokens(text)
    assert "0123456789abcdef" not in str(refused.value)


def test_auth_on_without_a_token_file_refuses_to_start(tmp_path: Path) -> None:
    config = load_config(overrides={"high-availability.type": "none", "rest.port": "0"}, environ={})
    with pytest.raises(ValueError, match=r"rest\.auth\.token-file"):
        start_service(config)
