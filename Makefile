# llmops.sglang: the two commands of the README, and the stages they are made of.
#   make site   - the main job: bootstrap, build/start the embedded sandbox (tests/sandbox/sandbox.yml),
#                 then the production flow ansible-playbook site.yml on it
#   make test   - the whole test suite (lint, sanity, unit, modules and clients against the simulator, sandbox e2e, molecule)
SHELL := /bin/bash
export CONTAINERS_CONF := $(CURDIR)/tests/sandbox/containers.conf
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
VENV := $(CURDIR)/.venv/bin
export PATH := $(VENV):$(PATH)

.PHONY: bootstrap site test lint sanity unit simulator e2e molecule ee clean

bootstrap:
	@scripts/bootstrap.sh

site: bootstrap
	ansible-playbook tests/sandbox/sandbox.yml
	ansible-playbook site.yml

test: bootstrap
	scripts/test.sh

lint: bootstrap
	scripts/test.sh lint

sanity: bootstrap
	scripts/ansible_test.sh sanity

unit: bootstrap
	pytest tests/unit

simulator: bootstrap
	pytest tests/simulator

e2e: bootstrap
	pytest tests/sandbox_e2e

# The execution environment's build context (execution-environment.yml), offline: the collection tarball, then
# ansible-builder create. Build the image with: podman build -f build/ee/context/Containerfile build/ee/context
ee: bootstrap
	rm -rf build/ee && mkdir -p build/ee
	ansible-galaxy collection build --output-path build/ee
	cp build/ee/llmops-sglang-*.tar.gz build/ee/llmops-sglang.tar.gz
	ansible-builder create -f execution-environment.yml --context build/ee/context

clean:
	-ansible-playbook tests/sandbox/sandbox.yml -e sandbox_state=absent
	rm -rf .collections reports build
