# -*- coding: utf-8 -*-
# Copyright: llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of llmops.sglang.serving_benchmark: on the controller, reads a prompt-file workload, checks the sweep
and plans it once, then runs the module on the load generator once per level with that level, showing a line per
level (what it measured and the ETA of the rest) as soon as it ends.

Before anything is sent (the task fails naming the option, or the caller's variable through ``variable_names``, the
value and the fix):

* the level options are lists (a string is not split into one) and the plan is valid (``_bench/plan.py``);
* a delegated task does not aim at a loopback ``url``: the load generator would measure whatever listens on its own
  loopback, not the host the task is for;
* a replayed ``trace`` parses (``_bench/traces.py``), and its requests fix each level's;
* a file ``workload`` (anything but ``random-ids``, ``builtin`` and ``auto``) is read here with ``_bench/workloads.py``
  (unusable rows are skipped and counted by reason; a file with no usable row, or whose skipped share is above
  ``workload_max_skipped_fraction``, fails the task), filtered by ``workload_categories``, sampled to at most
  ``workload_max_prompts`` rows and passed to the module as ``prompts``, so the load generator needs nothing but the
  standard library and the prompt files need not exist there. The counts are shown (a line, and a progress line every
  128 MiB of a large file), returned as ``workload_rows`` and added to every record (``workload_rows``), so the report's
  ``summary.json`` and ``summary.md`` carry them.

With ``raw_records`` (a controller path), that file is created before the first request and each level's records are
appended to it as soon as the level ends, before any gate or report can refuse them (issue #23: a measurement that was
taken is never lost to a later refusal).

Then each level runs as one module call (option ``levels``: that level; ``level_offset``: the levels before it), so the
module never plans. A level failed when it missed a gate or measured nothing; with ``stop_on_failure`` the rest is
skipped. The result has every record, the summary and the table of all levels, ``problems`` (``level N (name):
message``) and ``lines`` (the lines shown); it fails when a level failed, after the levels that could run. In check mode
the module is called once with the whole plan and sends nothing.
"""

from __future__ import annotations

import json
import os
from urllib.parse import urlsplit

from ansible import constants as C
from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.llmops.sglang.plugins.module_utils._bench import options, plan, traces, workloads
from ansible_collections.llmops.sglang.plugins.module_utils._report.benchmark import markdown_table, summary_rows

display = Display()
MODULE = "llmops.sglang.serving_benchmark"
_LOOPBACK_HOSTS = ("localhost", "::1")


class Refused(ValueError):
    """An input refused before anything is sent; the message names the option, the value and the fix."""


def loopback(url):
    """True when ``url``'s host is a loopback address (127.0.0.0/8, ::1, localhost)."""
    try:
        host = urlsplit(str(url)).hostname or ""
    except ValueError:
        return False
    return host.startswith("127.") or host in _LOOPBACK_HOSTS


def start_raw_records(path):
    """Create (or empty) the raw records file ``path`` on the controller, and its directory: before the first request, so
    a path that cannot be written is refused while nothing has been measured. Raises IOError/OSError."""
    folder = os.path.dirname(path)
    if folder and not os.path.isdir(folder):
        os.makedirs(folder)
    with open(path, "w"):
        pass


def append_raw_records(path, records):
    """Append ``records`` (a level's records, dicts) to ``path``, one JSON object per line (keys sorted), and flush them to
    disk: the measurement survives whatever refuses later (the report writer, a gate, a lost controller)."""
    with open(path, "a") as fh:
        for rec in records:
            fh.write(json.dumps(rec, sort_keys=True, default=str) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


class ActionModule(ActionBase):
    """Plan the sweep and read the workload on the controller, then run the module once per level."""

    _VALID_ARGS = None  # the module validates its own arguments
    _workload_rows = None  # the skip counts of a file workload (workloads.skip_counts), set by run()

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        task_vars = task_vars or {}
        args = dict(self._task.args)
        names = args.get("variable_names") if isinstance(args.get("variable_names"), dict) else {}
        host = task_vars.get("inventory_hostname", "")
        try:
            self._check_delegation(args, task_vars, names)
            plan.check_lists(args, names)
            params = self._checked(args)
            levels = plan.plan_sweep(params, self._trace_requests(params, names), names)
            counts = self._load_workload(args, names, host)
        except (plan.PlanError, Refused) as exc:
            msg = "serving_benchmark: %s (nothing was sent)" % to_native(exc)
            result.update(failed=True, msg=msg, records=[], levels=[], problems=[msg], lines=[], workload_rows=None)
            return result
        if self._task.check_mode:
            result.update(self._execute_module(module_name=MODULE, module_args=dict(args, levels=levels), task_vars=task_vars))
            result.update(problems=[result.get("msg") or "failed"] if result.get("failed") else [], lines=[],
                          workload_rows=counts)
            return result
        raw = params.get("raw_records")
        if raw:
            try:
                start_raw_records(raw)
            except (IOError, OSError) as exc:
                msg = ("serving_benchmark: raw_records=%s: cannot write it on the controller (%s); give a writable path "
                       "(nothing was sent)" % (raw, to_native(exc)))
                result.update(failed=True, msg=msg, records=[], levels=[], problems=[msg], lines=[], workload_rows=counts)
                return result
        result["raw_records"] = raw or ""
        self._workload_rows = counts
        return self._sweep(result, args, task_vars, levels, params["level_offset"], plan.SweepProgress(
            levels, stop_on_failure=params["stop_on_failure"], stop_name=plan.option_name(names, "stop_on_failure")), host, raw)

    def _sweep(self, result, args, task_vars, levels, offset, progress, host, raw=None):
        """Run the levels one module call each, showing a line before and after each; aggregate the results. Each level's
        records are appended to ``raw`` (a controller path, or None) as soon as the level ends, before any check of them."""
        lines, warnings, gate_failures, last, changed = [], [], [], {}, False
        for index, level in enumerate(levels):
            if progress.stopped:
                break
            start = progress.start_line(index)
            display.display("[%s] %s" % (host, start))
            answer = self._execute_module(module_name=MODULE, module_args=dict(args, levels=[level], level_offset=offset + index),
                                          task_vars=task_vars)
            if raw and answer.get("records"):
                try:
                    append_raw_records(raw, answer["records"])
                except (IOError, OSError) as exc:
                    warnings.append("raw_records=%s: level %d's records could not be written there (%s); they are in this "
                                    "task's result" % (raw, offset + index + 1, to_native(exc)))
            if answer.get("unreachable"):
                result.update(answer)
                return result
            if self._workload_rows is not None:
                for rec in answer.get("records") or []:
                    rec["workload_rows"] = self._workload_rows
            failed_before = len(progress.problems)
            line = progress.add(index, answer)
            display.display("[%s] %s" % (host, line), color=C.COLOR_ERROR if len(progress.problems) > failed_before else C.COLOR_OK)
            lines.extend([start, line])
            gate_failures.extend(answer.get("gate_failures") or [])
            warnings.extend(w for w in answer.get("warnings") or [] if w not in warnings)
            changed = changed or bool(answer.get("changed"))
            last = answer
        records = progress.records
        first_errors = []
        for rec in records:
            for err in rec.get("error_kinds") or []:
                if len(first_errors) < 5:
                    first_errors.append({"level": rec.get("level"), "error": err["error"], "count": err["count"]})
        result.update(changed=changed, records=records, summary=summary_rows(records), markdown=markdown_table(records),
                      levels=levels, server_info=last.get("server_info") or {}, speculative=last.get("speculative") or {},
                      failed_requests=sum(rec.get("failed") or 0 for rec in records), first_errors=first_errors,
                      gate_failures=gate_failures, duration_s=round(sum(progress.seconds), 3), problems=progress.problems,
                      stopped=progress.stopped, lines=lines, workload_rows=self._workload_rows)
        if warnings:
            result["warnings"] = warnings
        if progress.problems:
            result.update(failed=True, msg="serving_benchmark failed: %s" % " | ".join(progress.problems))
        else:
            result["msg"] = "%d level(s) measured" % len(records)
        return result

    @staticmethod
    def _checked(args):
        """The task's arguments as the module will see them (its argument spec: types converted, defaults filled), checked
        with the module's own checks (``_bench/options.py``, the ones preflight runs); Refused with every message."""
        params, errors = options.check(args)
        if errors:
            raise Refused("invalid options: " + "; ".join(to_native(e) for e in errors))
        return params

    def _check_delegation(self, args, task_vars, names):
        """Refuse a loopback ``url`` when the task is delegated to another host than the one it is for (unless the URL
        names that host's own address)."""
        delegate = self._task.delegate_to
        host = task_vars.get("inventory_hostname")
        address = task_vars.get("ansible_host", host)
        url = args.get("url") or "http://127.0.0.1:30000"
        if not delegate or delegate in (host, address) or not loopback(url) or urlsplit(str(url)).hostname in (host, address):
            return
        port = urlsplit(str(url)).port
        raise Refused("%s=%s is a loopback address, but the load generator runs on %s=%s: it would measure whatever listens "
                      "on that host's own loopback, not %s. Set %s to an address of %s reachable from %s (e.g. %s://%s%s), "
                      "or leave %s empty" % (
                          plan.option_name(names, "url"), url, plan.option_name(names, "delegate_to"), delegate, host,
                          plan.option_name(names, "url"), host, delegate, urlsplit(str(url)).scheme or "http", address,
                          ":%d" % port if port else "", plan.option_name(names, "delegate_to")))

    @staticmethod
    def _trace_requests(args, names):
        """The requests of the trace to replay (each level sends exactly these), None without one."""
        if args.get("trace") in (None, ""):
            return None
        try:
            limit = max(int(args.get("trace_max_requests") or 0), 0)
            return len(traces.parse_mooncake(to_native(args["trace"]), limit=limit))
        except (TypeError, ValueError) as exc:      # traces.TraceError is a ValueError
            raise Refused("%s: %s" % (plan.option_name(names, "trace"), to_native(exc)))

    def _load_workload(self, args, names, host):
        """Read a file workload into ``args["prompts"]`` (rows), on the controller; return its skip counts
        (``workloads.skip_counts``), None when no file is read. Shows the counts, and a progress line on a large file."""
        spec = args.get("workload")
        if spec in (None, "") or spec in workloads.NAMED_WORKLOADS or args.get("prompts"):
            return None
        cats = args.get("workload_categories") or []
        if isinstance(cats, str):
            cats = [c.strip() for c in cats.split(",") if c.strip()]
        try:
            limit = int(args.get("workload_max_prompts", 2000))
            seed = int(args.get("seed", 1))
            max_skipped = float(args.get("workload_max_skipped_fraction", workloads.MAX_SKIPPED_FRACTION))
        except (TypeError, ValueError) as exc:
            raise Refused("workload_max_prompts, workload_max_skipped_fraction and seed must be numbers: %s" % exc)

        def progress(path, done, total, rows):
            display.display("[%s] workload %s: %d of %d MiB read, %d rows" % (host, path, done >> 20, total >> 20, rows))

        # a relative path that does not exist from the current directory is taken relative to the playbook's directory
        path = workloads.locate(to_native(spec), self._loader.get_basedir() if self._loader is not None else None)
        try:
            _name, rows, counts = workloads.load_workload_counted(
                path, cats, limit, seed, max_skipped, progress, plan.option_name(names, "workload_max_skipped_fraction"))
        except workloads.WorkloadError as exc:
            raise Refused(to_native(exc))
        display.display("[%s] workload %s: %s" % (host, to_native(spec), counts["text"]),
                        color=C.COLOR_WARN if counts["skipped"] else C.COLOR_OK)
        args["prompts"] = rows
        args["workload"] = to_native(spec)
        return counts
