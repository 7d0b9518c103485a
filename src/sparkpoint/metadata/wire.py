"""Primitive encodings of the `_metadata` body: varints, strings, packed integer runs.

Integers are unsigned LEB128 varints (signed ones zig-zag first). A run of integers such
as key-group offsets is *packed*: its first value as a varint, then every following value
as a fixed-width little-endian delta (or absolute value when the run is not monotone) with
the narrowest width that fits the largest one. The fixed width is what makes the format
fast from Python: :mod:`struct` packs and unpacks a whole run in one C call.
"""

from __future__ import annotations

import struct
from itertools import accumulate

from sparkpoint.metadata.errors import MetadataError

#: Packed-run mode, the high nibble of the mode byte.
PACKED_DELTA = 0
PACKED_ABSOLUTE = 1
#: Byte width (the low nibble of the mode byte) → struct code.
_WIDTH_CODES = {1: "B", 2: "H", 4: "I", 8: "Q"}
_MAX_VARINT_BYTES = 10  # a 64-bit value needs at most 10 groups of 7 bits
_U64_LIMIT = 1 << 64


def _width_for(largest: int) -> int:
    if largest == 0:
        return 0
    if largest < 1 << 8:
        return 1
    if largest < 1 << 16:
        return 2
    if largest < 1 << 32:
        return 4
    return 8


class Writer:
    """Appends primitives to a growing buffer."""

    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def u8(self, value: int) -> None:
        self.buf.append(value)

    def uvarint(self, value: int) -> None:
        if value < 0 or value >= _U64_LIMIT:
            raise ValueError(f"{value} does not fit an unsigned 64-bit varint")
        buf = self.buf
        while value >= 0x80:
            buf.append((value & 0x7F) | 0x80)
            value >>= 7
        buf.append(value)

    def svarint(self, value: int) -> None:
        # Zig-zag: small magnitudes of either sign stay short.
        self.uvarint(value * 2 if value >= 0 else -value * 2 - 1)

    def raw(self, data: bytes) -> None:
        self.uvarint(len(data))
        self.buf += data

    def text(self, value: str) -> None:
        self.raw(value.encode("utf-8"))

    def packed(self, values: tuple[int, ...]) -> None:
        count = len(values)
        self.uvarint(count)
        if count == 0:
            return
        self.uvarint(values[0])
        if count == 1:
            return
        rest = values[1:]
        deltas = [b - a for a, b in zip(values, rest, strict=False)]
        if min(deltas) >= 0:
            mode, items = PACKED_DELTA, deltas
        else:
            mode, items = PACKED_ABSOLUTE, list(rest)
            if min(items) < 0:
                raise ValueError("packed runs hold non-negative integers only")
        width = _width_for(max(items))
        self.u8(mode << 4 | width)
        if width:
            self.buf += struct.pack(f"<{count - 1}{_WIDTH_CODES[width]}", *items)


class Reader:
    """Reads primitives back; every defect becomes a :class:`MetadataError` naming the
    source and the byte position."""

    __slots__ = ("data", "end", "pos", "source")

    def __init__(self, data: bytes, source: str, start: int = 0, end: int | None = None) -> None:
        self.data = data
        self.source = source
        self.pos = start
        self.end = len(data) if end is None else end

    def error(self, defect: str) -> MetadataError:
        return MetadataError(self.source, f"malformed body at byte {self.pos}: {defect}")

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def _need(self, n: int, what: str) -> None:
        if n > self.end - self.pos:
            raise self.error(f"{what} needs {n} bytes, only {self.end - self.pos} left")

    def u8(self, what: str) -> int:
        self._need(1, what)
        value = self.data[self.pos]
        self.pos += 1
        return value

    def uvarint(self, what: str) -> int:
        data, pos, end = self.data, self.pos, self.end
        result = shift = 0
        for i in range(_MAX_VARINT_BYTES):
            if pos + i >= end:
                raise self.error(f"{what}: varint runs past the end of the body")
            byte = data[pos + i]
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                if result >= _U64_LIMIT:
                    raise self.error(f"{what}: varint exceeds 64 bits")
                self.pos = pos + i + 1
                return result
            shift += 7
        raise self.error(f"{what}: varint longer than {_MAX_VARINT_BYTES} bytes")

    def svarint(self, what: str) -> int:
        raw = self.uvarint(what)
        return raw >> 1 if not raw & 1 else -(raw >> 1) - 1

    def raw(self, what: str) -> bytes:
        size = self.uvarint(f"{what} length")
        self._need(size, what)
        start = self.pos
        self.pos += size
        return bytes(self.data[start : self.pos])

    def text(self, what: str) -> str:
        data = self.raw(what)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.error(f"{what} is not valid UTF-8 ({exc.reason})") from None

    def count(self, what: str, *, min_bytes_each: int) -> int:
        """A count of items that take at least ``min_bytes_each`` bytes each: a count the
        rest of the body cannot hold is a defect, caught before any loop or allocation."""
        value = self.uvarint(what)
        if value * min_bytes_each > self.remaining:
            raise self.error(f"{what} {value} cannot fit the {self.remaining} bytes left")
        return value

    def packed(self, what: str, *, max_count: int) -> tuple[int, ...]:
        count = self.uvarint(f"{what} count")
        if count > max_count:
            raise self.error(f"{what}: {count} values, more than the limit {max_count}")
        if count == 0:
            return ()
        first = self.uvarint(f"{what} first value")
        if count == 1:
            return (first,)
        mode_byte = self.u8(f"{what} mode")
        mode, width = mode_byte >> 4, mode_byte & 0x0F
        if mode not in (PACKED_DELTA, PACKED_ABSOLUTE):
            raise self.error(f"{what}: unknown packing mode {mode}")
        if width == 0:
            items: tuple[int, ...] = (0,) * (count - 1)
        else:
            code = _WIDTH_CODES.get(width)
            if code is None:
                raise self.error(f"{what}: invalid value width {width}")
            self._need((count - 1) * width, what)
            items = struct.unpack_from(f"<{count - 1}{code}", self.data, self.pos)
            self.pos += (count - 1) * width
        if mode == PACKED_DELTA:
            return tuple(accumulate(items, initial=first))
        return (first, *items)
