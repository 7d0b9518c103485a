"""The failover history a replica keeps from what it sees in leader/info."""

from __future__ import annotations

from sparkpoint.service.ui import LeadershipHistory


def info(instance: str, epoch: int, since: int, renewed: int) -> dict[str, object]:
    return {"instance_id": instance, "epoch": epoch, "since_ms": since, "renewed_ms": renewed}


def test_renewals_are_not_changes_and_a_takeover_is_timed_from_the_last_renewal() -> None:
    history = LeadershipHistory()
    history.observe(info("a", 1, 1_000, 1_000), now_ms=1_000)
    for renewed in (1_100, 1_200, 1_300):
        history.observe(info("a", 1, 1_000, renewed), now_ms=renewed)
    history.observe(info("b", 2, 2_450, 2_450), now_ms=2_460)
    newest, first = history.changes()
    assert first["how"].startswith("leading when") and first["leaderless_ms"] is None
    assert (newest["leader"], newest["term"], newest["previous_leader"]) == ("b", 2, "a")
    assert newest["leaderless_ms"] == 1_150  # 2,450 - the last renewal at 1,300


def test_a_released_leadership_is_timed_too_and_history_is_bounded() -> None:
    history = LeadershipHistory(max_changes=3)
    history.observe(info("a", 1, 0, 500), now_ms=500)
    history.observe(None, now_ms=600)  # leader/info deleted: a graceful handover
    history.observe(None, now_ms=650)
    history.observe(info("b", 2, 900, 900), now_ms=900)
    assert history.changes()[0]["how"].startswith("handed over")
    assert history.changes()[0]["leaderless_ms"] == 400
    for epoch in range(3, 8):
        history.observe(info("a" if epoch % 2 else "b", epoch, epoch * 1000, epoch * 1000))
    assert [c["term"] for c in history.changes()] == [7, 6, 5]
