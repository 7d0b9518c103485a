"""Key encoding and key-group math: golden vectors, Flink's formulas, and their invariants."""

from __future__ import annotations

import doctest
import json
import math
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkpoint.checkpoint import KeyGroupRange
from sparkpoint.statefiles import keygroups, keys
from sparkpoint.statefiles.keygroups import (
    default_max_parallelism,
    key_group_for_key,
    key_group_range_for_subtask,
    murmur3_32,
    subtask_for_key_group,
)
from sparkpoint.statefiles.keys import KeyEncodingError, canonical_key_bytes, decode_key

GOLDEN = json.loads((Path(__file__).parent / "golden_keys.json").read_text())


def _key_from_json(tagged: list[Any]) -> Any:
    kind = tagged[0]
    value = tagged[1] if len(tagged) > 1 else None
    return {
        "none": lambda: None,
        "bool": lambda: value,
        "int": lambda: int(value),
        "float": lambda: float(value),
        "str": lambda: value,
        "bytes": lambda: bytes.fromhex(value),
        "tuple": lambda: tuple(_key_from_json(v) for v in value),
    }[kind]()


def _reference_murmur3_32(data: bytes, seed: int = 0) -> int:
    """MurmurHash3_x86_32 written out from Austin Appleby's reference, to check mmh3."""
    c1, c2, mask = 0xCC9E2D51, 0x1B873593, 0xFFFFFFFF
    h = seed
    nblocks = len(data) // 4
    for (block,) in struct.iter_unpack("<I", data[: nblocks * 4]):
        k = (block * c1) & mask
        k = ((k << 15) | (k >> 17)) & mask
        k = (k * c2) & mask
        h ^= k
        h = ((h << 13) | (h >> 19)) & mask
        h = (h * 5 + 0xE6546B64) & mask
    tail = data[nblocks * 4 :]
    k = 0
    for i, byte in enumerate(tail):
        k |= byte << (8 * i)
    if tail:
        k = (k * c1) & mask
        k = ((k << 15) | (k >> 17)) & mask
        k = (k * c2) & mask
        h ^= k
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & mask
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & mask
    h ^= h >> 16
    return h


# --- golden vectors: the encoding and the hash may never drift ----------------------------


@pytest.mark.parametrize("vector", GOLDEN["vectors"], ids=lambda v: v["canonical_hex"][:24])
def test_golden_vectors(vector: dict[str, Any]) -> None:
    key = _key_from_json(vector["key"])
    encoded = canonical_key_bytes(key)
    assert encoded.hex() == vector["canonical_hex"]
    for max_parallelism, key_group in vector["key_groups"].items():
        assert key_group_for_key(key, int(max_parallelism)) == key_group
        assert _reference_murmur3_32(encoded) % int(max_parallelism) == key_group
    decoded = decode_key(encoded)
    assert canonical_key_bytes(decoded) == encoded


def test_golden_file_covers_every_type_and_edge() -> None:
    kinds = {v["key"][0] for v in GOLDEN["vectors"]}
    assert kinds == {"none", "bool", "int", "float", "str", "bytes", "tuple"}
    # Only 0.0 and -0.0 (equal in Python, so one key) may share an encoding.
    by_hex: dict[str, list[Any]] = {}
    for v in GOLDEN["vectors"]:
        by_hex.setdefault(v["canonical_hex"], []).append(v["key"])
    shared = [ks for ks in by_hex.values() if len(ks) > 1]
    assert shared == [[["float", "0.0"], ["float", "-0.0"]]]


def test_murmur3_known_answers() -> None:
    # Published MurmurHash3_x86_32 results for seed 0.
    assert murmur3_32(b"") == 0
    assert murmur3_32(b"hello") == 613153351
    assert murmur3_32(b"The quick brown fox jumps over the lazy dog") == 0x2E4FF723


@settings(deadline=None)  # shared CI cores: no timing-based failures
@given(st.binary(max_size=64))
def test_mmh3_matches_reference(data: bytes) -> None:
    assert murmur3_32(data) == _reference_murmur3_32(data)


# --- the canonical encoding -----------------------------------------------------------------

keys_strategy = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**200), max_value=2**200)
    | st.floats(allow_nan=True)
    | st.text()
    | st.binary(),
    lambda children: st.lists(children, max_size=4).map(tuple),
    max_leaves=12,
)


def _same_key(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same_key(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


@settings(deadline=None)  # shared CI cores: no timing-based failures
@given(keys_strategy)
def test_encoding_round_trips(key: Any) -> None:
    encoded = canonical_key_bytes(key)
    assert _same_key(decode_key(encoded), key)
    assert canonical_key_bytes(decode_key(encoded)) == encoded


@settings(deadline=None)  # shared CI cores: no timing-based failures
@given(keys_strategy, keys_strategy)
def test_encoding_is_injective(a: Any, b: Any) -> None:
    if not _same_key(a, b):
        assert canonical_key_bytes(a) != canonical_key_bytes(b)


@settings(deadline=None)  # shared CI cores: no timing-based failures
@given(st.lists(keys_strategy, min_size=1, max_size=5))
def test_encoding_is_self_delimiting(key_list: list[Any]) -> None:
    # Keys are stored back to back in state files, so each must know where it ends.
    blob = b"".join(canonical_key_bytes(k) for k in key_list)
    pos, out = 0, []
    while pos < len(blob):
        key, pos = keys.decode_key_from(blob, pos)
        out.append(key)
    assert len(out) == len(key_list)
    assert all(_same_key(x, y) for x, y in zip(out, key_list, strict=True))


def test_type_distinctions_and_float_rules() -> None:
    distinct = [1, True, 1.0, "1", b"1", (1,), None, False, 0, 0.0, "", b"", ()]
    encodings = {canonical_key_bytes(k) for k in distinct}
    assert len(encodings) == len(distinct)
    assert canonical_key_bytes(-0.0) == canonical_key_bytes(0.0)
    nan_a, nan_b = float("nan"), struct.unpack(">d", bytes.fromhex("7ff0000000000001"))[0]
    assert (
        canonical_key_bytes(nan_a)
        == canonical_key_bytes(nan_b)
        == bytes.fromhex("447ff8000000000000")
    )
    assert canonical_key_bytes(-128) == bytes.fromhex("490000000180")
    assert canonical_key_bytes(128) == bytes.fromhex("49000000020080")
    assert canonical_key_bytes(2**64) == bytes.fromhex("4900000009010000000000000000")


@pytest.mark.parametrize("bad", [[1], {"a": 1}, {1}, bytearray(b"x"), object(), 1j])
def test_unsupported_key_types_are_refused(bad: Any) -> None:
    with pytest.raises(KeyEncodingError, match="cannot key state by"):
        canonical_key_bytes(bad)


@pytest.mark.parametrize(
    ("hex_bytes", "message"),
    [
        ("", "truncated"),
        ("58", "unknown key tag"),
        ("4900000002007f", "non-canonical int"),
        ("4900000000", "non-canonical int"),
        ("448000000000000000", "non-canonical float"),
        ("447ff0000000000001", "non-canonical float"),
        ("5300000002ff", "truncated"),
        ("5300000001ff", "not UTF-8"),
        ("4e4e", "trailing"),
        ("550000000249000000", "truncated"),
        ("5500000001" * 101 + "4e", "nested more than 100 deep"),
    ],
)
def test_malformed_key_bytes_are_refused(hex_bytes: str, message: str) -> None:
    with pytest.raises(KeyEncodingError, match=message):
        decode_key(bytes.fromhex(hex_bytes))


# --- ranges and subtasks, against Flink's KeyGroupRangeAssignment ---------------------------


def _flink_range(max_parallelism: int, parallelism: int, index: int) -> tuple[int, int]:
    # computeKeyGroupRangeForOperatorIndex, literally (Java int division on non-negatives).
    start = (index * max_parallelism + parallelism - 1) // parallelism
    end = ((index + 1) * max_parallelism - 1) // parallelism
    return start, end


def _flink_default_max_parallelism(parallelism: int) -> int:
    # computeDefaultMaxParallelism with MathUtils.roundUpToPowerOfTwo.
    x = parallelism + parallelism // 2 - 1
    for shift in (1, 2, 4, 8, 16):
        x |= x >> shift
    return min(max(x + 1, 128), 32768)


def test_ranges_follow_the_ceiling_formula() -> None:
    for max_parallelism, parallelism in [(128, 3), (10, 3), (32768, 1000), (7, 7), (5, 1)]:
        for i in range(parallelism):
            r = key_group_range_for_subtask(max_parallelism, parallelism, i)
            assert r.start == math.ceil(i * max_parallelism / parallelism)
            assert r.end == math.ceil((i + 1) * max_parallelism / parallelism) - 1
            assert (r.start, r.end) == _flink_range(max_parallelism, parallelism, i)
    # The worked example of seed 003: M=20, P=3 → [0,6] [7,13] [14,19].
    assert [key_group_range_for_subtask(20, 3, i) for i in range(3)] == [
        KeyGroupRange(0, 6),
        KeyGroupRange(7, 13),
        KeyGroupRange(14, 19),
    ]


@settings(deadline=None)  # shared CI cores: no timing-based failures
@given(st.integers(1, 32768).flatmap(lambda m: st.tuples(st.just(m), st.integers(1, m))))
def test_ranges_partition_the_key_groups(mp: tuple[int, int]) -> None:
    max_parallelism, parallelism = mp
    # Check a window of subtasks (all of them is too slow at 32768) plus both ends.
    indices = sorted({0, parallelism - 1, *range(min(parallelism, 40))})
    for i in indices:
        r = key_group_range_for_subtask(max_parallelism, parallelism, i)
        assert not r.is_empty
        assert subtask_for_key_group(max_parallelism, parallelism, r.start) == i
        assert subtask_for_key_group(max_parallelism, parallelism, r.end) == i
        if i + 1 < parallelism:
            assert key_group_range_for_subtask(max_parallelism, parallelism, i + 1).start == (
                r.end + 1
            )
    assert key_group_range_for_subtask(max_parallelism, parallelism, 0).start == 0
    assert key_group_range_for_subtask(max_parallelism, parallelism, parallelism - 1).end == (
        max_parallelism - 1
    )


def test_default_max_parallelism_matches_flink() -> None:
    for p in [*range(1, 300), 1000, 10000, 21845, 21846, 30000, 32768]:
        assert default_max_parallelism(p) == _flink_default_max_parallelism(p), p
    assert default_max_parallelism(1) == 128
    assert default_max_parallelism(86) == 256  # 86 + 43 = 129 → 256
    assert default_max_parallelism(85) == 128  # 85 + 42 = 127 → 128
    assert default_max_parallelism(32768) == 32768


def test_out_of_range_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match=r"parallelism 5 is out of range 1\.\.4"):
        key_group_range_for_subtask(4, 5, 0)
    with pytest.raises(ValueError, match="subtask index 3"):
        key_group_range_for_subtask(128, 3, 3)
    with pytest.raises(ValueError, match="key group 128"):
        subtask_for_key_group(128, 3, 128)
    with pytest.raises(ValueError, match="max parallelism 40000"):
        key_group_range_for_subtask(40000, 1, 0)
    with pytest.raises(ValueError, match=r"parallelism 0 is out of range 1\.\.32768"):
        default_max_parallelism(0)
    with pytest.raises(ValueError, match=r"parallelism 32769 is out of range"):
        default_max_parallelism(32769)


def test_docstring_examples() -> None:
    for module in (keys, keygroups):
        assert doctest.testmod(module).failed == 0
