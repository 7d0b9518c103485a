"""Checkpoint storage on the local disk and on HDFS (WebHDFS): filesystems and layout.

Filesystems, the directory layout, state streams, atomic `_metadata` commits, reading
`_metadata` back, discard and orphans.

The only package that imports ``hdfs``.
"""

from sparkpoint.storage.checkpoint_storage import (
    DEFAULT_INLINE_THRESHOLD,
    CheckpointStorage,
    OrphanDirectory,
    checkpoint_dir_name,
)
from sparkpoint.storage.errors import (
    FileAlreadyExists,
    FileNotFound,
    PathOutsideRoot,
    PermissionDenied,
    StorageError,
    StorageUnavailable,
)
from sparkpoint.storage.filesystem import FileStatus, FileSystem, OutputFile
from sparkpoint.storage.location import (
    METADATA_FILE_NAME,
    CheckpointLocation,
    CommittedMetadata,
    state_file_name,
)
from sparkpoint.storage.reading import LoadedMetadata, check_state_files, load_metadata
from sparkpoint.storage.registry import filesystem_for
from sparkpoint.storage.streams import StateOutputStream
from sparkpoint.storage.verify import FileCheck

__all__ = [
    "DEFAULT_INLINE_THRESHOLD",
    "METADATA_FILE_NAME",
    "CheckpointLocation",
    "CheckpointStorage",
    "CommittedMetadata",
    "FileAlreadyExists",
    "FileCheck",
    "FileNotFound",
    "FileStatus",
    "FileSystem",
    "LoadedMetadata",
    "OrphanDirectory",
    "OutputFile",
    "PathOutsideRoot",
    "PermissionDenied",
    "StateOutputStream",
    "StorageError",
    "StorageUnavailable",
    "check_state_files",
    "checkpoint_dir_name",
    "filesystem_for",
    "load_metadata",
    "state_file_name",
]
