#!/usr/bin/env bash
# Vendor the UI's one third-party library, uPlot (a small canvas charting library), from
# the npm registry: pinned version, integrity checked, licence kept beside it. The UI has
# no Node build chain; this script is the only place npm is used, and only to fetch.
#
#   scripts/vendor-ui.sh            # (re)vendor into src/sparkpoint/service/ui/static/vendor
set -euo pipefail

VERSION=1.6.32
INTEGRITY="sha512-KIMVnG68zvu5XXUbC4LQEPnhwOxBuLyW1AHtpm6IKTXImkbLgkMy+jabjLgSLMasNuGGzQm/ep3tOkyTxpiQIw=="

root="$(cd "$(dirname "$0")/.." && pwd)"
dest="$root/src/sparkpoint/service/ui/static/vendor/uplot"
command -v npm >/dev/null 2>&1 || { echo "vendor-ui: npm is needed to fetch uplot" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

(cd "$work" && npm pack --silent "uplot@$VERSION" >/dev/null)
tarball="$work/uplot-$VERSION.tgz"
actual="sha512-$(openssl dgst -sha512 -binary "$tarball" | base64 -w0)"
if [ "$actual" != "$INTEGRITY" ]; then
    echo "vendor-ui: integrity mismatch for uplot@$VERSION: got $actual" >&2
    exit 1
fi
tar -xzf "$tarball" -C "$work"
mkdir -p "$dest"
cp "$work/package/dist/uPlot.esm.js" "$dest/uPlot.esm.js"
cp "$work/package/dist/uPlot.min.css" "$dest/uPlot.min.css"
cp "$work/package/LICENSE" "$dest/LICENSE"
cat > "$dest/VENDORED" <<INFO
package: uplot
version: $VERSION
integrity: $INTEGRITY
source: npm registry (npm pack uplot@$VERSION), files dist/uPlot.esm.js, dist/uPlot.min.css, LICENSE
by: scripts/vendor-ui.sh
INFO
echo "vendored uplot@$VERSION into ${dest#"$root"/}"
