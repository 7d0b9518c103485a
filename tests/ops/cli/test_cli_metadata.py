"""`sparkpoint metadata inspect`, invoked through the real command line."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from sparkpoint.ops.cli.main import main
from sparkpoint.storage import CheckpointStorage
from tests.storage.test_checkpoint_storage import make_checkpoint
from tests.support.hdfs import HDFS_OPTIONS


def _committed(root: str, **options: object) -> str:
    storage = CheckpointStorage(root, inline_threshold=64, **options)
    location = storage.init_checkpoint("clicks", 4)
    location.commit_metadata(make_checkpoint(location, 4))
    return location.directory


def _inspect(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["metadata", "inspect", *args])
    return result.exit_code, result.output


def test_table(tmp_path: Path) -> None:
    directory = _committed(str(tmp_path))
    code, output = _inspect(directory)
    assert code == 0, output
    assert f"{directory}/_metadata" in output
    assert "4 (checkpoint)" in output
    row = next(line for line in output.splitlines() if "counts" in line)
    assert row.split("│")[1:4] == [" counts   ", "           2 ", "      128 "]


def test_json_of_a_metadata_file_uri(tmp_path: Path) -> None:
    directory = _committed(str(tmp_path))
    code, output = _inspect(f"file://{directory}/_metadata", "--json")
    assert code == 0, output
    data = json.loads(output)
    assert data["checkpoint_id"] == 4 and data["kind"] == "checkpoint"
    assert data["metadata"]["checksum"].startswith("sha256:")
    (operator,) = data["operators"]
    assert (operator["uid"], operator["parallelism"], operator["max_parallelism"]) == (
        "counts",
        2,
        128,
    )
    keyed = operator["subtasks"][1]["keyed"][0]
    assert keyed["key_groups"] == [64, 127] and len(keyed["offsets"]) == 64
    assert keyed["stream"] == {
        "kind": "file",
        "path": f"{directory}/counts-1-0",
        "size": Path(directory, "counts-1-0").stat().st_size,
    }


def test_verify_reports_missing_and_resized_files(tmp_path: Path) -> None:
    directory = _committed(str(tmp_path))
    code, output = _inspect(directory, "--verify")
    assert code == 0 and "2 state files checked, 0 problems" in output
    Path(directory, "counts-0-0").unlink()
    Path(directory, "counts-1-0").write_bytes(b"tiny")
    code, output = _inspect(directory, "--verify", "--json")
    assert code == 3
    problems = json.loads(output)["verify"]["problems"]
    assert [(p["subtask"], p["problem"]) for p in problems] == [
        (0, "missing"),
        (1, f"size 4, recorded {problems[1]['expected_size']}"),
    ]


def test_on_hdfs(hdfs_dir: str) -> None:
    user = HDFS_OPTIONS["user"]
    directory = _committed(hdfs_dir, user=user)
    code, output = _inspect(directory, "--verify", "--hdfs-user", user, "--subtasks")
    assert code == 0, output
    assert f"file {directory}/counts-0-0" in output
    assert "0 problems" in output


def test_damaged_file_is_a_clear_error(tmp_path: Path) -> None:
    directory = _committed(str(tmp_path))
    metadata = Path(directory, "_metadata")
    data = bytearray(metadata.read_bytes())
    data[30] ^= 0x01
    metadata.write_bytes(bytes(data))
    code, output = _inspect(directory)
    assert code == 1
    assert f"Error: {metadata}: checksum mismatch" in output


def test_missing_pointer(tmp_path: Path) -> None:
    code, output = _inspect(str(tmp_path / "nothing"))
    assert code == 1
    assert "no checkpoint or savepoint at" in output
