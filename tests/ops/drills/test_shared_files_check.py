"""The drills' check of incremental keyed state's shared files, fed a layout on disk that
breaks it (a file a retained checkpoint references deleted, an unreferenced one left past
the grace period) and the same layout repaired. The retained checkpoints are given as the
store's pointers to their `_metadata`, as the drill reads them from ZooKeeper."""

from __future__ import annotations

from pathlib import Path

from sparkpoint.checkpoint import CheckpointKind, CheckpointPointer, CompletedCheckpoint
from sparkpoint.metadata import encode_metadata
from sparkpoint.ops.drills.invariants import SHARED_FILES_KEPT, check_shared_files_kept
from sparkpoint.ops.drills.verification import shared_files_report
from tests.storage.test_shared_files import HOUR_MS, _layout

NOW_MS = 1_800_000_000_000
GRACE_S = HOUR_MS / 1000


def _pointers(tmp_path: Path, retained: list[CompletedCheckpoint]) -> list[CheckpointPointer]:
    pointers = []
    for checkpoint in retained:
        chk = tmp_path / "job" / f"chk-{checkpoint.checkpoint_id}"
        chk.mkdir()
        (chk / "_metadata").write_bytes(encode_metadata(checkpoint))
        pointers.append(CheckpointPointer("job", checkpoint.checkpoint_id,
                                          CheckpointKind.CHECKPOINT, 1, 2,
                                          str(chk / "_metadata")))  # fmt: skip
    return pointers


def test_a_missing_referenced_file_and_an_old_unreferenced_one_are_violations(
    tmp_path: Path,
) -> None:
    shared, retained = _layout(tmp_path, NOW_MS)
    pointers = _pointers(tmp_path, retained)
    report = shared_files_report(str(tmp_path), "job", pointers, GRACE_S, now=NOW_MS / 1000)
    verdict = check_shared_files_kept(report, GRACE_S)
    assert verdict.name == SHARED_FILES_KEPT and not verdict.ok
    assert "1 referenced shared files missing" in verdict.detail
    assert str(shared / "missing") in verdict.detail
    assert f"1 unreferenced beyond {GRACE_S:g} s: {shared / 'old'}" in verdict.detail


def test_every_referenced_file_there_and_only_young_unreferenced_ones_hold(
    tmp_path: Path,
) -> None:
    shared, retained = _layout(tmp_path, NOW_MS)
    pointers = _pointers(tmp_path, retained)
    (shared / "missing").write_bytes(b"sst")
    (shared / "old").unlink()
    report = shared_files_report(str(tmp_path), "job", pointers, GRACE_S, now=NOW_MS / 1000)
    verdict = check_shared_files_kept(report, GRACE_S)
    assert verdict.ok, verdict.detail
    assert verdict.detail == f"3 referenced, 1 unreferenced within {GRACE_S:g} s"
