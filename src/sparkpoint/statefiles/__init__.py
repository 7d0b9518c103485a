"""The state files executors write: key bytes, key groups, stream format, writers, reader.

Canonical key bytes, key-group math, and the keyed and operator state stream format with
its writers and its reader (docs/state-files.md).

Below both the pipeline and recovery, and light (stdlib, mmh3 and the checkpoint values):
Spark executors import it for every snapshot, and writing one imports no restore logic.
"""

from sparkpoint.statefiles.keygroups import (
    default_max_parallelism,
    key_group_for_key,
    key_group_range_for_subtask,
    subtask_for_key_group,
)
from sparkpoint.statefiles.keys import Key, KeyEncodingError, canonical_key_bytes, decode_key

__all__ = [
    "Key",
    "KeyEncodingError",
    "canonical_key_bytes",
    "decode_key",
    "default_max_parallelism",
    "key_group_for_key",
    "key_group_range_for_subtask",
    "subtask_for_key_group",
]
