#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: fleet_report
short_description: One view across a fleet's serving benchmarks - a row per host, the fleet median, the slow hosts and why
version_added: "1.1.0"
description:
  - Writes O(dest)/fleet/O(run_id)/ on the controller - C(fleet.md) (one table with a row per host and a fleet-median row -
    output throughput, TTFT p50, TPOT p50 and accept length at every sweep level all hosts measured), C(fleet.json) (the
    same with the shortfalls and the flags) and, with O(plots), C(fleet_throughput.png) (output throughput per host and
    level, the fleet median marked, flagged hosts in red).
  - A host is flagged when its output throughput or its per-request decode speed (1000 / TPOT p50) is more than
    O(threshold) below the fleet median at a common level. A flagged host lists the facts that differ from the most
    common value among its siblings - GPU model and count, driver, NCCL P2P decision, SGLang version, image, image id,
    launch arguments and environment - so that "slower than its identical siblings" comes with the likely why.
  - Meant to run once on the controller (C(run_once), C(delegate_to localhost)) after a multi-host benchmark. Files are
    only rewritten when their content changes.
author:
  - llmops.sglang developers (@llmops)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
requirements:
  - matplotlib (only when O(plots=true)), on the host that runs the module
options:
  dest:
    description: Report root directory (the benchmark reports' root); files go to O(dest)/fleet/O(run_id)/.
    type: path
    required: true
  run_id:
    description: Name of the fleet report directory; letters, digits, C(.), C(_), C(-) only.
    type: str
    required: true
  entries:
    description:
      - One per host - C(host) (inventory name), C(run_id) (the benchmark the rows come from), C(rows) (the per-level
        rows of M(llmops.sglang.benchmark_report) C(summary) - C(concurrency), C(request_rate), C(completed),
        C(output_tok_s), C(median_ttft_ms), C(median_tpot_ms), C(accept_length)) and C(facts) (the C(server) and
        C(host) parts of M(llmops.sglang.benchmark_state) C(inputs)).
      - At least two hosts that share a measured level.
    type: list
    elements: dict
    required: true
  threshold:
    description: Fraction below the fleet median that flags a host (0.10 = 10 %); in [0, 1).
    type: float
    default: 0.10
  title:
    description: Title of C(fleet.md) and the plot.
    type: str
    default: SGLang fleet benchmark
  plots:
    description: Draw C(fleet_throughput.png) (needs matplotlib).
    type: bool
    default: true
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
- name: Fleet report after the benchmark
  llmops.sglang.fleet_report:
    dest: "{{ playbook_dir }}/reports"
    run_id: "fleet-{{ now(utc=true, fmt='%Y%m%dT%H%M%SZ') }}"
    entries:
      - host: gpu1
        run_id: 20261201T060000Z
        rows: [{concurrency: 1, request_rate: null, completed: 4, output_tok_s: 135.1, median_ttft_ms: 41.0,
                median_tpot_ms: 7.4, accept_length: 2.0}]
        facts: {server: {version: "0.5.9"}, host: {driver_version: "580.95.05"}}
      - host: gpu2
        run_id: 20261201T060000Z
        rows: [{concurrency: 1, request_rate: null, completed: 4, output_tok_s: 101.3, median_ttft_ms: 44.0,
                median_tpot_ms: 9.9, accept_length: 2.0}]
        facts: {server: {version: "0.5.9"}, host: {driver_version: "575.57.08"}}
    threshold: 0.10
  run_once: true
  delegate_to: localhost
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
  description: The content of C(fleet.md).
  returned: always
  type: str
report:
  description: The fleet report (C(threshold), C(levels), C(median) per level and metric, C(hosts) with C(values),
    C(shortfall), C(worst_shortfall), C(worst), C(flagged), C(differing_facts)), and C(flagged) (host names).
  returned: always
  type: dict
flagged:
  description: Names of the hosts more than O(threshold) below the fleet median.
  returned: always
  type: list
  elements: str
"""

import json
import os
import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.llmops.sglang.plugins.module_utils._report.fleet import FleetReportError, build, markdown
from ansible_collections.llmops.sglang.plugins.module_utils._report.files import (
    ReportWriteError, plot_dir, read_back, run_id_problem, write_report_files,
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


def plot_throughput(path, report, title):
    """Grouped bars: output tok/s per host (groups = common levels), the fleet median as a black tick per level,
    flagged hosts in red."""
    levels = report["levels"]
    hosts = report["hosts"]
    width = 0.8 / max(1, len(hosts))
    fig, ax = plt.subplots(figsize=(max(7, 1.2 * len(levels) * len(hosts) / 2 + 4), 4.2), dpi=100)
    try:
        for i, h in enumerate(hosts):
            xs = [j - 0.4 + width * (i + 0.5) for j in range(len(levels))]
            ys = [h["values"][lv]["output_tok_s"] or 0.0 for lv in levels]
            ax.bar(xs, ys, width * 0.9, label=h["host"] + (" (slow)" if h["flagged"] else ""),
                   color="tab:red" if h["flagged"] else None)
        for j, lv in enumerate(levels):
            med = report["median"][lv]["output_tok_s"]
            ax.hlines(med, j - 0.45, j + 0.45, colors="black", linestyles="--", linewidth=1,
                      label="fleet median" if j == 0 else None)
        ax.set_xticks(range(len(levels)))
        ax.set_xticklabels(levels)
        ax.set_title("%s: output throughput per host (flagged > %.0f %% below the median)" % (title, report["threshold"] * 100))
        ax.set_xlabel("sweep level (c = max concurrency, r = request rate)")
        ax.set_ylabel("output tok/s")
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(loc="best", fontsize=7)
        fig.tight_layout()
        fig.savefig(path, format="png", metadata={"Software": None})
    finally:
        plt.close(fig)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            dest=dict(type="path", required=True),
            run_id=dict(type="str", required=True),
            entries=dict(type="list", elements="dict", required=True),
            threshold=dict(type="float", default=0.10),
            title=dict(type="str", default="SGLang fleet benchmark"),
            plots=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    result = dict(changed=False, path="", files=[], changed_files=[], markdown="", report={}, flagged=[])
    problem = run_id_problem("run_id", p["run_id"])
    if problem:
        module.fail_json(msg="fleet_report: %s" % problem, **result)
    if p["plots"] and not HAS_MPL:
        module.fail_json(msg=missing_required_lib("matplotlib", reason="to draw the fleet plot (or set plots=false)"),
                         exception=MPL_IMP_ERR, **result)
    try:
        report = build(p["entries"], threshold=p["threshold"])
    except FleetReportError as exc:
        module.fail_json(msg="fleet_report: %s" % to_native(exc), **result)
    md = markdown(report, p["title"])
    outdir = os.path.join(p["dest"], "fleet", p["run_id"])
    result.update(path=outdir, markdown=md, report=report, flagged=report["flagged"])
    content = {
        "fleet.md": md.encode("utf-8"),
        "fleet.json": (json.dumps({"title": p["title"], "run_id": p["run_id"], "report": report,
                                   "entries": p["entries"]}, indent=1, sort_keys=True) + "\n").encode("utf-8"),
    }
    if p["plots"]:
        try:
            with plot_dir("llmops-fleet-plot-") as tmp:
                path = os.path.join(tmp, "fleet_throughput.png")
                plot_throughput(path, report, p["title"])
                content["fleet_throughput.png"] = read_back(path)
        except Exception as exc:  # pylint: disable=broad-except
            module.fail_json(msg="fleet_report: drawing the plot failed: %s: %s" % (type(exc).__name__, to_native(exc)),
                             exception=traceback.format_exc(), **result)
    try:
        result["files"], result["changed_files"] = write_report_files(outdir, content, module.check_mode)
    except ReportWriteError as exc:
        module.fail_json(msg="fleet_report: %s" % to_native(exc), **result)
    result["changed"] = bool(result["changed_files"])
    module.exit_json(**result)


if __name__ == "__main__":
    main()
