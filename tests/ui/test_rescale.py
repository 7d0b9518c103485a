"""The rescale control on a job's page, in headless Chromium against a real coordinator
behind REST authentication: a read token sees the job's parallelism but may not rescale
(the refusal is shown); an operator's asks, the request shows pending, and once the
driver reports it applied, the page says after which epoch and from which checkpoint."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from sparkpoint.service import Service
from tests.service.support import make_graph, start_alone
from tests.ui.browser import Browser
from tests.ui.test_auth import sign_in

TIMEOUT = 60
JOB = "clicks"


@pytest.fixture
def tokens() -> dict[str, str]:
    return {role: secrets.token_urlsafe(24) for role in ("read", "operator")}


@pytest.fixture
def service(tmp_path: Path, tokens: dict[str, str]) -> Iterator[Service]:
    token_file = tmp_path / "tokens"
    token_file.write_text("".join(f"{role} ui-{role} {t}\n" for role, t in tokens.items()))
    svc = start_alone(
        tmp_path, {"rest.auth.enabled": "true", "rest.auth.token-file": str(token_file)}
    )
    yield svc
    svc.stop()


def ask(browser: Browser, parallelism: int) -> None:
    field = browser.find("#rescale-parallelism")
    field.clear()
    field.send_keys(str(parallelism))
    browser.find("#rescale-submit").click()


@pytest.mark.slow
def test_the_job_page_rescales_with_an_operator_token(
    service: Service, tokens: dict[str, str], browser: Browser
) -> None:
    operator = {"Authorization": f"Bearer {tokens['operator']}"}
    with httpx.Client(base_url=service.address, timeout=10, headers=operator) as http:
        config = {"interval_ms": 3_600_000}
        body = {"graph": make_graph(JOB, 2).to_dict(), "checkpoint_config": config}
        assert http.post("/v1/jobs", json=body).status_code == 200

        browser.open(f"{service.address}/ui/#/jobs/{JOB}/checkpoints")
        sign_in(browser, tokens["read"])
        browser.wait(
            lambda: browser.text("#rescale-current") == "2",
            timeout=TIMEOUT,
            message="the job's parallelism",
        )
        ask(browser, 3)
        browser.wait(
            lambda: (
                "forbidden" in (browser.text("#rescale-answer") or "")
                or "operate" in (browser.text("#rescale-answer") or "")
            ),
            timeout=TIMEOUT,
            message="a read token may not rescale, and the page says so",
        )
        assert http.get(f"/v1/jobs/{JOB}").json()["rescale"] is None, "nothing was asked"

        browser.driver.execute_script(
            "sessionStorage.setItem('sparkpoint.token', arguments[0])", tokens["operator"]
        )
        ask(browser, 3)
        browser.wait(
            lambda: browser.text("#rescale-last") == "pending",
            timeout=TIMEOUT,
            message="the request shows pending",
        )
        asked = http.get(f"/v1/jobs/{JOB}").json()["rescale"]
        assert (asked["parallelism"], asked["state"]) == (3, "pending")

        # The driver: its graph at 3 (a new run), then its report.
        body = {"graph": make_graph(JOB, 3).to_dict(), "checkpoint_config": config}
        run = http.post("/v1/jobs", json=body).json()["run_id"]
        report = {"run_id": run, "epoch": 7, "checkpoint_id": 5}
        path = f"/v1/jobs/{JOB}/rescale/{asked['request_id']}/applied"
        assert http.post(path, json=report).status_code == 200
        browser.wait(
            lambda: browser.text("#rescale-last") == "applied",
            timeout=TIMEOUT,
            message="the page says it was applied",
        )
        state = browser.text("#rescale-state") or ""
        assert "after epoch 7 from checkpoint #5" in state and "Runs at 3" in state
    unexpected = [e for e in browser.console_errors() if "401" not in e and "403" not in e]
    assert not unexpected, unexpected
