"""The drills' invariant checkers are pure functions: fed histories that hold and ones
that break them, they must tell which is which (a drill that cannot fail proves nothing)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from sparkpoint.ops.drills import (
    CompletionNotice,
    DrillReport,
    Invariant,
    IterationResult,
    LeaderSample,
    check_exactly_once,
    check_ids_rising,
    check_no_id_reused,
    check_retained_kept,
    check_runs_take_turns,
    check_single_leader,
    clicks_read_per_split,
)

rising = st.lists(st.integers(1, 10_000), unique=True).map(sorted)


@given(rising)
def test_strictly_rising_ids_hold(ids: list[int]) -> None:
    assert check_ids_rising(ids).ok


def test_ids_after_the_quorum_came_back_must_be_above_every_id_before() -> None:
    assert check_no_id_reused([3, 4, 5], [6, 7]).ok
    assert check_no_id_reused([], [1]).ok
    reused = check_no_id_reused([3, 4, 5], [5, 6])  # 5 handed out again
    assert not reused.ok and reused.detail == "reused [5]"
    assert not check_no_id_reused([3, 5], [4]).ok  # below one seen before: also reused


@given(rising.filter(lambda ids: len(ids) >= 1), st.data())
def test_a_reused_id_is_reported(ids: list[int], data: st.DataObject) -> None:
    reused = data.draw(st.sampled_from(ids))
    verdict = check_ids_rising([*ids, reused])
    assert not verdict.ok
    assert str(reused) in verdict.detail


def test_an_id_below_one_already_completed_is_reported() -> None:
    verdict = check_ids_rising([1, 2, 5, 4, 6])
    assert not verdict.ok
    assert "id 4 completed after id 5" in verdict.detail


def test_two_acting_leaders_in_one_sample_are_reported() -> None:
    samples = [
        LeaderSample(0.0, 3, ("a",)),
        LeaderSample(0.1, 4, ("a", "b")),
        LeaderSample(0.2, 4, ("b",)),
    ]
    verdict = check_single_leader(samples)
    assert not verdict.ok
    assert "2 acting leaders" in verdict.detail


def test_an_epoch_going_back_is_reported() -> None:
    samples = [LeaderSample(0.0, 3, ("a",)), LeaderSample(0.1, None), LeaderSample(0.2, 2, ())]
    verdict = check_single_leader(samples)
    assert not verdict.ok
    assert "term 2 after term 3" in verdict.detail


@given(st.lists(st.tuples(st.integers(1, 50), st.booleans()), max_size=30))
def test_one_or_no_leader_with_rising_epochs_holds(steps: list[tuple[int, bool]]) -> None:
    epoch, samples = 0, []
    for i, (bump, leading) in enumerate(steps):
        epoch += bump
        samples.append(LeaderSample(i * 0.05, epoch, ("x",) if leading else ()))
    assert check_single_leader(samples).ok


def test_retained_checkpoints_kept_or_subsumed_hold() -> None:
    assert check_retained_kept([4, 5], [4, 5, 6]).ok
    assert check_retained_kept([4, 5], [6]).ok  # both subsumed by 6
    assert check_retained_kept([], []).ok


def test_a_lost_retained_checkpoint_is_reported() -> None:
    verdict = check_retained_kept([4, 5], [4])  # 5 vanished and nothing newer holds it
    assert not verdict.ok
    assert "[5]" in verdict.detail
    assert not check_retained_kept([7], []).ok


def test_exactly_once_output() -> None:
    assert check_exactly_once(["a", "b", "b"], ["b", "a", "b"]).ok
    duplicated = check_exactly_once(["a", "b", "b"], ["a", "b"])
    assert not duplicated.ok
    assert "1 lines extra or duplicated" in duplicated.detail
    missing = check_exactly_once(["a"], ["a", "b"])
    assert not missing.ok
    assert "1 expected lines missing" in missing.detail


def test_report_with_a_violation_is_not_ok_and_still_renders(tmp_path: Path) -> None:
    bad = IterationResult(2, "SIGKILL r1", 1.0, 2.0, 3, 4, "r2",
                          [check_ids_rising([1, 2, 2])])  # fmt: skip
    good = IterationResult(1, "SIGKILL r2", 0.9, None, 2, 3, "r1", [Invariant("x", True)])
    report = DrillReport("kill-leader", {"session_timeout_s": 10.0, "takeover_timeout_s": 1.0},
                         [good, bad])  # fmt: skip
    assert not report.ok
    assert report.violations == [
        "iteration 2: ids_strictly_rising: ids completed more than once: [2]; "
        "id 2 completed after id 2"
    ]
    data = report.to_dict()
    assert data["ok"] is False
    assert data["figures"]["time_to_leader_s"]["median"] == 0.95
    assert data["figures"]["time_to_leader_s"]["median_over_session_timeout"] == 0.095
    paths = report.write(tmp_path / "r")
    assert paths["plot"].stat().st_size > 0
    assert "VIOLATED" in paths["summary"].read_text()


def _heard(*runs: tuple[str, list[int]]) -> list[CompletionNotice]:
    return [CompletionNotice(cid, f"chk-{cid}", run) for run, ids in runs for cid in ids]


def test_driver_runs_completing_in_turns_hold() -> None:
    verdict = check_runs_take_turns(_heard(("run a", [1, 2, 3]), ("run b", [5, 6]), ("c", [9])))
    assert verdict.ok, verdict.detail
    assert "3 driver runs" in verdict.detail


def test_two_driver_runs_completing_at_once_are_reported() -> None:
    # A zombie driver still completing checkpoints after its standby took over.
    verdict = check_runs_take_turns(_heard(("old", [1, 2, 7]), ("new", [5, 6, 8])))
    assert not verdict.ok
    assert "new completed 5..8 while old completed 1..7" in verdict.detail


def test_the_input_read_comes_from_the_committed_totals_when_reports_undercount() -> None:
    # A clicks output committed exactly once for 600 records per split, checked against a
    # bound the drivers' reports undercounted (kills between a checkpoint and its progress
    # line): against that bound it looks like extra output; against the input the totals
    # show, it is exact. Lost or duplicated output still fails against it.
    from sparkpoint.examples.clicks import expected_output
    from sparkpoint.pipeline import ClickEventSource

    def expected(per_split: int) -> list[str]:
        source = ClickEventSource(splits=2, users=20, records_per_epoch=40, seed=7,
                                  records_per_split=per_split)  # fmt: skip
        return expected_output(source.all_records())

    committed = expected(600)
    assert not check_exactly_once(committed, expected(500)).ok  # the reports' bound
    read = clicks_read_per_split(committed, 2)
    assert read == 600
    assert check_exactly_once(committed, expected(read)).ok
    total = next(line for line in committed if '"type":"total"' in line)
    twice = [*committed, total]
    assert not check_exactly_once(twice, expected(clicks_read_per_split(twice, 2))).ok
    lost = [line for line in committed if line != total]
    assert not check_exactly_once(lost, expected(clicks_read_per_split(lost, 2))).ok
