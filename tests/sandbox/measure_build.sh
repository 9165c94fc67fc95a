#!/usr/bin/env bash
# Prints how long the sandbox build takes cold (empty cache: debootstrap downloads every package, the stand-in
# key is generated, every image is built) and cached (nothing changed), and the sizes of what it makes.
# It builds into a scratch cache and under the image prefix localhost/measure-, so the real images and
# .cache/sandbox are not touched, and removes both at the end. About 2-3 minutes of 1-2 cores.
# Usage: tests/sandbox/measure_build.sh [targets...]   (default: repo bookworm sim)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$HERE/containers.conf}"
targets=("$@"); ((${#targets[@]})) || targets=(repo bookworm sim)
scratch="$(mktemp -d /var/tmp/llmops-sandbox-measure.XXXXXX)"
export SANDBOX_CACHE="$scratch/cache" SANDBOX_IMAGE_PREFIX=localhost/measure-
cleanup() {
  podman images --format '{{.Repository}}:{{.Tag}}' | grep '^localhost/measure-' | xargs -r podman rmi -f >/dev/null 2>&1 || true
  rm -rf "$scratch"
}
trap cleanup EXIT
t0=$(date +%s.%N); "$HERE/build.sh" "${targets[@]}" > "$scratch/cold.out" 2> "$scratch/cold.err"; t1=$(date +%s.%N)
"$HERE/build.sh" "${targets[@]}" > "$scratch/cached.out" 2>/dev/null; t2=$(date +%s.%N)
printf 'cold build (%s): %.1f s\n' "${targets[*]}" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')"
grep -E 'built in|imported|: built' "$scratch/cold.err" | sed 's/^sandbox-build: /  /'
printf 'cached rebuild: %.2f s (%s)\n' "$(awk -v a="$t1" -v b="$t2" 'BEGIN { print b - a }')" "$(cat "$scratch/cached.out")"
echo "sizes:"
podman images --format '  {{.Repository}}:{{.Tag}} {{.Size}}' | grep 'localhost/measure-' | sed 's|localhost/measure-|localhost/|'
du -sh "$SANDBOX_CACHE"/rootfs-*.tar "$SANDBOX_CACHE/debs" "$SANDBOX_CACHE/repo" | sed 's|^|  |; s|'"$SANDBOX_CACHE"'/||'
