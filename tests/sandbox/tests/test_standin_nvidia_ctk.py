"""The stand-in nvidia-ctk writes env-only CDI specs for the stand-in GPUs and edits daemon.json like the real one."""
from __future__ import annotations

import json

import yaml


def test_cdi_generate_writes_a_valid_env_only_spec(run_standin, tmp_path):
    out = tmp_path / "cdi" / "nvidia.yaml"
    res = run_standin("nvidia-ctk", "cdi", "generate", "--output=%s" % out)
    assert res.returncode == 0, res.stderr
    spec = yaml.safe_load(out.read_text())
    assert spec["kind"] == "nvidia.com/gpu"
    assert spec["cdiVersion"] == "0.5.0"
    assert [d["name"] for d in spec["devices"]] == ["0", "1", "2", "3", "all"]
    for dev in spec["devices"]:
        assert set(dev["containerEdits"]) == {"env"}          # no deviceNodes, hooks or mounts
    assert spec["devices"][2]["containerEdits"]["env"] == ["NVIDIA_VISIBLE_DEVICES=2"]
    assert spec["devices"][4]["containerEdits"]["env"] == ["NVIDIA_VISIBLE_DEVICES=all"]
    assert "Generated CDI spec with version 0.5.0" in res.stderr


def test_cdi_generate_uuid_names_are_the_recorded_uuids(run_standin, fixtures_dir):
    res = run_standin("nvidia-ctk", "cdi", "generate", "--device-name-strategy=uuid", "--format=json")
    spec = json.loads(res.stdout)
    csv = (fixtures_dir / "nvidia" / "rtxpro6000-x4-query-gpu-noheader.csv").read_text().splitlines()
    assert [d["name"] for d in spec["devices"]][:4] == [line.split(", ")[6] for line in csv]


def test_cdi_generate_without_driver_fails_like_the_real_tool(run_standin, tmp_path):
    res = run_standin("nvidia-ctk", "cdi", "generate", env={"NVIDIA_STANDIN_DATA": str(tmp_path / "none")})
    assert res.returncode == 1
    assert "ERROR_LIBRARY_NOT_FOUND" in res.stderr


def test_cdi_list(run_standin, tmp_path):
    cdi = tmp_path / "cdi"
    run_standin("nvidia-ctk", "cdi", "generate", "--output=%s" % (cdi / "nvidia.yaml"))
    res = run_standin("nvidia-ctk", "cdi", "list", env={"NVIDIA_STANDIN_CDI_DIRS": str(cdi)})
    assert res.stdout.splitlines() == ["nvidia.com/gpu=0", "nvidia.com/gpu=1", "nvidia.com/gpu=2",
                                       "nvidia.com/gpu=3", "nvidia.com/gpu=all"]
    assert "Found 5 CDI devices" in res.stderr


def test_runtime_configure_docker_merges_daemon_json(run_standin, tmp_path):
    daemon = tmp_path / "daemon.json"
    daemon.write_text('{"log-driver": "journald", "runtimes": {"crun": {"path": "/usr/bin/crun"}}}')
    res = run_standin("nvidia-ctk", "runtime", "configure", "--runtime=docker", "--config=%s" % daemon, "--set-as-default")
    assert res.returncode == 0, res.stderr
    config = json.loads(daemon.read_text())
    assert config == {"log-driver": "journald", "default-runtime": "nvidia",
                      "runtimes": {"crun": {"path": "/usr/bin/crun"},
                                   "nvidia": {"args": [], "path": "nvidia-container-runtime"}}}


def test_runtime_configure_other_runtimes_are_refused(run_standin, tmp_path):
    res = run_standin("nvidia-ctk", "runtime", "configure", "--runtime=containerd")
    assert res.returncode == 1
    assert "--runtime=docker only" in res.stderr


def test_config_set_in_place(run_standin, tmp_path):
    conf = tmp_path / "config.toml"
    res = run_standin("nvidia-ctk", "config", "--in-place", "--config=%s" % conf, "--set", "nvidia-container-runtime.mode=cdi")
    assert res.returncode == 0, res.stderr
    assert conf.read_text() == '[nvidia-container-runtime]\nmode = "cdi"\n'
    run_standin("nvidia-ctk", "config", "--in-place", "--config=%s" % conf, "--set", "nvidia-container-runtime.mode=legacy")
    assert conf.read_text() == '[nvidia-container-runtime]\nmode = "legacy"\n'
