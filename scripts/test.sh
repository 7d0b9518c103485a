#!/usr/bin/env bash
# Runs the whole test suite: installs what it needs, lints, then pytest.
# Extra arguments go to pytest (e.g. scripts/test.sh tests/ha -x).
# The tests run in SPARKPOINT_TEST_WORKERS parallel pytest workers (pytest-xdist; 2 by
# default, 0 = one process), each test module on one worker with its own ZooKeeper, HDFS
# and Spark session. Many tests wait (session timeouts, failovers, a driver's next epoch)
# more than they compute, so a second worker uses the core one process leaves idle.
source "$(dirname "$0")/bootstrap.sh"
sync_venv
install_test_tools promtool connector_servers chromium podman  # one apt-get run
fetch_jvm hadoop kafka  # real HDFS and Kafka from their own jars (Maven Central, fetched once)
build_cargo_tools nexmark  # the Nexmark event generator, from crates.io (built once)
# The images the chart-in-containers test runs (rebuilt only when their inputs change) are
# built while the other tests run: that test's own call to build-image.sh waits for this
# one (the script holds a lock) and then finds them up to date.
mkdir -p build/image
scripts/build-image.sh --zookeeper >build/image/build.log 2>&1 &
images=$!
.venv/bin/ruff check src tests bench
status=0
workers="${SPARKPOINT_TEST_WORKERS:-2}"
parallel=()
[ "$workers" = 0 ] || parallel=(-n "$workers" --dist loadfile)
.venv/bin/python -m pytest "${parallel[@]}" "$@" || status=$?
# Nothing is left running: the build ends before the script does.
if ! wait "$images"; then
    echo "sparkpoint: building the images failed (log: build/image/build.log):" >&2
    tail -20 build/image/build.log >&2
    [ "$status" != 0 ] || status=1
fi
exit "$status"
