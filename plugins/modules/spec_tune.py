#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: spec_tune
short_description: Plan, record and decide a speculative-decoding tuning run (state file on the controller)
version_added: "1.1.0"
description:
  - The bookkeeping of the C(speculative_tuning) role (C(playbooks/spec_tune.yml)), run on the controller. The role serves
    each arm (a speculative configuration) through the C(sglang_server) role, verifies it with C(speculative_check),
    benchmarks it with the C(sglang_benchmark) role once per trial, and calls this module between those steps.
  - O(action=plan) normalizes and orders the arms (the configuration already running first, then simplest first), opens
    or creates the state file and returns the arms still to run with their finished trials, and an ETA from the arms
    measured so far. A state file written for another setup (host, SGLang version, levels, objective, workload, ...) is
    refused, never mixed in.
  - O(action=record) stores one trial's serving_benchmark records for one arm and says (C(early_stop)) whether the answer
    is already clear (O(min_trials) reached and the 95 % interval of the speedup against every finished arm excludes 1), so the
    remaining trials can be skipped.
  - O(action=finish) marks an arm finished (or failed, with the reason) and stores its duration and verification.
  - O(action=decide) takes the decision over the finished arms (see C(spec_decision.decide)) and writes
    C(decision.json), C(decision.md), C(winner_vars.json) (the winner as C(sglang_server_speculative_*) variables, for
    C(-e @winner_vars.json) or the inventory) and, with O(plots), C(speedup.png) (speedup over the simplest arm versus
    concurrency, one line per arm with its 95 % band) into O(report_dir).
  - With O(mode=table) (issue 21) the arms are static step counts (O(table_steps), draft tokens = steps + 1, topk 1, steps 0 =
    speculation off), each measured at every bucket (O(buckets)) within one server start; O(action=record) returns the
    buckets the arm's next trial still needs (C(levels_next)); a step count significantly worse than a finished arm at a
    bucket is not measured there again (the tuning cost). Each bucket's table key is the geometric midpoint of the bucket
    and the one below (1, 8, 32, 64 -> keys 1, 3, 16, 45), so every batch size uses the counts measured nearest to it.
    O(action=decide) additionally computes per bucket each step count's objective, its 95 % interval against the best and
    C(candidate_steps) (the best count plus every smaller count not significantly worse that SGLang's EMA would not settle
    on at the best's measured acceptance), writes C(adaptive_table.json) (SGLang's JSON, what C(--speculative-adaptive-config)
    reads) and a per-bucket section in C(decision.md), and C(winner_vars.json) sets C(sglang_server_speculative_adaptive) true,
    C(sglang_server_speculative_adaptive_config) the table and the static settings of the largest candidate. Where adaptive
    cannot run (O(table_refusal)), or no bucket drafts at all, the static decision over O(weights) is taken and the report says why.
  - The state file is rewritten atomically after every call, so an interrupted tuning loses at most the trial that was
    running.
author:
  - llmops.sglang developers (@llmops)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
options:
  action:
    description: Which step, see the description.
    type: str
    required: true
    choices: [plan, record, finish, decide]
  state_file:
    description: JSON state of this tuning run on the controller (created by O(action=plan); its directory is created).
    type: path
    required: true
  arms:
    description:
      - The speculative configurations to compare (O(action=plan)). Each is a dict of C(speculative_algorithm) (null or
        C(off) for no speculation; NEXTN, EAGLE, EAGLE3, STANDALONE), C(speculative_num_steps), C(speculative_eagle_topk),
        C(speculative_num_draft_tokens), C(speculative_draft_model_path) and an optional C(name).
      - Empty uses the default grid for the reference model - off and O(default_algorithm) chains of 1, 2 and 3 draft
        steps (topk 1).
    type: list
    elements: dict
    default: []
  default_algorithm:
    description: Algorithm of the default grid's chains.
    type: str
    default: NEXTN
  running:
    description: Speculative settings of the server running now (same keys as an arm), so that arm runs first without a restart.
    type: dict
    default: {}
  fingerprint:
    description: What the measurements depend on (host facts, SGLang version, model, levels, workload, objective, ...).
      Stored at the first O(action=plan); a later plan with a different fingerprint fails, naming the keys that differ.
    type: dict
    default: {}
  fresh:
    description: With O(action=plan), move an existing state file aside (C(<state_file>.<UTC time>)) and start over.
    type: bool
    default: false
  trials:
    description: Maximum trials (sweeps) per arm.
    type: int
    default: 3
  min_trials:
    description: Trials before an arm may stop early (>= 2, an interval needs two).
    type: int
    default: 2
  arm:
    description: The arm of O(action=record) and O(action=finish), the C(key) that O(action=plan) returned.
    type: str
  trial:
    description: Number of the trial being recorded (1-based); a trial already recorded is replaced.
    type: int
  records:
    description: serving_benchmark records of the trial (one per concurrency level).
    type: list
    elements: dict
    default: []
  failed:
    description: With O(action=finish), why the arm failed (empty = it finished). A failed arm is left out of the decision.
    type: str
    default: ""
  verification:
    description: With O(action=finish), the speculative_check result to keep as evidence (accept length, verdicts).
    type: dict
    default: {}
  duration_s:
    description: With O(action=finish), seconds the arm took (restart, verification, trials), for the ETA.
    type: float
  objective:
    description: C(throughput) (output tok/s), C(goodput) (req/s meeting the SLOs, the records'
      C(goodput), set by serving_benchmark when SLOs are given) or C(tpot) (median TPOT, ms, lower is better).
    type: str
    choices: [throughput, goodput, tpot]
    default: throughput
  weights:
    description: Concurrency -> weight of the objective (C({"32" 1}) for one target concurrency, or a production
      distribution from C(production_concurrency)).
    type: dict
    default: {}
  min_gain:
    description: A more complex arm must beat a simpler one by more than this fraction with 95 % confidence.
    type: float
    default: 0.0
  report_dir:
    description: Directory for C(decision.json), C(decision.md), C(speedup.png) (O(action=decide)).
    type: path
  plots:
    description: Draw C(speedup.png) (needs matplotlib in the Python running the module).
    type: bool
    default: true
  title:
    description: Title of C(decision.md) and the plot.
    type: str
    default: Speculative decoding tuning
  tuned_on:
    description: With O(action=decide), the inventory name of the host the arms were measured on, kept in the returned C(record).
    type: str
    default: ""
  mode:
    description:
      - C(static) - one arm for the weighted distribution (the decision above).
      - C(table) - SGLang's adaptive draft-length table per bucket (see the description); O(action=plan) with empty O(arms)
        plans one arm per O(table_steps) of O(default_algorithm) (NEXTN, EAGLE or EAGLE3), given arms must be chains
        (topk 1, draft tokens steps + 1); O(action=record) stops early only when every bucket's comparison is clear.
    type: str
    choices: [static, table]
    default: static
  table_steps:
    description: With O(mode=table) and empty O(arms), the step counts to measure (0 = speculation off). Empty measures 0, 1,
      2, 3, 5 and 7 steps.
    type: list
    elements: int
    default: []
  buckets:
    description: With O(mode=table), the batch-size buckets of the table, each measured as the concurrency level of the same
      number (every one must be in the sweep) and keyed in the table at the geometric midpoint of it and the bucket below
      (the first at its own number). Empty uses the concurrencies of O(weights).
    type: list
    elements: int
    default: []
  table_refusal:
    description: With O(mode=table), why adaptive cannot be an arm on this setup (the C(tuning_table_refusal) filter; empty
      when it can). When set, the tuning runs and decides as O(mode=static) and the report says why.
    type: str
    default: ""
attributes:
  check_mode:
    support: full
    details: In check mode the state file and the report are not written; plan still returns the arms.
  diff_mode:
    support: none
  platform:
    platforms: posix
notes:
  - Runs on the controller (C(delegate_to localhost)); standard library only, matplotlib only for the plot.
  - The statistics (Welch t interval on the log of the ratio of means) are documented in C(plugins/module_utils/_tune/decision.py).
seealso:
  - module: llmops.sglang.serving_benchmark
  - module: llmops.sglang.speculative_check
"""

EXAMPLES = r"""
- name: Plan the arms (resumes from the state file)
  llmops.sglang.spec_tune:
    action: plan
    state_file: reports/gpu1/spec-tune/state.json
    arms:
      - {speculative_algorithm: null}
      - {speculative_algorithm: NEXTN, speculative_num_steps: 1, speculative_eagle_topk: 1, speculative_num_draft_tokens: 2}
      - {speculative_algorithm: NEXTN, speculative_num_steps: 3, speculative_eagle_topk: 1, speculative_num_draft_tokens: 4}
    fingerprint: {host: gpu1, sglang_version: 0.5.9, levels: [1, 32]}
  delegate_to: localhost
  register: plan

- name: Decide at concurrency 32
  llmops.sglang.spec_tune:
    action: decide
    state_file: reports/gpu1/spec-tune/state.json
    weights: {"32": 1}
    report_dir: reports/gpu1/spec-tune
  delegate_to: localhost
"""

RETURN = r"""
arms:
  description: (plan) every arm in run order, normalized (C(key), C(name), C(speculative_*)), with C(status)
    (C(pending), C(partial), C(done), C(failed)) and C(trials_done).
  returned: always
  type: list
  elements: dict
pending:
  description: (plan) the arms still to run, in run order (same shape as C(arms)).
  returned: always
  type: list
  elements: dict
eta_s:
  description: (plan) seconds the pending arms should take, from the mean duration of the finished arms; null before one finished.
  returned: always
  type: float
early_stop:
  description: (record) true when more trials of this arm would not change its comparison with any finished arm.
  returned: always
  type: bool
levels_next:
  description: (record, O(mode=table)) the buckets the arm's next trial still measures (ascending); a bucket is dropped
    once a finished arm is significantly better there (the step count is no candidate of that bucket) or every comparison
    there is clear. Empty when the arm is done (C(early_stop)). Null in static mode (every level, every trial).
  returned: always
  type: list
  elements: int
trials_done:
  description: (record) trials stored for this arm.
  returned: always
  type: int
decision:
  description: (decide) the decision of C(spec_decision.decide) - C(winner), C(best), C(significant),
    C(no_significant_difference), C(basis), C(objective), C(unit), C(weights), per-arm C(arms) with C(values),
    C(mean), C(sd), C(n), C(vs_best) and C(vs_baseline) intervals - plus C(time) (UTC ISO 8601, when first decided),
    C(speedup_table) (per arm and concurrency, speedup over the simplest arm with its 95 % bounds) and
    C(accept_length) (per arm and concurrency, mean over trials) and C(category_acceptance) (per arm, weighted
    concurrency and workload category, C(accept_length), C(accept_rate), C(requests), C(trials); see
    C(spec_decision.category_acceptance)), C(input_length_acceptance) (per arm, weighted concurrency and input-length
    bucket C(<2k), C(2k-8k), C(8k-16k), C(>16k), C(accept_length), C(decode_tok_s_per_request), C(input_tokens_mean),
    C(requests), C(trials)) and C(long_context_warnings) (the winner's accept length below 1.3, or its per-request decode
    speedup over the baseline below 1, in a bucket past 2048 tokens; also in C(decision.md)).
  returned: always
  type: dict
winner:
  description: (decide) the winning arm, normalized, ready to be given to the sglang_server role as sglang_server_* variables.
  returned: always
  type: dict
winner_vars:
  description: (decide) the winner as C(sglang_server_speculative_*) variables (what to put in the inventory to keep it).
  returned: always
  type: dict
files:
  description: (decide) report files written.
  returned: always
  type: list
  elements: str
markdown:
  description: (decide) C(decision.md).
  returned: always
  type: str
summary:
  description:
    - (plan) lines to show - the state file, one C(<key> | <status> | <trials done>) per arm, the levels, objective,
      weights and ETA; a list of str.
    - (record) one line - the trial's output throughput (tok/s) per level, whether the comparison is clear, the speedup
      against every finished arm; a str.
  returned: always
  type: raw
adaptive:
  description: (decide, O(mode=table)) C(refusal) (why adaptive is not an arm, or null), C(table) (SGLang's table, or null),
    C(buckets) (per bucket C(bucket), C(best), C(candidate_steps), C(steps) - per step count C(steps), C(arm), C(values),
    C(mean), C(n), C(vs_best) and C(vs_off) intervals, C(candidate)), C(server_vars) (null when the static decision is served),
    C(problems); empty with O(mode=static).
  returned: always
  type: dict
record:
  description: (decide) what to record in the decision file on the host - C(arm), C(server_vars), C(time), C(objective),
    C(weights), C(basis), C(significant), C(category_acceptance), C(input_length_acceptance), C(evidence),
    C(speedup_table), C(fingerprint), C(report_dir), C(tuned_on) (read back by the C(sglang_server) role with C(sglang_server_speculative_from_decision)),
    C(mode) and, in table mode, C(adaptive) (C(refusal), C(table)).
  returned: always
  type: dict
"""

import datetime
import json
import os
import tempfile
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.llmops.sglang.plugins.module_utils._tune import adaptive_config
from ansible_collections.llmops.sglang.plugins.module_utils._tune import adaptive_table as at
from ansible_collections.llmops.sglang.plugins.module_utils._tune import decision as sd
from ansible_collections.llmops.sglang.plugins.module_utils._report.files import ReportWriteError, plot_dir, read_back, write_report_files

STATE_VERSION = 1


def _utcnow():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def load_state(path):
    """The state dict from ``path``, or None when the file does not exist. Raises ValueError on a corrupt file."""
    if not os.path.exists(path):
        return None
    with open(path) as fh:
        try:
            state = json.load(fh)
        except ValueError as exc:
            raise ValueError("state file %s is not JSON (%s). Fix: move it away, or run with speculative_tuning_fresh=true." % (path, exc))
    if not isinstance(state, dict) or state.get("version") != STATE_VERSION or not isinstance(state.get("arms"), dict):
        raise ValueError("state file %s is not a spec_tune state (version %s). Fix: move it away, or run with speculative_tuning_fresh=true."
                         % (path, STATE_VERSION))
    return state


def save_state(path, state):
    """Write ``state`` to ``path`` atomically (temporary file + rename)."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        os.makedirs(directory)
    fd, tmp = tempfile.mkstemp(prefix=".state-", dir=directory)
    with os.fdopen(fd, "w") as fh:
        json.dump(state, fh, indent=1, sort_keys=True)
        fh.write("\n")
    os.rename(tmp, path)


def fingerprint_diff(old, new):
    """Keys whose values differ between two fingerprints (sorted)."""
    return sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))


def arm_status(entry):
    if entry.get("failed"):
        return "failed"
    if entry.get("done"):
        return "done"
    return "partial" if entry.get("trials") else "pending"


def table_mode(p):
    """True when the run builds an adaptive table: O(mode=table) and no O(table_refusal)."""
    return p.get("mode") == "table" and not p.get("table_refusal")


def plan_arms(p):
    """The arms of the run (normalized): the given ones or the default grid; in table mode the given ones (each must be a step
    count a table can hold, ``adaptive_table.arm_steps``) or one per ``table_steps``."""
    if table_mode(p):
        if p["arms"]:
            arms = [sd.normalize_arm(a, i) for i, a in enumerate(p["arms"])]
            for arm in arms:
                at.arm_steps(arm)
            return arms
        return at.step_arms(p["default_algorithm"], p["table_steps"] or at.STEP_COUNTS)
    return [sd.normalize_arm(a, i) for i, a in enumerate(p["arms"])] if p["arms"] else sd.default_grid(p["default_algorithm"])


def plan(p, check_mode):
    arms = plan_arms(p)
    running_key = None
    if p["running"]:
        running_key = sd.normalize_arm(dict((k, v) for k, v in p["running"].items() if k != "name"), 0)["key"]
    ordered = sd.order_arms(arms, running_key)
    path = p["state_file"]
    moved = None
    state = None
    if p["fresh"] and os.path.exists(path):
        moved = "%s.%s" % (path, datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ"))
        if not check_mode:
            os.rename(path, moved)
    else:
        state = load_state(path)
    if state is not None:
        diff = fingerprint_diff(state.get("fingerprint", {}), p["fingerprint"])
        if diff:
            changes = "; ".join("%s was %r, now %r" % (k, state["fingerprint"].get(k), p["fingerprint"].get(k)) for k in diff)
            raise ValueError("state file %s belongs to another tuning setup: %s differ (%s). Its measurements cannot be mixed with "
                             "this run's. Fix: restore the setup, use another speculative_tuning_run_id, or start over with speculative_tuning_fresh=true."
                             % (path, ", ".join(diff), changes))
    else:
        state = {"version": STATE_VERSION, "fingerprint": p["fingerprint"], "created": _utcnow(), "arms": {}, "decision": None}
    out = []
    for arm in ordered:
        entry = state["arms"].setdefault(arm["key"], {"arm": arm, "trials": [], "done": False, "failed": ""})
        entry["arm"] = arm
        row = dict(arm)
        row.update(status=arm_status(entry), trials_done=len([t for t in entry["trials"] if t]))
        out.append(row)
    state["order"] = [a["key"] for a in ordered]
    if not check_mode:
        save_state(path, state)
    pending = [a for a in out if a["status"] in ("pending", "partial")]
    durations = [e["duration_s"] for e in state["arms"].values() if e.get("done") and e.get("duration_s")]
    eta = (sum(durations) / len(durations)) * len(pending) if durations else None
    summary = ["state: %s%s" % (path, " (old one moved to %s)" % moved if moved else "")]
    summary += ["%s | %s | %d" % (a["key"], a["status"], a["trials_done"]) for a in out]
    summary.append("levels: %s; objective %s weighted %s; ETA: %s" % (
        ", ".join(str(c) for c in (p.get("fingerprint") or {}).get("levels") or []), p.get("objective") or "throughput",
        json.dumps(p.get("weights") or {}, sort_keys=True), "~%.0f s" % eta if eta is not None else "unknown until the first arm finishes"))
    return {"arms": out, "pending": pending, "eta_s": eta, "moved_to": moved, "running_key": running_key, "state_file": path,
            "summary": summary}


def trial_summary(arm, trial, records, clear, trials_done, evidence):
    """One line per recorded trial: ``<arm> trial <n>: <concurrency>: <tok/s>, ... tok/s; <clear or not>; <speedups>``.

    :param records: serving_benchmark records (``max_concurrency``, ``output_throughput`` tok/s) of the trial.
    :param evidence: ``[{"against": arm key, "speedup": float}, ...]`` as :func:`record` returns it, plus, in table mode,
        the buckets dropped for the next trial (``{"bucket", "eliminated_by", "speedup", "low"}``, :func:`table_levels_next`).
    """
    levels = ", ".join("%s: %s" % (r.get("max_concurrency"), round(float(r.get("output_throughput") or 0), 1)) for r in records)
    verdict = ("clear after %d trials, the remaining ones are skipped" % trials_done) if clear else "not clear yet"
    against = []
    for e in evidence:
        if "eliminated_by" in e:
            against.append("bucket %s done (%s)" % (e["bucket"], "clear" if e["eliminated_by"] is None else "%s better x%s, low %s" % (
                e["eliminated_by"], round(float(e["speedup"]), 3), round(float(e["low"]), 3))))
        elif "against" in e:
            against.append("%s%s x%s" % (e["against"], " at %s" % e["bucket"] if "bucket" in e else "", round(float(e.get("speedup", 0)), 3)))
        else:
            against.append(str(e.get("error", e)))
    return "%s trial %s: %s tok/s; %s %s" % (arm, trial, levels, verdict, against)


def _weights(p):
    weights = {}
    for k, v in (p["weights"] or {}).items():
        try:
            conc, w = int(k), float(v)
        except (TypeError, ValueError):
            raise ValueError("weights=%r: keys are concurrency levels (integers) and values weights (numbers > 0)" % (p["weights"],))
        if conc < 1 or w <= 0:
            raise ValueError("weights: concurrency %r weight %r; concurrency must be >= 1 and weight > 0" % (k, v))
        weights[conc] = w
    return weights


def _buckets(p, weights):
    """The table's buckets: O(buckets), else the concurrencies of O(weights) (ascending ints)."""
    buckets = p.get("buckets") or sorted(weights)
    bad = [b for b in buckets if b < 1]
    if bad:
        raise ValueError("buckets=%r: each bucket is a batch size >= 1, measured as that concurrency. Fix: give e.g. [1, 8, 32, 64]."
                         % (p.get("buckets"),))
    return sorted(set(int(b) for b in buckets))


def _results(state, only_done=True):
    out = []
    for key in state.get("order") or sorted(state["arms"]):
        entry = state["arms"].get(key)
        if not entry or entry.get("failed"):
            continue
        if only_done and not entry.get("done"):
            continue
        trials = [t for t in entry["trials"] if t]
        if trials:
            out.append({"arm": entry["arm"], "trials": trials})
    return out


def record(p, check_mode):
    state = load_state(p["state_file"])
    if state is None or p["arm"] not in state["arms"]:
        raise ValueError("arm %r is not in the state file %s; run action=plan first" % (p["arm"], p["state_file"]))
    if not p["trial"] or p["trial"] < 1:
        raise ValueError("trial=%r: give the 1-based trial number" % (p["trial"],))
    entry = state["arms"][p["arm"]]
    trials = entry["trials"]
    while len(trials) < p["trial"]:
        trials.append(None)
    trials[p["trial"] - 1] = p["records"]
    if not check_mode:
        save_state(p["state_file"], state)
    done = [t for t in trials if t]
    weights = _weights(p)
    clear = False
    evidence = []
    # table mode: every bucket is its own comparison; static: the weighted objective
    comparisons = [{b: 1.0} for b in _buckets(p, weights)] if table_mode(p) else [weights]
    if weights and len(done) >= max(2, p["min_trials"]):
        higher = sd.OBJECTIVE_METRIC[p["objective"]][1]
        try:
            others = [r for r in _results(state) if r["arm"]["key"] != p["arm"]]
            verdicts = []
            for w in comparisons:
                mine = [sd.objective_value(t, p["objective"], w) for t in done]
                for other in others:
                    theirs = [sd.objective_value(t, p["objective"], w) for t in other["trials"]]
                    iv = sd.ratio_interval(mine, theirs, higher)
                    verdicts.append(sd.is_clear(iv, p["min_gain"]))
                    row = {"against": other["arm"]["key"], "speedup": iv["speedup"], "low": iv["low"], "high": iv["high"]}
                    if len(comparisons) > 1:
                        row["bucket"] = list(w)[0]
                    evidence.append(row)
            clear = bool(verdicts) and all(verdicts)
        except sd.SpecDecisionError as exc:
            evidence.append({"error": str(exc)})
    levels_next = None
    if table_mode(p):
        levels_next, eliminated = table_levels_next(p, state, done)
        clear = not levels_next
        evidence += eliminated
    return {"early_stop": clear, "trials_done": len(done), "evidence": evidence, "levels_next": levels_next,
            "summary": trial_summary(p["arm"], p["trial"], p["records"], clear, len(done), evidence)}


def table_levels_next(p, state, done):
    """Table mode: ``adaptive_table.levels_next`` of this arm's trials against the other finished arms of the state file."""
    others = [r for r in _results(state) if r["arm"]["key"] != p["arm"]]
    return at.levels_next(done, others, _buckets(p, _weights(p)), p["objective"], p["min_trials"], p["min_gain"])


def complete_sweeps(results, weights):
    """Table mode: the static decision over the weights reads only the trials that measured every weighted level (a step
    count dropped at a bucket, :func:`table_levels_next`, measured fewer in its later trials).

    :returns: ``(results, notes)``: the results with those trials only (an arm without one is left out), and one line per
        arm that had shorter trials.
    """
    out, notes = [], []
    for res in results:
        full, short = [], []
        for i, records in enumerate(res["trials"]):
            levels = set(int(r["max_concurrency"]) for r in records if r.get("max_concurrency") is not None)
            (full if all(int(c) in levels for c in weights) else short).append((i + 1, sorted(levels)))
        if short:
            notes.append("%s: trial(s) %s measured only the buckets %s (table mode measures a step count no more where it is "
                         "significantly worse); the static decision reads its %d complete sweep(s)" % (
                             res["arm"]["key"], ", ".join(str(i) for i, _l in short), short[0][1], len(full)))
        if full:
            out.append({"arm": res["arm"], "trials": [res["trials"][i - 1] for i, _l in full]})
    return out, notes


def finish(p, check_mode):
    state = load_state(p["state_file"])
    if state is None or p["arm"] not in state["arms"]:
        raise ValueError("arm %r is not in the state file %s; run action=plan first" % (p["arm"], p["state_file"]))
    entry = state["arms"][p["arm"]]
    entry["failed"] = p["failed"]
    entry["done"] = not p["failed"]
    entry["finished"] = _utcnow()
    entry["duration_s"] = p["duration_s"]
    entry["verification"] = p["verification"]
    state["decision"] = None     # a new measurement invalidates an earlier decision
    if not check_mode:
        save_state(p["state_file"], state)
    return {"status": arm_status(entry), "trials_done": len([t for t in entry["trials"] if t])}


def accept_lengths(results):
    """Per arm key: {concurrency: mean accept length over trials} (None without speculation)."""
    out = {}
    for res in results:
        per = {}
        for trial in res["trials"]:
            for rec in trial:
                conc = rec.get("max_concurrency")
                value = rec.get("accept_length")
                if conc is None or not isinstance(value, (int, float)):
                    continue
                per.setdefault(int(conc), []).append(float(value))
        out[res["arm"]["key"]] = dict((c, sum(v) / len(v)) for c, v in sorted(per.items()))
    return out


def _fmt_iv(iv):
    if iv.get("low") is None:
        return "%.3f (one trial: no interval)" % iv["speedup"]
    return "%.3f [%.3f, %.3f]" % (iv["speedup"], iv["low"], iv["high"])


def decision_markdown(title, decision, state):
    d = decision
    lines = ["# %s" % title, "", "Decided %s. Objective: **%s** (%s, %s is better) weighted over concurrency %s%s." % (
        d["time"], d["objective"], d["metric"], "higher" if d["higher_is_better"] else "lower",
        ", ".join("%s x %s" % (k, ("%.3g" % v)) for k, v in d["weights"].items()),
        (", min gain %.1f %%" % (100 * d["min_gain"])) if d["min_gain"] else ""), "",
        "**Winner: `%s`** (%s)." % (d["winner_name"], d["winner"]), "", "Basis: %s." % d["basis"], "",
        "| arm | trials | mean %s | sd | vs %s (95 %% interval) | best / arm (95 %% interval) | accept length by concurrency |" % (
            d["unit"], d["baseline"]),
        "|---|---:|---:|---:|---|---|---|"]
    for a in d["arms"]:
        acc = d["accept_length"].get(a["key"]) or {}
        lines.append("| %s%s | %d | %.4g | %.3g | %s | %s | %s |" % (
            a["key"], " **(winner)**" if a["key"] == d["winner"] else "", a["n"], a["mean"], a["sd"], _fmt_iv(a["vs_baseline"]),
            _fmt_iv(a["vs_best"]), ", ".join("%s: %.2f" % (c, v) for c, v in acc.items()) or "-"))
    lines += ["", "## Speedup over `%s` by concurrency (%s)" % (d["baseline"], d["metric"]), "",
              "| arm | " + " | ".join("c=%s" % r["concurrency"] for r in d["speedup_table"].get(d["baseline"], [])) + " |",
              "|---|" + "---|" * len(d["speedup_table"].get(d["baseline"], []))]
    for key, rows in d["speedup_table"].items():
        cells = []
        for r in rows:
            cells.append("%.3f" % r["speedup"] if r["low"] is None else "%.3f [%.3f, %.3f]" % (r["speedup"], r["low"], r["high"]))
        lines.append("| %s | %s |" % (key, " | ".join(cells)))
    lines += category_markdown(d)
    lines += input_length_markdown(d)
    failed = [(k, e["failed"]) for k, e in state["arms"].items() if e.get("failed")]
    if failed or d["problems"]:
        lines += ["", "## Left out", ""] + ["- `%s`: %s" % (k, why) for k, why in failed] + ["- %s" % x for x in d["problems"]]
    return "\n".join(lines) + "\n"


def category_markdown(decision):
    """Lines of decision.md's per-category acceptance section: one table per weighted concurrency, a row per arm, a
    column per workload category, each cell the accept length (mean over trials) and, when the server reports the
    counts (SGLang 0.5.9+), the accept rate in %. Empty when no arm measured categories (random-ids workload)."""
    table = decision.get("category_acceptance") or {}
    lines = []
    for conc in sorted(decision["weights"], key=int):
        cats = sorted(set(cat for per in table.values() for cat in (per.get(str(conc)) or {})))
        if not cats:
            continue
        if not lines:
            lines = ["", "## Acceptance by workload category", "",
                     "Accept length (tokens per verify step, mean over trials); accept rate in brackets where the server "
                     "reports drafted and accepted tokens. `-`: no speculation, or the category was not measured."]
        lines += ["", "Concurrency %s:" % conc, "", "| arm | " + " | ".join(cats) + " |", "|---|" + "---:|" * len(cats)]
        for key in [a["key"] for a in decision["arms"]]:
            per = (table.get(key) or {}).get(str(conc)) or {}
            cells = []
            for cat in cats:
                c = per.get(cat)
                if not c:
                    cells.append("-")
                elif c.get("accept_rate") is None:
                    cells.append("%.2f" % c["accept_length"])
                else:
                    cells.append("%.2f (%.0f %%)" % (c["accept_length"], 100 * c["accept_rate"]))
            lines.append("| %s | %s |" % (key, " | ".join(cells)))
    return lines


def input_length_markdown(decision):
    """Lines of decision.md's acceptance-by-input-length section: one table per weighted concurrency, a row per arm, a
    column per input-length bucket, each cell the accept length and the per-request decode tok/s (means over trials),
    then one warning line per long bucket where the winner fails (``spec_decision.long_context_warnings``). Empty when
    no arm measured input buckets."""
    table = decision.get("input_length_acceptance") or {}
    lines = []
    order = ("<2k", "2k-8k", "8k-16k", ">16k")
    for conc in sorted(decision["weights"], key=int):
        present = set(b for per in table.values() for b in (per.get(str(conc)) or {}))
        buckets = [b for b in order if b in present]
        if not buckets:
            continue
        if not lines:
            lines = ["", "## Acceptance by input length", "",
                     "Accept length (tokens per verify step) and per-request decode tok/s (in brackets), means over trials, "
                     "by the requests' input tokens. A draft trained on short sequences accepts less on long inputs."]
        lines += ["", "Concurrency %s:" % conc, "", "| arm | " + " | ".join(buckets) + " |", "|---|" + "---:|" * len(buckets)]
        for key in [a["key"] for a in decision["arms"]]:
            per = (table.get(key) or {}).get(str(conc)) or {}
            cells = []
            for b in buckets:
                c = per.get(b)
                if not c:
                    cells.append("-")
                else:
                    cells.append("%s (%s)" % ("-" if c["accept_length"] is None else "%.2f" % c["accept_length"],
                                              "-" if c["decode_tok_s_per_request"] is None else "%.1f" % c["decode_tok_s_per_request"]))
            lines.append("| %s | %s |" % (key, " | ".join(cells)))
    for w in decision.get("long_context_warnings") or []:
        lines += ["", "**Warning:** %s." % w]
    return lines


def adaptive_decision(p, results, weights):
    """The table mode's part of the decision (empty dict in static mode).

    :returns: ``{"refusal", "table", "buckets", "server_vars", "problems", "static_because"}``: ``refusal`` is
        O(table_refusal) (then nothing is computed and the static decision is served); else ``adaptive_table.bucket_table``
        over the finished arms at :func:`_buckets`, and ``server_vars`` from ``adaptive_table.adaptive_server_vars`` (None,
        with ``static_because``, when every candidate is 0).
    :raises ValueError: arms of more than one algorithm or draft model (one table serves one draft).
    """
    if p.get("mode") != "table":
        return {}
    out = {"refusal": p.get("table_refusal") or None, "table": None, "buckets": [], "server_vars": None, "problems": [],
           "static_because": None}
    if out["refusal"]:
        out["static_because"] = "adaptive was not an arm: %s" % out["refusal"]
        return out
    tab = at.bucket_table(results, _buckets(p, weights), p["objective"])
    spec = [r["arm"] for r in results if r["arm"]["speculative_algorithm"]]
    kinds = sorted(set((a["speculative_algorithm"], a["speculative_draft_model_path"] or "") for a in spec))
    if len(kinds) > 1:
        raise ValueError("mode=table: the arms use %s; one adaptive table serves one algorithm and draft model. Fix: give arms of "
                         "one of them." % ", ".join("%s%s" % (k[0], " (%s)" % k[1] if k[1] else "") for k in kinds))
    server_vars = at.adaptive_server_vars(tab["table"], kinds[0][0], kinds[0][1] or None) if kinds else None
    out.update(table=tab["table"], buckets=tab["buckets"], server_vars=server_vars, problems=tab["problems"])
    if server_vars is None:
        out["static_because"] = "no bucket drafts (every bucket's candidates are [0]): an adaptive table would never speculate"
    return out


def _fmt_cell(iv):
    """``speedup [low, high]`` of a ratio_interval dict, the point alone without an interval, ``-`` for None."""
    if not iv:
        return "-"
    return "%.3f" % iv["speedup"] if iv.get("low") is None else "%.3f [%.3f, %.3f]" % (iv["speedup"], iv["low"], iv["high"])


def adaptive_markdown(adaptive, decision):
    """Lines of decision.md's "Adaptive table" section (table mode): what is served and why, SGLang's table, and per bucket
    each step count's speedup over steps 0 with its 95 % interval, the best count and ``candidate_steps``."""
    if not adaptive:
        return []
    lines = ["", "## Adaptive table", ""]
    if adaptive.get("static_because"):
        lines += ["Served: the static winner `%s` above, because %s." % (decision["winner"], adaptive["static_because"])]
        if not adaptive.get("buckets"):
            return lines
        lines.append("")
    else:
        sv = adaptive["server_vars"]
        lines += ["Served: SGLang's adaptive speculative decoding with the table below (`adaptive_table.json`, "
                  "`--speculative-adaptive-config`), %s, starting at %d steps (the largest candidate; topk 1, %d draft tokens)." % (
                      sv["sglang_server_speculative_algorithm"], sv["sglang_server_speculative_num_steps"],
                      sv["sglang_server_speculative_num_draft_tokens"]), "",
                  "```json", adaptive_config.table_json(adaptive["table"]).rstrip("\n"), "```", ""]
    counts = sorted(set(r["steps"] for b in adaptive["buckets"] for r in b["steps"]))
    lines += ["Per bucket (measured as a closed loop of concurrency = bucket; served from its key, the geometric midpoint "
              "of the bucket and the one below: a batch of n requests uses the largest key not above n): "
              "%s speedup of each step count over steps 0 (no speculation), 95 %% interval; candidates = the best count and every "
              "smaller count whose interval against the best reaches 1 and whose EMA down threshold lies below the best's "
              "accepted drafts (SGLang's EMA would settle on it otherwise)." % decision["metric"], "",
              "| bucket | key | " + " | ".join("%d step%s" % (c, "" if c == 1 else "s") for c in counts) + " | best | candidate_steps |",
              "|---:|---:|" + "---|" * len(counts) + "---:|---|"]
    for b in adaptive["buckets"]:
        rows = dict((r["steps"], r) for r in b["steps"])
        cells = [("1 (baseline)" if c == 0 else _fmt_cell(rows[c]["vs_off"])) if c in rows else "-" for c in counts]
        lines.append("| %d | %d | %s | %d | %s |" % (b["bucket"], b.get("key", b["bucket"]), " | ".join(cells), b["best"], b["candidate_steps"]))
    if adaptive.get("problems"):
        lines += [""] + ["- %s" % x for x in adaptive["problems"]]
    return lines


def plot_speedup(path, title, table, baseline):
    """speedup.png: one line per arm, 95 % band shaded; raises ImportError without matplotlib."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 5))
    try:
        for key, rows in table.items():
            if not rows:
                continue
            xs = [r["concurrency"] for r in rows]
            line, = ax.plot(xs, [r["speedup"] for r in rows], marker="o", label=key)
            if all(r["low"] is not None for r in rows):
                ax.fill_between(xs, [r["low"] for r in rows], [r["high"] for r in rows], alpha=0.2, color=line.get_color())
        ax.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("concurrency")
        ax.set_ylabel("speedup over %s (95 %% band)" % baseline)
        ax.set_title(title)
        ax.legend()
        ax.grid(True, alpha=0.3)
        fig.savefig(path, format="png", metadata={"Software": None})
    finally:
        plt.close(fig)


def decide(p, check_mode):
    state = load_state(p["state_file"])
    if state is None:
        raise ValueError("no state file %s; run action=plan first" % p["state_file"])
    weights = _weights(p)
    if not weights:
        raise ValueError("weights is empty: give the target concurrency ({\"32\": 1}) or a production distribution")
    results = _results(state)
    static_results, partial = complete_sweeps(results, weights) if table_mode(p) else (results, [])
    decision = sd.decide(static_results, p["objective"], weights, p["min_gain"])
    decision["problems"] = partial + decision["problems"]
    previous = state.get("decision") or {}
    same = previous.get("winner") == decision["winner"] and previous.get("weights") == decision["weights"] \
        and previous.get("objective") == decision["objective"]
    decision["time"] = previous.get("time") if same and previous.get("time") else _utcnow()
    decision["speedup_table"] = sd.speedup_table(results, decision["baseline"], p["objective"])
    decision["accept_length"] = dict((k, dict((str(c), v) for c, v in per.items())) for k, per in accept_lengths(results).items())
    decision["category_acceptance"] = sd.category_acceptance(results, [int(c) for c in decision["weights"]])
    decision["input_length_acceptance"] = sd.input_length_acceptance(results, [int(c) for c in decision["weights"]])
    decision["long_context_warnings"] = sd.long_context_warnings(decision["input_length_acceptance"], decision["winner"],
                                                                 decision["baseline"])
    decision["fingerprint"] = state.get("fingerprint", {})
    winner = next(r["arm"] for r in results if r["arm"]["key"] == decision["winner"])
    winner_vars = dict(("sglang_server_" + k, winner[k]) for k in sd.ARM_KEYS[1:])
    adaptive = adaptive_decision(p, results, weights)
    if adaptive.get("server_vars"):
        # the table is served: the static settings of its largest candidate, adaptive on
        winner_vars = adaptive["server_vars"]
        winner = sd.normalize_arm(dict((k, winner_vars["sglang_server_" + k]) for k in sd.ARM_KEYS[1:]))
    elif adaptive:
        winner_vars = dict(winner_vars, sglang_server_speculative_adaptive=False, sglang_server_speculative_adaptive_config={})
    if adaptive:
        decision["adaptive"] = adaptive
    md = decision_markdown(p["title"], decision, state) + "\n".join(adaptive_markdown(adaptive, decision) + [""] if adaptive else [])
    files = []
    if not check_mode:
        state["decision"] = {"winner": decision["winner"], "weights": decision["weights"], "objective": decision["objective"],
                             "time": decision["time"]}
        save_state(p["state_file"], state)
        if p["report_dir"]:
            out = dict(decision, winner_arm=winner, winner_vars=winner_vars)
            content = {"decision.json": json.dumps(out, indent=1, sort_keys=True) + "\n", "decision.md": md,
                       "winner_vars.json": json.dumps(winner_vars, indent=1, sort_keys=True) + "\n"}
            if adaptive.get("server_vars"):
                content["adaptive_table.json"] = adaptive_config.table_json(adaptive["table"])
            content = dict((name, text.encode("utf-8")) for name, text in content.items())
            if p["plots"]:
                with plot_dir("llmops-spec-tune-plot-") as tmp:
                    png = os.path.join(tmp, "speedup.png")
                    plot_speedup(png, "%s: speedup over %s" % (p["title"], decision["baseline"]), decision["speedup_table"],
                                 decision["baseline"])
                    content["speedup.png"] = read_back(png)
            files = write_report_files(p["report_dir"], content)[0]
    record = {"arm": winner, "server_vars": winner_vars, "time": decision["time"], "objective": decision["objective"],
              "weights": decision["weights"], "basis": decision["basis"], "significant": decision["significant"],
              "category_acceptance": decision["category_acceptance"],
              "input_length_acceptance": decision["input_length_acceptance"], "evidence": decision["arms"],
              "speedup_table": decision["speedup_table"], "fingerprint": decision["fingerprint"],
              "report_dir": p.get("report_dir"), "tuned_on": p.get("tuned_on") or "", "mode": p.get("mode") or "static"}
    if adaptive:
        record["adaptive"] = {"refusal": adaptive["refusal"], "table": adaptive["table"], "static_because": adaptive["static_because"]}
    return {"decision": decision, "winner": winner, "winner_vars": winner_vars, "markdown": md, "files": files, "record": record,
            "adaptive": adaptive}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            action=dict(type="str", required=True, choices=["plan", "record", "finish", "decide"]),
            state_file=dict(type="path", required=True),
            arms=dict(type="list", elements="dict", default=[]),
            default_algorithm=dict(type="str", default="NEXTN"),
            running=dict(type="dict", default={}),
            fingerprint=dict(type="dict", default={}),
            fresh=dict(type="bool", default=False),
            trials=dict(type="int", default=3),
            min_trials=dict(type="int", default=2),
            arm=dict(type="str"),
            trial=dict(type="int"),
            records=dict(type="list", elements="dict", default=[]),
            failed=dict(type="str", default=""),
            verification=dict(type="dict", default={}),
            duration_s=dict(type="float"),
            objective=dict(type="str", default="throughput", choices=["throughput", "goodput", "tpot"]),
            weights=dict(type="dict", default={}),
            min_gain=dict(type="float", default=0.0),
            report_dir=dict(type="path"),
            plots=dict(type="bool", default=True),
            title=dict(type="str", default="Speculative decoding tuning"),
            tuned_on=dict(type="str", default=""),
            mode=dict(type="str", default="static", choices=["static", "table"]),
            table_steps=dict(type="list", elements="int", default=[]),
            buckets=dict(type="list", elements="int", default=[]),
            table_refusal=dict(type="str", default=""),
        ),
        required_if=[("action", "record", ["arm", "trial"]), ("action", "finish", ["arm"])],
        supports_check_mode=True,
    )
    p = module.params
    if p["trials"] < 1 or p["min_trials"] < 2:
        module.fail_json(msg="trials=%s must be >= 1 and min_trials=%s >= 2 (an interval needs two trials)" % (p["trials"], p["min_trials"]))
    started = time.time()
    try:
        handler = {"plan": plan, "record": record, "finish": finish, "decide": decide}[p["action"]]
        result = handler(p, module.check_mode)
    except (ValueError, sd.SpecDecisionError, ReportWriteError) as exc:
        module.fail_json(msg="spec_tune %s: %s" % (p["action"], exc))
    except ImportError as exc:
        module.fail_json(msg="spec_tune decide: cannot draw speedup.png (%s). Fix: install matplotlib for the controller's Python "
                             "or set speculative_tuning_plots=false." % exc)
    result.setdefault("arms", [])
    result.setdefault("pending", [])
    result.setdefault("eta_s", None)
    result.setdefault("early_stop", False)
    result.setdefault("trials_done", 0)
    result.setdefault("decision", {})
    result.setdefault("winner", {})
    result.setdefault("winner_vars", {})
    result.setdefault("files", [])
    result.setdefault("markdown", "")
    result.setdefault("summary", [] if p["action"] == "plan" else "")
    result.setdefault("record", {})
    result.setdefault("adaptive", {})
    result["elapsed_s"] = round(time.time() - started, 3)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
