"""tests/sandbox/promwatch.py's pure helpers (no Prometheus, no server): the alert delays and Prometheus's time stamps."""
from __future__ import annotations

import pytest

from promwatch import _rfc3339, alert_for


def test_alert_for_names_every_alert_of_the_role():
    # the seven alerts of docs/monitoring.md's table, each with the given duration
    assert alert_for("5s") == {"SGLangSpecAcceptLengthLow": "5s", "SGLangSpeculationOff": "5s", "SGLangSpeculationUnexpected": "5s",
                               "SGLangAdmissionCapped": "5s", "SGLangDecodeSlow": "5s", "SGLangNotReady": "5s",
                               "SGLangGenerationStalled": "5s"}


@pytest.mark.parametrize("text, unix", [
    ("1970-01-01T00:00:10Z", 10.0),
    ("1970-01-01T00:00:10.5Z", 10.5),
    ("1970-01-01T00:01:00.000000001Z", 60.000000001),
    ("1970-01-01T02:00:10+02:00", 10.0),         # 02:00:10 at +02:00 is 00:00:10 UTC
    ("1969-12-31T23:30:10-00:30", 10.0),         # 23:30:10 at -00:30 is 00:00:10 UTC
    ("1970-01-02T00:00:00Z", 86400.0),
])
def test_rfc3339_to_unix_seconds(text, unix):
    assert _rfc3339(text) == pytest.approx(unix, abs=1e-6)


def test_rfc3339_refuses_other_text():
    with pytest.raises(ValueError, match="'2026-12-06 04:35:01' is not an RFC 3339 time stamp"):
        _rfc3339("2026-12-06 04:35:01")
