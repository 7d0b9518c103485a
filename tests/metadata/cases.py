"""Fixed checkpoints whose encodings are the golden files, and a writer for new ones.

Run ``python -m tests.metadata.cases`` after adding a format version: it writes the
golden files of the current version that do not exist yet and never rewrites old ones.
"""

from __future__ import annotations

from pathlib import Path

from sparkpoint.checkpoint import (
    CheckpointKind,
    CompletedCheckpoint,
    DistributionMode,
    FileStateHandle,
    IncrementalKeyedStateHandle,
    InlineStateHandle,
    KeyGroupRange,
    KeyGroupsStateHandle,
    OperatorState,
    OperatorStateHandle,
    OperatorSubtaskState,
    StateMetaInfo,
    StoreFile,
)

GOLDEN_DIR = Path(__file__).parent / "golden"
CHECKPOINT_DIR = "hdfs://namenode:8020/sparkpoint/checkpoints/clicks/chk-42"
SAVEPOINT_DIR = "file:///var/lib/sparkpoint/savepoints/savepoint-clicks-5f3a9c01be72"


def _source_state() -> OperatorState:
    # A Kafka-like source: partition offsets as SPLIT_DISTRIBUTE operator state, inline.
    def subtask(i: int) -> OperatorSubtaskState:
        data = bytes(range(i, i + 24))
        return OperatorSubtaskState(
            operator=(
                OperatorStateHandle(
                    {
                        "partition-offsets": StateMetaInfo(
                            (0, 8), DistributionMode.SPLIT_DISTRIBUTE
                        ),
                        "watermark": StateMetaInfo((16,), DistributionMode.UNION),
                    },
                    InlineStateHandle(f"source-{i}-0", data),
                ),
            )
        )

    return OperatorState("source", 2, 128, {0: subtask(0), 1: subtask(1)})


def _counts_state(directory: str) -> OperatorState:
    # Keyed state at parallelism 3, max parallelism 128: ranges [0,42], [43,85], [86,127].
    subtasks = {}
    for i, (start, end) in enumerate(((0, 42), (43, 85), (86, 127))):
        count = end - start + 1
        offsets = tuple(g * 100 for g in range(count))
        stream = FileStateHandle(f"{directory}/counts-{i}-0", count * 100 + 7)
        subtasks[i] = OperatorSubtaskState(
            keyed=(KeyGroupsStateHandle(KeyGroupRange(start, end), offsets, stream),)
        )
    return OperatorState("counts", 3, 128, subtasks)


def _sink_state() -> OperatorState:
    # A two-phase sink: pending transactions as BROADCAST state, one empty subtask.
    handle = OperatorStateHandle(
        {"pending-transactions": StateMetaInfo((0, 3, 3, 10), DistributionMode.BROADCAST)},
        InlineStateHandle("sink-0-1", b"txn-41\x00\x00\x00\x00\x00"),
    )
    return OperatorState(
        "sink", 2, 2, {0: OperatorSubtaskState(operator=(handle,)), 1: OperatorSubtaskState()}
    )


def checkpoint_case() -> CompletedCheckpoint:
    return CompletedCheckpoint(
        job_id="clicks",
        checkpoint_id=42,
        kind=CheckpointKind.CHECKPOINT,
        trigger_timestamp_ms=1_763_700_000_000,
        completion_timestamp_ms=1_763_700_000_812,
        operator_states={
            "source": _source_state(),
            "counts": _counts_state(CHECKPOINT_DIR),
            "sink": _sink_state(),
        },
    )


def savepoint_case() -> CompletedCheckpoint:
    return CompletedCheckpoint(
        job_id="clicks",
        checkpoint_id=43,
        kind=CheckpointKind.SAVEPOINT,
        trigger_timestamp_ms=1_763_700_060_000,
        completion_timestamp_ms=1_763_700_061_003,
        operator_states={"source": _source_state(), "counts": _counts_state(SAVEPOINT_DIR)},
    )


def _incremental_state(reused: frozenset[str] = frozenset()) -> OperatorState:
    # An embedded store per subtask: SST files shared with other checkpoints, under
    # <job>/shared/, and the store's own small files inline or in chk-44; ``reused``
    # names the SST files an earlier checkpoint uploaded.
    shared = "hdfs://namenode:8020/sparkpoint/checkpoints/clicks/shared"
    own = "hdfs://namenode:8020/sparkpoint/checkpoints/clicks/chk-44"

    def subtask(i: int, groups: KeyGroupRange) -> OperatorSubtaskState:
        instance = f"{i:02d}c0ffee{i:08x}"
        return OperatorSubtaskState(
            keyed=(
                IncrementalKeyedStateHandle(
                    groups,
                    groups,
                    instance,
                    tuple(
                        StoreFile(f"{n:06d}.sst", FileStateHandle(
                            f"{shared}/counts-{instance}-{n:06d}.sst", 4096 * n))
                        for n in (9, 14)
                    ),
                    (
                        StoreFile("CURRENT", InlineStateHandle("CURRENT", b"MANIFEST-000016\n")),
                        StoreFile("MANIFEST-000016", FileStateHandle(
                            f"{own}/counts-{i}-0-MANIFEST-000016", 733)),
                    ),
                    reused,
                ),
            )
        )  # fmt: skip

    return OperatorState(
        "counts",
        2,
        128,
        {0: subtask(0, KeyGroupRange(0, 63)), 1: subtask(1, KeyGroupRange(64, 127))},
    )


def incremental_case() -> CompletedCheckpoint:
    return CompletedCheckpoint(
        job_id="clicks",
        checkpoint_id=44,
        kind=CheckpointKind.CHECKPOINT,
        trigger_timestamp_ms=1_763_700_120_000,
        completion_timestamp_ms=1_763_700_120_410,
        operator_states={"source": _source_state(), "counts": _incremental_state()},
    )


def incremental_reused_case() -> CompletedCheckpoint:
    # The next checkpoint: 000009.sst of every store was uploaded by checkpoint 44.
    return CompletedCheckpoint(
        job_id="clicks",
        checkpoint_id=45,
        kind=CheckpointKind.CHECKPOINT,
        trigger_timestamp_ms=1_763_700_180_000,
        completion_timestamp_ms=1_763_700_180_205,
        operator_states={
            "source": _source_state(),
            "counts": _incremental_state(frozenset({"000009.sst"})),
        },
    )


#: name → (checkpoint, relative_to when encoded, base_dir when decoded)
CASES = {
    "checkpoint": (checkpoint_case, None),
    "savepoint": (savepoint_case, SAVEPOINT_DIR),
    "incremental": (incremental_case, None),
    "incremental-reused": (incremental_reused_case, None),
}
#: The first format version able to hold a case (the others: every version).
SINCE = {"incremental": 2, "incremental-reused": 3}


def cases_of(version: int) -> set[str]:
    return {name for name in CASES if SINCE.get(name, 1) <= version}


def write_missing_golden_files() -> list[Path]:
    from sparkpoint.metadata import FORMAT_VERSION, encode_metadata

    written = []
    directory = GOLDEN_DIR / f"v{FORMAT_VERSION}"
    directory.mkdir(parents=True, exist_ok=True)
    for name, (make, relative_to) in CASES.items():
        path = directory / f"{name}.metadata"
        if not path.exists():
            path.write_bytes(encode_metadata(make(), relative_to=relative_to))
            written.append(path)
    return written


if __name__ == "__main__":
    for path in write_missing_golden_files():
        print(f"wrote {path}")
