"""bench_multi: how the load is split over client processes (the merge is tested against the simulator)."""
from __future__ import annotations

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils._bench import client as bench_client
from ansible_collections.llmops.sglang.plugins.module_utils._bench import processes as bench_multi


@pytest.mark.parametrize("mc, n, limits", [
    (None, 3, [None, None, None]),     # no limit: every process unlimited
    (8, 2, [4, 4]),
    (10, 4, [3, 3, 2, 2]),             # 10 // 4 = 2, the first 10 % 4 = 2 processes get one more
    (3, 4, [1, 1, 1]),                 # fewer slots than processes: only 3 run
    (1, 4, [1]),
])
def test_concurrency_split_adds_up_to_the_limit(mc, n, limits):
    assert bench_multi.split_concurrency(mc, n) == limits
    if mc:
        assert sum(limits) == mc


def test_bad_process_counts_and_offsets_are_refused():
    t = bench_client.Target("http://127.0.0.1:1")
    prompts = bench_client.make_prompts(2, 4, 2)
    with pytest.raises(bench_client.BenchError, match="client_processes must be >= 1"):
        bench_multi.run_benchmark_processes(t, prompts, processes=0)
    with pytest.raises(bench_client.BenchError, match="arrival_offsets has 1 entries for 2 prompts"):
        bench_multi.run_benchmark_processes(t, prompts, processes=2, arrival_offsets=[0.0])
    with pytest.raises(bench_client.BenchError, match="burstiness"):
        bench_multi.run_benchmark_processes(t, prompts, processes=2, request_rate=None, burstiness=0.5)


def test_refused_connections_come_back_merged_in_prompt_order():
    # nothing listens on port 1: every request fails at connect, in whichever process it ran
    t = bench_client.Target("http://127.0.0.1:1")
    prompts = bench_client.make_prompts(5, 40, 2, range_ratio=0.1, seed=3)
    assert len(set(p.prompt_len for p in prompts)) > 2      # distinct lengths show the order
    res, dur, _w = bench_multi.run_benchmark_processes(t, prompts, processes=2)
    assert len(res) == 5 and dur > 0
    assert all(not r.success and "cannot connect to 127.0.0.1:1" in r.error for r in res)
    assert [r.prompt_len for r in res] == [p.prompt_len for p in prompts]
