"""Draft acceptance as a function of the request's content and sampling settings (the simulator's stand-in for a draft model).

A real draft model's acceptance depends on what is being generated: low-entropy continuations (code, arithmetic,
structured output) are easy to guess, open-ended ones (stories, roleplay) are not, and sampling at a higher
temperature makes the target's choice harder to predict. The simulator has no model, so it reads **cues in the
prompt text** (never a category label the client might send) and maps them to a per-draft-token acceptance
probability:

    p = min(1, accept_p x CATEGORY_P[category(text)] x temperature_factor(temperature, top_p))

``accept_p`` is the ``SGLANG_SIM_ACCEPT_P`` knob (default 1.0; 0 with ``SGLANG_SIM_BROKEN_DRAFT``). Each draft token
along the chain is then accepted with probability ``p`` (engine.py), so with ``s`` draft steps the expected accept
length is ``1 + p + ... + p**s``.

Sources and calibration (docs/simulator.md "Acceptance"):

* ordering of the categories: SPEED-Bench (NVIDIA, arXiv 2604.09557) measured the highest acceptance on coding and
  math and the lowest on roleplay and creative writing, with QA, summarisation, RAG and multilingual in between;
  EAGLE-2 (arXiv 2406.16858) reports average acceptance lengths of 5.24 on HumanEval and 4.98 on GSM8K against 4.8 on
  MT-Bench (chat), the same ordering;
* random token ids (``input_ids`` without text, or text without a single common function word): SPEED-Bench found that
  random-token inputs overestimate speculative throughput by about 23 %. They are accepted at ``accept_p`` (factor 1.0),
  and the category factors are set so that the ten built-in categories' mean accept length at the seed's shape (one
  draft token, temperature 0) is 2.00 / 1.23: the harmonic mean of ``1 + p`` over the ten factors below is 1.621, so
  the synthetic run reads 2.00 / 1.621 = 1.234 times the throughput;
* temperature: the EAGLE papers report lower speedups when sampling at temperature 1 than greedy; the factor here is
  ``1 - 0.2 * min(temperature, 2.5) * top_p`` (0.8 at temperature 1, top_p 1), floored at 0.5 — a calibration choice,
  not a published number;
* the seed's numbers hold: "What is 15*23? Answer briefly." and the verify probe "Count from 1 to 500, separated by
  commas:" are math (factor 1.0), so at temperature 0 with one draft token every draft is accepted (accept length 2.00,
  ~135 tok/s).

Long context (:func:`context_factor`, :func:`long_context_p`): a draft trained on short sequences loses acceptance on
long inputs. The published EAGLE3 Qwen3-8B accept lengths by input length (vllm-project/speculators issue #684, SGLang
issue #6783) are 2.30 at 2k tokens, 2.04 at 4k, 1.69 at 8k, 1.29 at 12k and 1.09 at 16k, for a draft trained at 2048
tokens. The simulator keeps their shape on the *drafted part* of the accept length, ``AL - 1`` (what the draft adds to
the one token every verify step yields): at ``r = prompt tokens / SGLANG_SIM_DRAFT_TRAIN_LEN`` the request's expected
accept length is ``1 + (AL_short - 1) x g(r)`` with ``g`` = (published AL - 1) / 1.30 at r = 1, 2, 4, 6, 8, linear in
between, 1 at or below the training length and held at its last value (0.0692) past 8x. Its per-token probability is
the ``p'`` that gives that accept length with the server's draft steps. With the defaults (2048 tokens) a request whose
short-prompt accept length is 2.30 reads exactly the published numbers; 0 turns the fall-off off.
"""
from __future__ import annotations

import re

# Per-draft-token acceptance factor per detected category, at temperature 0 (multiplies SGLANG_SIM_ACCEPT_P).
CATEGORY_P = {
    "math": 1.00,
    "coding": 0.92,
    "extraction": 0.82,
    "reasoning": 0.68,
    "qa": 0.62,
    "summarization": 0.57,
    "rag": 0.56,
    "translation": 0.47,
    "writing": 0.42,
    "roleplay": 0.38,
    "general": 0.65,      # text with no category cue: about the mean of the ten
    "synthetic": 1.00,    # random token ids / random words: the ~23 % overestimate
}

# Cues per category: (compiled regex on the lower-cased text, weight per match, cap on matches counted).
_CUES = (
    ("roleplay", ((r"\b(you are (a|an|the|sherlock)|pretend (you are|to be)|role-?play|act as|play the role|stay in character|"
                   r"in character|play the \w+)\b", 3, 3),)),
    ("translation", ((r"\btranslat\w*|\btradu\w*|\bübersetze\w*", 4, 2),
                     (r"\b(into|in|en|al) (german|french|spanish|italian|japanese|chinese|korean|polish|dutch|swedish|turkish|"
                      r"portuguese|english|anglais|inglés|englische)\b", 2, 3))),
    ("summarization", ((r"\b(summari[sz]e|summary|tl;dr|condense|abstract|key findings)\b", 4, 2),)),
    ("rag", ((r"\b(documents?|context|passages?|retrieved)\b", 1, 12), (r"\bdocument \d+:", 2, 6), (r"\bcit(e|ations?)\b", 2, 2))),
    ("extraction", ((r"\bjson\b", 3, 3), (r"\b(extract|parse|schema|key-value|fields?)\b", 2, 3))),
    ("writing", ((r"\b(story|poem|poetry|sonnet|limerick|fable|myth|lyrics|song|novel|essay|verse|chorus)\b", 3, 3),)),
    ("coding", ((r"```", 3, 2), (r"\bdef \w+\(|\bfn \w+\(|\bfunction\b", 3, 2),
                (r"\b(python|javascript|rust|golang|go function|java|sql|bash|dockerfile|pytest|compiler?|async/await)\b", 2, 3),
                (r"\b(code|implement|class|method|unit test|script|query|refactor|rewrite it)\b", 1, 3))),
    ("math", ((r"\d\s*[*×^]\s*\d|\d\s+[-+/x]\s+\d|\d\s*=\s*\d|[a-z]\^\d", 4, 2),
              (r"\b(solve|calculat\w*|compute|derivative|integral|equation|probability|prove|fraction|sum of|count from|"
               r"solutions?|irrational|average speed|km/h)\b", 3, 2))),
    ("reasoning", ((r"\b(step by step|reason\w*|logic\w*|fallacy|hypothes[ie]s|justify|puzzle|explain how you know|"
                    r"minimum total time|does it follow|how can you measure|explain why|(which|how) (\w+ ){0,2}do you)\b", 3, 2),)),
    ("qa", ((r"^\s*(what|who|why|how|when|where|which)\b", 2, 1), (r"\?\s*$", 1, 1))),
)
_COMPILED = tuple((cat, tuple((re.compile(rx), w, cap) for rx, w, cap in cues)) for cat, cues in _CUES)
_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)
# Function words of the languages the built-in set uses: text without any of them is not language (random words).
_FUNCTION_WORDS = frozenset((
    "the a an of to and is in for on what how you your i with this that it be are from as by please at or not do "
    "de la le les et en des un une est der die das und ist ein eine el los las y que es il di che e na w z i o"
).split())
_SYNTHETIC_MIN_WORDS = 8


def category_of(text):
    """The category whose cues score highest in ``text`` (ties: the order of ``_CUES``), ``synthetic`` for text made of
    at least 8 words none of which is a common function word (random words), ``general`` for text with no cue.
    ``None`` or empty text (token ids only) is ``synthetic``."""
    if not text:
        return "synthetic"
    low = text.lower()
    best, best_score = None, 0
    for cat, cues in _COMPILED:
        score = 0
        for rx, weight, cap in cues:
            n = len(rx.findall(low)) if not rx.pattern.startswith("^") else (1 if rx.search(low) else 0)
            score += weight * min(n, cap)
        if score > best_score:
            best, best_score = cat, score
    if best is not None:
        return best
    words = _WORD.findall(low)
    if len(words) >= _SYNTHETIC_MIN_WORDS and not any(w in _FUNCTION_WORDS for w in words):
        return "synthetic"
    return "general"


def temperature_factor(temperature, top_p=1.0):
    """Acceptance multiplier for sampling: ``1 - 0.2 * min(T, 2.5) * top_p``, at least 0.5 (1.0 when greedy)."""
    try:
        t = float(temperature or 0.0)
        tp = float(1.0 if top_p is None else top_p)
    except (TypeError, ValueError):
        return 1.0
    if t <= 0.0:
        return 1.0
    tp = min(max(tp, 0.0), 1.0)
    return max(0.5, 1.0 - 0.2 * min(t, 2.5) * tp)


#: The published EAGLE3 Qwen3-8B accept lengths by input length, in tokens, for a draft trained at 2048 tokens
#: (vllm-project/speculators issue #684; SGLang issue #6783): ((input tokens, accept length), ...).
PUBLISHED_LONG_CONTEXT = ((2048, 2.30), (4096, 2.04), (8192, 1.69), (12288, 1.29), (16384, 1.09))
#: The same curve as ``(r, g)``: r = input tokens / training length, g = the share of the drafted tokens (AL - 1) kept.
CONTEXT_CURVE = tuple((n / 2048.0, (al - 1.0) / (2.30 - 1.0)) for n, al in PUBLISHED_LONG_CONTEXT)


def context_factor(prompt_tokens, train_len):
    """``g``: the share of the drafted part of the accept length (AL - 1) a request keeps at ``prompt_tokens`` input tokens
    with a draft trained at ``train_len`` tokens (see the module docstring); 1.0 when ``train_len`` is 0 (off) or the prompt
    is not longer than it. Piecewise linear in the prompt length between the published points, flat past the last."""
    if not train_len or train_len <= 0 or prompt_tokens <= train_len:
        return 1.0
    r = float(prompt_tokens) / float(train_len)
    for (r0, g0), (r1, g1) in zip(CONTEXT_CURVE, CONTEXT_CURVE[1:]):
        if r <= r1:
            return g0 + (g1 - g0) * (r - r0) / (r1 - r0)
    return CONTEXT_CURVE[-1][1]


def _drafted(p, steps):
    """Expected accepted drafts per verify step, ``p + p**2 + ... + p**steps``."""
    return sum(p ** k for k in range(1, steps + 1))


def long_context_p(p, prompt_tokens, steps, train_len):
    """The per-draft-token probability of a request of ``prompt_tokens`` input tokens whose short-prompt probability is
    ``p``, with ``steps`` draft steps and a draft trained at ``train_len`` tokens (0 = off): the ``p'`` in [0, p] with
    ``drafted(p') = g x drafted(p)`` (so the expected accept length is ``1 + g x (AL_short - 1)``), by bisection."""
    g = context_factor(prompt_tokens, train_len)
    if g >= 1.0 or p <= 0.0 or steps <= 0:
        return p
    goal = g * _drafted(p, steps)
    lo, hi = 0.0, p
    for _step in range(60):
        mid = (lo + hi) / 2.0
        if _drafted(mid, steps) < goal:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


def accept_probability(text, base_p, temperature=0.0, top_p=1.0):
    """Per-draft-token acceptance probability for a request (see the module docstring).

    ``text``: the prompt text (the chat messages' contents joined; None for token ids); ``base_p``: the
    SGLANG_SIM_ACCEPT_P knob (0..1). Returns ``(p, category)``; deterministic.
    """
    cat = category_of(text)
    p = base_p * CATEGORY_P[cat] * temperature_factor(temperature, top_p)
    return min(1.0, max(0.0, p)), cat
