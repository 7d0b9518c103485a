from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .support import Harness, make_harness


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    h = make_harness(tmp_path, 2, 3)
    yield h
    assert h.coordinator.close(timeout=10)
