"""The one exception the `_metadata` codec raises."""

from __future__ import annotations


class MetadataError(Exception):
    """A `_metadata` file that cannot be read: names the file and what is wrong with it.

    >>> str(MetadataError("/ckpt/job/chk-7/_metadata", "truncated: 10 of 52 bytes"))
    '/ckpt/job/chk-7/_metadata: truncated: 10 of 52 bytes'
    """

    def __init__(self, path: str, defect: str) -> None:
        super().__init__(f"{path}: {defect}")
        self.path = path
        self.defect = defect

    def __reduce__(self) -> tuple[type[MetadataError], tuple[str, str]]:
        # Keeps the two-argument constructor picklable (errors cross process boundaries).
        return (type(self), (self.path, self.defect))
