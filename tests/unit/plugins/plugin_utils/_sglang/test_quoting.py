"""Destination checks (plugins/plugin_utils/_sglang/quoting.py): each bad value refused for the place it would be written,
the message naming the variable; quoting checked against what systemd and podman read (hand-written expectations)."""
from __future__ import annotations

import pytest

from ansible_collections.llmops.sglang.plugins.plugin_utils._sglang import quoting as sd
from ansible_collections.llmops.sglang.plugins.plugin_utils._sglang import launch as sa

GOOD = {
    "sglang_server_name": "sglang-server", "sglang_server_version": "0.5.9", "sglang_server_image": "lmsysorg/sglang:v0.5.9-cu130-runtime",
    "sglang_server_image_force": False, "sglang_server_engine_bin": "", "sglang_server_model_path": "/models/Qwen3.5-122B-A10B",
    "sglang_server_config_dir": "/etc/sglang", "sglang_server_hf_cache_dir": "/var/lib/sglang/huggingface", "sglang_server_model_dir": "/models",
    "sglang_server_nccl_env_file": "/etc/llmops/nccl.env", "sglang_server_unit_environment": {"CONTAINERS_CONF": "/etc/c.conf"},
    "sglang_server_extra_env": {"SGLANG_LOG_MS": "1"}, "sglang_server_container_options": ["-v", "/a:/a"],
    "sglang_server_extra_args": ["--enable-cache-report"], "sglang_server_ulimits": ["memlock=-1"],
    "sglang_server_api_key": "sk-test-123", "sglang_server_hf_token": "hf_abc",
}
SECRET = "sk-FAKE-0123456789"

# (id, changes, variable named in the message, words the message must contain). Each is one bad input from issue 14.
BAD_DESTINATIONS = [
    ("model path newline", {"sglang_server_model_path": "/models/Qwen\nExecStartPre=/bin/touch /tmp/pwned"}, "sglang_server_model_path",
     "newline at position 12"),
    ("model path carriage return", {"sglang_server_model_path": "/models/Q\rX"}, "sglang_server_model_path", "carriage return"),
    ("served name tab", {"sglang_server_served_model_name": "a\tb"}, "sglang_server_served_model_name", "tab at position 1"),
    ("draft path NUL", {"sglang_server_speculative_draft_model_path": "/d\x00"}, "sglang_server_speculative_draft_model_path", "NUL"),
    ("api key newline", {"sglang_server_api_key": SECRET + "\nHF_TOKEN=evil"}, "sglang_server_api_key", "newline at position 18"),
    ("hf token newline", {"sglang_server_hf_token": "hf_x\nA=b"}, "sglang_server_hf_token", "newline at position 4"),
    ("extra env newline", {"sglang_server_extra_env": {"A": "1\nB=2"}}, "sglang_server_extra_env.A", "newline"),
    ("extra env bad name", {"sglang_server_extra_env": {"A B": "1"}}, "sglang_server_extra_env", "not a valid environment variable name"),
    ("unit env newline", {"sglang_server_unit_environment": {"X": "a\nExecStart=/bin/sh"}}, "sglang_server_unit_environment", "newline"),
    ("unit env bad name", {"sglang_server_unit_environment": {"1X": "a"}}, "sglang_server_unit_environment", "not a valid environment variable name"),
    ("container option newline", {"sglang_server_container_options": ["-v", "/a:/a\n"]}, "sglang_server_container_options", "newline"),
    ("extra arg newline", {"sglang_server_extra_args": ["--x\n--y"]}, "sglang_server_extra_args", "newline"),
    ("ulimit newline", {"sglang_server_ulimits": ["nofile=1\n"]}, "sglang_server_ulimits", "newline"),
    ("name newline", {"sglang_server_name": "s\nx"}, "sglang_server_name", "newline"),
    ("version newline", {"sglang_server_version": "0.5.9\nExecStartPre=/bin/true"}, "sglang_server_version", "not an SGLang version"),
    ("version with space", {"sglang_server_version": "0.5.9 beta"}, "sglang_server_version", "not an SGLang version"),
    ("engine bin relative", {"sglang_server_engine_bin": "podman"}, "sglang_server_engine_bin", "absolute path"),
    ("engine bin with shell", {"sglang_server_engine_bin": "/usr/bin/podman;id"}, "sglang_server_engine_bin", "absolute path"),
    ("config dir space", {"sglang_server_config_dir": "/etc/my sglang"}, "sglang_server_config_dir", "absolute path"),
    ("hf cache colon", {"sglang_server_hf_cache_dir": "/var/hf:/root"}, "sglang_server_hf_cache_dir", "':' and ',' separate fields"),
    ("model dir relative", {"sglang_server_model_dir": "models"}, "sglang_server_model_dir", "absolute path"),
    ("nccl env file newline", {"sglang_server_nccl_env_file": "/etc/n\n"}, "sglang_server_nccl_env_file", "newline"),
    ("image with spaces", {"sglang_server_image": "lmsysorg/sglang :v0.5.9"}, "sglang_server_image", "invalid image reference"),
    ("image upper case", {"sglang_server_image": "LMSYS/SGLang:v0.5.9"}, "sglang_server_image", "invalid image reference"),
    ("image newline", {"sglang_server_image": "lmsysorg/sglang:v0.5.9\nExecStart=x"}, "sglang_server_image", "invalid image reference"),
    ("image empty", {"sglang_server_image": ""}, "sglang_server_image", "invalid image reference"),
    ("image latest", {"sglang_server_image": "lmsysorg/sglang:latest"}, "sglang_server_image", "floating tag :latest"),
    ("image no tag", {"sglang_server_image": "lmsysorg/sglang"}, "sglang_server_image", "has no tag"),
    ("image nightly", {"sglang_server_image": "docker.io/lmsysorg/sglang:nightly"}, "sglang_server_image", "floating tag :nightly"),
    ("image bad digest", {"sglang_server_image": "lmsysorg/sglang@sha256:xyz"}, "sglang_server_image", "invalid image reference"),
]


@pytest.mark.parametrize("changes,variable,words", [c[1:] for c in BAD_DESTINATIONS], ids=[c[0] for c in BAD_DESTINATIONS])
def test_bad_value_refused_for_its_destination(changes, variable, words):
    values = dict(GOOD, **changes)
    with pytest.raises(sd.DestinationError) as info:
        sd.server_destinations(values)
    err = info.value
    assert err.variable == variable, str(err)
    assert words in str(err)
    assert str(err).startswith(variable + "=") and ". Fix: " in str(err)


def test_suite_has_the_issue_cases():
    assert len(BAD_DESTINATIONS) >= 30


def test_good_values_pass():
    assert sd.server_destinations(GOOD)["image"]["tag"] == "v0.5.9-cu130-runtime"


def test_secret_never_in_the_message():
    with pytest.raises(sd.DestinationError) as info:
        sd.server_destinations(dict(GOOD, sglang_server_api_key=SECRET + "\nHF_TOKEN=evil"))
    text = str(info.value)
    assert SECRET not in text and "evil" not in text and "FAKE" not in text
    # len("sk-FAKE-0123456789\nHF_TOKEN=evil") = 18 + 1 + 13 = 32
    assert "<redacted: 32 characters, newline at 18>" in text


def test_floating_tag_accepted_with_force_and_digest_pinned():
    assert sd.image_reference("localhost/sglang-sim:latest", force=True)["pinned"] is False
    ref = sd.image_reference("lmsysorg/sglang@sha256:" + "a" * 64)
    assert ref["pinned"] is True and ref["tag"] is None
    ref = sd.image_reference("registry.example.com:5000/team/sglang:v0.5.9-cu130")
    assert ref["domain"] == "registry.example.com:5000" and ref["path"] == "team/sglang" and ref["tag"] == "v0.5.9-cu130"


def test_unit_environment_quoting_as_systemd_reads_it():
    # systemd.exec(5) Environment=: one double-quoted word; \ and " escaped; % is a specifier (doubled).
    assert sd.unit_environment("A", 'x "q" \\ 50%', "v") == '"A=x \\"q\\" \\\\ 50%%"'
    assert sd.unit_value("/models/a%b", "v") == "/models/a%%b"


def test_systemd_env_file_quoting():
    lines = sd.systemd_env_file({"K": "plain-1.2", "S": "has space$x", "Q": "it's \"q\" $HOME `x` \\"}, {})
    assert lines == ["K=plain-1.2", 'Q="it\'s \\"q\\" \\$HOME \\`x\\` \\\\"', "S='has space$x'"]


def test_env_file_lines_are_literal():
    assert sd.env_file({"B": "a b 'c'", "A": "1"}, "v") == ["A=1", "B=a b 'c'"]


@pytest.mark.parametrize("gpus,count,cdi,words", [
    ([0, 7], 4, None, "index 7 does not exist: gpu_facts found 4 GPU(s) on this host (indices 0..3)"),
    ([0, 0], 4, None, "distinct"),
    (["a"], 4, None, "must be 'all' or a list"),
    ([-1], 4, None, "distinct indices >= 0"),
    ([2, 3], 4, ["nvidia.com/gpu=0", "nvidia.com/gpu=1", "nvidia.com/gpu=all"], "does not define nvidia.com/gpu=2, nvidia.com/gpu=3"),
    ("all", None, [], "does not define nvidia.com/gpu=all"),
])
def test_gpus_checked_against_the_host(gpus, count, cdi, words):
    with pytest.raises(sd.DestinationError) as info:
        sd.check_gpus(gpus, count, "cdi", cdi)
    assert info.value.variable == "sglang_server_gpus" and words in str(info.value)


def test_gpus_ok():
    assert sd.check_gpus([0, 3], 4, "cdi", ["nvidia.com/gpu=0", "nvidia.com/gpu=3"]) == ["nvidia.com/gpu=0", "nvidia.com/gpu=3"]
    assert sd.check_gpus("all", None, "cdi", None) == ["nvidia.com/gpu=all"]


def test_renderer_refuses_newline_in_model_path_and_systemd_exec():
    desc = {"model_path": "/models/Qwen\nExecStartPre=/bin/touch /tmp/pwned"}
    with pytest.raises(sa.SGLangArgsError) as info:
        sa.render_launch(desc, "0.5.9", {})
    assert info.value.variable == "sglang_server_model_path" and "newline at position 12" in str(info.value)  # len("/models/Qwen")
    with pytest.raises(sa.SGLangArgsError):
        sa.systemd_exec(["/usr/bin/podman", "run", "a\nb"])


def test_container_argv_refuses_bad_image_and_newline_volume():
    launch = {"argv": ["python3"]}
    with pytest.raises(sa.SGLangArgsError) as info:
        sa.render_container(launch, "s", "bad image:1")
    assert info.value.variable == "sglang_server_image" and "invalid image reference" in str(info.value)
    with pytest.raises(sa.SGLangArgsError) as info:
        sa.render_container(launch, "s", "img:1", volumes=["/a:/a\n"])
    assert "newline" in str(info.value)


@pytest.mark.parametrize("key,value,message", [
    ("port", "abc", "sglang_server_port='abc': must be a whole number. Fix: set sglang_server_port to a whole number such as 30000"),
    ("tp_size", 0, "sglang_server_tp_size=0: must be at least 1"),
    ("mem_fraction_static", 1.5, "sglang_server_mem_fraction_static=1.5: must be a fraction between 0 and 1"),
])
def test_renderer_messages_name_the_value(key, value, message):
    with pytest.raises(sa.SGLangArgsError) as info:
        sa.render_launch({"model_path": "/m", key: value}, "0.5.9", {})
    assert str(info.value).startswith(message)


def test_api_key_reaches_the_server_in_process_not_on_the_command_line(tmp_path):
    """The container runs `python3 -c LAUNCHER sglang.launch_server ...` with --env SGLANG_SERVER_API_KEY: the key is in
    no argv item of the unit/podman, and the launched module sees `--api-key <key>` at the end of sys.argv."""
    import json
    import subprocess
    import sys

    launch = sa.render_launch({"model_path": "/m", "api_key": "sk-FAKE-argv"}, "0.5.9", {})
    argv = sa.render_container(launch, "s", "img:1", pass_env=["HF_TOKEN"])
    assert "sk-FAKE-argv" not in " ".join(argv) and "--api-key" not in argv
    assert argv[argv.index("img:1") - 4:argv.index("img:1")] == ["--env", "HF_TOKEN", "--env", "SGLANG_SERVER_API_KEY"]
    tail = argv[argv.index("img:1") + 1:]
    assert tail[:2] == ["python3", "-c"] and tail[3:6] == ["sglang.launch_server", "--model-path", "/m"]
    # Run the launcher for real against a stand-in module that reports what it received.
    (tmp_path / "standin_server.py").write_text(
        "import json, os, sys\nprint(json.dumps({'argv': sys.argv[1:], 'env': os.environ.get('SGLANG_SERVER_API_KEY')}))\n")
    out = subprocess.run([sys.executable, "-c", tail[2], "standin_server", "--port", "1"], cwd=str(tmp_path), capture_output=True,
                         text=True, env={"SGLANG_SERVER_API_KEY": "sk-FAKE-argv", "PYTHONPATH": str(tmp_path)}, check=True)
    assert json.loads(out.stdout) == {"argv": ["--port", "1", "--api-key", "sk-FAKE-argv"], "env": None}


def test_no_api_key_keeps_the_plain_launch():
    launch = sa.render_launch({"model_path": "/m"}, "0.5.9", {})
    argv = sa.render_container(launch, "s", "img:1")
    assert argv[argv.index("img:1") + 1:argv.index("img:1") + 4] == ["python3", "-m", "sglang.launch_server"]
    assert "SGLANG_SERVER_API_KEY" not in argv


def test_readiness_module_reads_back_what_the_secret_file_writer_quoted(tmp_path):
    from ansible_collections.llmops.sglang.plugins.module_utils._server import systemd
    keys = {"A": "plain-1", "B": "with space $X", "C": "it's \"q\" `x` \\ $Y"}
    env_file = tmp_path / "s.env"
    env_file.write_text("# comment\n" + "\n".join(sd.systemd_env_file(keys, {})) + "\n")
    assert systemd.read_env_file(str(env_file)) == keys
    assert systemd.read_env_file(str(tmp_path / "missing")) == {}
