# -*- coding: utf-8 -*-
"""llmops.sglang.jsonfile_memory (the fact cache of ansible.cfg): jsonfile's files, each decoded once per run.

The values are worked out by hand: what the file must hold after a set, how many times a file is read, what a
second run (a new plugin instance, or a second ansible-playbook) sees."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from ansible.errors import AnsibleError
from ansible.plugins.loader import cache_loader
from ansible._internal._plugins._cache import PluginInterposer
from ansible._internal._datatag._tags import TrustedAsTemplate


@pytest.fixture(scope="module")
def plugin_loader(repo_root):
    """ansible-core's cache plugin loader with plugins/cache added as a plugin directory: the plugin loads by its short
    name whatever this test process imported before (other tests import ``ansible_collections.llmops.sglang`` from
    sys.path, after which the collection loader cannot load the collection's metadata). Loading by FQCN, as ansible.cfg
    names it, is what test_two_ansible_playbook_runs_share_the_cache and tests/packaging check."""
    cache_loader.add_directory(str(repo_root / "plugins" / "cache"))


@pytest.fixture
def cache(plugin_loader, tmp_path):
    """A factory: a new plugin instance (a new run) over the cache directory tmp_path/facts."""

    def make(timeout=86400, prefix=None):
        options = {"_uri": str(tmp_path / "facts"), "_timeout": timeout}
        if prefix is not None:
            options["_prefix"] = prefix
        return cache_loader.get("jsonfile_memory", **options)
    return make


def test_not_wrapped_by_the_decoding_interposer(cache):
    """ansible-core wraps persistent plugins in PluginInterposer (a JSON decode per lookup); this one must not be."""
    plugin = cache()
    assert not isinstance(plugin, PluginInterposer)
    assert type(plugin).__name__ == "CacheModule" and plugin._persistent is False


def test_set_writes_plain_json_and_get_serves_the_same_object(cache, tmp_path):
    plugin = cache()
    facts = {"distribution": "Debian", "llmops_gpu": {"gpu_count": 4, "gpus": [{"name": "H200"}]}}
    plugin.set("gpu-1", facts)
    # the file: one JSON object, the facts as they are (no "__payload__" wrapper, no schema prefix in the name)
    assert json.loads((tmp_path / "facts" / "gpu-1").read_text()) == facts
    # the lookup is the object in memory, not a decoded copy
    assert plugin.get("gpu-1") is facts
    assert plugin.contains("gpu-1") and list(plugin.keys()) == ["gpu-1"]


def test_a_new_run_reads_each_file_once(cache, monkeypatch):
    cache().set("gpu-1", {"kernel": "6.1.0-28-amd64"})
    plugin = cache()                       # a new run: nothing in memory
    reads = []
    cls = type(plugin)
    real_load = cls._load

    def counting_load(self, filepath):
        reads.append(os.path.basename(filepath))
        return real_load(self, filepath)
    monkeypatch.setattr(cls, "_load", counting_load)
    for dummy in range(140):               # about what a no-change site.yml asks per host
        assert plugin.get("gpu-1") == {"kernel": "6.1.0-28-amd64"}
    assert reads == ["gpu-1"]


def test_tagged_strings_are_written_untagged_and_read_back_untrusted(cache):
    """A set_fact value that Ansible trusts as a template must not come back from the cache as trusted."""
    cache().set("gpu-1", {"note": TrustedAsTemplate().tag("{{ lookup('pipe', 'id') }}")})
    value = cache().get("gpu-1")["note"]
    assert value == "{{ lookup('pipe', 'id') }}"
    assert value.__class__ is str and not TrustedAsTemplate.is_tagged_on(value)   # plain str, not a tagged subclass


def test_prefix_and_expiry(cache, tmp_path):
    cache(prefix="fleet_").set("gpu-1", {"a": 1})
    path = tmp_path / "facts" / "fleet_gpu-1"
    assert json.loads(path.read_text()) == {"a": 1}
    # older than the timeout (10 s): expired, a new run gets KeyError (facts gathered again)
    old = time.time() - 11
    os.utime(path, (old, old))
    with pytest.raises(KeyError):
        cache(timeout=10, prefix="fleet_").get("gpu-1")
    # timeout 0 never expires
    assert cache(timeout=0, prefix="fleet_").get("gpu-1") == {"a": 1}


def test_a_value_json_cannot_hold_is_kept_for_the_run_only(cache, tmp_path):
    plugin = cache()
    plugin.set("gpu-1", {"a": 1})
    bad = {"a": 1, "when": object()}
    plugin.set("gpu-1", bad)
    assert plugin.get("gpu-1") is bad                      # this run still has it
    assert not (tmp_path / "facts" / "gpu-1").exists()     # the stale file is gone: the next run gathers again
    assert os.listdir(tmp_path / "facts") == []            # and no temporary file is left behind
    with pytest.raises(KeyError):
        cache().get("gpu-1")


def test_a_corrupt_file_fails_with_its_name_and_is_removed(cache, tmp_path):
    cache().set("gpu-1", {"a": 1})
    path = tmp_path / "facts" / "gpu-1"
    path.write_text('{"a": 1')
    with pytest.raises(AnsibleError, match="gpu-1"):
        cache().get("gpu-1")
    assert not path.exists()


def test_two_ansible_playbook_runs_share_the_cache(repo_root, tmp_path):
    """What the collection relies on: a cacheable set_fact of one run is a fact of the next run (benchmark.yml alone
    after site.yml), through ansible.cfg's fact_caching = llmops.sglang.jsonfile_memory. ansible.cfg also sets
    inject_facts_as_vars = false, so the next run sees it as ansible_facts.<name> only, which is where the roles'
    fallback (sglang_server__nccl_p2p_decision, sglang_benchmark__nccl_p2p_decision) finds it."""
    ansible_playbook = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    if not os.path.exists(ansible_playbook):
        pytest.skip("ansible-playbook not installed next to the test interpreter")
    facts_dir = tmp_path / "facts"
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(repo_root / ".collections"), ANSIBLE_CONFIG=str(repo_root / "ansible.cfg"),
               ANSIBLE_CACHE_PLUGIN_CONNECTION=str(facts_dir), ANSIBLE_NOCOLOR="1")
    first = tmp_path / "first.yml"
    first.write_text("- hosts: localhost\n  gather_facts: false\n  tasks:\n"
                     "    - ansible.builtin.set_fact:\n        nccl_p2p_decision: {p2p: disabled}\n        cacheable: true\n")
    second = tmp_path / "second.yml"
    second.write_text("- hosts: localhost\n  gather_facts: false\n  tasks:\n"
                      "    - ansible.builtin.copy:\n        dest: " + str(tmp_path / "out.json") + "\n"
                      "        content: \"{{ {'var': nccl_p2p_decision | default('undefined'), 'fact': ansible_facts.nccl_p2p_decision,"
                      " 'fallback': nccl_p2p_decision | default(ansible_facts.nccl_p2p_decision | default(none))} | to_json }}\"\n")
    for play in (first, second):
        proc = subprocess.run([ansible_playbook, "-i", "localhost,", "-c", "local",
                               "-e", "ansible_python_interpreter=" + sys.executable, str(play)],
                              cwd=str(repo_root), env=env, capture_output=True, text=True, timeout=120, check=False)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert "Unable to load the cache plugin" not in proc.stdout + proc.stderr
    wanted = {"var": "undefined", "fact": {"p2p": "disabled"}, "fallback": {"p2p": "disabled"}}
    assert json.loads((tmp_path / "out.json").read_text()) == wanted
    assert json.loads((facts_dir / "localhost").read_text())["nccl_p2p_decision"] == {"p2p": "disabled"}
