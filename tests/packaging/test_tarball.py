"""The collection as a user gets it: build the tarball, install it offline, use it from outside the repository.

One module-scoped build (``ansible-galaxy collection build``) and offline install into a temporary
collections path; every command then runs in a temporary directory with a throw-away ansible.cfg, so
nothing of this checkout (ansible.cfg, .collections, roles_path) is on the way. About 30 s.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

# Development-only paths (galaxy.yml build_ignore); none of them may be in the tarball.
DEV_ONLY = ("tests/", "benchmarks/", "extensions/", "scripts/", ".ci/", "inventories/sandbox/", "changelogs/fragments/",
            "build/", "docs/sandbox.md", "docs/simulator.md", "docs/design/SANDBOX_NOTES.md", "Makefile", "pytest.ini",
            "requirements.txt", "requirements-mitogen.txt", "ansible.cfg", "site.yml", "execution-environment.yml", ".gitignore", ".yamllint",
            ".ansible-lint")


def _run(cmd, cwd, env, timeout=300):
    proc = subprocess.run(cmd, cwd=str(cwd), env=env, capture_output=True, text=True, timeout=timeout, check=False)
    assert proc.returncode == 0, "%s failed (rc %d):\n%s\n%s" % (" ".join(map(str, cmd)), proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:])
    return proc.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(tarball path, work dir outside the repository, env that sees only the installed collection)."""
    base = tmp_path_factory.mktemp("tarball")
    work = base / "work"
    work.mkdir()
    (work / "ansible.cfg").write_text("[defaults]\ncollections_path = %s\nroles_path = %s\n" % (base / "collections", base / "roles"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(ANSIBLE_CONFIG=str(work / "ansible.cfg"), ANSIBLE_HOME=str(base / "home"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCAL_TEMP=str(base / "tmp"), PATH="%s:%s" % (BIN, env.get("PATH", "")))
    _run([BIN / "ansible-galaxy", "collection", "build", "--output-path", str(base / "dist"), str(REPO)], work, env)
    (tarball,) = list((base / "dist").glob("llmops-sglang-*.tar.gz"))
    _run([BIN / "ansible-galaxy", "collection", "install", "--offline", "-p", str(base / "collections"), str(tarball)], work, env)
    return tarball, work, env, base / "collections" / "ansible_collections" / "llmops" / "sglang"


def test_tarball_holds_the_collection_and_no_development_files(installed):
    tarball, _work, _env, _path = installed
    with tarfile.open(tarball) as tar:
        names = [m.name for m in tar.getmembers() if m.isfile()]
        manifest = json.load(tar.extractfile("MANIFEST.json"))
    dev = [n for n in names if any(n == d or n.startswith(d) for d in DEV_ONLY) or "__pycache__" in n or n.endswith(".pyc")]
    assert dev == []
    for required in ("LICENSE", "README.md", "meta/runtime.yml", "meta/execution-environment.yml", "changelogs/changelog.yaml",
                     "playbooks/site.yml", "plugins/doc_fragments/sglang_http.py", "inventories/examples/h200/hosts.yml"):
        assert required in names
    info = manifest["collection_info"]
    assert info["license"] == ["GPL-3.0-or-later"] and info["dependencies"] == {}
    assert info["repository"].startswith("https://github.com/") and "example.invalid" not in json.dumps(info)
    with open(REPO / "LICENSE") as fh:
        assert "GNU GENERAL PUBLIC LICENSE" in fh.readline() + fh.readline()
    # 625 KiB on 2026-12-06 (270 KiB at the first release: the tuner's table mode, the watch rules, the moving load);
    # shipping the sandbox and the tests by mistake would add ~45 %
    assert tarball.stat().st_size < 760 * 1024


def _names(directory, pattern):
    return sorted(p.name.split(".")[0] for p in (REPO / directory).glob(pattern) if not p.name.startswith("_"))


def test_ansible_doc_documents_every_module_filter_and_role(installed):
    _tarball, work, env, _path = installed
    modules = _names("plugins/modules", "*.py")
    filters = _names("plugins/filter", "*.yml")          # one doc file per filter, next to its plugin
    roles = sorted(p.parent.parent.name for p in (REPO / "roles").glob("*/meta/argument_specs.yml"))
    # the sets are compared with what ansible-doc lists below (a filter without its .yml doc file is listed there too)
    assert {"gpu_facts", "speculative_check", "serving_benchmark", "benchmark_report"} <= set(modules)
    assert "sglang_launch" in filters
    assert roles == ["iommu", "nccl", "nvidia_driver", "preflight", "sglang_benchmark", "sglang_server", "speculative_check",
                     "speculative_tuning", "speculative_watch"]
    for kind, names in (("module", modules), ("filter", filters)):
        listed = json.loads(_run([BIN / "ansible-doc", "-t", kind, "-l", "llmops.sglang", "--json"], work, env))
        assert sorted(n.split(".")[-1] for n in listed) == names
        docs = json.loads(_run([BIN / "ansible-doc", "-t", kind, "--json"] + ["llmops.sglang." + n for n in names], work, env))
        assert sorted(docs) == ["llmops.sglang." + n for n in names]
        for name, doc in docs.items():
            assert doc["doc"]["short_description"] and doc["doc"]["options"] is not None, name
            assert doc["examples"] and doc["return"], name
    caches = _names("plugins/cache", "*.py")
    assert caches == ["jsonfile_memory"]               # the fact cache ansible.cfg names
    listed = json.loads(_run([BIN / "ansible-doc", "-t", "cache", "-l", "llmops.sglang", "--json"], work, env))
    assert sorted(n.split(".")[-1] for n in listed) == caches
    docs = json.loads(_run([BIN / "ansible-doc", "-t", "cache", "--json", "llmops.sglang.jsonfile_memory"], work, env))
    assert sorted(docs["llmops.sglang.jsonfile_memory"]["doc"]["options"]) == ["_prefix", "_timeout", "_uri"]
    spec = yaml.safe_load((REPO / "plugins/doc_fragments/sglang_http.py").read_text().split('DOCUMENTATION = r"""')[1].split('"""')[0])
    docs = json.loads(_run([BIN / "ansible-doc", "-t", "module", "--json", "llmops.sglang.speculative_check", "llmops.sglang.serving_benchmark"], work, env))
    for name in docs:                                  # the fragment's options, with its one default each
        for opt, want in spec["options"].items():
            assert docs[name]["doc"]["options"][opt].get("default") == want.get("default"), (name, opt)
    for role in roles:
        text = _run([BIN / "ansible-doc", "-t", "role", "llmops.sglang." + role], work, env)
        main = yaml.safe_load((REPO / "roles" / role / "meta/argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
        for opt in main:                               # each option printed once, as a heading "- name" ("= name" if required)
            headings = [line for line in text.splitlines() if re.match(r"^[-=] %s(\s|$)" % re.escape(opt), line)]
            assert len(headings) == 1, (role, opt, len(headings))


def test_every_playbook_passes_syntax_check_from_outside_the_repository(installed):
    _tarball, work, env, path = installed
    playbooks = sorted(p.stem for p in (REPO / "playbooks").glob("*.yml"))
    assert {"site", "preflight", "host", "serve", "verify", "benchmark", "mtp_ab"} <= set(playbooks)
    inventory = path / "inventories/examples/h200/hosts.yml"      # shipped with the collection
    _run([BIN / "ansible-playbook", "-i", str(inventory), "--syntax-check"] + ["llmops.sglang." + p for p in playbooks], work, env)
    listing = _run([BIN / "ansible-playbook", "-i", str(inventory), "--list-tasks", "llmops.sglang.site"], work, env)
    plays = [line.strip() for line in listing.splitlines() if line.strip().startswith("play #")]
    assert plays and not [p for p in plays if "sandbox" in p.lower()]
    assert "sandbox" not in listing.lower()
