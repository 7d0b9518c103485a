"""Where the status commands get their answers: a coordinator over HTTP, or — while none
answers — ZooKeeper and storage directly, through the replicas' status model
(:class:`~sparkpoint.service.status.StatusReader`: what a follower would answer)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from sparkpoint.client import CoordinatorClient, Unavailable
from sparkpoint.config import Config
from sparkpoint.ha import HAError, ZooKeeperConnection
from sparkpoint.service.backend import ZooKeeperBackend
from sparkpoint.service.status import StatusReader
from sparkpoint.storage import CheckpointStorage


class StatusSource(Protocol):
    name: str

    def leader(self) -> dict[str, Any]: ...

    def jobs(self) -> list[dict[str, Any]]: ...

    def job(self, job_id: str) -> dict[str, Any]: ...

    def checkpoints(self, job_id: str) -> dict[str, Any]: ...

    def checkpoint(self, job_id: str, checkpoint_id: int) -> dict[str, Any]: ...


class ZooKeeperSource:
    name = "zookeeper"

    def __init__(self, conn: ZooKeeperConnection, storage: CheckpointStorage) -> None:
        self._reader = StatusReader(ZooKeeperBackend(conn), storage, None)

    def leader(self) -> dict[str, Any]:
        return {**self._reader.leader(), "this": None}

    def jobs(self) -> list[dict[str, Any]]:
        return self._reader.jobs()

    def job(self, job_id: str) -> dict[str, Any]:
        return self._reader.job(job_id)

    def checkpoints(self, job_id: str) -> dict[str, Any]:
        return self._reader.checkpoints(job_id)

    def checkpoint(self, job_id: str, checkpoint_id: int) -> dict[str, Any]:
        return self._reader.checkpoint(job_id, checkpoint_id)


class ClientSource:
    name = "coordinator"

    def __init__(self, client: CoordinatorClient) -> None:
        self._client = client

    def leader(self) -> dict[str, Any]:
        return self._client.leader()

    def jobs(self) -> list[dict[str, Any]]:
        return self._client.jobs()

    def job(self, job_id: str) -> dict[str, Any]:
        return self._client.job(job_id)

    def checkpoints(self, job_id: str) -> dict[str, Any]:
        return self._client.checkpoints(job_id)

    def checkpoint(self, job_id: str, checkpoint_id: int) -> dict[str, Any]:
        return self._client.checkpoint(job_id, checkpoint_id)


@contextmanager
def zookeeper(config: Config) -> Iterator[ZooKeeperConnection]:
    conn = ZooKeeperConnection(config.zookeeper).start()
    try:
        yield conn
    finally:
        conn.close()


def leader_address(conn: ZooKeeperConnection) -> str | None:
    info = ZooKeeperBackend(conn).leader_info()
    return str(info["address"]) if info and info.get("address") else None


def client_answers(client: CoordinatorClient) -> bool:
    try:
        client.leader()
    except (Unavailable, HAError):
        return False
    return True
