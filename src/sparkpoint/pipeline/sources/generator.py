"""A deterministic generator of click events, for benchmarks, tests and the demo.

Record ``i`` of split ``s`` is a pure function of ``(seed, s, i)``. Each user's clicks
come from one split only (user index ≡ split mod splits) and their timestamps rise with
``i`` (unless made out of order or late, for event-time tests), so every user sees its
clicks in one well-defined order however the stream is cut into epochs — which makes
per-user results computable offline.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sparkpoint.pipeline.sources.base import EpochRange, OffsetSource

_MASK = (1 << 64) - 1
PAGES = ("home", "search", "product", "cart", "checkout", "help")


def _mix(x: int) -> int:
    """splitmix64's finaliser: a cheap, well-spread hash of a 64-bit integer."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


@dataclass(frozen=True, slots=True)
class ClickEventReader:
    seed: int
    splits: int
    users: int
    start_ts_ms: int
    out_of_order_ms: int = 0
    late_every: int = 0
    late_by_ms: int = 600_000

    def event(self, split: int, index: int) -> dict[str, Any]:
        x = _mix((self.seed * 1_000_003 + split) * 0x100000001 + index)
        per_split = max(1, self.users // self.splits)
        user = (x % per_split) * self.splits + split
        # 50 ms apart plus up to 49 ms of jitter: strictly rising within a split, unless
        # the stream is made out of order (up to out_of_order_ms earlier) or late.
        ts = self.start_ts_ms + index * 50 + (x >> 20) % 50
        if self.out_of_order_ms:
            ts -= (x >> 40) % self.out_of_order_ms
        if self.late_every and index % self.late_every == self.late_every - 1:
            ts -= self.late_by_ms
        return {
            "user": f"user-{user:05d}",
            "ts": ts,
            "page": PAGES[(x >> 8) % len(PAGES)],
            "amount": (x >> 32) % 10_000,
        }

    def read(self, split: EpochRange) -> Iterator[tuple[int, dict[str, Any]]]:
        number = int(split.split.rsplit("-", 1)[1])
        for index in range(split.start, split.end):
            yield index, self.event(number, index)


class ClickEventSource(OffsetSource):
    """``splits`` generator splits; ``records_per_epoch`` records per epoch in total;
    ``records_per_split`` bounds the stream (None: endless). For event time:
    ``out_of_order_ms`` moves each timestamp back by up to that much, and every
    ``late_every``-th record of a split (0: none) comes ``late_by_ms`` late.

    >>> src = ClickEventSource(splits=2, records_per_epoch=4, records_per_split=3)
    >>> src.plan_epoch()
    [EpochRange(split='gen-0', start=0, end=2), EpochRange(split='gen-1', start=0, end=2)]
    """

    def __init__(
        self,
        *,
        splits: int = 4,
        users: int = 1000,
        records_per_epoch: int = 10_000,
        records_per_split: int | None = None,
        seed: int = 7,
        start_ts_ms: int = 1_700_000_000_000,
        out_of_order_ms: int = 0,
        late_every: int = 0,
        late_by_ms: int = 600_000,
    ) -> None:
        if splits < 1 or records_per_epoch < splits:
            raise ValueError("need at least one split and one record per split and epoch")
        if out_of_order_ms < 0 or late_every < 0 or late_by_ms < 0:
            raise ValueError("out_of_order_ms, late_every and late_by_ms must not be negative")
        self._reader = ClickEventReader(
            seed, splits, users, start_ts_ms, out_of_order_ms, late_every, late_by_ms
        )
        self._per_split = records_per_epoch // splits
        self._limit = records_per_split
        self._offsets = {f"gen-{s}": 0 for s in range(splits)}

    def restore(self, offsets: dict[str, int]) -> None:
        for split, offset in offsets.items():
            if split in self._offsets:
                self._offsets[split] = offset

    def plan_epoch(self) -> list[EpochRange]:
        ranges = []
        for split, start in self._offsets.items():
            end = start + self._per_split
            if self._limit is not None:
                end = min(end, self._limit)
            if end > start:
                ranges.append(EpochRange(split, start, end))
        return ranges

    @property
    def exhausted(self) -> bool:
        return self._limit is not None and all(o >= self._limit for o in self._offsets.values())

    def reader(self) -> ClickEventReader:
        return self._reader

    def all_records(self) -> Iterator[tuple[str, int, dict[str, Any]]]:
        """Every record of a bounded stream: ``(split, position, record)`` (offline checks)."""
        if self._limit is None:
            raise ValueError("an endless generator has no 'all records'")
        return self.records_before(dict.fromkeys(self._offsets, self._limit))

    def records_before(self, offsets: dict[str, int]) -> Iterator[tuple[str, int, dict[str, Any]]]:
        """``(split, position, record)`` of every record below ``offsets`` (split → next
        position, as a checkpoint's source state holds them): the records a checkpoint
        has consumed, of a bounded or an endless stream (offline checks)."""
        for split in self._offsets:
            end = offsets.get(split, 0)
            yield from ((split, i, r) for i, r in self._reader.read(EpochRange(split, 0, end)))
