# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""Preflight's checks of one host against the deployment, before any change (action ``llmops.sglang.preflight_check``).

:func:`host_checks` takes the facts (``ansible_facts.llmops_gpu`` of gpu_facts, the OS facts, the mounts), the
deployment's values (:data:`VALUES`: the preflight role's variables and the host roles' settings) and the model
directory read by gpu_facts (``model_dir``), and returns every problem and note at once, with the report preflight
prints. Each problem names the variable, the value, the reason and the fix (``"<variable>=<value>: <reason>. Fix:
<fix>"``, or a refusal of :mod:`.policy`, ``"Refusing <variable>=<value>: ..."``). The rules:

- the OS is in :data:`.policy.SUPPORTED_OS_TABLE`;
- the GPUs of this node (nvidia-smi's count, else the NVIDIA GPUs on the PCI bus before a driver) >= tp / nnodes
  (SGLang's ``--tp-size`` is the total over all nodes);
- every refusal of :func:`.policy.host_decisions` (SEV-SNP with passthrough, proprietary modules on Blackwell, ...)
  and a reboot of the control node (:func:`.policy.reboot_decision`) for ``nvidia_driver_reboot_allowed`` and
  ``iommu_reboot_allowed``;
- the driver against the CUDA floor of the image (:data:`.policy.CUDA_DRIVER_FLOORS`), a note when the host stage
  installs it;
- the GPU architectures against the image's CUDA (:data:`.policy.CUDA_BY_ARCHITECTURE`);
- the weights per GPU (the target's, plus a separate draft model's: :func:`draft_weights`) times the overhead factor
  against the smallest GPU's memory times mem_fraction_static;
- free disk for the weights (longest mount prefix of the weights' directory) unless they are downloaded already.

Weights (GiB, 2**30 bytes): ``preflight_model_size_gib``, else ``params_billion x 1e9 x bytes_per_param``, else the model
directory's ``model.safetensors.index.json`` / ``*.safetensors`` sizes (``module_utils/_gpu/model_dir.py``). Numbers are
rounded to 0.1 in the messages. Pure Python; never raises for a host problem (only for values of the wrong type, which
the variable check refuses first).
"""
from __future__ import annotations

from ansible_collections.llmops.sglang.plugins.plugin_utils._host import policy as pp

GIB = 1073741824.0

#: The values :func:`host_checks` reads (``values`` keys: the variables themselves), each with its value when the
#: variable is not set: None means the role's own default (the preflight role's defaults are always in scope where the
#: action runs), else the host role's default (meta/argument_specs.yml of nvidia_driver, iommu, nccl).
VALUES = (
    "preflight_tp_size", "preflight_nnodes", "preflight_image_cuda_version", "preflight_driver_managed",
    "preflight_model_params_billion", "preflight_model_bytes_per_param", "preflight_model_size_gib", "preflight_model_metadata",
    "preflight_memory_overhead_factor", "preflight_mem_fraction_static", "preflight_model_path", "preflight_weights_dir",
    "preflight_disk_check", "preflight_disk_reserve_gib", "preflight_draft_model_size_gib",
    "sglang_server_image", "sglang_server_speculative_algorithm", "sglang_server_speculative_draft_model_path",
    "nvidia_driver_branch", "nvidia_driver_flavour", "nvidia_driver_flavour_force",
    "nvidia_driver_reboot_allowed", "iommu_mode", "iommu_force", "iommu_runtime_identity", "iommu_reboot_allowed",
    "nccl_p2p", "nccl_p2p_force", "nccl_gpu_indices",
)


def _bool(value):
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("1", "true", "yes", "on", "y", "t")


def _num(value):
    """float(value), 0.0 for None or ''."""
    return float(value) if value not in (None, "") else 0.0


def _r1(value):
    """A number as the messages print it: rounded to 0.1 (``62.5``, ``300.0``)."""
    return round(float(value), 1)


def _text(value):
    """A value as Jinja's ``~`` writes it (``str``)."""
    return "%s" % (value,)


def weights(values, model_dir=None):
    """The size of the weights and where it comes from.

    Returns ``(gib, source)``: the typed ``preflight_model_size_gib`` wins, then ``preflight_model_params_billion`` x
    ``preflight_model_bytes_per_param``, then (``preflight_model_metadata`` and an absolute ``preflight_model_path``)
    gpu_facts' ``model_dir.weights``; ``(0.0, ...)`` when none says.
    """
    size = _num(values.get("preflight_model_size_gib"))
    params = _num(values.get("preflight_model_params_billion"))
    if size > 0:
        return size, "preflight_model_size_gib=%s" % _text(values.get("preflight_model_size_gib"))
    if params > 0:
        gib = params * 1e9 * _num(values.get("preflight_model_bytes_per_param")) / GIB
        return gib, "preflight_model_params_billion=%s (x %s bytes/param)" % (
            _text(values.get("preflight_model_params_billion")), _text(values.get("preflight_model_bytes_per_param")))
    meta = model_meta(values, model_dir) or {}
    return float(meta.get("gib") or 0), "the model directory %s (%s)" % (values.get("preflight_model_path"), meta.get("detail") or "no metadata")


def draft_weights(values):
    """The separate draft model's weights in the memory estimate (issue 21, a pitfall operators report: SGLang's
    ``mem_fraction_static`` pool holds the target's weights, the draft's weights and both KV caches, so a draft left out
    of the estimate passes preflight and runs out of memory, or starves the KV cache, at start).

    A draft is separate when speculation is on (``sglang_server_speculative_algorithm``), it is not NEXTN, and
    ``sglang_server_speculative_draft_model_path`` names another model than ``preflight_model_path`` (EAGLE/EAGLE3 heads,
    a STANDALONE small model). NEXTN, and EAGLE without a draft path, draft with the MTP layers inside the target's
    weights, already counted. Returns ``(gib, notes)``: ``preflight_draft_model_size_gib`` (GiB, 0 when unknown or not
    separate) and the notes saying what was counted or what is missing (list of str)."""
    algorithm = str(values.get("sglang_server_speculative_algorithm") or "").upper()
    draft = str(values.get("sglang_server_speculative_draft_model_path") or "")
    if algorithm in ("", "NONE", "OFF", "NGRAM", "NEXTN") or not draft or draft == str(values.get("preflight_model_path") or ""):
        return 0.0, []
    size = _num(values.get("preflight_draft_model_size_gib"))
    if size <= 0:
        return 0.0, ["memory: the draft model %s (%s) is not in the estimate; set preflight_draft_model_size_gib (GiB of its "
                     "weights) to count it. Its KV cache comes out of the same mem_fraction_static pool, so the target's KV "
                     "cache is smaller than without speculation" % (draft, algorithm)]
    return size, ["memory: the draft model %s (%s) adds preflight_draft_model_size_gib=%s GiB to the weights; its KV cache "
                  "comes out of the same mem_fraction_static pool" % (draft, algorithm, _text(values.get("preflight_draft_model_size_gib")))]


def uses_model_dir(values):
    """Does the size come from the model directory? ``preflight_model_metadata`` on, an absolute ``preflight_model_path``,
    and neither ``preflight_model_size_gib`` nor ``preflight_model_params_billion`` typed (a typed value wins)."""
    return (_bool(values.get("preflight_model_metadata")) and str(values.get("preflight_model_path") or "").startswith("/")
            and _num(values.get("preflight_model_size_gib")) == 0 and _num(values.get("preflight_model_params_billion")) == 0)


def model_meta(values, model_dir):
    """gpu_facts' ``model_dir.weights`` when preflight uses it (:func:`uses_model_dir`), else None."""
    return ((model_dir or {}).get("weights") or None) if uses_model_dir(values) else None


def _mount_for(path, mounts):
    """The mount (``ansible_facts.mounts`` entry) holding ``path``: the longest mount point that is a prefix of it."""
    parts = str(path).strip("/").split("/")
    parents = ["/"] + ["/" + "/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    inside = sorted((m for m in (mounts or []) if m.get("mount") in parents), key=lambda m: m["mount"])
    return inside[-1] if inside else {"mount": "/", "size_available": 0}


def host_checks(host, facts, os_facts, values, model_dir=None, mounts=None, connection="ssh", addresses=None, machine_id=None):
    """Every check of one host against the deployment.

    :param host: the inventory name (messages).
    :param facts: ``ansible_facts.llmops_gpu`` (gpu_facts).
    :param os_facts: ``{"distribution", "distribution_version", "distribution_major_version"}`` (Ansible facts).
    :param values: the deployment's values (:data:`VALUES`), already checked for type by the variable check.
    :param model_dir: gpu_facts' ``model_dir`` result (``{path, exists, config_json, weights, error}``) or None.
    :param mounts: ``ansible_facts.mounts`` (list of ``{mount, size_available}``).
    :param connection: ``ansible_connection``; ``addresses``, ``machine_id``: the target's facts, for the control node.
    :returns: ``{"problems": [str], "notes": [str], "report": {host, os, gpus, driver, deployment, sev_snp, iommu,
        driver_flavour, nccl_p2p, notes, problems}, "decisions": host_decisions' decisions}``.
    """
    v = values
    gpu = facts or {}
    smi_state = gpu.get("smi_state")
    pci_count = (gpu.get("pci") or {}).get("gpu_count", 0)
    problems, notes = [], []
    tp_size, nnodes = v.get("preflight_tp_size"), v.get("preflight_nnodes")
    tp_per_node = int(tp_size) // int(nnodes)
    gpus_seen = gpu.get("gpu_count") if smi_state == "ok" else (pci_count or 0)
    cuda = _text(v.get("preflight_image_cuda_version"))
    weights_gib, weights_source = weights(v, model_dir)

    distribution, major = os_facts.get("distribution"), os_facts.get("distribution_major_version")
    os_check = pp.os_support(distribution, major)
    if not os_check["supported"]:
        problems.append("ansible_facts.distribution=%s %s: %s. Fix: use one of those releases, or remove the host from gpu_hosts."
                        % (distribution, os_facts.get("distribution_version"), os_check["reason"]))

    if int(gpus_seen or 0) < tp_per_node:
        problems.append("sglang_server_tp_size=%s over sglang_server_nnodes=%s needs %d GPU(s) on each node, but %s has %s (nvidia-smi "
                        "state %s, %s NVIDIA GPU(s) on the PCI bus). Fix: lower sglang_server_tp_size, raise sglang_server_nnodes, or "
                        "run on a host with more GPUs." % (_text(tp_size), _text(nnodes), tp_per_node, host, gpus_seen, smi_state, pci_count))

    settings = {
        "iommu_mode": v.get("iommu_mode"), "iommu_force": _bool(v.get("iommu_force")),
        "iommu_runtime_identity": _bool(v.get("iommu_runtime_identity")),
        "nvidia_driver_flavour": v.get("nvidia_driver_flavour"), "nvidia_driver_flavour_force": _bool(v.get("nvidia_driver_flavour_force")),
        "nccl_p2p": v.get("nccl_p2p"), "nccl_p2p_force": _bool(v.get("nccl_p2p_force")), "tp": tp_per_node,
        "gpus": list(v.get("nccl_gpu_indices")) if v.get("nccl_gpu_indices") else None, "image_cuda_version": cuda,
    }
    if settings["iommu_mode"] != "unmanaged":
        settings.update(distribution=distribution, distribution_major_version=major)
    decisions = pp.host_decisions(gpu, settings)
    problems.extend(r["message"] for r in decisions["refusals"])
    found = decisions["decisions"]

    for variable in ("nvidia_driver_reboot_allowed", "iommu_reboot_allowed"):
        try:
            pp.reboot_decision(True, _bool(v.get(variable)), connection, variable, addresses, machine_id)
        except pp.PolicyRefusal as exc:
            problems.append(exc.message)

    driver = found["driver_upgrade"]
    if driver["upgrade"] and not _bool(v.get("preflight_driver_managed")):
        problems.append("preflight_image_cuda_version=%s: %s, and preflight_driver_managed is false so nothing will install it. Fix: set "
                        "preflight_driver_managed=true and run the host stage (llmops.sglang.nvidia_driver), or install driver >= %s "
                        "yourself." % (cuda, driver["reason"], driver["floor"]))
    if driver["upgrade"] and _bool(v.get("preflight_driver_managed")):
        notes.append("driver: %s -> will be installed/upgraded by llmops.sglang.nvidia_driver (branch %s)"
                     % (driver["reason"], _text(v.get("nvidia_driver_branch"))))
    else:
        notes.append("driver: %s" % driver["reason"])

    architectures = gpu.get("architectures") or []
    for arch in architectures:
        broken = pp.cuda_architecture_support(arch, cuda)
        if broken:
            bound = broken.get("min") or broken.get("max")
            problems.append("preflight_image_cuda_version=%s (from sglang_server_image %s): %s GPUs need CUDA %s (the image has no kernels "
                            "for them). Fix: use an SGLang image built for CUDA %s%s."
                            % (cuda, v.get("sglang_server_image") or "unset", arch, (">= " if "min" in broken else "<= ") + bound, bound,
                               " or newer (e.g. a -cu130 tag)" if "min" in broken else " or older"))
    if not architectures:
        notes.append("architecture check deferred: no GPU architecture known before the driver answers (nvidia-smi state %s); "
                     "nvidia_driver verifies the GPUs after installing" % smi_state)

    if (model_dir or {}).get("error") and uses_model_dir(v):
        problems.append("preflight_model_path=%s: model directory metadata: %s. Fix: repair or re-download the model, or set "
                        "preflight_model_size_gib (GiB of weights) so preflight does not read it" % (v.get("preflight_model_path"), model_dir["error"]))

    memories = [g.get("memory_total_mib") for g in gpu.get("gpus") or [] if isinstance(g.get("memory_total_mib"), (int, float))]
    draft_gib, draft_notes = draft_weights(v)
    if weights_gib > 0 and memories:
        gpu_mem_gib = min(memories) / 1024.0
        overhead, fraction = v.get("preflight_memory_overhead_factor"), v.get("preflight_mem_fraction_static")
        # SGLang's draft worker runs with the target's tensor parallel size: its weights split over the same GPUs
        need = (weights_gib + draft_gib) / int(tp_size) * float(overhead)
        have = gpu_mem_gib * float(fraction)
        with_draft = " plus %s GiB of draft model" % _r1(draft_gib) if draft_gib else ""
        if need > have:
            problems.append("%s says %s GiB of weights%s: %s GiB per GPU with tp %s and overhead x%s, but the smallest GPU has %s GiB x "
                            "mem_fraction_static %s = %s GiB. Fix: raise sglang_server_tp_size, use lower-precision weights (FP8), or raise "
                            "sglang_server_mem_fraction_static." % (weights_source, _r1(weights_gib), with_draft, _r1(need), _text(tp_size),
                                                                    _text(overhead), _r1(gpu_mem_gib), _text(fraction), _r1(have)))
        notes.append("memory: %s GiB of weights per GPU needed (x%s), %s GiB available (%s GiB x %s); weights from %s%s"
                     % (_r1(need), _text(overhead), _r1(have), _r1(gpu_mem_gib), _text(fraction), weights_source, with_draft))
    else:
        notes.append("memory check skipped: " + (
            "no model-size estimate (no model.safetensors.index.json or *.safetensors readable in %s on the host; set preflight_model_size_gib "
            "or preflight_model_params_billion)" % v.get("preflight_model_path") if weights_gib == 0 else "GPU memory unknown before the driver answers"))
    notes.extend(draft_notes)

    model_path = str(v.get("preflight_model_path") or "")
    downloaded = model_path.startswith("/") and bool((model_dir or {}).get("config_json"))
    if _bool(v.get("preflight_disk_check")) and weights_gib > 0 and not downloaded:
        disk_dir = model_path if model_path.startswith("/") else v.get("preflight_weights_dir")
        mount = _mount_for(disk_dir, mounts)
        free = float(mount.get("size_available") or 0) / GIB
        reserve = v.get("preflight_disk_reserve_gib")
        if free < weights_gib + float(reserve):
            shown = (disk_dir, _r1(free), mount["mount"], _r1(weights_gib), _text(reserve))
            problems.append("preflight_weights_dir=%s: %s GiB free on %s, but the weights need %s GiB plus %s GiB reserve "
                            "(preflight_disk_reserve_gib). Fix: free space there, point sglang_server_hf_cache_dir (or sglang_server_model_path) "
                            "at a bigger filesystem, or lower preflight_disk_reserve_gib." % shown)
        notes.append("disk: %s GiB free on %s for %s GiB of weights in %s" % (_r1(free), mount["mount"], _r1(weights_gib), disk_dir))

    names = []
    for g in gpu.get("gpus") or []:
        if g.get("name") and g["name"] not in names:
            names.append(g["name"])
    nccl = found.get("nccl")
    report = {
        "host": host,
        "os": "%s %s" % (distribution, os_facts.get("distribution_version")),
        "gpus": "%s x %s (%s)" % (gpus_seen, ", ".join(names) or "unknown model", ", ".join(architectures) or "architecture unknown"),
        "driver": "%s (%s), nvidia-smi %s" % (gpu.get("driver_version") or "none", gpu.get("kernel_module_flavour", "unknown"), smi_state),
        "deployment": "tp %s over %s node(s) = %d GPU(s) here, image CUDA %s" % (_text(tp_size), _text(nnodes), tp_per_node, cuda),
        "sev_snp": bool((gpu.get("sev_snp") or {}).get("active", False)),
        "iommu": (found.get("iommu") or {}).get("reason", "refused"),
        "driver_flavour": (found.get("driver_flavour") or {}).get("reason", "refused"),
        "nccl_p2p": ("%s: %s" % (nccl["p2p"], nccl["reason"])) if nccl else "refused",
        "notes": notes,
        "problems": problems,
    }
    return {"problems": problems, "notes": notes, "report": report, "decisions": found}
