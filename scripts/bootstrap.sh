#!/usr/bin/env bash
# Installs what llmops.sglang needs on a fresh Debian 12 controller / build machine and links the
# collection where ansible.cfg looks for it. Idempotent: a second run only checks.
#   - apt: podman, runc, debootstrap, gnupg, apt-utils (sandbox hosts and the stand-in apt repo),
#     and the shell linter that ansible-test sanity runs; prometheus (promtool checks and tests the speculative_watch rules)
#   - a virtualenv in .venv with requirements.txt (ansible 12.3.0, molecule, testinfra, ...)
set -euo pipefail
cd "$(dirname "$0")/.."
need_apt=()
for bin in podman runc debootstrap gpg apt-ftparchive shellcheck promtool; do
  command -v "$bin" >/dev/null 2>&1 || need_apt+=("$bin")
done
if ((${#need_apt[@]})); then
  echo "bootstrap: installing Debian packages for: ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq podman runc debootstrap gnupg apt-utils uidmap shellcheck prometheus >/dev/null
fi
if [ ! -x .venv/bin/ansible-playbook ] || ! cmp -s requirements.txt .venv/.requirements.txt; then
  echo "bootstrap: installing the Python toolchain into .venv (requirements.txt)"
  python3 -m venv .venv
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -r requirements.txt
  cp requirements.txt .venv/.requirements.txt
fi
mkdir -p .collections/ansible_collections/llmops
[ -L .collections/ansible_collections/llmops/sglang ] || ln -sfn ../../.. .collections/ansible_collections/llmops/sglang
