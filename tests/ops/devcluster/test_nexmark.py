"""The Nexmark event files: the crate's events, event time fixed by event number, the same
bytes on every run, in any number of splits."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from sparkpoint.ops.devcluster.cargo import binary
from sparkpoint.ops.devcluster.nexmark import (
    BASE_TIME_MS,
    MANIFEST,
    SIDE_INPUT,
    crate_time_offset_ms,
    split_file,
    write_events,
)

EVENTS = 3_000


def read_split(directory: Path, k: int) -> list[dict]:
    return [json.loads(line) for line in (directory / split_file(k)).read_text().splitlines()]


def time_of(event: dict) -> int:
    (body,) = event.values()
    return body["date_time"]


def test_event_time_follows_the_event_number_whatever_the_splits(tmp_path: Path) -> None:
    one = write_events(tmp_path / "one", EVENTS, splits=1)
    three = write_events(tmp_path / "three", EVENTS, splits=3)
    stream = read_split(one, 0)
    assert len(stream) == EVENTS
    assert [time_of(e) for e in stream] == [
        BASE_TIME_MS + crate_time_offset_ms(n) for n in range(EVENTS)
    ]
    # Split k holds events k, k+3, …: the same events, byte for byte once re-encoded.
    for k in range(3):
        assert read_split(three, k) == stream[k::3]
    kinds = Counter(next(iter(e)) for e in stream)
    assert kinds == {"Person": EVENTS // 50, "Auction": 3 * EVENTS // 50, "Bid": 46 * EVENTS // 50}
    side_input = (one / SIDE_INPUT).read_text().splitlines()
    assert side_input[:2] == ["0,0", "1,1"] and len(side_input) == 10_000
    auction = next(e["Auction"] for e in stream if "Auction" in e)
    assert auction["expires"] > auction["date_time"]  # moved with it


def test_the_same_settings_give_the_same_bytes_and_reuse_a_directory(tmp_path: Path) -> None:
    first = write_events(tmp_path / "a", EVENTS, splits=2, base_time_ms=BASE_TIME_MS - 100)
    again = write_events(tmp_path / "b", EVENTS, splits=2, base_time_ms=BASE_TIME_MS - 100)
    for k in range(2):
        assert (first / split_file(k)).read_bytes() == (again / split_file(k)).read_bytes()
    stamp = (first / split_file(0)).stat().st_mtime_ns
    write_events(first, EVENTS, splits=2, base_time_ms=BASE_TIME_MS - 100)
    assert (first / split_file(0)).stat().st_mtime_ns == stamp  # reused, not written again
    assert json.loads((first / MANIFEST).read_text())["events"] == EVENTS
    with pytest.raises(FileExistsError, match="other files than Nexmark events"):
        write_events(first, EVENTS + 1, splits=2)
    with pytest.raises(ValueError, match="need 1 ≤ splits ≤ events"):
        write_events(tmp_path / "c", 0)


def test_the_events_are_the_crates_with_only_their_times_moved(tmp_path: Path) -> None:
    raw = subprocess.run(
        [str(binary("nexmark")), "--number", "500", "--no-wait"],
        capture_output=True, check=True,
    ).stdout.decode().splitlines()  # fmt: skip
    ours = read_split(write_events(tmp_path / "events", 500, splits=1), 0)
    crate = [json.loads(line) for line in raw]
    start = time_of(crate[0])  # the crate's wall-clock start: event 0's time

    def moved(event: dict) -> dict:
        ((kind, body),) = event.items()
        times = {k: body[k] - start + BASE_TIME_MS for k in ("date_time", "expires") if k in body}
        return {kind: {**body, **times}}

    assert ours == [moved(e) for e in crate]
