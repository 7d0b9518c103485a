"""Fixtures of the browser tests: a Chromium, and where screenshots go."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ui.browser import Browser


@pytest.fixture
def browser() -> Iterator[Browser]:
    b = Browser()
    yield b
    b.close()


@pytest.fixture
def screenshots(tmp_path: Path) -> Path:
    """Test artefacts; ``SPARKPOINT_UI_SCREENSHOTS=docs/img`` (scripts/ui-screenshots.sh)
    writes them where the README finds them."""
    target = os.environ.get("SPARKPOINT_UI_SCREENSHOTS")
    directory = Path(target) if target else tmp_path / "screenshots"
    directory.mkdir(parents=True, exist_ok=True)
    return directory
