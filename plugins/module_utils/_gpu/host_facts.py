# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""Host facts for GPU servers read from sysfs, procfs, /etc and the kernel log.

One parser per format; every reader takes a root directory (``sysfs_root`` for ``/sys``,
``procfs_root`` for ``/proc``, ``etc_root`` for ``/etc``) so tests and the sandbox can point them at
fixture trees. Readers never raise for a missing or unreadable file: they return ``None``/empty
values and the facts say what was not found.

Formats and sources:

- ``/proc/cmdline``: one line of space separated kernel parameters; a value may be double quoted
  (``param="a b"``) as in Documentation/admin-guide/kernel-parameters.rst.
- ``/proc/cpuinfo``: ``key<TAB>: value`` lines (x86 ``vendor_id``/``flags``, arm ``CPU implementer``).
- ``/sys/kernel/iommu_groups/<N>/type`` (``DMA``, ``DMA-FQ``, ``identity``, ``blocked``,
  ``unmanaged``, ``unknown``; kernel ``iommu_group_show_type``) and ``.../<N>/devices/<BDF>``.
- ``/sys/bus/pci/devices/<BDF>/{vendor,device,class,numa_node}`` and the ``driver`` and
  ``iommu_group`` links; NVIDIA is vendor ``0x10de``; GPUs are class ``0x0300xx`` (VGA) or
  ``0x0302xx`` (3D controller), NVSwitches class ``0x0680xx``.
- ``/sys/module/kvm_amd/parameters/sev_snp`` (``Y``/``N``), ``/sys/class/dmi/id/{sys_vendor,
  product_name}``, ``/sys/hypervisor/type``, ``/sys/class/iommu/``.
- kernel log (``dmesg`` or ``journalctl -k``) lines, Linux 6.8 wording: ``iommu: Default domain type:
  Translated``, ``SEV-SNP: RMP table ...``, ``kvm_amd: SEV-SNP enabled``, ``AMD-Vi: IOMMU SNP support
  enabled.``, ``AMD-Vi: SNP: IOMMU disabled or configured in passthrough mode, SNP cannot be
  supported.``, ``Command line: ...``, ``NVRM: loading NVIDIA UNIX ... Kernel Module ...``.
- ``/etc/default/grub`` and ``/etc/default/grub.d/*.cfg`` (sourced by grub-mkconfig in that order,
  drop-ins alphabetically, e.g. the cloud image's ``50-cloudimg-settings.cfg``).
"""
from __future__ import annotations

import glob
import os
import re

from ansible_collections.llmops.sglang.plugins.module_utils._gpu.nvidia_smi import (
    clean_output,
    normalise_pci_bus_id,
    parse_proc_driver_version,
)

NVIDIA_VENDOR_ID = "0x10de"
MANAGED_DROPIN_MARKER = "Managed by llmops.sglang"
_MAX_READ = 4 * 1024 * 1024

# kernel log lines that show SEV-SNP initialised on the host (PLATFORM_FACTS.md section 6)
_SNP_ACTIVE_PATTERNS = (
    re.compile(r"SEV-SNP: RMP table physical range"),
    re.compile(r"SEV-SNP API:\s*\S+"),
    re.compile(r"kvm_amd: SEV-SNP enabled"),
    re.compile(r"AMD-Vi: IOMMU SNP support enabled"),
)
# lines that show SNP could not be enabled (the IOMMU passthrough conflict and friends)
_SNP_CONFLICT_PATTERNS = (
    re.compile(r"SNP cannot be supported"),
    re.compile(r"SEV-SNP: IOMMU is either disabled or configured in passthrough mode"),
)
_DOMAIN_RE = re.compile(r"iommu: Default domain type: (Translated|Passthrough)(\s*\(set via kernel command line\))?")
_TLB_RE = re.compile(r"iommu: DMA domain TLB invalidation policy: (lazy|strict) mode")
_CMDLINE_LOG_RE = re.compile(r"\bCommand line: (.*)$")
_LOG_PREFIX_RE = re.compile(r"^\s*(?:\[\s*\d+\.\d+\]\s*|<\d+>\s*|\S+\s+\S+\s+kernel:\s*)")
_AMD_VI_UNKNOWN_RE = re.compile(r"AMD-Vi: Unknown option - '([^']*)'")


def read_text(path, limit=_MAX_READ):
    """Return the text of ``path`` (UTF-8, errors replaced, at most ``limit`` bytes) or ``None``
    when it does not exist or cannot be read (permission, a directory)."""
    try:
        with open(path, "rb") as handle:
            return handle.read(limit).decode("utf-8", "replace")
    except (IOError, OSError):
        return None


def first_line(path):
    text = read_text(path, 4096)
    if text is None:
        return None
    lines = clean_output(text)
    return lines[0].strip() if lines else ""


def _link_name(path):
    try:
        return os.path.basename(os.readlink(path))
    except (IOError, OSError):
        return None


# ---------------------------------------------------------------------------------------------
# kernel command line


def split_cmdline(text):
    """Split a kernel command line into tokens, keeping double-quoted values whole.

    ``'ro quiet foo="a b" iommu=pt'`` -> ``['ro', 'quiet', 'foo="a b"', 'iommu=pt']``. Escape
    sequences, CR/LF and surrounding whitespace are removed first. ``None`` -> ``[]``.
    """
    lines = clean_output(text)
    line = " ".join(lines)
    tokens = []
    current = []
    quoted = False
    for char in line:
        if char == '"':
            quoted = not quoted
            current.append(char)
        elif char.isspace() and not quoted:
            if current:
                tokens.append("".join(current))
                current = []
        else:
            current.append(char)
    if current:
        tokens.append("".join(current))
    return tokens


def token_key(token):
    """The parameter name of a token: ``intel_iommu=on`` -> ``intel_iommu``; ``quiet`` -> ``quiet``.
    Dashes and underscores are equivalent in kernel parameter names, so ``-`` is returned as ``_``."""
    return token.split("=", 1)[0].replace("-", "_")


def token_value(token):
    """The value of a token without surrounding quotes (``None`` for a bare flag such as ``ro``)."""
    if "=" not in token:
        return None
    value = token.split("=", 1)[1]
    if len(value) >= 2 and value[0] == value[-1] == '"':
        value = value[1:-1]
    return value


def parse_cmdline(text):
    """Parse ``/proc/cmdline`` text.

    Returns ``{"raw": str, "tokens": [str], "params": {key: value}, "init_args": [str]}`` where
    ``params`` maps each kernel parameter name (dashes as underscores) to its last value (``True``
    for bare flags such as ``ro``; the kernel, like this map, lets the last occurrence win for most
    parameters) and ``init_args`` are the tokens after ``--``, which the kernel hands to init.
    Source: Linux /proc/cmdline (Ubuntu 24.04, 6.8.0-87-generic).
    """
    tokens = split_cmdline(text)
    params = {}
    init_args = []
    for pos, tok in enumerate(tokens):
        if tok == "--":
            init_args = tokens[pos + 1:]
            break
        value = token_value(tok)
        params[token_key(tok)] = True if value is None else value
    return {"raw": " ".join(tokens), "tokens": tokens, "params": params, "init_args": init_args}


def cmdline_iommu_mode(params):
    """Return the IOMMU mode the command line asks for: ``passthrough`` (``iommu=pt`` or
    ``iommu.passthrough=1``), ``translated`` (``iommu=nopt`` or ``iommu.passthrough=0``), ``off``
    (``iommu=off``, ``amd_iommu=off``, ``intel_iommu=off``) or ``None`` (kernel default)."""
    params = params or {}
    if params.get("iommu") == "off" or params.get("amd_iommu") == "off" or params.get("intel_iommu") == "off":
        return "off"
    if params.get("iommu") == "pt" or params.get("iommu.passthrough") in ("1", "on", "y", "Y"):
        return "passthrough"
    if params.get("iommu") == "nopt" or params.get("iommu.passthrough") in ("0", "off", "n", "N"):
        return "translated"
    return None


# ---------------------------------------------------------------------------------------------
# kernel log


def parse_kernel_log(text):
    """Parse kernel log text (``dmesg`` or ``journalctl -k`` output) for the lines gpu_facts uses.

    Returns a dict:
      ``iommu_default_domain``: ``translated`` | ``passthrough`` | ``None``;
      ``iommu_default_domain_forced``: true when the line says ``(set via kernel command line)``;
      ``iommu_tlb_policy``: ``lazy`` | ``strict`` | ``None``;
      ``sev_snp_lines``: lines showing SNP initialised; ``sev_snp_conflict_lines``: lines saying SNP
      cannot be supported (e.g. because of ``iommu=pt``);
      ``amd_vi_unknown_options``: values rejected by AMD-Vi (``on`` for the invalid ``amd_iommu=on``);
      ``command_line``: the ``Command line:`` text or ``None``;
      ``nvrm``: :func:`parse_proc_driver_version` of the ``NVRM: loading`` line (version, flavour).
    Lines are matched without their ``[ seconds]`` / syslog prefixes. Source: Linux 6.8 dmesg on
    an AMD EPYC SEV-SNP host (``sev-snp-host-dmesg.txt``, ``snp-passthrough-conflict-dmesg.txt``).
    """
    out = {
        "iommu_default_domain": None,
        "iommu_default_domain_forced": False,
        "iommu_tlb_policy": None,
        "sev_snp_lines": [],
        "sev_snp_conflict_lines": [],
        "amd_vi_unknown_options": [],
        "command_line": None,
        "nvrm": None,
    }
    for line in clean_output(text):
        msg = _LOG_PREFIX_RE.sub("", line).strip()
        m = _DOMAIN_RE.search(msg)
        if m:
            out["iommu_default_domain"] = m.group(1).lower()
            out["iommu_default_domain_forced"] = bool(m.group(2))
            continue
        m = _TLB_RE.search(msg)
        if m:
            out["iommu_tlb_policy"] = m.group(1)
            continue
        if any(p.search(msg) for p in _SNP_CONFLICT_PATTERNS):
            out["sev_snp_conflict_lines"].append(msg)
            continue
        if any(p.search(msg) for p in _SNP_ACTIVE_PATTERNS):
            out["sev_snp_lines"].append(msg)
            continue
        m = _AMD_VI_UNKNOWN_RE.search(msg)
        if m:
            out["amd_vi_unknown_options"].append(m.group(1))
            continue
        m = _CMDLINE_LOG_RE.search(msg)
        if m and out["command_line"] is None:
            out["command_line"] = m.group(1).strip()
            continue
        if msg.startswith("NVRM: loading"):
            out["nvrm"] = parse_proc_driver_version(msg.replace("NVRM: loading", "NVRM version:", 1))
    return out


# ---------------------------------------------------------------------------------------------
# CPU, SEV-SNP, virtualisation

_RELEVANT_FLAGS = ("hypervisor", "sev", "sev_es", "sev_snp", "sme", "svm", "vmx")


def parse_cpuinfo(text):
    """Parse ``/proc/cpuinfo`` (first processor block is enough).

    Returns ``{"vendor": "amd" | "intel" | "arm" | "unknown", "vendor_id": str | None,
    "model_name": str | None, "flags": [relevant flags present], "hypervisor": bool,
    "sev_snp_flag": bool}``; ``flags`` lists only ``hypervisor sev sev_es sev_snp sme svm vmx``.
    Source: Linux x86 ``vendor_id : AuthenticAMD|GenuineIntel`` and ``flags : ...`` lines, arm64
    ``CPU implementer : 0x41`` lines.
    """
    out = {"vendor": "unknown", "vendor_id": None, "model_name": None, "flags": [], "hypervisor": False, "sev_snp_flag": False}
    flags = set()
    for line in clean_output(text):
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key = key.strip()
        value = value.strip()
        if key == "vendor_id" and out["vendor_id"] is None:
            out["vendor_id"] = value
        elif key == "model name" and out["model_name"] is None:
            out["model_name"] = value
        elif key in ("flags", "Features") and not flags:
            flags = set(value.split())
        elif key == "CPU implementer" and out["vendor_id"] is None:
            out["vendor_id"] = "arm:" + value
    vid = out["vendor_id"] or ""
    if vid == "AuthenticAMD" or vid == "HygonGenuine":
        out["vendor"] = "amd"
    elif vid == "GenuineIntel":
        out["vendor"] = "intel"
    elif vid.startswith("arm:"):
        out["vendor"] = "arm"
    out["flags"] = [f for f in _RELEVANT_FLAGS if f in flags]
    out["hypervisor"] = "hypervisor" in flags
    out["sev_snp_flag"] = "sev_snp" in flags
    return out


def sev_snp_facts(cpu, kvm_amd_sev_snp, kernel_log):
    """Decide whether SEV-SNP is active on this host, with evidence.

    ``cpu``: :func:`parse_cpuinfo` result; ``kvm_amd_sev_snp``: first line of
    ``/sys/module/kvm_amd/parameters/sev_snp`` (``Y``/``N``/``1``/``0``) or ``None`` when absent;
    ``kernel_log``: :func:`parse_kernel_log` result or ``None``.

    Returns ``{"active": bool, "cpu_flag": bool, "kvm_amd_sev_snp": "Y" | "N" | None,
    "kernel_log": "enabled" | "conflict" | None, "conflict": bool, "evidence": [str]}``.
    ``active`` is true when kvm_amd reports ``Y`` or the kernel log shows SNP initialised with no
    conflict line; the CPU flag alone only says the CPU is capable. ``conflict`` is true when the
    kernel log says SNP cannot be supported (e.g. ``iommu=pt``).
    """
    cpu = cpu or {}
    log = kernel_log or {}
    param = None
    if kvm_amd_sev_snp is not None:
        param = "Y" if kvm_amd_sev_snp.strip() in ("Y", "y", "1") else "N"
    snp_lines = list(log.get("sev_snp_lines") or [])
    conflicts = list(log.get("sev_snp_conflict_lines") or [])
    log_state = "conflict" if conflicts else ("enabled" if snp_lines else None)
    evidence = []
    if cpu.get("sev_snp_flag"):
        evidence.append("/proc/cpuinfo flags: sev_snp")
    if param is not None:
        evidence.append("/sys/module/kvm_amd/parameters/sev_snp: %s" % param)
    evidence.extend(snp_lines)
    evidence.extend(conflicts)
    active = param == "Y" or (log_state == "enabled")
    return {
        "active": bool(active),
        "cpu_flag": bool(cpu.get("sev_snp_flag")),
        "kvm_amd_sev_snp": param,
        "kernel_log": log_state,
        "conflict": bool(conflicts),
        "evidence": evidence,
    }


_HYPERVISOR_VENDORS = (
    ("QEMU", "kvm"), ("KVM", "kvm"), ("Amazon EC2", "kvm"), ("Google", "kvm"), ("OpenStack", "kvm"),
    ("Microsoft Corporation", "hyperv"), ("VMware", "vmware"), ("Xen", "xen"), ("innotek", "virtualbox"),
)


def virtualization_facts(cpu, sys_vendor, product_name, hypervisor_type, nvidia_pci_gpus, smi_modes=None):
    """Decide whether this is a VM with GPUs passed through.

    ``cpu``: :func:`parse_cpuinfo`; ``sys_vendor``/``product_name``: ``/sys/class/dmi/id/*`` first
    lines (or ``None``); ``hypervisor_type``: ``/sys/hypervisor/type`` (``xen``) or ``None``;
    ``nvidia_pci_gpus``: number of NVIDIA GPUs enumerated on PCI; ``smi_modes``: the
    ``Virtualization Mode`` values from ``nvidia-smi -q`` (``None``, ``Pass-Through``, ``VGPU``,
    ``Host VGPU``...).

    Returns ``{"role": "host" | "guest", "hypervisor": "kvm" | "hyperv" | "vmware" | "xen" |
    "virtualbox" | "unknown" | None, "sys_vendor", "product_name", "gpu_passthrough": bool,
    "vgpu": bool, "smi_virtualization_modes": [..], "evidence": [str]}``. ``gpu_passthrough`` is
    true when nvidia-smi says ``Pass-Through``, or when the CPU has the ``hypervisor`` flag and
    NVIDIA GPUs are on the (virtual) PCI bus without vGPU mode.
    """
    cpu = cpu or {}
    modes = [m for m in (smi_modes or []) if m]
    evidence = []
    guest = bool(cpu.get("hypervisor")) or bool(hypervisor_type)
    if cpu.get("hypervisor"):
        evidence.append("/proc/cpuinfo flags: hypervisor")
    hypervisor = None
    for needle, name in _HYPERVISOR_VENDORS:
        if (sys_vendor and needle in sys_vendor) or (product_name and needle in product_name):
            hypervisor = name
            guest = True
            evidence.append("DMI: %s %s" % (sys_vendor or "", product_name or ""))
            break
    if hypervisor_type:
        hypervisor = hypervisor or hypervisor_type.strip()
        evidence.append("/sys/hypervisor/type: %s" % hypervisor_type.strip())
    if guest and hypervisor is None:
        hypervisor = "unknown"
    vgpu = any("VGPU" in m.upper().replace("-", "") and not m.upper().startswith("HOST") for m in modes)
    smi_pt = any(m.replace(" ", "").lower() == "pass-through" for m in modes)
    if smi_pt:
        evidence.append("nvidia-smi -q Virtualization Mode: Pass-Through")
        guest = True
        hypervisor = hypervisor or "unknown"
    passthrough = smi_pt or (guest and (nvidia_pci_gpus or 0) > 0 and not vgpu)
    return {
        "role": "guest" if guest else "host",
        "hypervisor": hypervisor,
        "sys_vendor": sys_vendor,
        "product_name": product_name,
        "gpu_passthrough": bool(passthrough),
        "vgpu": bool(vgpu),
        "smi_virtualization_modes": modes,
        "evidence": evidence,
    }


# ---------------------------------------------------------------------------------------------
# nvidia-uvm module parameters (sysfs)


def nvidia_uvm_facts(sysfs_root="/sys"):
    """The loaded ``nvidia_uvm`` module's HMM setting from ``<sysfs_root>/module/nvidia_uvm``.

    ``parameters/uvm_disable_hmm`` holds ``Y`` or ``N`` (a bool module parameter, NVIDIA open kernel modules
    ``uvm.c``: ``module_param(uvm_disable_hmm, bool, S_IRUGO)``); it is read when the module loads, so a
    ``/etc/modprobe.d`` option takes effect at the next load (reboot or module reload).

    Returns ``{"loaded": bool (the module directory exists), "uvm_disable_hmm": True | False | None (None: not
    loaded, or a driver without the parameter)}``.
    """
    base = os.path.join(sysfs_root, "module", "nvidia_uvm")
    value = first_line(os.path.join(base, "parameters", "uvm_disable_hmm"))
    flag = {"Y": True, "N": False, "1": True, "0": False}.get((value or "").strip().upper())
    return {"loaded": os.path.isdir(base), "uvm_disable_hmm": flag}


# ---------------------------------------------------------------------------------------------
# PCI and IOMMU (sysfs)


def pci_nvidia_devices(sysfs_root="/sys"):
    """Enumerate NVIDIA PCI functions from ``<sysfs_root>/bus/pci/devices`` (vendor ``0x10de``).

    Works without the NVIDIA driver, so a host before driver install still reports its GPUs.
    Returns ``{"gpus": [dev], "nvswitches": [dev], "other": [dev]}`` with
    ``dev = {"pci_bus_id": "0000:17:00.0", "device_id": "0x2bb5", "class": "0x030200",
    "driver": "nvidia" | "vfio-pci" | None, "iommu_group": "23" | None, "numa_node": int | None}``,
    sorted by PCI address. GPUs are classes ``0x0300xx`` (VGA) and ``0x0302xx`` (3D controller),
    NVSwitches ``0x0680xx``; audio and USB functions of a GPU board land in ``other``.
    """
    out = {"gpus": [], "nvswitches": [], "other": []}
    base = os.path.join(sysfs_root, "bus", "pci", "devices")
    for path in sorted(glob.glob(os.path.join(base, "*"))):
        vendor = first_line(os.path.join(path, "vendor"))
        if (vendor or "").lower() != NVIDIA_VENDOR_ID:
            continue
        dev_class = (first_line(os.path.join(path, "class")) or "").lower()
        numa = first_line(os.path.join(path, "numa_node"))
        try:
            numa_node = int(numa) if numa is not None else None
        except ValueError:
            numa_node = None
        dev = {
            "pci_bus_id": normalise_pci_bus_id(os.path.basename(path)) or os.path.basename(path),
            "device_id": (first_line(os.path.join(path, "device")) or "").lower() or None,
            "class": dev_class or None,
            "driver": _link_name(os.path.join(path, "driver")),
            "iommu_group": _link_name(os.path.join(path, "iommu_group")),
            "numa_node": numa_node,
        }
        if dev_class.startswith("0x0300") or dev_class.startswith("0x0302"):
            out["gpus"].append(dev)
        elif dev_class.startswith("0x0680"):
            out["nvswitches"].append(dev)
        else:
            out["other"].append(dev)
    return out


def iommu_groups(sysfs_root="/sys"):
    """Read ``<sysfs_root>/kernel/iommu_groups``: ``{group: {"type": str | None, "devices": [bdf]}}``
    (group numbers as strings, devices in sysfs form, sorted). Empty when the IOMMU is off."""
    groups = {}
    base = os.path.join(sysfs_root, "kernel", "iommu_groups")
    for path in glob.glob(os.path.join(base, "*")):
        name = os.path.basename(path)
        if not os.path.isdir(path):
            continue
        devices = sorted(normalise_pci_bus_id(d) or d for d in os.listdir(os.path.join(path, "devices"))) \
            if os.path.isdir(os.path.join(path, "devices")) else []
        groups[name] = {"type": first_line(os.path.join(path, "type")), "devices": devices}
    return groups


def _domain_from_types(types):
    types = [t for t in types if t]
    if not types:
        return None
    if all(t == "identity" for t in types):
        return "passthrough"
    if all(t in ("DMA", "DMA-FQ") for t in types):
        return "translated"
    return "mixed"


def iommu_facts(sysfs_root, gpu_bus_ids, cmdline_params=None, kernel_log=None, guest=False):
    """Build the ``iommu`` fact.

    ``gpu_bus_ids``: sysfs-form addresses of the GPUs (from nvidia-smi or PCI enumeration);
    ``cmdline_params``: :func:`parse_cmdline` ``params``; ``kernel_log``: :func:`parse_kernel_log`;
    ``guest``: this kernel runs in a VM (:func:`virtualization_facts` ``role == "guest"``).

    No group in ``/sys/kernel/iommu_groups`` and no unit in ``/sys/class/iommu`` means no IOMMU is
    exposed to this kernel. On a host that is the IOMMU off (``off``, source ``sysfs``), whatever the
    kernel log names (the kernel prints ``iommu: Default domain type`` even without IOMMU hardware).
    In a guest it is a VM without a virtual IOMMU, where the GPUs' DMA is translated, if at all, by the
    hypervisor's IOMMU, which this kernel cannot see: the fact then reads what the kernel says, the
    default domain of its log (``kernel_log``), else of its command line (``cmdline``), else ``unknown``,
    with ``enabled`` false, ``present`` false and a ``note`` saying so.

    Returns ``{"enabled": bool, "present": bool (a group or a unit exists), "note": str | None,
    "units": ["ivhd0", ...], "group_count": int,
    "default_domain": "translated" | "passthrough" | "off" | "mixed" | "unknown",
    "default_domain_source": "kernel_log" | "groups" | "cmdline" | "sysfs" | None,
    "tlb_policy": "lazy" | "strict" | None, "cmdline_mode": see :func:`cmdline_iommu_mode`,
    "gpu_groups": [{"pci_bus_id", "group", "type", "devices", "shared"}],
    "gpu_group_types": [sorted unique types]}``. A GPU's group ``type`` is ``DMA``/``DMA-FQ``
    (translated), ``identity`` (passthrough), ``blocked``, ``unmanaged`` (VFIO) or ``None``; a group
    is ``shared`` when it holds devices other than the GPU's own functions.
    """
    groups = iommu_groups(sysfs_root)
    units = sorted(os.listdir(os.path.join(sysfs_root, "class", "iommu"))) if os.path.isdir(os.path.join(sysfs_root, "class", "iommu")) else []
    by_device = {}
    for name, group in groups.items():
        for dev in group["devices"]:
            by_device[dev] = name
    gpu_groups = []
    for bdf in gpu_bus_ids or []:
        group = _link_name(os.path.join(sysfs_root, "bus", "pci", "devices", bdf, "iommu_group")) or by_device.get(bdf)
        info = groups.get(group) if group is not None else None
        devices = info["devices"] if info else []
        gpu_groups.append({
            "pci_bus_id": bdf,
            "group": group,
            "type": info["type"] if info else None,
            "devices": devices,
            "shared": any(d.rsplit(".", 1)[0] != bdf.rsplit(".", 1)[0] for d in devices),
        })
    log = kernel_log or {}
    cmd_mode = cmdline_iommu_mode(cmdline_params)
    domain, source, note = None, None, None
    absent = os.path.isdir(os.path.join(sysfs_root, "kernel", "iommu_groups")) and not groups and not units
    if absent and not guest:
        # no group and no IOMMU unit on a host: translation is off (or absent), whatever default the kernel log
        # names (the kernel prints "Default domain type" even without IOMMU hardware)
        domain, source = "off", "sysfs"
    elif absent:
        domain, source = (log["iommu_default_domain"], "kernel_log") if log.get("iommu_default_domain") else (cmd_mode, "cmdline")
        if domain is None:
            source = None
        note = ("no IOMMU is exposed to this VM (no group in /sys/kernel/iommu_groups, no unit in /sys/class/iommu): the default domain "
                "is what this kernel says (%s); the GPUs' DMA is translated, if at all, by the hypervisor's IOMMU, which the guest cannot see"
                % ("%s, from its %s" % (domain, "log" if source == "kernel_log" else "command line") if domain else "it says none"))
    if domain is None and not absent and log.get("iommu_default_domain"):
        domain, source = log["iommu_default_domain"], "kernel_log"
    if domain is None and not absent:
        domain = _domain_from_types([g["type"] for g in gpu_groups]) or _domain_from_types([g["type"] for g in groups.values()])
        source = "groups" if domain else None
    if domain is None and not absent and cmd_mode:
        domain, source = cmd_mode, "cmdline"
    return {
        "enabled": not absent and domain != "off" and (bool(groups) or bool(units) or domain in ("translated", "passthrough", "mixed")),
        "present": bool(groups) or bool(units),
        "note": note,
        "units": units,
        "group_count": len(groups),
        "default_domain": domain or "unknown",
        "default_domain_source": source,
        "tlb_policy": log.get("iommu_tlb_policy"),
        "cmdline_mode": cmd_mode,
        "gpu_groups": gpu_groups,
        "gpu_group_types": sorted(set(g["type"] for g in gpu_groups if g["type"])),
    }


# ---------------------------------------------------------------------------------------------
# grub defaults (/etc/default/grub + /etc/default/grub.d/*.cfg)

_ASSIGN_RE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
_VAR_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def _shell_value(raw, env):
    """Evaluate the right-hand side of a simple shell assignment: ``"..."`` (with ``$VAR``
    expansion), ``'...'`` (literal) or an unquoted word. Trailing ``# comments`` are dropped."""
    raw = raw.strip()
    out = []
    i = 0
    while i < len(raw):
        char = raw[i]
        if char == '"':
            end = raw.find('"', i + 1)
            end = len(raw) if end < 0 else end
            out.append(_VAR_RE.sub(lambda m: env.get(m.group(1) or m.group(2), ""), raw[i + 1:end]))
            i = end + 1
        elif char == "'":
            end = raw.find("'", i + 1)
            end = len(raw) if end < 0 else end
            out.append(raw[i + 1:end])
            i = end + 1
        elif char.isspace() or char == "#":
            break
        else:
            j = i
            while j < len(raw) and not raw[j].isspace() and raw[j] not in "\"'":
                j += 1
            out.append(_VAR_RE.sub(lambda m: env.get(m.group(1) or m.group(2), ""), raw[i:j]))
            i = j
    return "".join(out)


def parse_grub_defaults(files):
    """Evaluate the simple assignments of grub default files in the order grub-mkconfig sources them.

    ``files``: list of ``(path, text)``; call :func:`grub_default_files` to read them. Only
    ``VAR=value`` lines are evaluated (with ``$VAR`` expansion); other shell is ignored, and a file
    carrying :data:`MANAGED_DROPIN_MARKER` (the drop-in this collection writes) is skipped so the
    result is the base the drop-in edits.

    Returns ``{"files": [paths read], "managed_dropins": [paths], "variables": {VAR: value},
    "cmdline_linux": str, "cmdline_linux_default": str, "set_by": {VAR: path}}`` where
    ``set_by`` names the last file that assigned each variable (e.g. a cloud image's
    ``50-cloudimg-settings.cfg`` overriding ``/etc/default/grub``).
    """
    env = {}
    set_by = {}
    read, managed = [], []
    for path, text in files:
        if text is None:
            continue
        if MANAGED_DROPIN_MARKER in text:
            managed.append(path)
            continue
        read.append(path)
        for line in clean_output(text):
            m = _ASSIGN_RE.match(line)
            if m and not line.lstrip().startswith("#"):
                env[m.group(1)] = _shell_value(m.group(2), env)
                set_by[m.group(1)] = path
    return {
        "files": read,
        "managed_dropins": managed,
        "variables": env,
        "cmdline_linux": env.get("GRUB_CMDLINE_LINUX", ""),
        "cmdline_linux_default": env.get("GRUB_CMDLINE_LINUX_DEFAULT", ""),
        "set_by": set_by,
    }


def grub_default_files(etc_root="/etc"):
    """Return ``[(path, text)]`` for ``<etc_root>/default/grub`` then ``<etc_root>/default/grub.d/*.cfg``
    in alphabetical order (grub-mkconfig's order); missing files are left out."""
    files = []
    main = os.path.join(etc_root, "default", "grub")
    text = read_text(main)
    if text is not None:
        files.append((main, text))
    for path in sorted(glob.glob(os.path.join(etc_root, "default", "grub.d", "*.cfg"))):
        text = read_text(path)
        if text is not None:
            files.append((path, text))
    return files
