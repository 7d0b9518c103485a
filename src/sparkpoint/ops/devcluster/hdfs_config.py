"""The generated configuration of a local HDFS, and what its JVMs report about it.

Hadoop reads ``core-site.xml`` and ``hdfs-site.xml`` from its classpath; each process of
:class:`~sparkpoint.ops.devcluster.hdfs.LocalHdfs` gets a directory of its own holding both, a
``log4j.properties`` and the ``webapps/`` directories its HTTP server insists on (the jars
on Maven Central leave the web UI's files out; WebHDFS and ``/jmx`` are servlets and need
none of them). Status comes from the ``/jmx`` servlet over plain HTTP: monitoring, not an
HDFS client.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

# Hadoop 3.4 reflects into the JDK (Jersey's JAXB, Netty); Java 17 refuses that unless the
# packages are opened, as Hadoop's own launch scripts do for Java 17.
JAVA17_OPENS = tuple(
    f"--add-opens=java.base/{package}=ALL-UNNAMED"
    for package in (
        "java.lang", "java.lang.reflect", "java.io", "java.net", "java.nio", "java.util",
        "java.util.concurrent", "sun.nio.ch", "sun.net.dns", "sun.net.util",
    )
)  # fmt: skip

_LOG4J = """log4j.rootLogger=INFO,F
log4j.appender.F=org.apache.log4j.FileAppender
log4j.appender.F.File={log}
log4j.appender.F.layout=org.apache.log4j.PatternLayout
log4j.appender.F.layout.ConversionPattern=%d{{ISO8601}} %p %c{{1}}: %m%n
log4j.logger.org.apache.hadoop.util.NativeCodeLoader=ERROR
"""


def site_xml(properties: dict[str, str]) -> str:
    body = "".join(
        f"  <property><name>{escape(k)}</name><value>{escape(v)}</value></property>\n"
        for k, v in properties.items()
    )
    return f'<?xml version="1.0"?>\n<configuration>\n{body}</configuration>\n'


def write_conf_dir(
    directory: Path, core: dict[str, str], hdfs: dict[str, str], log_file: Path
) -> None:
    """One process's configuration directory (it goes first on that process's classpath)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "core-site.xml").write_text(site_xml(core))
    (directory / "hdfs-site.xml").write_text(site_xml(hdfs))
    (directory / "log4j.properties").write_text(_LOG4J.format(log=log_file))
    # /jmx answers from a snapshot refreshed once per metrics period (10 s by default).
    (directory / "hadoop-metrics2.properties").write_text("*.period=1\n")
    for webapp in ("hdfs", "datanode", "static", "secondary", "journal"):
        (directory / "webapps" / webapp).mkdir(parents=True, exist_ok=True)


def cluster_properties(
    *, host: str, rpc_port: int, http_port: int, replication: int, block_size: int
) -> tuple[dict[str, str], dict[str, str]]:
    """core-site and hdfs-site entries every process of one cluster shares."""
    core = {
        "fs.defaultFS": f"hdfs://{host}:{rpc_port}",
        "hadoop.security.authentication": "simple",
    }
    hdfs = {
        "dfs.namenode.rpc-address": f"{host}:{rpc_port}",
        "dfs.namenode.http-address": f"{host}:{http_port}",
        "dfs.webhdfs.enabled": "true",
        "dfs.permissions.enabled": "true",
        "dfs.replication": str(replication),
        "dfs.blocksize": str(block_size),
        # Small blocks are allowed (tests use them to spread one file over DataNodes).
        "dfs.namenode.fs-limits.min-block-size": "0",
        "dfs.namenode.safemode.extension": "0",
        # A killed DataNode is avoided by writers after ~3 s and declared dead after ~14 s,
        # not the 10 minutes of a production default.
        "dfs.heartbeat.interval": "1",
        "dfs.namenode.heartbeat.recheck-interval": "2000",
        "dfs.namenode.stale.datanode.interval": "3000",
        "dfs.namenode.avoid.write.stale.datanode": "true",
        "dfs.namenode.avoid.read.stale.datanode": "true",
        "dfs.namenode.datanode.registration.ip-hostname-check": "false",
        "dfs.namenode.redundancy.considerLoad": "false",
        "dfs.datanode.hostname": host,
        "dfs.namenode.handler.count": "10",
        "dfs.datanode.handler.count": "3",
        "dfs.block.scanner.volume.bytes.per.second": "0",  # no background scanning
    }
    return core, hdfs


def jmx(http_address: str, query: str, timeout: float = 2.0) -> list[dict[str, Any]]:
    """The beans a Hadoop daemon's ``/jmx`` servlet answers for ``query`` ([] if down)."""
    url = f"http://{http_address}/jmx?qry={query}"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:
            return list(json.load(answer).get("beans", []))
    except (OSError, ValueError, urllib.error.URLError):
        return []


def namenode_report(http_address: str) -> dict[str, Any] | None:
    """Version, safe mode, capacity and DataNodes as the NameNode sees them (None if down)."""
    info = jmx(http_address, "Hadoop:service=NameNode,name=NameNodeInfo")
    state = jmx(http_address, "Hadoop:service=NameNode,name=FSNamesystemState")
    if not info or not state:
        return None
    bean, fs_state = info[0], state[0]
    live = json.loads(bean.get("LiveNodes") or "{}")
    return {
        "version": str(bean.get("Version", "")).split(",")[0],
        "safe_mode": bool(bean.get("Safemode")),
        "safe_mode_detail": bean.get("Safemode") or None,
        "live_datanodes": int(fs_state.get("NumLiveDataNodes", 0)),
        "dead_datanodes": int(fs_state.get("NumDeadDataNodes", 0)),
        "live_transfer_addresses": sorted(v.get("xferaddr", k) for k, v in live.items()),
        "capacity_bytes": int(bean.get("Total", 0)),
        "used_bytes": int(bean.get("Used", 0)),
        "remaining_bytes": int(bean.get("Free", 0)),
    }


def datanode_counters(http_address: str) -> dict[str, int]:
    """A DataNode's block I/O counters since it started (BytesRead, BytesWritten, …)."""
    for bean in jmx(http_address, "Hadoop:service=DataNode,name=DataNodeActivity-*"):
        return {k: int(v) for k, v in bean.items() if isinstance(v, int)}
    return {}
