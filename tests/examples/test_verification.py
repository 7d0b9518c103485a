"""The exactly-once check of the orders example must be able to fail."""

from __future__ import annotations

from sparkpoint.examples.orders import check_rows


def test_a_clean_history_passes() -> None:
    rows = [("m-1", "k", 1), ("m-2", "k", 2), ("m-3", "j", 1)]
    assert check_rows(["m-1", "m-2", "m-3"], rows).ok


def test_a_lost_message_fails() -> None:
    result = check_rows(["m-1", "m-2"], [("m-1", "k", 1)])
    assert not result.ok and result.missing == ["m-2"]
    assert "FAILED" in result.summary()


def test_a_duplicate_fails() -> None:
    result = check_rows(["m-1"], [("m-1", "k", 1), ("m-1", "k", 2)])
    assert not result.ok and result.duplicated == ["m-1"]


def test_state_counted_a_message_twice() -> None:
    # Each id once in the table, but the key's count skipped: a replay the state saw.
    result = check_rows(["m-1", "m-2"], [("m-1", "k", 1), ("m-2", "k", 3)])
    assert not result.ok and result.bad_keys == ["k"]


def test_a_row_nobody_published_fails() -> None:
    assert check_rows([], [("x", "k", 1)]).unexpected == ["x"]
