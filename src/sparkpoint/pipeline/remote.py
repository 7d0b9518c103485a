"""The channel to the HA coordinator service, through ``sparkpoint.client``.

The client follows the leader (redirects, other replicas) and retries idempotent calls.
What a failover means for the driver: notices keep coming from the new leader (its
sequence numbers are higher), and a checkpoint that was pending at the old leader is
gone — acknowledging or declining it answers 404/409 — so it is dropped and the next
trigger is awaited; the pipeline itself never stops for it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from sparkpoint.checkpoint import CheckpointKind, JobGraph
from sparkpoint.client import Conflict, CoordinatorClient, Credentials, NotFound, Unavailable
from sparkpoint.pipeline.channel import (
    Ack,
    ChannelNotice,
    CheckpointAborted,
    CheckpointCompleted,
    Restored,
    TriggerCheckpoint,
)

log = logging.getLogger(__name__)


class RemoteChannel:
    """``addresses``: ``host:port`` of any coordinator replicas."""

    def __init__(
        self,
        addresses: list[str] | str,
        *,
        checkpoint_config: dict[str, Any] | None = None,
        timeout_s: float = 5.0,
        retry_for_s: float = 60.0,
        credentials: Credentials | None = None,
    ) -> None:
        # credentials None: SPARKPOINT_TOKEN_FILE / SPARKPOINT_CA_FILE (docs/security.md).
        self.client = CoordinatorClient(
            addresses, timeout_s=timeout_s, retry_for_s=retry_for_s, credentials=credentials
        )
        self._config = dict(checkpoint_config or {})
        self._job_id: str | None = None
        self._seq = 0

    @property
    def job_id(self) -> str:
        if self._job_id is None:
            raise RuntimeError("register the job first")
        return self._job_id

    def register(self, graph: JobGraph) -> None:
        reply = self.client.register_job(graph, self._config)
        self._job_id = graph.job_id
        # Notices from before this run (triggers of an earlier driver) are not ours.
        self._seq = int(reply.get("notification_seq", 0))

    def restore(self, graph: JobGraph, pointer: str | None = None) -> Restored | None:
        reply = self.client.restore_plan(self.job_id, graph, pointer=pointer)
        if reply.plan is None or reply.restored is None:
            return None
        return Restored(
            int(reply.restored["checkpoint_id"]),
            CheckpointKind(reply.restored["kind"]),
            str(reply.restored["metadata_uri"]),
            reply.plan,
        )

    def heartbeat(self) -> list[ChannelNotice]:
        try:
            beat = self.client.heartbeat(self.job_id, self._seq)
        except Unavailable as exc:
            # No leader for a while: nothing to act on; the pipeline goes on and the
            # next heartbeat tries again.
            log.warning("heartbeat: %s", exc)
            return []
        notices: list[ChannelNotice] = []
        for n in beat.notifications:
            self._seq = max(self._seq, n.seq)
            if n.type == "trigger" and n.directory:
                kind = CheckpointKind(n.kind)
                notices.append(TriggerCheckpoint(n.checkpoint_id, kind, n.directory, n.stop))
            elif n.type == "complete":
                notices.append(CheckpointCompleted(n.checkpoint_id, CheckpointKind(n.kind)))
            elif n.type == "abort":
                notices.append(CheckpointAborted(n.checkpoint_id, n.reason or ""))
        return notices

    def acknowledge(self, checkpoint_id: int, acks: Sequence[Ack]) -> bool:
        try:
            reply = self.client.acknowledge(self.job_id, checkpoint_id, list(acks))
        except (NotFound, Conflict, Unavailable) as exc:
            log.info("checkpoint %d dropped: %s", checkpoint_id, exc)
            return False
        return reply.get("status") != "failed"

    def decline(self, checkpoint_id: int, operator_uid: str, subtask: int, reason: str) -> None:
        try:
            self.client.decline(self.job_id, checkpoint_id, operator_uid, subtask, reason)
        except (NotFound, Conflict, Unavailable) as exc:
            log.info("decline of checkpoint %d not needed: %s", checkpoint_id, exc)

    def trigger_checkpoint(self) -> int:
        return self.client.trigger_checkpoint(self.job_id)

    def trigger_savepoint(self, target_dir: str | None = None, *, stop: bool = False) -> int:
        return self.client.trigger_savepoint(self.job_id, target_dir, stop=stop)

    def close(self) -> None:
        self.client.close()
