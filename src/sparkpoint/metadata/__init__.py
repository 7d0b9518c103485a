"""The `_metadata` codec: a versioned binary format with a checksum (docs/formats.md).

Imports only the checkpoint domain model and the standard library.
"""

from sparkpoint.metadata.codec import (
    FORMAT_VERSION,
    SUPPORTED_VERSIONS,
    decode_metadata,
    encode_metadata,
    metadata_checksum,
)
from sparkpoint.metadata.describe import describe_checkpoint
from sparkpoint.metadata.envelope import MAGIC
from sparkpoint.metadata.errors import MetadataError

__all__ = [
    "FORMAT_VERSION",
    "MAGIC",
    "SUPPORTED_VERSIONS",
    "MetadataError",
    "decode_metadata",
    "describe_checkpoint",
    "encode_metadata",
    "metadata_checksum",
]
