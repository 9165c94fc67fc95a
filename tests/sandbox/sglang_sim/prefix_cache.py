"""The simulator's prefix cache: which leading prompt tokens a request finds already computed.

SGLang's radix cache (``RadixCache``, on unless ``--disable-radix-cache``) matches a new request's
tokens against the tokens of earlier requests, reports the matched length as ``meta_info.cached_tokens``,
counts it in ``sglang:cached_tokens_total`` and the ``#cached-token`` of the ``Prefill batch`` log line,
and computes only the rest. The prefill batch's hit rate is the ``sglang:cache_hit_rate`` gauge
(SGLang 0.5.9 scheduler metrics: cached / (new + cached) tokens of the last prefill batch).

The stand-in keeps a chained hash per full page of ``PAGE`` tokens (ids, or words of a text prompt,
the simulator's one-token-per-word count), in LRU order, up to the KV pool's size in pages. A
request matches its leading pages that are present; at least one token is always computed (SGLang
matches at most ``len - 1`` tokens). Requests of the same prefill batch do not see each other's pages
(SGLang inserts a request's tokens into the tree after its prefill). The match is page-granular:
SGLang's default page size is 1 token, so a real server can report up to ``PAGE - 1`` more.
"""
from __future__ import annotations

from collections import OrderedDict

PAGE = 16


def page_keys(tokens):
    """Chained hashes of the full ``PAGE``-token pages of ``tokens`` (a list of ints or strs)."""
    keys = []
    h = 0
    for i in range(0, len(tokens) - PAGE + 1, PAGE):
        h = hash((h, tuple(tokens[i:i + PAGE])))
        keys.append(h)
    return keys


class PrefixCache(object):
    """LRU set of page keys: :meth:`match` (pages found, in order) and :meth:`insert`; ``capacity`` in pages."""

    def __init__(self, capacity):
        self.capacity = max(1, int(capacity))
        self.pages = OrderedDict()

    def match(self, keys):
        """Number of leading ``keys`` present (each hit is refreshed in the LRU order)."""
        n = 0
        for k in keys:
            if k not in self.pages:
                break
            self.pages.move_to_end(k)
            n += 1
        return n

    def insert(self, keys):
        """Add ``keys`` (evicting the least recently used pages beyond the capacity)."""
        for k in keys:
            self.pages[k] = True
            self.pages.move_to_end(k)
        while len(self.pages) > self.capacity:
            self.pages.popitem(last=False)

    def clear(self):
        """``/flush_cache``: forget every page."""
        self.pages.clear()
