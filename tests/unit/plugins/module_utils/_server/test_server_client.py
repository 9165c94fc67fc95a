"""Tests of plugins/module_utils/_server/client.py with open_url / fetch_url mocked."""
from __future__ import annotations

import io
import json
from urllib.error import HTTPError, URLError

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils._server import client as A
from ansible_collections.llmops.sglang.plugins.module_utils._bench.sse import iter_sse_payloads


class FakeResp(object):
    def __init__(self, body, code=200):
        self._body = body if isinstance(body, bytes) else body.encode("utf-8")
        self.code = code

    def read(self):
        return self._body

    def getcode(self):
        return self.code


def http_error(url, code, body=b""):
    return HTTPError(url, code, "status %d" % code, {}, io.BytesIO(body))


class Router(object):
    """open_url stand-in: ``routes[(method, path)]`` is a list of answers consumed in order (last one repeats)."""

    def __init__(self, routes):
        self.routes = routes
        self.calls = []

    def __call__(self, url, data=None, headers=None, method=None, timeout=None, validate_certs=True, use_proxy=True):
        path = url.split("30000", 1)[1]
        self.calls.append({"method": method, "path": path, "data": json.loads(data) if data else None, "headers": headers,
                           "timeout": timeout, "use_proxy": use_proxy})
        answers = self.routes.get((method, path))
        if not answers:
            raise http_error(url, 404, b'{"detail":"Not Found"}')
        answer = answers.pop(0) if len(answers) > 1 else answers[0]
        if isinstance(answer, Exception):
            raise answer
        if isinstance(answer, tuple):
            code, body = answer
            if code >= 400:
                raise http_error(url, code, body.encode())
            return FakeResp(body, code)
        return FakeResp(answer)


@pytest.fixture
def fixtures_sglang(fixtures_dir):
    return fixtures_dir / "sglang"


def make(mocker, routes, **kwargs):
    router = Router(routes)
    mocker.patch.object(A, "open_url", side_effect=router)
    return A.SGLangClient("http://127.0.0.1:30000", **kwargs), router


# ---------------------------------------------------------------------------------------------

def test_server_info_fixture_and_derived_values(mocker, fixtures_sglang):
    body = (fixtures_sglang / "server_info-mtp-v0.5.9.json").read_text()
    client, router = make(mocker, {("GET", "/server_info"): [body]})
    endpoint, info = client.server_info()
    assert endpoint == "/server_info"
    assert info["speculative_algorithm"] == "EAGLE"
    assert info["speculative_num_draft_tokens"] == 2 and info["tp_size"] == 4 and info["version"] == "0.5.9"
    assert A.avg_spec_accept_length(info) == 1.98
    assert A.last_gen_throughput(info) == 135.04
    assert router.calls[0]["use_proxy"] is False  # loopback never goes through a proxy


def test_server_info_no_spec_fixture(mocker, fixtures_sglang):
    body = (fixtures_sglang / "server_info-no-spec-v0.5.9.json").read_text()
    client, dummy = make(mocker, {("GET", "/server_info"): [body]})
    info = client.server_info()[1]
    assert info["speculative_algorithm"] is None and info["speculative_num_draft_tokens"] is None
    assert A.avg_spec_accept_length(info) is None
    assert A.last_gen_throughput(info) == 110.21
    assert info["max_total_num_tokens"] == 1310720


def test_server_info_falls_back_to_get_server_info_on_404(mocker):
    client, router = make(mocker, {("GET", "/get_server_info"): ['{"speculative_algorithm": "EAGLE", "version": "0.5.4"}']})
    endpoint, info = client.server_info()
    assert endpoint == "/get_server_info" and info["version"] == "0.5.4"
    assert [c["path"] for c in router.calls] == ["/server_info", "/get_server_info"]


def test_server_info_pd_router_is_unwrapped(mocker):
    client, dummy = make(mocker, {("GET", "/server_info"): ['{"decode": [{"model_path": "/m", "tp_size": 8}], "prefill": []}']})
    assert client.server_info()[1] == {"model_path": "/m", "tp_size": 8}


def test_server_info_500_is_not_retried_on_old_endpoint(mocker):
    client, router = make(mocker, {("GET", "/server_info"): [(500, "Internal Server Error")]})
    with pytest.raises(A.SGLangHTTPError, match=r"server info: http://127.0.0.1:30000/server_info answered HTTP 500: Internal") as err:
        client.server_info()
    assert err.value.status == 500
    assert len(router.calls) == 1


def test_get_json_rejects_non_json(mocker):
    client, dummy = make(mocker, {("GET", "/model_info"): ["<html>proxy</html>"]})
    with pytest.raises(A.SGLangHTTPError, match="not JSON"):
        client.model_info()


def test_model_info_falls_back(mocker):
    client, dummy = make(mocker, {("GET", "/get_model_info"): ['{"model_path": "/m", "architectures": ["X"]}']})
    assert client.model_info() == ("/get_model_info", {"model_path": "/m", "architectures": ["X"]})


def test_api_key_header(mocker):
    client, router = make(mocker, {("GET", "/server_info"): ["{}"]}, api_key="s3cret")
    client.server_info()
    assert router.calls[0]["headers"]["Authorization"] == "Bearer s3cret"


def test_connection_refused_is_status_minus_one(mocker):
    client, dummy = make(mocker, {("GET", "/server_info"): [URLError(ConnectionRefusedError(111, "Connection refused"))]})
    with pytest.raises(A.SGLangHTTPError, match=r"no HTTP answer from http://127.0.0.1:30000/server_info \(connection failure: .*refused"):
        client.server_info()


# ---------------------------------------------------------------------------------------------
# readiness

class FakeClock(object):
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def test_wait_ready_retries_503_then_200(mocker):
    client, router = make(mocker, {("GET", "/health"): [(503, ""), (503, ""), URLError("reset"), ("")]})
    clock = FakeClock()
    res = client.wait_ready(timeout_s=60, interval_s=5, sleep=clock.sleep, clock=clock)
    assert res["ready"] is True
    assert [a["status"] for a in res["attempts"]] == [503, 503, -1, 200]
    assert res["status_counts"] == {"503": 2, "-1": 1, "200": 1}
    assert res["elapsed_s"] == 15.0


def test_wait_ready_times_out_with_statuses(mocker):
    client, dummy = make(mocker, {("GET", "/health"): [(503, "")]})
    clock = FakeClock()
    with pytest.raises(A.SGLangNotReady) as err:
        client.wait_ready(timeout_s=20, interval_s=5, sleep=clock.sleep, clock=clock)
    exc = err.value
    # polls at t = 0, 5, 10, 15 and 20 (the deadline itself); the next one (25) would be past it
    assert [a["t_s"] for a in exc.attempts] == [0.0, 5.0, 10.0, 15.0, 20.0]
    assert "did not answer 200 within 20 s (5 polls, statuses {'503': 5}" in str(exc)
    assert exc.as_dict()["status_counts"] == {"503": 5}


def test_wait_ready_stops_on_401(mocker):
    client, dummy = make(mocker, {("GET", "/health"): [(401, '{"error": "Unauthorized"}')]})
    clock = FakeClock()
    with pytest.raises(A.SGLangNotReady, match="answered HTTP 401, which is not retried"):
        client.wait_ready(timeout_s=60, interval_s=5, sleep=clock.sleep, clock=clock)
    assert clock.now == 0.0


def test_wait_ready_zero_timeout_polls_once(mocker):
    client, router = make(mocker, {("GET", "/health"): [(503, "")]})
    clock = FakeClock()
    with pytest.raises(A.SGLangNotReady):
        client.wait_ready(timeout_s=0, interval_s=5, sleep=clock.sleep, clock=clock)
    assert len(router.calls) == 1


# ---------------------------------------------------------------------------------------------
# probe

def test_generate_probe_payload_and_spec(mocker):
    answer = {"text": "1, 2, 3", "output_ids": [16, 11, 17],
              "meta_info": {"id": "a", "finish_reason": {"type": "length", "length": 64}, "prompt_tokens": 9, "completion_tokens": 64,
                            "e2e_latency": 0.5, "spec_accept_rate": 0.9, "spec_accept_length": 2.8, "spec_verify_ct": 23,
                            "spec_accept_token_num": 41, "spec_draft_token_num": 69}}
    client, router = make(mocker, {("POST", "/generate"): [json.dumps(answer)]})
    res = client.generate_probe(prompt="hi", max_new_tokens=64)
    sent = router.calls[0]["data"]
    assert sent == {"text": "hi", "sampling_params": {"temperature": 0, "max_new_tokens": 64, "ignore_eos": True}, "stream": False}
    assert res["spec"]["accept_length"] == 2.8 and res["spec"]["verify_ct"] == 23
    assert res["tok_per_s"] == 128.0  # 64 tokens / 0.5 s
    assert res["completion_tokens"] == 64


def test_generate_probe_error_object(mocker):
    client, dummy = make(mocker, {("POST", "/generate"): ['{"error": {"message": "boom"}}']})
    with pytest.raises(A.SGLangHTTPError, match="without meta_info"):
        client.generate_probe()


def test_generate_probe_http_400(mocker):
    client, dummy = make(mocker, {("POST", "/generate"): [(400, '{"error": {"message": "bad"}}')]})
    with pytest.raises(A.SGLangHTTPError, match="probe generation: .* answered HTTP 400"):
        client.generate_probe()


def test_generate_stream_fixture_final_meta_info(fixtures_sglang):
    payloads = [p for p in iter_sse_payloads((fixtures_sglang / "generate-stream-mtp.sse").read_bytes()) if p != b"[DONE]"]
    assert len(payloads) == 4
    final = json.loads(payloads[-1])["meta_info"]
    spec = A.spec_fields_from_meta_info(final)
    assert spec["accept_length"] == 2.0
    assert spec["accept_rate_reported"] == 1.0
    assert spec["verify_ct"] == 3 and spec["completion_tokens"] == 6
    assert spec["accept_token_num"] == 3 and spec["draft_token_num"] == 3
    assert spec["e2e_latency_s"] == 0.0481
    assert spec["finish_reason"] == {"type": "stop", "matched": 151645}
    # the chunks before the last carry no spec field
    assert A.spec_fields_from_meta_info(json.loads(payloads[0])["meta_info"])["raw"] == {}


def test_completions_stream_fixture_has_no_spec_fields(fixtures_sglang):
    payloads = [json.loads(p) for p in iter_sse_payloads((fixtures_sglang / "completions-stream.sse").read_bytes()) if p != b"[DONE]"]
    final = payloads[-1]
    assert final["usage"] == {"prompt_tokens": 17, "completion_tokens": 5, "total_tokens": 22}
    assert "meta_info" not in final
    assert A.spec_fields_from_meta_info(final.get("meta_info"))["accept_length"] is None


def test_spec_fields_computed_from_counts_0523_names():
    spec = A.spec_fields_from_meta_info({"completion_tokens": 100, "spec_verify_ct": 40, "spec_num_correct_drafts": 60,
                                         "spec_num_proposed_drafts": 120})
    assert spec["accept_length"] == 2.5 and spec["accept_token_num"] == 60 and spec["draft_token_num"] == 120


# ---------------------------------------------------------------------------------------------
# metrics and URL validation

def test_metrics_404_means_disabled(mocker):
    client, dummy = make(mocker, {})
    assert client.metrics_text() is None


@pytest.mark.parametrize("url", ["127.0.0.1:30000", "ftp://x", "", "http://", "http://h:notaport"])
def test_bad_url(url):
    with pytest.raises(ValueError, match="give one like http://127.0.0.1:30000"):
        A.SGLangClient(url)


def test_remote_host_uses_proxy_settings():
    assert A.SGLangClient("http://gpu1.example:30000/").use_proxy is True
    assert A.SGLangClient("http://gpu1.example:30000/").base_url == "http://gpu1.example:30000"


# ---------------------------------------------------------------------------------------------
# through fetch_url (inside a module)

def test_fetch_url_path(mocker):
    module = mocker.MagicMock()
    fetch = mocker.patch.object(A, "fetch_url", return_value=(None, {"status": 503, "msg": "Service Unavailable", "body": b""}))
    client = A.SGLangClient("http://127.0.0.1:30000", module=module, api_key="k")
    answer = client.health()
    assert answer["status"] == 503 and answer["reason"] == "Service Unavailable"
    kwargs = fetch.call_args[1]
    assert kwargs["method"] == "GET" and kwargs["headers"]["Authorization"] == "Bearer k" and kwargs["use_proxy"] is False
    fetch.return_value = (FakeResp(b'{"version": "0.5.9"}'), {"status": 200, "msg": "OK"})
    assert client.server_info() == ("/server_info", {"version": "0.5.9"})
    fetch.return_value = (None, {"status": -1, "msg": "Request failed: <urlopen error [Errno 111] Connection refused>"})
    with pytest.raises(A.SGLangHTTPError, match="no HTTP answer .*Connection refused"):
        client.server_info()
