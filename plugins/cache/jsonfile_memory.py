# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fact cache of the collection's ansible.cfg: ansible.builtin.jsonfile's files, each decoded once per run.

Why (issue 25, docs/fleet.md "The fact cache"): ansible-core 2.19 wraps every persistent cache plugin in an interposer
that JSON-decodes the host's whole cached payload, with its data-tag profile, on every lookup. The variable manager looks
the facts up for every task and host (about 140 times per host in a no-change site.yml), so a 36 kB cache of one sandbox
host cost about 1 s of controller CPU per host and run. This plugin declares itself not persistent (so ansible-core
hands it the facts as they are) and does the persistence itself: the same per-host JSON files as jsonfile, written on
every change, read at most once per run and then served from memory, as ansible.builtin.memory does.
"""
from __future__ import annotations

DOCUMENTATION = r"""
name: jsonfile_memory
short_description: JSON files per host, decoded once per run and kept in memory
description:
  - The files and options of P(ansible.builtin.jsonfile#cache) (C(fact_caching_connection), C(fact_caching_prefix),
    C(fact_caching_timeout)), one JSON file per host, but each file is read and decoded at most once per run and the
    facts are then served from memory, as C(ansible.builtin.memory) does.
  - ansible-core 2.19 decodes a persistent cache plugin's whole payload on every lookup, that is for every task and host;
    this plugin does the persistence itself, so a lookup costs nothing.
  - Values are written without Ansible's data tags (the C(tagless) JSON profile), so a cached string is never trusted as
    a template, as with C(ansible.builtin.jsonfile).
  - The files are not shared with C(ansible.builtin.jsonfile), which prefixes its file names with a schema
    identifier such as C(s1_). The first run after switching gathers the facts again.
version_added: 1.0.0
author:
  - llmops.sglang developers (@llmops)
options:
  _uri:
    required: true
    description:
      - Directory in which the plugin saves the JSON files (created when missing).
    env:
      - name: ANSIBLE_CACHE_PLUGIN_CONNECTION
    ini:
      - key: fact_caching_connection
        section: defaults
    type: path
  _prefix:
    description: Prefix of the file names, before the host name.
    default: ''
    env:
      - name: ANSIBLE_CACHE_PLUGIN_PREFIX
    ini:
      - key: fact_caching_prefix
        section: defaults
    type: string
  _timeout:
    default: 86400
    description: Seconds after which a host's file counts as expired (its facts are gathered again); 0 never expires.
    env:
      - name: ANSIBLE_CACHE_PLUGIN_TIMEOUT
    ini:
      - key: fact_caching_timeout
        section: defaults
    type: integer
"""

import json
import os
import pathlib
import tempfile

from ansible.module_utils.common.file import S_IRWU_RG_RO
from ansible.module_utils.common.json import get_decoder, get_encoder
from ansible.plugins.cache import BaseFileCacheModule
from ansible.utils.display import Display

display = Display()


class CacheModule(BaseFileCacheModule):
    """ansible.builtin.jsonfile's storage without ansible-core's per-lookup decoding (module docstring)."""

    # Not persistent as far as ansible-core knows: it then skips its encoding interposer (ansible/plugins/loader.py,
    # _CacheLoader.get) and passes the facts as they are; BaseFileCacheModule keeps them in self._cache after the first
    # read; set (below) writes the file on every change.
    _persistent = False

    def _load(self, filepath):
        """The facts of one host from ``filepath`` (plain JSON). ValueError on a corrupt file: the base class warns,
        removes the file and fails the run with its name, as for jsonfile."""
        return json.loads(pathlib.Path(filepath).read_text(encoding="utf-8"), cls=get_decoder("tagless"))

    def _dump(self, value, filepath):
        """Write the facts ``value`` (a dict) to ``filepath`` as JSON without data tags. TypeError or ValueError when
        JSON cannot hold a value (nothing is written then); OSError when the file cannot be written."""
        text = json.dumps(value, cls=get_encoder("tagless"))
        pathlib.Path(filepath).write_text(text, encoding="utf-8")

    def set(self, key, value):
        """Keep the facts ``value`` (a dict) of host ``key`` in memory and write its file (a temporary file renamed over
        the old one, mode 0644, as jsonfile does). A value that JSON cannot hold (no fact or set_fact result is one): the
        old file is removed, so a later run gathers again instead of reading stale facts, and a warning names the host;
        the facts stay in memory for this run. A file that cannot be written gives a warning, as with jsonfile."""
        self._cache[key] = value
        cachefile = self._get_cache_file_name(key)
        tmp = None
        try:
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(cachefile))
            os.close(fd)
            self._dump(value, tmp)
            os.chmod(tmp, S_IRWU_RG_RO)
            os.rename(tmp, cachefile)
            tmp = None
        except (TypeError, ValueError) as exc:
            display.warning("llmops.sglang.jsonfile_memory: the facts of %s were not cached in %s (%s); they are kept for "
                            "this run only" % (key, cachefile, exc))
            self._unlink(cachefile)
        except OSError as exc:
            display.warning("llmops.sglang.jsonfile_memory: could not write the facts of %s to %s (%s)" % (key, cachefile, exc))
        finally:
            self._unlink(tmp)

    @staticmethod
    def _unlink(path):
        """Remove ``path`` when given; a file already gone is no error."""
        try:
            if path:
                os.unlink(path)
        except OSError:
            pass
