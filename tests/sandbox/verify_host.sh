#!/usr/bin/env bash
# Verifies a sandbox host image end to end, in a THROWAWAY container (never touches sglang-sbx-1):
#   1. systemd boots (systemctl is-system-running: running/degraded)
#   2. the stand-in CUDA keyring package installs; `apt-get update` on the stand-in repository verifies the
#      InRelease signature (no [trusted=yes] anywhere)
#   3. `apt-get install nvidia-driver-pinning-580 nvidia-open nvidia-container-toolkit` gives a stand-in
#      nvidia-smi printing the recorded CSV, nvidia-persistenced active, and a CDI spec (nvidia-ctk cdi list)
#   4. localhost/sglang-sim loads into the inner podman and
#      `podman run --rm --network host -v /sys/fs/cgroup:/sys/fs/cgroup --device nvidia.com/gpu=all
#       localhost/sglang-sim python3 -m sglang.launch_server ...` serves /health (simulator) inside it
# Usage: tests/sandbox/verify_host.sh [bookworm|trixie]   (images must be built: tests/sandbox/build.sh)
# Prints one "verify: PASS ..." line per check and "verify: OK (N s)" at the end; exits non-zero with the
# evidence (command output, journal tail) on the first failure. Needs root and podman.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
FIXTURES="${LLMOPS_FIXTURES:-$ROOT/tests/fixtures}"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$HERE/containers.conf}"
SUITE="${1:-bookworm}"
case "$SUITE" in bookworm) DISTRO=debian12 ;; trixie) DISTRO=debian13 ;; *) echo "verify: unknown suite $SUITE (bookworm|trixie)" >&2; exit 2 ;; esac
IMAGE="localhost/llmops-sandbox:$SUITE"
SIM=localhost/sglang-sim:latest
NAME="sglang-sbx-verify-$SUITE-$$"
START=$SECONDS

fail() { echo "verify: FAIL $*" >&2; podman exec "$NAME" journalctl -b --no-pager -n 20 >&2 2>/dev/null || true; exit 1; }
pass() { echo "verify: PASS $* ($((SECONDS - START)) s)"; }
cleanup() { podman rm -f "$NAME" >/dev/null 2>&1 || true; podman volume rm -f "$NAME-containers" >/dev/null 2>&1 || true; }
trap cleanup EXIT
in_host() { podman exec "$NAME" bash -c "$1"; }

for img in "$IMAGE" "$SIM"; do
  podman image exists "$img" || { echo "verify: image $img missing; run tests/sandbox/build.sh repo $SUITE sim" >&2; exit 2; }
done

podman run -d --name "$NAME" --hostname "$NAME" --privileged --systemd=always \
  -v "$NAME-containers:/var/lib/containers" "$IMAGE" /sbin/init >/dev/null
state=""
for _ in $(seq 1 60); do
  state="$(podman exec "$NAME" systemctl is-system-running 2>/dev/null || true)"
  case "$state" in running|degraded) break ;; esac
  sleep 1
done
case "$state" in running|degraded) pass "systemd is $state in $NAME" ;; *) fail "systemd state '$state' after 60 s" ;; esac

base="/srv/nvidia-standin/compute/cuda/repos/$DISTRO/x86_64"
out="$(in_host "apt-get install -y -q $base/cuda-keyring_1.1-1_all.deb 2>&1")" || fail "cuda-keyring install: $out"
list="/etc/apt/sources.list.d/cuda-$DISTRO-x86_64.list"
in_host "grep -q 'signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg' $list && ! grep -rq 'trusted=yes' /etc/apt/" \
  || fail "$list is not signed-by the cuda keyring, or [trusted=yes] is present"
out="$(in_host "apt-get update -o Dir::Etc::sourcelist=$list -o Dir::Etc::sourceparts=- 2>&1")" || fail "apt-get update: $out"
grep -q 'InRelease' <<< "$out" || fail "apt-get update did not fetch InRelease: $out"
grep -Eq '^(W|E):' <<< "$out" && fail "apt-get update warned: $out"
pass "apt-get update verified the signed stand-in repository ($list)"

out="$(in_host "DEBIAN_FRONTEND=noninteractive apt-get install -y -q nvidia-driver-pinning-580 nvidia-open nvidia-container-toolkit 2>&1")" \
  || fail "apt-get install nvidia-open: $out"
got="$(in_host "nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,compute_cap,memory.total,uuid --format=csv,noheader,nounits")"
[ "$got" = "$(cat "$FIXTURES/nvidia/rtxpro6000-x4-query-gpu-noheader.csv")" ] || fail "nvidia-smi printed: $got"
in_host "systemctl is-active --quiet nvidia-persistenced" || fail "nvidia-persistenced is not active"
in_host "nvidia-ctk cdi list 2>/dev/null | grep -qx nvidia.com/gpu=all" || fail "no nvidia.com/gpu=all CDI device: $(in_host 'nvidia-ctk cdi list 2>&1')"
pass "nvidia-open $(in_host "dpkg-query -W -f='\${Version}' nvidia-open"): stand-in nvidia-smi prints the recorded CSV, persistenced active, CDI nvidia.com/gpu=all"

podman save "$SIM" | podman exec -i "$NAME" podman load >/dev/null 2>&1 || fail "podman save | podman load of $SIM"
outer="$(podman image inspect --format '{{.Id}}' "$SIM")"
inner="$(in_host "podman image inspect --format '{{.Id}}' $SIM")"
[ "$outer" = "$inner" ] || fail "inner image id $inner differs from $outer"
pass "loaded $SIM into the inner podman (same image id ${outer:0:12})"

run="podman run --rm --network host -v /sys/fs/cgroup:/sys/fs/cgroup --device nvidia.com/gpu=all"
in_host "$run $SIM python3 -c 'import importlib.util, sys; sys.exit(0 if importlib.util.find_spec(\"sglang.launch_server\") else 3)'" \
  || fail "sglang.launch_server is not importable in $SIM"
gpus="$(in_host "$run $SIM printenv NVIDIA_VISIBLE_DEVICES")"
[ "$gpus" = all ] || fail "NVIDIA_VISIBLE_DEVICES from CDI is '$gpus', expected all"
pass "inner podman run --device nvidia.com/gpu=all works (NVIDIA_VISIBLE_DEVICES=$gpus)"

in_host "$run -d --name sim-verify -e SGLANG_SIM_INSTANT=1 $SIM python3 -m sglang.launch_server \
  --model-path /models/Qwen3.5-122B-A10B --tp 4 --host 127.0.0.1 --port 30000 \
  --speculative-algorithm NEXTN --speculative-num-steps 1 --speculative-eagle-topk 1 --speculative-num-draft-tokens 2 >/dev/null"
code=""
for _ in $(seq 1 60); do
  code="$(in_host "curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:30000/health" || true)"
  [ "$code" = 200 ] && break
  sleep 1
done
[ "$code" = 200 ] || fail "simulator /health answered '$code'; log: $(in_host 'podman logs --tail 20 sim-verify 2>&1')"
pass "python3 -m sglang.launch_server (simulator) answers GET /health 200 inside the host"
echo "verify: OK ($((SECONDS - START)) s)"
