"""What every sink is: the :class:`Sink` protocol the driver speaks, and the two-phase-commit
base (Flink's ``TwoPhaseCommitSinkFunction``) that transactional connectors build on.

begin → invoke (each output) → pre-commit (at the snapshot of checkpoint N) → commit (when
N completes) → abort. One transaction per sink subtask per checkpoint. A pre-committed
transaction is recorded in the checkpoint's operator state; on restore from N, the
transactions N recorded are committed (again: commit must be idempotent) and every other
pre-committed transaction of this job and operator is aborted — its outputs belong to
epochs after N, which run again.

Where the transaction lives: the epoch's outputs are computed on the executors and
collected to the driver (:class:`CollectingWriter`), which holds each subtask's open
transaction between epochs and pre-commits it at the snapshot. An executor cannot hold
it: every epoch is a new Spark job whose tasks may run anywhere, but a database
transaction lives in one connection until it is prepared. A prepared transaction is
detached from its connection, so the driver commits it when the completion notice comes,
from any connection — or a restarted driver does, from the checkpoint's state.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from sparkpoint.pipeline.state import pickles

T = TypeVar("T")  # an open transaction
P = TypeVar("P")  # a pre-committed transaction (picklable: it goes into checkpoints)


class Sink(Protocol):
    """What the driver calls on a sink (:class:`TwoPhaseCommitSink` below implements it).
    Phase one: ``writer(process_tag, epoch)`` is shipped to the executors, its
    ``write(partition, outputs)`` results come back to ``epoch_written``. Phase two:
    ``pre_commit`` at a snapshot, ``snapshot`` for the checkpoint's operator state,
    ``commit_up_to`` on completion, ``restore`` with the restored checkpoint's elements
    (none on a fresh start); ``close`` when the job goes away (the driver's ``close``): it
    releases every client the sink opened, and a sink used again opens them again."""

    def bind(self, job_id: str, operator_uid: str) -> None: ...

    def writer(self, process_tag: str, epoch: int) -> Any: ...

    def epoch_written(self, outputs: Iterable[Any]) -> None: ...

    def pre_commit(self, checkpoint_id: int) -> None: ...

    def snapshot(self, parallelism: int) -> list[list[bytes]]: ...

    def commit_up_to(self, checkpoint_id: int) -> int: ...

    def restore(self, elements: Iterable[bytes]) -> None: ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class EpochOutput:
    """One subtask's outputs of one epoch, sent from the executor to the driver."""

    partition: int
    values: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class CollectingWriter:
    """Executor side: hands the outputs to the driver (picklable)."""

    def write(self, partition: int, outputs: Iterable[Any]) -> EpochOutput | None:
        values = tuple(outputs)
        return EpochOutput(partition, values) if values else None


class TwoPhaseCommitSink(ABC, Generic[T, P]):
    """Subclasses implement the transaction operations; the base runs the protocol the
    driver speaks to every sink (``writer``, ``epoch_written``, ``pre_commit``,
    ``snapshot``, ``commit_up_to``, ``restore``)."""

    def __init__(self) -> None:
        self.job_id = ""
        self.operator_uid = ""
        self._open: dict[int, T] = {}
        self._pending: dict[int, list[P]] = {}
        self.committed_transactions = 0

    # -- what a database connector implements -----------------------------------------

    @abstractmethod
    def begin_transaction(self, subtask: int) -> T: ...

    @abstractmethod
    def invoke(self, transaction: T, value: Any) -> None:
        """Add one output to the open transaction."""

    @abstractmethod
    def pre_commit_transaction(self, transaction: T, checkpoint_id: int) -> P:
        """Make the transaction durable and committable later from anywhere; its id must
        be a function of (job, operator, subtask, checkpoint)."""

    @abstractmethod
    def commit(self, prepared: P) -> None:
        """Commit; committing one that was committed before is a no-op (idempotent)."""

    @abstractmethod
    def abort_others(self, keep: list[P]) -> int:
        """Abort every pre-committed transaction of this job and operator not in
        ``keep``; returns how many. Called on every start, restored or not, and after
        every completed checkpoint."""

    def abort(self, transaction: T) -> None:
        """Drop an open transaction (nothing was sent before pre-commit)."""

    def close(self) -> None:
        """Release the connector's clients (a connector that keeps one overrides this)."""

    # -- the driver's protocol ---------------------------------------------------------

    def bind(self, job_id: str, operator_uid: str) -> None:
        """The job and operator the transaction ids are made of."""
        self.job_id, self.operator_uid = job_id, operator_uid

    def writer(self, process_tag: str, epoch: int) -> CollectingWriter:
        return CollectingWriter()

    def epoch_written(self, outputs: Iterable[EpochOutput]) -> None:
        for out in outputs:
            txn = self._open.get(out.partition)
            if txn is None:
                txn = self._open[out.partition] = self.begin_transaction(out.partition)
            for value in out.values:
                self.invoke(txn, value)

    def pre_commit(self, checkpoint_id: int) -> None:
        if self._open:
            self._pending[checkpoint_id] = [
                self.pre_commit_transaction(txn, checkpoint_id)
                for _, txn in sorted(self._open.items(), key=lambda item: item[0])
            ]
            self._open = {}

    def snapshot(self, parallelism: int) -> list[list[bytes]]:
        out: list[list[bytes]] = [[] for _ in range(parallelism)]
        for n, prepared in enumerate(p for ps in self._pending.values() for p in ps):
            out[n % parallelism].append(pickles.dumps(prepared))
        return out

    def commit_up_to(self, checkpoint_id: int) -> int:
        """Commit what this run pre-committed up to the completed checkpoint, then abort
        every other pre-committed transaction of the job and operator except this run's
        later ones: a superseded run may have prepared one after this run's restore (its
        snapshot raced the supersession), and nothing else would ever end it. So no
        prepared transaction outlives the current run's next completed checkpoint."""
        done = 0
        for cid in sorted(c for c in self._pending if c <= checkpoint_id):
            for prepared in self._pending.pop(cid):
                self.commit(prepared)
                done += 1
        self.committed_transactions += done
        self.abort_others([p for ps in self._pending.values() for p in ps])
        return done

    def restore(self, elements: Iterable[bytes]) -> None:
        """Commit what the restored checkpoint pre-committed, abort the rest. With no
        checkpoint (``elements`` empty) every dangling transaction is aborted."""
        restored: list[P] = [pickles.loads(e) for e in elements]
        for prepared in restored:
            self.commit(prepared)
        self.committed_transactions += len(restored)
        self.abort_others(restored)
        for txn in self._open.values():
            self.abort(txn)
        self._open, self._pending = {}, {}
