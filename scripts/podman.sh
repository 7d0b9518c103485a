# Sourced after bootstrap.sh: podman as it works on these machines. crun refuses their
# hybrid cgroup layout, so runc; no default ulimits and cgroupfs (no systemd in the way).
export CONTAINERS_CONF="${CONTAINERS_CONF:-$ROOT/build/containers.conf}"
if [ ! -e "$CONTAINERS_CONF" ]; then
    mkdir -p "$(dirname "$CONTAINERS_CONF")"
    cat >"$CONTAINERS_CONF" <<'CONF'
[containers]
default_ulimits = []

[engine]
cgroup_manager = "cgroupfs"
runtime = "runc"
CONF
fi
