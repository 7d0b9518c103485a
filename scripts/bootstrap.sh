# Sourced by the other scripts: makes .venv match uv.lock, installing uv first if needed.
# Needs only Python 3.11+ and network access to PyPI.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

export UV_PYTHON_DOWNLOADS=never   # use the machine's Python, never fetch one
export UV_LINK_MODE=copy           # the uv cache may sit on another filesystem

if ! command -v uv >/dev/null 2>&1 && ! python3 -m uv --version >/dev/null 2>&1; then
    echo "sparkpoint: installing uv (the package manager that reads uv.lock)" >&2
    python3 -m pip install --quiet --disable-pip-version-check uv
fi
uv() { if command -v uv >/dev/null 2>&1; then command uv "$@"; else python3 -m uv "$@"; fi; }

if ! command -v java >/dev/null 2>&1; then
    echo "sparkpoint: Java 17+ is required (ZooKeeper and Spark run on it); try: apt-get install -y openjdk-17-jre-headless" >&2
    exit 1
fi

sync_venv() {  # $@: extra flags for uv sync
    uv sync --frozen --python "$(command -v python3)" --quiet "$@"
}
