#!/usr/bin/env bash
# Runs an Ansible command with Mitogen (optional; docs/fleet.md, "Mitogen"): the strategy mitogen_linear, which
# redirects the ssh, local and podman connections to Mitogen's (one Python interpreter per host, kept for the run,
# instead of a module upload and an interpreter start per task).
#   .venv/bin/pip install --target .mitogen -r requirements-mitogen.txt     # once; not part of requirements.txt
#   scripts/with_mitogen.sh ansible-playbook -i inventories/prod site.yml    # an SSH fleet
# The sandbox's inventory names the connection containers.podman.podman, which Mitogen does not redirect: give it an
# inventory with ansible_connection: mitogen_podman (benchmarks/fleet_converge.py --mitogen writes one).
# LLMOPS_MITOGEN_PATH: the directory holding ansible_mitogen (default: .mitogen of this checkout).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
path=${LLMOPS_MITOGEN_PATH:-$repo/.mitogen}
if [ ! -d "$path/ansible_mitogen/plugins/strategy" ]; then
  echo "with_mitogen.sh: LLMOPS_MITOGEN_PATH=$path holds no ansible_mitogen/plugins/strategy (Mitogen is not installed" \
       "there). Fix: $repo/.venv/bin/pip install --target $repo/.mitogen -r $repo/requirements-mitogen.txt" >&2
  exit 2
fi
if [ $# -eq 0 ]; then
  echo "with_mitogen.sh: no command given. Fix: e.g. scripts/with_mitogen.sh ansible-playbook site.yml" >&2
  exit 2
fi
export PYTHONPATH="$path${PYTHONPATH:+:$PYTHONPATH}"
export ANSIBLE_STRATEGY_PLUGINS="$path/ansible_mitogen/plugins/strategy"
export ANSIBLE_STRATEGY=mitogen_linear
exec "$@"
