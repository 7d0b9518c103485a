"""The UI behind REST authentication, in headless Chromium against a real coordinator: the
page asks for a token once, refuses a wrong one, keeps the right one for the tab (a
reload does not ask again) and sends it with every call."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from sparkpoint.service import Service
from tests.service.support import start_alone
from tests.ui.browser import Browser

TIMEOUT = 60


@pytest.fixture
def token() -> str:
    return secrets.token_urlsafe(24)


@pytest.fixture
def service(tmp_path: Path, token: str) -> Iterator[Service]:
    token_file = tmp_path / "tokens"
    token_file.write_text(f"read ui-reader {token}\n")
    svc = start_alone(tmp_path, {
        "rest.auth.enabled": "true", "rest.auth.token-file": str(token_file),
        "state.savepoints.dir": str(tmp_path / "savepoints"),
    })  # fmt: skip
    yield svc
    svc.stop()


def dialog_open(browser: Browser) -> bool:
    return bool(browser.driver.execute_script("return document.getElementById('login').open"))


def sign_in(browser: Browser, token: str) -> None:
    field = browser.find("#token")
    field.clear()
    field.send_keys(token)
    browser.find("#login-form button[type=submit]").click()


@pytest.mark.slow
def test_the_ui_asks_for_a_token_once_and_keeps_it_for_the_tab(
    service: Service, token: str, browser: Browser
) -> None:
    base = service.address
    # The page itself is open; what it shows is not.
    assert httpx.get(f"{base}/ui/", timeout=10).status_code == 200
    assert httpx.get(f"{base}/v1/ui/cluster", timeout=10).status_code == 401

    browser.open(f"{base}/ui/#/cluster")
    browser.wait(lambda: dialog_open(browser), timeout=TIMEOUT, message="the sign-in dialog")
    assert not browser.find_all("#leader-card"), "nothing shown before signing in"

    sign_in(browser, "not-" + token)
    browser.wait(
        lambda: "not accepted" in (browser.text("#login-error") or "") and dialog_open(browser),
        timeout=TIMEOUT,
        message="a wrong token refused, the dialog asks again",
    )
    sign_in(browser, token)
    browser.wait(lambda: browser.find_all("#leader-card"), timeout=TIMEOUT, message="cluster page")
    assert not dialog_open(browser)
    kept = browser.driver.execute_script("return sessionStorage.getItem('sparkpoint.token')")
    assert kept == token

    browser.driver.refresh()
    browser.wait(lambda: browser.find_all("#leader-card"), timeout=TIMEOUT, message="reloaded")
    assert not dialog_open(browser), "a reload in the same tab does not ask again"
    # The only console errors are the refused calls before the right token was given.
    unexpected = [e for e in browser.console_errors() if "401" not in e]
    assert not unexpected, unexpected
