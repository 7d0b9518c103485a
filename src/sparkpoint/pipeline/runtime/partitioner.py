"""The key-group partitioner: key → key group → subtask (= Spark partition).

Spark (through PySpark) recognises two RDDs as co-partitioned only when their JVM
partitioners are equal, and PySpark's JVM partitioner is identified by the *id* of the
Python partition function. So the driver makes ONE :class:`KeyGroupPartitioner` per
parallelism and passes that same object to every ``partitionBy``; a second, equal-looking
instance would make Spark shuffle state again.

``Slot(i)`` is a marker key that goes to partition ``i``: partitioning P markers is how
a state RDD read back from snapshot files gets the partitioner without moving state.
"""

from __future__ import annotations

from dataclasses import dataclass

from sparkpoint.checkpoint.keygroups import check_parallelism
from sparkpoint.statefiles.keygroups import key_group_for_key, subtask_for_key_group
from sparkpoint.statefiles.keys import Key


@dataclass(frozen=True, slots=True)
class Slot:
    """A marker key for partition ``index`` (never a user key)."""

    index: int


class KeyGroupPartitioner:
    """Callable for ``rdd.partitionBy(parallelism, partitioner)``.

    >>> p = KeyGroupPartitioner(4, 128)
    >>> p(Slot(3)), 0 <= p("user-1") < 4
    (3, True)
    """

    def __init__(self, parallelism: int, max_parallelism: int) -> None:
        check_parallelism(parallelism, max_parallelism)
        self.parallelism = parallelism
        self.max_parallelism = max_parallelism

    def __call__(self, key: Key | Slot) -> int:
        if isinstance(key, Slot):
            return key.index
        return subtask_for_key_group(
            self.max_parallelism, self.parallelism, key_group_for_key(key, self.max_parallelism)
        )

    def __repr__(self) -> str:
        return f"KeyGroupPartitioner(parallelism={self.parallelism}, max={self.max_parallelism})"
