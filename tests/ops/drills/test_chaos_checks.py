"""The chaos drill's checkers, fed histories that hold and ones that break them, and the
seeded fault plan (the same seed, the same faults)."""

from __future__ import annotations

import pytest

from sparkpoint.ops.drills import (
    CheckpointDirectory,
    CompletionNotice,
    RestoreCheck,
    check_completions_unique,
    check_latest_restorable,
    check_no_stale_directories,
)
from sparkpoint.ops.drills.chaos import FAULTS, plan_faults


def test_each_id_completed_once_with_one_pointer_holds() -> None:
    notices = [CompletionNotice(i, f"file:///c/job/chk-{i}/_metadata", "driver 1") for i in (1, 2)]
    notices.append(CompletionNotice(3, "file:///c/job/chk-3/_metadata", "driver 2"))
    assert check_completions_unique(notices).ok


def test_an_id_completed_twice_is_reported_even_to_two_drivers() -> None:
    uri = "file:///c/job/chk-4/_metadata"
    verdict = check_completions_unique(
        [CompletionNotice(4, uri, "driver 1"), CompletionNotice(4, uri, "driver 2")]
    )
    assert not verdict.ok
    assert "checkpoint 4 completed 2 times" in verdict.detail


def test_an_id_completed_with_two_pointers_is_reported() -> None:
    verdict = check_completions_unique([
        CompletionNotice(5, "file:///c/job/chk-5/_metadata", "driver 1"),
        CompletionNotice(5, "file:///c/other/chk-5/_metadata", "driver 1"),
    ])  # fmt: skip
    assert not verdict.ok
    assert "checkpoint 5 completed with 2 pointers" in verdict.detail


GOOD = RestoreCheck(7, "file:///c/job/chk-7/_metadata", "abc", read_checksum="abc", files=4,
                    planned_subtasks=4)  # fmt: skip


def test_a_loadable_verified_planned_checkpoint_holds() -> None:
    verdict = check_latest_restorable(GOOD)
    assert verdict.ok
    assert "4 state files verified" in verdict.detail


@pytest.mark.parametrize(
    ("broken", "words"),
    [
        (RestoreCheck(None), "no retained checkpoint"),
        (RestoreCheck(7, "file:///c/job/chk-7/_metadata", "abc", load_error="No such file"),
         "cannot load: No such file"),
        (RestoreCheck(7, "u", "abc", read_checksum="abd", files=4), "checksum abd, recorded abc"),
        (RestoreCheck(7, "u", "abc", read_checksum="abc", files=4,
                      file_problems=("file:///c/job/chk-7/s0: missing",)),
         "1 of 4 state files bad"),
        (RestoreCheck(7, "u", "abc", read_checksum="abc", files=4,
                      plan_error="operator count: max parallelism 128 became 64"),
         "no restore plan"),
    ],
)  # fmt: skip
def test_an_unrestorable_latest_checkpoint_is_reported(broken: RestoreCheck, words: str) -> None:
    verdict = check_latest_restorable(broken)
    assert not verdict.ok
    assert words in verdict.detail


def test_nothing_retained_is_fine_before_the_first_checkpoint() -> None:
    assert check_latest_restorable(RestoreCheck(None), expect_one=False).ok


def test_young_retained_or_pending_directories_hold() -> None:
    dirs = [CheckpointDirectory(3, 500.0), CheckpointDirectory(4, 500.0),
            CheckpointDirectory(5, 10.0)]  # fmt: skip
    assert check_no_stale_directories(dirs, retained=[3], pending=[4], grace_s=60).ok


def test_the_running_jobs_newest_directories_are_kept() -> None:
    # chk-6: the newest; chk-5: the newest holding files (the driver's latest snapshot).
    dirs = [CheckpointDirectory(4, 500.0), CheckpointDirectory(5, 500.0),
            CheckpointDirectory(6, 500.0, has_files=False)]  # fmt: skip
    assert check_no_stale_directories(dirs, retained=[4], pending=[], grace_s=60).ok


def test_an_orphan_older_than_the_grace_is_reported() -> None:
    dirs = [CheckpointDirectory(2, 300.0), CheckpointDirectory(8, 61.0),
            CheckpointDirectory(9, 1.0), CheckpointDirectory(10, 1.0)]  # fmt: skip
    verdict = check_no_stale_directories(dirs, retained=[9], pending=[], grace_s=60)
    assert not verdict.ok
    assert "2 orphan directories" in verdict.detail
    assert "chk-2 (300 s)" in verdict.detail and "chk-8" in verdict.detail


def test_a_seed_gives_the_same_faults_and_every_kind_appears() -> None:
    assert plan_faults(1, 50) == plan_faults(1, 50)
    assert plan_faults(1, 50) != plan_faults(2, 50)
    assert set(plan_faults(1, 50)) == set(FAULTS)
    assert set(plan_faults(3, 20, ("kill-9", "sigstop"))) <= {"kill-9", "sigstop"}


def test_an_unknown_fault_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="unknown faults \\['unplug'\\]"):
        plan_faults(1, 3, ("kill-9", "unplug"))


def test_failover_phases_add_up_and_a_missing_timestamp_blanks_only_its_neighbours() -> None:
    from sparkpoint.ops.drills.phases import PHASES, failover_phases

    record = {"trigger_timestamp": 103_000, "latest_ack_timestamp": 105_500,
              "completion_timestamp": 105_700}  # fmt: skip
    notices = [{"type": "trigger", "checkpoint_id": 9, "time": 103.2},
               {"type": "complete", "checkpoint_id": 8, "time": 102.0}]  # fmt: skip
    phases = failover_phases(fault_wall=100.0, leader_wall=102.0, observed_wall=105.75,
                             checkpoint_id=9, record=record, notices=notices)  # fmt: skip
    assert list(phases) == list(PHASES)
    assert phases == {"election": 2.0, "to_trigger": 1.0, "delivery": 0.2, "snapshot": 2.3,
                      "finalisation": 0.2, "observed": 0.05}  # fmt: skip
    no_ack = failover_phases(fault_wall=100.0, leader_wall=102.0, observed_wall=105.75,
                             checkpoint_id=9, record={**record, "latest_ack_timestamp": None},
                             notices=notices)  # fmt: skip
    assert no_ack["snapshot"] is None and no_ack["finalisation"] is None
    assert no_ack["delivery"] == 0.2


def test_the_replay_bound_covers_every_run_of_a_restarted_driver() -> None:
    from sparkpoint.ops.drills.workload import epochs_read

    reports = [{"event": "started", "epoch": 0}, {"epoch": 12},
               {"event": "started", "epoch": 0}, {"epoch": 6}]  # fmt: skip
    assert epochs_read(reports) == 18
    assert epochs_read([{"event": "started", "epoch": 0}, {"epoch": 4}]) == 4


def test_a_directory_is_an_orphan_only_from_when_it_stopped_being_retained() -> None:
    # chk-4: written 500 s ago, retained until 2 s ago (subsumed, its deletion queued on a
    # slow storage): young as an orphan. chk-3: never retained since the drill looked.
    dirs = [CheckpointDirectory(3, 500.0), CheckpointDirectory(4, 500.0),
            CheckpointDirectory(5, 1.0)]  # fmt: skip
    verdict = check_no_stale_directories(
        dirs, retained=[5], pending=[], grace_s=60, unretained_for_s={4: 2.0}
    )
    assert not verdict.ok
    assert "chk-3 (500 s)" in verdict.detail and "chk-4" not in verdict.detail
    later = check_no_stale_directories(
        dirs, retained=[5], pending=[], grace_s=60, unretained_for_s={3: 70.0, 4: 61.0}
    )
    assert "2 orphan directories" in later.detail
