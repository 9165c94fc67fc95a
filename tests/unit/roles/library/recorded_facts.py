# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test-only module (tests/unit/roles): returns the given dict as ansible_facts so role task files
can be run on the controller with the recorded facts of another host (Ubuntu, RHEL, ...)."""
from __future__ import annotations

DOCUMENTATION = r"""
module: recorded_facts
short_description: Inject recorded host facts (tests only)
description: Returns O(facts) as C(ansible_facts), replacing fact gathering in role rendering tests.
options:
  facts:
    description: Facts to set (keys without the C(ansible_) prefix, e.g. C(distribution), C(llmops_gpu)).
    type: dict
    required: true
author: llmops.sglang developers
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec={"facts": {"type": "dict", "required": True}}, supports_check_mode=True)
    module.exit_json(changed=False, ansible_facts=module.params["facts"])


if __name__ == "__main__":
    main()
