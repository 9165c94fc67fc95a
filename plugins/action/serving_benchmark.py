# -*- coding: utf-8 -*-
# Copyright: llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of llmops.sglang.serving_benchmark: reads a prompt-file workload on the controller.

When ``workload`` names a file, a directory or a glob (anything but ``random-ids``, ``builtin`` and ``auto``), the
files are read here, on the controller, with :mod:`workloads` (every bad file or row fails the task before the module
runs, so before any request is sent), filtered by ``workload_categories``, sampled to at most ``workload_max_prompts``
rows, and passed to the module on the load generator as ``prompts``. The load generator therefore needs nothing but
the standard library, and the prompt files need not exist there. Other workloads go to the module unchanged.
"""

from __future__ import annotations

from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.action import ActionBase

from ansible_collections.llmops.sglang.plugins.module_utils import workloads


class ActionModule(ActionBase):
    """Load the prompt files on the controller, then run the module with the rows as ``prompts``."""

    _VALID_ARGS = None  # the module validates its own arguments

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        args = dict(self._task.args)
        spec = args.get("workload")
        if spec not in (None, "") and spec not in workloads.NAMED_WORKLOADS and not args.get("prompts"):
            spec = to_native(spec)
            cats = args.get("workload_categories") or []
            if isinstance(cats, str):
                cats = [c.strip() for c in cats.split(",") if c.strip()]
            try:
                limit = int(args.get("workload_max_prompts", 2000))
                seed = int(args.get("seed", 1))
            except (TypeError, ValueError) as exc:
                result.update(failed=True, msg="serving_benchmark: workload_max_prompts and seed must be integers: %s" % exc)
                return result
            # a relative path that does not exist from the current directory is taken relative to the playbook's directory
            spec = workloads.locate(spec, self._loader.get_basedir() if self._loader is not None else None)
            try:
                _name, rows = workloads.load_workload(spec, cats, limit, seed)
            except workloads.WorkloadError as exc:
                result.update(failed=True, msg="serving_benchmark: %s (nothing was sent)" % to_native(exc), records=[])
                return result
            args["prompts"] = rows
            args["workload"] = to_native(self._task.args.get("workload"))
        result.update(self._execute_module(module_name="llmops.sglang.serving_benchmark", module_args=args,
                                           task_vars=task_vars))
        return result
