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
  (cd .collections/ansible_collections/llmops/sglang &&
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

stage_pytest() {
  echo "== pytest"
  pytest "$@"
}

case "${1:-all}" in
  lint) stage_lint ;;
  sanity) stage_sanity ;;
  pytest) shift; stage_pytest "$@" ;;
  all) stage_lint; stage_sanity; stage_pytest ;;
  *) echo "usage: $0 [lint|sanity|pytest [pytest args]]" >&2; exit 2 ;;
esac
