#!/usr/bin/env bash
# Opt-in check on a REAL NVIDIA host (not part of `make test`):
#   1. runs llmops.sglang.gpu_facts with the local connection and prints ansible_facts.llmops_gpu,
#   2. prints the host decisions the roles would take from those facts (NCCL P2P, IOMMU, driver),
#   3. runs the preflight role in check mode (nothing is changed) when roles/preflight exists.
# Works from a fresh copy of the repository with only python3: when ansible-playbook is missing it
# creates .venv-gpu-check and installs ansible-core there (needs PyPI access).
#
# Usage: scripts/real_gpu_check.sh [--tp N] [extra ansible-playbook args, e.g. -e sglang_server_tp_size=4]
#   LLMOPS_GPU_CHECK_OUT=<dir>  also write facts.json and decisions.json there.
# Run as root (or with sudo) so dmesg and every sysfs file are readable; otherwise the facts say what was not read.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
TP=1
if [ "${1:-}" = "--tp" ]; then TP=$2; shift 2; fi

if command -v ansible-playbook >/dev/null 2>&1; then
  BIN=$(dirname "$(command -v ansible-playbook)")
elif [ -x .venv/bin/ansible-playbook ]; then
  BIN=.venv/bin
else
  [ -x .venv-gpu-check/bin/ansible-playbook ] || {
    echo "real_gpu_check: ansible-playbook not found; installing ansible-core into .venv-gpu-check" >&2
    python3 -m venv .venv-gpu-check
    .venv-gpu-check/bin/pip install -q --upgrade pip
    .venv-gpu-check/bin/pip install -q ansible-core
  }
  BIN=.venv-gpu-check/bin
fi
BIN=$(cd "$BIN" && pwd)
PY="$BIN/python3"; [ -x "$PY" ] || PY=$(command -v python3)

# the collection is found through .collections/ansible_collections/llmops/sglang -> this checkout
mkdir -p .collections/ansible_collections/llmops
[ -e .collections/ansible_collections/llmops/sglang ] || ln -sfn ../../.. .collections/ansible_collections/llmops/sglang
export ANSIBLE_COLLECTIONS_PATH="$ROOT/.collections:${ANSIBLE_COLLECTIONS_PATH:-}"
export ANSIBLE_CONFIG="$ROOT/ansible.cfg" ANSIBLE_RETRY_FILES_ENABLED=0 ANSIBLE_NOCOLOR=1
"$BIN/ansible-playbook" --version | head -1

OUT=${LLMOPS_GPU_CHECK_OUT:-$(mktemp -d)}
mkdir -p "$OUT"
PLAY="$OUT/real_gpu_check.yml"
cat >"$PLAY" <<'YAML'
- name: Real-GPU check (gpu_facts, local connection, read-only)
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Gather GPU facts
      llmops.sglang.gpu_facts:
        p2p_modes: [r, w]
    - name: Print the facts
      ansible.builtin.debug:
        var: ansible_facts.llmops_gpu
    - name: Host decisions for tp {{ check_tp }}
      ansible.builtin.debug:
        msg: "{{ ansible_facts.llmops_gpu | llmops.sglang.host_decisions({'tp': check_tp | int}) }}"
    - name: Save facts and decisions
      ansible.builtin.copy:
        dest: "{{ check_out }}/{{ item.name }}"
        content: "{{ item.data | to_nice_json }}"
        mode: "0644"
      loop:
        - {name: facts.json, data: "{{ ansible_facts.llmops_gpu }}"}
        - {name: decisions.json, data: "{{ ansible_facts.llmops_gpu | llmops.sglang.host_decisions({'tp': check_tp | int}) }}"}
      loop_control:
        label: "{{ item.name }}"
YAML
"$BIN/ansible-playbook" -i localhost, -c local -e "ansible_python_interpreter=$PY" \
  -e "check_tp=$TP" -e "check_out=$OUT" "$PLAY" "$@"

if [ -d roles/preflight ]; then
  PRE="$OUT/real_gpu_preflight.yml"
  cat >"$PRE" <<'YAML'
- name: Preflight in check mode (no change)
  hosts: localhost
  gather_facts: true
  any_errors_fatal: true
  tasks:
    - name: Run the preflight role
      ansible.builtin.include_role:
        name: llmops.sglang.preflight
YAML
  "$BIN/ansible-playbook" -i localhost, -c local -e "ansible_python_interpreter=$PY" --check "$PRE" "$@"
else
  echo "real_gpu_check: roles/preflight not present; skipped the preflight check"
fi
echo "real_gpu_check: facts and decisions in $OUT"
