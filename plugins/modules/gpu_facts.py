#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_facts
short_description: Gather NVIDIA GPU and GPU-host facts (driver, GPUs, P2P, NVLink, IOMMU, SEV-SNP, virtualization)
version_added: "1.0.0"
description:
  - Runs C(nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,compute_cap,memory.total,uuid --format=csv,noheader,nounits),
    C(nvidia-smi topo -p2p <mode>) for each of O(p2p_modes), C(nvidia-smi topo -m) and (optionally) C(nvidia-smi -q), and reads
    C(/proc/driver/nvidia/version), C(/proc/cmdline), C(/proc/cpuinfo), C(/sys/kernel/iommu_groups), C(/sys/bus/pci/devices),
    C(/sys/module/kvm_amd/parameters/sev_snp), C(/sys/module/nvidia_uvm/parameters/uvm_disable_hmm), C(/sys/module/nouveau),
    C(/sys/class/dmi/id),
    C(/etc/default/grub) with C(/etc/default/grub.d/*.cfg) and the kernel log.
  - Returns everything under C(ansible_facts.llmops_gpu). nvidia-smi failures (binary missing, no driver, no devices,
    NVML driver/library version mismatch, other errors, a timeout) become C(smi_state) values with the first output line
    in C(smi_message); they never fail the module. GPUs are also enumerated from sysfs (PCI vendor 0x10de), so a host
    without a driver still reports its GPU count and PCI addresses.
  - Read-only; runs in check mode exactly as in normal mode.
  - The roots (O(sysfs_root), O(procfs_root), O(etc_root)) and O(kernel_log_file) let tests and the sandbox point the
    module at recorded trees. The collection's roles call it without options and take them from the inventory variable
    C(llmops_gpu_facts_options), passed as C(module_defaults) for the action group C(llmops.sglang.gpu) (see docs/gpu_facts.md).
  - With O(model_dir), it also reads a model directory (the size of the weights, C(config.json)) for preflight's memory and
    disk checks, in the same call.
author:
  - llmops.sglang developers (@llmops)
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
  facts:
    description: Action returns an C(ansible_facts) dictionary that will update existing host facts.
    support: full
options:
  nvidia_smi:
    description:
      - Path of the nvidia-smi binary, or a bare name looked up in E(PATH) (and C(/usr/bin), C(/usr/sbin)).
      - When it cannot be found, C(smi_state) is V(missing) and the other facts are still gathered.
    type: path
    default: nvidia-smi
  sysfs_root:
    description: Directory that stands for C(/sys) (IOMMU groups, PCI devices, kvm_amd parameters, DMI).
    type: path
    default: /sys
  procfs_root:
    description: Directory that stands for C(/proc) (C(cmdline), C(cpuinfo), C(driver/nvidia/version)).
    type: path
    default: /proc
  etc_root:
    description: Directory that stands for C(/etc) (C(default/grub), C(default/grub.d/*.cfg)).
    type: path
    default: /etc
  kernel_log:
    description:
      - Where the kernel log comes from (SEV-SNP lines, IOMMU default domain, boot command line, NVRM line).
      - V(auto) runs C(dmesg) and falls back to C(journalctl -k -b) when dmesg is refused (C(kernel.dmesg_restrict)).
      - V(dmesg) and V(journal) run only that command; V(file) reads O(kernel_log_file); V(none) skips the kernel log.
    type: str
    choices: [auto, dmesg, journal, file, none]
    default: auto
  kernel_log_file:
    description: Kernel log file read when O(kernel_log=file) (required then), for example C(/var/log/kern.log) or a recorded dmesg.
    type: path
  p2p_modes:
    description:
      - C(nvidia-smi topo -p2p) capabilities to gather; V(r) read, V(w) write, V(n) NVLink, V(a) atomics, V(p) PCIe.
      - The P2P decision of the nccl role uses read and write (the default); matrices need not be symmetric.
    type: list
    elements: str
    choices: [r, w, n, a, p]
    default: [r, w]
  topology:
    description: Run C(nvidia-smi topo -m) for the link matrix and NVLink detection.
    type: bool
    default: true
  query_details:
    description: Run C(nvidia-smi -q) for the CUDA version the driver supports, the GPU virtualization mode and the fabric state.
    type: bool
    default: true
  model_dir:
    description:
      - A model directory on the host to read as well (read-only), returned as RV(model_dir), not as a fact
        (preflight passes the server's model path when it is absolute).
      - C(model.safetensors.index.json) C(metadata.total_size), else the sizes of the C(*.safetensors) files, with
        C(config.json) (dtype, quantization) alongside; see C(plugins/module_utils/_gpu/model_dir.py).
    type: path
  timeout:
    description:
      - Seconds each command may run (through coreutils C(timeout) when present); a command that runs out is killed and
        reported (C(smi_state=error) for the GPU query).
    type: int
    default: 30
requirements:
  - nvidia-smi from the NVIDIA driver (optional; without it the facts say C(smi_state=missing)).
notes:
  - Formats parsed are those of nvidia-smi R580 (580.65.06 .. 580.159.04) and Linux 6.8 kernel logs; see
    C(plugins/module_utils/_gpu/nvidia_smi.py) and C(host_facts.py) for the per-format sources.
seealso:
  - name: llmops.sglang GPU facts and host decisions
    description: docs/gpu_facts.md in the collection.
    link: https://example.invalid/llmops/sglang/docs/gpu_facts.md
"""

EXAMPLES = r"""
- name: Gather GPU facts
  llmops.sglang.gpu_facts:

- name: Gather read and write P2P matrices with a short timeout
  llmops.sglang.gpu_facts:
    p2p_modes: [r, w]
    timeout: 10

- name: Read a sandbox host's fixture trees
  llmops.sglang.gpu_facts:
    nvidia_smi: /usr/local/bin/nvidia-smi
    sysfs_root: /srv/fixtures/sys
    procfs_root: /srv/fixtures/proc
    kernel_log: file
    kernel_log_file: /srv/fixtures/dmesg.txt

- name: Read the GPU facts and the size of a downloaded model
  llmops.sglang.gpu_facts:
    model_dir: /models/Qwen3.5-122B-A10B
  register: gpu_read

- name: Show the P2P pairs and the SEV-SNP state
  ansible.builtin.debug:
    msg: "{{ ansible_facts.llmops_gpu.p2p.ok_pairs }} / SNP active: {{ ansible_facts.llmops_gpu.sev_snp.active }}"
"""

RETURN = r"""
model_dir:
  description: What O(model_dir) holds (returned only with it).
  returned: when O(model_dir) is set
  type: dict
  contains:
    path:
      description: The directory read.
      type: str
    exists:
      description: True when it is a directory.
      type: bool
    config_json:
      description: True when C(config.json) is there (the weights are downloaded already).
      type: bool
    weights:
      description:
        - "The size of the weights: bytes (int or null), gib (float, 0 when unknown), source (index, files or null), detail,
          architectures, torch_dtype, quantization (from config.json). Null when a file is not valid (see RV(model_dir.error))."
      type: dict
    error:
      description: Why a file could not be used (an index that is not JSON, a total_size that is not a positive number), else null.
      type: str
      sample: "model.safetensors.index.json metadata.total_size='lots' is not a positive number of bytes"
ansible_facts:
  description: Facts added to the host.
  returned: always
  type: dict
  contains:
    llmops_gpu:
      description: GPU host facts.
      returned: always
      type: dict
      contains:
        smi_state:
          description:
            - Outcome of the nvidia-smi GPU query. V(ok), V(missing) (binary not found), V(no_driver) (cannot communicate
              with the driver), V(no_devices) (C(No devices were found)), V(version_mismatch) (NVML driver/library version
              mismatch, usually a reboot pending after a driver change), V(error) (anything else, including a timeout).
          type: str
          sample: ok
        smi_message:
          description: First line of the nvidia-smi output when the state is not V(ok), else empty.
          type: str
          sample: "Failed to initialize NVML: Driver/library version mismatch; NVML library version: 580.95"
        smi_path:
          description: The nvidia-smi binary used, or null.
          type: str
        nvml_library_version:
          description: NVML library version printed with a version mismatch (the user-space side), else null.
          type: str
          sample: "580.95"
        driver_version:
          description: Driver version from nvidia-smi, else from /proc/driver/nvidia/version, else from the kernel log NVRM line; null when none.
          type: str
          sample: "580.159.04"
        driver_version_source:
          description: V(nvidia-smi), V(procfs), V(kernel_log) or null.
          type: str
        cuda_version:
          description: Highest CUDA version the driver supports (C(nvidia-smi -q) C(CUDA Version), else the plain C(nvidia-smi) banner), or null.
          type: str
          sample: "13.0"
        kernel_module_flavour:
          description: V(open) or V(proprietary) kernel modules, V(unknown) when no source answers.
          type: str
          sample: open
        kernel_module_flavour_source:
          description: V(procfs) (/proc/driver/nvidia/version), V(kernel_log) (NVRM loading line), V(modinfo) (module license) or null.
          type: str
        gpu_count:
          description: Number of GPUs; from nvidia-smi when C(smi_state=ok), else the NVIDIA GPUs enumerated on PCI.
          type: int
          sample: 4
        gpus:
          description:
            - One entry per GPU. From nvidia-smi when it answers, else from PCI (then C(name), C(uuid), C(compute_capability),
              C(memory_total_mib) are null).
          type: list
          elements: dict
          contains:
            index:
              description: "nvidia-smi index (PCI order)"
              type: int
            name:
              description: "Product name"
              type: str
              sample: NVIDIA RTX PRO 6000 Blackwell Server Edition
            pci_bus_id:
              description: "PCI address in sysfs form"
              type: str
              sample: "0000:17:00.0"
            pci_bus_id_smi:
              description: "PCI address as nvidia-smi prints it"
              type: str
              sample: "00000000:17:00.0"
            driver_version:
              description: "Driver version nvidia-smi reports for this GPU"
              type: str
            memory_total_mib:
              description: "Total memory in MiB"
              type: int
              sample: 97887
            compute_capability:
              description: "Compute capability"
              type: str
              sample: "12.0"
            architecture:
              description: "Architecture from the compute capability (Ampere, Ada, Hopper, Blackwell...)"
              type: str
            uuid:
              description: "GPU UUID"
              type: str
            device_id:
              description: "PCI device id from sysfs"
              type: str
              sample: "0x2bb5"
            numa_node:
              description: "NUMA node from sysfs (-1 when none)"
              type: int
            iommu_group:
              description: "IOMMU group number from sysfs"
              type: str
            kernel_driver:
              description: "Driver bound to the PCI function (nvidia, vfio-pci) or null"
              type: str
            source:
              description: "V(nvidia-smi) or V(pci)"
              type: str
        architectures:
          description: Sorted unique GPU architectures.
          type: list
          elements: str
          sample: [Blackwell]
        pci:
          description: NVIDIA PCI functions from sysfs (vendor 0x10de), independent of the driver.
          type: dict
          contains:
            gpu_count:
              description: "NVIDIA GPUs on PCI"
              type: int
            gpus:
              description: "Dicts with pci_bus_id, device_id, class, driver, iommu_group, numa_node"
              type: list
              elements: dict
            nvswitch_count:
              description: "NVSwitches on PCI (fabric manager needed when > 0)"
              type: int
            nvswitches:
              description: "NVSwitch functions"
              type: list
              elements: dict
        p2p:
          description: Peer-to-peer capability from C(nvidia-smi topo -p2p).
          type: dict
          contains:
            modes:
              description: "Modes gathered (r, w...)"
              type: list
              elements: str
            read:
              description:
                - "Matrix for r: {gpus: [int], matrix: [[token]], ok_directed: [[i, j]]}; tokens X OK CNS GNS TNS NS U;
                  matrix[i][j] is GPU i -> GPU j. Null if not gathered."
              type: dict
            write:
              description: "Same for w"
              type: dict
            nvlink:
              description: "Same for n"
              type: dict
            atomics:
              description: "Same for a"
              type: dict
            pcie:
              description: "Same for p"
              type: dict
            ok_pairs:
              description: "Unordered pairs [i, j] (i < j) OK in both directions in every gathered mode."
              type: list
              elements: list
              sample: [[0, 1], [2, 3]]
            errors:
              description: "Per mode, the first output line when topo -p2p failed"
              type: dict
        nvlink:
          description: Link facts from C(nvidia-smi topo -m).
          type: dict
          contains:
            present:
              description: "True when any GPU pair is connected by NVLink (NV<n>)"
              type: bool
            nvlink_pairs:
              description: "[i, j, links] for NVLink-connected pairs"
              type: list
              elements: list
            matrix:
              description: "GPU x GPU link tokens (X, SYS, NODE, PHB, PXB, PIX, NV<n>)"
              type: list
              elements: list
            gpus:
              description: "GPU indices of the matrix rows and columns"
              type: list
              elements: int
            cpu_affinity:
              description: "CPU list per GPU index"
              type: dict
            numa_affinity:
              description: "NUMA node per GPU index"
              type: dict
            error:
              description: "First output line when topo -m failed, else null"
              type: str
        iommu:
          description: IOMMU state.
          type: dict
          contains:
            enabled:
              description: "True when IOMMU groups or units exist and the default domain is not off"
              type: bool
            present:
              description: "True when an IOMMU group or unit is visible to this kernel"
              type: bool
            note:
              description:
                - "In a VM that sees no IOMMU (no group, no unit): says so and where default_domain came from; else null."
                - "On a host the same empty sysfs reads as default_domain off; in a guest default_domain is what the kernel says
                  (its log, else its command line, else unknown), because the hypervisor's IOMMU is invisible to the guest."
              type: str
            default_domain:
              description: "translated, passthrough, off, mixed or unknown"
              type: str
            default_domain_source:
              description: "kernel_log, groups, cmdline or sysfs"
              type: str
            tlb_policy:
              description: "lazy or strict (kernel log), or null"
              type: str
            cmdline_mode:
              description: "Mode the command line asks for (passthrough, translated, off) or null"
              type: str
            units:
              description: "/sys/class/iommu entries (dmar0, ivhd0...)"
              type: list
              elements: str
            group_count:
              description: "Number of IOMMU groups"
              type: int
            gpu_groups:
              description: "Per GPU: pci_bus_id, group, type (DMA, DMA-FQ, identity, blocked, unmanaged), devices, shared."
              type: list
              elements: dict
            gpu_group_types:
              description: "Unique group types of the GPUs"
              type: list
              elements: str
        cmdline:
          description:
            - "Kernel command line: raw (str), tokens (list), params (dict: kernel parameter -> last value, true for flags),
              init_args (tokens after --, handed to init), source (procfs or kernel_log)."
          type: dict
        grub:
          description:
            - "Grub defaults as grub-mkconfig sources them: files, managed_dropins (drop-ins written by this collection, not evaluated),
              cmdline_linux, cmdline_linux_default, set_by (variable -> last file that set it)."
          type: dict
        cpu_vendor:
          description: amd, intel, arm or unknown.
          type: str
        cpu:
          description: "vendor, vendor_id, model_name, flags (relevant flags present: hypervisor sev sev_es sev_snp sme svm vmx), hypervisor, sev_snp_flag."
          type: dict
        nvidia_uvm:
          description:
            - "The loaded nvidia_uvm module (/sys/module/nvidia_uvm): loaded (bool), uvm_disable_hmm (bool from parameters/uvm_disable_hmm
              Y/N, null when the module is not loaded or has no such parameter)."
          type: dict
        nouveau:
          description: "The in-kernel nouveau driver: loaded (bool, C(/sys/module/nouveau) exists; it must not claim the GPUs)."
          type: dict
        sev_snp:
          description:
            - "SEV-SNP state: active (bool), cpu_flag (bool), kvm_amd_sev_snp (Y/N/null), kernel_log (enabled, conflict or null),
              conflict (bool: the kernel says SNP cannot be supported, e.g. with iommu=pt), evidence (lines)."
          type: dict
        virtualization:
          description:
            - "role (host or guest), hypervisor (kvm, hyperv, vmware, xen, virtualbox, unknown or null), sys_vendor, product_name,
              gpu_passthrough (bool), vgpu (bool), smi_virtualization_modes, evidence, vfio_gpus (PCI ids of GPUs bound to vfio-pci,
              i.e. handed to VMs and invisible to nvidia-smi here)."
          type: dict
        kernel_log:
          description: "source (dmesg, journal, file or none), lines (int), error (str or null)."
          type: dict
        warnings:
          description: Things that could not be read (each also emitted as a module warning).
          type: list
          elements: str
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.sglang.plugins.module_utils._gpu import host_facts as hf
from ansible_collections.llmops.sglang.plugins.module_utils._gpu import model_dir as md
from ansible_collections.llmops.sglang.plugins.module_utils._gpu import nvidia_smi as smi

ENV = {"LANG": "C", "LC_ALL": "C", "LANGUAGE": "C"}


class Gatherer(object):
    """Runs the commands and readers of gpu_facts; one instance per module run."""

    def __init__(self, module):
        self.module = module
        self.params = module.params
        self.warnings = []
        self.timeout_bin = module.get_bin_path("timeout")

    def warn(self, msg):
        self.warnings.append(msg)

    def run(self, argv):
        """Run argv with the timeout; returns (rc, out, err, timed_out)."""
        timeout = int(self.params["timeout"])
        cmd = list(argv)
        if self.timeout_bin and timeout > 0:
            cmd = [self.timeout_bin, "--kill-after=5", str(timeout)] + cmd
        rc, out, err = self.module.run_command(cmd, check_rc=False, environ_update=ENV)
        timed_out = bool(self.timeout_bin) and timeout > 0 and rc in (124, 137)
        return rc, out or "", err or "", timed_out

    def proc(self, *parts):
        return os.path.join(self.params["procfs_root"], *parts)

    def sys(self, *parts):
        return os.path.join(self.params["sysfs_root"], *parts)

    def find_smi(self):
        name = self.params["nvidia_smi"] or "nvidia-smi"
        if os.sep in name:
            return name if os.path.isfile(name) and os.access(name, os.X_OK) else None
        return self.module.get_bin_path(name, opt_dirs=["/usr/bin", "/usr/sbin", "/usr/local/bin"])

    def kernel_log(self):
        source = self.params["kernel_log"]
        info = {"source": "none", "lines": 0, "error": None}
        text = None
        if source == "file":
            path = self.params["kernel_log_file"]
            text = hf.read_text(path)
            if text is None:
                info["error"] = "cannot read kernel_log_file %s" % path
            else:
                info["source"] = "file"
        elif source in ("auto", "dmesg", "journal"):
            attempts = []
            if source in ("auto", "dmesg"):
                attempts.append(("dmesg", ["dmesg"]))
            if source in ("auto", "journal"):
                attempts.append(("journal", ["journalctl", "-k", "-b", "--no-pager", "-o", "short-monotonic"]))
            errors = []
            for name, argv in attempts:
                path = self.module.get_bin_path(argv[0], opt_dirs=["/usr/bin", "/bin", "/usr/sbin", "/sbin"])
                if not path:
                    errors.append("%s not found" % argv[0])
                    continue
                rc, out, err, timed_out = self.run([path] + argv[1:])
                # journalctl without access prints only "-- No entries --" / "Hint: ..." lines with rc 0
                content = [line for line in smi.clean_output(out) if not line.startswith(("-- ", "Hint:"))]
                if rc == 0 and content:
                    text, info["source"] = out, name
                    break
                errors.append("%s rc=%s: %s" % (argv[0], rc, "timeout" if timed_out else (smi.clean_output(err or out) or ["no output"])[0].strip()))
            if text is None and errors:
                info["error"] = "; ".join(errors)
        if info["error"]:
            self.warn("kernel log not read (%s): SEV-SNP and IOMMU default domain rely on sysfs only" % info["error"])
        info["lines"] = len(smi.clean_output(text)) if text else 0
        return info, hf.parse_kernel_log(text)

    def gpu_query(self, smi_path, facts):
        if smi_path is None:
            facts["smi_state"] = "missing"
            facts["smi_message"] = "nvidia-smi (%s) not found" % self.params["nvidia_smi"]
            return []
        rc, out, err, timed_out = self.run([smi_path] + list(smi.QUERY_ARGS))
        if timed_out:
            facts["smi_state"] = "error"
            facts["smi_message"] = "nvidia-smi --query-gpu did not answer within %s s (timeout)" % self.params["timeout"]
            return []
        state, message = smi.classify_smi_output(rc, out, err)
        gpus = smi.parse_query_gpu(out) if state == "ok" else []
        if state == "ok" and not gpus:
            state, message = "error", "nvidia-smi exited 0 but no GPU line could be parsed: %s" % (smi.clean_output(out) or [""])[0]
        facts["smi_state"] = state
        facts["smi_message"] = message
        if state == "version_mismatch":
            facts["nvml_library_version"] = smi.parse_nvml_library_version(out + "\n" + err)
        return gpus

    def p2p(self, smi_path):
        out = {"modes": list(self.params["p2p_modes"]), "ok_pairs": [], "errors": {}}
        for mode in smi.P2P_MODES.values():
            out[mode] = None
        for mode in self.params["p2p_modes"]:
            rc, text, err, timed_out = self.run([smi_path, "topo", "-p2p", mode])
            parsed = smi.parse_topo_p2p(text) if rc == 0 else None
            if parsed is None:
                msg = "timeout" if timed_out else ((smi.clean_output(err or text) or ["rc=%s, no output" % rc])[0].strip())
                out["errors"][mode] = msg
                self.warn("nvidia-smi topo -p2p %s gave no matrix: %s" % (mode, msg))
            out[smi.P2P_MODES[mode]] = parsed
        out["ok_pairs"] = smi.p2p_ok_pairs([out[smi.P2P_MODES[m]] for m in self.params["p2p_modes"]])
        return out

    def topology(self, smi_path):
        rc, text, err, timed_out = self.run([smi_path, "topo", "-m"])
        parsed = smi.parse_topo_m(text) if rc == 0 else None
        if parsed is None:
            msg = "timeout" if timed_out else ((smi.clean_output(err or text) or ["rc=%s, no output" % rc])[0].strip())
            self.warn("nvidia-smi topo -m gave no matrix: %s" % msg)
            return {"present": False, "nvlink_pairs": [], "matrix": [], "gpus": [], "cpu_affinity": {}, "numa_affinity": {}, "error": msg}
        parsed["present"] = parsed.pop("nvlink")
        parsed.pop("nics", None)
        parsed["error"] = None
        return parsed

    def details(self, smi_path):
        """nvidia-smi -q; when it fails, the plain nvidia-smi banner still gives the CUDA version."""
        rc, text, err, timed_out = self.run([smi_path, "-q"])
        if rc == 0:
            return smi.parse_smi_report(text)
        self.warn("nvidia-smi -q failed (rc=%s): %s; virtualization mode and fabric state not read"
                  % (rc, "timeout" if timed_out else (smi.clean_output(err or text) or [""])[0]))
        rc, text, err, timed_out = self.run([smi_path])
        if rc != 0:
            return None
        plain = smi.parse_smi_plain(text)
        return {"driver_version": plain["driver_version"], "cuda_version": plain["cuda_version"], "attached_gpus": len(plain["gpus"]),
                "gpus": []}

    def flavour(self, proc_version, log):
        if proc_version["kernel_module_flavour"] != "unknown":
            return proc_version["kernel_module_flavour"], "procfs"
        if log.get("nvrm") and log["nvrm"]["kernel_module_flavour"] != "unknown":
            return log["nvrm"]["kernel_module_flavour"], "kernel_log"
        modinfo = self.module.get_bin_path("modinfo", opt_dirs=["/sbin", "/usr/sbin"])
        if modinfo:
            rc, out, err, timed_out = self.run([modinfo, "-F", "license", "nvidia"])
            if rc == 0:
                flavour = smi.flavour_from_license(out)
                if flavour != "unknown":
                    return flavour, "modinfo"
        return "unknown", None

    def gather(self):
        p = self.params
        facts = {"smi_state": None, "smi_message": "", "smi_path": None, "nvml_library_version": None}
        smi_path = self.find_smi()
        facts["smi_path"] = smi_path
        gpus = self.gpu_query(smi_path, facts)
        smi_ok = facts["smi_state"] == "ok"

        log_info, log = self.kernel_log()
        proc_version = smi.parse_proc_driver_version(hf.read_text(self.proc("driver", "nvidia", "version")))

        report = self.details(smi_path) if smi_ok and p["query_details"] else None
        facts["p2p"] = self.p2p(smi_path) if smi_ok else {"modes": [], "ok_pairs": [], "errors": {}, "read": None, "write": None,
                                                          "nvlink": None, "atomics": None, "pcie": None}
        facts["nvlink"] = self.topology(smi_path) if smi_ok and p["topology"] else {
            "present": False, "nvlink_pairs": [], "matrix": [], "gpus": [], "cpu_affinity": {}, "numa_affinity": {},
            "error": None if smi_ok else "not gathered (smi_state=%s)" % facts["smi_state"]}

        # driver version and flavour
        if smi_ok and gpus[0].get("driver_version"):
            facts["driver_version"], facts["driver_version_source"] = gpus[0]["driver_version"], "nvidia-smi"
        elif proc_version["driver_version"]:
            facts["driver_version"], facts["driver_version_source"] = proc_version["driver_version"], "procfs"
        elif log.get("nvrm") and log["nvrm"]["driver_version"]:
            facts["driver_version"], facts["driver_version_source"] = log["nvrm"]["driver_version"], "kernel_log"
        else:
            facts["driver_version"], facts["driver_version_source"] = None, None
        facts["kernel_module_flavour"], facts["kernel_module_flavour_source"] = self.flavour(proc_version, log)
        facts["cuda_version"] = report["cuda_version"] if report else None

        # PCI enumeration (driver independent) merged into the GPU list
        pci = hf.pci_nvidia_devices(p["sysfs_root"])
        by_bdf = dict((d["pci_bus_id"], d) for d in pci["gpus"])
        if not gpus:
            for idx, dev in enumerate(pci["gpus"]):
                gpus.append({"index": idx, "name": None, "pci_bus_id": dev["pci_bus_id"], "pci_bus_id_smi": None,
                             "driver_version": None, "compute_capability": None, "architecture": "unknown",
                             "memory_total_mib": None, "uuid": None, "source": "pci"})
        else:
            for gpu in gpus:
                gpu["source"] = "nvidia-smi"
        for gpu in gpus:
            dev = by_bdf.get(gpu.get("pci_bus_id")) or {}
            gpu["device_id"] = dev.get("device_id")
            gpu["numa_node"] = dev.get("numa_node")
            gpu["iommu_group"] = dev.get("iommu_group")
            gpu["kernel_driver"] = dev.get("driver")
        facts["gpus"] = gpus
        facts["gpu_count"] = len(gpus)
        facts["architectures"] = sorted(set(g["architecture"] for g in gpus if g.get("architecture") not in (None, "unknown")))
        facts["pci"] = {"gpu_count": len(pci["gpus"]), "gpus": pci["gpus"], "nvswitch_count": len(pci["nvswitches"]),
                        "nvswitches": pci["nvswitches"]}

        # command line, IOMMU, CPU, SEV-SNP, virtualization, grub
        cmdline_text = hf.read_text(self.proc("cmdline"))
        if cmdline_text is not None:
            cmdline = hf.parse_cmdline(cmdline_text)
            cmdline["source"] = "procfs"
        elif log.get("command_line"):
            cmdline = hf.parse_cmdline(log["command_line"])
            cmdline["source"] = "kernel_log"
        else:
            cmdline = {"raw": "", "tokens": [], "params": {}, "init_args": [], "source": None}
            self.warn("no kernel command line (%s missing and none in the kernel log)" % self.proc("cmdline"))
        facts["cmdline"] = cmdline
        cpu = hf.parse_cpuinfo(hf.read_text(self.proc("cpuinfo")))
        facts["cpu"] = cpu
        facts["cpu_vendor"] = cpu["vendor"]
        kvm = hf.read_text(self.sys("module", "kvm_amd", "parameters", "sev_snp"))
        facts["sev_snp"] = hf.sev_snp_facts(cpu, kvm, log)
        modes = [g.get("virtualization_mode") for g in (report or {}).get("gpus", [])]
        facts["virtualization"] = hf.virtualization_facts(
            cpu, hf.first_line(self.sys("class", "dmi", "id", "sys_vendor")), hf.first_line(self.sys("class", "dmi", "id", "product_name")),
            hf.first_line(self.sys("hypervisor", "type")), len(pci["gpus"]) or (len(gpus) if smi_ok else 0), modes)
        facts["nvidia_uvm"] = hf.nvidia_uvm_facts(p["sysfs_root"])
        facts["nouveau"] = {"loaded": os.path.isdir(self.sys("module", "nouveau"))}
        # the IOMMU fact reads the virtualization role: a VM without a virtual IOMMU is not a host with the IOMMU off
        facts["iommu"] = hf.iommu_facts(p["sysfs_root"], [g["pci_bus_id"] for g in gpus if g.get("pci_bus_id")], cmdline["params"], log,
                                        guest=facts["virtualization"]["role"] == "guest")
        # GPUs bound to vfio-pci are handed to VMs: nvidia-smi on this host does not see them
        facts["virtualization"]["vfio_gpus"] = [d["pci_bus_id"] for d in pci["gpus"] if d["driver"] == "vfio-pci"]
        grub = hf.parse_grub_defaults(hf.grub_default_files(p["etc_root"]))
        grub.pop("variables", None)
        facts["grub"] = grub
        log_info["amd_vi_unknown_options"] = log["amd_vi_unknown_options"]
        log_info["sev_snp_conflict_lines"] = log["sev_snp_conflict_lines"]
        facts["kernel_log"] = log_info
        if facts["smi_state"] != "ok":
            self.warn("nvidia-smi state %s: %s" % (facts["smi_state"], facts["smi_message"]))
        facts["warnings"] = list(self.warnings)
        return facts


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nvidia_smi=dict(type="path", default="nvidia-smi"),
            sysfs_root=dict(type="path", default="/sys"),
            procfs_root=dict(type="path", default="/proc"),
            etc_root=dict(type="path", default="/etc"),
            kernel_log=dict(type="str", default="auto", choices=["auto", "dmesg", "journal", "file", "none"]),
            kernel_log_file=dict(type="path"),
            p2p_modes=dict(type="list", elements="str", default=["r", "w"], choices=["r", "w", "n", "a", "p"]),
            topology=dict(type="bool", default=True),
            query_details=dict(type="bool", default=True),
            model_dir=dict(type="path"),
            timeout=dict(type="int", default=30),
        ),
        required_if=[("kernel_log", "file", ["kernel_log_file"])],
        supports_check_mode=True,
    )
    if module.params["timeout"] < 1:
        module.fail_json(msg="timeout=%s: it must be at least 1 second; set timeout to e.g. 30" % module.params["timeout"])
    gatherer = Gatherer(module)
    facts = gatherer.gather()
    for warning in gatherer.warnings:
        module.warn(warning)
    extra = {"model_dir": md.read_model_dir(module.params["model_dir"])} if module.params["model_dir"] else {}
    module.exit_json(changed=False, ansible_facts={"llmops_gpu": facts}, **extra)


if __name__ == "__main__":
    main()
