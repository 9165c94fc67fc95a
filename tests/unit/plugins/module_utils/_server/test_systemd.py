"""module_utils/_server/systemd.py: ``systemctl show`` parsed once, the unit state, the role's EnvironmentFile read back.

The ``systemctl show`` text is recorded from systemd 255 (Ubuntu 24.04) for a podman-run unit, shortened (ExecStartPre without its timestamps); expected values
are written out by hand.
"""
from __future__ import annotations

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils._server import systemd

RECORDED = """Type=simple
Restart=on-failure
NRestarts=3
ExecStartPre={ path=/usr/bin/podman ; argv[]=/usr/bin/podman rm -f sglang-server ; ignore_errors=yes ; pid=0 ; code=(null) ; status=0/0 }
ExecStart={ path=/usr/bin/podman ; argv[]=/usr/bin/podman run --rm --name sglang-server
 --env-file /etc/sglang/sglang-server.env ; ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }
Environment=A=1 B=2
Id=sglang-server.service
Description={weird description
LoadState=loaded
ActiveState=activating
SubState=auto-restart
UnitFileState=enabled

Failed to get properties: nothing
"""


def test_parse_the_recorded_output():
    props = systemd.parse_systemctl_show(RECORDED)
    assert props["NRestarts"] == "3"
    assert props["ActiveState"] == "activating" and props["SubState"] == "auto-restart"
    assert props["UnitFileState"] == "enabled" and props["LoadState"] == "loaded"
    assert props["Environment"] == "A=1 B=2"                     # split at the first = only
    assert props["Description"] == "{weird description"          # not an Exec* key: one line, however it starts
    assert props["ExecStart"] == ("{ path=/usr/bin/podman ; argv[]=/usr/bin/podman run --rm --name sglang-server\n"
                                  " --env-file /etc/sglang/sglang-server.env ; ignore_errors=no ; start_time=[n/a] ; "
                                  "stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }")
    assert props["ExecStartPre"].startswith("{ path=/usr/bin/podman ; argv[]=/usr/bin/podman rm -f sglang-server ;")
    assert "Failed to get properties: nothing" not in props.values() and len(props) == 12


@pytest.mark.parametrize("text, expected", [
    ("", {}),
    ("ActiveState=active\nActiveState=failed\n", {"ActiveState": "failed"}),   # the last one wins
    ("UnitFileState=\n", {"UnitFileState": ""}),
    ("ExecStart={ unterminated\nmore", {"ExecStart": "{ unterminated\nmore"}),
])
def test_parse_edge_cases(text, expected):
    assert systemd.parse_systemctl_show(text) == expected


def test_unit_state_from_the_recorded_output():
    assert systemd.unit_state_from_show(systemd.parse_systemctl_show(RECORDED)) == {
        "active_state": "activating", "sub_state": "auto-restart", "restarts": 3}


@pytest.mark.parametrize("props, expected", [
    ({}, {"active_state": "unknown", "sub_state": "", "restarts": 0}),
    ({"ActiveState": "", "NRestarts": ""}, {"active_state": "unknown", "sub_state": "", "restarts": 0}),
    ({"ActiveState": "failed", "SubState": "failed", "NRestarts": "x"}, {"active_state": "failed", "sub_state": "failed", "restarts": 0}),
])
def test_unit_state_defaults(props, expected):
    assert systemd.unit_state_from_show(props) == expected


def test_unit_state_asks_for_three_properties_and_survives_a_failing_systemctl():
    calls = []

    def ok(argv):
        calls.append(argv)
        return 0, "ActiveState=active\nSubState=running\nNRestarts=1\n", ""

    assert systemd.unit_state(ok, "u.service") == {"active_state": "active", "sub_state": "running", "restarts": 1}
    assert calls == [["systemctl", "show", "u.service", "--property=ActiveState", "--property=SubState", "--property=NRestarts"]]
    assert systemd.unit_state(lambda argv: (1, "ActiveState=active\n", "Failed to connect to bus"), "u") == {
        "active_state": "unknown", "sub_state": "", "restarts": 0}

    def missing(argv):
        raise OSError("systemctl: not found")

    assert systemd.unit_state(missing, "u")["active_state"] == "unknown"


@pytest.mark.parametrize("raw, value", [
    ("plain", "plain"),
    ("'it is $literal \\\\'", "it is $literal \\\\"),
    ('"a \\"b\\" \\$c \\\\ d"', 'a "b" $c \\ d'),
    ('"', '"'),
])
def test_unquote(raw, value):
    assert systemd.unquote_env_value(raw) == value


def test_read_env_file(tmp_path):
    path = tmp_path / "s.env"
    path.write_text("# comment\n\nNOVALUE\nA=1\n B =x=y\nC=\"q \\\"z\\\"\"\n")
    assert systemd.read_env_file(str(path)) == {"A": "1", "B": "x=y", "C": 'q "z"'}
    assert systemd.read_env_file(str(tmp_path / "absent")) == {}
    with pytest.raises(OSError):
        systemd.read_env_file(str(tmp_path))       # a directory: exists, cannot be read as a file
