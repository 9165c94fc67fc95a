#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: benchmark_report
short_description: Write serving-benchmark reports (JSONL, JSON, Markdown, PNG plots) and the MTP A/B decision
version_added: "1.0.0"
description:
  - Writes the records of a M(llmops.sglang.serving_benchmark) sweep under O(dest)/<host>/<run_id>/ as
    C(results.jsonl) (bench_serving-compatible, one line per level, appended like bench_serving's C(--output-file);
    a line already present is not written twice), C(summary.json) (with C(categories) rows, C(warnings),
    C(input_length_buckets) rows (accept length per input-length bucket C(<2k), C(2k-8k), C(8k-16k), C(>16k) of the
    requests' prompt tokens), C(input_length_warnings) and C(workload_rows), the prompt file's rows used and skipped by
    reason, when the records carry it), C(summary.md) (with the workload rows line, the per-category and
    per-input-length tables and warnings; a warning when a long bucket's accept length is below 1.3 while the short
    bucket's is not, and in an A/B when the candidate wins overall but decodes slower or accepts below 1.3 on long
    prompts) and, with O(plots), C(accept_length_by_input_length.png) when a level has per-bucket accept lengths, and PNG
    plots made
    with matplotlib - C(output_throughput.png) (output tok/s vs concurrency), C(decode_speed.png) (per-request decode
    tok/s = 1000 / median TPOT vs concurrency), C(ttft.png) and C(tpot.png) (median/p90/p99 vs concurrency), and for a
    prompt workload C(accept_length_by_category.png) (accept length per category and level, p10-p90 whiskers).
  - With O(baseline_records) it also compares the two runs level by level (speedup = O(records) output throughput /
    O(baseline_records) output throughput), finds the crossover concurrency (speedup 1.0, interpolated in log2
    concurrency), decides the winner at O(target_concurrency) with the tuner's decision engine (the one
    M(llmops.sglang.spec_tune) uses - two arms, one sweep each, a point estimate), and writes C(ab_summary.json), C(ab_summary.md),
    C(ab_throughput.png), C(ab_speedup.png) and, for a prompt workload, C(ab_speedup_by_category.png) (per-request
    decode speedup per category and level). When either run used synthetic prompts (C(random-ids)) with speculative
    decoding, the decision's reason and the report carry that warning.
  - Meant to run on the controller (C(delegate_to localhost)). Files are only rewritten when their content changes.
author:
  - llmops.sglang developers (@llmops)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
requirements:
  - matplotlib (only when O(plots=true)), on the host that runs the module
options:
  dest:
    description: Report root directory; files go to O(dest)/O(host)/O(run_id)/.
    type: path
    required: true
  host:
    description: Host name the benchmark measured (usually C(inventory_hostname)).
    type: str
    required: true
  run_id:
    description: Run identifier (directory name); letters, digits, C(.), C(_), C(-) only.
    type: str
    required: true
  records:
    description: Level records as returned by M(llmops.sglang.serving_benchmark) in C(records) (the candidate in an
      A/B comparison). May be partial (a failed sweep); an empty list writes nothing and fails.
    type: list
    elements: dict
    required: true
  title:
    description: Title of the Markdown summary and the plots.
    type: str
    default: SGLang serving benchmark
  raw_records:
    description:
      - Where the records were written as they were measured (M(llmops.sglang.serving_benchmark)'s O(raw_records),
        a JSONL file on the controller). Only named in a refusal, so that a report that cannot be written says where the
        measurement is kept. Nothing is read from it.
    type: str
    default: ""
  plots:
    description: Draw the PNG plots (needs matplotlib).
    type: bool
    default: true
  baseline_records:
    description: Records of the baseline run (for example MTP off) for the A/B comparison; omit for a single run.
    type: list
    elements: dict
  baseline_label:
    description: Name of the baseline in the A/B tables and plots.
    type: str
    default: mtp_off
  candidate_label:
    description: Name of the candidate (O(records)) in the A/B tables and plots.
    type: str
    default: mtp_on
  target_concurrency:
    description: Concurrency the service really runs at; the A/B decision is taken there. It must be one of the
      measured levels, without failed requests in either run (C(playbooks/mtp_ab.yml) adds it to the sweep); a speedup
      is never interpolated or extrapolated into a decision. Otherwise the module fails naming the level and the fix.
    type: float
  min_gain:
    description: The candidate wins only when its speedup exceeds 1 + this fraction (0.02 = 2 %). A tie keeps the baseline.
    type: float
    default: 0.0
attributes:
  check_mode:
    support: full
    details: Computes everything and reports which files would change, without writing.
  diff_mode:
    support: none
  platform:
    platforms: posix
"""

EXAMPLES = r"""
- name: Report of one sweep on the controller
  llmops.sglang.benchmark_report:
    dest: "{{ playbook_dir }}/../reports"
    host: "{{ inventory_hostname }}"
    run_id: "{{ sglang_benchmark_run_id }}"
    records: "{{ bench.records }}"
  delegate_to: localhost

- name: MTP off vs on, decision at concurrency 32
  llmops.sglang.benchmark_report:
    dest: reports
    host: "{{ inventory_hostname }}"
    run_id: ab-20261129
    baseline_records: "{{ off.records }}"
    records: "{{ on.records }}"
    target_concurrency: 32
  delegate_to: localhost
  register: ab
"""

RETURN = r"""
path:
  description: Directory the report was written to.
  returned: always
  type: str
files:
  description: Files of the report (written or unchanged).
  returned: always
  type: list
  elements: str
changed_files:
  description: Files written by this call (or that would be, in check mode).
  returned: always
  type: list
  elements: str
markdown:
  description: The per-level Markdown table of O(records) (and the A/B table when compared).
  returned: always
  type: str
summary:
  description: Compact per-level rows of O(records), as the RV(llmops.sglang.serving_benchmark#module:summary) rows of
    M(llmops.sglang.serving_benchmark) (the columns of REPORT_FIELDS in C(plugins/module_utils/_report/benchmark.py)).
  returned: always
  type: list
  elements: dict
ab:
  description: The A/B comparison (C(levels) with C(speedup) per level and C(categories) (per category
    C(decode_speedup)), C(crossover), C(decision) with C(winner), C(winner_is_candidate), C(speedup), C(basis)
    (C(measured)), C(reason), C(warnings) and C(engine) (the decision engine's result with C(basis), C(point_estimate),
    per-arm C(arms) with C(mean))), C(warnings); empty without O(baseline_records).
  returned: always
  type: dict
"""

import json
import os
import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.llmops.sglang.plugins.module_utils._report.files import (
    ReportWriteError, plot_dir, read_back, run_id_problem, write_report_files,
)
from ansible_collections.llmops.sglang.plugins.module_utils._report.benchmark import (
    ReportError, ab_markdown, category_markdown, category_rows, compare, input_bucket_markdown, input_bucket_rows, phase_markdown,
    phase_rows,
    input_bucket_warnings, jsonl_line, level_key, markdown_table, plot_series,
    run_warnings, summary_rows, workload_rows,
)

MPL_IMP_ERR = None
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    HAS_MPL = True
except ImportError:
    MPL_IMP_ERR = traceback.format_exc()
    HAS_MPL = False


def _x(rec):
    key, val = level_key(rec)
    return val


def _xlabel(records):
    key = level_key(records[0])[0] if records else "max_concurrency"
    return "max concurrency (requests in flight)" if key == "max_concurrency" else "request rate (req/s)"


def _finish(fig, ax, path, title, ylabel, hline, grid_axis):
    """The common end of every plot: the reference line ``hline`` (grey, dashed; None for none), title, y label, grid
    (``grid_axis`` ``both`` or ``y``), legend, then the PNG written to ``path`` without the matplotlib version in its
    metadata (so an unchanged report is byte-identical). The caller closes the figure."""
    if hline is not None:
        ax.axhline(hline, color="grey", linestyle="--", linewidth=1)
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    ax.grid(True, axis=grid_axis, alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, format="png", metadata={"Software": None})


def _plot_series(path, title, xlabel, ylabel, series, hline=None, marker_x=None):
    """Write one PNG line plot; series = [(label, xs, ys)]. Log2 x axis when all x > 0."""
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=100)
    try:
        allx = []
        for label, xs, ys in series:
            pts = [(x, y) for x, y in zip(xs, ys) if y is not None]
            if not pts:
                continue
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
            allx.extend(p[0] for p in pts)
        if allx and min(allx) > 0 and max(allx) / min(allx) >= 4:
            ax.set_xscale("log", base=2)
            ax.set_xticks(sorted(set(allx)))
            ax.set_xticklabels([("%g" % v) for v in sorted(set(allx))])
        if marker_x is not None:
            ax.axvline(marker_x, color="red", linestyle=":", linewidth=1, label="crossover ~%.1f" % marker_x)
        ax.set_xlabel(xlabel)
        _finish(fig, ax, path, title, ylabel, hline, grid_axis="both")
    finally:
        plt.close(fig)


def plots_single(tmpdir, records, title):
    """Draw the single-run plots (:func:`bench_report.plot_series`) into tmpdir; returns {filename: bytes}."""
    xs = [_x(r) for r in records]
    xl = _xlabel(records)
    out = {}
    for name, t, yl, series in plot_series(records):
        path = os.path.join(tmpdir, name)
        _plot_series(path, "%s: %s" % (title, t), xl, yl, [(label, xs, ys) for label, ys in series])
        out[name] = read_back(path)
    return out


def _plot_bars(path, title, ylabel, cats, series, hline=None, errs=None):
    """Grouped bar chart: one group per category, one bar per series ``(label, [value per category])``; ``errs``:
    per series ``([low], [high])`` error-bar ends (absolute values) or None."""
    fig, ax = plt.subplots(figsize=(max(7, 0.75 * len(cats) + 2), 4.2), dpi=100)
    try:
        n = max(1, len(series))
        width = 0.8 / n
        for i, (label, vals) in enumerate(series):
            xs = [j + (i - (n - 1) / 2.0) * width for j in range(len(cats))]
            ys = [v if v is not None else 0.0 for v in vals]
            yerr = None
            if errs and errs[i] is not None:
                lo, hi = errs[i]
                yerr = [[max(0.0, y - (l if l is not None else y)) for y, l in zip(ys, lo)],
                        [max(0.0, (h if h is not None else y) - y) for y, h in zip(ys, hi)]]
            ax.bar(xs, ys, width=width, label=label, yerr=yerr, capsize=2)
        ax.set_xticks(list(range(len(cats))))
        ax.set_xticklabels(cats, rotation=30, ha="right")
        _finish(fig, ax, path, title, ylabel, hline, grid_axis="y")
    finally:
        plt.close(fig)


def plot_categories(tmpdir, records, title):
    """``accept_length_by_category.png``: accept length per category (bars per level, p10-p90 whiskers); {} without
    categories. Returns {filename: bytes}."""
    rows = category_rows(records)
    if not rows:
        return {}
    cats = sorted(set(r["category"] for r in rows))
    levels = []
    for r in rows:
        if r["level"] not in levels:
            levels.append(r["level"])
    series, errs = [], []
    for lv in levels:
        by = dict((r["category"], r) for r in rows if r["level"] == lv)
        name = "level %s (concurrency %s)" % (lv, _fmt_x(by[next(iter(by))]["concurrency"]))
        series.append((name, [by[c]["accept_length"] if c in by else None for c in cats]))
        errs.append(([by[c]["accept_length_p10"] if c in by else None for c in cats],
                     [by[c]["accept_length_p90"] if c in by else None for c in cats]))
    path = os.path.join(tmpdir, "accept_length_by_category.png")
    _plot_bars(path, "%s: accept length by category (p10-p90)" % title, "accept length (tokens per verify step)", cats, series,
               hline=1.0, errs=errs)
    return {"accept_length_by_category.png": read_back(path)}


def plot_input_buckets(tmpdir, records, title):
    """``accept_length_by_input_length.png``: accept length per input-length bucket (bars per level, p10-p90 whiskers);
    {} when no bucket has an accept length. Returns {filename: bytes}."""
    rows = [r for r in input_bucket_rows(records) if r["accept_length"] is not None]
    if not rows:
        return {}
    buckets = []
    levels = []
    for r in rows:
        if r["bucket"] not in buckets:
            buckets.append(r["bucket"])
        if r["level"] not in levels:
            levels.append(r["level"])
    series, errs = [], []
    for lv in levels:
        by = dict((r["bucket"], r) for r in rows if r["level"] == lv)
        series.append(("level %s (concurrency %s)" % (lv, _fmt_x(by[next(iter(by))]["concurrency"])),
                       [by[b]["accept_length"] if b in by else None for b in buckets]))
        errs.append(([by[b]["accept_length_p10"] if b in by else None for b in buckets],
                     [by[b]["accept_length_p90"] if b in by else None for b in buckets]))
    path = os.path.join(tmpdir, "accept_length_by_input_length.png")
    _plot_bars(path, "%s: accept length by input tokens (p10-p90)" % title, "accept length (tokens per verify step)", buckets,
               series, hline=1.0, errs=errs)
    return {"accept_length_by_input_length.png": read_back(path)}


def plot_ab_categories(tmpdir, ab, title):
    """``ab_speedup_by_category.png``: per-request decode speedup per category and level; {} without categories."""
    rows = [r for r in ab["levels"] if r.get("categories")]
    if not rows:
        return {}
    cats = sorted(set(c for r in rows for c in r["categories"]))
    series = [("concurrency %s" % _fmt_x(r["level"]), [(r["categories"].get(c) or {}).get("decode_speedup") for c in cats]) for r in rows]
    path = os.path.join(tmpdir, "ab_speedup_by_category.png")
    _plot_bars(path, "%s: decode speedup %s / %s by category" % (title, ab["candidate_label"], ab["baseline_label"]),
               "per-request decode speedup", cats, series, hline=1.0)
    return {"ab_speedup_by_category.png": read_back(path)}


def _fmt_x(v):
    return "-" if v is None else ("%g" % v)


def plots_ab(tmpdir, ab, baseline, candidate, title):
    """Draw the A/B plots into tmpdir; returns {filename: bytes}."""
    rows = [r for r in ab["levels"] if r["level"] != float("inf")]
    xs = [r["level"] for r in rows]
    xl = _xlabel(candidate)
    cx = ab["crossover"]["concurrency"]
    out = {}
    specs = [
        ("ab_throughput.png", "%s: output throughput, %s vs %s" % (title, ab["baseline_label"], ab["candidate_label"]), "output tok/s",
         [(ab["baseline_label"], xs, [r["baseline_output_tok_s"] for r in rows]),
          (ab["candidate_label"], xs, [r["candidate_output_tok_s"] for r in rows])], None),
        ("ab_speedup.png", "%s: speedup %s / %s" % (title, ab["candidate_label"], ab["baseline_label"]),
         "ratio %s / %s" % (ab["candidate_label"], ab["baseline_label"]),
         [("output throughput", xs, [r["speedup"] for r in rows]), ("per-request decode", xs, [r["decode_speedup"] for r in rows])], 1.0),
    ]
    for name, t, yl, series, hline in specs:
        path = os.path.join(tmpdir, name)
        _plot_series(path, t, xl, yl, series, hline=hline, marker_x=cx if name == "ab_speedup.png" else None)
        out[name] = read_back(path)
    return out


def summary_md(title, host, run_id, records, ab_md=None):
    lines = ["# %s" % title, "", "Host: `%s`, run: `%s`" % (host, run_id), ""]
    first = records[0] if records else {}
    spec = first.get("speculative") or {}
    # random_input_len is what was asked for (bench_serving writes it for every dataset); only random ids are that long.
    if first.get("dataset_name", "random-ids") == "random-ids":
        lengths = "input %s / output %s tokens (range ratio %s)" % (
            first.get("random_input_len"), first.get("random_output_len"), first.get("random_range_ratio"))
    else:
        lengths = "input: the workload's own prompts / output %s tokens (range ratio %s)" % (
            first.get("random_output_len"), first.get("random_range_ratio"))
    lines.append("Backend `%s`, workload `%s` (temperature %s, top_p %s), %s, speculative: %s"
                 % (first.get("backend"), first.get("dataset_name"), first.get("temperature", 0.0), first.get("top_p", 1.0), lengths,
                    ("%s steps=%s topk=%s draft_tokens=%s" % (spec.get("algorithm"), spec.get("num_steps"), spec.get("eagle_topk"),
                                                              spec.get("num_draft_tokens"))) if spec.get("algorithm") else "off"))
    counts = workload_rows(records)
    if counts:
        lines += ["", "Workload rows (%s): %s" % (", ".join(counts.get("files") or []), counts.get("text"))]
    lines += ["", markdown_table(records), ""]
    for w in run_warnings(records):
        lines += ["**Warning:** %s" % w, ""]
    cat_md = category_markdown(records)
    if cat_md:
        lines += ["## Per category (workload `%s`)" % first.get("dataset_name"), "", cat_md, ""]
    phase_md = phase_markdown(records)
    if phase_md:
        lines += ["## Per phase (a load that moves)", "", phase_md, ""]
    bucket_md = input_bucket_markdown(records)
    if bucket_md:
        lines += ["## Accept length by input length", "", bucket_md, ""]
        for w in input_bucket_warnings(records):
            lines += ["**Warning:** %s" % w, ""]
    errs = [(r.get("level"), e) for r in records for e in (r.get("error_kinds") or [])]
    if errs:
        lines.append("## Failed requests")
        lines.append("")
        for lv, e in errs[:10]:
            lines.append("- level %s: %s (x%s)" % (lv, e.get("error"), e.get("count")))
        lines.append("")
    if ab_md:
        lines += ["## A/B comparison", "", ab_md, ""]
    return "\n".join(lines)


def merge_jsonl(existing, records):
    """bench_serving append semantics: keep existing lines, append each record line not already present."""
    lines = [ln for ln in existing.splitlines() if ln.strip()]
    have = set(lines)
    for rec in records:
        ln = jsonl_line(rec)
        if ln not in have:
            lines.append(ln)
            have.add(ln)
    return "\n".join(lines) + "\n"


def main():
    module = AnsibleModule(
        argument_spec=dict(
            dest=dict(type="path", required=True),
            host=dict(type="str", required=True),
            run_id=dict(type="str", required=True),
            records=dict(type="list", elements="dict", required=True),
            title=dict(type="str", default="SGLang serving benchmark"),
            raw_records=dict(type="str", default=""),
            plots=dict(type="bool", default=True),
            baseline_records=dict(type="list", elements="dict"),
            baseline_label=dict(type="str", default="mtp_off"),
            candidate_label=dict(type="str", default="mtp_on"),
            target_concurrency=dict(type="float"),
            min_gain=dict(type="float", default=0.0),
        ),
        supports_check_mode=True,
    )
    p = module.params
    result = dict(changed=False, path="", files=[], changed_files=[], markdown="", summary=[], ab={})

    def fail(msg, **kwargs):
        """Refuse; after a sweep, name where its records are kept (raw_records, written before this module ran)."""
        if p["raw_records"]:
            msg = "%s [the measured records are kept in %s]" % (msg, p["raw_records"])
        module.fail_json(msg=msg, **kwargs)

    problem = run_id_problem("run_id", p["run_id"])
    if problem:
        fail("benchmark_report: %s" % problem, **result)
    if "/" in p["host"] or p["host"] in ("", ".", ".."):
        fail("benchmark_report: host=%r is not usable as a directory name (empty, '.', '..' or with '/'); "
             "pass the inventory_hostname, e.g. host: '{{ inventory_hostname }}'" % p["host"], **result)
    records = p["records"]
    if not records:
        fail("benchmark_report: records is empty: the benchmark measured no level, nothing to report", **result)
    if p["plots"] and not HAS_MPL:
        fail(missing_required_lib("matplotlib", reason="to draw the benchmark plots (or set plots=false)"),
             exception=MPL_IMP_ERR, **result)
    outdir = os.path.join(p["dest"], p["host"], p["run_id"])
    result["path"] = outdir
    result["summary"] = summary_rows(records)
    ab = {}
    ab_md = None
    if p["baseline_records"] is not None:
        try:
            ab = compare(p["baseline_records"], records, target=p["target_concurrency"], min_gain=p["min_gain"],
                         baseline_label=p["baseline_label"], candidate_label=p["candidate_label"])
        except ReportError as exc:
            fail("benchmark_report: A/B comparison impossible: %s" % to_native(exc), **result)
        ab_md = ab_markdown(ab)
    result["ab"] = ab
    md = summary_md(p["title"], p["host"], p["run_id"], records, ab_md)
    cat_md = category_markdown(records)
    warn_md = "".join("\n\nWARNING: %s" % w for w in run_warnings(records) if not ab_md)
    result["markdown"] = (markdown_table(records) + warn_md + (("\n\n" + cat_md) if cat_md else "")
                          + (("\n\n" + ab_md) if ab_md else ""))

    jsonl_path = os.path.join(outdir, "results.jsonl")
    existing = ""
    if os.path.exists(jsonl_path):
        with open(jsonl_path) as fh:
            existing = fh.read()
    content = {
        "results.jsonl": merge_jsonl(existing, records).encode("utf-8"),
        "summary.json": (json.dumps({"host": p["host"], "run_id": p["run_id"], "title": p["title"], "levels": summary_rows(records),
                                     "categories": category_rows(records), "warnings": run_warnings(records),
                                     "input_length_buckets": input_bucket_rows(records),
                                     "input_length_warnings": input_bucket_warnings(records),
                                     "phases": phase_rows(records),
                                     "workload_rows": workload_rows(records),
                                     "records": records}, indent=1, sort_keys=True, default=str) + "\n").encode("utf-8"),
        "summary.md": md.encode("utf-8"),
    }
    if ab:
        content["ab_summary.json"] = (json.dumps(ab, indent=1, sort_keys=True) + "\n").encode("utf-8")
        content["ab_summary.md"] = ("# %s: A/B\n\n%s\n" % (p["title"], ab_md)).encode("utf-8")
    if p["plots"]:
        try:
            with plot_dir("llmops-bench-plots-") as tmp:
                content.update(plots_single(tmp, records, p["title"]))
                content.update(plot_categories(tmp, records, p["title"]))
                content.update(plot_input_buckets(tmp, records, p["title"]))
                if ab:
                    content.update(plots_ab(tmp, ab, p["baseline_records"], records, p["title"]))
                    content.update(plot_ab_categories(tmp, ab, p["title"]))
        except Exception as exc:  # pylint: disable=broad-except
            fail("benchmark_report: drawing the plots failed: %s: %s" % (type(exc).__name__, to_native(exc)),
                 exception=traceback.format_exc(), **result)
    try:
        result["files"], result["changed_files"] = write_report_files(outdir, content, module.check_mode)
    except ReportWriteError as exc:
        fail("benchmark_report: %s" % to_native(exc), **result)
    result["changed"] = bool(result["changed_files"])
    module.exit_json(**result)


if __name__ == "__main__":
    main()
