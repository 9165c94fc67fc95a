#!/usr/bin/env bash
# The test suite behind `make test` (and so .ci/run). Stages, in order, each failing fast:
#   lint     yamllint, ansible-lint --profile production, antsibull-changelog lint,
#            antsibull-docs lint-collection-docs (module/filter/role docs, markup and references)
#   sanity   ansible-test sanity (empty ignore files), offline, via scripts/ansible_test.sh
#   pytest   unit tests (recorded fixtures), module/client integration against the SGLang simulator,
#            sandbox end to end (site.yml, idempotence, check mode, refusals, rollout) and molecule
# `scripts/test.sh lint|sanity|pytest [pytest args]` runs one stage.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PWD/.venv/bin:$PATH
export CONTAINERS_CONF=$PWD/tests/sandbox/containers.conf
export ANSIBLE_CONFIG=$PWD/ansible.cfg
[ -L .collections/ansible_collections/llmops/sglang ] || scripts/bootstrap.sh

stage_lint() {
  echo "== lint: yamllint"
  yamllint -s .
  echo "== lint: ansible-lint --profile production"
  ansible-lint --offline --profile production
  echo "== lint: antsibull-changelog lint"
  antsibull-changelog lint
  echo "== lint: antsibull-docs lint-collection-docs"
  # Only this collection and ansible.builtin are visible (no scan of the ~100 bundled collections: 20 s instead of
  # 6 min); galaxy.yml declares no dependencies, so a reference to any other collection is an error either way.
  (cd .collections/ansible_collections/llmops/sglang &&
    ANSIBLE_COLLECTIONS_SCAN_SYS_PATH=false ANSIBLE_COLLECTIONS_PATH="$PWD/.collections" \
    antsibull-docs lint-collection-docs --plugin-docs --validate-collection-refs=all --disallow-unknown-collection-refs .)
  for f in tests/sanity/ignore-*.txt; do
    [ -e "$f" ] || continue
    [ ! -s "$f" ] || { echo "sanity ignore file $f is not empty" >&2; return 1; }
  done
}

stage_sanity() {
  echo "== ansible-test sanity"
  scripts/ansible_test.sh sanity
}

# Two workers (pytest-xdist, --dist loadgroup): the podman tests of one file stay together on one worker, in file
# order, because they share that file's sandbox hosts (xdist group "podman-<file>", tests/conftest.py); other files'
# podman tests and the rest run beside them. LLMOPS_TEST_WORKERS=0 runs everything in this process.
# The tests marked `timing` compare throughput measured on the simulator between arms (speedups, crossovers, the
# tuner's pick): they run after the parallel stage, alone in one process, so that another worker's CPU load does not
# skew the ratios they assert. Exit status 5 (nothing selected, e.g. `scripts/test.sh pytest tests/unit`) is no failure.
stage_pytest() {
  echo "== pytest (workers: ${LLMOPS_TEST_WORKERS:-2})"
  pytest -n "${LLMOPS_TEST_WORKERS:-2}" --dist loadgroup --durations=25 -m "not timing" "$@"
  echo "== pytest: the timing comparisons, alone"
  local rc=0
  pytest --durations=10 -m timing "$@" || rc=$?
  ((rc == 0 || rc == 5)) || return "$rc"
}

case "${1:-all}" in
  lint) stage_lint ;;
  sanity) stage_sanity ;;
  pytest) shift; stage_pytest "$@" ;;
  all) stage_lint; stage_sanity; stage_pytest ;;
  *) echo "usage: $0 [lint|sanity|pytest [pytest args]]" >&2; exit 2 ;;
esac
