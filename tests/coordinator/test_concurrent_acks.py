"""Acknowledgements arrive on many HTTP request threads at once: exactly one of them
finalises, exactly once."""

from __future__ import annotations

import threading
from pathlib import Path

import sparkpoint.coordinator as coordinator_pkg
from sparkpoint.coordinator import Acknowledgement, AckResult, CheckpointStatus, CompletionNotice

from .support import keyed_state, make_harness


def test_one_completion_whatever_the_interleaving(tmp_path: Path) -> None:
    h = make_harness(tmp_path, 32, 32, max_concurrent=3)
    ids = [h.trigger_next() for _ in range(3)]
    keys = sorted(h.graph.acknowledging_subtasks)
    results: list[AckResult] = []
    lock = threading.Lock()

    def worker(share: list[tuple[str, int]]) -> None:
        for cid in ids:
            for uid, i in share:
                result = h.coordinator.acknowledge_all(
                    cid, [Acknowledgement(uid, i, keyed_state(i, 32))]
                )
                with lock:
                    results.append(result)

    threads = [threading.Thread(target=worker, args=(keys[n::4],)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    # Each thread acknowledges checkpoints in id order, so every checkpoint is fully
    # acknowledged only after the one before it was finalised: all three complete, in order.
    completed = [r for r in results if r.status is CheckpointStatus.COMPLETED]
    assert sorted(r.checkpoint_id for r in completed) == ids
    assert len(results) == 3 * len(keys)
    assert h.store.get_all() == [completed_pointer(completed, ids[-1])]
    notices = [n for n in h.coordinator.drain_notifications() if isinstance(n, CompletionNotice)]
    assert [n.checkpoint_id for n in notices] == ids
    assert h.coordinator.close(10)


def completed_pointer(results: list[AckResult], checkpoint_id: int) -> object:
    [result] = [r for r in results if r.checkpoint_id == checkpoint_id]
    return result.pointer


def test_the_public_names_are_curated() -> None:
    names = coordinator_pkg.__all__
    assert len(names) == len(set(names))
    assert all(hasattr(coordinator_pkg, name) for name in names)
