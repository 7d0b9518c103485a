"""Where a subtask's keyed state lives: the setting ``state_backend`` of a pipeline
(docs/pipeline.md, "State backends").

``memory`` (the default): the state RDD's partition holds the subtask's state as Python
objects; every epoch reads and rewrites the whole partition, and the state must fit in
executor memory. Fast for small state.

``rocksdb``: each subtask's state lives in an embedded RocksDB on the local disk of the
executor that runs it; the state RDD holds only a token naming the store and its version.
An epoch reads and writes the keys its records touch; memory is bounded by the block
cache and write buffers below, not by the state.

Kept free of rocksdict and pyspark: a pipeline is described without either.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Literal

BACKEND_NAMES = ("memory", "rocksdb")
ENVIRONMENT_VARIABLE = "SPARKPOINT_STATE_BACKEND"


@dataclass(frozen=True, slots=True)
class StoreSettings:
    """Memory of one open store is bounded by these, not by the state: the block cache,
    plus ``write_buffers`` memtables of ``write_buffer_bytes``. The stores of a host stay
    open in its store server until the job's driver closes, or until the server has had
    no request for ``server_idle_seconds``."""

    block_cache_bytes: int = 64 * 1024 * 1024
    write_buffer_bytes: int = 32 * 1024 * 1024
    write_buffers: int = 2
    server_idle_seconds: int = 600

    def __post_init__(self) -> None:
        for name in (
            "block_cache_bytes",
            "write_buffer_bytes",
            "write_buffers",
            "server_idle_seconds",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"state backend setting {name} must be positive")


@dataclass(frozen=True, slots=True)
class StateBackend:
    """``StateBackend("rocksdb", local_dir="/mnt/ssd")``; ``local_dir`` defaults to the
    executor's own scratch directory (Spark's per-executor files directory, removed with
    the executor), so two executors on one host never share a store."""

    name: Literal["memory", "rocksdb"] = "memory"
    settings: StoreSettings = field(default_factory=StoreSettings)
    local_dir: str | None = None
    #: rocksdb: checkpoints upload only the store files the last completed one lacked
    #: (savepoints are always full, in the canonical format).
    incremental: bool = True

    def __post_init__(self) -> None:
        if self.name not in BACKEND_NAMES:
            raise ValueError(
                f"state backend {self.name!r} is unknown; use one of {', '.join(BACKEND_NAMES)}"
            )

    @property
    def on_disk(self) -> bool:
        return self.name == "rocksdb"


def default_state_backend() -> StateBackend:
    """The backend of a pipeline that names none: ``SPARKPOINT_STATE_BACKEND`` if set
    (the setting ``state.backend``), else ``memory``."""
    return StateBackend(os.environ.get(ENVIRONMENT_VARIABLE, "memory"))  # type: ignore[arg-type]


def state_backend(value: str | StateBackend) -> StateBackend:
    """A backend from its name (``"memory"``, ``"rocksdb"``) or as given."""
    return value if isinstance(value, StateBackend) else StateBackend(value)  # type: ignore[arg-type]
