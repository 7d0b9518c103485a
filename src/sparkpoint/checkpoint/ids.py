"""Job and checkpoint identifiers, and their canonical spellings in paths and znode names."""

from __future__ import annotations

import re

from sparkpoint.checkpoint.errors import InvalidCheckpointValue

# A job id ends up in a znode name and a directory name, an operator uid in a file name:
# both are kept to a safe alphabet.
_JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")

#: Checkpoint ids are positive and fit a signed 64-bit integer, as in Flink.
MAX_CHECKPOINT_ID = 2**63 - 1
#: Width of a zero-padded checkpoint id in znode names: sorting by name sorts by id.
CHECKPOINT_ID_WIDTH = 19


def validate_job_id(job_id: str) -> str:
    """Return ``job_id`` if it is usable as a znode and directory name, else raise.

    >>> validate_job_id("clicks-per-user")
    'clicks-per-user'
    """
    if not isinstance(job_id, str) or not _JOB_ID.match(job_id) or job_id in {".", ".."}:
        raise InvalidCheckpointValue(
            f"job id {job_id!r} is invalid: use 1-128 characters of letters, digits, "
            "'.', '_' and '-', starting with a letter or digit"
        )
    return job_id


def validate_operator_uid(uid: str) -> str:
    """Return ``uid`` if it is usable in a state file's name (and a znode's), else raise.

    The same safe alphabet as job ids: an operator uid becomes part of a path on every
    checkpoint (``<uid>-<subtask>-<attempt>``), so nothing may escape the checkpoint
    directory through it.

    >>> validate_operator_uid("count-per-user")
    'count-per-user'
    """
    if not isinstance(uid, str) or not _JOB_ID.match(uid) or uid in {".", ".."}:
        raise InvalidCheckpointValue(
            f"operator uid {uid!r} is invalid: use 1-128 characters of letters, digits, "
            "'.', '_' and '-', starting with a letter or digit"
        )
    return uid


def validate_checkpoint_id(checkpoint_id: int) -> int:
    """Return ``checkpoint_id`` if it is a valid checkpoint id (1 … 2**63-1), else raise."""
    if isinstance(checkpoint_id, bool) or not isinstance(checkpoint_id, int):
        raise InvalidCheckpointValue(f"checkpoint id {checkpoint_id!r} is not an integer")
    if not 1 <= checkpoint_id <= MAX_CHECKPOINT_ID:
        raise InvalidCheckpointValue(
            f"checkpoint id {checkpoint_id} is out of range 1..{MAX_CHECKPOINT_ID}"
        )
    return checkpoint_id


def format_checkpoint_id(checkpoint_id: int) -> str:
    """The 19-digit zero-padded name of a checkpoint id.

    >>> format_checkpoint_id(42)
    '0000000000000000042'
    """
    return f"{validate_checkpoint_id(checkpoint_id):0{CHECKPOINT_ID_WIDTH}d}"


def parse_checkpoint_id(name: str) -> int:
    """Inverse of :func:`format_checkpoint_id`; raises on anything but 19 digits."""
    if len(name) != CHECKPOINT_ID_WIDTH or not name.isdigit():
        raise InvalidCheckpointValue(f"{name!r} is not a 19-digit checkpoint id")
    return validate_checkpoint_id(int(name))
