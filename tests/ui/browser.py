"""Headless Chromium (Debian's ``chromium`` and ``chromium-driver``) driven by Selenium:
what a person does in the UI, and what the page logged to its console."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement

from tests.support.waiting import wait_until

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
)

T = TypeVar("T")


class Browser:
    """One Chromium with an empty profile; :meth:`close` removes it."""

    def __init__(self, width: int = 1400, height: int = 900) -> None:
        self._profile = tempfile.mkdtemp(prefix="sparkpoint-chromium-")
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for flag in FLAGS:
            options.add_argument(flag)
        options.add_argument(f"--user-data-dir={self._profile}")
        options.add_argument(f"--window-size={width},{height}")
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        self.driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
        self.console: list[dict[str, Any]] = []

    def close(self) -> None:
        try:
            self.driver.quit()
        finally:
            shutil.rmtree(self._profile, ignore_errors=True)

    def open(self, url: str) -> None:
        self.driver.get(url)

    def collect_console(self) -> list[dict[str, Any]]:
        """Console messages since the last call (also kept in ``console``)."""
        entries: list[dict[str, Any]] = self.driver.get_log("browser")
        self.console.extend(entries)
        return entries

    def console_errors(self) -> list[str]:
        self.collect_console()
        return [e["message"] for e in self.console if e.get("level") == "SEVERE"]

    def find(self, css: str) -> WebElement:
        return self.driver.find_element(By.CSS_SELECTOR, css)

    def find_all(self, css: str) -> list[WebElement]:
        return self.driver.find_elements(By.CSS_SELECTOR, css)

    def text(self, css: str) -> str | None:
        """The text of the first match, or None (no match, or re-rendered meanwhile)."""
        try:
            found = self.find_all(css)
            return found[0].text if found else None
        except StaleElementReferenceException:
            return None

    def wait(self, condition: Callable[[], T], *, timeout: float, message: str) -> T:
        def attempt() -> T | None:
            try:
                return condition()
            except (StaleElementReferenceException, WebDriverException):
                return None  # the page re-rendered under us: ask again

        return wait_until(attempt, timeout=timeout, message=message, interval=0.1)

    def screenshot(self, path: Path) -> Path:
        """The whole page (not just the window), as a PNG."""
        path.parent.mkdir(parents=True, exist_ok=True)
        height = self.driver.execute_script(
            "return Math.max(document.body.scrollHeight, document.documentElement.scrollHeight)"
        )
        width = self.driver.get_window_size()["width"]
        self.driver.set_window_size(width, min(max(int(height) + 40, 600), 4000))
        try:
            self.driver.save_screenshot(str(path))
        finally:
            self.driver.set_window_size(width, 900)
        return path
