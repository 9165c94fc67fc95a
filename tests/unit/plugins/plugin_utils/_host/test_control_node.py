"""Tests of plugins/plugin_utils/_host/control_node.py and the reboot_policy filter's control-node check by address.

The /proc texts are written here in the kernel's formats (/proc/net/fib_trie, /proc/net/if_inet6 of a Linux 6.1 host
with eth0 192.0.2.2/24 and fd00::2/64, a podman0 bridge 10.88.0.1/16, and loopback)."""
from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.sglang.plugins.filter import host_policy as gpu
from ansible_collections.llmops.sglang.plugins.plugin_utils._host import control_node as cn

FIB_TRIE = """Main:
  +-- 0.0.0.0/0 3 0 5
     |-- 0.0.0.0
        /0 universe UNICAST
     +-- 10.88.0.0/16 2 0 2
        |-- 10.88.0.0
           /16 link UNICAST
        |-- 10.88.0.1
           /32 host LOCAL
     +-- 192.0.2.0/24 2 0 2
        |-- 192.0.2.0
           /24 link UNICAST
        |-- 192.0.2.2
           /32 host LOCAL
        |-- 192.0.2.255
           /32 link BROADCAST
     +-- 127.0.0.0/8 2 0 2
        +-- 127.0.0.0/31 1 0 0
           |-- 127.0.0.0
              /8 host LOCAL
           |-- 127.0.0.1
              /32 host LOCAL
Local:
  +-- 0.0.0.0/0 3 0 5
     |-- 0.0.0.0
        /0 universe UNICAST
     +-- 192.0.2.0/24 2 0 2
        |-- 192.0.2.2
           /32 host LOCAL
"""
IF_INET6 = """00000000000000000000000000000001 01 80 10 80       lo
fd000000000000000000000000000002 02 40 00 80     eth0
fe8000000000000000fc00fffe000001 02 40 20 80     eth0
"""
MID = "3d1219c7c4c5404aaa1f6d2a48adfda4"


def test_parse_fib_trie_reads_the_local_host_entries_only():
    # 10.88.0.0 (network), 192.0.2.255 (broadcast) and 127.0.0.0/8 are not /32 host LOCAL
    assert cn.parse_fib_trie(FIB_TRIE) == ["10.88.0.1", "127.0.0.1", "192.0.2.2"]


def test_parse_if_inet6():
    assert cn.parse_if_inet6(IF_INET6) == ["::1", "fd00::2", "fe80::fc:ff:fe00:1"]


def test_controller_addresses_from_a_proc_tree(tmp_path):
    (tmp_path / "net").mkdir()
    (tmp_path / "net" / "fib_trie").write_text(FIB_TRIE)
    (tmp_path / "net" / "if_inet6").write_text(IF_INET6)
    found = cn.controller_addresses(proc=str(tmp_path))
    assert {"10.88.0.1", "127.0.0.1", "192.0.2.2", "::1", "fd00::2", "fe80::fc:ff:fe00:1"} <= set(found)


def test_controller_machine_id(tmp_path):
    (tmp_path / "machine-id").write_text(MID + "\n")
    assert cn.controller_machine_id((str(tmp_path / "missing"), str(tmp_path / "machine-id"))) == MID
    assert cn.controller_machine_id((str(tmp_path / "missing"),)) is None


CONTROLLER = ["10.88.0.1", "127.0.0.1", "192.0.2.2", "::1", "fd00::2", "fe80::fc:ff:fe00:1"]


def test_ssh_to_the_controller_itself_matches():
    match = cn.control_node_match(["192.0.2.2", "10.88.0.1"], CONTROLLER, MID, MID)
    assert match["is_control_node"] is True and match["shared"] == ["10.88.0.1", "192.0.2.2"]
    assert match["reason"] == "this host is the control node: it has the controller's address 10.88.0.1, 192.0.2.2 and the same machine id " + MID


def test_ipv6_written_differently_still_matches():
    assert cn.control_node_match(["FD00:0:0::2%eth0"], CONTROLLER)["shared"] == ["fd00::2"]


def test_loopback_and_link_local_never_identify():
    match = cn.control_node_match(["127.0.0.1", "::1", "fe80::fc:ff:fe00:1"], CONTROLLER, None, MID)
    assert match == {"is_control_node": False, "shared": [], "reason": "the host shares no address with the controller"}


def test_a_repeated_private_address_with_another_machine_id_is_another_machine():
    """Every podman host has 10.88.0.1 on podman0: a GPU host with its own machine id is not the controller."""
    match = cn.control_node_match(["198.51.100.7", "10.88.0.1"], CONTROLLER, "0" * 32, MID)
    assert match["is_control_node"] is False and match["shared"] == ["10.88.0.1"]
    assert "machine id differs" in match["reason"]


def test_a_shared_address_without_machine_ids_is_refused_to_be_safe():
    match = cn.control_node_match(["192.0.2.2"], CONTROLLER, None, MID)
    assert match["is_control_node"] is True and "(machine id not known on both sides)" in match["reason"]


def test_filter_refuses_a_reboot_of_the_controller_over_ssh(monkeypatch):
    monkeypatch.setattr(cn, "controller_addresses", lambda proc="/proc": list(CONTROLLER))
    monkeypatch.setattr(cn, "controller_machine_id", lambda paths=None: MID)
    with pytest.raises(AnsibleFilterError) as info:
        gpu.reboot_policy(True, True, "ssh", "nvidia_driver_reboot_allowed", addresses=["192.0.2.2", "fe80::1"], machine_id=MID)
    assert str(info.value) == ("Refusing nvidia_driver_reboot_allowed=True: this host is the control node: it has the controller's "
                               "address 192.0.2.2 and the same machine id %s: rebooting it would kill the running play. "
                               "Fix: reboot the host by hand, or run the play from another machine over ssh." % MID)
    # another machine: the reboot goes ahead, and the result says why it is not the controller
    other = gpu.reboot_policy(True, True, "ssh", "nvidia_driver_reboot_allowed", addresses=["198.51.100.7"], machine_id="f" * 32)
    assert other["action"] == "reboot" and other["control_node"]["is_control_node"] is False
    # not allowed: pending, whatever the addresses say (nothing is rebooted)
    assert gpu.reboot_policy(True, False, "ssh", addresses=["192.0.2.2"], machine_id=MID)["action"] == "pending"
    # no addresses given (facts not gathered): only the connection decides, as before
    assert gpu.reboot_policy(True, True, "ssh")["control_node"] is None
