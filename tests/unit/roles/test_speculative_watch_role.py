"""The speculative_watch role on the controller (local connection, files under tmp_path): what it writes, promtool's
check, idempotence, check mode, and refusals before any file is written. Needs promtool (make bootstrap)."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
PLAYBOOK_BIN = Path(sys.executable).with_name("ansible-playbook")

pytestmark = pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed (make bootstrap installs it)")

EXPECTED = {"speculative_algorithm": "EAGLE", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
            "speculative_num_draft_tokens": 4, "max_running_requests": 48, "served_model_name": "qwen", "enable_metrics": True}
ROWS = [{"concurrency": 1, "decode_tok_s_per_req": 110.0, "completed": 4, "failed": 0, "accept_length": 2.0},
        {"concurrency": 8, "decode_tok_s_per_req": 80.5, "completed": 12, "failed": 0, "accept_length": 1.8}]


def run(tmp_path, *args, **play_vars):
    prom = tmp_path / "prometheus"
    prom.mkdir(exist_ok=True)
    play = [{"hosts": "gpu1", "gather_facts": False,
             "vars": dict({"sglang_server_version": "0.5.9", "sglang_server_expected": EXPECTED,
                           "sglang_benchmark_result": {"rows": ROWS}, "speculative_watch_dir": str(prom),
                           "speculative_watch_reload": "none"}, **play_vars),
             "pre_tasks": [{"name": "The verification's facts", "ansible.builtin.set_fact": {
                 "ansible_facts": {"llmops_speculative": {"accept_length": 1.9}}}}],
             "roles": ["llmops.sglang.speculative_watch"]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    (tmp_path / "inv").write_text("gpu1 ansible_connection=local ansible_host=10.0.0.5 ansible_python_interpreter=%s\n"
                                  "localhost ansible_connection=local ansible_python_interpreter=%s\n" % (sys.executable, sys.executable))
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    out = subprocess.run([str(PLAYBOOK_BIN), "-i", str(tmp_path / "inv"), str(tmp_path / "play.yml")] + list(args),
                         capture_output=True, text=True, env=env, cwd=str(REPO), check=False)
    return out, prom / "llmops-sglang"


def recap(out):
    """ok/changed/failed of the play recap."""
    return dict((k, int(v)) for k, v in re.findall(r"(ok|changed|failed)=(\d+)", out.stdout.split("PLAY RECAP")[-1]))


def test_writes_checks_and_is_idempotent(tmp_path):
    out, base = run(tmp_path, "--check", "--diff")
    assert out.returncode == 0, out.stdout[-3000:]
    assert not base.exists()                                  # check mode writes nothing
    out, base = run(tmp_path)
    assert out.returncode == 0, out.stdout[-3000:]
    assert sorted(str(p.relative_to(base)) for p in base.rglob("*") if p.is_file()) == [
        "dashboard.json", "rules/gpu1.yml", "rules/llmops-sglang.yml", "targets/gpu1.json"]
    assert json.loads((base / "targets" / "gpu1.json").read_text()) == [
        {"labels": {"arm": "EAGLE-s3-k1-d4", "host": "gpu1", "model": "qwen", "sglang_version": "0.5.9"}, "targets": ["10.0.0.5:30000"]}]
    host_rules = yaml.safe_load((base / "rules" / "gpu1.yml").read_text())["groups"][0]["rules"]
    assert {"record": "llmops_sglang:verified_accept_length", "expr": "vector(1.9)",
            "labels": {"host": "gpu1", "source": "verification"}} in host_rules
    # the Prometheus templates in the annotations reach the file as they are (not rendered by Ansible)
    assert '{{ $labels.host }}' in (base / "rules" / "llmops-sglang.yml").read_text()
    check = subprocess.run(["promtool", "check", "rules", str(base / "rules" / "llmops-sglang.yml"), str(base / "rules" / "gpu1.yml")],
                           capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "gpu1: arm EAGLE-s3-k1-d4, accept length 1.9 (verification), cap 48" in out.stdout
    again, _base = run(tmp_path)
    assert again.returncode == 0 and recap(again)["changed"] == 0, again.stdout[-2000:]


@pytest.mark.parametrize("extra, words", [
    ({"speculative_watch_accept_length_margin": 1.5}, "speculative_watch_accept_length_margin=1.5: a margin is a fraction"),
    ({"speculative_watch_window": "five minutes"}, "speculative_watch_window='five minutes': not a Prometheus duration"),
    ({"speculative_watch_dir": "/nonexistent/prometheus"}, "speculative_watch_dir=/nonexistent/prometheus is not a directory on localhost"),
    ({"speculative_watch_promtool": "/nonexistent/promtool"},
     "speculative_watch_promtool=/nonexistent/promtool does not run on localhost"),
    ({"sglang_benchmark_result": {"rows": []}, "speculative_watch_accept_length": 0.5},
     "speculative_watch_accept_length=0.5: an accept length counts the bonus token"),
])
def test_bad_input_is_refused_before_any_file(tmp_path, extra, words):
    out, base = run(tmp_path, **extra)
    assert out.returncode != 0
    assert words in " ".join(out.stdout.split()), out.stdout[-3000:]
    assert not base.exists()
