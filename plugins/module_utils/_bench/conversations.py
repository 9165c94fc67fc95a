# -*- coding: utf-8 -*-
# Copyright: llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""Multi-turn conversations: the request of each turn, and the per-turn statistics of a level.

Standard library only. A conversation is a workload row's user turns (``workloads.row_turns``) and its system
prompt. The load generator (:mod:`bench_client`) sends turn ``k`` (0-based) only after turn ``k - 1`` has ended,
with every earlier user turn and the server's *own* answers to them (the file's assistant turns are not sent), so
the prompt of each turn starts with the whole prompt and answer of the previous one, as in production chat traffic,
and the server's prefix (radix) cache can serve that prefix.

How the history is rendered, per backend (the same rendering as single-turn rows, ``workloads.row_text`` and
``workloads.row_messages``):

* ``openai-chat`` (``/v1/chat/completions``): an OpenAI messages list, ``[system]`` then ``user``, ``assistant``, ...,
  ``user``; the server applies the model's chat template.
* ``sglang`` (``/generate``) and ``openai`` (``/v1/completions``): plain text, the system prompt, the user turns and
  the answers joined by blank lines (``\\n\\n``), with no chat template (the collection has no tokenizer on the load
  generator, and sends text rows to ``/generate`` without a template today). Empty contents are left out, as
  ``row_text`` leaves them out.

The design follows SGLang's ``bench_serving`` multi-turn mode (0.5.10 ``wrap_multi_turn_request_func``, used by
``--gsp-num-turns``): each turn appends ``{"role": "assistant", "content": output.generated_text}`` before the next
user turn; the ``--max-concurrency`` semaphore is held by the whole conversation, so concurrency counts conversations
in flight; the arrival rate spaces the conversations; the outputs are flattened and every metric is per request
(per turn). Turns follow each other without a think time, as in bench_serving.
"""

from __future__ import annotations

from ansible_collections.llmops.sglang.plugins.module_utils._bench.stats import percentile


def turn_messages(system, turns, answers):
    """OpenAI chat messages of the turn ``len(answers)`` (0-based): list of ``{"role", "content"}``.

    ``system`` (str or None): the system prompt; ``turns`` (list of str): the conversation's user turns;
    ``answers`` (list of str): the server's answers to the turns before this one. Raises ValueError when
    ``answers`` is not shorter than ``turns`` (there is no next turn).
    """
    k = len(answers)
    if k >= len(turns):
        raise ValueError("turn %d of a conversation with %d user turns: nothing left to send" % (k + 1, len(turns)))
    msgs = [{"role": "system", "content": system}] if system else []
    for j in range(k):
        msgs.append({"role": "user", "content": turns[j]})
        msgs.append({"role": "assistant", "content": answers[j]})
    msgs.append({"role": "user", "content": turns[k]})
    return msgs


def turn_text(system, turns, answers):
    """The plain-text prompt of the turn ``len(answers)``: the non-empty contents of :func:`turn_messages` joined by
    blank lines (``workloads.row_text``'s rendering). Raises ValueError as turn_messages."""
    return "\n\n".join(m["content"] for m in turn_messages(system, turns, answers) if m["content"])


def by_turn(results):
    """Per-turn statistics of a level's results (``RequestResult`` with ``turn`` set; others are ignored).

    Returns a list, one dict per turn index present (1-based, ascending): ``turn``, ``requests``, ``completed``,
    ``mean_prompt_tokens`` (the server's prompt token counts of the completed turns), ``mean_ttft_ms`` and
    ``median_ttft_ms`` (ms, completed turns), ``mean_e2e_latency_ms`` (ms), ``cached_tokens`` (sum of
    ``meta_info.cached_tokens`` of the completed turns, the server's prefix-cache hits; None when no response reported
    it, e.g. the OpenAI backends) and ``cached_fraction`` (cached_tokens / prompt tokens of those turns, 0..1, or None).
    """
    groups = {}
    for r in results:
        t = getattr(r, "turn", None)
        if t is not None:
            groups.setdefault(t, []).append(r)
    out = []
    for t in sorted(groups):
        rs = groups[t]
        ok = [r for r in rs if r.success]
        ttfts = [r.ttft * 1000.0 for r in ok]
        prompt = [r.prompt_len for r in ok]
        cached_pairs = [(r.final_meta.get("cached_tokens"), r.prompt_len) for r in ok if r.final_meta]
        cached_pairs = [(c, p) for c, p in cached_pairs if isinstance(c, int) and not isinstance(c, bool)]
        cached = sum(c for c, _p in cached_pairs) if cached_pairs else None
        cached_prompt = sum(p for _c, p in cached_pairs)
        out.append({
            "turn": t, "requests": len(rs), "completed": len(ok),
            "mean_prompt_tokens": sum(prompt) / float(len(prompt)) if prompt else None,
            "mean_ttft_ms": sum(ttfts) / len(ttfts) if ttfts else None,
            "median_ttft_ms": percentile(ttfts, 50) if ttfts else None,
            "mean_e2e_latency_ms": sum(r.latency for r in ok) * 1000.0 / len(ok) if ok else None,
            "cached_tokens": cached,
            "cached_fraction": (float(cached) / cached_prompt) if cached is not None and cached_prompt else None,
        })
    return out
