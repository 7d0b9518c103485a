"""What every side of bench/sessions_bench.py shares: the workload, the sessions it must
produce (computed offline, without any engine) and how a set of sessions is fingerprinted.

Pure Python on purpose: the PyFlink side imports it from a virtualenv of its own, where
neither PySpark nor sparkpoint's dependencies beyond ``mmh3`` are installed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

SPLITS = 4
PARALLELISM = 4
OUT_OF_ORDERNESS_MS = 2_000
# A click this far after every generated one: what tells an engine without an end of
# input (Structured Streaming) that every session is over.
FLUSH_TS_MS = 4_000_000_000_000
FLUSH_USER = "~end-of-input"


def mean_user_gap_ms(users: int) -> float:
    """Mean time between two clicks of one user: a split emits a click every 50 ms (the
    jitter does not change the mean) for its ``users / SPLITS`` users."""
    return users / SPLITS * 50


@dataclass(frozen=True, slots=True)
class Workload:
    """``records`` clicks of ``users`` users from the click generator's ``SPLITS`` splits
    (``records // SPLITS`` each), sessions with gap ``gap_ms``, read ``per_epoch`` records
    per epoch / micro-batch."""

    records: int
    users: int
    gap_ms: int
    per_epoch: int

    @property
    def per_split(self) -> int:
        return self.records // SPLITS

    def source(self) -> Any:
        from sparkpoint.pipeline.sources.generator import ClickEventSource

        return ClickEventSource(
            splits=SPLITS,
            users=self.users,
            records_per_epoch=self.per_epoch,
            records_per_split=self.per_split,
        )

    def reader(self) -> Any:
        """The generator's reader: ``reader().event(split, index)`` is click ``index`` of
        split ``split``, the same on every engine."""
        return self.source().reader()

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Workload:
        return cls(**json.loads(text))


@dataclass(frozen=True, slots=True)
class Session:
    user: str
    start: int
    end: int  # last click + gap (Flink's session window end)
    clicks: int
    amount: int


def reference_sessions(workload: Workload, *, merge_touching: bool = True) -> Iterator[Session]:
    """The sessions the engines must produce: per user, clicks in event-time order, a new
    session when a click comes more than ``gap_ms`` after the previous one. A click exactly
    ``gap_ms`` after is where the engines' rules differ: Flink merges windows
    ``[ts, ts + gap)`` that touch (``merge_touching``: the same session), sparkpoint's
    session windows merge only windows that overlap (a new session)."""
    open_: dict[str, list[int]] = {}  # user → [start, last, clicks, amount]
    gap = workload.gap_ms
    # A user's clicks come from one split, in rising ``ts``: reading split by split gives
    # every user's clicks in order.
    for _split, _position, click in workload.source().all_records():
        user, ts, amount = click["user"], click["ts"], click["amount"]
        current = open_.get(user)
        since = None if current is None else ts - current[1]
        if since is not None and (since < gap or (merge_touching and since == gap)):
            current[1], current[2], current[3] = ts, current[2] + 1, current[3] + amount
            continue
        if current is not None:
            yield Session(user, current[0], current[1] + gap, current[2], current[3])
        open_[user] = [ts, ts, 1, amount]
    for user, (start, last, clicks, amount) in open_.items():
        yield Session(user, start, last + gap, clicks, amount)


def fingerprint(sessions: Iterable[Session]) -> dict[str, Any]:
    """Order-independent summary of a set of sessions: how many, the clicks and amount they
    hold, and a checksum (sum of a hash per session, modulo 2**64)."""
    count = clicks = amount = checksum = 0
    for s in sessions:
        count, clicks, amount = count + 1, clicks + s.clicks, amount + s.amount
        digest = hashlib.blake2b(
            f"{s.user}|{s.start}|{s.end}|{s.clicks}|{s.amount}".encode(), digest_size=8
        ).digest()
        checksum = (checksum + int.from_bytes(digest, "big")) % 2**64
    return {"sessions": count, "clicks": clicks, "amount": amount, "checksum": f"{checksum:016x}"}


def json_lines(directory: Path, pattern: str) -> Iterator[dict[str, Any]]:
    """Every JSON object of the files under ``directory`` whose names match ``pattern``."""
    for path in sorted(directory.rglob(pattern)):
        with path.open() as lines:
            yield from (json.loads(line) for line in lines if line.strip())


def flat_sessions(directory: Path, pattern: str) -> Iterator[Session]:
    """Sessions written as ``{"user", "start", "end", "clicks", "amount"}`` lines."""
    for row in json_lines(directory, pattern):
        yield Session(row["user"], row["start"], row["end"], row["clicks"], row["amount"])
