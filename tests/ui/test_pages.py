"""The UI as a person uses it, in headless Chromium, against real replica processes (real
ZooKeeper) and a driver that checkpoints through the real client: every page loads
without console errors, the history grows as checkpoints complete, a kill -9 of the
leader shows up on the cluster page, and 1,000 checkpoints page. Screenshots of every
page are written (see the ``screenshots`` fixture)."""

from __future__ import annotations

import itertools
import re
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium.webdriver.common.by import By

from sparkpoint.checkpoint import CheckpointKind, CheckpointPointer
from sparkpoint.client import CoordinatorClient
from sparkpoint.ha import ZooKeeperConnection
from sparkpoint.pipeline.runtime.progress import ProgressMeter
from tests.service.support import Driver, ReplicaProcess, make_graph, wait_follower, wait_leader
from tests.support.waiting import wait_until
from tests.ui.browser import Browser

JOB = "clicks"
TIMEOUT = 90  # generous: the machine is shared
# Under load a 1 s lease can lapse by itself; the failover here should be the one we cause.
STEADY = {"session_timeout": "6 s", "settings": {"high-availability.lease.takeover-timeout": "3 s"}}
DASH = "\u2013"  # the UI writes ranges with an en dash


def _pipeline_progress() -> Callable[[], dict[str, Any]]:
    """What a pipeline driver would report per heartbeat: 250 records an epoch, a source
    with 1,200 messages waiting (the real meter that the pipeline's driver uses)."""
    meter = ProgressMeter()
    epochs = itertools.count(1)

    def report() -> dict[str, Any]:
        epoch = next(epochs)
        return meter.report(epoch=epoch, records=250 * epoch, source_lag=1200)

    return report


def count(browser: Browser, css: str) -> int | None:
    text = browser.text(css)
    return int(text.replace(",", "")) if text and text.strip().isdigit() else None


def assert_no_console_errors(browser: Browser, page: str) -> None:
    errors = browser.console_errors()
    assert not errors, f"console errors on {page}: {errors}"


@pytest.mark.slow
def test_pages_history_and_failover(replicas, browser: Browser, screenshots: Path) -> None:
    procs: list[ReplicaProcess] = [replicas(f"r{i}", **STEADY) for i in range(2)]
    leader = wait_leader(procs, timeout=TIMEOUT)
    follower = wait_follower(procs, leader, timeout=TIMEOUT)
    driver = Driver([p.address for p in procs], make_graph(JOB, parallelism=3))
    driver.progress = _pipeline_progress()
    driver.start()
    try:
        wait_until(lambda: len(driver.completed) >= 2, timeout=TIMEOUT, message="2 checkpoints")
        ui = f"{leader.address}/ui/"

        browser.open(ui + "#/jobs")
        browser.wait(lambda: browser.text("#jobs tbody a") == JOB, timeout=30, message="job row")
        header = browser.text("#jobs thead") or ""
        for column in ("Records/s", "Epoch", "Source lag", "Last checkpoint"):
            assert column.upper() in header.upper(), header  # CSS upper-cases headers
        row = browser.wait(
            lambda: (r := browser.text("#jobs tbody tr") or "") and re.search(r"\d+ B", r) and r,
            timeout=30,
            message="the last checkpoint's duration and size",
        )
        assert "RUNNING" in row and "connected" in row, row
        assert re.search(r"count\s*keyed\s*3\s*/128", row), row
        assert re.search(r"\d+ (ms|s) · \d+(\.\d+)? (B|KiB)", row), row
        # Drivers heartbeat to the leader: a follower's Jobs page asks it for the figures.
        (on_follower,) = httpx.get(f"{follower.address}/v1/ui/jobs", timeout=10).json()["jobs"]
        assert on_follower["progress"]["epoch"] >= 1, on_follower
        assert on_follower["progress"]["records_per_s"] > 0, on_follower
        browser.screenshot(screenshots / "ui-jobs.png")
        assert_no_console_errors(browser, "jobs")

        browser.open(ui + f"#/jobs/{JOB}/checkpoints")
        first = browser.wait(
            lambda: count(browser, "#history-total"), timeout=30, message="history shown"
        )
        browser.wait(
            lambda: (count(browser, "#history-total") or 0) >= first + 2,
            timeout=TIMEOUT,
            message="the history table grows as checkpoints complete",
        )
        rows = browser.find_all("#history tbody tr")
        assert len(rows) >= min(first + 2, 25)
        assert "COMPLETED" in browser.text("#history tbody") or ""
        assert browser.find_all("#chart canvas"), "the duration/size chart is drawn"
        browser.driver.execute_script("document.querySelector('[data-verify]').click()")
        verdict = browser.wait(
            lambda: (
                "OK" in (browser.text(".verify-result") or "") and browser.text(".verify-result")
            ),
            timeout=30,
            message="verify files answers",
        )
        assert re.search(r"\d+ state files OK", verdict), verdict
        browser.screenshot(screenshots / "ui-checkpoints.png")
        assert_no_console_errors(browser, "checkpoints")

        newest = browser.wait(
            lambda: browser.find("#history tbody tr").get_attribute("data-id"),
            timeout=30,
            message="the newest checkpoint's id",
        )
        browser.open(ui + f"#/jobs/{JOB}/checkpoints/{newest}")
        browser.wait(
            lambda: (
                len(browser.find_all("table.subtasks tbody tr")) == 6
                or len(browser.find_all("table.grid tbody tr")) == 6
            ),
            timeout=30,
            message="per-subtask rows of 2 operators x 3 subtasks",
        )
        acked = browser.wait(
            lambda: [t.text for t in browser.find_all("tbody tr td:nth-child(2)") if ":" in t.text],
            timeout=30,
            message="per-subtask acknowledgement times",
        )
        assert len(acked) == 6, acked
        browser.screenshot(screenshots / "ui-checkpoint.png")
        assert_no_console_errors(browser, "checkpoint detail")

        browser.open(ui + f"#/jobs/{JOB}/restore")
        field = browser.wait(
            lambda: (
                browser.find("#parallelism").get_attribute("value") and browser.find("#parallelism")
            ),
            timeout=30,
            message="the parallelism field",
        )
        field.clear()
        field.send_keys("2")  # the page proposes the current parallelism + 1 (4)
        browser.find("#restore-form button").click()

        def new_ranges() -> list[str | None] | None:
            # Read inside a wait: the plan is drawn again when the answer comes.
            bars = browser.find_all('[data-operator="count"] .kg-row:nth-child(2) .kg-seg')
            titles = [s.get_attribute("title") for s in bars]
            return titles if len(titles) == 2 else None

        assert browser.wait(new_ranges, timeout=30, message="the plan at parallelism 2") == [
            f"new subtask 0: key groups 0{DASH}63",
            f"new subtask 1: key groups 64{DASH}127",
        ]
        assert "after (2)" in (browser.text('[data-operator="count"]') or "")
        browser.screenshot(screenshots / "ui-restore.png")
        assert_no_console_errors(browser, "restore preview")

        # The cluster page on the follower, then the leader dies.
        browser.open(f"{follower.address}/ui/#/cluster")
        browser.wait(
            lambda: browser.text("#leader-id") == leader.name, timeout=30, message="leader shown"
        )
        assert "follows" in (browser.text("#banner") or "")
        assert_no_console_errors(browser, "cluster (follower)")
        leader.signal(signal.SIGKILL)
        leader.proc.wait(10)
        browser.wait(
            lambda: (
                browser.text("#leader-id") == follower.name
                and (count(browser, "#failover-count") or 0) >= 1
            ),
            timeout=TIMEOUT,
            message="the failover on the cluster page",
        )
        failover = browser.text("#failovers tbody tr") or ""
        assert follower.name in failover and f"{leader.name} (term" in failover, failover
        assert re.search(r"\d+(\.\d+)? (ms|s)$", failover), failover
        browser.wait(
            lambda: not browser.driver.find_element(By.ID, "banner").is_displayed(),
            timeout=30,
            message="the new leader no longer says it follows",
        )
        browser.screenshot(screenshots / "ui-cluster.png")
        assert_no_console_errors(browser, "cluster after failover")
    finally:
        driver.stop()


@pytest.mark.slow
def test_a_thousand_checkpoints_page_on_a_follower(
    replicas, observer: ZooKeeperConnection, browser: Browser, screenshots: Path
) -> None:
    procs = [replicas(f"r{i}", **STEADY) for i in range(2)]
    leader = wait_leader(procs, timeout=TIMEOUT)
    follower = wait_follower(procs, leader, timeout=TIMEOUT)
    with CoordinatorClient([leader.address], timeout_s=10) as client:
        client.register_job(make_graph(JOB), {"interval_ms": 3_600_000})
    # 1,000 retained checkpoints as the store keeps them: pointers in ZooKeeper.
    now = int(time.time() * 1000)
    observer.retry(observer.client.ensure_path, observer.paths.job_checkpoints(JOB))
    for batch in range(10):  # 10 transactions of 100: few round trips on a loaded machine
        transaction = observer.client.transaction()
        for i in range(batch * 100 + 1, batch * 100 + 101):
            trigger = now - (1001 - i) * 1000
            pointer = CheckpointPointer(
                JOB, i, CheckpointKind.CHECKPOINT, trigger, trigger + 20 + i % 40,
                f"/nowhere/{JOB}/chk-{i}/_metadata", state_size=4096 + 8 * i,
            )  # fmt: skip
            transaction.create(observer.paths.checkpoint(JOB, i), pointer.to_bytes())
        results = transaction.commit()
        assert not [r for r in results if isinstance(r, Exception)], results

    browser.open(f"{follower.address}/ui/#/jobs/{JOB}/checkpoints")
    browser.wait(
        lambda: count(browser, "#history-total") == 1000, timeout=TIMEOUT, message="1,000 shown"
    )
    ids = [r.get_attribute("data-id") for r in browser.find_all("#history tbody tr")]
    assert ids == [str(i) for i in range(1000, 975, -1)]
    browser.driver.execute_script(
        "document.querySelector('#pager [data-offset]:last-child').click()"
    )
    browser.wait(
        lambda: browser.text("#history-range") == f"976{DASH}1000 of 1000",
        timeout=30,
        message="the oldest page",
    )
    assert browser.find_all("#history tbody tr")[-1].get_attribute("data-id") == "1"
    assert browser.text("#retained-note") == "(newest 10 of 1000)"
    assert "follows" in (browser.text("#banner") or "")
    browser.screenshot(screenshots / "ui-checkpoints-follower-1000.png")
    assert_no_console_errors(browser, "1,000 checkpoints")
