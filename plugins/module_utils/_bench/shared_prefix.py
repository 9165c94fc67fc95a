# -*- coding: utf-8 -*-
# Copyright: llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""The generated-shared-prefix workload, as ``sglang.bench_serving --dataset-name generated-shared-prefix`` (0.5.9).

``num_groups`` groups, each with one system prompt of ``system_prompt_len`` tokens shared by its
``prompts_per_group`` requests; each request is the system prompt followed by its own question of
``question_len`` tokens, and asks for ``output_len`` tokens. Lengths are drawn like bench_serving's
``compute_random_lens`` with ``range_ratio`` (uniform in [max(int(len * ratio), 1), len]; 1.0 = fixed):
one system-prompt length per group, one question and one output length per request. The requests
are shuffled (bench_serving shuffles unless ``--gsp-ordered``), so the groups interleave and a
prefix cache has to keep several system prompts.

Differences from bench_serving on purpose: prompts are token ids (no tokenizer; bench_serving decodes
random vocabulary ids to text and inserts ``"\\n\\n"`` between system prompt and question), so
``prompt_len`` is exact, and the first token of every system prompt encodes its group, so two groups
never share a prefix by chance. A request shares exactly ``system_prompt_len`` tokens with the other
requests of its group, up to a chance match of their first question tokens (probability 1/29000).
"""

from __future__ import annotations

import random

from ansible_collections.llmops.sglang.plugins.module_utils._bench.client import (
    TOKEN_ID_MAX, TOKEN_ID_MIN, BenchError, Prompt, _WORDS, _lengths,
)


def make_prompts(num_groups, prompts_per_group, system_prompt_len, question_len, output_len, range_ratio=1.0,
                 seed=1, text=False, ordered=False):
    """Return ``(prompts, groups)``: the :class:`bench_client.Prompt` list and each prompt's group index.

    Args:
      num_groups (int >= 1), prompts_per_group (int >= 1): the layout (``num_groups * prompts_per_group`` requests).
      system_prompt_len, question_len, output_len (int >= 1): tokens (maxima when ``range_ratio`` < 1).
      range_ratio (float in [0, 1]): bench_serving's ``--gsp-range-ratio``.
      seed (int): the same seed gives the same prompts and order.
      text (bool): words instead of token ids (openai-chat backend), one word per token.
      ordered (bool): keep group order (bench_serving ``--gsp-ordered``) instead of shuffling.

    Raises BenchError naming the argument for a count or length < 1 or a ratio outside [0, 1].
    """
    for name, v in (("gsp_num_groups", num_groups), ("gsp_prompts_per_group", prompts_per_group)):
        if v is None or v < 1:
            raise BenchError("%s must be >= 1, got %r" % (name, v))
    rng = random.Random(seed)
    n = num_groups * prompts_per_group
    sys_lens = _lengths(rng, num_groups, system_prompt_len, range_ratio, "gsp_system_prompt_len")
    q_lens = _lengths(rng, n, question_len, range_ratio, "gsp_question_len")
    out_lens = _lengths(rng, n, output_len, range_ratio, "gsp_output_len")
    span = TOKEN_ID_MAX - TOKEN_ID_MIN
    systems = []
    for g in range(num_groups):
        body = [rng.randrange(TOKEN_ID_MIN, TOKEN_ID_MAX) for _i in range(sys_lens[g] - 1)]
        systems.append([TOKEN_ID_MIN + (g * 7919 + seed) % span] + body)
    rows = []
    k = 0
    for g in range(num_groups):
        for _p in range(prompts_per_group):
            ids = systems[g] + [rng.randrange(TOKEN_ID_MIN, TOKEN_ID_MAX) for _i in range(q_lens[k])]
            prompt = " ".join(_WORDS[t % len(_WORDS)] + str(t) for t in ids) if text else ids
            rows.append((Prompt(prompt, len(ids), out_lens[k]), g))
            k += 1
    if not ordered:
        rng.shuffle(rows)
    return [r[0] for r in rows], [r[1] for r in rows]
