"""The ZooKeeper layout of docs/architecture.md (section 3), in one place."""

from __future__ import annotations

from dataclasses import dataclass

from sparkpoint.checkpoint import format_checkpoint_id, validate_job_id


@dataclass(frozen=True, slots=True)
class ZkPaths:
    """Absolute znode paths under ``/<root>/<cluster-id>``.

    >>> ZkPaths("/sparkpoint/prod").checkpoint("j1", 7)
    '/sparkpoint/prod/checkpoints/j1/0000000000000000007'
    """

    base: str

    @property
    def leader(self) -> str:
        return f"{self.base}/leader"

    @property
    def latch(self) -> str:
        return f"{self.base}/leader/latch"

    @property
    def leader_info(self) -> str:
        return f"{self.base}/leader/info"

    @property
    def epoch(self) -> str:
        return f"{self.base}/leader/epoch"

    @property
    def jobs(self) -> str:
        return f"{self.base}/jobs"

    def job(self, job_id: str) -> str:
        return f"{self.jobs}/{validate_job_id(job_id)}"

    @property
    def checkpoints(self) -> str:
        return f"{self.base}/checkpoints"

    def job_checkpoints(self, job_id: str) -> str:
        return f"{self.checkpoints}/{validate_job_id(job_id)}"

    def checkpoint(self, job_id: str, checkpoint_id: int) -> str:
        return f"{self.job_checkpoints(job_id)}/{format_checkpoint_id(checkpoint_id)}"

    @property
    def counters(self) -> str:
        return f"{self.base}/counters"

    def counter(self, job_id: str) -> str:
        return f"{self.counters}/{validate_job_id(job_id)}"
