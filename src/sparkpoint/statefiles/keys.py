"""The canonical byte encoding of keys: what key groups are hashed from and files store.

A key's key group must be the same in every process, on every machine and under every
Python version, so it is computed from bytes sparkpoint defines, never from Python's
salted ``hash()`` or from pickle (whose output changes between protocol versions).

The encoding is type-tagged and self-delimiting, so it is unambiguous (``"1"``, ``b"1"``,
``1``, ``1.0`` and ``True`` are five different keys) and can be decoded back:

======  =========================================================================
tag     body
======  =========================================================================
``N``   ``None``: nothing
``F``   ``False``: nothing
``T``   ``True``: nothing
``I``   int: u32 byte count, then the minimal two's-complement big-endian bytes
``D``   float: the 8 IEEE-754 big-endian bytes; ``-0.0`` is written as ``0.0`` and
        every NaN as ``0x7ff8000000000000``
``S``   str: u32 byte count, then UTF-8 (lone surrogates kept, "surrogatepass")
``B``   bytes: u32 byte count, then the bytes
``U``   tuple: u32 element count, then each element's encoding
======  =========================================================================

u32 is an unsigned 32-bit big-endian integer. ``-0.0`` and ``0.0`` compare equal in
Python, so they are one key; NaN never equals itself, so "all NaNs are one key" is the
only rule that lets a NaN key find its state again.

>>> canonical_key_bytes(("user", 7)).hex()
'5500000002530000000475736572490000000107'
"""

from __future__ import annotations

import math
import struct

#: What a key may be: these types, nested in tuples to any depth.
Key = None | bool | int | float | str | bytes | tuple["Key", ...]

_U32 = struct.Struct(">I")
_F64 = struct.Struct(">d")
_CANONICAL_NAN = bytes.fromhex("7ff8000000000000")
_MAX_LEN = 2**32 - 1

TAG_NONE = b"N"
TAG_FALSE = b"F"
TAG_TRUE = b"T"
TAG_INT = b"I"
TAG_FLOAT = b"D"
TAG_STR = b"S"
TAG_BYTES = b"B"
TAG_TUPLE = b"U"


class KeyEncodingError(ValueError):
    """A key of a type sparkpoint cannot key state by, or bytes that are not a key."""


def _int_bytes(value: int) -> bytes:
    # Minimal two's complement: the fewest bytes whose sign bit matches the value's sign.
    magnitude = value if value >= 0 else ~value
    return value.to_bytes(magnitude.bit_length() // 8 + 1, "big", signed=True)


def _length(n: int, what: str) -> bytes:
    if n > _MAX_LEN:
        raise KeyEncodingError(f"{what} of {n} bytes or elements is too large for a key")
    return _U32.pack(n)


def _encode(key: object, out: list[bytes]) -> None:
    # Order matters: bool is a subclass of int and must keep its own tags.
    if key is None:
        out.append(TAG_NONE)
    elif isinstance(key, bool):
        out.append(TAG_TRUE if key else TAG_FALSE)
    elif isinstance(key, int):
        body = _int_bytes(key)
        out += (TAG_INT, _length(len(body), "int"), body)
    elif isinstance(key, float):
        # -0.0 + 0.0 == 0.0, so both zeros share one encoding.
        body = _CANONICAL_NAN if math.isnan(key) else _F64.pack(key + 0.0)
        out += (TAG_FLOAT, body)
    elif isinstance(key, str):
        body = key.encode("utf-8", "surrogatepass")
        out += (TAG_STR, _length(len(body), "str"), body)
    elif isinstance(key, bytes):
        out += (TAG_BYTES, _length(len(key), "bytes"), bytes(key))
    elif isinstance(key, tuple):
        out += (TAG_TUPLE, _length(len(key), "tuple"))
        for element in key:
            _encode(element, out)
    else:
        raise KeyEncodingError(
            f"cannot key state by a {type(key).__name__}: keys are str, bytes, int, bool, "
            "None, float or tuples of these"
        )


def canonical_key_bytes(key: Key) -> bytes:
    """The canonical encoding of ``key`` (see the module docstring).

    >>> canonical_key_bytes("ab").hex()
    '53000000026162'
    >>> canonical_key_bytes(True) != canonical_key_bytes(1)
    True
    """
    out: list[bytes] = []
    _encode(key, out)
    return b"".join(out)


def _need(data: bytes | memoryview, pos: int, n: int) -> int:
    end = pos + n
    if end > len(data):
        raise KeyEncodingError(f"key encoding truncated at byte {pos} (needs {n} more)")
    return end


_SINGLETONS: dict[bytes, Key] = {TAG_NONE: None, TAG_FALSE: False, TAG_TRUE: True}


def _decode_float(data: bytes | memoryview, pos: int) -> tuple[float, int]:
    end = _need(data, pos, 8)
    body = bytes(data[pos:end])
    value: float = _F64.unpack(body)[0]
    if (math.isnan(value) and body != _CANONICAL_NAN) or body == b"\x80" + bytes(7):
        raise KeyEncodingError(f"non-canonical float at byte {pos}")
    return value, end


def _decode_scalar(tag: bytes, body: bytes, pos: int) -> Key:
    if tag == TAG_BYTES:
        return body
    if tag == TAG_STR:
        try:
            return body.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError as exc:
            raise KeyEncodingError(f"str key at byte {pos} is not UTF-8: {exc}") from exc
    value = int.from_bytes(body, "big", signed=True)
    if not body or _int_bytes(value) != body:
        raise KeyEncodingError(f"non-canonical int at byte {pos}")
    return value


def _decode(data: bytes | memoryview, pos: int, depth: int) -> tuple[Key, int]:
    if depth > 100:
        raise KeyEncodingError("key tuples nested more than 100 deep")
    end = _need(data, pos, 1)
    tag = bytes(data[pos:end])
    pos = end
    if tag in _SINGLETONS:
        return _SINGLETONS[tag], pos
    if tag == TAG_FLOAT:
        return _decode_float(data, pos)
    if tag not in (TAG_INT, TAG_STR, TAG_BYTES, TAG_TUPLE):
        raise KeyEncodingError(f"unknown key tag {tag!r} at byte {pos - 1}")
    end = _need(data, pos, 4)
    (n,) = _U32.unpack(data[pos:end])
    pos = end
    if tag == TAG_TUPLE:
        items: list[Key] = []
        for _ in range(n):
            item, pos = _decode(data, pos, depth + 1)
            items.append(item)
        return tuple(items), pos
    end = _need(data, pos, n)
    return _decode_scalar(tag, bytes(data[pos:end]), pos), end


def decode_key_from(data: bytes | memoryview, pos: int = 0) -> tuple[Key, int]:
    """Decode one key starting at ``pos``; return it and the position just after it."""
    return _decode(data, pos, 0)


def decode_key(data: bytes) -> Key:
    """Inverse of :func:`canonical_key_bytes`; refuses trailing or non-canonical bytes.

    >>> decode_key(canonical_key_bytes(("a", -1, None)))
    ('a', -1, None)
    """
    key, end = _decode(data, 0, 0)
    if end != len(data):
        raise KeyEncodingError(f"{len(data) - end} trailing bytes after the key")
    return key
