"""The channel to the HA coordinator service, through ``sparkpoint.client``.

The client follows the leader (redirects, other replicas) and retries idempotent calls.
What a failover means for the driver: notices keep coming from the new leader (its
sequence numbers are higher), and a checkpoint that was pending at the old leader is
gone — acknowledging or declining it answers 404/409 — so it is dropped and the next
trigger is awaited; the pipeline itself never stops for it.

Every call carries the driver run id the registration returned. When another run of the
job registered since, the coordinator refuses this one (409 ``run_superseded``, naming
both runs) and the call raises :class:`~sparkpoint.pipeline.channels.protocol.RunSuperseded`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from sparkpoint.checkpoint import CheckpointKind, JobGraph
from sparkpoint.client import (
    ClientError,
    Conflict,
    CoordinatorClient,
    Credentials,
    NotFound,
    Superseded,
    Unavailable,
)
from sparkpoint.pipeline.channels.liveness import LivenessListener
from sparkpoint.pipeline.channels.protocol import (
    Ack,
    RescaleTo,
    Restored,
    RestoreMode,
    RunNotice,
    RunSuperseded,
)

log = logging.getLogger(__name__)


class RemoteChannel:
    """``addresses``: ``host:port`` of any coordinator replicas. ``on_notice`` sees every
    notice as the coordinator sent it (a drill records completions from it)."""

    def __init__(
        self,
        addresses: list[str] | str,
        *,
        checkpoint_config: dict[str, Any] | None = None,
        timeout_s: float = 5.0,
        retry_for_s: float = 60.0,
        on_notice: Callable[[RunNotice], None] | None = None,
        credentials: Credentials | None = None,
    ) -> None:
        # credentials None: SPARKPOINT_TOKEN_FILE / SPARKPOINT_CA_FILE (docs/security.md).
        self.client = CoordinatorClient(
            addresses, timeout_s=timeout_s, retry_for_s=retry_for_s, credentials=credentials
        )
        self._on_notice = on_notice
        self._config = dict(checkpoint_config or {})
        self._job_id: str | None = None
        self._run_id: str | None = None
        self._seq = 0
        self.standby = False
        self._superseded = False
        first = addresses if isinstance(addresses, str) else (addresses or [""])[0]
        self._first_address = first.split(",")[0].strip()
        self._liveness: LivenessListener | None = None
        self.progress: dict[str, Any] | None = None  # sent with heartbeats (UI's Jobs page)

    @property
    def job_id(self) -> str:
        if self._job_id is None:
            raise RuntimeError("register the job first")
        return self._job_id

    @property
    def run_id(self) -> str:
        if self._run_id is None:
            raise RuntimeError("register the job first")
        return self._run_id

    def register(self, graph: JobGraph, *, standby: bool = False) -> str:
        if self._liveness is None:
            self._liveness = LivenessListener.towards(self._first_address)
        reply = self.client.register_job(
            graph,
            self._config,
            standby=standby,
            probe_address=self._liveness.address if self._liveness else "",
        )
        self._job_id = graph.job_id
        self._run_id = str(reply["run_id"])
        self.standby = reply.get("role") == "standby"
        # Notices from before this run (triggers of an earlier driver) are not ours.
        self._seq = int(reply.get("notification_seq", 0))
        role = "the standby" if self.standby else "the active"
        log.info("job %s: this driver is %s run %s", graph.job_id, role, self._run_id)
        return self._run_id

    def wait_for_grant(self, poll_s: float = 0.05) -> list[RunNotice]:
        while self.standby:
            try:
                with self._as_run():
                    beat = self.client.heartbeat(self.job_id, self._seq, run_id=self.run_id)
            except Unavailable as exc:
                log.warning("standby heartbeat: %s", exc)
                beat = None
            if beat is not None and beat.role == "active":
                self.standby = False
                log.info("job %s: standby run %s granted the job", self.job_id, self.run_id)
                # The granting reply carries the first trigger: acting on it in the first
                # epoch saves an epoch (and the next heartbeat asks after it).
                return self._translate(beat.notifications, beat.rescale)
            time.sleep(poll_s)  # a polling interval: the grant comes with a heartbeat reply
        return []

    def release(self) -> None:
        if self._run_id is None or self._superseded:
            return
        try:
            self.client.release(self.job_id, run_id=self._run_id)
        except ClientError as exc:
            log.info("release of run %s: %s", self._run_id, exc)
        except Exception as exc:  # unreachable coordinators: the takeover timeout ends it
            log.info("release of run %s failed: %s", self._run_id, exc)

    @contextmanager
    def _as_run(self) -> Iterator[None]:
        try:
            yield
        except Superseded as exc:
            self._superseded = True
            raise RunSuperseded(exc.message) from exc

    def restore(
        self, graph: JobGraph, pointer: str | None = None, mode: RestoreMode | None = None
    ) -> Restored | None:
        with self._as_run():
            reply = self.client.restore_plan(
                self.job_id,
                graph,
                pointer=pointer,
                run_id=self.run_id,
                restore_mode=None if mode is None else mode.value,
            )
        if reply.plan is None or reply.restored is None:
            return None
        # A service that does not say (an older one) restored as it always did: the
        # latest checkpoint claimed; a pointer is then taken as not owned, the safe side.
        unsaid = pointer is None and mode is not RestoreMode.NO_CLAIM
        claimed = reply.restored.get("claimed", unsaid)
        return Restored(
            int(reply.restored["checkpoint_id"]),
            CheckpointKind(reply.restored["kind"]),
            str(reply.restored["metadata_uri"]),
            reply.plan,
            bool(claimed),
        )

    def heartbeat(self) -> list[RunNotice]:
        try:
            with self._as_run():
                beat = self.client.heartbeat(
                    self.job_id, self._seq, run_id=self.run_id, progress=self.progress
                )
        except Unavailable as exc:
            # No leader for a while: nothing to act on; the pipeline goes on and the
            # next heartbeat tries again.
            log.warning("heartbeat: %s", exc)
            return []
        return self._translate(beat.notifications, beat.rescale)

    def _translate(
        self, notices: Sequence[RunNotice], rescale: RescaleTo | None = None
    ) -> list[RunNotice]:
        """The numbered notices (each seen once), then the rescale instruction (repeated
        with every reply, so neither numbered nor handed to ``on_notice``)."""
        for n in notices:
            self._seq = max(self._seq, n.seq)
            if self._on_notice is not None:
                self._on_notice(n)
        return [*notices, *([rescale] if rescale is not None else [])]

    def acknowledge(self, checkpoint_id: int, acks: Sequence[Ack]) -> bool:
        try:
            with self._as_run():
                reply = self.client.acknowledge(
                    self.job_id, checkpoint_id, list(acks), run_id=self.run_id
                )
        except (NotFound, Conflict, Unavailable) as exc:
            log.info("checkpoint %d dropped: %s", checkpoint_id, exc)
            return False
        if reply.get("status") == "failed":
            log.info("checkpoint %d dropped: %s", checkpoint_id, reply.get("reason"))
            return False
        return True

    def decline(self, checkpoint_id: int, operator_uid: str, subtask: int, reason: str) -> None:
        try:
            with self._as_run():
                self.client.decline(
                    self.job_id, checkpoint_id, operator_uid, subtask, reason, run_id=self.run_id
                )
        except (NotFound, Conflict, Unavailable) as exc:
            log.info("decline of checkpoint %d not needed: %s", checkpoint_id, exc)

    def trigger_checkpoint(self) -> int:
        with self._as_run():
            return self.client.trigger_checkpoint(self.job_id)

    def trigger_savepoint(self, target_dir: str | None = None, *, stop: bool = False) -> int:
        with self._as_run():
            return self.client.trigger_savepoint(self.job_id, target_dir, stop=stop)

    def rescaled(self, request_id: str, epoch: int, checkpoint_id: int | None) -> None:
        with self._as_run():
            self.client.rescale_applied(
                self.job_id, request_id, epoch, checkpoint_id, run_id=self.run_id
            )

    def close(self) -> None:
        self.client.close()
        if self._liveness is not None:
            self._liveness.close()
