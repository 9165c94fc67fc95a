#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Documentation only: llmops.sglang.preflight_check is an action plugin (plugins/action/preflight_check.py); it runs on the
# controller and never transfers this file.
from __future__ import annotations

DOCUMENTATION = r"""
---
module: preflight_check
short_description: Check every variable of the collection and this host against the deployment, before any change
version_added: "1.0.0"
description:
  - The checks of the P(llmops.sglang.preflight#role) role in one task, on the controller (an action plugin; nothing runs on
    the target).
  - V(variables) - every variable in scope whose name starts with a prefix of the collection (a role's name and C(_), from the
    C(roles/) directory, or C(spec_tune_)) - type and choices from the roles' C(meta/argument_specs.yml) (through a table
    generated from them, C(plugins/plugin_utils/_vars/role_specs.py)), ranges and cross-checks (C(plugins/plugin_utils/_vars/checks.py)
    RULES), and misspelled names, refused with the closest valid name. Internal C(<role>__*) names, the facts roles publish
    for each other and C(preflight_known_variables) are not refused. Values of C(no_log) options are redacted; a misspelled
    name's value is never read. Then the inputs of the P(llmops.sglang.sglang_benchmark#role) role with the benchmark's own
    checks (C(plugins/plugin_utils/_vars/benchmark.py)) - its options and the sweep plan as
    M(llmops.sglang.serving_benchmark) checks them (cross-checks such as burstiness without request rates), the workload's
    files found and opened on the controller as the benchmark finds them (a path that does not exist, a glob matching
    nothing, a directory without prompt files, an unreadable or empty file), the trace file read and parsed, and the run id
    and label by the report writer's rule (letters, digits, C(.), C(_), C(-)). Problems here stop the task before the host
    checks.
  - V(benchmark) - only the inputs of the sglang_benchmark role (its first task runs this, so a benchmark run alone is
    refused before anything is measured, with the same words as preflight).
  - V(host) - this host against the deployment, from C(ansible_facts.llmops_gpu) (P(llmops.sglang.gpu_facts#module)) and the
    model directory gpu_facts read (C(preflight_gpu_facts_read.model_dir)) - supported OS, GPUs on this node >= tp / nnodes,
    every host refusal (SEV-SNP with passthrough, proprietary modules on Blackwell, runtime identity domains, P2P forced on
    against C(topo -p2p), rebooting the control node), the driver against the CUDA floor of the image, the GPU architectures
    against the image's CUDA, GPU memory against the size of the weights, free disk for them (see
    C(plugins/plugin_utils/_host/preflight.py)).
  - Every problem is listed together, each naming the variable, the value, the reason and the fix; the task fails when there
    is one (unless C(preflight_fail) is false), after printing the report.
  - The values are the task's variables (the preflight role's defaults, the inventory, C(-e)), templated on the controller;
    host role settings left unset take the role's documented default (C(iommu_mode=auto), ...).
author:
  - llmops.sglang contributors (@llmops)
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: It only reads variables and facts; it behaves the same in check mode.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
  action:
    description: Indicates this has a corresponding action plugin so some parts of the options can be executed on the controller.
    support: full
options:
  checks:
    description: Which checks to run, in this order.
    type: list
    elements: str
    choices: [variables, host, benchmark]
    default: [variables, host]
notes:
  - Variables read for the host checks are those of the preflight role (C(preflight_tp_size), C(preflight_nnodes),
    C(preflight_image_cuda_version), C(preflight_model_*), C(preflight_disk_*), C(preflight_driver_managed), C(preflight_fail),
    C(preflight_known_variables)) and C(sglang_server_image), C(nvidia_driver_branch), C(nvidia_driver_flavour(_force)),
    C(nvidia_driver_reboot_allowed), C(iommu_mode), C(iommu_force), C(iommu_runtime_identity), C(iommu_reboot_allowed),
    C(nccl_p2p(_force)), C(nccl_gpu_indices); facts C(distribution*), C(mounts), C(all_ipv4_addresses), C(all_ipv6_addresses),
    C(machine_id).
seealso:
  - name: Host roles
    description: docs/host_roles.md in the collection.
    link: https://example.invalid/llmops/sglang/docs/host_roles.md
"""

EXAMPLES = r"""
- name: Read the GPU facts and the model directory
  llmops.sglang.gpu_facts:
    model_dir: /models/Qwen3.5-122B-A10B
  register: preflight_gpu_facts_read

- name: Check every variable and this host
  llmops.sglang.preflight_check:

- name: Check only the variables (no facts needed)
  llmops.sglang.preflight_check:
    checks: [variables]
"""

RETURN = r"""
report:
  description: What preflight found on this host (printed); absent when the variables were refused.
  returned: when the host checks ran
  type: dict
  contains:
    host:
      description: The inventory name.
      type: str
    os:
      description: Distribution and version.
      type: str
      sample: Ubuntu 24.04
    gpus:
      description: GPU count, models and architectures.
      type: str
      sample: 4 x NVIDIA RTX PRO 6000 Blackwell Server Edition (Blackwell)
    driver:
      description: Driver version, kernel module flavour and nvidia-smi state.
      type: str
      sample: 580.95.05 (open), nvidia-smi ok
    deployment:
      description: Tensor parallel size, nodes, GPUs per node and the image's CUDA.
      type: str
      sample: tp 4 over 1 node(s) = 4 GPU(s) here, image CUDA 13.0
    sev_snp:
      description: SEV-SNP active.
      type: bool
    iommu:
      description: The IOMMU decision's reason, or V(refused).
      type: str
    driver_flavour:
      description: The kernel module flavour decision's reason, or V(refused).
      type: str
    nccl_p2p:
      description: The NCCL P2P decision and its reason, or V(refused).
      type: str
    notes:
      description: What was checked and how (memory and disk numbers, deferred checks).
      type: list
      elements: str
    problems:
      description: Every problem, each naming the variable, the value, the reason and the fix; empty when the host passes.
      type: list
      elements: str
variable_problems:
  description: 'The variables refused, C(<variable>=<value>: <reason>. Fix: <fix>) (a misspelled name without its value).'
  returned: when a variable was refused
  type: list
  elements: str
msg:
  description: The outcome; on failure the header line and every problem.
  returned: always
  type: raw
"""
