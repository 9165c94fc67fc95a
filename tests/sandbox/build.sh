#!/usr/bin/env bash
# Builds everything the llmops.sglang sandbox needs, cached under .cache/sandbox/ (gitignored):
#
#   repo              the local SIGNED apt repository standing in for NVIDIA's CUDA repository
#                     (.cache/sandbox/repo, flat layout compute/cuda/repos/debian12|debian13/x86_64/ with
#                     suite "/", InRelease + Release.gpg) and for libnvidia-container's; stand-in packages
#                     with NVIDIA's names and versions (580.95.05-1, toolkit 1.18.0-1, cuda 13.0.2-1).
#   bookworm|trixie   the systemd sandbox host image localhost/llmops-sandbox:<suite> (Debian 12 / 13):
#                     debootstrap rootfs tarball -> `podman import` base -> `podman build` layer with the
#                     nested-podman config, the fixture tree /opt/llmops-sandbox and the repo at /srv/nvidia-standin.
#   fixture-tree DIR  only writes the host's /opt/llmops-sandbox fixture tree into DIR (no root, no podman).
#   sim               localhost/sglang-sim:latest: minimal bookworm + python3 + tests/sandbox/sglang_sim and
#                     sglang_shim, so that `python3 -m sglang.launch_server <SGLang flags>` runs the simulator.
#
# Usage: tests/sandbox/build.sh [--force] [--check] [TARGET ...]   (default: repo bookworm sim; `all` adds trixie)
#   --force  rebuild every step of the targets; --check  build nothing, only report what would be rebuilt
# Every step is keyed by a content hash of its inputs (a file next to the tarball, a label on the image);
# unchanged inputs -> the step is skipped, so a cached run takes seconds. The last line printed is
#   sandbox-build: changed=<0|1> targets=<...>
# which tests/sandbox/sandbox.yml uses for changed_when. Exit status non-zero on any failure, with the step named.
# Environment: SANDBOX_CACHE (default <repo>/.cache/sandbox), LLMOPS_FIXTURES (default <repo>/tests/fixtures),
#              DEBIAN_MIRROR (default http://deb.debian.org/debian), CONTAINERS_CONF (default tests/sandbox/containers.conf),
#              SANDBOX_IMAGE_PREFIX (default localhost/; for measure_build.sh only).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
CACHE="${SANDBOX_CACHE:-$ROOT/.cache/sandbox}"
FIXTURES="${LLMOPS_FIXTURES:-$ROOT/tests/fixtures}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$HERE/containers.conf}"
# Image name prefix; only tests/sandbox/measure_build.sh changes it (to time a cold build beside the real images).
IMAGE_PREFIX="${SANDBOX_IMAGE_PREFIX:-localhost/}"
# Bump when the recipe (not the inputs) changes in a way that must rebuild the cached artefacts.
RECIPE_VERSION=1
DRIVER_VERSION=580.95.05
DRIVER_DEB_VERSION=580.95.05-1
TOOLKIT_DEB_VERSION=1.18.0-1
CUDA_DEB_VERSION=13.0.2-1
SANDBOX_PACKAGES=python3,python3-apt,systemd,systemd-sysv,dbus,podman,runc,netavark,aardvark-dns,iptables,catatonit,fuse-overlayfs,iproute2,procps,ca-certificates,gnupg,kmod,curl,apt-utils,less
SIM_PACKAGES=python3
FORCE=0
CHECK=0
CHANGED=0

log() { printf 'sandbox-build: %s\n' "$*" >&2; }
die() { printf 'sandbox-build: ERROR: %s\n' "$*" >&2; exit 1; }

# sha256 (16 hex) over names, modes, link targets and contents of the given paths (relative to $1), __pycache__ excluded.
tree_hash() {
  local base="$1"; shift
  tar -C "$base" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner --exclude=__pycache__ --exclude='*.pyc' \
    -cf - "$@" | sha256sum | cut -c1-16
}

image_label() {  # image label -> stdout ("" when the image or the label is missing)
  podman image inspect --format "{{ index .Config.Labels \"$2\" }}" "$1" 2>/dev/null || true
}

image_id() { podman image inspect --format '{{.Id}}' "$1" 2>/dev/null || true; }

check_tools() {
  local missing=()
  for tool in podman runc debootstrap gpg apt-ftparchive dpkg-deb sha256sum tar flock; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
  done
  ((${#missing[@]} == 0)) || die "missing tools: ${missing[*]} (run scripts/bootstrap.sh, or apt-get install podman runc debootstrap gnupg apt-utils)"
  if [ ! -d "$FIXTURES/nvidia" ] || [ ! -d "$FIXTURES/host" ]; then
    die "recorded fixtures not found at $FIXTURES (tests/fixtures of this repository)"
  fi
}

# ---------------------------------------------------------------------------------------------------
# Debian root filesystems (debootstrap, cached as tarballs)
# ---------------------------------------------------------------------------------------------------
postconf_rootfs() {  # $1 dir, $2 kind (sandbox|sim)
  local dir="$1" kind="$2"
  rm -f "$dir"/var/cache/apt/archives/*.deb "$dir"/var/cache/apt/*.bin
  : > "$dir/etc/machine-id"
  rm -f "$dir/var/lib/dbus/machine-id"
  if [ "$kind" = sim ]; then
    # application image: no apt indexes, docs, man pages or locales
    rm -rf "$dir"/var/lib/apt/lists/* "$dir"/usr/share/doc/* "$dir"/usr/share/man/* "$dir"/usr/share/locale/* "$dir"/usr/share/info/*
    return
  fi
  # systemd host in a container: no timers that grab the apt/dpkg lock in the middle of a test, no gettys
  local unit
  for unit in apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer e2scrub_all.timer fstrim.timer podman-auto-update.timer; do
    rm -f "$dir/etc/systemd/system/timers.target.wants/$unit"
    ln -sfn /dev/null "$dir/etc/systemd/system/$unit"
  done
  for unit in apt-daily.service apt-daily-upgrade.service getty@tty1.service systemd-firstboot.service; do
    ln -sfn /dev/null "$dir/etc/systemd/system/$unit"
  done
  rm -f "$dir/etc/systemd/system/getty.target.wants/getty@tty1.service"
  # apt: no recommends/suggests by default is NOT set (real hosts install recommends); keep the indexes
  # debootstrap fetched so `apt-get install` of Debian packages works before the first `apt-get update`.
}

build_rootfs() {  # $1 suite, $2 kind -> sets ROOTFS_TAR and ROOTFS_KEY
  local suite="$1" kind="$2" pkgs
  pkgs="$SANDBOX_PACKAGES"; [ "$kind" = sim ] && pkgs="$SIM_PACKAGES"
  ROOTFS_TAR="$CACHE/rootfs-$kind-$suite.tar"
  ROOTFS_KEY="$(printf '%s\n' "$RECIPE_VERSION" "$suite" "$kind" "$pkgs" "$MIRROR" "$(declare -f postconf_rootfs)" | sha256sum | cut -c1-16)"
  if [ "$FORCE" = 0 ] && [ -f "$ROOTFS_TAR" ] && [ "$(cat "$ROOTFS_TAR.key" 2>/dev/null)" = "$ROOTFS_KEY" ]; then
    log "rootfs $kind/$suite: cached ($ROOTFS_TAR)"
    return
  fi
  if [ "$CHECK" = 1 ]; then log "rootfs $kind/$suite: would be rebuilt (check mode)"; CHANGED=1; return; fi
  local dir="$CACHE/rootfs-$kind-$suite.tmp" start=$SECONDS
  log "rootfs $kind/$suite: debootstrap --variant=minbase $suite (about a minute, packages cached in $CACHE/debs)"
  rm -rf "$dir"; mkdir -p "$CACHE/debs"
  if ! nice -n 10 debootstrap --variant=minbase --cache-dir="$CACHE/debs" --include="$pkgs" "$suite" "$dir" "$MIRROR" \
       > "$CACHE/debootstrap-$kind-$suite.log" 2>&1; then
    tail -n 15 "$CACHE/debootstrap-$kind-$suite.log" >&2
    die "debootstrap of $suite ($kind) failed; full log: $CACHE/debootstrap-$kind-$suite.log"
  fi
  postconf_rootfs "$dir" "$kind"
  tar --numeric-owner --xattrs -C "$dir" -cf "$ROOTFS_TAR.tmp" .
  mv "$ROOTFS_TAR.tmp" "$ROOTFS_TAR"
  printf '%s\n' "$ROOTFS_KEY" > "$ROOTFS_TAR.key"
  rm -rf "$dir"
  CHANGED=1
  log "rootfs $kind/$suite: built in $((SECONDS - start)) s, $(du -h "$ROOTFS_TAR" | cut -f1)"
}

import_base() {  # $1 image, $2 tarball, $3 key, $@ extra --change lines
  local image="$1" tar="$2" key="$3"; shift 3
  if [ "$FORCE" = 0 ] && [ "$(image_label "$image" llmops.rootfs.key)" = "$key" ]; then
    log "image $image: cached"
    return
  fi
  if [ "$CHECK" = 1 ]; then log "image $image: would be imported (check mode)"; CHANGED=1; return; fi
  local changes=(--change "LABEL llmops.rootfs.key=$key")
  local c
  for c in "$@"; do changes+=(--change "$c"); done
  podman import --quiet "${changes[@]}" "$tar" "$image" >/dev/null
  CHANGED=1
  log "image $image: imported from $tar"
}

# Builds $1 (tag) FROM $2 with the context directory $3 (Containerfile inside) when the key $4 changed;
# removes the previous image of that tag when nothing uses it any more.
build_layer() {
  local image="$1" base="$2" ctx="$3" key="$4"
  if [ "$FORCE" = 0 ] && [ "$(image_label "$image" llmops.build.key)" = "$key" ]; then
    log "image $image: cached (inputs $key)"
    return
  fi
  if [ "$CHECK" = 1 ]; then log "image $image: would be built (check mode, inputs $key)"; CHANGED=1; return; fi
  local old; old="$(image_id "$image")"
  podman build --quiet --pull=never --layers=false --label "llmops.build.key=$key" --build-arg "BASE=$base" \
    -t "$image" -f "$ctx/Containerfile" "$ctx" >/dev/null
  if [ -n "$old" ] && [ "$old" != "$(image_id "$image")" ]; then
    podman rmi "$old" >/dev/null 2>&1 || true
  fi
  CHANGED=1
  log "image $image: built (inputs $key)"
}

# PCI devices of the stand-in host: iommu group, BDF (sysfs form of the recorded CSV's bus ids), vendor,
# device, class, NUMA node, upstream root port ("-" for devices directly on the root bus). The GPUs' device id
# 0x2bb5 is the stand-in's choice for "RTX PRO 6000 Blackwell Server Edition".
PCI_ROWS="0 0000:00:00.0 0x1022 0x14a4 0x060000 0 -
12 0000:00:01.1 0x1022 0x14ab 0x060400 0 -
31 0000:17:00.0 0x10de 0x2bb5 0x030200 0 0000:16:01.1
45 0000:63:00.0 0x10de 0x2bb5 0x030200 0 0000:62:01.1
78 0000:af:00.0 0x10de 0x2bb5 0x030200 1 0000:ae:01.1
96 0000:e3:00.0 0x10de 0x2bb5 0x030200 1 0000:e2:01.1"

pci_rel() {  # pci_rel BDF PORT -> devices/pci<domain:bus>/[PORT/]BDF (path under sys/)
  if [ "$2" = - ]; then echo "devices/pci${1%:*}/$1"; else echo "devices/pci${2%:*}/$2/$1"; fi
}

up_path() {  # up_path REL -> "../" once per path component of REL
  printf '%s' "$1" | awk -F/ '{for (i = 0; i < NF; i++) printf "../"}'
}

# ---------------------------------------------------------------------------------------------------
# The stand-in NVIDIA apt repositories
# ---------------------------------------------------------------------------------------------------
GNUPGHOME_DIR="$CACHE/gnupg"
KEY_UID="llmops sandbox STAND-IN NVIDIA CUDA archive key (tests only) <standin@llmops.invalid>"

ensure_key() {
  mkdir -p "$GNUPGHOME_DIR"; chmod 700 "$GNUPGHOME_DIR"
  if ! GNUPGHOME="$GNUPGHOME_DIR" gpg --batch --list-secret-keys "$KEY_UID" >/dev/null 2>&1; then
    log "repo: generating the stand-in signing key (once; kept in $GNUPGHOME_DIR)"
    GNUPGHOME="$GNUPGHOME_DIR" gpg --batch --quiet --passphrase '' --quick-gen-key "$KEY_UID" rsa3072 sign never 2>/dev/null
  fi
  KEY_FPR="$(GNUPGHOME="$GNUPGHOME_DIR" gpg --batch --with-colons --list-secret-keys "$KEY_UID" | awk -F: '/^fpr:/ {print $10; exit}')"
  [ -n "$KEY_FPR" ] || die "repo: could not read the stand-in key fingerprint from $GNUPGHOME_DIR"
}

# pkg NAME VERSION ARCH "Depends" "extra control lines" DESCRIPTION-TAIL -> starts $PKG dir (files added after)
pkg_begin() {
  PKG_NAME="$1"; PKG_VERSION="$2"; PKG_ARCH="$3"
  PKG="$BUILD/pkgs/${PKG_NAME}_${PKG_VERSION}_${PKG_ARCH}"
  rm -rf "$PKG"; mkdir -p "$PKG/DEBIAN" "$PKG/usr/share/doc/$PKG_NAME"
  {
    echo "Package: $PKG_NAME"
    echo "Version: $PKG_VERSION"
    echo "Architecture: $PKG_ARCH"
    echo "Maintainer: llmops.sglang sandbox <standin@llmops.invalid>"
    echo "Section: NVIDIA"
    echo "Priority: optional"
    [ -n "$4" ] && echo "Depends: $4"
    [ -n "$5" ] && printf '%s\n' "$5"
    echo "Description: STAND-IN for tests: $6"
    echo " Built by llmops.sglang tests/sandbox/build.sh for the sandbox hosts. It carries the name and"
    echo " version of NVIDIA's package but contains no driver, library or GPU code."
  } > "$PKG/DEBIAN/control"
  printf 'STAND-IN for tests (llmops.sglang sandbox): %s %s is not NVIDIA software.\n' "$PKG_NAME" "$PKG_VERSION" \
    > "$PKG/usr/share/doc/$PKG_NAME/README.standin"
}

pkg_file() {  # pkg_file MODE SOURCE DEST
  install -D -m "$1" "$2" "$PKG$3"
}

pkg_python() {  # pkg_python SOURCE.py DEST : a stand-in Python tool, installed executable with the target's python3
  mkdir -p "$(dirname "$PKG$2")"
  { echo '#!/usr/bin/python3'; cat "$1"; } > "$PKG$2"
  chmod 755 "$PKG$2"
}

pkg_driver_links() {  # the loaded module binds the GPUs: sys/bus/pci/drivers/nvidia/<BDF> and <device>/driver links
  local group bdf vendor device class numa port rel drv=/opt/llmops-sandbox/sys/bus/pci/drivers/nvidia
  mkdir -p "$PKG$drv"
  while read -r group bdf vendor device class numa port; do
    [ "$vendor" = 0x10de ] || continue
    rel="$(pci_rel "$bdf" "$port")"
    mkdir -p "$PKG/opt/llmops-sandbox/sys/$rel"
    ln -sfn "$(up_path "$rel")bus/pci/drivers/nvidia" "$PKG/opt/llmops-sandbox/sys/$rel/driver"
    ln -sfn "../../../../$rel" "$PKG$drv/$bdf"
  done <<< "$PCI_ROWS"
}

pkg_text() {  # pkg_text MODE DEST <<< text
  mkdir -p "$(dirname "$PKG$2")"; cat > "$PKG$2"; chmod "$1" "$PKG$2"
}

pkg_end() {  # builds the .deb into $1 (directory)
  local conf
  conf=""
  if [ -d "$PKG/etc" ]; then conf="$(cd "$PKG" && find etc -type f | sed 's|^|/|' | LC_ALL=C sort)"; fi
  [ -n "$conf" ] && printf '%s\n' "$conf" > "$PKG/DEBIAN/conffiles"
  find "$PKG" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
  mkdir -p "$1"
  dpkg-deb --root-owner-group -Zxz --build "$PKG" "$1/${PKG_NAME}_${PKG_VERSION}_${PKG_ARCH}.deb" >/dev/null
}

# shellcheck disable=SC2016  # the maintainer scripts are written verbatim: $1 is theirs, not ours
postinst_systemd() {  # postinst_systemd UNIT... : enable, and start when systemd runs (like deb-systemd-helper/invoke-rc.d)
  {
    echo '#!/bin/sh'
    echo 'set -e'
    echo 'if [ "$1" = configure ]; then'
    for unit in "$@"; do
      echo "  systemctl --no-reload enable $unit >/dev/null 2>&1 || true"
    done
    echo '  if [ -d /run/systemd/system ]; then'
    echo '    systemctl daemon-reload || true'
    for unit in "$@"; do
      echo "    systemctl restart $unit || true"
    done
    echo '  fi'
    echo 'fi'
  } > "$PKG/DEBIAN/postinst"
  chmod 755 "$PKG/DEBIAN/postinst"
  {
    echo '#!/bin/sh'
    echo 'set -e'
    echo 'if [ "$1" = remove ] || [ "$1" = purge ]; then'
    echo '  if [ -d /run/systemd/system ]; then'
    for unit in "$@"; do
      echo "    systemctl stop $unit >/dev/null 2>&1 || true"
      echo "    systemctl --no-reload disable $unit >/dev/null 2>&1 || true"
    done
    echo '  fi'
    echo 'fi'
  } > "$PKG/DEBIAN/prerm"
  chmod 755 "$PKG/DEBIAN/prerm"
}

build_debs() {  # all binary packages except cuda-keyring -> $BUILD/debs
  local V="$DRIVER_DEB_VERSION" out="$BUILD/debs" nv="$FIXTURES/nvidia"
  rm -rf "$out"; mkdir -p "$out"

  pkg_begin nvidia-driver-pinning-580 "$V" all "" "" "locks the NVIDIA driver packages to the 580 branch (apt preferences)"
  pkg_text 644 /etc/apt/preferences.d/nvidia-driver-pinning-580 <<'EOF'
# STAND-IN for tests: pins NVIDIA's driver packages to the R580 branch, like NVIDIA's nvidia-driver-pinning-580.
Package: nvidia-* libnvidia-* cuda-drivers cuda-drivers-* *nvidia-kernel-*
Pin: version 580.*
Pin-Priority: 1000
EOF
  pkg_end "$out"

  pkg_begin nvidia-kernel-open-dkms "$V" amd64 "" $'Provides: nvidia-kernel-dkms-any (= '"$V"$')\nConflicts: nvidia-kernel-dkms\nReplaces: nvidia-kernel-dkms' \
    "NVIDIA open GPU kernel modules (no module is built; ships the stand-in /proc and /sys files)"
  pkg_text 644 /opt/llmops-sandbox/proc/driver/nvidia/version <<EOF
NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  $DRIVER_VERSION  Release Build  (dvs-builder@U22-I3-AF03-09-1)  Thu Sep 25 01:13:45 UTC 2025
GCC version:  gcc version 12.2.0 (Debian 12.2.0-14+deb12u1) 
EOF
  printf '%s\n' "$DRIVER_VERSION" | pkg_text 644 /opt/llmops-sandbox/sys/module/nvidia/version
  pkg_driver_links
  pkg_end "$out"

  pkg_begin nvidia-kernel-dkms "$V" amd64 "" $'Provides: nvidia-kernel-dkms-any (= '"$V"$')\nConflicts: nvidia-kernel-open-dkms\nReplaces: nvidia-kernel-open-dkms' \
    "NVIDIA proprietary GPU kernel modules (no module is built; ships the stand-in /proc and /sys files)"
  pkg_file 644 "$nv/proprietary-proc-driver-nvidia-version.txt" /opt/llmops-sandbox/proc/driver/nvidia/version
  printf '%s\n' "$DRIVER_VERSION" | pkg_text 644 /opt/llmops-sandbox/sys/module/nvidia/version
  pkg_driver_links
  pkg_end "$out"

  pkg_begin nvidia-smi "$V" amd64 "python3" "" "NVIDIA System Management Interface printing recorded real outputs of 4x RTX PRO 6000 Blackwell"
  pkg_python "$HERE/standin/nvidia_smi.py" /usr/bin/nvidia-smi
  pkg_file 644 "$nv/rtxpro6000-x4-query-gpu-noheader.csv" /usr/share/nvidia-standin/query-gpu-noheader.csv
  pkg_file 644 "$nv/rtxpro6000-x4-topo-p2p-r.txt" /usr/share/nvidia-standin/topo-p2p-r.txt
  pkg_file 644 "$HERE/standin/topo-m.txt" /usr/share/nvidia-standin/topo-m.txt
  local f
  for f in smi-no-driver.txt smi-no-devices.txt smi-version-mismatch.txt smi-bad-field.txt; do
    pkg_file 644 "$nv/$f" "/usr/share/nvidia-standin/$f"
  done
  pkg_end "$out"

  pkg_begin nvidia-persistenced "$V" amd64 "" "" "NVIDIA persistence daemon (a harmless daemon that only records persistence mode)"
  pkg_file 755 "$HERE/standin/nvidia-persistenced" /usr/bin/nvidia-persistenced
  pkg_text 644 /lib/systemd/system/nvidia-persistenced.service <<'EOF'
# STAND-IN for tests: NVIDIA persistence daemon unit of the llmops sandbox (no GPU on this host)
[Unit]
Description=NVIDIA Persistence Daemon (STAND-IN for tests)
Wants=syslog.target

[Service]
Type=simple
ExecStart=/usr/bin/nvidia-persistenced --user root --persistence-mode --verbose
ExecStopPost=/bin/rm -rf /run/nvidia-persistenced

[Install]
WantedBy=multi-user.target
EOF
  postinst_systemd nvidia-persistenced.service
  pkg_end "$out"

  pkg_begin nvidia-driver "$V" amd64 "nvidia-smi (= $V), nvidia-kernel-dkms (= $V) | nvidia-kernel-open-dkms (= $V)" \
    "Recommends: nvidia-persistenced (= $V)" "NVIDIA driver metapackage"
  pkg_end "$out"

  pkg_begin nvidia-open "$V" amd64 "nvidia-driver (= $V), nvidia-kernel-open-dkms (= $V)" "" "NVIDIA driver with open GPU kernel modules (metapackage)"
  pkg_end "$out"

  pkg_begin cuda-drivers-580 "$V" amd64 "nvidia-driver (= $V), nvidia-kernel-dkms (= $V)" "" "NVIDIA 580 driver branch with proprietary kernel modules (metapackage)"
  pkg_end "$out"

  pkg_begin cuda-drivers "$V" amd64 "cuda-drivers-580 (= $V)" "" "NVIDIA driver, latest branch, proprietary kernel modules (metapackage)"
  pkg_end "$out"

  pkg_begin nvidia-fabricmanager-580 "$V" amd64 "" "" "NVIDIA Fabric Manager (only for NVSwitch systems; the sandbox has PCIe GPUs, so it refuses to start)"
  pkg_text 755 /usr/bin/nv-fabricmanager <<'EOF'
#!/bin/sh
# STAND-IN for tests: NVIDIA Fabric Manager. The sandbox stands in for a PCIe host without NVSwitch.
echo "nv-fabricmanager STAND-IN: no NVSwitch found on this host (4 PCIe GPUs); Fabric Manager is only needed on NVSwitch systems" >&2
exit 1
EOF
  pkg_text 644 /lib/systemd/system/nvidia-fabricmanager.service <<'EOF'
# STAND-IN for tests: NVIDIA Fabric Manager unit of the llmops sandbox (fails: no NVSwitch here)
[Unit]
Description=NVIDIA fabric manager service (STAND-IN for tests)

[Service]
Type=simple
ExecStart=/usr/bin/nv-fabricmanager -c /usr/share/nvidia/nvswitch/fabricmanager.cfg

[Install]
WantedBy=multi-user.target
EOF
  pkg_end "$out"

  pkg_begin cuda-toolkit-13-0 "$CUDA_DEB_VERSION" amd64 "" "" "CUDA Toolkit 13.0 (only a stand-in nvcc that prints its version)"
  pkg_text 755 /usr/local/cuda-13.0/bin/nvcc <<'EOF'
#!/bin/sh
# STAND-IN for tests: nvcc of the llmops sandbox; compiles nothing.
case "$1" in
  --version|-V)
    echo "nvcc: NVIDIA (R) Cuda compiler driver (STAND-IN for tests)"
    echo "Cuda compilation tools, release 13.0, V13.0.2"
    exit 0 ;;
esac
echo "nvcc STAND-IN: compiling is not supported in the sandbox" >&2
exit 1
EOF
  printf '{\n   "cuda" : {\n      "name" : "CUDA SDK (STAND-IN for tests)",\n      "version" : "13.0.2"\n   }\n}\n' \
    | pkg_text 644 /usr/local/cuda-13.0/version.json
  pkg_text 755 "/DEBIAN/postinst" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = configure ]; then
  update-alternatives --install /usr/local/cuda cuda /usr/local/cuda-13.0 130
fi
EOF
  pkg_text 755 "/DEBIAN/prerm" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = remove ] || [ "$1" = purge ]; then
  update-alternatives --remove cuda /usr/local/cuda-13.0
fi
EOF
  pkg_end "$out"

  pkg_begin nvidia-container-toolkit-base "$TOOLKIT_DEB_VERSION" amd64 "python3" "" \
    "NVIDIA Container Toolkit base (nvidia-ctk writing env-only CDI specs for the stand-in GPUs)"
  pkg_python "$HERE/standin/nvidia_ctk.py" /usr/bin/nvidia-ctk
  pkg_text 644 /lib/systemd/system/nvidia-cdi-refresh.service <<'EOF'
# STAND-IN for tests: regenerates the CDI spec like NVIDIA Container Toolkit >= 1.18.0
[Unit]
Description=Refresh NVIDIA CDI specification file (STAND-IN for tests)
ConditionPathExists=/usr/bin/nvidia-smi

[Service]
Type=oneshot
ExecStart=/usr/bin/nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml

[Install]
WantedBy=multi-user.target
EOF
  pkg_text 644 /lib/systemd/system/nvidia-cdi-refresh.path <<'EOF'
# STAND-IN for tests: triggers nvidia-cdi-refresh.service when the (stand-in) driver or toolkit changes
[Unit]
Description=Trigger CDI refresh on NVIDIA driver install / uninstall events (STAND-IN for tests)

[Path]
PathChanged=/usr/share/nvidia-standin/query-gpu-noheader.csv
PathChanged=/usr/bin/nvidia-ctk

[Install]
WantedBy=multi-user.target
EOF
  postinst_systemd nvidia-cdi-refresh.path nvidia-cdi-refresh.service
  pkg_end "$out"

  pkg_begin nvidia-container-toolkit "$TOOLKIT_DEB_VERSION" amd64 "nvidia-container-toolkit-base (= $TOOLKIT_DEB_VERSION)" "" \
    "NVIDIA Container Toolkit (metapackage over the stand-in base)"
  pkg_end "$out"
}

build_keyring_deb() {  # $1 distro (debian12|debian13), $2 out dir
  local list="/etc/apt/sources.list.d/cuda-$1-x86_64.list"
  pkg_begin cuda-keyring 1.1-1 all "" "" "keyring of the stand-in CUDA repository ($1) and its apt source"
  pkg_file 644 "$BUILD/cuda-archive-keyring.gpg" /usr/share/keyrings/cuda-archive-keyring.gpg
  printf 'deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] file:///srv/nvidia-standin/compute/cuda/repos/%s/x86_64/ /\n' "$1" \
    | pkg_text 644 "$list"
  pkg_end "$2"
}

sign_flat_repo() {  # $1 dir, $2 label
  local dir="$1"
  (cd "$dir" && apt-ftparchive packages . > Packages && gzip -9n -k -f Packages \
     && apt-ftparchive -o APT::FTPArchive::Release::Origin="NVIDIA (STAND-IN)" \
          -o APT::FTPArchive::Release::Label="$2" -o APT::FTPArchive::Release::Architectures="amd64 all" \
          release . > Release.new && mv Release.new Release)
  rm -f "$dir/InRelease" "$dir/Release.gpg"
  GNUPGHOME="$GNUPGHOME_DIR" gpg --batch --yes --quiet --local-user "$KEY_FPR" --digest-algo SHA512 --clearsign -o "$dir/InRelease" "$dir/Release"
  GNUPGHOME="$GNUPGHOME_DIR" gpg --batch --yes --quiet --local-user "$KEY_FPR" --digest-algo SHA512 -abs -o "$dir/Release.gpg" "$dir/Release"
}

build_repo() {
  local key
  key="$(printf '%s\n' "$RECIPE_VERSION" "$PCI_ROWS" "$(declare -f build_debs build_keyring_deb sign_flat_repo pkg_begin pkg_end pkg_python pkg_driver_links pci_rel up_path postinst_systemd | sha256sum)" \
    "$(tree_hash "$HERE" standin)" "$(tree_hash "$FIXTURES" nvidia host)" | sha256sum | cut -c1-16)"
  REPO="$CACHE/repo"
  REPO_KEY="$key"
  if [ "$FORCE" = 0 ] && [ "$(cat "$REPO/.key" 2>/dev/null)" = "$key" ]; then
    log "repo: cached ($REPO)"
    return
  fi
  if [ "$CHECK" = 1 ]; then log "repo: would be rebuilt (check mode)"; CHANGED=1; return; fi
  local start=$SECONDS
  ensure_key
  BUILD="$CACHE/repo-build"; rm -rf "$BUILD"; mkdir -p "$BUILD"
  export SOURCE_DATE_EPOCH=1764000000
  GNUPGHOME="$GNUPGHOME_DIR" gpg --batch --export "$KEY_FPR" > "$BUILD/cuda-archive-keyring.gpg"
  build_debs
  local new="$CACHE/repo.new" short d
  short="$(printf '%s' "$KEY_FPR" | tail -c 8 | tr 'A-F' 'a-f')"
  rm -rf "$new"
  for d in debian12 debian13; do
    local dir="$new/compute/cuda/repos/$d/x86_64"
    mkdir -p "$dir"
    cp "$BUILD"/debs/*.deb "$dir/"
    build_keyring_deb "$d" "$dir"
    GNUPGHOME="$GNUPGHOME_DIR" gpg --batch --armor --export "$KEY_FPR" > "$dir/$short.pub"
    sign_flat_repo "$dir" "NVIDIA CUDA $d (STAND-IN for tests)"
  done
  # libnvidia-container's own repository (https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH) /)
  local lnc="$new/libnvidia-container/stable/deb/amd64"
  mkdir -p "$lnc"
  cp "$BUILD"/debs/nvidia-container-toolkit*.deb "$lnc/"
  GNUPGHOME="$GNUPGHOME_DIR" gpg --batch --armor --export "$KEY_FPR" > "$new/libnvidia-container/gpgkey"
  # shellcheck disable=SC2016  # $(ARCH) is apt's substitution, written literally like NVIDIA's list file
  printf 'deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg] file:///srv/nvidia-standin/libnvidia-container/stable/deb/$(ARCH) /\n' \
    > "$new/libnvidia-container/stable/deb/nvidia-container-toolkit.list"
  sign_flat_repo "$lnc" "libnvidia-container (STAND-IN for tests)"
  cat > "$new/README.STANDIN" <<EOF
STAND-IN for tests: a local signed apt repository laid out like NVIDIA's
(https://developer.download.nvidia.com/compute/cuda/repos/<distro>/x86_64/ and
https://nvidia.github.io/libnvidia-container/stable/deb/amd64/), built by llmops.sglang tests/sandbox/build.sh.
Signing key fingerprint: $KEY_FPR (generated locally, stand-in, never trust it outside the sandbox).
No package here contains NVIDIA software.
EOF
  printf '%s\n' "$key" > "$new/.key"
  rm -rf "$REPO"; mv "$new" "$REPO"; rm -rf "$BUILD"
  CHANGED=1
  log "repo: built in $((SECONDS - start)) s at $REPO (key $KEY_FPR)"
}

# ---------------------------------------------------------------------------------------------------
# The fixture tree of a sandbox host (/opt/llmops-sandbox): the SEV-SNP reference host's /sys and /proc
# ---------------------------------------------------------------------------------------------------
make_fixture_tree() {  # $1 = directory that becomes /opt/llmops-sandbox
  local t="$1" host="$FIXTURES/host"
  rm -rf "$t"; mkdir -p "$t/sys" "$t/proc"
  cat > "$t/README" <<'EOF'
STAND-IN for tests: sysfs/procfs fixture tree of the llmops.sglang sandbox host. It describes the reference
host (AMD EPYC, SEV-SNP enabled, IOMMU translated (DMA), 4x NVIDIA RTX PRO 6000 Blackwell on PCIe).
The module gpu_facts reads it through its sysfs/procfs root options (inventory: preflight_gpu_facts_*).
proc/driver/nvidia/version and sys/module/nvidia/ appear when the stand-in driver (nvidia-open) is installed.
EOF
  # bare-metal server (stand-in DMI: a 4U AMD EPYC 9004 server with PCIe GPU slots); no /sys/hypervisor
  mkdir -p "$t/sys/class/dmi/id"
  echo Supermicro > "$t/sys/class/dmi/id/sys_vendor"
  echo "AS -4125GS-TNRT" > "$t/sys/class/dmi/id/product_name"
  # kvm_amd parameters (PLATFORM_FACTS.md §6)
  mkdir -p "$t/sys/module/kvm_amd/parameters"
  for p in sev sev_es sev_snp; do echo Y > "$t/sys/module/kvm_amd/parameters/$p"; done
  # AMD IOMMU units; every group translated (type DMA); GPUs at the bus ids of the recorded CSV
  mkdir -p "$t/sys/class/iommu/ivhd0" "$t/sys/class/iommu/ivhd1" "$t/sys/kernel/iommu_groups" "$t/sys/bus/pci/devices"
  local group bdf vendor device class numa port rel up
  while read -r group bdf vendor device class numa port; do
    rel="$(pci_rel "$bdf" "$port")"
    mkdir -p "$t/sys/$rel" "$t/sys/kernel/iommu_groups/$group/devices"
    echo "$vendor" > "$t/sys/$rel/vendor"
    echo "$device" > "$t/sys/$rel/device"
    echo "$class" > "$t/sys/$rel/class"
    echo "$numa" > "$t/sys/$rel/numa_node"
    echo DMA > "$t/sys/kernel/iommu_groups/$group/type"
    up="$(up_path "$rel")"
    ln -sfn "../../../../$rel" "$t/sys/kernel/iommu_groups/$group/devices/$bdf"
    ln -sfn "${up}kernel/iommu_groups/$group" "$t/sys/$rel/iommu_group"
    ln -sfn "../../../$rel" "$t/sys/bus/pci/devices/$bdf"
  done <<< "$PCI_ROWS"
  # /proc: kernel command line (recorded), cpuinfo of a 2-socket AMD EPYC host with sev_snp, dmesg (recorded)
  cp "$host/proc-cmdline-ubuntu.txt" "$t/proc/cmdline"
  local cpu flags="fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht syscall nx mmxext fxsr_opt pdpe1gb rdtscp lm constant_tsc rep_good nopl nonstop_tsc cpuid extd_apicid aperfmperf pni pclmulqdq monitor ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand lahf_lm cmp_legacy svm extapic cr8_legacy abm sse4a misalignsse 3dnowprefetch osvw ibs skinit wdt tce topoext perfctr_core perfctr_nb bpext perfctr_llc mwaitx cpb cat_l3 cdp_l3 hw_pstate ssbd mba perfmon_v2 ibrs ibpb stibp ibrs_enhanced vmmcall fsgsbase bmi1 avx2 smep bmi2 erms invpcid cqm rdt_a avx512f avx512dq rdseed adx smap avx512ifma clflushopt clwb avx512cd sha_ni avx512bw avx512vl xsaveopt xsavec xgetbv1 xsaves cqm_llc cqm_occup_llc cqm_mbm_total cqm_mbm_local avx512_bf16 clzero irperf xsaveerptr rdpru wbnoinvd amd_ppin cppc arat npt lbrv svm_lock nrip_save tsc_scale vmcb_clean flushbyasid decodeassists pausefilter pfthreshold avic v_vmsave_vmload vgif x2avic v_spec_ctrl vnmi avx512vbmi umip pku ospke avx512_vbmi2 gfni vaes vpclmulqdq avx512_vnni avx512_bitalg avx512_vpopcntdq la57 rdpid overflow_recov succor smca fsrm flush_l1d sme sev sev_es sev_snp"
  : > "$t/proc/cpuinfo"
  for cpu in $(seq 0 255); do
    local phys=$(( (cpu % 128) / 64 )) core=$(( cpu % 64 ))
    printf 'processor\t: %d\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\nmodel name\t: AMD EPYC 9534 64-Core Processor\nstepping\t: 1\nphysical id\t: %d\nsiblings\t: 128\ncore id\t\t: %d\ncpu cores\t: 64\nflags\t\t: %s\n\n' \
      "$cpu" "$phys" "$core" "$flags" >> "$t/proc/cpuinfo"
  done
  cp "$host/sev-snp-host-dmesg.txt" "$t/dmesg.txt"
}

# ---------------------------------------------------------------------------------------------------
# Images
# ---------------------------------------------------------------------------------------------------
build_sandbox_image() {  # $1 suite (bookworm|trixie)
  local suite="$1" ctx="$CACHE/ctx-sandbox-$1"
  build_rootfs "$suite" sandbox
  local base="${IMAGE_PREFIX}llmops-sandbox-base:$suite"
  import_base "$base" "$ROOTFS_TAR" "$ROOTFS_KEY" "CMD [\"/sbin/init\"]" "STOPSIGNAL SIGRTMIN+3" "ENV container=podman"
  [ -n "${REPO_KEY:-}" ] || build_repo
  rm -rf "$ctx"; mkdir -p "$ctx/overlay/etc/containers" "$ctx/overlay/etc/default/grub.d" "$ctx/overlay/srv"
  cp "$HERE/containers.conf" "$ctx/overlay/etc/containers/containers.conf"
  cat > "$ctx/overlay/etc/containers/storage.conf" <<'EOF'
# llmops sandbox host: the inner podman keeps its images on /var/lib/containers, which tests/sandbox/sandbox.yml
# mounts from a podman volume (overlay cannot stack on the container's own overlay root);
# fuse-overlayfs is the fallback when no volume is mounted (molecule scenarios).
[storage]
driver = "overlay"
runroot = "/run/containers/storage"
graphroot = "/var/lib/containers/storage"
[storage.options.overlay]
mount_program = "/usr/bin/fuse-overlayfs"
EOF
  cp "$FIXTURES/host/etc-default-grub.d-50-cloudimg-settings.cfg" "$ctx/overlay/etc/default/grub.d/50-cloudimg-settings.cfg"
  make_fixture_tree "$ctx/overlay/opt/llmops-sandbox"
  cp -a "$REPO" "$ctx/overlay/srv/nvidia-standin"
  rm -f "$ctx/overlay/srv/nvidia-standin/.key"
  cat > "$ctx/overlay/etc/llmops-sandbox-release" <<EOF
STAND-IN for tests: llmops.sglang sandbox host ($suite), stands in for a 4x RTX PRO 6000 Blackwell SEV-SNP host.
Stand-in NVIDIA apt repository: /srv/nvidia-standin   fixture /sys /proc tree: /opt/llmops-sandbox
EOF
  cat > "$ctx/Containerfile" <<'EOF'
ARG BASE
FROM ${BASE}
COPY overlay/ /
LABEL org.opencontainers.image.title="llmops.sglang sandbox host (STAND-IN for a GPU host)"
ENV container=podman
STOPSIGNAL SIGRTMIN+3
CMD ["/sbin/init"]
EOF
  local key
  key="$(printf '%s\n' "$RECIPE_VERSION" "$ROOTFS_KEY" "$REPO_KEY" "$(tree_hash "$ctx" .)" | sha256sum | cut -c1-16)"
  build_layer "${IMAGE_PREFIX}llmops-sandbox:$suite" "$base" "$ctx" "$key"
}

build_sim_image() {
  local ctx="$CACHE/ctx-sim"
  for d in sglang_sim sglang_shim/sglang; do
    [ -d "$HERE/$d" ] || die "simulator sources missing: $HERE/$d (owned by the simulator's author)"
  done
  build_rootfs bookworm sim
  local base="${IMAGE_PREFIX}sglang-sim-base:bookworm"
  import_base "$base" "$ROOTFS_TAR" "$ROOTFS_KEY"
  rm -rf "$ctx"; mkdir -p "$ctx/site"
  (cd "$HERE" && tar --exclude=__pycache__ --exclude='*.pyc' -cf - sglang_sim) | tar -C "$ctx/site" -xf -
  (cd "$HERE/sglang_shim" && tar --exclude=__pycache__ --exclude='*.pyc' -cf - .) | tar -C "$ctx/site" -xf -
  cat > "$ctx/Containerfile" <<'EOF'
ARG BASE
FROM ${BASE}
COPY site/ /usr/local/lib/python3.11/dist-packages/
ENV PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
LABEL org.opencontainers.image.title="SGLang simulator (STAND-IN for lmsysorg/sglang): python3 -m sglang.launch_server"
CMD ["python3", "-m", "sglang.launch_server", "--help"]
EOF
  local key
  key="$(printf '%s\n' "$RECIPE_VERSION" "$ROOTFS_KEY" "$(tree_hash "$ctx" .)" | sha256sum | cut -c1-16)"
  build_layer "${IMAGE_PREFIX}sglang-sim:latest" "$base" "$ctx" "$key"
}

main() {
  local targets=()
  while (($#)); do
    case "$1" in
      --force) FORCE=1 ;;
      --check) CHECK=1 ;;
      -h|--help) sed -n '2,/^set -euo/p' "$0" | sed -E -e '$d' -e 's/^# ?//'; exit 0 ;;
      repo|bookworm|trixie|sim) targets+=("$1") ;;
      all) targets+=(repo bookworm trixie sim) ;;
      fixture-tree) targets+=("$1" "${2:?usage: build.sh fixture-tree DIR}"); shift ;;
      *) die "unknown target '$1' (expected: repo bookworm trixie sim all, or --force)" ;;
    esac
    shift
  done
  ((${#targets[@]})) || targets=(repo bookworm sim)
  if [ "${targets[0]}" = fixture-tree ]; then
    # writes the /opt/llmops-sandbox tree into a directory (for unit tests and for looking at it); no root needed
    [ "${#targets[@]}" = 2 ] || die "usage: build.sh fixture-tree DIR"
    [ -d "$FIXTURES/host" ] || die "recorded fixtures not found at $FIXTURES (tests/fixtures of this repository)"
    make_fixture_tree "${targets[1]}"
    return 0
  fi
  check_tools
  case " ${targets[*]} " in
    *" bookworm "*|*" trixie "*|*" sim "*)
      [ "$(id -u)" = 0 ] || die "debootstrap and podman import need root (uid 0); run as root (the repo target alone does not)" ;;
  esac
  mkdir -p "$CACHE"
  exec 9>"$CACHE/.build.lock"
  flock -w 1800 9 || die "another build holds $CACHE/.build.lock for more than 30 min"
  local start=$SECONDS t
  for t in "${targets[@]}"; do
    case "$t" in
      repo) build_repo ;;
      bookworm|trixie) build_sandbox_image "$t" ;;
      sim) build_sim_image ;;
    esac
  done
  log "done in $((SECONDS - start)) s"
  echo "sandbox-build: changed=$CHANGED check=$CHECK targets=${targets[*]}"
}

main "$@"
