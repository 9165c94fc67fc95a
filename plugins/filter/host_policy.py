# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Thin Jinja filters over ``plugin_utils/_host/policy.py`` for the host roles.

Each filter takes the ``ansible_facts.llmops_gpu`` dict written by ``llmops.sglang.gpu_facts`` and
returns the decision dict of the matching platform_policy function (always with a ``reason``).
A refusal becomes an ``AnsibleFilterError`` whose message names the variable, the value, the
reason and the fix. ``llmops.sglang.host_refusals`` collects all refusals as a list so that
preflight can assert on them before any change.

Filters:
  iommu_kernel_args(facts, mode='auto', force=False)       -> {mode, effective_mode, add, remove, reason, warnings}
  iommu_runtime_identity(facts, enabled, force=False)      -> {allowed, groups, reason, warnings}
  cmdline_edit(cmdline, add=[], remove=[])                 -> {cmdline, tokens, added, removed, changed}
  cmdline_satisfies(cmdline, add=[], remove=[])            -> {satisfied, missing, unwanted}
  kernel_args_method(distribution, major_version)          -> {method, path, update_command, reason}
  os_support(distribution, major_version)                  -> {supported, label, cuda_repo, kernel_args, supported_list, reason}
  grub_dropin(plan)                                        -> drop-in text for /etc/default/grub.d/99-llmops-iommu.cfg
  grubby_commands(plan, current_cmdline=None)              -> [[argv], ...]
  nvidia_driver_flavour(facts, requested='auto', force=False) -> {flavour, reason, warnings}
  driver_upgrade(facts, image_cuda_version='13.0')          -> {upgrade, installed, floor, reason}
  nccl_p2p_policy(facts, tp=1, policy='auto' (alias policy_name), gpus=None, force=False, nnodes=1)
                                                           -> {p2p, env, disable_custom_all_reduce, gpus, reasons, reason, warnings}
  reboot_policy(needed, allowed, connection='ssh', variable='iommu_reboot_allowed', addresses=None, machine_id=None)
                                                           -> {action, reason, control_node}
  host_decisions(facts, settings)                          -> {decisions: {...}, refusals: [...]}
  host_refusals(facts, settings)                           -> [message, ...]
  gpu_architecture(compute_capability)                     -> "Hopper", "Blackwell", ...
"""
from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.sglang.plugins.plugin_utils._host import policy as pp
from ansible_collections.llmops.sglang.plugins.module_utils._gpu.nvidia_smi import architecture_from_cc


def _call(func, *args, **kwargs):
    try:
        return func(*args, **kwargs)
    except pp.PolicyRefusal as exc:
        raise AnsibleFilterError(exc.message)


def _bool(value):
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on", "y")
    return bool(value)


def iommu_kernel_args(facts, mode="auto", force=False, variable="iommu_mode", force_variable="iommu_force"):
    """IOMMU mode -> kernel arguments for this host's CPU vendor (platform_policy.iommu_kernel_args)."""
    return _call(pp.iommu_kernel_args, facts, mode, _bool(force), variable, force_variable)


def iommu_runtime_identity(facts, enabled=False, force=False, variable="iommu_runtime_identity", force_variable="iommu_force"):
    """May the GPU IOMMU groups switch to identity at runtime? Refused on Blackwell and SEV-SNP hosts."""
    return _call(pp.runtime_identity_domain, facts, _bool(enabled), _bool(force), variable, force_variable)


def cmdline_edit(cmdline, add=None, remove=None):
    """Token-level kernel command line edit keeping unrelated arguments (platform_policy.cmdline_edit)."""
    return pp.cmdline_edit(cmdline, add, remove)


def cmdline_satisfies(cmdline, add=None, remove=None):
    """Does a booted /proc/cmdline carry the plan's tokens and none of the removed ones?"""
    return pp.cmdline_satisfies(cmdline, add, remove)


def kernel_args_method(distribution, major_version):
    """grub_dropin (Debian/Ubuntu) or grubby (RHEL 9 family); refuses an OS not in platform_policy.SUPPORTED_OS_TABLE."""
    return _call(pp.kernel_args_method, distribution, major_version)


def os_support(distribution, major_version):
    """Supported OS? With its NVIDIA CUDA repository and kernel-argument method (platform_policy.SUPPORTED_OS_TABLE)."""
    return pp.os_support(distribution, major_version)


def grub_dropin(plan):
    """Text of the late grub drop-in for an iommu_kernel_args plan (``{add, remove, reason}``)."""
    plan = plan or {}
    return pp.render_grub_dropin(plan.get("add"), plan.get("remove"), plan.get("reason", ""))


def grubby_commands(plan, current_cmdline=None):
    """grubby argv lists for an iommu_kernel_args plan; only real changes when current_cmdline is given."""
    plan = plan or {}
    return pp.grubby_commands(plan.get("add"), plan.get("remove"), current_cmdline)


def nvidia_driver_flavour(facts, requested="auto", force=False, variable="nvidia_driver_flavour",
                          force_variable="nvidia_driver_flavour_force"):
    """open | proprietary for this host's GPUs; refuses proprietary on Blackwell."""
    return _call(pp.driver_flavour, facts, requested, _bool(force), variable, force_variable)


def driver_upgrade(facts, image_cuda_version="13.0"):
    """Is the installed driver below the floor for the image's CUDA (13.x: 580.65.06)?"""
    return pp.driver_upgrade(facts, image_cuda_version)


def nccl_p2p_policy(facts, tp=1, policy="auto", gpus=None, force=False, nnodes=1, variable="nccl_p2p", force_variable="nccl_p2p_force",
                    policy_name=None):
    """NCCL P2P on/off with env (NCCL_P2P_DISABLE=1) and --disable-custom-all-reduce, with reasons.

    ``policy`` (alias ``policy_name``): auto | enabled | disabled."""
    if policy_name is not None:
        policy = policy_name
    return _call(pp.nccl_p2p_policy, facts, tp, policy, gpus, _bool(force), int(nnodes or 1), variable, force_variable)


def reboot_policy(needed, allowed, connection="ssh", variable="iommu_reboot_allowed", addresses=None, machine_id=None):
    """none | reboot | pending; refuses rebooting the control node.

    The control node is recognised by the connection (``local``) and, when ``addresses`` is given (the target's
    facts ``all_ipv4_addresses`` + ``all_ipv6_addresses``, list of str), by address: the filter runs on the
    controller and compares them with the controller's own addresses, a shared address confirmed by the machine
    id when both sides know it (``machine_id``: the target's ``ansible_facts.machine_id``). See
    ``plugin_utils/_host/control_node.py``. The result has ``control_node`` (the match, or None without addresses).
    """
    return _call(pp.reboot_decision, _bool(needed), _bool(allowed), connection, variable, addresses, machine_id)


def host_decisions(facts, settings=None):
    """Every host decision and every refusal (as dicts) for the settings (platform_policy.host_decisions)."""
    return pp.host_decisions(facts, settings)


def host_refusals(facts, settings=None):
    """The refusal messages (variable, value, reason, fix) for the settings; empty when the host may proceed."""
    return [r["message"] for r in pp.host_decisions(facts, settings)["refusals"]]


def gpu_architecture(compute_capability):
    """Compute capability ("9.0", "12.0") -> architecture ("Hopper", "Blackwell")."""
    return architecture_from_cc(compute_capability)


class FilterModule(object):
    """llmops.sglang GPU host filters."""

    def filters(self):
        return {
            "iommu_kernel_args": iommu_kernel_args,
            "iommu_runtime_identity": iommu_runtime_identity,
            "cmdline_edit": cmdline_edit,
            "cmdline_satisfies": cmdline_satisfies,
            "kernel_args_method": kernel_args_method,
            "os_support": os_support,
            "grub_dropin": grub_dropin,
            "grubby_commands": grubby_commands,
            "nvidia_driver_flavour": nvidia_driver_flavour,
            "driver_upgrade": driver_upgrade,
            "nccl_p2p_policy": nccl_p2p_policy,
            "reboot_policy": reboot_policy,
            "host_decisions": host_decisions,
            "host_refusals": host_refusals,
            "gpu_architecture": gpu_architecture,
        }
