"""Real failures on the local disk: a write the kernel refuses, a process that dies."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from sparkpoint.storage import CheckpointStorage

# Run in a child process: the file-size limit and the hard exit must not touch pytest.
_COMMIT_OVER_THE_FILE_SIZE_LIMIT = """
import resource, signal, sys
from sparkpoint.storage import CheckpointStorage, StorageError
from tests.storage.test_checkpoint_storage import make_checkpoint

storage = CheckpointStorage(sys.argv[1], inline_threshold=64)
location = storage.init_checkpoint("clicks", 1)
checkpoint = make_checkpoint(location, 1)
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # get EFBIG instead of being killed
resource.setrlimit(resource.RLIMIT_FSIZE, (100, 100))  # _metadata needs more
try:
    location.commit_metadata(checkpoint)
except StorageError as exc:
    print("refused:", exc)
    sys.exit(0)
sys.exit("the commit succeeded")
"""

_CRASH_BEFORE_METADATA = """
import os, sys
from sparkpoint.storage import CheckpointStorage
from tests.storage.test_checkpoint_storage import make_checkpoint

storage = CheckpointStorage(sys.argv[1], inline_threshold=64)
for checkpoint_id in (1, 2):
    location = storage.init_checkpoint("clicks", checkpoint_id)
    checkpoint = make_checkpoint(location, checkpoint_id)
    if checkpoint_id == 2:
        os._exit(137)  # dies like a killed coordinator: state files written, no _metadata
    location.commit_metadata(checkpoint)
"""


def _run(script: str, directory: Path) -> subprocess.CompletedProcess[str]:
    root = Path(__file__).resolve().parents[2]
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), str(directory)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_refused_metadata_write_leaves_no_metadata(tmp_path: Path) -> None:
    result = _run(_COMMIT_OVER_THE_FILE_SIZE_LIMIT, tmp_path)
    assert result.returncode == 0, result.stderr + result.stdout
    directory = tmp_path / "clicks" / "chk-1"
    assert "refused:" in result.stdout and str(directory / "_metadata") in result.stdout
    names = sorted(p.name for p in directory.iterdir())
    assert names == ["counts-0-0", "counts-1-0"]  # no _metadata, no temporary file
    storage = CheckpointStorage(str(tmp_path))
    assert storage.list_checkpoints("clicks", completed_only=True) == []
    assert storage.collect_orphans("clicks", retained_ids=set(), next_checkpoint_id=2) == [
        str(directory)
    ]


def test_a_crash_between_state_files_and_metadata_leaves_a_recognisable_orphan(
    tmp_path: Path,
) -> None:
    result = _run(_CRASH_BEFORE_METADATA, tmp_path)
    assert result.returncode == 137, result.stderr
    crashed = tmp_path / "clicks" / "chk-2"
    assert sorted(p.name for p in crashed.iterdir()) == ["counts-0-0", "counts-1-0"]

    storage = CheckpointStorage(str(tmp_path))
    assert storage.list_checkpoints("clicks") == [1, 2]
    assert storage.list_checkpoints("clicks", completed_only=True) == [1]
    assert storage.collect_orphans("clicks", retained_ids={1}, next_checkpoint_id=3) == [
        str(crashed)
    ]
    assert crashed.exists()  # a dry run deletes nothing
    storage.collect_orphans("clicks", retained_ids={1}, next_checkpoint_id=3, dry_run=False)
    assert not crashed.exists()
    assert (tmp_path / "clicks" / "chk-1" / "_metadata").exists()
    assert storage.read_metadata(str(tmp_path / "clicks" / "chk-1")).checkpoint_id == 1
