#!/usr/bin/env bash
# Runs the whole test suite: installs what it needs, lints, then pytest.
# Extra arguments go to pytest (e.g. scripts/test.sh tests/ha -x).
source "$(dirname "$0")/bootstrap.sh"
sync_venv
install_promtool
install_connector_servers
install_chromium
install_podman
fetch_jvm hadoop kafka  # real HDFS and Kafka from their own jars (Maven Central, fetched once)
# The images the chart-in-containers test runs; rebuilt only when their inputs change.
scripts/build-image.sh --zookeeper
.venv/bin/ruff check src tests bench
exec .venv/bin/python -m pytest "$@"
