# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""The host decisions of DESIGN.md "Decisions the roles make (and refuse)".

Every decision function takes the ``ansible_facts.llmops_gpu`` dict written by the gpu_facts module
(``facts``) plus the setting the inventory asked for, and returns a dict that always carries a
human ``reason``. Every refusal raises :class:`PolicyRefusal`, whose message names the variable,
the value, the reason and the fix; ``*_force`` overrides exist and are dangerous by design (they
turn a refusal into a warning and let the host do what the evidence says breaks it).

Rows covered (DESIGN.md):

- SEV-SNP active -> IOMMU translated, NCCL P2P off, ``--disable-custom-all-reduce``;
  refuses passthrough / ``iommu=pt`` (and IOMMU off).
- Blackwell GPU (cc 10.x/11.x/12.x) -> open kernel modules; refuses the proprietary flavour and a
  runtime per-group identity domain.
- PCIe-only GPUs, IOMMU translated, tp > 1 -> NCCL P2P off (auto).
- ``topo -p2p`` not OK between GPUs in use -> NCCL P2P off (auto); refuses P2P forced on without
  override.
- driver < 580.65.06 with a CUDA 13 image -> upgrade the driver.
- reboot needed and not allowed -> "reboot pending", stop before serving; refuses rebooting the
  control node (local connection).

Plus the IOMMU mode -> kernel arguments per CPU vendor (``intel_iommu=on``; never ``amd_iommu=on``,
which the kernel rejects with ``AMD-Vi: Unknown option - 'on'``), the token-level command line
edit that keeps unrelated arguments, and how each supported OS applies kernel arguments (a late
grub drop-in on Debian/Ubuntu, grubby on RHEL 9).
"""
from __future__ import annotations

from ansible_collections.llmops.sglang.plugins.module_utils._gpu.host_facts import MANAGED_DROPIN_MARKER, split_cmdline, token_key
from ansible_collections.llmops.sglang.plugins.module_utils._gpu.nvidia_smi import architecture_from_cc, p2p_ok_pairs, version_tuple
from ansible_collections.llmops.sglang.plugins.plugin_utils._host import control_node as cn

IOMMU_MODES = ("auto", "translated", "passthrough", "off", "unmanaged")
P2P_POLICIES = ("auto", "enabled", "disabled")
DRIVER_FLAVOURS = ("auto", "open", "proprietary")
# THE driver floor table: minimum Linux driver per CUDA release (CUDA Toolkit release notes, table 3). A CUDA 13.x image
# runs on >= 580.65.06 through minor-version compatibility, so every 13.x maps to the 13.0 GA floor. Preflight, the
# nvidia_driver role (driver_upgrade) and the variable check of nvidia_driver_branch (cuda_driver_branch_floor) read it.
CUDA_DRIVER_FLOORS = {"12.8": "570.26", "12.9": "575.51.03", "13": "580.65.06", "13.0": "580.65.06"}
# CUDA versions each GPU architecture works with (CUDA release notes), next to the driver floors: Blackwell needs
# CUDA >= 12.8 (sm_100/sm_120 kernels); CUDA 13 dropped Maxwell, Pascal and Volta (last: 12.9), CUDA 12 dropped Kepler
# (last: 11.8). min/max are inclusive CUDA major.minor versions; a missing bound means none. Read by
# cuda_architecture_problems (preflight: the image's CUDA against the GPUs).
CUDA_BY_ARCHITECTURE = {
    "Kepler": {"max": "11.8"},
    "Maxwell": {"max": "12.9"},
    "Pascal": {"max": "12.9"},
    "Volta": {"max": "12.9"},
    "Turing": {"min": "10.0"},
    "Ampere": {"min": "11.0"},
    "Ada": {"min": "11.8"},
    "Hopper": {"min": "11.8"},
    "Blackwell": {"min": "12.8"},
}
BLACKWELL = "Blackwell"
PRE_TURING = ("Kepler", "Maxwell", "Pascal", "Volta")
GRUB_DROPIN_PATH = "/etc/default/grub.d/99-llmops-iommu.cfg"
MANAGED_MARKER = MANAGED_DROPIN_MARKER
# THE supported operating systems: one row per (ansible_facts.distribution, distribution_major_version) with the
# NVIDIA CUDA repository directory the driver comes from (developer.download.nvidia.com/compute/cuda/repos/<dir>/)
# and how kernel arguments are applied. Preflight (os_support), nvidia_driver (os_support), the iommu role
# (kernel_args_method) and every "supported OS" message read this table; roles/nvidia_driver/vars/<OS>.yml hold
# only the per-OS package details.
SUPPORTED_OS_TABLE = (
    # distribution, major, label, CUDA repository, kernel arguments
    ("Ubuntu", "22", "Ubuntu 22.04", "ubuntu2204", "grub_dropin"),
    ("Ubuntu", "24", "Ubuntu 24.04", "ubuntu2404", "grub_dropin"),
    ("Debian", "12", "Debian 12", "debian12", "grub_dropin"),
    ("Debian", "13", "Debian 13", "debian13", "grub_dropin"),
    ("RedHat", "9", "RHEL 9", "rhel9", "grubby"),
    ("Rocky", "9", "Rocky Linux 9", "rhel9", "grubby"),
    ("AlmaLinux", "9", "AlmaLinux 9", "rhel9", "grubby"),
    ("CentOS", "9", "CentOS Stream 9", "rhel9", "grubby"),
)
SUPPORTED_OS = dict(((d, m), k) for d, m, _label, _repo, k in SUPPORTED_OS_TABLE)


def supported_os_text():
    """The supported OS list for messages, from :data:`SUPPORTED_OS_TABLE`:
    ``"Ubuntu 22.04, Ubuntu 24.04, Debian 12, Debian 13, RHEL 9, Rocky Linux 9, AlmaLinux 9, CentOS Stream 9"``."""
    return ", ".join(row[2] for row in SUPPORTED_OS_TABLE)


def os_support(distribution, major_version):
    """Is this OS supported, and with which NVIDIA CUDA repository and kernel-argument method?

    ``distribution``/``major_version``: ``ansible_facts.distribution`` and ``distribution_major_version``.
    Returns ``{"supported": bool, "label": str | None, "cuda_repo": str | None, "kernel_args": "grub_dropin" |
    "grubby" | None, "supported_list": str, "reason": str}``; for an unsupported OS ``reason`` names the OS, the
    supported list and the fix. Never raises: preflight collects the problem with the others.
    """
    key = (str(distribution), str(major_version))
    for d, m, label, repo, kargs in SUPPORTED_OS_TABLE:
        if (d, m) == key:
            return {"supported": True, "label": label, "cuda_repo": repo, "kernel_args": kargs, "supported_list": supported_os_text(),
                    "reason": "%s: NVIDIA CUDA repository %s, kernel arguments through %s" % (label, repo, kargs)}
    return {"supported": False, "label": None, "cuda_repo": None, "kernel_args": None, "supported_list": supported_os_text(),
            "reason": "%s %s is not supported: NVIDIA publishes the CUDA repository this collection installs the driver from, "
                      "and the kernel arguments are managed, only for %s" % (key[0], key[1], supported_os_text())}


# Tokens that put the IOMMU in passthrough or turn it off, and the invalid AMD spelling.
_PT_TOKENS = ["iommu=pt", "iommu.passthrough=1"]
_OFF_TOKENS = ["iommu=off", "amd_iommu=off", "intel_iommu=off"]
_INVALID_AMD = "amd_iommu=on"
_DANGER = "(dangerous: it overrides a guard that exists because the host breaks otherwise)"


class PolicyRefusal(Exception):
    """A decision refused before any change.

    Attributes: ``variable`` (the inventory variable), ``value`` (what it was set to), ``reason``
    (why this host cannot do it, with the evidence from the facts), ``fix`` (what to change),
    ``row`` (the DESIGN.md decision table row). ``str(exc)`` is the full message.
    """

    def __init__(self, variable, value, reason, fix, row=None):
        self.variable = variable
        self.value = value
        self.reason = reason
        self.fix = fix
        self.row = row
        super(PolicyRefusal, self).__init__(self.message)

    @property
    def message(self):
        return "Refusing %s=%r: %s. Fix: %s." % (self.variable, self.value, self.reason.rstrip("."), self.fix.rstrip("."))

    def to_dict(self):
        """``{"variable", "value", "reason", "fix", "row", "message"}``."""
        return {"variable": self.variable, "value": self.value, "reason": self.reason, "fix": self.fix, "row": self.row,
                "message": self.message}


# ---------------------------------------------------------------------------------------------
# fact accessors (tolerant of partial facts, e.g. a host before the driver is installed)


def _get(facts, *path):
    cur = facts or {}
    for key in path:
        if not isinstance(cur, dict):
            return None
        cur = cur.get(key)
    return cur


def sev_snp_active(facts):
    """True when gpu_facts found SEV-SNP active (``sev_snp.active``)."""
    return bool(_get(facts, "sev_snp", "active"))


def architectures(facts):
    """Sorted architectures of the host's GPUs (``architectures`` fact, else from ``gpus[].compute_capability``)."""
    archs = _get(facts, "architectures")
    if archs:
        return sorted(set(archs))
    return sorted(set(architecture_from_cc(g.get("compute_capability")) for g in (_get(facts, "gpus") or [])))


def is_blackwell(facts):
    """True when any GPU is Blackwell (cc 10.x, 11.x or 12.x)."""
    return BLACKWELL in architectures(facts)


def _vendor(facts):
    return _get(facts, "cpu_vendor") or "unknown"


def _gpu_passthrough_vm(facts):
    return bool(_get(facts, "virtualization", "gpu_passthrough"))


def _check_choice(variable, value, choices):
    if value not in choices:
        raise PolicyRefusal(variable, value, "it is not one of %s" % ", ".join(choices), "set %s to one of %s" % (variable, ", ".join(choices)))


# ---------------------------------------------------------------------------------------------
# IOMMU mode -> kernel arguments


def iommu_kernel_args(facts, mode="auto", force=False, variable="iommu_mode", force_variable="iommu_force"):
    """Decide the kernel arguments for an IOMMU mode on this host.

    ``mode``: ``auto`` (keep what the host runs; change only what a guard requires: SEV-SNP keeps
    translated, and the invalid ``amd_iommu=on`` is removed), ``translated``, ``passthrough``,
    ``off`` or ``unmanaged`` (touch nothing). ``force``: the ``iommu_force`` override (dangerous).

    Per CPU vendor (``cpu_vendor`` fact): Intel needs ``intel_iommu=on`` for translation and
    ``intel_iommu=on iommu=pt`` for passthrough; AMD's IOMMU is on by default, so translated adds
    nothing, passthrough adds ``iommu=pt``, and ``amd_iommu=on`` is never written (it is invalid);
    arm64 uses ``iommu.passthrough=0|1``. ``off`` writes ``intel_iommu=off`` / ``amd_iommu=off``.

    Returns ``{"mode", "effective_mode": "translated" | "passthrough" | "off" | "unmanaged" |
    "unknown", "cpu_vendor", "add": [tokens], "remove": [tokens or bare keys], "reason",
    "warnings": [str]}``. ``add``/``remove`` feed :func:`cmdline_edit`.

    Raises :class:`PolicyRefusal` for an unknown mode, passthrough or off on a SEV-SNP host
    (SNP needs a translated IOMMU; with ``iommu=pt`` the kernel prints ``AMD-Vi: SNP: IOMMU disabled
    or configured in passthrough mode, SNP cannot be supported.``), and passthrough/off on a CPU
    vendor the kernel arguments are not known for.
    """
    _check_choice(variable, mode, IOMMU_MODES)
    vendor = _vendor(facts)
    snp = sev_snp_active(facts)
    warnings = []
    current = _get(facts, "iommu", "default_domain") or "unknown"
    if mode == "unmanaged":
        return {"mode": mode, "effective_mode": "unmanaged", "cpu_vendor": vendor, "add": [], "remove": [], "warnings": warnings,
                "reason": "%s=unmanaged: the kernel command line is left as it is" % variable}
    if mode in ("passthrough", "off") and snp:
        evidence = "; ".join((_get(facts, "sev_snp", "evidence") or [])[:3]) or "sev_snp.active"
        reason = ("SEV-SNP is active on this host (%s) and needs a translated IOMMU: with %s the kernel prints "
                  "'AMD-Vi: SNP: IOMMU disabled or configured in passthrough mode, SNP cannot be supported.'"
                  % (evidence, "iommu=pt" if mode == "passthrough" else "the IOMMU off"))
        if not force:
            raise PolicyRefusal(variable, mode, reason,
                                "set %s: translated (or auto) and keep NCCL P2P off, or disable SEV-SNP in the BIOS if no "
                                "confidential VMs run here; %s: true skips this guard %s" % (variable, force_variable, _DANGER),
                                row="SEV-SNP active")
        warnings.append("%s: true overrides: %s" % (force_variable, reason))
    if mode == "auto":
        add, remove = [], []
        if vendor == "amd":
            remove.append(_INVALID_AMD)
        if _gpu_passthrough_vm(facts):
            return {"mode": mode, "effective_mode": current, "cpu_vendor": vendor, "add": add, "remove": remove, "warnings": warnings,
                    "reason": "GPUs are passed through to this VM: the guest's IOMMU mode is the hypervisor's business; "
                              "only invalid tokens are removed"}
        if snp:
            remove = _PT_TOKENS + _OFF_TOKENS + remove
            return {"mode": mode, "effective_mode": "translated", "cpu_vendor": vendor, "add": add, "remove": remove,
                    "warnings": warnings, "reason": "SEV-SNP is active: the IOMMU stays translated (passthrough would disable SNP)"}
        return {"mode": mode, "effective_mode": current, "cpu_vendor": vendor, "add": add, "remove": remove, "warnings": warnings,
                "reason": "auto keeps the host's current IOMMU mode (%s); no guard requires a change" % current}
    if vendor not in ("amd", "intel", "arm"):
        if mode == "translated":
            return {"mode": mode, "effective_mode": "translated", "cpu_vendor": vendor, "add": [], "remove": list(_PT_TOKENS),
                    "warnings": ["CPU vendor %r unknown: only passthrough tokens are removed" % vendor],
                    "reason": "translated: passthrough tokens removed (vendor-specific enable flag unknown)"}
        raise PolicyRefusal(variable, mode, "the CPU vendor of this host is %r, so the kernel arguments for %s are not known" % (vendor, mode),
                            "check /proc/cpuinfo on the host (gpu_facts cpu_vendor) or set %s: unmanaged and configure it by hand" % variable)
    if vendor == "arm":
        if mode == "off":
            raise PolicyRefusal(variable, mode, "arm64 has no generic kernel argument to turn the SMMU off",
                                "use %s: passthrough (iommu.passthrough=1) or unmanaged" % variable)
        token = "iommu.passthrough=1" if mode == "passthrough" else "iommu.passthrough=0"
        return {"mode": mode, "effective_mode": mode, "cpu_vendor": vendor, "add": [token], "remove": [], "warnings": warnings,
                "reason": "arm64 selects the default domain with %s" % token}
    if mode == "translated":
        add = ["intel_iommu=on"] if vendor == "intel" else []
        remove = _PT_TOKENS + _OFF_TOKENS + ([_INVALID_AMD] if vendor == "amd" else [])
        reason = ("Intel VT-d translation needs intel_iommu=on; passthrough/off tokens removed" if vendor == "intel"
                  else "the AMD IOMMU translates by default; passthrough/off tokens removed (amd_iommu=on is invalid and never written)")
    elif mode == "passthrough":
        add = ["intel_iommu=on", "iommu=pt"] if vendor == "intel" else ["iommu=pt"]
        remove = ["iommu.passthrough=0", "iommu=nopt"] + _OFF_TOKENS + ([_INVALID_AMD] if vendor == "amd" else [])
        reason = ("identity default domain: intel_iommu=on iommu=pt" if vendor == "intel"
                  else "identity default domain: iommu=pt (amd_iommu=on is invalid and never written)")
    else:
        add = ["intel_iommu=off"] if vendor == "intel" else ["amd_iommu=off"]
        remove = _PT_TOKENS + ["iommu.passthrough=0", "iommu=nopt"] + ([_INVALID_AMD] if vendor == "amd" else [])
        reason = "IOMMU off: %s" % add[0]
        warnings.append("IOMMU off removes DMA protection and rules out VFIO and SEV-SNP")
    remove = [r for r in remove if r not in add and token_key(r) not in [token_key(a) for a in add]]
    return {"mode": mode, "effective_mode": mode, "cpu_vendor": vendor, "add": add, "remove": remove, "reason": reason, "warnings": warnings}


def runtime_identity_domain(facts, enabled, force=False, variable="iommu_runtime_identity", force_variable="iommu_force"):
    """Decide whether the GPUs' IOMMU groups may be switched to ``identity`` at runtime
    (``echo identity > /sys/kernel/iommu_groups/<N>/type`` after unbinding the driver).

    Returns ``{"allowed": bool, "groups": [group numbers of the GPUs], "reason", "warnings"}``.
    Raises :class:`PolicyRefusal` when ``enabled`` and any GPU is Blackwell (a per-group identity
    domain stops Blackwell's firmware security processor from booting the GPU and no FLR/SBR reset
    recovers it) unless ``force``; and when SEV-SNP is active (SNP enforces RMP checks on all DMA).
    """
    groups = [g.get("group") for g in (_get(facts, "iommu", "gpu_groups") or []) if g.get("group") is not None]
    if not enabled:
        return {"allowed": False, "groups": groups, "warnings": [], "reason": "%s is false: GPU groups keep the boot-time domain" % variable}
    warnings = []
    if is_blackwell(facts):
        reason = ("the host has Blackwell GPUs (%s); a runtime per-group identity domain stops the GPU's firmware security "
                  "processor (FSP) from booting it and no FLR/SBR reset recovers it" % ", ".join(architectures(facts)))
        if not force:
            raise PolicyRefusal(variable, enabled, reason, "set %s: false and keep the boot-time domain; %s: true skips this guard %s"
                                % (variable, force_variable, _DANGER), row="Blackwell GPU")
        warnings.append("%s: true overrides: %s" % (force_variable, reason))
    if sev_snp_active(facts):
        raise PolicyRefusal(variable, enabled, "SEV-SNP is active and requires translated domains for every device",
                            "set %s: false" % variable, row="SEV-SNP active")
    return {"allowed": True, "groups": groups, "warnings": warnings, "reason": "runtime identity domain allowed on groups %s" % groups}


# ---------------------------------------------------------------------------------------------
# kernel command line edits


def _tokens(cmdline):
    if cmdline is None:
        return []
    if isinstance(cmdline, (list, tuple)):
        return [str(t) for t in cmdline]
    return split_cmdline(str(cmdline))


def cmdline_edit(cmdline, add=None, remove=None):
    """Token-level edit of a kernel command line that keeps every unrelated argument in place.

    ``cmdline``: string or token list. ``remove``: tokens removed where they appear exactly
    (``iommu=pt``), or bare keys (``iommu``) that remove every value of that parameter.
    ``add``: tokens appended when missing; an existing token with the same key and another value
    is replaced (``intel_iommu=off`` -> ``intel_iommu=on``). Keys compare with dashes as
    underscores. Repeated unrelated parameters (``console=tty1 console=ttyS0``) are untouched.

    Returns ``{"cmdline": str, "tokens": [str], "added": [str], "removed": [str], "changed": bool}``.
    """
    tokens = _tokens(cmdline)
    add = list(add or [])
    remove = list(remove or [])
    add_keys = dict((token_key(a), a) for a in add)
    kept, removed = [], []
    for tok in tokens:
        key = token_key(tok)
        drop = False
        for r in remove:
            if ("=" in r and tok == r) or ("=" not in r and key == token_key(r) and tok not in add):
                drop = True
        if key in add_keys and tok != add_keys[key] and "=" in add_keys[key]:
            drop = True
        if drop:
            removed.append(tok)
        else:
            kept.append(tok)
    added = []
    for a in add:
        if a not in kept:
            kept.append(a)
            added.append(a)
    return {"cmdline": " ".join(kept), "tokens": kept, "added": added, "removed": removed, "changed": bool(added or removed)}


def cmdline_satisfies(cmdline, add=None, remove=None):
    """Verify a booted command line (``/proc/cmdline`` tokens) against a plan.

    Returns ``{"satisfied": bool, "missing": [tokens of add not present], "unwanted": [present
    tokens that remove names]}`` - used after the reboot to prove the kernel runs what was written.
    """
    tokens = _tokens(cmdline)
    missing = [a for a in (add or []) if a not in tokens]
    unwanted = []
    for r in remove or []:
        for tok in tokens:
            if (("=" in r and tok == r) or ("=" not in r and token_key(tok) == token_key(r))) and tok not in unwanted:
                unwanted.append(tok)
    return {"satisfied": not missing and not unwanted, "missing": missing, "unwanted": unwanted}


def kernel_args_method(distribution, major_version, variable="ansible_facts.distribution"):
    """How kernel arguments are applied on a supported OS.

    ``distribution``/``major_version``: Ansible's ``ansible_facts.distribution`` and
    ``distribution_major_version`` (``"Ubuntu"``/``"24"``, ``"Debian"``/``"13"``, ``"RedHat"``/``"9"``).
    Returns ``{"method": "grub_dropin" | "grubby", "path": GRUB_DROPIN_PATH | None,
    "update_command": [argv] | None, "reason"}``: Debian/Ubuntu write a late drop-in in
    ``/etc/default/grub.d`` (sourced after the cloud image's ``50-cloudimg-settings.cfg``) and run
    ``update-grub``; RHEL 9 (and Rocky/Alma/CentOS Stream 9) use ``grubby --update-kernel=ALL``
    (BLS entries). Raises :class:`PolicyRefusal` for any other OS (Pop!_OS kernelstub,
    rpm-ostree and older releases are not handled).
    """
    key = (str(distribution), str(major_version))
    method = SUPPORTED_OS.get(key)
    if method is None:
        raise PolicyRefusal(variable, "%s %s" % key, "the kernel command line is only managed on %s" % supported_os_text(),
                            "use a supported OS, or set iommu_mode: unmanaged and manage the kernel arguments yourself")
    if method == "grub_dropin":
        return {"method": method, "path": GRUB_DROPIN_PATH, "update_command": ["update-grub"],
                "reason": "%s %s: a late /etc/default/grub.d drop-in (sourced after cloud-image drop-ins), then update-grub" % key}
    return {"method": method, "path": None, "update_command": None,
            "reason": "%s %s: BLS entries edited with grubby --update-kernel=ALL" % key}


def render_grub_dropin(add=None, remove=None, reason=""):
    """Render the ``/etc/default/grub.d/99-llmops-iommu.cfg`` drop-in (POSIX sh, sourced by
    grub-mkconfig after ``/etc/default/grub`` and earlier drop-ins).

    It removes the ``remove`` tokens (exact tokens, or every value of a bare key) and the keys
    being replaced from ``GRUB_CMDLINE_LINUX`` and ``GRUB_CMDLINE_LINUX_DEFAULT`` word by word,
    then appends the ``add`` tokens to ``GRUB_CMDLINE_LINUX_DEFAULT``, so unrelated arguments set
    anywhere else (e.g. ``console=ttyS0`` from a cloud image drop-in) are kept. Returns the text.
    """
    add = list(add or [])
    remove = list(remove or [])
    patterns = []
    for r in remove:
        patterns.append(r if "=" in r else "%s|%s=*" % (r, r))
    for a in add:
        if "=" in a:
            patterns.append("%s=*" % a.split("=", 1)[0])
    lines = [
        "# %s: IOMMU kernel arguments. Do not edit; set the iommu role variables instead." % MANAGED_MARKER,
        "# %s" % (reason or "kernel arguments"),
        "# Sourced by grub-mkconfig after /etc/default/grub and earlier drop-ins (e.g. 50-cloudimg-settings.cfg).",
    ]
    if patterns:
        case = "|".join(patterns)
        for var in ("GRUB_CMDLINE_LINUX", "GRUB_CMDLINE_LINUX_DEFAULT"):
            lines += [
                "_llmops_kept=''",
                "for _llmops_tok in ${%s}; do" % var,
                "  case \"$_llmops_tok\" in",
                "    %s) ;;" % case,
                "    *) _llmops_kept=\"${_llmops_kept} ${_llmops_tok}\" ;;",
                "  esac",
                "done",
                "%s=\"${_llmops_kept# }\"" % var,
            ]
    if add:
        lines.append("GRUB_CMDLINE_LINUX_DEFAULT=\"${GRUB_CMDLINE_LINUX_DEFAULT:+${GRUB_CMDLINE_LINUX_DEFAULT} }%s\"" % " ".join(add))
    if patterns:
        lines.append("unset _llmops_kept _llmops_tok")
    return "\n".join(lines) + "\n"


def grubby_commands(add=None, remove=None, current_tokens=None):
    """argv lists for RHEL 9: ``grubby --update-kernel=ALL --remove-args="..."`` then
    ``--args="..."``. With ``current_tokens`` (``grubby --info=DEFAULT`` args or /proc/cmdline)
    only the tokens that actually change are named, so an unchanged host gets ``[]``."""
    add = list(add or [])
    remove = list(remove or [])
    if current_tokens is not None:
        edit = cmdline_edit(current_tokens, add, remove)
        remove_tokens, add_tokens = edit["removed"], edit["added"]
    else:
        remove_tokens, add_tokens = remove, add
    cmds = []
    if remove_tokens:
        cmds.append(["grubby", "--update-kernel=ALL", "--remove-args=%s" % " ".join(remove_tokens)])
    if add_tokens:
        cmds.append(["grubby", "--update-kernel=ALL", "--args=%s" % " ".join(add_tokens)])
    return cmds


# ---------------------------------------------------------------------------------------------
# driver


def driver_flavour(facts, requested="auto", force=False, variable="nvidia_driver_flavour", force_variable="nvidia_driver_flavour_force"):
    """Choose the kernel module flavour.

    ``requested``: ``auto`` (open unless every GPU is pre-Turing), ``open`` or ``proprietary``.
    Returns ``{"flavour": "open" | "proprietary", "reason", "warnings"}``. Raises
    :class:`PolicyRefusal` for proprietary with a Blackwell GPU (Blackwell only works with the
    open modules) unless ``force``, for open with Maxwell/Pascal/Volta GPUs (open modules are
    Turing+ only), and for a host mixing both (no flavour drives them all).
    """
    _check_choice(variable, requested, DRIVER_FLAVOURS)
    archs = architectures(facts)
    old = [a for a in archs if a in PRE_TURING]
    warnings = []
    if BLACKWELL in archs and old:
        raise PolicyRefusal(variable, requested, "the host mixes Blackwell (open modules only) with %s (proprietary only)" % ", ".join(old),
                            "move the older GPUs to another host", row="Blackwell GPU")
    if BLACKWELL in archs:
        if requested == "proprietary":
            reason = "the host has Blackwell GPUs, which only the open kernel modules drive (NVIDIA: Blackwell requires nvidia-open)"
            if not force:
                raise PolicyRefusal(variable, requested, reason, "set %s: open (or auto); %s: true installs it anyway %s"
                                    % (variable, force_variable, _DANGER), row="Blackwell GPU")
            warnings.append("%s: true overrides: %s" % (force_variable, reason))
            return {"flavour": "proprietary", "reason": "forced", "warnings": warnings}
        return {"flavour": "open", "warnings": warnings, "reason": "Blackwell GPUs need the open kernel modules"}
    if old:
        if requested == "open":
            raise PolicyRefusal(variable, requested, "%s GPUs are only supported by the proprietary modules (open modules are Turing+)"
                                % ", ".join(old), "set %s: proprietary (or auto)" % variable)
        return {"flavour": "proprietary", "warnings": warnings, "reason": "%s GPUs need the proprietary modules" % ", ".join(old)}
    if requested == "auto":
        return {"flavour": "open", "warnings": warnings, "reason": "open kernel modules are NVIDIA's default since R560 for Turing and newer"}
    return {"flavour": requested, "warnings": warnings, "reason": "%s=%s" % (variable, requested)}


def cuda_driver_floor(image_cuda_version):
    """Minimum driver for a CUDA version (``"13.0"`` -> ``"580.65.06"``, ``"12.9"`` -> ``"575.51.03"``;
    any 13.x -> ``"580.65.06"``). ``None`` for a version not in :data:`CUDA_DRIVER_FLOORS`."""
    ver = str(image_cuda_version or "").strip()
    if ver in CUDA_DRIVER_FLOORS:
        return CUDA_DRIVER_FLOORS[ver]
    major = ver.split(".", 1)[0]
    if major == "13":
        return CUDA_DRIVER_FLOORS["13"]
    return None


def cuda_driver_branch_floor(image_cuda_version):
    """The driver branch the floor of a CUDA version lies in (``"13.0"`` -> 580, ``"12.8"`` -> 570, ``"12.9"`` -> 575):
    a pinned branch below it cannot run the image. ``None`` where :func:`cuda_driver_floor` knows no floor."""
    floor = cuda_driver_floor(image_cuda_version)
    return int(floor.split(".", 1)[0]) if floor else None


def cuda_architecture_support(architecture, cuda_version):
    """Can an image built for ``cuda_version`` (``"13.0"``) run on GPUs of ``architecture`` (``"Blackwell"``)?

    Returns None when it can (or the architecture is not in :data:`CUDA_BY_ARCHITECTURE`), else ``{"min": "12.8"}``
    or ``{"max": "12.9"}``: the bound the version breaks. Versions compare numerically (``12.10`` > ``12.9``).
    """
    support = CUDA_BY_ARCHITECTURE.get(architecture) or {}
    have = _cuda_tuple(cuda_version)
    if have is None:
        return None
    if "min" in support and have < _cuda_tuple(support["min"]):
        return {"min": support["min"]}
    if "max" in support and have > _cuda_tuple(support["max"]):
        return {"max": support["max"]}
    return None


def _cuda_tuple(version):
    """``"12.8"`` -> ``(12, 8)``; ``"13"`` -> ``(13,)``; None when it is not dot-separated numbers."""
    parts = str(version or "").strip().split(".")
    return tuple(int(p) for p in parts) if all(p.isdigit() for p in parts) else None


def driver_upgrade(facts_or_version, image_cuda_version="13.0"):
    """Decide whether the installed driver must be upgraded for the image's CUDA.

    ``facts_or_version``: the gpu_facts dict (``driver_version``) or a version string.
    Returns ``{"upgrade": bool, "installed": str | None, "floor": str | None, "reason"}``:
    upgrade when no driver answers or it is older than the floor of ``image_cuda_version``
    (CUDA 13.x: ``580.65.06``). Versions compare numerically (``580.9`` < ``580.65.06``).
    """
    installed = facts_or_version.get("driver_version") if isinstance(facts_or_version, dict) else facts_or_version
    floor = cuda_driver_floor(image_cuda_version)
    if floor is None:
        return {"upgrade": False, "installed": installed, "floor": None,
                "reason": "no driver floor recorded for CUDA %s; no upgrade decided" % image_cuda_version}
    have = version_tuple(installed)
    if have is None:
        return {"upgrade": True, "installed": installed, "floor": floor,
                "reason": "no NVIDIA driver answers; CUDA %s needs >= %s" % (image_cuda_version, floor)}
    if have < version_tuple(floor):
        return {"upgrade": True, "installed": installed, "floor": floor,
                "reason": "driver %s < %s, the minimum for CUDA %s" % (installed, floor, image_cuda_version)}
    return {"upgrade": False, "installed": installed, "floor": floor,
            "reason": "driver %s >= %s, the minimum for CUDA %s" % (installed, floor, image_cuda_version)}


# ---------------------------------------------------------------------------------------------
# NCCL P2P


def _gpus_in_use(facts, tp, gpus):
    if gpus is not None:
        return sorted(int(g) for g in gpus)
    count = _get(facts, "gpu_count") or 0
    return list(range(min(int(tp), int(count)) if count else int(tp)))


def _pcie_only(facts, gpus):
    nv = _get(facts, "nvlink") or {}
    pairs = nv.get("nvlink_pairs") or []
    linked = set()
    for p in pairs:
        if p[0] in gpus and p[1] in gpus:
            linked.add((p[0], p[1]))
    needed = [(a, b) for i, a in enumerate(gpus) for b in gpus[i + 1:]]
    return not needed or not all(pair in linked for pair in needed)


def _p2p_matrices(facts):
    p2p = _get(facts, "p2p") or {}
    return [p2p.get(k) for k in ("read", "write") if p2p.get(k)]


def nccl_p2p_policy(facts, tp=1, policy="auto", gpus=None, force=False, nnodes=1,
                    variable="nccl_p2p", force_variable="nccl_p2p_force"):
    """Decide NCCL peer-to-peer for the GPUs a server uses.

    ``tp``: tensor parallel size per node (GPUs in use default to ``0..tp-1``); ``gpus``: explicit
    GPU indices in use; ``policy``: ``auto`` | ``enabled`` | ``disabled``; ``force``: the
    ``nccl_p2p_force`` override (dangerous: NCCL hangs or silently corrupts tensors on these paths).

    ``auto`` turns P2P off when any of these holds for the GPUs in use (each becomes a reason):
    SEV-SNP active; IOMMU translated with PCIe-only GPUs and tp > 1; ``topo -p2p`` (read and, when
    gathered, write) not ``OK`` between some pair in use, or unknown; GPUs passed through to a VM.

    Returns ``{"p2p": "enabled" | "disabled" | "not_applicable", "env": {NAME: value},
    "disable_custom_all_reduce": bool, "gpus": [int], "reasons": [str], "reason": str,
    "warnings": [str]}``; ``env`` holds ``NCCL_P2P_DISABLE=1`` when off, and
    ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` whenever tp > 1 (so CUDA's GPU indices are nvidia-smi's, the
    ones the P2P matrix speaks about). ``disable_custom_all_reduce`` is SGLang's
    ``--disable-custom-all-reduce`` (custom all-reduce uses CUDA IPC P2P and hangs when P2P is broken).
    Raises :class:`PolicyRefusal` for ``enabled`` when any auto reason holds, unless ``force``.
    """
    _check_choice(variable, policy, P2P_POLICIES)
    try:
        tp = int(tp)
    except (TypeError, ValueError):
        raise PolicyRefusal("tp", tp, "tensor parallel size must be a positive integer", "set the tp size to 1, 2, 4 or 8")
    gpus = _gpus_in_use(facts, tp, gpus)
    reasons = []
    if sev_snp_active(facts):
        reasons.append("SEV-SNP is active: cross-device P2P DMA is broken on SNP hosts (the IOMMU enforces RMP checks on all DMA)")
    multi = len(gpus) > 1
    if multi:
        domain = _get(facts, "iommu", "default_domain")
        types = _get(facts, "iommu", "gpu_group_types") or []
        # the GPUs' own group types win over the boot default (a group can be switched at runtime)
        translated = all(t in ("DMA", "DMA-FQ") for t in types) if types else domain == "translated"
        if translated and _pcie_only(facts, gpus):
            reasons.append("IOMMU is translated (%s) and GPUs %s are PCIe-only with tp %d: NVIDIA does not support IOMMU-enabled PCIe "
                           "P2P (NCCL hangs or silent corruption)" % (", ".join(types) or domain, gpus, tp))
        matrices = _p2p_matrices(facts)
        if not matrices:
            reasons.append("P2P capability between GPUs %s is unknown (no nvidia-smi topo -p2p matrix; smi_state=%s)"
                           % (gpus, _get(facts, "smi_state")))
        else:
            ok = set(tuple(p) for p in p2p_ok_pairs(matrices, gpus))
            bad = []
            for i, a in enumerate(gpus):
                for b in gpus[i + 1:]:
                    if (a, b) not in ok:
                        bad.append("GPU%d-GPU%d %s" % (a, b, _p2p_token(matrices, a, b)))
            if bad:
                reasons.append("nvidia-smi topo -p2p is not OK between GPUs in use: %s" % ", ".join(bad))
        if _gpu_passthrough_vm(facts):
            reasons.append("GPUs are passed through to a VM: P2P between passed-through GPUs needs ACS/ATS set up by the hypervisor "
                           "and is not proven")
    env = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"} if multi or nnodes > 1 else {}
    warnings = []
    if policy == "disabled":
        env["NCCL_P2P_DISABLE"] = "1"
        return {"p2p": "disabled", "env": env, "disable_custom_all_reduce": True, "gpus": gpus, "reasons": reasons, "warnings": warnings,
                "reason": "%s=disabled" % variable}
    if not multi and not sev_snp_active(facts):
        return {"p2p": "not_applicable", "env": env, "disable_custom_all_reduce": False, "gpus": gpus, "reasons": [], "warnings": warnings,
                "reason": "one GPU per node (tp %d): no peer-to-peer traffic" % tp}
    if policy == "enabled":
        if reasons and not force:
            raise PolicyRefusal(variable, policy, "; ".join(reasons),
                                "set %s: auto (or disabled); %s: true forces P2P on %s" % (variable, force_variable, _DANGER),
                                row="topo -p2p not OK between GPUs in use")
        if reasons:
            warnings.append("%s: true overrides: %s" % (force_variable, "; ".join(reasons)))
        return {"p2p": "enabled", "env": env, "disable_custom_all_reduce": False, "gpus": gpus, "reasons": reasons, "warnings": warnings,
                "reason": "%s=enabled" % variable}
    if reasons:
        env["NCCL_P2P_DISABLE"] = "1"
        return {"p2p": "disabled", "env": env, "disable_custom_all_reduce": True, "gpus": gpus, "reasons": reasons, "warnings": warnings,
                "reason": reasons[0]}
    return {"p2p": "enabled", "env": env, "disable_custom_all_reduce": False, "gpus": gpus, "reasons": [], "warnings": warnings,
            "reason": "topo -p2p OK between GPUs %s, no SEV-SNP, IOMMU not translating a PCIe-only path" % gpus}


def _p2p_token(matrices, a, b):
    tokens = []
    for m in matrices:
        try:
            ia, ib = m["gpus"].index(a), m["gpus"].index(b)
            tokens.append(m["matrix"][ia][ib])
        except (ValueError, IndexError, KeyError):
            tokens.append("?")
    return "/".join(tokens)


# ---------------------------------------------------------------------------------------------
# reboot


def reboot_policy(needed, allowed, connection="ssh", variable="iommu_reboot_allowed", is_control_node=False, control_reason=None):
    """Decide what to do when a change needs a reboot.

    Returns ``{"action": "none" | "reboot" | "pending", "reason"}``: ``pending`` means "record
    reboot pending and stop before serving". Raises :class:`PolicyRefusal` when a reboot is needed
    and allowed but the host is the control node (``connection`` ``local``, or ``is_control_node``, e.g.
    an SSH connection to one of the controller's own addresses, see ``control_node.control_node_match``;
    ``control_reason`` says how that was found): rebooting it would kill the play that asked for it.
    """
    if not needed:
        return {"action": "none", "reason": "no change needs a reboot"}
    if not allowed:
        return {"action": "pending", "reason": "a reboot is needed and %s is false: reboot pending, serving stops before start" % variable}
    if connection in ("local", "ansible.builtin.local") or is_control_node:
        why = ("this host is the control node (connection %s)" % connection) if connection in ("local", "ansible.builtin.local") \
            else (control_reason or "this host is the control node")
        raise PolicyRefusal(variable, allowed, "%s: rebooting it would kill the running play" % why,
                            "reboot the host by hand, or run the play from another machine over ssh",
                            row="reboot needed, reboot not allowed")
    return {"action": "reboot", "reason": "a reboot is needed and %s is true" % variable}


def reboot_decision(needed, allowed, connection="ssh", variable="iommu_reboot_allowed", addresses=None, machine_id=None):
    """:func:`reboot_policy` with the control node recognised by address too (the filter ``reboot_policy`` and preflight).

    ``addresses``: the target's ``all_ipv4_addresses`` + ``all_ipv6_addresses`` facts (list of str); when given, they are
    compared with this machine's (the controller's: plugin utils run there) by ``control_node.control_node_match``, a
    shared address confirmed by the machine id when both sides know it (``machine_id``: the target's
    ``ansible_facts.machine_id``). Returns reboot_policy's dict plus ``control_node`` (the match, or None without
    addresses). Raises :class:`PolicyRefusal` as reboot_policy does.
    """
    match = None
    if addresses:
        match = cn.control_node_match(list(addresses), cn.controller_addresses(), machine_id, cn.controller_machine_id())
    result = reboot_policy(needed, allowed, connection, variable, is_control_node=bool(match and match["is_control_node"]),
                           control_reason=match["reason"] if match else None)
    result["control_node"] = match
    return result


# ---------------------------------------------------------------------------------------------
# everything at once (preflight)


def host_decisions(facts, settings=None):
    """Run every host decision for ``settings`` and collect decisions and refusals.

    ``settings`` keys (all optional): ``iommu_mode``, ``iommu_force``, ``iommu_runtime_identity``,
    ``nvidia_driver_flavour``, ``nvidia_driver_flavour_force``, ``nccl_p2p``, ``nccl_p2p_force``,
    ``tp`` (default 1), ``gpus``, ``image_cuda_version`` (default ``"13.0"``), ``reboot_needed``,
    ``reboot_allowed``, ``connection``, ``distribution`` + ``distribution_major_version``.
    Returns ``{"decisions": {name: decision dict}, "refusals": [PolicyRefusal.to_dict()]}``.
    """
    s = dict(settings or {})
    out = {"decisions": {}, "refusals": []}

    def attempt(name, func, *args, **kwargs):
        try:
            out["decisions"][name] = func(*args, **kwargs)
        except PolicyRefusal as exc:
            out["refusals"].append(exc.to_dict())

    attempt("iommu", iommu_kernel_args, facts, s.get("iommu_mode", "auto"), bool(s.get("iommu_force", False)))
    attempt("runtime_identity", runtime_identity_domain, facts, bool(s.get("iommu_runtime_identity", False)), bool(s.get("iommu_force", False)))
    attempt("driver_flavour", driver_flavour, facts, s.get("nvidia_driver_flavour", "auto"), bool(s.get("nvidia_driver_flavour_force", False)))
    attempt("nccl", nccl_p2p_policy, facts, s.get("tp", 1), s.get("nccl_p2p", "auto"), s.get("gpus"), bool(s.get("nccl_p2p_force", False)))
    attempt("driver_upgrade", driver_upgrade, facts, s.get("image_cuda_version", "13.0"))
    attempt("reboot", reboot_policy, bool(s.get("reboot_needed", False)), bool(s.get("reboot_allowed", False)), s.get("connection", "ssh"))
    if s.get("distribution") is not None:
        attempt("kernel_args_method", kernel_args_method, s.get("distribution"), s.get("distribution_major_version"))
    return out
