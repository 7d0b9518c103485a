#!/usr/bin/env bash
# Runs the whole test suite: installs what it needs, lints, then pytest.
# Extra arguments go to pytest (e.g. scripts/test.sh tests/ha -x).
source "$(dirname "$0")/bootstrap.sh"
sync_venv
install_test_tools promtool connector_servers chromium podman  # one apt-get run
fetch_jvm hadoop kafka  # real HDFS and Kafka from their own jars (Maven Central, fetched once)
# The images the chart-in-containers test runs (rebuilt only when their inputs change) are
# built while the other tests run: that test's own call to build-image.sh waits for this
# one (the script holds a lock) and then finds them up to date.
mkdir -p build/image
scripts/build-image.sh --zookeeper >build/image/build.log 2>&1 &
images=$!
.venv/bin/ruff check src tests bench
status=0
.venv/bin/python -m pytest "$@" || status=$?
# Nothing is left running: the build ends before the script does.
if ! wait "$images"; then
    echo "sparkpoint: building the images failed (log: build/image/build.log):" >&2
    tail -20 build/image/build.log >&2
    [ "$status" != 0 ] || status=1
fi
exit "$status"
