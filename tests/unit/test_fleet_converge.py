"""benchmarks/fleet_converge.py: the per-host figures, the machine bound, the Mitogen environment, the inventory."""
from __future__ import annotations

import importlib.util
import os
import subprocess

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPEC = importlib.util.spec_from_file_location("fleet_converge", os.path.join(ROOT, "benchmarks", "fleet_converge.py"))
fleet_converge = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(fleet_converge)


def run(client, containers, conmon, seconds, stdout_bytes):
    cpu = {"client_s": client, "containers_s": containers, "conmon_s": conmon}
    return {"cpu": cpu, "cpu_total_s": sum(v for v in cpu.values() if v is not None), "seconds": seconds,
            "stdout_bytes": stdout_bytes}


def test_per_host_eight_hosts_on_two_cores():
    # 8 hosts: 40 s client / 8 = 5 s, 12 s in the hosts / 8 = 1.5 s, 80000 bytes / 8 = 10000;
    # bound = 8 x 30 s (the 1-host run's client + containers + conmon) / 2 cores = 120 s; 150 s / 120 s = 1.25
    fig = fleet_converge.per_host(8, run(40.0, 12.0, 4.0, 150.0, 80000), run(20.0, 7.0, 3.0, 31.0, 9000), 2)
    assert fig == {"client_s_per_host": 5.0, "host_s_per_host": 1.5, "stdout_bytes_per_host": 10000,
                   "bound_s": 120.0, "wall_over_bound": 1.25}


def test_per_host_bound_is_never_below_one_hosts_wall_time():
    # 1 host: 1 x 30 s / 2 cores = 15 s, but one host's tasks run one after the other: the bound is its 31 s wall
    base = run(20.0, 7.0, 3.0, 31.0, 9000)
    fig = fleet_converge.per_host(1, base, base, 2)
    assert fig["bound_s"] == 31.0
    assert fig["wall_over_bound"] == 1.0


def test_per_host_unknown_figures_are_none():
    fig = fleet_converge.per_host(4, run(10.0, None, None, 40.0, 400), None, 2)
    assert fig == {"client_s_per_host": 2.5, "host_s_per_host": None, "stdout_bytes_per_host": 100,
                   "bound_s": None, "wall_over_bound": None}


def test_mitogen_env_names_the_fix_when_missing(tmp_path):
    with pytest.raises(SystemExit) as err:
        fleet_converge.mitogen_env(str(tmp_path))   # an empty directory: no ansible_mitogen in it
    assert "--mitogen" in str(err.value)
    assert "requirements-mitogen.txt" in str(err.value)


def test_inventory_with_the_mitogen_podman_connection(tmp_path):
    fleet_converge.write_inventory(2, str(tmp_path), connection_name="mitogen_podman")
    with open(os.path.join(str(tmp_path), "hosts.yml")) as fh:
        inv = yaml.safe_load(fh)
    fleet = inv["all"]["children"]["sandbox_fleet"]
    assert fleet["vars"]["ansible_connection"] == "mitogen_podman"
    assert sorted(fleet["children"]["gpu_hosts"]["hosts"]) == ["sglang-sbx-1", "sglang-sbx-2"]


def test_with_mitogen_refuses_a_path_without_mitogen(tmp_path):
    proc = subprocess.run([os.path.join(ROOT, "scripts", "with_mitogen.sh"), "true"], env=dict(os.environ, LLMOPS_MITOGEN_PATH=str(tmp_path)),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=False)
    assert proc.returncode == 2
    assert "LLMOPS_MITOGEN_PATH=%s" % tmp_path in proc.stderr
    assert "requirements-mitogen.txt" in proc.stderr


def test_with_mitogen_sets_the_strategy(tmp_path):
    # a stand-in ansible_mitogen tree is enough: the script only points Ansible at it
    (tmp_path / "ansible_mitogen" / "plugins" / "strategy").mkdir(parents=True)
    proc = subprocess.run([os.path.join(ROOT, "scripts", "with_mitogen.sh"), "sh", "-c",
                           'echo "$ANSIBLE_STRATEGY $ANSIBLE_STRATEGY_PLUGINS ${PYTHONPATH%%:*}"'],
                          env=dict(os.environ, LLMOPS_MITOGEN_PATH=str(tmp_path), PYTHONPATH=""),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["mitogen_linear", "%s/ansible_mitogen/plugins/strategy" % tmp_path, str(tmp_path)]


def test_inventory_over_ssh_with_mitogen_names_mitogen_ssh(tmp_path):
    access = {"key": "/k", "addresses": {"sglang-sbx-1": "10.88.0.5"}, "control_dir": "/cp"}
    (tmp_path / "plain").mkdir()
    (tmp_path / "mitogen").mkdir()
    fleet_converge.write_inventory(1, str(tmp_path / "plain"), ssh=access)
    fleet_converge.write_inventory(1, str(tmp_path / "mitogen"), ssh=access, connection_name="mitogen_ssh")
    for name, connection in (("plain", "ansible.builtin.ssh"), ("mitogen", "mitogen_ssh")):
        with open(str(tmp_path / name / "hosts.yml")) as fh:
            fleet = yaml.safe_load(fh)["all"]["children"]["sandbox_fleet"]
        assert fleet["vars"]["ansible_connection"] == connection
        assert fleet["vars"]["ansible_host_key_checking"] is False   # mitogen_ssh ignores ansible_ssh_common_args for this
        assert fleet["children"]["gpu_hosts"]["hosts"]["sglang-sbx-1"]["ansible_host"] == "10.88.0.5"
