"""The CI provisioning pipeline of docs/ci.md, run as written against the embedded sandbox (marker ``sandbox``).

The GitHub Actions and GitLab CI examples are read from docs/ci.md itself: their JUnit environment (ansible-core's
``ansible.builtin.junit`` callback) and their ``ansible-playbook -i inventory llmops.sglang.site ...`` line. The line
runs through bash in a scratch "pipeline checkout" (``inventory/`` = a copy of inventories/sandbox, as the docs suggest
copying an example inventory; no ansible.cfg; the collection found through ANSIBLE_COLLECTIONS_PATH, where the
pipeline would have installed the tarball) with one gate added that no server can pass: at least 1,000,000 output
tok/s (the simulator's single stream is about 135 tok/s, docs/simulator.md). The inventory also sets a known fake API
key, so the server, the verify stage and the benchmark all carry a secret. Then, as the pipeline's artifacts show:

- ``ansible-playbook`` exits non-zero (the job fails on the gate);
- the JUnit XML exists and parses; its one failed test case (an ``<error>`` element under ansible-core 2.19, see
  docs/ci.md) is the sglang_benchmark role's gate task, whose message names the gate
  (``output_throughput ... is below the gate 1000000.00 tok/s``), and the serve and verify stages before it passed;
- the benchmark report directory (``reports/<host>/<run_id>/``, under the pipeline's working directory) was still
  written, with the measured level;
- the fake API key appears neither in the JUnit XML nor in the report.

The sandbox host is the session's shared one (conftest ``sandbox_up``), not a host of its own.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest
import yaml

from sbx import REPO_ROOT, sandbox_env

HOST = "sglang-sbx-1"
PODMAN_GROUP = "test_site"   # drives test_site.py's sandbox host: the same xdist group (tests/conftest.py)
DOC = REPO_ROOT / "docs" / "ci.md"
FAKE_API_KEY = "sk-llmops-ci-FAKE-3b1f0c9e7a5d"       # a known fake secret: must never reach an artifact
GATE_TOK_S = 1000000                                   # output tok/s no single stream reaches (simulator: ~135)
GATE_TASK = "Fail when a level failed or missed a gate"
# a small sweep, so the benchmark stage takes seconds: one level at concurrency 1, max(2, 1 x 1) = 2 requests
SMALL_SWEEP = {"sglang_benchmark_concurrency": [1], "sglang_benchmark_output_len": 64, "sglang_benchmark_num_prompts": 2,
               "sglang_benchmark_prompts_per_concurrency": 1, "sglang_benchmark_plots": False}
JUNIT_ENV = ("ANSIBLE_CALLBACKS_ENABLED", "JUNIT_OUTPUT_DIR", "JUNIT_FAIL_ON_CHANGE", "JUNIT_HIDE_TASK_ARGUMENTS")


def _doc_examples():
    """(GitHub env, GitHub run line, GitLab variables, GitLab script lines) from the YAML blocks of docs/ci.md."""
    blocks = [yaml.safe_load(b) for b in re.findall(r"^```yaml\n(.*?)^```", DOC.read_text(), re.S | re.M)]
    github = next(b for b in blocks if "jobs" in b)["jobs"]["site"]
    gitlab = next(b for b in blocks if "provision-sglang" in b)["provision-sglang"]
    step = next(s for s in github["steps"] if "ansible-playbook" in s.get("run", ""))
    return github["env"], step["run"].strip(), gitlab["variables"], [line for line in gitlab["script"] if "ansible-playbook" in line]


def test_both_examples_run_the_same_playbook_command_and_junit_settings():
    gh_env, gh_run, gl_vars, gl_script = _doc_examples()
    assert gl_script == [gh_run]
    assert gh_run.startswith("ansible-playbook -i inventory llmops.sglang.site ")
    assert "sglang_benchmark_force=true" in gh_run      # a gating pipeline measures even an unchanged host (docs/ci.md)
    for key in JUNIT_ENV:
        assert key in gh_env and key in gl_vars, key
    assert gh_env["ANSIBLE_CALLBACKS_ENABLED"] == gl_vars["ANSIBLE_CALLBACKS_ENABLED"] == "ansible.builtin.junit"
    assert gh_env["JUNIT_OUTPUT_DIR"] == "${{ github.workspace }}/junit" and gl_vars["JUNIT_OUTPUT_DIR"] == "$CI_PROJECT_DIR/junit"


@pytest.fixture(scope="module")
def pipeline(sandbox_up, tmp_path_factory):
    gh_env, gh_run, _gl_vars, _gl_script = _doc_examples()
    work = tmp_path_factory.mktemp("pipeline")          # the pipeline's checkout: ${{ github.workspace }}
    shutil.copytree(REPO_ROOT / "inventories" / "sandbox", work / "inventory")
    values = dict(SMALL_SWEEP, sglang_server_api_key=FAKE_API_KEY)
    (work / "inventory" / "group_vars" / "all" / "zz_pipeline.yml").write_text(json.dumps(values))
    env = sandbox_env()
    env.pop("ANSIBLE_CONFIG")                           # the pipeline's repository has no ansible.cfg
    env["ANSIBLE_COLLECTIONS_PATH"] = str(REPO_ROOT / ".collections")   # where the docs install the tarball
    env.update((k, str(v).replace("${{ github.workspace }}", str(work))) for k, v in gh_env.items())
    command = "%s -e sglang_benchmark_min_output_throughput=%d" % (gh_run, GATE_TOK_S)
    proc = subprocess.run(["bash", "-c", command], cwd=work, env=env, capture_output=True, text=True, timeout=1800, check=False)
    return {"work": work, "rc": proc.returncode, "output": proc.stdout + proc.stderr}


def _junit(pipeline):
    files = sorted((pipeline["work"] / "junit").glob("*.xml"))
    assert len(files) == 1, (files, pipeline["output"][-4000:])
    return files[0]


@pytest.mark.sandbox
def test_the_job_fails_on_the_gate(pipeline):
    assert pipeline["rc"] != 0, pipeline["output"][-4000:]


@pytest.mark.sandbox
def test_junit_lists_the_gate_as_the_one_failure(pipeline):
    root = ET.parse(_junit(pipeline)).getroot()
    cases = root.iter("testcase")
    failed = [c for c in root.iter("testcase") if c.find("failure") is not None or c.find("error") is not None]
    assert [c.get("name") for c in failed] == ["[%s] Benchmark - serving benchmark sweep and reports: llmops.sglang.sglang_benchmark : %s "
                                               "(partial results are in the report)" % (HOST, GATE_TASK)], [c.get("name") for c in failed]
    # ansible-core 2.19 normalises every failed task into an error summary ("Task failed: Action failed: <msg>"), so its
    # junit callback writes the failed gate task as an <error> element (a <failure> in earlier releases): one of them
    problems = [child for child in failed[0] if child.tag in ("failure", "error")]
    assert len(problems) == 1, [child.tag for child in failed[0]]
    suites = list(root.iter("testsuite"))
    assert sum(int(x.get("failures", 0)) + int(x.get("errors", 0)) for x in suites) == 1
    message = problems[0].get("message")
    assert "serving benchmark on %s" % HOST in message
    assert "output_throughput" in message and "is below the gate %.2f tok/s" % GATE_TOK_S in message, message
    # the stages before the benchmark ran and passed: serve's plan (the server may already be as deployed, then nothing
    # rolls out) and verify's own gate, which ran (not skipped) and is not among the failed cases above
    by_name = dict((c.get("name"), c) for c in cases)
    for play, task in (("Serve - plan the rollout", "Show the rollout plan"),
                       ("Verify - the draft model loaded", "Print the verdicts and fail when a required verdict did not pass")):
        found = [c for n, c in by_name.items() if n.startswith("[%s] %s" % (HOST, play)) and n.endswith(": " + task)]
        assert len(found) == 1, (play, task)
        assert found[0].find("skipped") is None, (play, task)


@pytest.mark.sandbox
def test_the_report_was_still_written(pipeline):
    reports = sorted((pipeline["work"] / "reports" / HOST).iterdir())
    assert len(reports) == 1, reports
    records = [json.loads(line) for line in (reports[0] / "results.jsonl").read_text().splitlines() if line.strip()]
    assert [(r["max_concurrency"], r["completed"], r["failed"]) for r in records] == [(1, 2, 0)]
    assert records[0]["output_throughput"] < GATE_TOK_S
    assert (reports[0] / "summary.md").is_file() and (reports[0] / "summary.json").is_file()


@pytest.mark.sandbox
def test_no_secret_in_the_artifacts(pipeline):
    assert FAKE_API_KEY not in _junit(pipeline).read_text()
    for path in (pipeline["work"] / "reports").rglob("*"):
        if path.is_file():
            assert FAKE_API_KEY not in path.read_text(errors="replace"), path
