# Sourced by the other scripts: makes .venv match uv.lock, installing uv first if needed.
# Needs only Python 3.11+ and network access to PyPI.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

export UV_PYTHON_DOWNLOADS=never   # use the machine's Python, never fetch one
export UV_LINK_MODE=copy           # the uv cache may sit on another filesystem
# Local Spark talks only to itself: keep it on loopback whatever the host name resolves to.
export SPARK_LOCAL_IP="${SPARK_LOCAL_IP:-127.0.0.1}"

if ! command -v uv >/dev/null 2>&1 && ! python3 -m uv --version >/dev/null 2>&1; then
    echo "sparkpoint: installing uv (the package manager that reads uv.lock)" >&2
    python3 -m pip install --quiet --disable-pip-version-check uv
fi
uv() { if command -v uv >/dev/null 2>&1; then command uv "$@"; else python3 -m uv "$@"; fi; }

if ! command -v java >/dev/null 2>&1; then
    echo "sparkpoint: Java 17+ is required (ZooKeeper and Spark run on it); try: apt-get install -y openjdk-17-jre-headless" >&2
    exit 1
fi

# The interpreter itself, not the path that finds it: a pyenv shim is not the Python the
# venv was built from, and uv rebuilds the whole .venv when given one.
PYTHON="$(python3 -c 'import sys; print(sys.executable)')"

sync_venv() {  # $@: extra flags for uv sync; the one venv has every extra (tests, demo, drills)
    # Quiet when .venv already matches uv.lock; an install is said, never silent.
    uv sync --frozen --all-extras --python "$PYTHON" --check --quiet "$@" 2>/dev/null && return 0
    echo "sparkpoint: installing the locked dependencies into .venv (uv sync)" >&2
    uv sync --frozen --all-extras --python "$PYTHON" --quiet "$@"
}

install_debian_packages() {  # $1: why, then the packages; quiet, never starts a service
    local why="$1"; shift
    local sudo=""
    if [ "$(id -u)" != 0 ]; then
        command -v sudo >/dev/null 2>&1 || {
            echo "sparkpoint: $why: missing; install with: apt-get install -y $*" >&2
            exit 1
        }
        sudo="sudo -n"
    fi
    echo "sparkpoint: installing Debian's $* ($why)" >&2
    # A policy-rc.d that says 101 keeps the packages from starting their services.
    local policy=/usr/sbin/policy-rc.d own_policy=""
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
        $sudo chmod 755 "$policy"
        own_policy=1
    fi
    local status=0
    { $sudo apt-get update -qq \
        && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
            --no-install-recommends "$@"; } >/dev/null || status=$?
    if [ -n "$own_policy" ]; then $sudo rm -f "$policy"; fi
    if [ "$status" != 0 ]; then
        echo "sparkpoint: installing $* failed; try: apt-get install -y $*" >&2
        exit 1
    fi
}

fetch_jvm() {  # $@: artifact sets of sparkpoint.ops.devcluster.jvm (Maven fetches them once, into a cache)
    command -v mvn >/dev/null 2>&1 || install_debian_packages "Maven fetches the JVM artifacts" maven
    .venv/bin/sparkpoint jvm fetch "$@"
}

build_cargo_tools() {  # $@: tools of sparkpoint.ops.devcluster.cargo (cargo builds them once, into a cache)
    command -v cargo >/dev/null 2>&1 || [ -x "${CARGO_HOME:-$HOME/.cargo}/bin/cargo" ] \
        || install_debian_packages "cargo builds the Rust tools" cargo
    .venv/bin/python -m sparkpoint.ops.devcluster.cargo "$@" >/dev/null
}

# The test tools come from Debian's packages. Each check below names what it needs when
# missing; install_test_tools installs every missing one in one apt-get run.
missing_promtool() {  # promtool and the Prometheus server check the alert rules
    command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1 || echo prometheus
}

missing_podman() {  # the image build and the chart-in-containers test
    local tool
    for tool in podman runc catatonit debootstrap iptables; do
        if ! command -v "$tool" >/dev/null 2>&1; then
            # catatonit: podman's pause image for pods; the CNI plugins and iptables: pod networks.
            echo podman runc catatonit debootstrap containernetworking-plugins iptables uidmap
            return 0
        fi
    done
}

missing_chromium() {  # headless Chromium and its chromedriver drive the UI tests (tests/ui)
    command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1 \
        || echo chromium chromium-driver
}

missing_connector_servers() {  # RabbitMQ and PostgreSQL: the connector tests and demo
    # Their services stay off: the tests and the demo start their own servers on free
    # ports in temporary directories.
    [ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] && command -v epmd >/dev/null 2>&1 \
        && ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || echo rabbitmq-server postgresql
}

install_test_tools() {  # $@: names of the missing_* checks above (e.g. promtool chromium)
    local what packages=""
    for what in "$@"; do packages="$packages $("missing_$what")"; done
    # shellcheck disable=SC2086  # word splitting wanted: a list of package names
    [ -z "${packages// /}" ] || install_debian_packages "the test tools: $*" $packages
    for what in "$@"; do
        [ -z "$("missing_$what")" ] || { echo "sparkpoint: $what still missing after the install" >&2; exit 1; }
    done
}

install_promtool() { install_test_tools promtool; }
install_podman() { install_test_tools podman; }
install_chromium() { install_test_tools chromium; }
install_connector_servers() { install_test_tools connector_servers; }
