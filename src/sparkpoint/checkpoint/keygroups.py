"""KeyGroupRange: a contiguous, inclusive range of key groups (possibly empty)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from sparkpoint.checkpoint.errors import InvalidCheckpointValue

#: Upper bound for max parallelism, as in Flink (2**15).
UPPER_BOUND_MAX_PARALLELISM = 32768


def check_parallelism(parallelism: int, max_parallelism: int, operator_uid: str = "") -> None:
    """Refuse a max parallelism outside 1..32768 or a parallelism above it, naming the
    operator when one is given (:class:`InvalidCheckpointValue`, a ValueError)."""
    operator = f"operator {operator_uid}: " if operator_uid else ""
    if not 1 <= max_parallelism <= UPPER_BOUND_MAX_PARALLELISM:
        raise InvalidCheckpointValue(
            f"{operator}max parallelism {max_parallelism} is out of range "
            f"1..{UPPER_BOUND_MAX_PARALLELISM}"
        )
    if not 1 <= parallelism <= max_parallelism:
        raise InvalidCheckpointValue(
            f"{operator}parallelism {parallelism} is out of range "
            f"1..{max_parallelism} (its max parallelism)"
        )


@dataclass(frozen=True, slots=True)
class KeyGroupRange:
    """Key groups ``start`` … ``end``, both inclusive. ``end == start - 1`` is the empty range.

    >>> r = KeyGroupRange(4, 7)
    >>> len(r), 5 in r, list(r.intersection(KeyGroupRange(6, 9)))
    (4, True, [6, 7])
    """

    start: int
    end: int

    def __post_init__(self) -> None:
        if self.start < 0 or self.end < self.start - 1:
            raise InvalidCheckpointValue(f"invalid key group range [{self.start}, {self.end}]")

    @classmethod
    def empty(cls) -> KeyGroupRange:
        return cls(0, -1)

    @property
    def is_empty(self) -> bool:
        return self.end < self.start

    @property
    def num_key_groups(self) -> int:
        return self.end - self.start + 1

    def __len__(self) -> int:
        return self.num_key_groups

    def __contains__(self, key_group: object) -> bool:
        return isinstance(key_group, int) and self.start <= key_group <= self.end

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.start, self.end + 1))

    def intersection(self, other: KeyGroupRange) -> KeyGroupRange:
        start, end = max(self.start, other.start), min(self.end, other.end)
        return KeyGroupRange(start, end) if start <= end else KeyGroupRange.empty()

    def index_of(self, key_group: int) -> int:
        """Position of ``key_group`` within this range (for offset lookups)."""
        if key_group not in self:
            raise InvalidCheckpointValue(f"key group {key_group} is not in {self}")
        return key_group - self.start

    def __str__(self) -> str:
        return "[]" if self.is_empty else f"[{self.start}, {self.end}]"
