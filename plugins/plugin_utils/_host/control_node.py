# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""Is a target host the Ansible control node itself? (standard library only; Linux /proc formats)

A reboot of the control node kills the play that asked for it. ``ansible_connection: local`` says so
plainly, but an inventory can also reach the controller over SSH (its LAN address, its host name), and
then only the addresses tell. This compares the target's own addresses (Ansible facts
``all_ipv4_addresses`` / ``all_ipv6_addresses``, read on the target) with the controller's (read here,
where the filter runs: the controller), and confirms a shared address with the machine id, because
private addresses repeat across machines (every Docker host has ``172.17.0.1`` on ``docker0``, every
libvirt host ``192.168.122.1``).

Controller addresses: ``/proc/net/fib_trie`` (IPv4: the ``/32 host LOCAL`` entries of the local table,
i.e. every address assigned to an interface of this network namespace) and ``/proc/net/if_inet6`` (IPv6:
32 hex digits per address, first column), plus whatever the host name resolves to. Machine id:
``/var/lib/dbus/machine-id``, else ``/etc/machine-id`` (the files, in the order, Ansible's ``machine_id`` fact reads).
"""
from __future__ import annotations

import ipaddress
import re
import socket

_FIB_LOCAL_RE = re.compile(r"\|--\s+(\d+\.\d+\.\d+\.\d+)\s*\n\s+/32 host LOCAL")


def normalize(address):
    """``"10.0.0.5"``, ``"fe80::1%eth0"``, ``"2001:DB8::1"`` -> the canonical text (``ipaddress``), None if not an address."""
    text = str(address or "").strip().split("%", 1)[0]
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return None


def is_identifying(address):
    """False for addresses every host has or that never leave a link: loopback, link-local, unspecified, multicast."""
    ip = ipaddress.ip_address(address)
    return not (ip.is_loopback or ip.is_link_local or ip.is_unspecified or ip.is_multicast)


def parse_fib_trie(text):
    """IPv4 addresses assigned to this network namespace, from the text of ``/proc/net/fib_trie`` (sorted, unique)."""
    return sorted(set(_FIB_LOCAL_RE.findall(text)))


def parse_if_inet6(text):
    """IPv6 addresses from the text of ``/proc/net/if_inet6`` (``<32 hex> <ifindex> <prefix> <scope> <flags> <name>``)."""
    found = set()
    for line in text.splitlines():
        fields = line.split()
        if fields and re.match(r"^[0-9a-fA-F]{32}$", fields[0]):
            raw = fields[0]
            found.add(str(ipaddress.ip_address(":".join(raw[i:i + 4] for i in range(0, 32, 4)))))
    return sorted(found)


def _read(path):
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError):
        return ""


def controller_addresses(proc="/proc"):
    """Every address of the machine running this code (the controller, when called from a filter), sorted."""
    found = set(parse_fib_trie(_read(proc + "/net/fib_trie"))) | set(parse_if_inet6(_read(proc + "/net/if_inet6")))
    try:
        for info in socket.getaddrinfo(socket.gethostname(), None):
            found.add(normalize(info[4][0]))
    except (socket.error, UnicodeError):
        pass
    return sorted(a for a in found if a)


def controller_machine_id(paths=("/var/lib/dbus/machine-id", "/etc/machine-id")):
    """The controller's machine id (32 hex digits) or None, read in the order Ansible's ``machine_id`` fact reads the
    target's (ansible ``facts/system/platform.py``: the D-Bus copy first), so both sides name the same file."""
    for path in paths:
        text = _read(path).strip().splitlines()
        if text and text[0].strip():
            return text[0].strip()
    return None


def control_node_match(target_addresses, controller_addrs, target_machine_id=None, controller_mid=None):
    """Decide whether the target is the controller from addresses (and machine ids when both are known).

    ``target_addresses``: the target's addresses (list of str; facts ``all_ipv4_addresses`` +
    ``all_ipv6_addresses``); ``controller_addrs``: the controller's (see :func:`controller_addresses`).
    Loopback, link-local, unspecified and multicast addresses are ignored (every host has them).

    Returns ``{"is_control_node": bool, "shared": [addresses both have], "reason": str}``:
    no shared address -> not the controller; a shared address and equal machine ids, or a shared address with a
    machine id unknown on either side -> the controller (refusing a reboot is the safe error); a shared address
    with different machine ids -> not the controller (a private address that repeats across machines).
    """
    target = set(a for a in (normalize(x) for x in (target_addresses or [])) if a and is_identifying(a))
    mine = set(a for a in (normalize(x) for x in (controller_addrs or [])) if a and is_identifying(a))
    shared = sorted(target & mine)
    if not shared:
        return {"is_control_node": False, "shared": [], "reason": "the host shares no address with the controller"}
    if target_machine_id and controller_mid and str(target_machine_id).strip() != str(controller_mid).strip():
        return {"is_control_node": False, "shared": shared,
                "reason": "the host shares %s with the controller but its machine id differs (a private address that repeats "
                          "across machines, such as a container bridge)" % ", ".join(shared)}
    how = ("and the same machine id %s" % controller_mid) if target_machine_id and controller_mid else "(machine id not known on both sides)"
    return {"is_control_node": True, "shared": shared,
            "reason": "this host is the control node: it has the controller's address %s %s" % (", ".join(shared), how)}
