#!/usr/bin/env bash
# Runs the whole test suite: installs what it needs, lints, then pytest.
# Extra arguments go to pytest (e.g. scripts/test.sh tests/ha -x).
# The tests run in two parallel pytest workers (pytest-xdist), each test module whole on
# one worker with its own ZooKeeper, HDFS and Spark session: on a 2-core machine that is
# about 33 min against about 46 in one process. SPARKPOINT_TEST_WORKERS=0 runs them in
# one process (e.g. to read one test's output in order), =N in N workers.
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
