"""SGLang's adaptive speculative decoding (``--speculative-adaptive``), as the wheels implement it (a test double).

Policy: ``sglang/srt/speculative/adaptive_spec_params.py`` of SGLang 0.5.23 (identical in 0.5.14 except the built-in
table's bucket 1 candidates), re-typed here without its imports:

* :class:`StepSlot` = ``AdaptiveStepSlot``: per batch-size bucket, an EMA of the mean accepted drafts per request
  (``ema_alpha``, default 0.2; not updated while the bucket runs 0 steps), a warm-up (``warmup_batches``, 10) and an
  update interval (``update_interval``, 5) between decisions; a decision steps down while the EMA is at or below the next
  lower candidate's threshold (``prev - 0.5``, or 0.5 when the lower candidate is 0, plus ``down_hysteresis``, -0.25),
  else up while it is above ``current - 0.5 + up_hysteresis``; from 0 steps it probes the next candidate (the EMA reset to
  ``target - 1`` when negative); an ``ceiling_coeff`` > 0 caps a non-rising target at ``max(1, ceil(ema * coeff))``;
* :class:`AdaptivePolicy` = ``AdaptiveSpeculativeParams``: the table's integer keys are buckets; a batch of ``bs``
  requests is padded up to the next CUDA-graph batch size, then served by the largest bucket not above it (the smallest
  bucket when below all); non-integer top-level keys are defaults merged into every bucket;
* :func:`unsupported_reason` = ``adaptive_unsupported_reason`` and :func:`load_table` = ``_load_adaptive_config``
  (the same ``ValueError`` texts); ``arg_groups/speculative_hook.py`` ``_init_adaptive_speculative_params``: topk 1,
  steps = the given one (must be a candidate) or the middle of the union, draft tokens = steps + 1.

What SGLang shows of it, shown the same way: the switch line ``Adaptive spec params updated: steps A -> B
(ema_accept_len=E)`` (rank 0), ``sglang:spec_num_steps`` / ``sglang:spec_num_draft_tokens`` (the active values), and
``speculative_adaptive`` / ``speculative_adaptive_config`` in ``/server_info``.
"""
from __future__ import annotations

import bisect
import json
import math

#: ``DEFAULT_ADAPTIVE_CONFIG`` per version (0.5.14: bucket 1 is [1, 3, 7]; 0.5.23: [1, 3, 5, 7]).
_BUCKETS_REST = {
    "8": {"candidate_steps": [0, 1, 3], "up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0},
    "32": {"candidate_steps": [0, 1], "up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0},
    "64": {"candidate_steps": [0], "up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0},
}


def default_table(vt):
    """SGLang's built-in table for version tuple ``vt`` (a new dict)."""
    first = [1, 3, 5, 7] if vt >= (0, 5, 23) else [1, 3, 7]
    table = {"1": {"candidate_steps": first, "up_hysteresis": 0.0, "down_hysteresis": -0.25, "ceiling_coeff": 0}}
    table.update(json.loads(json.dumps(_BUCKETS_REST)))
    return table


def load_table(path, vt):
    """``(cfg, {bucket: entry})`` of the JSON file ``path`` (None: the built-in table), checked as SGLang's loader does.

    Raises ValueError with SGLang's texts; OSError / json errors propagate as in SGLang (a traceback at startup)."""
    if path is not None:
        with open(path) as handle:
            cfg = json.load(handle)
    else:
        cfg = default_table(vt)
    entries = {}
    for key, entry in cfg.items():
        if not key.isdigit():
            continue
        steps = entry.get("candidate_steps")
        if not isinstance(steps, list) or not steps or not all(isinstance(s, int) and s >= 0 for s in steps):
            raise ValueError("BS %s: candidate_steps must be a list of non-negative ints, got %r" % (key, steps))
        entries[int(key)] = entry
    if not entries:
        raise ValueError("speculative_adaptive_config must contain at least one integer-string BS key, e.g. "
                         '{"1": {"candidate_steps": [1,3,7]}}. Got keys: %s' % list(cfg.keys()))
    return cfg, entries


def candidate_union(entries):
    """Sorted union of every bucket's candidates (``resolve_candidate_steps_from_config``)."""
    return sorted(set(s for entry in entries.values() for s in entry["candidate_steps"]))


def unsupported_reason(vt, algorithm, topk, dp_attention, multi_layer_eagle, two_batch_overlap, pdmux):
    """The text SGLang logs after ``speculative_adaptive disabled: `` (None: adaptive runs). ``algorithm``: after the NEXTN
    alias (EAGLE). ``dp_attention``: attention DP in effect (0.5.14: --enable-dp-attention; 0.5.23: attn_dp_size > 1)."""
    if algorithm not in ("EAGLE", "EAGLE3"):
        return "speculative_algorithm=%s (only EAGLE/EAGLE3 are supported)" % algorithm
    if topk is not None and topk != 1:
        return "speculative_eagle_topk=%s (only topk=1 is supported)" % topk
    if dp_attention:
        if vt >= (0, 5, 23):
            return "attention DP is not supported (adaptive tier decisions are not synchronized across DP ranks)"
        return "enable_dp_attention=True is not supported (adaptive tier decisions are not synchronized across DP ranks)"
    if multi_layer_eagle:
        return "enable_multi_layer_eagle=True is not supported (MultiLayerEagleWorkerV2 does not implement adaptive)"
    if two_batch_overlap:
        return "enable_two_batch_overlap=True is not supported (adaptive state swap would discard the TboAttnBackend wrapper)"
    if pdmux:
        return "enable_pdmux=True is not supported (adaptive state swap does not update decode_attn_backend_group)"
    return None


class StepSlot(object):
    """One bucket's step choice (``AdaptiveStepSlot``). ``switches``: ``(old, new, ema)`` of every change, in order."""

    def __init__(self, initial_steps, cfg):
        candidates = sorted(set(cfg["candidate_steps"]))
        self.candidate_steps = candidates
        self.ema_alpha = cfg.get("ema_alpha", 0.2)
        self.update_interval = cfg.get("update_interval", 5)
        self.warmup_batches = cfg.get("warmup_batches", 10)
        self.down_hysteresis = cfg.get("down_hysteresis", -0.25)
        self.up_hysteresis = cfg.get("up_hysteresis", 0.0)
        self.ceiling_coeff = cfg.get("ceiling_coeff", 0)
        if initial_steps in candidates:
            self.current_steps = initial_steps
        else:
            self.current_steps = candidates[len(candidates) // 2]
        self.ema_accept_len = float(self.current_steps - 1)
        self.batch_count = 0
        self.switches = []

    def update(self, accepted_per_req):
        """Feed one verify step's accepted drafts per request; True when the step count changed."""
        if not accepted_per_req:
            return False
        if self.current_steps > 0:
            avg = sum(accepted_per_req) / len(accepted_per_req)
            self.ema_accept_len = (1 - self.ema_alpha) * self.ema_accept_len + self.ema_alpha * avg
        self.batch_count += 1
        if self.batch_count <= self.warmup_batches:
            return False
        if (self.batch_count - self.warmup_batches) % self.update_interval != 0:
            return False
        return self._recompute()

    def _recompute(self):
        old = self.current_steps
        idx = self.candidate_steps.index(old)
        start = idx
        if old == 0:
            # the zero-step probe: try the next candidate after an interval without drafting
            idx = min(idx + 1, len(self.candidate_steps) - 1)
            target = self.candidate_steps[idx]
            if target > 0 and self.ema_accept_len < 0:
                self.ema_accept_len = float(target - 1)
            return self._apply(old, target)
        while idx > 0:
            lower = self.candidate_steps[idx - 1]
            threshold = (0.5 if lower == 0 else lower - 0.5) + self.down_hysteresis
            if self.ema_accept_len <= threshold:
                idx -= 1
            else:
                break
        if not idx < start:
            while idx < len(self.candidate_steps) - 1:
                if self.ema_accept_len > self.candidate_steps[idx] - 0.5 + self.up_hysteresis:
                    idx += 1
                else:
                    break
        target = self.candidate_steps[idx]
        if self.ceiling_coeff > 0:
            ceiling = max(1, math.ceil(self.ema_accept_len * self.ceiling_coeff))
            if ceiling < target <= old:
                while idx > 0 and self.candidate_steps[idx] > ceiling:
                    idx -= 1
                target = self.candidate_steps[idx]
        return self._apply(old, target)

    def _apply(self, old, target):
        if target == old:
            return False
        self.current_steps = target
        self.switches.append((old, target, self.ema_accept_len))
        return True


class AdaptivePolicy(object):
    """The bucket router (``AdaptiveSpeculativeParams``) over :class:`StepSlot` s.

    :param initial_steps: the server's ``speculative_num_steps``. :param cfg, entries: :func:`load_table`'s result.
    :param cuda_graph_bs: the captured decode batch sizes (a batch pads up to the next one), or None (no CUDA graphs)."""

    def __init__(self, initial_steps, cfg, entries, cuda_graph_bs=None):
        self.buckets = sorted(entries)
        self.slots = dict((bs, StepSlot(initial_steps, dict(cfg, **entry))) for bs, entry in sorted(entries.items()))
        self.cuda_graph_bs = sorted(cuda_graph_bs) if cuda_graph_bs else None

    def route(self, batch_size):
        """The slot serving ``batch_size`` (pad to the CUDA-graph size, then the largest bucket not above it)."""
        padded = batch_size
        if self.cuda_graph_bs is not None:
            i = bisect.bisect_left(self.cuda_graph_bs, batch_size)
            padded = self.cuda_graph_bs[i] if i < len(self.cuda_graph_bs) else batch_size
        i = bisect.bisect_right(self.buckets, padded) - 1
        return self.slots[self.buckets[max(0, i)]]

    def steps_for(self, batch_size):
        return self.route(batch_size).current_steps

    def on_verify_complete(self, accepted_per_req, batch_size):
        """Feed a verify step; returns ``(old, new, ema)`` when the bucket switched, else None."""
        slot = self.route(batch_size)
        if slot.update(accepted_per_req):
            return slot.switches[-1]
        return None


def switch_line(old, new, ema):
    """SGLang's rank-0 info line for a switch (``AdaptiveStepSlot._apply_target_steps``)."""
    return "Adaptive spec params updated: steps %d -> %d (ema_accept_len=%.2f)" % (old, new, ema)


def disabled_line(reason):
    """SGLang's warning when adaptive cannot run (``speculative_hook.py`` ``_maybe_disable_adaptive``)."""
    return "speculative_adaptive disabled: %s. Falling back to static speculative params." % reason
