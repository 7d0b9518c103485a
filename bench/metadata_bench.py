"""`_metadata` at scale: 20 operators x 1024 subtasks at max parallelism 32768.

Every subtask is a keyed handle over its 32 key groups with one offset per key group, in
a state file of its own. Prints encode and decode times, the size of the file against the
raw bytes of the offsets it carries (8 bytes each, the physical minimum of storing them
as plain 64-bit integers), and the local commit (temporary file, fsync, link, directory
fsync) against a plain write of the same bytes.

    .venv/bin/python bench/metadata_bench.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from sparkpoint.checkpoint import (
    CheckpointKind,
    CompletedCheckpoint,
    FileStateHandle,
    KeyGroupRange,
    KeyGroupsStateHandle,
    OperatorState,
    OperatorSubtaskState,
)
from sparkpoint.metadata import decode_metadata, describe_checkpoint, encode_metadata
from sparkpoint.storage.local import LocalFileSystem

OPERATORS = 20
PARALLELISM = 1024
MAX_PARALLELISM = 32768
DIRECTORY = "hdfs://namenode:8020/sparkpoint/checkpoints/clicks-per-user/chk-1042"


def key_groups(subtask: int) -> KeyGroupRange:
    # Flink's assignment: start = ceil(i*M/P), end = ceil((i+1)*M/P) - 1.
    start = -(-subtask * MAX_PARALLELISM // PARALLELISM)
    end = -(-(subtask + 1) * MAX_PARALLELISM // PARALLELISM) - 1
    return KeyGroupRange(start, end)


def build_checkpoint(seed: int = 42) -> CompletedCheckpoint:
    rng = random.Random(seed)
    operators = {}
    for op in range(OPERATORS):
        uid = f"stateful-operator-{op:02d}"
        subtasks = {}
        for i in range(PARALLELISM):
            groups = key_groups(i)
            offsets, position = [], 0
            for _ in groups:
                offsets.append(position)
                position += rng.randint(0, 60_000)  # a key group holds 0 … 60 KB
            stream = FileStateHandle(f"{DIRECTORY}/{uid}-{i}-0", position)
            handle = KeyGroupsStateHandle(groups, tuple(offsets), stream)
            subtasks[i] = OperatorSubtaskState(keyed=(handle,))
        operators[uid] = OperatorState(uid, PARALLELISM, MAX_PARALLELISM, subtasks)
    return CompletedCheckpoint(
        "clicks-per-user", 1042, CheckpointKind.CHECKPOINT, 1_763_700_000_000,
        1_763_700_004_200, operators,
    )  # fmt: skip


def best_of(rounds: int, action: Callable[[], object]) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return min(times)


def median_of(rounds: int, action: Callable[[int], object]) -> float:
    times = []
    for n in range(rounds):
        start = time.perf_counter()
        action(n)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    checkpoint = build_checkpoint()
    offsets = OPERATORS * MAX_PARALLELISM
    raw_offset_bytes = offsets * 8
    print(
        f"checkpoint: {OPERATORS} operators x {PARALLELISM} subtasks, max parallelism "
        f"{MAX_PARALLELISM}: {OPERATORS * PARALLELISM} keyed handles, {offsets} offsets"
    )

    data = encode_metadata(checkpoint)
    encode_s = best_of(args.rounds, lambda: encode_metadata(checkpoint))
    decode_s = best_of(args.rounds, lambda: decode_metadata(data, source="bench"))
    assert decode_metadata(data, source="bench") == checkpoint

    print(f"\n_metadata codec (best of {args.rounds})")
    print(f"  encode             {encode_s * 1000:8.1f} ms")
    print(f"  decode             {decode_s * 1000:8.1f} ms  (incl. validation of every handle)")
    print(f"  size               {len(data):>10,} bytes")
    print(f"  raw offset bytes   {raw_offset_bytes:>10,} bytes  ({offsets} x 8)")
    print(f"  size / raw offsets {len(data) / raw_offset_bytes:8.3f}")
    print(f"  bytes per offset   {len(data) / offsets:8.3f}")

    as_json = json.dumps(describe_checkpoint(checkpoint), separators=(",", ":")).encode()
    json_encode_s = best_of(
        args.rounds,
        lambda: json.dumps(describe_checkpoint(checkpoint), separators=(",", ":")).encode(),
    )
    json_decode_s = best_of(args.rounds, lambda: json.loads(as_json))
    print("\nJSON of the same checkpoint (decode = json.loads only, no handles built)")
    print(
        f"  JSON   size {len(as_json):>10,} bytes ({len(as_json) / len(data):5.1f}x ours)  "
        f"encode {json_encode_s * 1000:7.1f} ms  decode {json_decode_s * 1000:7.1f} ms"
    )

    fs = LocalFileSystem()
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        base = Path(tmp)

        def plain(n: int) -> None:
            (base / f"plain-{n}").write_bytes(data)

        def plain_fsync(n: int) -> None:
            with (base / f"fsync-{n}").open("wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())

        def commit(n: int) -> None:
            fs.write_atomic(str(base / f"commit-{n}"), data)

        rounds = max(args.rounds * 3, 15)  # writes are noisier than the codec
        plain_s = median_of(rounds, plain)
        fsync_s = median_of(rounds, plain_fsync)
        commit_s = median_of(rounds, commit)
    print(f"\nlocal write of the {len(data):,} bytes (median of {rounds}, {tmp})")
    print(f"  plain write                      {plain_s * 1000:8.2f} ms")
    print(f"  plain write + fsync              {fsync_s * 1000:8.2f} ms")
    print(f"  temp + fsync + link + dir fsync  {commit_s * 1000:8.2f} ms")
    print(f"  commit / plain write             {commit_s / plain_s:8.2f}")
    print(f"  commit / plain write + fsync     {commit_s / fsync_s:8.2f}")


if __name__ == "__main__":
    main()
