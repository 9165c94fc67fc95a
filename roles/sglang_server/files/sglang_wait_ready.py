# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Readiness probe of the sglang_server role, run on the target by ansible.builtin.script (stdlib only, Python 3.6+).

Polls GET <url> (SGLang /health: 503 while the model loads, 200 when ready) every --delay s for at most
--timeout s, and checks the systemd unit between polls, so that a server that crashes is reported at once
instead of after the whole model-loading timeout:
  exit 0  ready (HTTP 200)
  exit 1  timeout (never ready)
  exit 2  the unit failed or restarted more than --max-restarts times (crash loop)
Prints one JSON line: {"ready", "reason", "elapsed_s", "last_status", "last_error", "restarts", "active_state", "sub_state"}.
"""
from __future__ import print_function

import argparse
import json
import os
import subprocess
import sys
import time

try:
    from urllib.request import Request, urlopen
    from urllib.error import HTTPError, URLError
except ImportError:  # pragma: no cover - Python 2 targets are not supported by the role
    sys.stdout.write(json.dumps({"ready": False, "reason": "python3 is required on the target"}) + "\n")
    sys.exit(1)


def unit_state(unit):
    """(ActiveState, SubState, NRestarts) of a systemd unit; ("unknown", "", 0) when systemctl fails."""
    try:
        out = subprocess.check_output(["systemctl", "show", unit, "-p", "ActiveState", "-p", "SubState", "-p", "NRestarts"],
                                      universal_newlines=True)
    except (OSError, subprocess.CalledProcessError):
        return "unknown", "", 0
    props = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    try:
        restarts = int(props.get("NRestarts", "0") or 0)
    except ValueError:
        restarts = 0
    return props.get("ActiveState", "unknown"), props.get("SubState", ""), restarts


def _unquote(value):
    r"""Undo the quoting of sglang_dest.systemd_env_value: bare, 'single' (literal) or "double" (\\ \" \$ \` escaped)."""
    if len(value) >= 2 and value[0] == value[-1] == "'":
        return value[1:-1]
    if len(value) >= 2 and value[0] == value[-1] == '"':
        out, i, body = [], 0, value[1:-1]
        while i < len(body):
            if body[i] == "\\" and i + 1 < len(body):
                i += 1
            out.append(body[i])
            i += 1
        return "".join(out)
    return value


def read_env_file(path):
    """NAME -> value of a systemd EnvironmentFile written by the role (missing or unreadable file: {})."""
    out = {}
    try:
        with open(path) as handle:
            for line in handle:
                line = line.rstrip("\n")
                if not line or line.lstrip().startswith("#") or "=" not in line:
                    continue
                name, value = line.split("=", 1)
                out[name.strip()] = _unquote(value)
    except (IOError, OSError):
        return {}
    return out


def probe(url, api_key, timeout):
    """(status, error): HTTP status of GET url (None when no answer) and the error text."""
    headers = {"Authorization": "Bearer " + api_key} if api_key else {}
    try:
        resp = urlopen(Request(url, headers=headers), timeout=timeout)
        return resp.getcode(), ""
    except HTTPError as exc:
        return exc.code, str(exc.reason)
    except (URLError, OSError) as exc:
        return None, str(getattr(exc, "reason", exc))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--unit", required=True)
    parser.add_argument("--timeout", type=float, required=True, help="s")
    parser.add_argument("--delay", type=float, default=5.0, help="s between polls")
    parser.add_argument("--max-restarts", type=int, default=2, help="restarts of the unit tolerated while waiting")
    parser.add_argument("--api-key-env", default="", help="name of an environment variable holding the API key")
    parser.add_argument("--api-key-file", default="", help="systemd EnvironmentFile holding the API key (the role's 0600 secret file)")
    parser.add_argument("--api-key-var", default="SGLANG_SERVER_API_KEY", help="variable of --api-key-file holding the key")
    args = parser.parse_args()
    api_key = os.environ.get(args.api_key_env, "") if args.api_key_env else ""
    if args.api_key_file:
        api_key = read_env_file(args.api_key_file).get(args.api_key_var, "")
    start = time.time()
    restarts0 = unit_state(args.unit)[2]
    result = {"ready": False, "reason": "", "last_status": None, "last_error": "", "restarts": 0}
    code = 1
    while True:
        status, error = probe(args.url, api_key, min(10.0, max(1.0, args.delay)))
        active, sub, restarts = unit_state(args.unit)
        result.update({"last_status": status, "last_error": error, "restarts": restarts - restarts0,
                       "active_state": active, "sub_state": sub})
        if status == 200:
            result.update({"ready": True, "reason": "GET %s answered 200" % args.url})
            code = 0
            break
        if active == "failed":
            result["reason"] = "the unit %s failed (ActiveState=failed, SubState=%s)" % (args.unit, sub)
            code = 2
            break
        if restarts - restarts0 > args.max_restarts:
            result["reason"] = "the unit %s restarted %d times while waiting (crash loop; more than %d allowed)" % (
                args.unit, restarts - restarts0, args.max_restarts)
            code = 2
            break
        if time.time() - start >= args.timeout:
            result["reason"] = "not ready within %g s" % args.timeout
            break
        time.sleep(args.delay)
    result["elapsed_s"] = round(time.time() - start, 1)
    sys.stdout.write(json.dumps(result) + "\n")
    sys.exit(code)


if __name__ == "__main__":
    main()
