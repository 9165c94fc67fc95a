"""playbooks/tasks/spec_tune_fleet_check.yml on four local hosts: the canary's profile (GPU model and count, SGLang
version, image, model, tp) is what a follower must match; b (other SGLang version) and d (8 H200 instead of 4 RTX PRO
6000) are refused with the fields that differ, c follows. GPU facts come from a stand-in module (no nvidia-smi here)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

FAKE_GPU = '''#!/usr/bin/python
from ansible.module_utils.basic import AnsibleModule
m = AnsibleModule(argument_spec=dict(name=dict(type="str"), count=dict(type="int")))
m.exit_json(changed=False, ansible_facts={"llmops_gpu": {"gpu_count": m.params["count"], "gpus": [{"name": m.params["name"]}] * m.params["count"]}})
'''

PLAY = '''
- name: check
  hosts: gpu_hosts
  gather_facts: false
  tasks:
    - name: GPU facts stand-in
      fake_gpu: {name: "{{ gpu_name }}", count: "{{ gpu_n }}"}
    - name: The check under test
      ansible.builtin.include_tasks: %s
- name: followers
  hosts: spec_tune_followers
  gather_facts: false
  tasks:
    - name: Name the followers
      ansible.builtin.debug: {msg: "FOLLOWER {{ inventory_hostname }}"}
''' % (REPO / "playbooks" / "tasks" / "spec_tune_fleet_check.yml")

INVENTORY = '''
all:
  children:
    gpu_hosts:
      vars: {ansible_connection: local, ansible_python_interpreter: "%s", gpu_name: "NVIDIA RTX PRO 6000", gpu_n: 4}
      hosts:
        a: {sglang_server_version: "0.5.9"}
        b: {sglang_server_version: "0.5.10"}
        c: {sglang_server_version: "0.5.9"}
        d: {sglang_server_version: "0.5.9", gpu_n: 8, gpu_name: "NVIDIA H200"}
''' % sys.executable


def test_hosts_that_differ_from_the_canary_are_refused(tmp_path):
    (tmp_path / "library").mkdir()
    (tmp_path / "library" / "fake_gpu.py").write_text(FAKE_GPU)
    (tmp_path / "play.yml").write_text(PLAY)
    (tmp_path / "hosts.yml").write_text(INVENTORY)
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_LIBRARY=str(tmp_path / "library"),
               ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    proc = subprocess.run([str(Path(sys.executable).with_name("ansible-playbook")), "-i", str(tmp_path / "hosts.yml"),
                           str(tmp_path / "play.yml")], cwd=str(REPO), env=env, capture_output=True, text=True, timeout=300, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert "b differs from the canary a: sglang_version 0.5.10 here, 0.5.9 on the canary" in out
    assert ("d differs from the canary a: gpu_count 8 here, 4 on the canary; gpu_models ['NVIDIA H200'] here, "
            "['NVIDIA RTX PRO 6000'] on the canary") in out
    assert "FOLLOWER c" in out and "FOLLOWER b" not in out and "FOLLOWER d" not in out and "FOLLOWER a" not in out
