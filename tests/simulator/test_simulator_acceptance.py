"""The simulator's content-dependent draft acceptance (tests/sandbox/sglang_sim/acceptance.py), and its effect end to end."""
from __future__ import annotations

import json
import urllib.request

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils._bench.builtin_prompts import BUILTIN_PROMPTS, CATEGORIES
from sglang_sim import acceptance as acc


def test_every_builtin_prompt_is_recognised_from_its_text_alone():
    # the simulator never sees the label: it must find the category from cues in the text
    wrong = [(cat, text[:60]) for cat, text in BUILTIN_PROMPTS if acc.category_of(text) != cat]
    assert wrong == []


@pytest.mark.parametrize("text, category", [
    ("What is 15*23? Answer briefly.", "math"),                       # the seed's prompt
    ("Count from 1 to 500, separated by commas:", "math"),            # speculative_check's probe
    ("alpha bravo charlie delta echo foxtrot golf hotel", "synthetic"),  # random words (make_prompts text=True)
    (None, "synthetic"),                                              # token ids only
    ("", "synthetic"),
    ("Tell me something nice about the weather today", "general"),    # language, no cue
    ("Extract the dates as JSON: 'from 31/01/2027 to 3/2/2027'", "extraction"),   # a date is not a division
])
def test_category_of(text, category):
    assert acc.category_of(text) == category


def test_seed_prompt_is_accepted_every_time_greedy():
    assert acc.accept_probability("What is 15*23? Answer briefly.", 1.0, 0.0, 1.0) == (1.0, "math")


def test_probabilities_by_hand():
    # roleplay 0.38 x temperature 1 (1 - 0.2) = 0.304; coding 0.92 x (1 - 0.2 * 0.7 * 0.5) = 0.92 x 0.93 = 0.8556
    p, cat = acc.accept_probability("You are a pirate captain. Stay in character.", 1.0, 1.0, 1.0)
    assert cat == "roleplay" and p == pytest.approx(0.304)
    p, cat = acc.accept_probability("Write a Python function that reverses a list.", 1.0, 0.7, 0.5)
    assert cat == "coding" and p == pytest.approx(0.8556)
    # the SGLANG_SIM_ACCEPT_P knob scales it; a broken draft (0) stays 0; the temperature factor is floored at 0.5
    assert acc.accept_probability("Solve 2 + 2 = x", 0.5)[0] == pytest.approx(0.5)
    assert acc.accept_probability("Solve 2 + 2 = x", 0.0)[0] == 0.0
    assert acc.temperature_factor(5.0, 1.0) == 0.5 and acc.temperature_factor(0, 1.0) == 1.0


def test_category_order_and_the_synthetic_overestimate():
    p = acc.CATEGORY_P
    assert min(p["coding"], p["math"]) > max(p["roleplay"], p["writing"])
    # one draft token, greedy: accept length 1 + p; at equal step cost throughput is proportional to it, and a run of
    # equal-length requests over the ten categories takes sum(1/(1+p)) step-times per token: harmonic mean
    hm = len(CATEGORIES) / sum(1.0 / (1.0 + p[c]) for c in CATEGORIES)
    assert 2.0 / hm == pytest.approx(1.23, abs=0.01)      # SPEED-Bench: random tokens overestimate by ~23 %


def _generate(url, body):
    req = urllib.request.Request(url + "/generate", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read())["meta_info"]


def test_accept_length_follows_the_prompt_end_to_end(sglang_sim):
    # 3 draft steps (3/1/4), instant mode: math at p=1 accepts all 3 (accept length 4.00 exactly); roleplay at 0.38
    # has an expected accept length 1 + 0.38 + 0.38^2 + 0.38^3 = 1.5991; over 600 tokens that is ~375 verify steps,
    # std of one step's length ~0.75, so of the mean ~0.04
    srv = sglang_sim(["--speculative-algorithm", "EAGLE", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
                      "--speculative-num-draft-tokens", "4"], instant=True)
    sp = {"max_new_tokens": 600, "ignore_eos": True, "temperature": 0}
    math = _generate(srv.url, {"text": "What is 15*23? Answer briefly.", "sampling_params": sp})
    assert math["spec_accept_length"] == pytest.approx(4.0, abs=0.01)
    role = _generate(srv.url, {"text": "You are a grumpy innkeeper. Stay in character.", "sampling_params": sp})
    assert role["spec_accept_length"] == pytest.approx(1.5991, abs=0.15)
    hot = _generate(srv.url, {"text": "What is 15*23? Answer briefly.", "sampling_params": dict(sp, temperature=1.0)})
    # p = 0.8: 1 + 0.8 + 0.64 + 0.512 = 2.952
    assert hot["spec_accept_length"] == pytest.approx(2.952, abs=0.2)
    ids = _generate(srv.url, {"input_ids": list(range(1000, 1032)), "sampling_params": sp})
    assert ids["spec_accept_length"] == pytest.approx(4.0, abs=0.01)


# --- long context: acceptance falls past the draft's training length (EAGLE3 Qwen3-8B, speculators #684, sglang #6783) ---

def test_context_factor_by_hand():
    # g = (published accept length - 1) / (2.30 - 1) at 1, 2, 4, 6, 8 x the training length (2048 tokens)
    assert acc.context_factor(1000, 2048) == 1.0 and acc.context_factor(2048, 2048) == 1.0
    assert acc.context_factor(4096, 2048) == pytest.approx(1.04 / 1.30)      # 0.8
    assert acc.context_factor(8192, 2048) == pytest.approx(0.69 / 1.30)      # 0.5308
    assert acc.context_factor(12288, 2048) == pytest.approx(0.29 / 1.30)     # 0.2231
    assert acc.context_factor(16384, 2048) == pytest.approx(0.09 / 1.30)     # 0.0692
    assert acc.context_factor(40000, 2048) == pytest.approx(0.09 / 1.30)     # flat past the last published point
    assert acc.context_factor(3072, 2048) == pytest.approx(0.9)              # halfway between 1.0 (2k) and 0.8 (4k)
    assert acc.context_factor(8192, 4096) == pytest.approx(0.8)              # the curve scales with the training length
    assert acc.context_factor(100000, 0) == 1.0                              # 0 = off


def test_long_context_p_reproduces_the_published_accept_lengths():
    # two draft steps, short-prompt p with 1 + p + p^2 = 2.30: p = (-1 + sqrt(1 + 4 x 1.30)) / 2 = 0.744990
    p = (-1 + 6.2 ** 0.5) / 2
    assert p == pytest.approx(0.744990, abs=1e-6)
    for tokens, published in ((2048, 2.30), (4096, 2.04), (8192, 1.69), (12288, 1.29), (16384, 1.09)):
        q = acc.long_context_p(p, tokens, 2, 2048)
        assert 1 + q + q * q == pytest.approx(published, abs=1e-9)
    # one draft step: p' = g x p exactly; p = 0 (a broken draft) stays 0; no speculation (0 steps) is unchanged
    assert acc.long_context_p(0.9, 4096, 1, 2048) == pytest.approx(0.72)
    assert acc.long_context_p(0.0, 16384, 3, 2048) == 0.0
    assert acc.long_context_p(0.9, 16384, 0, 2048) == 0.9


def test_draft_train_len_knob():
    from sglang_sim import knobs
    assert knobs.resolve({}, {})["draft_train_len"] == 2048
    assert knobs.resolve({"SGLANG_SIM_DRAFT_TRAIN_LEN": "0"}, {})["draft_train_len"] == 0
    with pytest.raises(knobs.KnobError, match="SGLANG_SIM_DRAFT_TRAIN_LEN='-5'.*integer >= 0"):
        knobs.resolve({"SGLANG_SIM_DRAFT_TRAIN_LEN": "-5"}, {})


def test_long_prompts_accept_less_end_to_end(sglang_sim):
    # 3 draft steps, math prompt (p = 1): 4.00 at any length up to 2048 tokens; at 16384+ tokens g = 0.09 / 1.30, so the
    # accept length is 1 + 3 x 0.069231 = 1.2077 in expectation (p' solves p' + p'^2 + p'^3 = 0.207692: p' = 0.1727)
    srv = sglang_sim(["--speculative-algorithm", "EAGLE", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
                      "--speculative-num-draft-tokens", "4", "--context-length", "65536"], instant=True)
    sp = {"max_new_tokens": 600, "ignore_eos": True, "temperature": 0}
    short = _generate(srv.url, {"text": "Solve 15*23 = x. " * 100, "sampling_params": sp})
    assert short["prompt_tokens"] <= 2048 and short["spec_accept_length"] == pytest.approx(4.0, abs=0.01)
    long = _generate(srv.url, {"text": "Solve 15*23 = x. " * 2800, "sampling_params": sp})
    assert long["prompt_tokens"] > 16384
    assert long["spec_accept_length"] == pytest.approx(1.2077, abs=0.08)
