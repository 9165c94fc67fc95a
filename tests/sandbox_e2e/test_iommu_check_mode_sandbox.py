"""--check --diff of the iommu role on a real sandbox host (podman, Debian 12 image): the grub drop-in
change is shown and not written; a real run writes it; a second run changes nothing.

Needs root, podman and the image localhost/llmops-sandbox:bookworm, which the ``sandbox_images`` fixture builds
(tests/sandbox/build.sh, cached). Uses its own container (llmops-hostroles-check-<pid>) and removes it.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
IMAGE = "localhost/llmops-sandbox:bookworm"
PODMAN_ENV = dict(os.environ, CONTAINERS_CONF=str(REPO / "tests" / "sandbox" / "containers.conf"))
DROPIN = "/etc/default/grub.d/99-llmops-iommu.cfg"


def _podman(*args, check=True):
    return subprocess.run(["podman"] + list(args), env=PODMAN_ENV, capture_output=True, text=True, check=check, timeout=120)


pytestmark = pytest.mark.sandbox


@pytest.fixture(scope="module")
def sandbox_host(tmp_path_factory, sandbox_images):  # pylint: disable=unused-argument
    name = "llmops-hostroles-check-%d" % os.getpid()
    _podman("rm", "-f", name, check=False)
    _podman("run", "-d", "--name", name, "--hostname", name, "--privileged", "--systemd=always", IMAGE, "/sbin/init")
    try:
        for _attempt in range(60):
            state = _podman("exec", name, "systemctl", "is-system-running", check=False).stdout.strip()
            if state in ("running", "degraded"):
                break
            time.sleep(1)
        inv = tmp_path_factory.mktemp("inv")
        (inv / "group_vars").symlink_to(REPO / "inventories" / "sandbox" / "group_vars")
        (inv / "hosts.yml").write_text(
            "all:\n  children:\n    gpu_hosts:\n      hosts:\n        %s:\n          ansible_connection: containers.podman.podman\n"
            "          ansible_python_interpreter: /usr/bin/python3\n" % name)
        yield name, inv
    finally:
        _podman("rm", "-f", name, check=False)


def _play(inv, *extra):
    env = dict(PODMAN_ENV, ANSIBLE_NOCOLOR="1", ANSIBLE_CACHE_PLUGIN="memory",
               ANSIBLE_COLLECTIONS_PATH=str(REPO / ".collections"), ANSIBLE_CONFIG=str(REPO / "ansible.cfg"))
    cmd = [str(Path(sys.executable).with_name("ansible-playbook")), "-i", str(inv), "playbooks/host.yml", "--tags", "iommu"] + list(extra)
    proc = subprocess.run(cmd, cwd=str(REPO), env=env, capture_output=True, text=True, timeout=600, check=False)
    return proc.returncode, proc.stdout + proc.stderr


def _recap_changed(text):
    m = re.search(r"changed=(\d+)", text.split("PLAY RECAP")[-1])
    return int(m.group(1))


def test_check_diff_shows_the_dropin_without_writing_it(sandbox_host):
    name, inv = sandbox_host
    rc, text = _play(inv, "--check", "--diff")
    assert rc == 0, text
    assert "--- before" in text and "+++ after: " in text
    # the AMD SEV-SNP fixture host: auto strips passthrough/off tokens and the invalid amd_iommu=on
    assert "+    iommu=pt|iommu.passthrough=1|iommu=off|amd_iommu=off|intel_iommu=off|amd_iommu=on) ;;" in text
    assert "+# Managed by llmops.sglang: IOMMU kernel arguments." in text
    assert _podman("exec", name, "test", "-e", DROPIN, check=False).returncode == 1  # not written

    rc, text = _play(inv)
    assert rc == 0, text
    assert "update-grub is not installed on %s" % name in text  # says what it cannot do here
    content = _podman("exec", name, "cat", DROPIN).stdout
    assert content.startswith("# Managed by llmops.sglang: IOMMU kernel arguments.")

    rc, text = _play(inv, "--check", "--diff")
    assert rc == 0, text
    assert _recap_changed(text) == 0, text
    rc, text = _play(inv)
    assert rc == 0 and _recap_changed(text) == 0, text


def test_reboot_pending_stops_the_host_stage_and_clears_after(sandbox_host):
    """Forced passthrough on the SEV-SNP fixture host: /proc/cmdline lacks iommu=pt and the sandbox may not
    reboot, so the role records "reboot pending" and host.yml stops; going back to auto clears it."""
    name, inv = sandbox_host
    rc, text = _play(inv, "-e", "iommu_mode=passthrough", "-e", "iommu_force=true")
    assert rc != 0
    assert "REBOOT PENDING on %s: iommu changed what only a reboot applies" % name in text
    assert "iommu_force: true overrides" in text  # the dangerous override is said out loud
    marker = _podman("exec", name, "cat", "/var/lib/llmops/reboot-pending/iommu").stdout
    assert "missing=iommu=pt" in marker
    dropin = _podman("exec", name, "cat", DROPIN).stdout
    assert 'GRUB_CMDLINE_LINUX_DEFAULT="${GRUB_CMDLINE_LINUX_DEFAULT:+${GRUB_CMDLINE_LINUX_DEFAULT} }iommu=pt"' in dropin

    rc, text = _play(inv)
    assert rc == 0, text
    assert _podman("exec", name, "test", "-e", "/var/lib/llmops/reboot-pending/iommu", check=False).returncode == 1
