# -*- coding: utf-8 -*-
# Copyright: llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Thin Jinja2 filter of the benchmark (the sweep itself is planned by the serving_benchmark action plugin).

* ``sglang_benchmark_workload | llmops.sglang.workload_digest(playbook_dir)`` -> ``"sha256:<hex>"`` or ``""``: what
  the workload sends, by content (``workloads.content_digest``), for the skip-if-unchanged fingerprint.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.sglang.plugins.module_utils._bench.workloads import WorkloadError, content_digest


def workload_digest(spec, basedir=None):
    """Digest of the workload ``spec`` by content (``workloads.content_digest``; relative paths as the serving_benchmark
    action plugin reads them: from the current directory, else from ``basedir``). Raises AnsibleFilterError naming
    sglang_benchmark_workload when the files cannot be found or read."""
    try:
        return content_digest("" if spec is None else str(spec), basedir)
    except WorkloadError as exc:
        raise AnsibleFilterError("sglang_benchmark_workload=%r: %s (nothing was sent)" % (spec, exc))


class FilterModule(object):
    """llmops.sglang benchmark filters."""

    def filters(self):
        return {"workload_digest": workload_digest}
