#!/usr/bin/env bash
# Runs `ansible-test sanity` (and optionally `units`) on this collection without Docker or network
# access to ci-files.testing.ansible.com:
#   - copies the tracked and untracked-but-not-ignored files into
#     $TMPDIR/llmops-ansible-test/ansible_collections/llmops/sglang (the path shape it needs);
#   - seeds ansible-test's cache with an offline stand-in for its get-pip bootstrap script
#     (ANSIBLE_PRACTICE.md §3.1), under a scratch HOME so nothing lands in /root.
# Usage: scripts/ansible_test.sh sanity [extra ansible-test args]
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
venv_bin=$repo/.venv/bin
# Outside the checkout: inside it, ansible-test would ask git and find the copy ignored.
scratch=${LLMOPS_ANSIBLE_TEST_DIR:-${TMPDIR:-/tmp}/llmops-ansible-test}
dest=$scratch/ansible_collections/llmops/sglang
export HOME=$scratch/home
mkdir -p "$HOME/.ansible/test/cache" "$dest"

pip_version=$("$venv_bin/python" -c 'from ansible_test._internal.python_requirements import get_venv_packages as g; from ansible_test._internal.host_configs import NativePythonConfig as N; print(g(N(version="3.11", path="/usr/bin/python3"))["pip"])' 2>/dev/null) || pip_version=24.2
shim=$HOME/.ansible/test/cache/get_pip_${pip_version//./_}.py
cat > "$shim" <<'PY'
# Offline stand-in for https://ci-files.testing.ansible.com/ansible-test/get-pip-*.py
import ensurepip, os, subprocess, sys
ensurepip.bootstrap(upgrade=True)
os.environ.pop("PIP_CONFIG_FILE", None)
args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
if args:
    subprocess.check_call([sys.executable, "-m", "pip", "install", *args])
PY

# Fresh copy of what git would ship (tracked + untracked, not ignored).
find "$dest" -mindepth 1 -maxdepth 1 ! -name tests -exec rm -rf {} +
rm -rf "$dest/tests"
git ls-files -co --exclude-standard -z | while IFS= read -r -d '' f; do
  [ -e "$f" ] || continue
  mkdir -p "$dest/$(dirname "$f")"
  cp -p "$f" "$dest/$f"
done
cd "$dest"
what=${1:-sanity}; shift || true
case "$what" in
  sanity) exec "$venv_bin/ansible-test" sanity --venv --requirements --python 3.11 "$@" ;;
  *) exec "$venv_bin/ansible-test" "$what" "$@" ;;
esac
