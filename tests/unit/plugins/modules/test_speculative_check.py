"""Tests of plugins/modules/speculative_check.py: fetch_url and run_command are mocked, inputs are the recorded fixtures."""
from __future__ import annotations

import json

import pytest

from ansible.module_utils import basic

from ansible_collections.llmops.sglang.plugins.module_utils._server import client as sglang_api
from ansible_collections.llmops.sglang.plugins.modules import speculative_check

# ansible-core 2.19 (pinned in requirements.txt) injects module args this way.
from ansible.module_utils.testing import patch_module_args


class FakeResp(object):
    def __init__(self, body):
        self.body = body if isinstance(body, bytes) else body.encode("utf-8")

    def read(self):
        return self.body


def probe_answer(accept_length=None, verify_ct=None, completion=256, e2e=2.0, draft_tokens=None):
    meta = {"id": "p", "finish_reason": {"type": "length", "length": completion}, "prompt_tokens": 12,
            "completion_tokens": completion, "e2e_latency": e2e}
    if accept_length is not None:
        meta.update(spec_accept_length=accept_length, spec_verify_ct=verify_ct, spec_accept_rate=None, spec_draft_token_num=draft_tokens)
    return json.dumps({"text": "1, 2, 3", "output_ids": [1, 2, 3], "meta_info": meta})


class Server(object):
    """fetch_url stand-in keyed by path; values are (status, body) or a list of them consumed in order."""

    def __init__(self, routes):
        self.routes = routes
        self.calls = []

    def __call__(self, module, url, data=None, headers=None, method=None, timeout=None, use_proxy=True):
        path = "/" + url.split("/", 3)[3]
        self.calls.append(path)
        answer = self.routes.get(path, (404, '{"detail": "Not Found"}'))
        if isinstance(answer, list):
            answer = answer.pop(0) if len(answer) > 1 else answer[0]
        status, body = answer
        if status == -1:   # no HTTP answer; the body, when given, is fetch_url's message
            return None, {"status": -1, "msg": body or "Request failed: <urlopen error [Errno 111] Connection refused>", "url": url}
        if status >= 400:
            return None, {"status": status, "msg": "HTTP Error %d" % status, "body": body.encode(), "url": url}
        return FakeResp(body), {"status": status, "msg": "OK", "url": url}


def run(mocker, args, routes, run_command=(0, "", ""), bin_path="/usr/bin/journalctl"):
    server = Server(routes)
    mocker.patch.object(sglang_api, "fetch_url", side_effect=server)
    mocker.patch.object(basic.AnsibleModule, "get_bin_path", return_value=bin_path)
    rc_mock = mocker.patch.object(basic.AnsibleModule, "run_command", return_value=run_command)
    mocker.patch("time.sleep")
    full = dict(args, _ansible_remote_tmp="/tmp", _ansible_keep_remote_files=False)
    full.setdefault("ready_interval", 0.01)
    with patch_module_args(full):
        with pytest.raises(SystemExit) as exc:
            speculative_check.main()
    return exc.value.code, server, rc_mock


@pytest.fixture
def sg(fixtures_dir):
    return fixtures_dir / "sglang"


@pytest.fixture
def mtp_routes(sg):
    return {
        "/health": (200, ""),
        "/server_info": (200, (sg / "server_info-mtp-v0.5.9.json").read_text()),
        "/model_info": (200, '{"model_path": "/models/Qwen3.5-122B-A10B", "architectures": ["Qwen3_5MoeForConditionalGeneration"]}'),
        "/generate": (200, probe_answer(accept_length=2.0, verify_ct=128, draft_tokens=128)),
        "/metrics": (200, (sg / "metrics-mtp.prom").read_text()),
    }


EXPECTED_REF = {"speculative_algorithm": "NEXTN", "speculative_num_steps": 1, "speculative_eagle_topk": 1, "tp_size": 4,
                "attention_backend": "triton", "max_running_requests": 64, "speculative_num_draft_tokens": None}


def out(capsys):
    return json.loads(capsys.readouterr().out)


def test_reference_mtp_passes_with_journald(mocker, capsys, sg, mtp_routes):
    log = "".join("Nov 20 09:14:02 gpu1 sglang-server[4242]: " + line + "\n"
                  for line in (sg / "qwen35-122b-mtp-tp4-v0.5.9.log").read_text().splitlines())
    code, server, rc = run(mocker, {"log_source": "journald", "log_unit": "sglang-server.service", "log_since": "2h",
                                    "expected": EXPECTED_REF}, mtp_routes, run_command=(0, log, ""))
    res = out(capsys)
    assert code == 0, res.get("msg")
    assert res["passed"] is True and res["changed"] is False
    assert {k: v["status"] for k, v in res["verdicts"].items()} == {
        "ready": "pass", "configured": "pass", "loaded": "pass", "accepting": "pass", "as_intended": "pass"}
    assert res["accept_length"] == 2.0 and res["accept_length_source"] == "probe"
    assert res["accept_rate"] == 1.0 and res["num_draft_tokens"] == 2
    assert res["gen_throughput"] == 135.04 and res["gen_throughput_source"] == "logs"
    assert res["probe_tok_per_s"] == 128.0  # 256 tokens in 2.0 s
    assert res["draft_class"] == "Qwen3_5ForCausalLMMTP"
    assert res["draft_mem_gb"] == {"TP0": 1.91, "TP1": 1.91, "TP2": 1.91, "TP3": 1.91}
    assert res["server_version"] == "0.5.9"
    assert "the model's own MTP/NextN head" in res["verdicts"]["configured"]["reason"]
    assert "draft Qwen3_5ForCausalLMMTP loaded after the target Qwen3_5MoeForConditionalGeneration on TP0, TP1, TP2, TP3 (1.91 GB per rank)" \
        == res["verdicts"]["loaded"]["reason"]
    # the accept length of every source is in the evidence: probe 2.0, logs 2.00, metrics 2.0, server lifetime 1.98
    assert res["verdicts"]["accepting"]["evidence"]["sources"] == {"probe": 2.0, "logs": 2.0, "metrics": 2.0, "server_info": 1.98}
    as_int = res["verdicts"]["as_intended"]["evidence"]
    assert as_int["expected"]["speculative_algorithm"] == "EAGLE"           # NEXTN compared as EAGLE
    assert as_int["expected"]["speculative_num_draft_tokens"] == 2          # topk 1: steps + 1
    assert as_int["differences"] == []
    facts = res["ansible_facts"]["llmops_speculative"]
    assert facts["algorithm"] == "EAGLE" and facts["passed"] is True and facts["speculation"] == "on"
    assert facts["warnings"] == ["attention_backend_defaulted", "spec_v2_on", "custom_all_reduce_disabled"]
    cmd = rc.call_args[0][0]
    assert cmd == ["/usr/bin/journalctl", "--no-pager", "-o", "short-iso", "-u", "sglang-server.service", "-n", "100000",
                   "--since", "-7200s"]
    assert server.calls == ["/health", "/server_info", "/model_info", "/generate", "/metrics"]


def test_broken_draft_fails_never_accepted(mocker, capsys, sg, mtp_routes, tmp_path):
    routes = dict(mtp_routes)
    routes["/generate"] = (200, probe_answer(accept_length=1.0, verify_ct=256, draft_tokens=256))
    routes["/metrics"] = (404, "")
    log = tmp_path / "server.log"
    log.write_text((sg / "qwen35-122b-mtp-broken-draft-v0.5.9.log").read_text())
    code, dummy, dummy2 = run(mocker, {"log_source": "file", "log_path": str(log)}, routes)
    res = out(capsys)
    assert code == 1
    assert res["failed_verdicts"] == ["accepting"]
    acc = res["verdicts"]["accepting"]
    assert acc["reason"].startswith("draft loaded but never accepted: accept length 1.00 from the probe")
    assert any("mtp.*" in c for c in acc["evidence"]["causes"])
    assert acc["evidence"]["sources"] == {"probe": 1.0, "logs": 1.0, "server_info": 1.98}
    assert res["verdicts"]["loaded"]["status"] == "pass"
    assert res["accept_rate"] == 0.0
    assert res["gen_throughput"] == pytest.approx(317.67)
    assert res["sources"]["metrics"]["status"] == "disabled"
    assert "speculative_check failed on http://127.0.0.1:30000: accepting: draft loaded but never accepted" in res["msg"]


def test_broken_draft_from_logs_only(mocker, capsys, sg, mtp_routes, tmp_path):
    """Without probe and metrics, the log's accept len 1.00 decides."""
    routes = dict(mtp_routes)
    routes["/server_info"] = (200, json.dumps({"speculative_algorithm": "EAGLE", "speculative_num_draft_tokens": 2, "model_path": "/m"}))
    log = tmp_path / "server.log"
    log.write_text((sg / "qwen35-122b-mtp-broken-draft-v0.5.9.log").read_text())
    code, server, dummy = run(mocker, {"log_source": "file", "log_path": str(log), "probe": False, "metrics": False}, routes)
    res = out(capsys)
    assert code == 1 and res["accept_length_source"] == "logs" and res["accept_length"] == 1.0
    assert "/generate" not in server.calls and "/metrics" not in server.calls


def test_no_spec_server_fails_when_spec_expected(mocker, capsys, sg, tmp_path):
    log = tmp_path / "server.log"
    log.write_text((sg / "qwen35-122b-no-spec-tp4-v0.5.9.log").read_text())
    routes = {"/health": (200, ""), "/server_info": (200, (sg / "server_info-no-spec-v0.5.9.json").read_text()),
              "/generate": (200, probe_answer())}
    code, dummy, dummy2 = run(mocker, {"log_source": "file", "log_path": str(log), "metrics": False}, routes)
    res = out(capsys)
    assert code == 1
    assert res["verdicts"]["configured"]["status"] == "fail"
    assert res["verdicts"]["configured"]["reason"].startswith("speculation off")
    assert res["failed_verdicts"] == ["configured", "loaded", "accepting"]
    assert res["gen_throughput"] == 110.21 and res["speculation"] == "off"
    assert res["sources"]["model_info"]["status"] == "error"  # 404 on both /model_info and /get_model_info: reported, not fatal


def test_no_spec_server_passes_when_spec_not_expected(mocker, capsys, sg, tmp_path):
    log = tmp_path / "server.log"
    log.write_text((sg / "qwen35-122b-no-spec-tp4-v0.5.9.log").read_text())
    routes = {"/health": (200, ""), "/server_info": (200, (sg / "server_info-no-spec-v0.5.9.json").read_text()),
              "/generate": (200, probe_answer(completion=256, e2e=2.5))}
    code, dummy, dummy2 = run(mocker, {"log_source": "file", "log_path": str(log), "expect_speculative": False,
                                       "expected": {"tp_size": 4, "attention_backend": "TRITON"}}, routes)
    res = out(capsys)
    assert code == 0, res.get("msg")
    assert res["verdicts"]["configured"]["reason"].startswith("speculation off, as expected")
    assert res["verdicts"]["loaded"]["status"] == "skip" and res["verdicts"]["accepting"]["status"] == "skip"
    assert res["verdicts"]["as_intended"]["status"] == "pass"
    assert res["accept_length"] is None and res["accept_rate"] is None
    assert res["gen_throughput"] == 110.21 and res["probe_tok_per_s"] == 102.4  # 256 / 2.5


def test_expected_differs_names_the_argument(mocker, capsys, mtp_routes):
    expected = dict(EXPECTED_REF, speculative_num_steps=3, speculative_num_draft_tokens=4)
    code, dummy, dummy2 = run(mocker, {"expected": expected}, mtp_routes)
    res = out(capsys)
    assert code == 1 and res["failed_verdicts"] == ["as_intended"]
    diffs = res["verdicts"]["as_intended"]["evidence"]["differences"]
    assert diffs == [{"name": "speculative_num_draft_tokens", "expected": 4, "running": 2},
                     {"name": "speculative_num_steps", "expected": 3, "running": 1}]
    assert "speculative_num_steps expected 3, running 1" in res["msg"]


def test_never_ready_fails_with_status_counts_and_log_refusal(mocker, capsys, sg, tmp_path):
    log = tmp_path / "server.log"
    log.write_text((sg / "qwen35-radix-conflict-v0.5.10.log").read_text())
    routes = {"/health": [(503, ""), (503, ""), (-1, "")]}
    code, server, dummy = run(mocker, {"ready_timeout": 0.05, "ready_interval": 0.01, "log_source": "file", "log_path": str(log)}, routes)
    res = out(capsys)
    assert code == 1
    ready = res["verdicts"]["ready"]
    assert ready["status"] == "fail"
    assert "did not answer 200 within" in ready["reason"]
    assert "ValueError: Speculative decoding for Qwen3_5MoeForConditionalGeneration is not compatible with radix cache" in ready["reason"]
    assert "fix: use --mamba-scheduler-strategy extra_buffer" in ready["reason"]
    assert ready["evidence"]["status_counts"]["503"] == 2
    assert ready["evidence"]["log_tail"][-1].startswith("[2026-11-22 08:01:44] ValueError")
    assert res["refusals"][0]["key"] == "radix_cache_conflict"
    assert set(server.calls) == {"/health"}
    assert {v["status"] for k, v in res["verdicts"].items() if k != "ready"} == {"unknown"}


def test_check_mode_same_result(mocker, capsys, mtp_routes):
    code, server, dummy = run(mocker, {"_ansible_check_mode": True, "expected": EXPECTED_REF}, mtp_routes)
    res = out(capsys)
    assert code == 0 and res["changed"] is False
    assert res["verdicts"]["loaded"]["reason"].startswith("inferred: accepted draft tokens (accept length 2.00 from the probe)")


def test_fail_on_subset(mocker, capsys, mtp_routes):
    routes = dict(mtp_routes)
    routes["/generate"] = (200, probe_answer(accept_length=1.0, verify_ct=256))
    code, dummy, dummy2 = run(mocker, {"fail_on": ["ready", "configured"]}, routes)
    res = out(capsys)
    assert code == 0 and res["passed"] is True
    assert res["verdicts"]["accepting"]["status"] == "fail"  # computed, not required


def test_podman_logs_command_and_merge(mocker, capsys, sg, mtp_routes):
    text = (sg / "qwen35-122b-mtp-tp4-v0.5.9.log").read_text()
    code, dummy, rc = run(mocker, {"log_source": "podman", "log_container": "sglang", "log_since": "30m", "log_max_lines": 5000},
                          mtp_routes, run_command=(0, "uvicorn stdout line\n", text), bin_path="/usr/bin/podman")
    res = out(capsys)
    assert code == 0, res.get("msg")
    assert rc.call_args[0][0] == ["/usr/bin/podman", "logs", "--tail", "5000", "--since", "1800s", "sglang"]
    assert res["draft_class"] == "Qwen3_5ForCausalLMMTP" and res["sources"]["logs"]["decode_lines"] == 2


def test_docker_logs_error_is_reported_not_fatal(mocker, capsys, mtp_routes):
    code, dummy, rc = run(mocker, {"log_source": "docker", "log_container": "nope", "log_since": "2026-11-20 09:00:00"}, mtp_routes,
                          run_command=(1, "", "Error: No such container: nope"), bin_path="/usr/bin/docker")
    res = out(capsys)
    assert rc.call_args[0][0][-3:] == ["--since", "2026-11-20T09:00:00", "nope"]
    assert res["sources"]["logs"]["status"] == "error"
    assert "No such container: nope" in res["sources"]["logs"]["msg"]
    assert code == 0  # the probe's accept length 2.0 still proves a working draft
    assert res["verdicts"]["loaded"]["evidence"]["inferred_from"] == "accepting"


def test_log_max_bytes_keeps_the_newest_whole_lines(mocker, capsys, sg, mtp_routes, tmp_path):
    text = (sg / "qwen35-122b-mtp-tp4-v0.5.9.log").read_text()
    log = tmp_path / "big.log"
    log.write_text(text)
    tail = text.splitlines(True)[-3:]
    budget = len("".join(tail).encode()) + 5  # three whole lines and a piece of the fourth from the end
    code, dummy, dummy2 = run(mocker, {"log_source": "file", "log_path": str(log), "log_max_bytes": budget}, mtp_routes)
    res = out(capsys)
    assert res["sources"]["logs"]["truncated"] is True
    assert res["sources"]["logs"]["lines"] == 3
    # the last three lines: Decode 0.95, Decode 135.04, the INFO line; no Load weight end. line is left
    assert res["sources"]["logs"]["decode_lines"] == 2
    assert res["gen_throughput"] == 135.04 and res["draft_class"] is None


def test_file_since_window_uses_sglang_timestamps(mocker, capsys, sg, mtp_routes, tmp_path):
    log = tmp_path / "server.log"
    log.write_text((sg / "qwen35-122b-mtp-tp4-v0.5.9.log").read_text())
    code, dummy, dummy2 = run(mocker, {"log_source": "file", "log_path": str(log), "log_since": "2026-11-20 09:16:00"}, mtp_routes)
    res = out(capsys)
    # from 09:16:00: Prefill 09:16:40, two Decode lines, one INFO line
    assert res["sources"]["logs"]["lines_in_window"] == 4
    assert res["sources"]["logs"]["decode_lines"] == 2
    assert res["draft_class"] is None  # the Load weight end. lines are before the window


@pytest.mark.parametrize("args,fragment", [
    ({"log_source": "journald", "log_unit": ""}, "log_source=journald needs log_unit"),
    ({"log_source": "file"}, "log_source=file needs log_path"),
    ({"log_since": "yesterday"}, "log_since='yesterday' is not a duration like 30m"),
    ({"min_accept_length": 0.5}, "min_accept_length=0.5 is below 1.0"),
    ({"url": "localhost:30000"}, "url='localhost:30000' is not an SGLang base URL"),
    ({"timeout": 0}, "timeout=0.0 must be a positive number of seconds"),
    ({"expected": {"tp_size": [4]}}, "expected.tp_size=[4]: only scalar server args can be compared"),
    ({"accept_length_drop_warn": 1.5}, "accept_length_drop_warn=1.5 must be a fraction between 0 and 1"),
    ({"accept_length_drop_warn": 0}, "accept_length_drop_warn=0.0 must be a fraction between 0 and 1"),
])
def test_bad_options_fail_before_any_request(mocker, capsys, args, fragment):
    code, server, rc = run(mocker, args, {})
    res = out(capsys)
    assert code == 1
    assert fragment in res["msg"]
    assert server.calls == [] and rc.call_count == 0


def test_48_cap_warning_from_server_args(mocker, capsys, sg, mtp_routes):
    info = json.loads((sg / "server_info-mtp-v0.5.9.json").read_text())
    info["max_running_requests"] = 48
    routes = dict(mtp_routes, **{"/server_info": (200, json.dumps(info))})
    code, dummy, dummy2 = run(mocker, {}, routes)
    res = out(capsys)
    assert code == 0
    assert [w["key"] for w in res["warnings_found"]] == ["max_running_requests_capped"]
    assert res["verdicts"]["as_intended"]["status"] == "skip"


def test_dp_attention_warns_when_the_accept_length_is_not_the_probes(mocker, capsys, sg, mtp_routes):
    info = json.loads((sg / "server_info-mtp-v0.5.9.json").read_text())
    info["enable_dp_attention"] = True
    routes = dict(mtp_routes, **{"/server_info": (200, json.dumps(info))})
    # with the probe (the default) the accept length is the request's own: no warning
    code, dummy, dummy2 = run(mocker, {}, routes)
    res = out(capsys)
    assert code == 0 and res["accept_length_source"] == "probe"
    assert "dp_attention_accept_length_one_rank" not in [w["key"] for w in res["warnings_found"]]
    # without it the figure comes from a scheduler (one DP rank's): warned, naming the source
    code, dummy, dummy2 = run(mocker, {"probe": False}, routes)
    res = out(capsys)
    assert res["accept_length_source"] in ("metrics", "server_info")
    (warning,) = [w for w in res["warnings_found"] if w["key"] == "dp_attention_accept_length_one_rank"]
    assert warning["text"] == "enable_dp_attention is on in server_info and the accept length comes from %s" % res["accept_length_source"]


def test_values_equal_rules():
    eq = speculative_check.values_equal
    assert eq("tp_size", "4", 4) and eq("mem_fraction_static", 0.85, 0.8500000001)
    assert eq("speculative_algorithm", "eagle", "EAGLE") and not eq("model_path", "/M", "/m")
    assert eq("disable_radix_cache", False, False) and not eq("disable_radix_cache", "true", False)
    assert not eq("attention_backend", "triton", None)


def test_zero_spec_gauges_are_not_accept_lengths(mocker, capsys, sg):
    """SGLang exports sglang:spec_accept_length 0 when speculation is off: that is no accept length."""
    metrics = (sg / "metrics-mtp.prom").read_text().replace(
        'sglang:spec_accept_length{engine_type="unified",model_name="qwen3.5-122b",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 2.0',
        'sglang:spec_accept_length{engine_type="unified",model_name="qwen3.5-122b",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 0.0')
    routes = {"/health": (200, ""), "/server_info": (200, (sg / "server_info-no-spec-v0.5.9.json").read_text()),
              "/generate": (200, probe_answer()), "/metrics": (200, metrics)}
    code, dummy, dummy2 = run(mocker, {"expect_speculative": False}, routes)
    res = out(capsys)
    assert code == 0 and res["accept_length"] is None and res["accept_length_source"] is None


def test_queued_at_48_warning_from_logs(mocker, capsys, mtp_routes, tmp_path):
    log = tmp_path / "server.log"
    log.write_text("[2026-01-01 00:00:01 TP0] Decode batch, #running-req: 48, #token: 9000, token usage: 0.40, accept len: 2.90, "
                   "accept rate: 0.63, cuda graph: True, gen throughput (token/s): 2100.00, #queue-req: 16\n")
    code, dummy, dummy2 = run(mocker, {"log_source": "file", "log_path": str(log)}, mtp_routes)
    res = out(capsys)
    assert [w["key"] for w in res["warnings_found"]] == ["queued_at_48_running"]
    assert res["warnings_found"][0]["text"] == "1 Decode lines show #running-req: 48 with requests queued"


def _decode_line(minute, accept, gen=135.0):
    return ("[2026-11-20 %s TP0] Decode batch, #running-req: 1, #full token: 300, full token usage: 0.00, mamba num: 2, mamba usage: 0.01, "
            "accept len: %.2f, accept rate: %.2f, cuda graph: True, gen throughput (token/s): %.2f, #queue-req: 0\n"
            % (minute, accept, accept / 2.0, gen))


#: sgl-project/sglang#37326 as a log: accept length 2.00 after start, 1.05 eight hours later (12 Decode lines)
DECAY = [("09:14:02", 2.00), ("09:15:10", 1.98), ("09:16:40", 2.01), ("10:30:00", 1.90), ("11:45:00", 1.75), ("12:20:00", 1.60),
         ("13:05:00", 1.45), ("14:10:00", 1.30), ("15:00:00", 1.20), ("17:02:11", 1.10), ("17:04:00", 1.05), ("17:05:30", 1.05)]


def test_accept_length_decay_over_uptime_warns(mocker, capsys, mtp_routes, tmp_path):
    log = tmp_path / "server.log"
    log.write_text("".join(_decode_line(t, a) for t, a in DECAY))
    code, dummy, dummy2 = run(mocker, {"log_source": "file", "log_path": str(log)}, mtp_routes)
    res = out(capsys)
    assert code == 0, res.get("msg")        # the fresh probe still says 2.0: it warns, it does not fail
    trend = res["accept_length_trend"]
    # 12 lines -> quarters of 3: first = median(2.00, 1.98, 2.01) = 2.00, last = median(1.10, 1.05, 1.05) = 1.05
    assert (trend["lines"], trend["window_lines"], trend["first"], trend["last"]) == (12, 3, 2.0, 1.05)
    assert trend["change"] == -0.95 and trend["change_fraction"] == -0.475 and trend["falling"] is True
    assert (trend["first_from"], trend["last_to"]) == ("2026-11-20 09:14:02", "2026-11-20 17:05:30")
    warn = [w for w in res["warnings_found"] if w["key"] == "accept_length_falling"]
    assert len(warn) == 1
    assert warn[0]["text"].startswith("accept length fell from 2.00 (median of the first 3 Decode lines, 2026-11-20 09:14:02 to "
                                      "2026-11-20 09:16:40) to 1.05 (median of the last 3, 2026-11-20 17:02:11 to 2026-11-20 17:05:30): "
                                      "-47.5%, more than accept_length_drop_warn=0.2 (20%)")
    assert "sgl-project/sglang#37326" in warn[0]["meaning"]
    # shown as an Ansible warning too (ansible-core 2.19 returns warnings as events)
    assert any("accept length fell from 2.00" in w["event"]["msg"] for w in res["warnings"])
    assert res["ansible_facts"]["llmops_speculative"]["accept_length_trend"]["falling"] is True


def test_accept_length_decay_threshold_is_an_option(mocker, capsys, mtp_routes, tmp_path):
    log = tmp_path / "server.log"
    log.write_text("".join(_decode_line(t, a) for t, a in DECAY))
    code, dummy, dummy2 = run(mocker, {"log_source": "file", "log_path": str(log), "accept_length_drop_warn": 0.5}, mtp_routes)
    res = out(capsys)
    # -47.5% is not a fall of more than 50%
    assert res["accept_length_trend"]["falling"] is False
    assert "accept_length_falling" not in [w["key"] for w in res["warnings_found"]]


def test_steady_accept_length_has_a_trend_and_no_warning(mocker, capsys, mtp_routes, tmp_path):
    log = tmp_path / "server.log"
    steady = [("09:00:00", 2.00), ("09:01:00", 2.10), ("09:02:00", 1.95), ("09:03:00", 2.05), ("09:04:00", 1.90), ("09:05:00", 2.00),
              ("09:06:00", 2.02), ("09:07:00", 1.98)]
    log.write_text("".join(_decode_line(t, a) for t, a in steady))
    code, dummy, dummy2 = run(mocker, {"log_source": "file", "log_path": str(log)}, mtp_routes)
    res = out(capsys)
    # 8 lines -> quarters of 2: first = median(2.00, 2.10) = 2.05, last = median(2.02, 1.98) = 2.00; -0.05 / 2.05 = -2.44%
    trend = res["accept_length_trend"]
    assert (trend["first"], trend["last"], trend["change_fraction"], trend["falling"]) == (2.05, 2.0, -0.0244, False)
    assert code == 0 and "accept_length_falling" not in [w["key"] for w in res["warnings_found"]]


def test_no_trend_from_fewer_than_four_lines(mocker, capsys, mtp_routes, tmp_path):
    log = tmp_path / "server.log"
    log.write_text("".join(_decode_line(t, a) for t, a in DECAY[:3]))
    code, dummy, dummy2 = run(mocker, {"log_source": "file", "log_path": str(log)}, mtp_routes)
    assert out(capsys)["accept_length_trend"] is None


def test_probe_timeout_is_named_a_stall(mocker, capsys, sg, mtp_routes, tmp_path):
    """Issue 14: a stalled stream during verify ended in "no accept length ... (enable probe, metrics or logs)"."""
    routes = dict(mtp_routes)
    routes["/generate"] = (-1, "Request failed: <urlopen error timed out>")
    routes["/metrics"] = (404, "")
    routes["/server_info"] = (200, json.dumps({"speculative_algorithm": "EAGLE", "speculative_num_draft_tokens": 2, "model_path": "/m"}))
    log = tmp_path / "server.log"
    log.write_text(_decode_line("09:14:02", 2.0, gen=0.0).replace("accept len: 2.00, accept rate: 1.00, ", ""))
    code, dummy, dummy2 = run(mocker, {"log_source": "file", "log_path": str(log), "timeout": 30}, routes)
    res = out(capsys)
    # loaded is unknown too: this log window holds no Load weight end. line and no accepted token proves a draft
    assert code == 1 and res["failed_verdicts"] == ["loaded", "accepting"]
    acc = res["verdicts"]["accepting"]
    assert acc["reason"] == ("generation stalled: the probe /generate (256 tokens) got no answer within timeout=30 s although /health "
                             "answered 200, so the server accepts requests but stopped generating (a hung scheduler or a stalled "
                             "stream), or makes fewer than 8.5 tok/s; last Decode line in the log: 2026-11-20 09:14:02 (0.0 tok/s, "
                             "#running-req 1). Read the server log around that time; restart the server, or raise timeout if it is only "
                             "that slow")   # 256 tokens / 30 s = 8.53 tok/s
    assert acc["evidence"]["probe_failure"] == "stall"
    assert "no accept length" not in res["msg"]


def test_probe_stall_fails_even_when_older_evidence_has_an_accept_length(mocker, capsys, mtp_routes):
    routes = dict(mtp_routes)
    routes["/generate"] = (-1, "Request failed: <urlopen error timed out>")
    code, dummy, dummy2 = run(mocker, {}, routes)
    res = out(capsys)
    acc = res["verdicts"]["accepting"]
    assert code == 1 and acc["evidence"]["probe_failure"] == "stall"
    assert acc["evidence"]["sources"] == {"metrics": 2.0, "server_info": 1.98}   # kept as evidence, but a stalled server fails
    assert "last Decode line in the log: none read" in acc["reason"]


def test_probe_connection_refused_is_an_error_not_a_stall(mocker, capsys, mtp_routes):
    routes = dict(mtp_routes)
    routes["/generate"] = (-1, "")
    routes["/metrics"] = (404, "")
    routes["/server_info"] = (200, json.dumps({"speculative_algorithm": "EAGLE", "model_path": "/m"}))
    code, dummy, dummy2 = run(mocker, {}, routes)
    acc = out(capsys)["verdicts"]["accepting"]
    assert acc["evidence"]["probe_failure"] == "error"
    assert acc["reason"].startswith("the probe /generate failed: probe generation: no HTTP answer from http://127.0.0.1:30000/generate "
                                    "(Request failed: <urlopen error [Errno 111] Connection refused>)")


def test_report_lines_written_by_hand():
    result = {"passed": True, "server_version": "0.5.9", "speculation": "on", "accept_length": 2.0, "accept_length_source": "probe",
              "accept_rate": 1.0, "num_draft_tokens": 2, "gen_throughput": 120.5, "gen_throughput_source": "logs",
              "probe_tok_per_s": 80.0, "draft_class": "DeepseekV3ForCausalLMNextN", "draft_mem_gb": {"0": 1.5, "1": 1.5},
              "verdicts": {"ready": {"status": "pass", "reason": "/health answered 200"},
                           "accepting": {"status": "pass", "reason": "accept length 2.0 >= 1.2"}},
              "warnings_found": [{"key": "max_running_requests_capped"}]}
    assert speculative_check.report_lines(result) == [
        "PASS (SGLang 0.5.9, speculation on)",
        "accept length 2.0 (probe), accept rate 1.0 with 2 draft tokens",
        "gen throughput 120.5 tok/s (logs), probe 80.0 tok/s",
        "draft DeepseekV3ForCausalLMNextN, 1.5 GB on 2 rank(s)",
        "ready: pass: /health answered 200",
        "accepting: pass: accept length 2.0 >= 1.2",
        "warnings: max_running_requests_capped",
    ]


def test_report_lines_of_a_server_that_never_answered():
    assert speculative_check.report_lines({"passed": False, "verdicts": {}}) == ["FAIL (SGLang ?, speculation unknown)", "warnings: "]


# ---------------------------------------------------------------------------------------------- adaptive (SGLang 0.5.14+)
# SGLang logs "speculative_adaptive disabled: <reason>. Falling back to static speculative params." while it resolves the
# server args (arg_groups/speculative_hook.py _maybe_disable_adaptive), i.e. BEFORE that run's server_args= line.
DISABLED = ("[2026-11-20 09:14:01] speculative_adaptive disabled: speculative_eagle_topk=4 (only topk=1 is supported). "
            "Falling back to static speculative params.")
SWITCH = "[2026-11-20 09:20:00] Adaptive spec params updated: steps 3 -> 1 (ema_accept_len=0.42)"
EXPECTED_ADAPTIVE = {"speculative_algorithm": "NEXTN", "tp_size": 4, "speculative_adaptive": True}


def _adaptive_routes(mtp_routes, sg, reported):
    info = json.loads((sg / "server_info-mtp-v0.5.9.json").read_text())
    info["speculative_adaptive"] = reported
    return dict(mtp_routes, **{"/server_info": (200, json.dumps(info))})


def test_adaptive_disabled_at_startup_fails_with_the_line(mocker, capsys, sg, mtp_routes, tmp_path):
    # an older run's lines first, then the new start: its disabled line precedes its server_args= line
    older = (sg / "qwen35-122b-mtp-tp4-v0.5.9.log").read_text()
    log = tmp_path / "server.log"
    log.write_text(older + DISABLED + "\n" + older)
    # /server_info says true here on purpose: the log line decides
    code, dummy, dummy2 = run(mocker, {"log_source": "file", "log_path": str(log), "expected": EXPECTED_ADAPTIVE},
                              _adaptive_routes(mtp_routes, sg, True))
    res = out(capsys)
    assert code == 1 and res["failed_verdicts"] == ["as_intended"]
    verdict = res["verdicts"]["as_intended"]
    assert verdict["reason"] == ("SGLang switched adaptive speculative decoding off at startup and runs static: 'speculative_adaptive "
                                 "disabled: speculative_eagle_topk=4 (only topk=1 is supported). Falling back to static speculative params.'")
    assert verdict["evidence"]["adaptive_disabled"]["reason"] == "speculative_eagle_topk=4 (only topk=1 is supported)"


def test_adaptive_disabled_line_of_an_older_run_does_not_count(mocker, capsys, sg, mtp_routes, tmp_path):
    older = (sg / "qwen35-122b-mtp-tp4-v0.5.9.log").read_text()
    log = tmp_path / "server.log"
    log.write_text(DISABLED + "\n" + older + older + SWITCH + "\n")
    code, dummy, dummy2 = run(mocker, {"log_source": "file", "log_path": str(log), "expected": EXPECTED_ADAPTIVE},
                              _adaptive_routes(mtp_routes, sg, True))
    res = out(capsys)
    assert code == 0, res.get("msg")
    verdict = res["verdicts"]["as_intended"]
    assert verdict["reason"] == ("3 server args match (speculative_adaptive, speculative_algorithm, tp_size); adaptive on: no "
                                 "'speculative_adaptive disabled' line at the server start; 1 step switch(es) logged, last 3 -> 1")
    assert verdict["evidence"]["adaptive"]["switches"] == [{"time": "2026-11-20 09:20:00", "from": 3, "to": 1, "ema_accept_len": 0.42}]


def test_adaptive_reported_off_fails_and_not_reported_is_unknown(mocker, capsys, sg, mtp_routes):
    code, dummy, dummy2 = run(mocker, {"expected": EXPECTED_ADAPTIVE}, _adaptive_routes(mtp_routes, sg, False))
    res = out(capsys)
    assert code == 1 and "speculative_adaptive expected True, running False" in res["verdicts"]["as_intended"]["reason"]
    code, dummy, dummy2 = run(mocker, {"expected": EXPECTED_ADAPTIVE}, mtp_routes)   # 0.5.9's server_info has no such field
    res = out(capsys)
    assert code == 1 and res["verdicts"]["as_intended"]["status"] == "unknown"
    assert "does not report speculative_adaptive" in res["verdicts"]["as_intended"]["reason"]
