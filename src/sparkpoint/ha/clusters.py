"""Which clusters a ZooKeeper ensemble holds: a read with a cluster id that is not there
finds nothing, which looks like an empty cluster unless it is said."""

from __future__ import annotations

from kazoo.exceptions import NoNodeError

from sparkpoint.ha import translate
from sparkpoint.ha.connection import ZooKeeperConnection
from sparkpoint.ha.errors import HAError


class UnknownClusterError(HAError):
    """No cluster of this id under the root: names the ones there are."""


def cluster_ids(conn: ZooKeeperConnection) -> list[str]:
    """The cluster ids under the root znode, sorted (none if the root is absent)."""
    with translate.reads("listing clusters"):
        try:
            return sorted(conn.retry(conn.client.get_children, f"/{conn.settings.root}"))
        except NoNodeError:
            return []


def require_cluster(conn: ZooKeeperConnection) -> None:
    """Raise :class:`UnknownClusterError` unless the configured cluster exists."""
    with translate.reads("looking for the cluster"):
        if conn.retry(conn.client.exists, conn.paths.base) is not None:
            return
    known = cluster_ids(conn)
    settings = conn.settings
    where = f"/{settings.root} on {settings.quorum}"
    found = (
        f"clusters there: {', '.join(known)}; pick one with --cluster-id or "
        "SPARKPOINT_HIGH_AVAILABILITY_CLUSTER_ID"
        if known
        else "no cluster at all (check the quorum, its chroot and --root)"
    )
    raise UnknownClusterError(f"no cluster {settings.cluster_id!r} under {where}; {found}")
