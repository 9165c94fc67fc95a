# -*- coding: utf-8 -*-
# Copyright: llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""Request arrival schedules for the serving benchmark (standard library only).

A schedule is a list of send offsets in **seconds** from the start of the measured run, one per
request, non-decreasing, the first one 0.0. The client (:func:`bench_client.run_benchmark`) sends
request ``i`` at ``start + offsets[i]`` (absolute times, so sleep overshoot does not accumulate).

Processes:

* Poisson at ``rate`` req/s (``burstiness`` 1.0): exponential gaps of mean ``1/rate``, drawn with
  ``random.Random(seed).expovariate(rate)`` (the draws this collection made before burstiness
  existed, so a seeded Poisson run sends at the same times as before).
* Gamma with ``burstiness`` b != 1: gaps ~ Gamma(shape = b, scale = 1 / (rate * b)), mean ``1/rate``
  whatever b, coefficient of variation ``1 / sqrt(b)``: b < 1 is burstier than Poisson, b > 1 more
  regular. These are the semantics of vLLM's ``vllm bench serve --burstiness`` (``theta = 1.0 /
  (request_rate * burstiness)``, ``np.random.gamma(shape=burstiness, scale=theta)``); SGLang 0.5.9
  ``bench_serving`` has only the Poisson case (``np.random.exponential(1.0 / request_rate)``).
* Unlimited rate (None, 0 or inf): every offset 0.0 (bench_serving's default ``--request-rate inf``).
* Trace replay: :func:`trace_offsets` (Mooncake ``timestamp`` in ms, scaled by a factor, as
  bench_serving's ``--use-trace-timestamps`` / ``--mooncake-slowdown-factor``).

As in bench_serving, the first request goes at 0 and a gap is drawn *after* each request but the
last (N requests, N - 1 gaps).
"""

from __future__ import annotations

import math
import random


class ArrivalError(ValueError):
    """A bad rate, burstiness or time scale. The message names the value and the fix."""


def is_unlimited(rate):
    """True when ``rate`` (req/s, or None) means 'all at once': None, 0 or +inf."""
    return rate is None or rate == 0 or (isinstance(rate, float) and math.isinf(rate))


def gaps(n, rate, burstiness=1.0, seed=1):
    """``n`` inter-arrival gaps (s) of a Poisson (burstiness 1) or gamma process at ``rate`` req/s.

    Raises ArrivalError for ``rate`` <= 0 or not finite, ``burstiness`` <= 0, or ``n`` < 0.
    """
    if n < 0:
        raise ArrivalError("the number of gaps must be >= 0, got %r" % (n,))
    if rate is None or math.isnan(rate) or rate <= 0 or math.isinf(rate):
        raise ArrivalError("request_rate must be a finite number > 0 req/s for random arrivals, got %r" % (rate,))
    if burstiness is None or math.isnan(burstiness) or burstiness <= 0 or math.isinf(burstiness):
        raise ArrivalError("burstiness must be a finite number > 0 (1.0 = Poisson, < 1 burstier, > 1 more regular), got %r"
                           % (burstiness,))
    rng = random.Random(seed)
    if burstiness == 1.0:
        return [rng.expovariate(rate) for _i in range(n)]
    scale = 1.0 / (rate * burstiness)
    return [rng.gammavariate(burstiness, scale) for _i in range(n)]


def offsets(n, rate=None, burstiness=1.0, seed=1):
    """Send offsets (s) of ``n`` requests: 0.0 for all when the rate is unlimited, else cumulative gaps.

    Returns a list of ``n`` floats, ``[0.0, g1, g1 + g2, ...]``. Raises ArrivalError as :func:`gaps`,
    and for a ``burstiness`` other than 1.0 with an unlimited rate (bursts need a rate to shape).
    """
    if n <= 0:
        return []
    if is_unlimited(rate):
        if burstiness not in (None, 1.0):
            raise ArrivalError("burstiness=%r needs a finite request_rate (it shapes the gaps between arrivals at that rate); "
                               "set request_rate, or burstiness 1.0" % (burstiness,))
        return [0.0] * n
    out = [0.0]
    t = 0.0
    for g in gaps(n - 1, rate, burstiness, seed):
        t += g
        out.append(t)
    return out


def trace_offsets(timestamps_ms, time_scale=1.0):
    """Send offsets (s) from trace timestamps (ms): ``(ts - min(ts)) / 1000 * time_scale``, in input order.

    ``time_scale`` > 1 slows the replay down (bench_serving's ``--mooncake-slowdown-factor``), < 1
    speeds it up. The timestamps must be non-decreasing (the trace reader sorts them).
    Raises ArrivalError for a ``time_scale`` <= 0 or decreasing timestamps.
    """
    if time_scale is None or math.isnan(time_scale) or time_scale <= 0 or math.isinf(time_scale):
        raise ArrivalError("trace time scale must be a finite number > 0 (1.0 = as recorded, 2.0 = half as fast), got %r"
                           % (time_scale,))
    if not timestamps_ms:
        return []
    t0 = timestamps_ms[0]
    out = []
    prev = t0
    for ts in timestamps_ms:
        if ts < prev:
            raise ArrivalError("trace timestamps must be non-decreasing, got %r after %r" % (ts, prev))
        prev = ts
        out.append((ts - t0) / 1000.0 * time_scale)
    return out
