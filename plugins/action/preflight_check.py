# -*- coding: utf-8 -*-
# Copyright: llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of llmops.sglang.preflight_check: preflight's checks, on the controller, in one task.

1. Every variable in scope with a prefix of the collection (``plugin_utils/_vars/checks.py``: the roles' argument
   specs through the generated ``role_specs`` table, RULES, misspelled names), then the benchmark's inputs with the
   benchmark's own checks (``plugin_utils/_vars/benchmark.py``: its options and plan, the workload files and the trace
   on this controller, the run id by the report writer's rule); a problem here stops the task before the host checks,
   as a bad value must not wait for the stage that uses it. ``checks: benchmark`` runs only the benchmark's inputs (the
   sglang_benchmark role's first task).
2. This host against the deployment (``plugin_utils/_host/preflight.py`` over ``plugin_utils/_host/policy.py``), from
   the facts gpu_facts wrote and its ``model_dir`` read (the registered ``preflight_gpu_facts_read``).

Values are read from the task's variables and templated here (as ``validate_argument_spec`` does); nothing runs on the
target. The result is printed like ``debug`` (the report), and the task fails with every problem listed together.
"""

from __future__ import annotations

from ansible.errors import AnsibleError
from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.action import ActionBase

from ansible_collections.llmops.sglang.plugins.plugin_utils._host import preflight
from ansible_collections.llmops.sglang.plugins.plugin_utils._vars import benchmark, checks
from ansible_collections.llmops.sglang.plugins.plugin_utils._vars.role_specs import ROLE_VARIABLES

CHECKS = ("variables", "host", "benchmark")
#: Roles whose argument-spec default stands for a setting the inventory leaves unset (they run after preflight).
_DEFAULTS_FROM = ("nvidia_driver", "iommu", "nccl", "sglang_server")


class ActionModule(ActionBase):
    """Check the variables, then the host; fail once with every problem."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset(("checks",))

    def _value(self, task_vars, name, default=None):
        """The templated value of a variable in scope; ``default`` when it is not set."""
        if name not in task_vars:
            return default
        return self._templar.template(task_vars[name])

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        task_vars = task_vars or {}
        wanted = self._task.args.get("checks", ["variables", "host"])
        if isinstance(wanted, str):
            wanted = [wanted]
        unknown = [c for c in wanted if c not in CHECKS]
        if unknown:
            result.update(failed=True, msg="preflight_check: checks=%s: not one of %s" % (unknown, ", ".join(CHECKS)))
            return result
        host = to_native(task_vars.get("inventory_hostname", "localhost"))
        result["changed"] = False

        if "variables" in wanted:
            broken = []

            def value_of(name):
                try:
                    return self._value(task_vars, name)
                except AnsibleError as exc:
                    broken.append("%s: its value cannot be evaluated (%s). Fix: define what it refers to, or remove it"
                                  % (name, to_native(exc).splitlines()[0]))
                    return None

            # Names that are facts (ansible_facts) come from the host or the fact cache, not from the inventory or -e: a
            # cacheable fact an earlier version of a role set (iommu_plan) is no misspelling of the user's.
            facts = task_vars.get("ansible_facts") or {}
            problems = checks.collection_variable_problems(
                [name for name in task_vars if name not in facts], value_of, self._value(task_vars, "preflight_known_variables", []) or [],
                {"image_cuda_version": self._value(task_vars, "preflight_image_cuda_version", "13.0")})
            problems = broken + problems
            problems += self._benchmark_problems(task_vars, value_of, problems)
            if problems:
                result.update(failed=True, variable_problems=problems,
                              msg=["Preflight refused the variables of %s (%d problem(s)):" % (host, len(problems))] + problems)
                return result

        if "benchmark" in wanted and "variables" not in wanted:
            problems = self._benchmark_problems(task_vars, lambda name: self._value(task_vars, name), [])
            if problems:
                result.update(failed=True, variable_problems=problems,
                              msg=["Refused the benchmark inputs of %s (%d problem(s)):" % (host, len(problems))] + problems)
                return result

        if "host" in wanted:
            facts = self._templar.template(task_vars.get("ansible_facts") or {})
            if not isinstance(facts.get("llmops_gpu"), dict):
                result.update(failed=True, msg="preflight_check on %s: ansible_facts.llmops_gpu is missing. Fix: run llmops.sglang.gpu_facts "
                                               "before this task (the preflight role does)" % host)
                return result
            values = dict((name, self._host_value(task_vars, name)) for name in preflight.VALUES)
            gpu_read = self._value(task_vars, "preflight_gpu_facts_read", {}) or {}
            found = preflight.host_checks(
                host, facts["llmops_gpu"], facts, values, model_dir=gpu_read.get("model_dir"), mounts=facts.get("mounts") or [],
                connection=self._value(task_vars, "ansible_connection", "ssh") or "ssh",
                addresses=list(facts.get("all_ipv4_addresses") or []) + list(facts.get("all_ipv6_addresses") or []),
                machine_id=facts.get("machine_id"))
            problems = found["problems"]
            result["report"] = found["report"]
            result["_ansible_verbose_always"] = True
            if problems and checks.coerce("bool", self._value(task_vars, "preflight_fail", True)):
                result.update(failed=True, msg=["Preflight refused %s (%d problem(s)):" % (host, len(problems))] + problems)
            elif problems:
                result["msg"] = "Preflight found %d problem(s) on %s; preflight_fail is false, so they are only reported." % (len(problems), host)
            else:
                result["msg"] = "Preflight passed on %s." % host
        else:
            result["msg"] = "The variables of %s passed." % host
        return result

    def _benchmark_problems(self, task_vars, value_of, found):
        """The sglang_benchmark role's inputs (``plugin_utils/_vars/benchmark.py``: the benchmark's own checks, its
        workload files and trace on this controller, the run id by the report writer's rule), from the variables set in
        scope; a variable already refused in ``found`` is left to its default, so it is reported once."""
        refused = set(p.split("=", 1)[0].split(":", 1)[0] for p in found)
        values = dict((name, value_of(name)) for name in benchmark.VARIABLES if name in task_vars and name not in refused)

        def read_trace(path):
            try:
                real = self._find_needle("files", path)
            except AnsibleError as exc:
                raise IOError(to_native(exc).splitlines()[0])
            with open(real, "r") as fh:
                return fh.read()

        basedir = self._loader.get_basedir() if self._loader is not None else None
        return benchmark.benchmark_problems(values, basedir, read_trace)

    def _host_value(self, task_vars, name):
        """A value of :data:`preflight.VALUES`: set in scope, else the host role's default, else None."""
        if name in task_vars:
            return self._value(task_vars, name)
        for role in _DEFAULTS_FROM:
            option = ROLE_VARIABLES.get(role, {}).get(name)
            if option is not None:
                return option.get("default")
        return None
