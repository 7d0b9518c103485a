#!/usr/bin/env bash
# Builds the coordinator image sparkpoint:<version> with podman, offline, from a Debian
# bookworm base made here with debootstrap (no image registry needed). With --zookeeper,
# also sparkpoint-zookeeper:<version> (Debian's JRE + the ZooKeeper jars inside pyspark).
#
#   scripts/build-image.sh [--zookeeper] [--base IMAGE] [--force]
#
# --base IMAGE  build FROM this image instead of the debootstrap base (any Debian/python).
# --force       rebuild even if an image with the same content hash exists.
# An image is rebuilt only when its inputs change: the hash of the Containerfile, uv.lock,
# pyproject.toml and src/ is kept in a label. Needs root (debootstrap, podman) and the
# packages podman, runc, debootstrap (scripts/test.sh installs them).
source "$(dirname "$0")/bootstrap.sh"
source "$ROOT/scripts/podman.sh"
install_podman

zookeeper="" base="" force=""
while [ $# -gt 0 ]; do
    case "$1" in
        --zookeeper) zookeeper=1 ;;
        --base) base="$2"; shift ;;
        --force) force=1 ;;
        -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
        *) echo "build-image.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done

version="$(sed -n 's/^__version__ = "\(.*\)"/\1/p' src/sparkpoint/__init__.py)"
work="$ROOT/build/image"
mkdir -p "$work"
# One build at a time: scripts/test.sh builds in the background while the tests run, and
# the chart test's own call waits here for it, then finds the images up to date.
exec 9>"$work/.lock"
flock 9

log() { echo "build-image: $*" >&2; }
# pip for `pip wheel` (uv has none): the machine's, else a throwaway one through uv.
pip_() { if python3 -m pip --version >/dev/null 2>&1; then python3 -m pip "$@"; else uv tool run --quiet pip "$@"; fi; }

image_hash() {  # the label value of an image, or nothing
    podman image inspect --format '{{ index .Labels "org.sparkpoint.content-hash" }}' "$1" 2>/dev/null || true
}

# A Debian bookworm minbase tree with the given packages, imported as an image. Made once
# per machine: the tag names the package list.
debootstrap_base() {  # $1: tag, $2: comma-separated packages
    local tag="$1" packages="$2"
    if podman image exists "$tag"; then return 0; fi
    local tree="$work/rootfs-${tag##*:}-$$"
    log "making $tag with debootstrap (bookworm minbase + $packages)"
    rm -rf "$tree"
    debootstrap --variant=minbase --include="$packages" bookworm "$tree" \
        "${DEBIAN_MIRROR:-http://deb.debian.org/debian}" >"$work/debootstrap.log" 2>&1 || {
        tail -20 "$work/debootstrap.log" >&2
        log "debootstrap failed (log: $work/debootstrap.log)"
        exit 1
    }
    # Package caches and lists are not needed in an image.
    rm -rf "$tree"/var/cache/apt/archives/*.deb "$tree"/var/lib/apt/lists/*
    tar -C "$tree" -c . | podman import --quiet - "$tag" >/dev/null
    rm -rf "$tree"
}

build_coordinator() {
    local tag="localhost/sparkpoint:$version"
    local from="${base:-localhost/sparkpoint-base:bookworm}"
    local hash
    hash="$( { echo "$from"; cat Containerfile uv.lock pyproject.toml;
               find src -name '*.py' -print0 | sort -z | xargs -0 cat; } | sha256sum | cut -c1-16)"
    if [ -z "$force" ] && [ "$(image_hash "$tag")" = "$hash" ]; then
        log "$tag is up to date ($hash)"
        return 0
    fi
    [ -n "$base" ] || debootstrap_base "$from" python3,python3-venv
    local context="$work/coordinator"
    rm -rf "$context" && mkdir -p "$context/wheels"
    # Every runtime dependency pinned by uv.lock (no extras: no pyspark), as wheels.
    uv export --frozen --no-dev --no-emit-project --no-hashes --quiet \
        --format requirements-txt -o "$context/requirements.txt"
    log "making wheels"
    pip_ wheel --quiet --disable-pip-version-check --no-deps \
        -r "$context/requirements.txt" -w "$context/wheels"
    uv build --wheel --quiet -o "$context/wheels" >/dev/null
    log "building $tag from $from"
    podman build --quiet --runtime runc -f Containerfile \
        --build-arg BASE="$from" --build-arg VERSION="$version" \
        --label org.sparkpoint.content-hash="$hash" -t "$tag" "$context" >/dev/null
    podman image prune --force >/dev/null  # the install stage and replaced builds
    podman run --rm --runtime runc "$tag" sparkpoint --version
}

build_zookeeper() {
    local tag="localhost/sparkpoint-zookeeper:$version"
    local from="localhost/sparkpoint-jre-base:bookworm"
    local jars hash
    jars="$(.venv/bin/python -c 'from sparkpoint.devcluster.zookeeper import find_classpath as f; print(f())')"
    hash="$( { cat Containerfile.zookeeper; echo "$jars" | tr ':' '\n' | xargs -n1 basename; } \
             | sha256sum | cut -c1-16)"
    if [ -z "$force" ] && [ "$(image_hash "$tag")" = "$hash" ]; then
        log "$tag is up to date ($hash)"
        return 0
    fi
    debootstrap_base "$from" openjdk-17-jre-headless
    local context="$work/zookeeper"
    rm -rf "$context" && mkdir -p "$context/jars"
    echo "$jars" | tr ':' '\n' | xargs -I{} cp {} "$context/jars/"
    log "building $tag from $from"
    podman build --quiet --runtime runc -f Containerfile.zookeeper --build-arg BASE="$from" \
        --label org.sparkpoint.content-hash="$hash" -t "$tag" "$context" >/dev/null
    podman image prune --force >/dev/null
}

build_coordinator
[ -z "$zookeeper" ] || build_zookeeper
