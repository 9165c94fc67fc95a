# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""Trends over the Decode batch lines of one SGLang server run (standard library only).

Input: the ``decode_lines`` of :func:`sglang_logs.parse_log` (parsed SGLang ``Decode batch`` lines, each with
``time`` ``"YYYY-MM-DD HH:MM:SS"`` and ``accept_len``, the accept length over that log interval: tokens per verify
step per request, bonus token included, 1.00 = no draft token accepted; SGLang 0.5.9
``scheduler_metrics_mixin.log_decode_stats``).

Why: SGLang can lose acceptance over uptime while the median still looks healthy (sgl-project/sglang#37326:
accept length 2.00 after start, 1.05 hours later). Comparing the start of the window with its end shows it.
"""
from __future__ import annotations

import statistics

#: Default of speculative_check's accept_length_drop_warn: warn when the accept length falls by more than 20 %.
DEFAULT_DROP_WARN = 0.2
#: Fewest Decode lines with an accept length for a trend (one line per quarter).
MIN_TREND_LINES = 4


def accept_length_trend(decode_lines, drop_warn=DEFAULT_DROP_WARN, min_lines=MIN_TREND_LINES):
    """Accept length at the start of the log window against its end.

    ``decode_lines``: parsed Decode lines in log order (dicts with ``accept_len`` (float) and ``time``); lines
    without an accept length (speculation off) are ignored. ``drop_warn``: fraction in (0, 1); the trend is
    ``falling`` when ``(first - last) / first > drop_warn``.

    The window's lines with an accept length (``n``) are cut into quarters; ``first`` is the median accept length
    of the first ``k = n // 4`` lines, ``last`` the median of the last ``k`` (medians, so one odd interval, e.g. a
    burst of repetitive text, does not decide it).

    Returns None when fewer than ``min_lines`` (4) lines carry an accept length, else a dict:
    ``lines`` (n), ``window_lines`` (k), ``first`` / ``last`` (accept lengths, 4 decimals), ``change`` (``last -
    first``), ``change_fraction`` (``(last - first) / first``, negative when falling, 4 decimals),
    ``first_from`` / ``first_to`` / ``last_from`` / ``last_to`` (log times of the two groups, str or None),
    ``drop_warn`` and ``falling`` (bool). Raises ValueError when ``drop_warn`` is not in (0, 1).
    """
    if not 0 < float(drop_warn) < 1:
        raise ValueError("drop_warn=%r must be a fraction between 0 and 1 (0.2 = warn when the accept length falls by more than 20%%)"
                         % (drop_warn,))
    points = [d for d in decode_lines
              if isinstance(d.get("accept_len"), (int, float)) and not isinstance(d.get("accept_len"), bool)]
    n = len(points)
    if n < max(int(min_lines), MIN_TREND_LINES):
        return None
    k = n // 4
    head, tail = points[:k], points[-k:]
    first = float(statistics.median(p["accept_len"] for p in head))
    last = float(statistics.median(p["accept_len"] for p in tail))
    fraction = (last - first) / first if first > 0 else 0.0
    return {
        "lines": n,
        "window_lines": k,
        "first": round(first, 4),
        "last": round(last, 4),
        "change": round(last - first, 4),
        "change_fraction": round(fraction, 4),
        "first_from": head[0].get("time"),
        "first_to": head[-1].get("time"),
        "last_from": tail[0].get("time"),
        "last_to": tail[-1].get("time"),
        "drop_warn": float(drop_warn),
        "falling": first > 0 and (first - last) / first > float(drop_warn),
    }


def falling_warning(trend):
    """speculative_check ``warnings_found`` entry ``{key, meaning, text}`` for a falling trend, None otherwise."""
    if not trend or not trend["falling"]:
        return None
    text = ("accept length fell from %.2f (median of the first %d Decode lines, %s to %s) to %.2f (median of the last %d, %s to %s): "
            "%+.1f%%, more than accept_length_drop_warn=%g (%.0f%%)"
            % (trend["first"], trend["window_lines"], trend["first_from"], trend["first_to"], trend["last"], trend["window_lines"],
               trend["last_from"], trend["last_to"], 100.0 * trend["change_fraction"], trend["drop_warn"], 100.0 * trend["drop_warn"]))
    meaning = ("the draft model is accepted less and less over the server's uptime, so speculative decoding loses its speed-up "
               "(a known SGLang bug: sgl-project/sglang#37326, 2.00 -> 1.05); compare with the traffic (a change of workload also "
               "moves the accept length), restart the server to confirm and report it upstream")
    return {"key": "accept_length_falling", "meaning": meaning, "text": text}
