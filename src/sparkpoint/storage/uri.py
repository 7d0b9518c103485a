"""Parsing, joining and comparing storage URIs, lexically.

Spellings accepted: plain paths (``/data/ckpt``; relative ones are made absolute),
``file:///data/ckpt`` (and Hadoop's ``file:/data/ckpt``), ``hdfs://namenode:8020/ckpt``,
``webhdfs://namenode:9870/ckpt`` and ``swebhdfs://…``. A URI keeps the spelling it was
given (a plain path stays plain), so the paths written into `_metadata` look like the
configured directory.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from pathlib import Path

from sparkpoint.storage.errors import PathOutsideRoot, StorageError

LOCAL_SCHEMES = ("", "file")
HDFS_SCHEMES = ("hdfs", "webhdfs", "swebhdfs")


@dataclass(frozen=True, slots=True)
class Uri:
    """``scheme`` is '' for a plain path; ``path`` is absolute, normalised, without a
    trailing slash (except the root itself)."""

    scheme: str
    authority: str
    path: str

    def __str__(self) -> str:
        if not self.scheme:
            return self.path
        return f"{self.scheme}://{self.authority}{self.path}"

    @property
    def name(self) -> str:
        return posixpath.basename(self.path)

    @property
    def parent(self) -> Uri:
        return Uri(self.scheme, self.authority, posixpath.dirname(self.path))

    def child(self, name: str) -> Uri:
        """The entry ``name`` of this directory; ``name`` must be one plain segment."""
        if not name or "/" in name or name in (".", ".."):
            raise PathOutsideRoot(f"{name!r} is not a plain file name (under {self})", path=name)
        return Uri(self.scheme, self.authority, posixpath.join(self.path, name))

    def same_filesystem(self, other: Uri) -> bool:
        local = (self.scheme in LOCAL_SCHEMES) and (other.scheme in LOCAL_SCHEMES)
        return local or (self.scheme, self.authority) == (other.scheme, other.authority)

    def is_under(self, root: Uri) -> bool:
        """True when this is ``root`` or lies below it (same filesystem)."""
        if not self.same_filesystem(root):
            return False
        return self.path == root.path or self.path.startswith(root.path.rstrip("/") + "/")


def parse(uri: str) -> Uri:
    """Parse and normalise ``uri``; a '..' segment anywhere is refused.

    >>> str(parse("hdfs://nn:8020/ckpt//job/./chk-1/"))
    'hdfs://nn:8020/ckpt/job/chk-1'
    """
    if not isinstance(uri, str) or not uri:
        raise StorageError(f"empty or non-string path {uri!r}", path=str(uri))
    if "\x00" in uri:
        raise StorageError(f"path {uri!r} contains a NUL byte", path=uri)
    scheme, authority, path = "", "", uri
    if "://" in uri:
        scheme, _, rest = uri.partition("://")
        scheme = scheme.lower()
        authority, slash, path = rest.partition("/")
        path = slash + path
    elif uri.startswith("file:"):
        scheme, path = "file", uri[len("file:") :]
    if scheme not in LOCAL_SCHEMES + HDFS_SCHEMES:
        raise StorageError(f"unsupported scheme {scheme!r} in {uri!r}", path=uri)
    if scheme == "file" and authority not in ("", "localhost"):
        raise StorageError(f"file URI with a remote host: {uri!r}", path=uri)
    if scheme in HDFS_SCHEMES and not authority:
        raise StorageError(f"{uri!r} names no namenode (expected {scheme}://host:port/…)", path=uri)
    if ".." in path.split("/"):
        raise PathOutsideRoot(f"path {uri!r} contains a '..' segment", path=uri)
    if not path.startswith("/"):
        if scheme:
            raise StorageError(f"path of {uri!r} is not absolute", path=uri)
        path = str(Path(path).absolute())
    normalised = posixpath.normpath(path)
    if normalised.startswith("//"):  # POSIX keeps a leading '//'; we do not need it
        normalised = "/" + normalised.lstrip("/")
    return Uri(scheme, "" if scheme == "file" else authority, normalised)
