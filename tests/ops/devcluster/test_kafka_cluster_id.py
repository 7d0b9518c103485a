"""The KRaft cluster id the local Kafka formats its nodes with."""

from __future__ import annotations

import base64

from sparkpoint.ops.devcluster.kafka import _cluster_id


def test_a_cluster_id_never_starts_with_a_dash() -> None:
    """One random id in 64 would; the storage tool then reads it as an option and the
    broker never starts (`kafka-storage format` prints its usage). 4,000 draws: an id
    generator that lets them through fails here all but never by luck ((63/64)^4000)."""
    ids = [_cluster_id() for _ in range(4000)]
    assert not [i for i in ids if i.startswith("-")]
    assert all(len(base64.urlsafe_b64decode(i + "==")) == 16 for i in ids)
