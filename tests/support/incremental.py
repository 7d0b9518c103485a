"""Real incremental keyed state: a subtask's RocksDB store snapshotted twice through
``snapshot_store``, the second time after one key changed, so that the second snapshot
references most of the first one's SST files again and uploads only what is new."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sparkpoint.checkpoint import IncrementalKeyedStateHandle, KeyGroupRange, serde
from sparkpoint.pipeline.state.backend import StoreSettings
from sparkpoint.pipeline.state.rocksdb.files import snapshot_store
from sparkpoint.pipeline.state.rocksdb.store import SubtaskStore, state_key
from sparkpoint.storage import CheckpointLocation
from sparkpoint.storage.local import LocalFileSystem


@dataclass(frozen=True)
class Snapshot:
    handle: IncrementalKeyedStateHandle
    written: int  # the bytes snapshot_store says it uploaded


def two_snapshots(
    root: Path,
    groups: KeyGroupRange,
    *,
    job: str = "job",
    operator: str = "count",
    index: int = 0,
    keys: int = 20_000,
) -> tuple[Snapshot, Snapshot]:
    """Checkpoints 1 and 2 of subtask ``index``, written under ``root/ckpt/<job>/``."""

    def location(checkpoint_id: int) -> CheckpointLocation:
        directory = str(root / "ckpt" / job / f"chk-{checkpoint_id}")
        return CheckpointLocation(LocalFileSystem(), directory, job, checkpoint_id, False, 1024)

    def key(n: int) -> bytes:
        return state_key(groups.start + n % groups.num_key_groups, b"key-%07d" % n)

    path = root / f"store-{operator}-{index}"
    store = SubtaskStore.create(
        path, StoreSettings(), sorted((key(n), bytes(100)) for n in range(keys))
    )
    first = Snapshot(*snapshot_store(store, location(1), operator, index, 0, groups, None))
    store.commit_step(store.token(index), [(key(5), bytes(100), b"changed")])
    store.close()
    store = SubtaskStore(path, StoreSettings())  # reopening flushes the step
    try:
        second = Snapshot(
            *snapshot_store(store, location(2), operator, index, 0, groups, first.handle)
        )
    finally:
        store.close()
    return first, second


def ack_body(run_id: str, parallelism: int, keyed: dict[int, Snapshot]) -> dict[str, Any]:
    """The acknowledgement of every subtask of the service tests' two-operator graph
    (``source`` stateless, ``count`` with ``keyed[subtask]``), as a driver posts it."""
    acks = [
        {"operator_uid": "source", "subtask": i, "state": {"keyed": [], "operator": []}}
        for i in range(parallelism)
    ]
    acks += [
        {
            "operator_uid": "count",
            "subtask": i,
            "state": {"keyed": [serde.keyed_to_dict(s.handle)], "operator": []},
        }
        for i, s in sorted(keyed.items())
    ]
    return {"acks": acks, "run_id": run_id}
