#!/usr/bin/env bash
# Rewrites ray-lock.txt: resolves ray[default]==$RAY_VERSION with pip for
# Debian's python3 (the lab image's interpreter), then pins every wheel by
# version and sha256. Reaches PyPI; run it by hand, commit the result.
set -euo pipefail
RAY_VERSION=${RAY_VERSION:-2.53.0}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 -m pip download -q --only-binary=:all: -d "$tmp/w" "ray[default]==$RAY_VERSION"
/usr/bin/python3 -m pip install -q --no-index --find-links "$tmp/w" --root "$tmp/root" \
  --ignore-installed --no-compile --no-warn-script-location "ray[default]==$RAY_VERSION"
site=$(echo "$tmp"/root/usr/local/lib/python3*/dist-packages)
{
  sed -n '1,/^# (engine\/lab\/labimage\/refresh-ray-lock.sh/p' "$here/ray-lock.txt"
  for d in "$site"/*.dist-info; do
    name=$(sed -n 's/^Name: //p' "$d/METADATA" | head -1)
    ver=$(sed -n 's/^Version: //p' "$d/METADATA" | head -1)
    norm=$(echo "$name" | tr 'A-Z.-' 'a-z__')
    whl=$(cd "$tmp/w" && ls | awk -v n="$norm" -v v="$ver" '{ split($0, a, "-"); x = tolower(a[1]); gsub(/[.-]/, "_", x); if (x == n && a[2] == v) print }')
    echo "$name==$ver --hash=sha256:$(sha256sum "$tmp/w/$whl" | cut -d' ' -f1)"
  done | sort -f
} >"$here/ray-lock.txt.new"
mv "$here/ray-lock.txt.new" "$here/ray-lock.txt"
