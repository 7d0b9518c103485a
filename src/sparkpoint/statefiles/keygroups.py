"""Key-group math: key → key group → subtask, as in Flink's KeyGroupRangeAssignment.

A key belongs to one of ``max_parallelism`` key groups forever; a subtask owns a
contiguous range of key groups that depends on the parallelism. Rescaling therefore moves
whole key groups, never single keys, and a restoring subtask reads only its groups.

>>> key_group_range_for_subtask(128, 3, 1)
KeyGroupRange(start=43, end=85)
>>> subtask_for_key_group(128, 3, 85), subtask_for_key_group(128, 3, 86)
(1, 2)
>>> default_max_parallelism(100)
256
"""

from __future__ import annotations

import mmh3

from sparkpoint.checkpoint import UPPER_BOUND_MAX_PARALLELISM, KeyGroupRange
from sparkpoint.checkpoint.keygroups import check_parallelism

# canonical_key_bytes lives in statefiles.keys (with its decoder); re-exported here because
# it is half of the key-group contract.
from sparkpoint.statefiles.keys import Key, canonical_key_bytes

#: Flink's DEFAULT_LOWER_BOUND_MAX_PARALLELISM.
DEFAULT_LOWER_BOUND_MAX_PARALLELISM = 128

__all__ = [
    "DEFAULT_LOWER_BOUND_MAX_PARALLELISM",
    "UPPER_BOUND_MAX_PARALLELISM",
    "canonical_key_bytes",
    "default_max_parallelism",
    "key_group_for_key",
    "key_group_for_key_bytes",
    "key_group_range_for_subtask",
    "murmur3_32",
    "subtask_for_key_group",
]


def murmur3_32(data: bytes) -> int:
    """MurmurHash3 x86 32-bit, seed 0, as an unsigned integer (0 … 2**32-1)."""
    return mmh3.hash(data, 0, signed=False)


def key_group_for_key_bytes(key_bytes: bytes, max_parallelism: int) -> int:
    """Key group of a key given its canonical bytes (readers have the bytes already)."""
    return murmur3_32(key_bytes) % max_parallelism


def key_group_for_key(key: Key, max_parallelism: int) -> int:
    """``murmur3_32(canonical_key_bytes(key)) mod max_parallelism`` (docs/architecture.md §6).

    >>> key_group_for_key("user-42", 128)
    90
    """
    return murmur3_32(canonical_key_bytes(key)) % max_parallelism


def key_group_range_for_subtask(
    max_parallelism: int, parallelism: int, index: int
) -> KeyGroupRange:
    """Key groups of subtask ``index``: ``[ceil(i·M/P), ceil((i+1)·M/P) - 1]``.

    Flink's computeKeyGroupRangeForOperatorIndex, in integer arithmetic:
    start = (i·M + P - 1) // P, end = ((i+1)·M - 1) // P.
    """
    check_parallelism(parallelism, max_parallelism)
    if not 0 <= index < parallelism:
        raise ValueError(f"subtask index {index} is out of range 0..{parallelism - 1}")
    start = (index * max_parallelism + parallelism - 1) // parallelism
    end = ((index + 1) * max_parallelism - 1) // parallelism
    return KeyGroupRange(start, end)


def subtask_for_key_group(max_parallelism: int, parallelism: int, key_group: int) -> int:
    """The subtask that owns ``key_group``: ``floor(g·P/M)`` (computeOperatorIndexForKeyGroup)."""
    if not 0 <= key_group < max_parallelism:
        raise ValueError(f"key group {key_group} is out of range 0..{max_parallelism - 1}")
    return key_group * parallelism // max_parallelism


def default_max_parallelism(parallelism: int) -> int:
    """Flink's computeDefaultMaxParallelism: the next power of two ≥ P + P//2, kept within
    128 … 32768. Gives room to scale up ~1.5x before the key groups run out of subtasks.
    """
    if not 1 <= parallelism <= UPPER_BOUND_MAX_PARALLELISM:
        # Flink's checkParallelismPreconditions: no parallelism can exceed 32768.
        raise ValueError(
            f"parallelism {parallelism} is out of range 1..{UPPER_BOUND_MAX_PARALLELISM}"
        )
    wanted = parallelism + parallelism // 2
    power = 1 << (wanted - 1).bit_length()  # smallest power of two ≥ wanted
    return min(max(power, DEFAULT_LOWER_BOUND_MAX_PARALLELISM), UPPER_BOUND_MAX_PARALLELISM)
