"""The checks of the chaos drill's faults on savepoints, other jobs' checkpoints and slow
acknowledgements, fed histories that hold and ones that break them: output committed
twice, a shared file another job's checkpoint references deleted, a job started again
from a checkpoint not its own, a checkpoint timeout above the grace period accepted."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sparkpoint.checkpoint import (
    CheckpointKind,
    CheckpointPointer,
    CompletedCheckpoint,
    FileStateHandle,
    IncrementalKeyedStateHandle,
    InlineStateHandle,
    KeyGroupRange,
    OperatorState,
    OperatorSubtaskState,
    StoreFile,
)
from sparkpoint.drills.invariants import (
    OUTPUT_ONCE,
    RequestOutcome,
    check_claim_of_other_job_refused,
    check_output_committed_once,
    check_restored_own_checkpoint,
    check_shared_files_exist,
    check_timeout_above_grace_refused,
)
from sparkpoint.drills.kafka_workload import kafka_verdict
from sparkpoint.drills.verification import shared_files_across_jobs
from sparkpoint.metadata import encode_metadata
from sparkpoint.storage.shared_files import shared_directory
from tests.storage.test_shared_files import HOUR_MS

NOW_MS = 1_800_000_000_000
GRACE_S = HOUR_MS / 1000


def test_output_each_line_once_holds() -> None:
    verdict = check_output_committed_once(['{"user": "u1", "clicks": 1}',
                                           '{"user": "u1", "clicks": 2}'])  # fmt: skip
    assert verdict.ok and verdict.name == OUTPUT_ONCE


def test_output_committed_twice_is_reported() -> None:
    # A restore behind a savepoint whose commit made epoch 7's lines visible replays them.
    lines = ['{"user": "u1", "clicks": 1}', '{"user": "u1", "clicks": 2}',
             '{"user": "u1", "clicks": 2}']  # fmt: skip
    verdict = check_output_committed_once(lines)
    assert not verdict.ok
    assert "1 lines committed more than once" in verdict.detail
    assert '"clicks": 2' in verdict.detail


def _job_files(root: Path, job: str, names: list[str]) -> Path:
    shared = Path(shared_directory(str(root), job))
    shared.mkdir(parents=True)
    for name in names:
        (shared / name).write_bytes(b"sst")
        seconds = (NOW_MS - 5 * HOUR_MS) / 1000
        os.utime(shared / name, (seconds, seconds))
    return shared


def _retained(root: Path, job: str, cid: int, files: list[Path]) -> CheckpointPointer:
    """Checkpoint ``cid`` of ``job``, retained, its keyed state in ``files``."""
    handle = IncrementalKeyedStateHandle(
        KeyGroupRange(0, 127), KeyGroupRange(0, 127), "inst",
        tuple(StoreFile(f"{f.name}.sst", FileStateHandle(str(f), 3)) for f in files),
        (StoreFile("CURRENT", InlineStateHandle("CURRENT", b"MANIFEST-1\n")),),
    )  # fmt: skip
    state = OperatorState("p", 1, 128, {0: OperatorSubtaskState(keyed=(handle,))})
    chk = root / job / f"chk-{cid}"
    chk.mkdir(parents=True)
    checkpoint = CompletedCheckpoint(job, cid, CheckpointKind.CHECKPOINT, 1, 2, {"p": state})
    (chk / "_metadata").write_bytes(encode_metadata(checkpoint))
    return CheckpointPointer(job, cid, CheckpointKind.CHECKPOINT, 1, 2, str(chk / "_metadata"))


def _two_jobs(root: Path) -> tuple[Path, dict[str, list[CheckpointPointer]]]:
    """``clicks`` retains checkpoint 9 (files a, b of its own ``shared/``); the second
    job, started from clicks' checkpoint 8, retains checkpoint 3 referencing clicks' file
    ``old`` (which clicks' own checkpoints no longer name) and its own ``c``."""
    first = _job_files(root, "clicks", ["a", "b", "old"])
    second = _job_files(root, "clicks-second-2", ["c"])
    return first, {
        "clicks": [_retained(root, "clicks", 9, [first / "a", first / "b"])],
        "clicks-second-2": [_retained(root, "clicks-second-2", 3,
                                      [first / "old", second / "c"])],
    }  # fmt: skip


def test_a_file_only_another_jobs_checkpoint_references_is_kept_and_found(
    tmp_path: Path,
) -> None:
    _, retained = _two_jobs(tmp_path)
    report = shared_files_across_jobs(str(tmp_path), retained, GRACE_S, now=NOW_MS / 1000)
    assert report.ok, report.to_dict()
    verdict = check_shared_files_exist(report)
    assert verdict.ok
    assert verdict.detail == "4 referenced shared files, all there"


def test_a_file_another_jobs_checkpoint_references_deleted_is_reported(tmp_path: Path) -> None:
    # The first job's collector took "old" for its own garbage.
    first, retained = _two_jobs(tmp_path)
    (first / "old").unlink()
    report = shared_files_across_jobs(str(tmp_path), retained, GRACE_S, now=NOW_MS / 1000)
    verdict = check_shared_files_exist(report)
    assert not verdict.ok
    assert f"1 referenced shared files missing: {first / 'old'} (checkpoints [3])" in verdict.detail


def test_one_job_alone_is_the_per_job_check(tmp_path: Path) -> None:
    first, retained = _two_jobs(tmp_path)
    report = shared_files_across_jobs(str(tmp_path), {"clicks": retained["clicks"]}, GRACE_S,
                                      now=NOW_MS / 1000)  # fmt: skip
    assert report.directory == str(first)
    assert [Path(f.path).name for f in report.garbage] == ["old"]  # unreferenced by clicks


def test_restored_from_its_own_retained_checkpoint_holds() -> None:
    assert check_restored_own_checkpoint("j2", 12, 12, checkpointed=True).ok


@pytest.mark.parametrize(
    ("retained", "restored", "checkpointed", "words"),
    [
        (12, 4, True, "j2 restored 4, not its retained checkpoint 12"),
        (12, None, True, "j2 restored None"),
        (None, None, True, "j2 retained no checkpoint of its own"),
        (12, 12, False, "completed no checkpoint after the restore"),
    ],
)
def test_a_restore_from_elsewhere_or_nothing_after_it_is_reported(
    retained: int | None, restored: int | None, checkpointed: bool, words: str
) -> None:
    verdict = check_restored_own_checkpoint("j2", retained, restored, checkpointed)
    assert not verdict.ok
    assert words in verdict.detail


def test_a_timeout_above_the_grace_refused_by_name_holds() -> None:
    outcome = RequestOutcome(400, "execution.checkpointing.timeout 66 s is above the "
                                       "orphan grace period (3 s)")  # fmt: skip
    verdict = check_timeout_above_grace_refused(outcome, 66, 3)
    assert verdict.ok, verdict.detail


@pytest.mark.parametrize(
    ("outcome", "words"),
    [
        (RequestOutcome(None), "timeout 66 s above the grace period 3 s: accepted"),
        (RequestOutcome(500, "internal error"), "not a client error naming both"),
        (RequestOutcome(400, "bad timeout"), "not a client error naming both"),
    ],
)
def test_a_timeout_above_the_grace_accepted_or_refused_unclearly_is_reported(
    outcome: RequestOutcome, words: str
) -> None:
    verdict = check_timeout_above_grace_refused(outcome, 66, 3)
    assert not verdict.ok
    assert words in verdict.detail


def test_the_kafka_verdict_holds_for_each_row_once() -> None:
    verdict = kafka_verdict(["m-1", "m-0"], ["m-0", "m-1"], [])
    assert verdict.ok
    assert "read_committed" in verdict.detail


def test_the_kafka_verdict_reports_a_duplicate_a_loss_and_a_recounted_key() -> None:
    duplicated = kafka_verdict(["m-0", "m-1", "m-1"], ["m-0", "m-1"], ["k-0001"])
    assert not duplicated.ok
    assert "1 lines extra or duplicated" in duplicated.detail
    assert "1 keys whose count is not 1..n: ['k-0001']" in duplicated.detail
    lost = kafka_verdict(["m-0"], ["m-0", "m-1"], [])
    assert not lost.ok and "1 expected lines missing" in lost.detail


def test_a_driver_that_gave_up_is_named_in_the_verdict() -> None:
    verdict = check_restored_own_checkpoint(
        "j2", 13, 13, checkpointed=False, why="its driver exited: StateFileError: missing"
    )
    assert not verdict.ok
    assert "(its driver exited: StateFileError: missing)" in verdict.detail


def test_a_claim_of_another_jobs_checkpoint_refused_naming_both_holds() -> None:
    outcome = RequestOutcome(422, "drill-claim-probe cannot claim checkpoint 12 of job clicks: "
                                  "restore it with no-claim")  # fmt: skip
    assert check_claim_of_other_job_refused(outcome, "drill-claim-probe", "clicks").ok


@pytest.mark.parametrize(
    ("outcome", "words"),
    [
        (RequestOutcome(None), "drill-claim-probe claiming a checkpoint of clicks: accepted"),
        (RequestOutcome(422, "invalid restore mode"), "not a client error naming both jobs"),
        (RequestOutcome(503, "drill-claim-probe, clicks: no leader"), "not a client error"),
    ],
)
def test_a_claim_of_another_jobs_checkpoint_accepted_is_reported(
    outcome: RequestOutcome, words: str
) -> None:
    verdict = check_claim_of_other_job_refused(outcome, "drill-claim-probe", "clicks")
    assert not verdict.ok
    assert words in verdict.detail
