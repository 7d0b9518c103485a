"""An incremental checkpoint in headless Chromium: the checkpoint page and the job's
checkpoints page show its checkpointed size (the bytes it wrote) beside its full size
(all it references), per checkpoint and per subtask. The state is real RocksDB snapshots
acknowledged to a real coordinator."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import httpx
import pytest

from sparkpoint.checkpoint import KeyGroupRange
from sparkpoint.service import Service
from tests.service.support import make_graph, start_alone
from tests.support.incremental import ack_body, two_snapshots
from tests.ui.browser import Browser

JOB = "orders"
TIMEOUT = 60


def shown(n: int) -> str:
    """What the UI's ``bytes()`` writes: binary units, 2 decimals below 10, else 1 (its
    ``toFixed`` rounds halves up)."""
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    value, unit = Decimal(n), 0
    while value >= 1024 and unit < len(units) - 1:
        value, unit = value / 1024, unit + 1
    if unit == 0:
        return f"{n} B"
    places = Decimal("0.01") if value < 10 else Decimal("0.1")
    return f"{value.quantize(places, rounding=ROUND_HALF_UP)} {units[unit]}"


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    svc = start_alone(tmp_path)
    yield svc
    svc.stop()


@pytest.mark.slow
def test_an_incremental_checkpoint_shows_checkpointed_beside_full_size(
    service: Service, browser: Browser, tmp_path: Path, screenshots: Path
) -> None:
    low = two_snapshots(tmp_path, KeyGroupRange(0, 63), job=JOB, index=0)
    high = two_snapshots(tmp_path, KeyGroupRange(64, 127), job=JOB, index=1)
    with httpx.Client(base_url=service.address, timeout=10) as http:
        body = {"graph": make_graph(JOB).to_dict(), "checkpoint_config": {"interval_ms": 3_600_000}}
        run = http.post("/v1/jobs", json=body).json()["run_id"]
        for snapshot in (0, 1):
            cid = http.post(f"/v1/jobs/{JOB}/checkpoints").json()["checkpoint_id"]
            keyed = {0: low[snapshot], 1: high[snapshot]}
            acked = http.post(
                f"/v1/jobs/{JOB}/checkpoints/{cid}/acks", json=ack_body(run, 2, keyed)
            )
            assert acked.json()["status"] == "completed", acked.text
    written = low[1].written + high[1].written
    full = low[1].handle.state_size + high[1].handle.state_size
    ui = f"{service.address}/ui/"

    browser.open(ui + f"#/jobs/{JOB}/checkpoints/{cid}")
    browser.wait(
        lambda: browser.text("#checkpointed-size") == shown(written),
        timeout=TIMEOUT,
        message="the checkpoint's checkpointed size",
    )
    assert browser.text("#full-size") == shown(full)
    rows = browser.wait(
        lambda: (r := browser.find_all("table.subtasks tbody tr")) and len(r) == 4 and r,
        timeout=TIMEOUT,
        message="4 subtask rows (2 operators x 2 subtasks)",
    )
    cells = [
        (row.find_element("css selector", "td.checkpointed").text,
         row.find_element("css selector", "td.full").text)
        for row in rows
    ]  # fmt: skip
    expected = [(shown(s.written), shown(s.handle.state_size)) for s in (low[1], high[1])]
    assert expected[0] in cells and expected[1] in cells, cells
    assert browser.find_all("table.subtasks .bar.full .checkpointed")
    browser.screenshot(screenshots / "ui-checkpoint-incremental.png")

    browser.open(ui + f"#/jobs/{JOB}/checkpoints")
    newest = browser.wait(
        lambda: browser.find(f'#history tbody tr[data-id="{cid}"]'),
        timeout=TIMEOUT,
        message="the history row of the incremental checkpoint",
    )
    assert newest.find_element("css selector", "td.checkpointed").text == shown(written)
    assert newest.find_element("css selector", "td.full").text == shown(full)
    average = (written + low[0].written + high[0].written) // 2
    assert browser.text("#checkpointed-avg") == shown(average)
    retained = browser.find(f'#retained tbody tr[data-retained="{cid}"]')
    assert retained.find_element("css selector", "td.checkpointed").text == shown(written)
    assert f"{shown(written)} checkpointed" in (browser.text("#latest") or "")
    errors = browser.console_errors()
    assert not errors, errors
