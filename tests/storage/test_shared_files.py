"""The checker and collector of ``<job>/shared/``: fed a layout that breaks both rules
(a referenced file missing, an unreferenced one left past the grace period), they say
so; the collector deletes only what stayed unreferenced for the grace period in its own
term, and never a referenced file."""

from __future__ import annotations

import os
from pathlib import Path

from sparkpoint.checkpoint import (
    CheckpointKind,
    CompletedCheckpoint,
    FileStateHandle,
    IncrementalKeyedStateHandle,
    InlineStateHandle,
    KeyGroupRange,
    OperatorState,
    OperatorSubtaskState,
    StoreFile,
)
from sparkpoint.storage import CheckpointStorage
from sparkpoint.storage.local import LocalFileSystem
from sparkpoint.storage.shared_files import (
    SharedFileCollector,
    check_shared_files,
    list_shared_files,
    remove_ended_job_shared_files,
    shared_directory,
)

HOUR_MS = 3_600_000


def _checkpoint(cid: int, shared: Path, names: list[str]) -> CompletedCheckpoint:
    handle = IncrementalKeyedStateHandle(
        KeyGroupRange(0, 127),
        KeyGroupRange(0, 127),
        "inst",
        tuple(StoreFile(f"{n}.sst", FileStateHandle(str(shared / n), 3)) for n in names),
        (StoreFile("CURRENT", InlineStateHandle("CURRENT", b"MANIFEST-1\n")),),
    )
    state = OperatorState("p", 1, 128, {0: OperatorSubtaskState(keyed=(handle,))})
    return CompletedCheckpoint("job", cid, CheckpointKind.CHECKPOINT, 1, 2, {"p": state})


def _layout(tmp_path: Path, now_ms: int) -> tuple[Path, list[CompletedCheckpoint]]:
    shared = Path(shared_directory(str(tmp_path), "job"))
    shared.mkdir(parents=True)
    for name, age_ms in (("a", 5 * HOUR_MS), ("b", 5 * HOUR_MS), ("old", 5 * HOUR_MS),
                         ("new", -HOUR_MS // 2)):  # fmt: skip
        (shared / name).write_bytes(b"sst")
        seconds = (now_ms - age_ms) / 1000
        os.utime(shared / name, (seconds, seconds))
    # Checkpoints 7 and 8 are retained; "missing" is referenced but gone.
    return shared, [_checkpoint(7, shared, ["a", "b"]), _checkpoint(8, shared, ["b", "missing"])]


def test_the_checker_names_missing_and_unreferenced_files(tmp_path: Path) -> None:
    now = 1_800_000_000_000
    shared, retained = _layout(tmp_path, now)
    listing = list_shared_files(LocalFileSystem(), str(shared))
    report = check_shared_files(str(shared), listing, retained, now_ms=now, grace_ms=HOUR_MS)
    assert not report.ok
    assert report.missing == (str(shared / "missing"),)
    assert [Path(f.path).name for f in report.garbage] == ["old"]
    assert [Path(f.path).name for f in report.young] == ["new"]
    assert report.referenced[str(shared / "b")] == (7, 8)
    assert report.to_dict()["missing"][0]["checkpoints"] == [8]


def test_the_collector_waits_a_grace_period_of_its_own_term(tmp_path: Path) -> None:
    now = 1_800_000_000_000
    shared, retained = _layout(tmp_path, now)
    fs = LocalFileSystem()
    collector = SharedFileCollector()

    def collect(at: int, checkpoints: list[CompletedCheckpoint]) -> list[str]:
        report = collector.collect(
            fs, str(tmp_path), "job", checkpoints, now_ms=at, grace_ms=HOUR_MS, dry_run=False
        )
        return sorted(Path(f.path).name for f in report.garbage)

    # A new term: "old" was modified long ago but is unreferenced only since now.
    assert collect(now, retained) == []
    assert collect(now + HOUR_MS, retained) == ["old"]
    assert sorted(p.name for p in shared.iterdir()) == ["a", "b", "new"]
    # Checkpoint 7 leaves retention: "a" goes a grace period later, "b" stays (8 has it);
    # "new" (written half an hour into the term, never referenced) after its own grace.
    assert collect(now + 2 * HOUR_MS, retained[1:]) == ["new"]
    assert collect(now + 3 * HOUR_MS, retained[1:]) == ["a"]
    assert sorted(p.name for p in shared.iterdir()) == ["b"]


def test_files_a_checkpoint_not_yet_completed_references_are_held(tmp_path: Path) -> None:
    now = 1_800_000_000_000
    shared, retained = _layout(tmp_path, now)
    fs = LocalFileSystem()
    # "old" is what a pending checkpoint's acknowledged subtask (or the snapshot its
    # driver acknowledged last) references: not garbage, however long unreferenced.
    (held,) = _checkpoint(9, shared, ["old"]).operator_states["p"].subtask_states.values()
    collector = SharedFileCollector()
    for at in (now, now + HOUR_MS):
        report = collector.collect(fs, str(tmp_path), "job", retained, now_ms=at,
                                   grace_ms=HOUR_MS, dry_run=False, held=[held])  # fmt: skip
        assert report.garbage == () and (shared / "old").is_file()
    # Without it (the checkpoint was given up), "old" is garbage as before.
    listing = list_shared_files(fs, str(shared))
    report = check_shared_files(str(shared), listing, retained, now_ms=now, grace_ms=HOUR_MS)
    assert [Path(f.path).name for f in report.garbage] == ["old"]
    held_report = check_shared_files(str(shared), listing, retained, now_ms=now,
                                     grace_ms=HOUR_MS, held=[str(shared / "old")])  # fmt: skip
    assert held_report.garbage == ()


def test_an_ended_jobs_shared_files_go_but_not_those_written_after_it_ended(
    tmp_path: Path,
) -> None:
    now = 1_800_000_000_000
    shared, _ = _layout(tmp_path, now)
    nested = shared / "not-a-shared-file"
    nested.mkdir()
    (nested / "x").write_bytes(b"x")
    storage = CheckpointStorage(str(tmp_path))
    removed = remove_ended_job_shared_files(storage, "job", ended_ms=now)
    # "new" is half an hour younger than the end: a job registered again uploaded it.
    assert sorted(Path(f.path).name for f in removed) == ["a", "b", "old"]
    assert sorted(p.name for p in shared.iterdir()) == ["new", "not-a-shared-file"]
    assert (nested / "x").is_file()


def test_the_cli_checker_fails_on_the_violating_layout(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from sparkpoint.metadata import encode_metadata
    from sparkpoint.ops.cli.main import main

    now = 1_800_000_000_000
    shared, retained = _layout(tmp_path, now)
    for checkpoint in retained:
        chk = tmp_path / "job" / f"chk-{checkpoint.checkpoint_id}"
        chk.mkdir()
        (chk / "_metadata").write_bytes(encode_metadata(checkpoint))
    args = ["checkpoints", "shared-check", str(tmp_path), "job", "--json"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1, result.output
    assert '"ok": false' in result.output and str(shared / "missing") in result.output
    (shared / "missing").write_bytes(b"sst")
    (shared / "old").unlink()
    result = CliRunner().invoke(main, ["checkpoints", "shared-check", str(tmp_path), "job"])
    assert result.exit_code == 0, result.output
    assert "0 missing, 0 unreferenced beyond" in result.output
