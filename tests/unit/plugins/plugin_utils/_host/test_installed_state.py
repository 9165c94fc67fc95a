"""plugin_utils/_host/installed_state.py: the one read of a host's installed state, run here for real with /bin/sh, and its answers."""
from __future__ import annotations

import os
import subprocess

from ansible_collections.llmops.sglang.plugins.plugin_utils._host import installed_state as hs

SAMPLE = "\n".join([
    "pkg\tnvidia-open\tinstalled\t580.95.05-1",
    "pkg\tnvidia-driver-pinning-580\tconfig-files\t580-1",
    "file\t/lib/systemd/system/nvidia-cdi-refresh.path\t1",
    "file\t/sys/module/nouveau\t0",
    "glob\t/etc/apt/sources.list.d/cuda-*.list\t/etc/apt/sources.list.d/cuda-debian12-x86_64.list",
    "unit\tnvidia-persistenced.service\tloaded\tenabled\tactive",
    "unit\tnvidia-cdi-refresh.path\tloaded\tdisabled\tinactive",
    "unit\tnvidia-fabricmanager.service\tnot-found\t\tinactive",
    "something else",
])


def test_parse_and_answers():
    state = hs.parse_state(SAMPLE)
    assert state["packages"] == {"nvidia-open": "580.95.05-1"}
    assert hs.file_exists(state, "/lib/systemd/system/nvidia-cdi-refresh.path") is True
    assert hs.file_exists(state, "/sys/module/nouveau") is False
    assert hs.file_exists(state, "/not/read") is None
    assert hs.glob_matches(state, "/etc/apt/sources.list.d/cuda-*.list") == ["/etc/apt/sources.list.d/cuda-debian12-x86_64.list"]
    assert hs.unit_ready(state, "nvidia-persistenced.service")
    assert not hs.unit_ready(state, "nvidia-cdi-refresh.path") and hs.unit_exists(state, "nvidia-cdi-refresh.path")
    assert not hs.unit_exists(state, "nvidia-fabricmanager.service")
    assert not hs.unit_exists(state, "not-read.service") and not hs.unit_ready(state, "not-read.service")


def test_packages_missing_is_conservative():
    state = hs.parse_state(SAMPLE)
    # config-files is not installed; versions, architectures, module streams and globs are never taken as installed
    assert hs.packages_missing(["nvidia-open", "nvidia-driver-pinning-580", "nvidia-open=580.95.05-1", "nvidia-open:amd64",
                                "@nvidia-driver:580-open", "nvidia-*", "nvidia-open"], state) == [
        "nvidia-driver-pinning-580", "nvidia-open=580.95.05-1", "nvidia-open:amd64", "@nvidia-driver:580-open", "nvidia-*"]
    assert hs.packages_missing(["nvidia-open"], {}) == ["nvidia-open"]
    assert hs.packages_missing([], state) == []


def test_the_script_reads_files_and_globs(tmp_path):
    (tmp_path / "cuda-debian12-x86_64.list").write_text("deb x\n")
    (tmp_path / "cuda-ubuntu2404-x86_64.list").write_text("deb y\n")
    (tmp_path / "cuda-dir.list").mkdir()
    argv = hs.read_argv(packages=[], files=[str(tmp_path / "cuda-debian12-x86_64.list"), str(tmp_path / "absent")],
                        globs=[str(tmp_path / "cuda-*.list")])
    assert argv[:4] == ["/bin/sh", "-c", hs.READ_STATE_SCRIPT, "llmops-host-state"] and "--pkg" not in argv
    out = subprocess.run(argv, check=True, capture_output=True, text=True, env=dict(os.environ, LC_ALL="C")).stdout
    state = hs.parse_state(out)
    assert state["files"] == {str(tmp_path / "cuda-debian12-x86_64.list"): True, str(tmp_path / "absent"): False}
    assert hs.glob_matches(state, str(tmp_path / "cuda-*.list")) == sorted(
        [str(tmp_path / "cuda-debian12-x86_64.list"), str(tmp_path / "cuda-ubuntu2404-x86_64.list")])


def test_the_script_reads_installed_packages():
    """On this Debian controller dpkg knows dpkg itself; a name that is not a package is simply absent."""
    out = subprocess.run(hs.read_argv(packages=["dpkg", "no-such-package-llmops"]), check=True, capture_output=True, text=True).stdout
    state = hs.parse_state(out)
    if os.path.exists("/usr/bin/dpkg-query"):
        assert "dpkg" in state["packages"]
    assert "no-such-package-llmops" not in state["packages"]
    assert hs.packages_missing(["no-such-package-llmops"], state) == ["no-such-package-llmops"]
