"""Preflight's host checks (plugins/plugin_utils/_host/preflight.py), pure: recorded facts in, problems and notes out.

Numbers are worked out by hand in the comments (GiB = 2**30 bytes). The role-level tests (tests/unit/roles/
test_role_rendering.py) run the same checks through the action plugin with the role's defaults."""
from __future__ import annotations

from ansible_collections.llmops.sglang.plugins.plugin_utils._host import policy
from ansible_collections.llmops.sglang.plugins.plugin_utils._host import preflight

# 4x RTX PRO 6000 Blackwell (97887 MiB), AMD SEV-SNP, translated IOMMU, P2P OK only within 0-1 and 2-3
REF = {"smi_state": "ok", "driver_version": "580.95.05", "kernel_module_flavour": "open", "gpu_count": 4,
       "gpus": [{"index": i, "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "memory_total_mib": 97887,
                 "compute_capability": "12.0", "architecture": "Blackwell"} for i in range(4)],
       "architectures": ["Blackwell"], "pci": {"gpu_count": 4}, "cpu_vendor": "amd",
       "p2p": {"read": {"gpus": [0, 1, 2, 3],
                        "matrix": [["X", "OK", "CNS", "CNS"], ["OK", "X", "CNS", "CNS"], ["CNS", "CNS", "X", "OK"], ["CNS", "CNS", "OK", "X"]],
                        "ok_directed": [[0, 1], [1, 0], [2, 3], [3, 2]]}},
       "iommu": {"default_domain": "translated", "gpu_group_types": ["DMA"]},
       "sev_snp": {"active": True, "evidence": ["kvm_amd: SEV-SNP enabled"]}, "virtualization": {"role": "host"}}
UBUNTU = {"distribution": "Ubuntu", "distribution_version": "24.04", "distribution_major_version": "24"}
MOUNTS = [{"mount": "/", "size_available": 500 * 1073741824}, {"mount": "/var/lib", "size_available": 300 * 1073741824},
          {"mount": "/var/lib/sglang-other", "size_available": 1}]
VALUES = {"preflight_tp_size": 4, "preflight_nnodes": 1, "preflight_image_cuda_version": "13.0", "preflight_driver_managed": True,
          "preflight_model_params_billion": 122, "preflight_model_bytes_per_param": 2, "preflight_model_size_gib": 0,
          "preflight_model_metadata": True, "preflight_memory_overhead_factor": 1.1, "preflight_mem_fraction_static": 0.85,
          "preflight_model_path": "Qwen/Qwen3.5-122B-A10B", "preflight_weights_dir": "/var/lib/sglang/huggingface",
          "preflight_disk_check": True, "preflight_disk_reserve_gib": 20, "sglang_server_image": "lmsysorg/sglang:v0.5.9-cu130-runtime",
          "nvidia_driver_branch": "580", "nvidia_driver_flavour": "open", "nvidia_driver_flavour_force": False,
          "nvidia_driver_reboot_allowed": False, "iommu_mode": "auto", "iommu_force": False, "iommu_runtime_identity": False,
          "iommu_reboot_allowed": False, "nccl_p2p": "auto", "nccl_p2p_force": False, "nccl_gpu_indices": []}


def check(facts=None, os_facts=None, mounts=None, model_dir=None, connection="ssh", **changes):
    return preflight.host_checks("gpu-1", facts or REF, os_facts or UBUNTU, dict(VALUES, **changes), model_dir=model_dir,
                                 mounts=MOUNTS if mounts is None else mounts, connection=connection)


def test_reference_deployment_passes_with_its_numbers():
    out = check()
    assert out["problems"] == []
    # 122e9 x 2 B / 2^30 = 227.24 GiB; / tp 4 x 1.1 = 62.49 GiB per GPU; 97887 MiB / 1024 = 95.59 GiB x 0.85 = 81.25 GiB
    assert out["notes"] == [
        "driver: driver 580.95.05 >= 580.65.06, the minimum for CUDA 13.0",
        "memory: 62.5 GiB of weights per GPU needed (x1.1), 81.3 GiB available (95.6 GiB x 0.85); weights from "
        "preflight_model_params_billion=122 (x 2 bytes/param)",
        # /var/lib is the longest mount prefix of /var/lib/sglang/huggingface (/var/lib/sglang-other is not a parent)
        "disk: 300.0 GiB free on /var/lib for 227.2 GiB of weights in /var/lib/sglang/huggingface"]
    assert out["report"]["gpus"] == "4 x NVIDIA RTX PRO 6000 Blackwell Server Edition (Blackwell)"
    assert out["report"]["driver"] == "580.95.05 (open), nvidia-smi ok"
    assert out["report"]["deployment"] == "tp 4 over 1 node(s) = 4 GPU(s) here, image CUDA 13.0"
    assert out["report"]["sev_snp"] is True and out["report"]["nccl_p2p"].startswith("disabled: SEV-SNP is active")


def test_every_problem_at_once_in_order():
    out = check(os_facts={"distribution": "Ubuntu", "distribution_version": "20.04", "distribution_major_version": "20"},
                preflight_tp_size=8, preflight_image_cuda_version="12.4", sglang_server_image="lmsysorg/sglang:v0.4.6-cu124",
                iommu_mode="passthrough", nvidia_driver_flavour="proprietary", preflight_driver_managed=False,
                nvidia_driver_reboot_allowed=True, connection="local", mounts=[{"mount": "/var/lib", "size_available": 100 * 1073741824}])
    heads = [p.split(":")[0] for p in out["problems"]]
    assert heads == ["ansible_facts.distribution=Ubuntu 20.04",
                     "sglang_server_tp_size=8 over sglang_server_nnodes=1 needs 8 GPU(s) on each node, but gpu-1 has 4 (nvidia-smi state ok, "
                     "4 NVIDIA GPU(s) on the PCI bus). Fix",
                     "Refusing iommu_mode='passthrough'", "Refusing nvidia_driver_flavour='proprietary'",
                     "Refusing ansible_facts.distribution='Ubuntu 20'", "Refusing nvidia_driver_reboot_allowed=True",
                     "preflight_image_cuda_version=12.4 (from sglang_server_image lmsysorg/sglang", "preflight_weights_dir=/var/lib/sglang/huggingface"]
    # CUDA 12.4 has no recorded driver floor: no driver problem; Blackwell needs >= 12.8
    assert "Blackwell GPUs need CUDA >= 12.8 (the image has no kernels for them). Fix: use an SGLang image built for CUDA 12.8 or newer" in out["problems"][6]
    # 227.2 GiB / 8 x 1.1 = 31.2 GiB per GPU fits; the disk does not: 100 GiB < 227.2 + 20
    assert out["problems"][7].startswith("preflight_weights_dir=/var/lib/sglang/huggingface: 100.0 GiB free on /var/lib, but the weights "
                                         "need 227.2 GiB plus 20 GiB reserve")


def test_driver_missing_unmanaged_and_managed():
    bare = {"smi_state": "missing", "driver_version": None, "gpu_count": 0, "gpus": [], "architectures": [], "pci": {"gpu_count": 8}}
    out = check(facts=bare, preflight_tp_size=8, preflight_driver_managed=False, preflight_disk_check=False)
    assert out["problems"] == ["preflight_image_cuda_version=13.0: no NVIDIA driver answers; CUDA 13.0 needs >= 580.65.06, and "
                               "preflight_driver_managed is false so nothing will install it. Fix: set preflight_driver_managed=true and run "
                               "the host stage (llmops.sglang.nvidia_driver), or install driver >= 580.65.06 yourself."]
    out = check(facts=bare, preflight_tp_size=8, preflight_disk_check=False)
    assert out["problems"] == []
    assert out["notes"][:3] == [
        "driver: no NVIDIA driver answers; CUDA 13.0 needs >= 580.65.06 -> will be installed/upgraded by llmops.sglang.nvidia_driver (branch 580)",
        "architecture check deferred: no GPU architecture known before the driver answers (nvidia-smi state missing); nvidia_driver "
        "verifies the GPUs after installing",
        "memory check skipped: GPU memory unknown before the driver answers"]
    assert out["report"]["gpus"] == "8 x unknown model (architecture unknown)" and out["report"]["driver"] == "none (unknown), nvidia-smi missing"


def test_model_directory_size_and_downloaded_weights():
    # a typed size wins over the directory; with none typed the directory's weights are used and config.json skips the disk check
    read = {"path": "/models/q", "exists": True, "config_json": True, "error": None,
            "weights": {"gib": 232.831, "detail": "model.safetensors.index.json metadata.total_size = 250000000000 bytes over 2 shard(s)"}}
    out = check(model_dir=read, preflight_model_params_billion=0, preflight_model_path="/models/q")
    # 232.831 / 4 x 1.1 = 64.03 GiB per GPU
    assert out["notes"][1].startswith("memory: 64.0 GiB of weights per GPU needed (x1.1)")
    assert out["notes"][1].endswith("weights from the model directory /models/q (model.safetensors.index.json metadata.total_size = "
                                    "250000000000 bytes over 2 shard(s))")
    assert len(out["notes"]) == 2 and out["problems"] == []      # no disk note: config.json says the weights are there
    broken = dict(read, weights=None, error="model.safetensors.index.json is not valid JSON: x")
    out = check(model_dir=broken, preflight_model_params_billion=0, preflight_model_path="/models/q")
    assert out["problems"] == ["preflight_model_path=/models/q: model directory metadata: model.safetensors.index.json is not valid JSON: "
                               "x. Fix: repair or re-download the model, or set preflight_model_size_gib (GiB of weights) so preflight "
                               "does not read it"]
    # a typed parameter count: the directory (even a broken one) is not used
    assert check(model_dir=broken, preflight_model_path="/models/q", preflight_disk_check=False)["problems"] == []


def test_cuda_tables():
    # one floor table: the branch a CUDA version's floor lies in
    assert [policy.cuda_driver_branch_floor(v) for v in ("12.8", "12.9", "13.0", "13.2", "12.4")] == [570, 575, 580, 580, None]
    assert policy.cuda_architecture_support("Blackwell", "12.4") == {"min": "12.8"}
    assert policy.cuda_architecture_support("Blackwell", "12.10") is None          # 12.10 > 12.8 numerically
    assert policy.cuda_architecture_support("Volta", "13.0") == {"max": "12.9"}
    assert policy.cuda_architecture_support("Hopper", "13.0") is None


def test_a_separate_draft_models_weights_count_in_the_memory_check():
    # EAGLE3 with a 2.5 GiB draft: (227.24 + 2.5) / tp 4 x 1.1 = 63.18 GiB per GPU (62.49 without it); 81.25 available
    out = check(sglang_server_speculative_algorithm="EAGLE3", sglang_server_speculative_draft_model_path="org/eagle3-head",
                preflight_draft_model_size_gib=2.5)
    assert out["problems"] == []
    assert "memory: 63.2 GiB of weights per GPU needed (x1.1), 81.3 GiB available (95.6 GiB x 0.85); weights from " \
           "preflight_model_params_billion=122 (x 2 bytes/param) plus 2.5 GiB of draft model" in out["notes"]
    assert "memory: the draft model org/eagle3-head (EAGLE3) adds preflight_draft_model_size_gib=2.5 GiB to the weights; its " \
           "KV cache comes out of the same mem_fraction_static pool" in out["notes"]
    # a 70 GiB draft: (227.24 + 70) / 4 x 1.1 = 81.74 > 81.25 GiB: refused, naming the draft
    out = check(sglang_server_speculative_algorithm="EAGLE3", sglang_server_speculative_draft_model_path="org/big-draft",
                preflight_draft_model_size_gib=70)
    (problem,) = out["problems"]
    assert problem.startswith("preflight_model_params_billion=122 (x 2 bytes/param) says 227.2 GiB of weights plus 70.0 GiB "
                              "of draft model: 81.7 GiB per GPU with tp 4 and overhead x1.1, but the smallest GPU has 95.6 GiB")


def test_a_draft_not_counted_gets_a_note_and_nextn_counts_nothing_more():
    out = check(sglang_server_speculative_algorithm="EAGLE", sglang_server_speculative_draft_model_path="org/eagle-head")
    assert out["problems"] == []
    assert any(n.startswith("memory: the draft model org/eagle-head (EAGLE) is not in the estimate; set "
                            "preflight_draft_model_size_gib") for n in out["notes"])
    # NEXTN drafts with the target's own MTP layers: the estimate is the reference's, 62.5 GiB per GPU, and no draft note
    nextn = check(sglang_server_speculative_algorithm="NEXTN", sglang_server_speculative_draft_model_path="org/other",
                  preflight_draft_model_size_gib=5)
    assert nextn["notes"] == check()["notes"]
