"""The state size a checkpoint reports is the bytes its state files hold on disk, each
byte counted once: a subtask's keyed and operator state share one file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sparkpoint.checkpoint import FileStateHandle
from sparkpoint.metadata.describe import describe_checkpoint
from sparkpoint.pipeline import EmbeddedChannel, PipelineDriver
from sparkpoint.storage.reading import load_metadata
from tests.pipeline import support


def test_state_size_equals_the_bytes_on_disk(spark: Any, tmp_path: Path) -> None:
    p = support.pipeline("sizes", tmp_path / "out", 3)
    channel = EmbeddedChannel(
        str(tmp_path / "ckpt"), savepoint_dir=str(tmp_path / "sp"), interval_ms=3_600_000
    )
    driver = PipelineDriver(p, spark, channel, inline_threshold=0)
    driver.start()
    driver.run(max_epochs=2)
    savepoint = Path(driver.stop_with_savepoint())
    driver.close()

    checkpoint = load_metadata(str(savepoint)).checkpoint
    on_disk = {f.name: f.stat().st_size for f in savepoint.iterdir() if f.name != "_metadata"}
    shared = 0
    for uid, state in checkpoint.operator_states.items():
        for index, sub in state.subtask_states.items():
            handles = (*sub.keyed, *sub.operator)
            files = {Path(h.stream.path).name for h in handles}
            assert all(isinstance(h.stream, FileStateHandle) for h in handles)
            assert sub.state_size == sum(on_disk[name] for name in files), (uid, index)
            shared += len(handles) > len(files)
    assert shared, "no subtask wrote keyed and operator state into one file"
    assert checkpoint.state_size == sum(on_disk.values())
    assert describe_checkpoint(checkpoint)["state_size"] == sum(on_disk.values())
    # Nothing in it is shared with another checkpoint: it wrote all it references.
    assert checkpoint.checkpointed_size == checkpoint.state_size
    for state in checkpoint.operator_states.values():
        for sub in state.subtask_states.values():
            assert sub.checkpointed_size == sub.state_size
