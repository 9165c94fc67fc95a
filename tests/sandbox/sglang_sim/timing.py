"""The simulator's timing model (continuous batching with speculative decoding).

One scheduler loop runs either a prefill batch or a decode step at a time.

* decode step without speculation, ``bs`` running requests:
  ``t_step = t0 + k * bs``  (ms); every request gains 1 token.
* decode (verify) step with speculation (``s`` = speculative_num_steps, ``D`` = num_draft_tokens,
  ``K`` = speculative_eagle_topk):
  ``t_step = t0 + k * bs * D + verify + s * (draft + draft_k * bs * K)``  (ms): the target verifies
  ``bs * D`` tokens in one forward (the same per-token cost ``k`` as a decode step: the draft length is
  paid by every running request), each draft step extends ``bs * K`` branches; every request gains
  ``1 + a`` tokens, ``a`` = number of leading draft tokens accepted, each accepted with probability
  ``p`` along the chain (``0 <= a <= s``), so the expected accept length is ``1 + p + ... + p**s``.
* prefill batch of ``n`` new prompt tokens: ``t0 + prefill_ms_per_token * n`` (ms); each request
  of the batch gains its first token.

Defaults (ms): t0 = 8.84, k = 0.25, draft = 1.5, draft_k = 0.145, verify = 3.83, prefill 0.05/token.
Arithmetic behind them (the seed: RTX PRO 6000 x4, Qwen3.5-122B-A10B):

* MTP off, one stream: 1 / (8.84 + 0.25) ms = 1 / 9.09 ms = 110.0 tok/s.
* MTP on, 1 step / topk 1 / 2 draft tokens, p = 1 (accept length 2.00), one stream:
  8.84 + 0.25*1*2 + 3.83 + 1*(1.5 + 0.145) = 14.815 ms per verify step, 2 tokens -> 135.0 tok/s.
* at ``c`` streams the ratio on/off is ``2 (t0 + k c) / (t0 + 2 k c + verify + draft + draft_k c)``,
  > 1 while ``c < (t0 - verify - draft) / draft_k = (8.84 - 3.83 - 1.5) / 0.145 = 24.2``: MTP pays
  up to 24 concurrent streams and loses from 25 on (and SGLang's 48-request cap under speculation
  makes 64 streams worse still unless --max-running-requests is raised).
* the draft length's optimum shrinks as concurrency grows: the fixed part of a verify step
  (``t0 + verify + s * draft``) is shared by the batch, the per-request part (``k * D + s * draft_k * K``)
  is paid by every request. At one stream the fixed part dominates and a longer chain (more tokens per
  step) wins; with many streams the per-request part dominates and every draft token must be accepted
  often enough to pay its ``k``. With p = 0.8 the best chain length of 0..4 steps is 4 at 1 and 4
  streams, 3 at 8, and no speculation from 16 on (docs/simulator.md has the table).
"""
from __future__ import annotations


class TimingModel(object):
    """Step costs in seconds from the knob values (``t0_ms``, ``k_ms``, ... in ms)."""

    def __init__(self, t0_ms=8.84, k_ms=0.25, draft_ms=1.5, draft_k_ms=0.145, verify_ms=3.83, prefill_ms_per_token=0.05,
                 num_steps=0, num_draft_tokens=0, eagle_topk=1):
        self.t0 = t0_ms / 1000.0
        self.k = k_ms / 1000.0
        self.draft = draft_ms / 1000.0
        self.draft_k = draft_k_ms / 1000.0
        self.verify = verify_ms / 1000.0
        self.prefill_per_token = prefill_ms_per_token / 1000.0
        self.num_steps = num_steps
        self.num_draft_tokens = num_draft_tokens
        self.eagle_topk = max(1, eagle_topk or 1)

    @classmethod
    def from_knobs(cls, knobs, num_steps=0, num_draft_tokens=0, eagle_topk=1):
        """Build from the resolved knob dict (knobs.resolve) and the speculative shape (0 steps = no speculation)."""
        return cls(knobs["t0_ms"], knobs["k_ms"], knobs["draft_ms"], knobs["draft_k_ms"], knobs["verify_ms"],
                   knobs["prefill_ms_per_token"], num_steps, num_draft_tokens, eagle_topk)

    @property
    def speculative(self):
        """True when verify steps are modelled (num_steps > 0)."""
        return self.num_steps > 0

    def decode_step_s(self, bs):
        """Seconds for one decode (verify) step of ``bs`` running requests."""
        if not self.speculative:
            return self.t0 + self.k * bs
        return (self.t0 + self.k * bs * self.num_draft_tokens + self.verify
                + self.num_steps * (self.draft + self.draft_k * bs * self.eagle_topk))

    def prefill_s(self, new_tokens):
        """Seconds for one prefill batch with ``new_tokens`` prompt tokens."""
        return self.t0 + self.prefill_per_token * new_tokens

    @staticmethod
    def expected_accept_length(num_steps, p):
        """``1 + p + p**2 + ... + p**num_steps`` (1.0 without speculation)."""
        return 1.0 + sum(p ** i for i in range(1, num_steps + 1))

    def steady_throughput(self, concurrency, p=1.0):
        """Output tok/s with ``concurrency`` requests always decoding (prefill ignored)."""
        accept = self.expected_accept_length(self.num_steps, p) if self.speculative else 1.0
        return concurrency * accept / self.decode_step_s(concurrency)


def crossover_concurrency(off, on, p=1.0, limit=4096):
    """Smallest concurrency at which ``on`` (speculative) is no faster than ``off``; None if never up to ``limit``."""
    for conc in range(1, limit + 1):
        if on.steady_throughput(conc, p) <= off.steady_throughput(conc, p):
            return conc
    return None
