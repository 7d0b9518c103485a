"""Recovery benchmarks (not a test): prints figures and each one's ratio to its anchor.

1. Planning a restore of 20 operators x 1024 old subtasks to 1000 new subtasks at max
   parallelism 32768, against decoding that checkpoint's `_metadata` (the anchor: a
   restore must read the metadata anyway, so planning should cost less than that).
2. Reading one subtask's share of a large keyed-state file against reading the whole
   file (the anchor): the ratio should approach the share.

Run:  .venv/bin/python bench/recovery_bench.py [--size-mib 1024] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import gc
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from sparkpoint.checkpoint import (
    CheckpointKind,
    CompletedCheckpoint,
    DistributionMode,
    FileStateHandle,
    JobGraph,
    KeyGroupsStateHandle,
    OperatorSpec,
    OperatorState,
    OperatorStateHandle,
    OperatorSubtaskState,
    StateMetaInfo,
)
from sparkpoint.metadata import decode_metadata, encode_metadata
from sparkpoint.recovery import plan_restore
from sparkpoint.recovery.reader import read_keyed_state, read_subtask_keyed_state
from sparkpoint.statefiles import key_group_for_key, key_group_range_for_subtask
from sparkpoint.statefiles.writers import KeyedStateWriter
from sparkpoint.storage import filesystem_for


def best_of(runs: int, fn: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def big_checkpoint(operators: int, old: int, max_parallelism: int) -> CompletedCheckpoint:
    """Every operator keyed; every subtask also holds one source-offset element of
    SPLIT_DISTRIBUTE operator state, like a source would."""
    states = {}
    for n in range(operators):
        uid = f"op-{n:02d}"
        subtasks = {}
        for i in range(old):
            key_groups = key_group_range_for_subtask(max_parallelism, old, i)
            offsets = tuple(13 + 1000 * j for j in range(key_groups.num_key_groups))
            size = offsets[-1] + 1000
            path = f"hdfs://namenode:8020/checkpoints/job/chk-7/{uid}-{i}-0"
            keyed = KeyGroupsStateHandle(key_groups, offsets, FileStateHandle(path, size))
            op_state = OperatorStateHandle(
                {"offsets": StateMetaInfo((0,), DistributionMode.SPLIT_DISTRIBUTE)},
                FileStateHandle(path + "-op", 64),
            )
            subtasks[i] = OperatorSubtaskState(keyed=(keyed,), operator=(op_state,))
        states[uid] = OperatorState(uid, old, max_parallelism, subtasks)
    return CompletedCheckpoint("job", 7, CheckpointKind.CHECKPOINT, 0, 1, states)


def bench_planning() -> None:
    operators, old, new, max_parallelism = 20, 1024, 1000, 32768
    checkpoint = big_checkpoint(operators, old, max_parallelism)
    data = encode_metadata(checkpoint)
    graph = JobGraph(
        "job",
        tuple(
            OperatorSpec(f"op-{n:02d}", new, max_parallelism, keyed=True) for n in range(operators)
        ),
    )
    decode = best_of(3, lambda: decode_metadata(data, source="bench"))
    plan = best_of(3, lambda: plan_restore(checkpoint, graph))
    handles = sum(len(s.keyed) for op in plan_restore(checkpoint, graph) for s in op.subtasks)
    print(f"planning: {operators} operators x {old} old -> {new} new subtasks, M={max_parallelism}")
    print(f"  _metadata: {len(data) / 1e6:.2f} MB; plan: {handles} keyed handles")
    print(f"  decode _metadata (anchor): {decode * 1000:8.1f} ms")
    print(f"  plan_restore:              {plan * 1000:8.1f} ms   ratio {plan / decode:.2f}")
    # plan_restore pauses the cyclic collector while it builds; for a like-for-like view
    # of the pure CPU cost, both again with the collector off.
    gc.disable()
    try:
        decode_off = best_of(3, lambda: decode_metadata(data, source="bench"))
        plan_off = best_of(3, lambda: plan_restore(checkpoint, graph))
    finally:
        gc.enable()
    print(
        f"  collector off for both:    decode {decode_off * 1000:.1f} ms, "
        f"plan {plan_off * 1000:.1f} ms   ratio {plan_off / decode_off:.2f}"
    )


def write_state_file(path: Path, size_bytes: int, max_parallelism: int, value_size: int) -> int:
    """One keyed-state file of about ``size_bytes`` over all key groups; returns entries."""
    per_group: list[list[bytes]] = [[] for _ in range(max_parallelism)]
    entries = size_bytes // (value_size + 20)
    for i in range(entries):
        per_group[key_group_for_key(i, max_parallelism)].append(i.to_bytes(8, "big"))
    value = os.urandom(value_size)
    with open(path, "wb") as f:
        writer = KeyedStateWriter(
            f, key_group_range_for_subtask(max_parallelism, 1, 0), max_parallelism
        )
        for group, keys in enumerate(per_group):
            writer.begin_key_group(group)
            for key in keys:
                writer.write(int.from_bytes(key, "big"), value)
        offsets = writer.finish()
    path.with_suffix(".offsets").write_text(",".join(map(str, offsets)))
    return entries


def bench_reading(size_mib: int, directory: str) -> None:
    max_parallelism, new_parallelism, value_size = 128, 8, 4096
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        path = Path(tmp) / "count-0-0"
        start = time.perf_counter()
        entries = write_state_file(path, size_mib * 2**20, max_parallelism, value_size)
        written = time.perf_counter() - start
        offsets = tuple(int(o) for o in path.with_suffix(".offsets").read_text().split(","))
        handle = KeyGroupsStateHandle(
            key_group_range_for_subtask(max_parallelism, 1, 0),
            offsets,
            FileStateHandle(str(path), path.stat().st_size),
        )
        state = OperatorState(
            "count", 1, max_parallelism, {0: OperatorSubtaskState(keyed=(handle,))}
        )
        checkpoint = CompletedCheckpoint(
            "job", 1, CheckpointKind.CHECKPOINT, 0, 1, {"count": state}
        )
        plan = plan_restore(
            checkpoint,
            JobGraph("job", (OperatorSpec("count", new_parallelism, max_parallelism, keyed=True),)),
        )
        subtask = plan.subtask("count", 3)

        def drain(it: object) -> int:
            return sum(1 for _ in it)  # type: ignore[attr-defined]

        whole = best_of(2, lambda: drain(read_keyed_state([handle], filesystem_for)))
        share = best_of(2, lambda: drain(read_subtask_keyed_state(subtask, filesystem_for)))
        fraction = subtask.key_group_range.num_key_groups / max_parallelism
        print(
            f"reading: one keyed-state file of {path.stat().st_size / 2**20:.0f} MiB, "
            f"{entries} entries of {value_size} B, M={max_parallelism} "
            f"(written in {written:.1f} s; page cache warm)"
        )
        print(f"  whole file (anchor):           {whole:7.2f} s")
        print(
            f"  subtask 3 of {new_parallelism} ({subtask.key_group_range.num_key_groups} "
            f"key groups, share {fraction:.3f}): {share:7.2f} s   ratio {share / whole:.3f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=1024, help="state file size (MiB)")
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="where to write it")
    parser.add_argument("--skip-reading", action="store_true")
    args = parser.parse_args()
    bench_planning()
    if not args.skip_reading:
        bench_reading(args.size_mib, args.dir)


if __name__ == "__main__":
    main()
