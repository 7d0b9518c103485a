"""Bodies that pass the checksum but are nonsense: a MetadataError or a valid checkpoint,
never another exception. (A writer with a bug, or a file crafted by hand, gets this far.)"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkpoint.checkpoint import CompletedCheckpoint
from sparkpoint.metadata import (
    FORMAT_VERSION,
    MetadataError,
    decode_metadata,
    encode_metadata,
    envelope,
)
from tests.metadata.cases import savepoint_case
from tests.metadata.strategies import checkpoints

GOOD_BODY = encode_metadata(savepoint_case())[envelope.HEADER_SIZE : -envelope.TRAILER_SIZE]


def _decode_or_refuse(body: bytes) -> None:
    try:
        result = decode_metadata(envelope.frame(1, body), source="fuzz", base_dir="/base")
    except MetadataError as error:
        assert error.path == "fuzz"
        return
    assert isinstance(result, CompletedCheckpoint)


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=200))
def test_random_bodies(body: bytes) -> None:
    _decode_or_refuse(body)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, len(GOOD_BODY) - 1), st.integers(0, 255)),
        min_size=1,
        max_size=4,
    )
)
def test_mutated_bodies(changes: list[tuple[int, int]]) -> None:
    body = bytearray(GOOD_BODY)
    for position, value in changes:
        body[position] = value
    _decode_or_refuse(bytes(body))


@settings(max_examples=100, deadline=None)
@given(checkpoints(), st.data())
def test_cut_bodies(checkpoint: CompletedCheckpoint, data: st.DataObject) -> None:
    body = encode_metadata(checkpoint)[envelope.HEADER_SIZE : -envelope.TRAILER_SIZE]
    cut = data.draw(st.integers(0, max(len(body) - 1, 0)))
    with pytest.raises(MetadataError, match="malformed body"):
        decode_metadata(envelope.frame(FORMAT_VERSION, body[:cut]), source="fuzz")
