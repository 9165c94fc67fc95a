"""Write a long-context workload (JSONL) built from the collection's built-in prompt set.

The named workload ``builtin-long`` (``-e sglang_benchmark_workload=builtin-long``) is the same set at the default
lengths, without a file (``_bench/workloads.py`` ``builtin_long_rows``, which this script calls); this script writes it
as a file for other lengths, categories or an output length, or for another tool.

A draft model trained on short sequences accepts fewer drafts on long inputs (EAGLE3 Qwen3-8B: accept length 2.30 at
2k tokens, 2.04 at 4k, 1.69 at 8k, 1.29 at 12k, 1.09 at 16k; vllm-project/speculators #684, SGLang #6783). A decision
taken on short prompts can be wrong for a RAG or long-document service. This script writes one row per (category,
length): a "reference document" made of the category's built-in prompts, cycled until the row reaches about the asked
number of tokens, followed by one of the category's prompts as the task::

    {"prompt": "Reference material:\\n\\n<document>\\n\\nTask: <prompt>", "category": "<category>", "output_len": N}

Point the benchmark at it (``-e sglang_benchmark_workload=/path/long.jsonl``); the report's "Accept length by input
length" table (summary.md/summary.json, buckets <2k, 2k-8k, 8k-16k, >16k of the server's prompt tokens) and
spec_tune's decision.md then show the acceptance per input length. NVIDIA SPEED-Bench's throughput split (1k ... 32k
tokens) is the published alternative (docs/benchmark.md).

Token counts are estimated from words: ``--tokens-per-word`` (default 1.3, about what BPE tokenizers give for English
prose; the SGLang simulator counts one token per word or punctuation mark). The server's own count is what the report
buckets by.

    .venv/bin/python benchmarks/long_context_workload.py --out /tmp/long.jsonl --lengths 1000,4000,12000,20000
    .venv/bin/python benchmarks/long_context_workload.py --out /tmp/long-math.jsonl --categories math --output-len 256
"""
from __future__ import annotations

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTIONS = os.path.join(ROOT, ".collections")


def _workloads():
    if COLLECTIONS not in sys.path:
        sys.path.insert(0, COLLECTIONS)
    from ansible_collections.llmops.sglang.plugins.module_utils._bench import workloads  # pylint: disable=import-outside-toplevel
    return workloads


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--out", required=True, help="JSONL file to write")
    ap.add_argument("--lengths", default="1000,4000,12000,20000", help="target input tokens per row, comma-separated")
    ap.add_argument("--categories", default="", help="built-in categories, comma-separated (default: all ten)")
    ap.add_argument("--tokens-per-word", type=float, default=1.3, help="token estimate per word (default 1.3)")
    ap.add_argument("--output-len", type=int, default=0, help="output_len of every row, tokens (0: the benchmark's)")
    args = ap.parse_args(argv)
    wl = _workloads()
    cats = [c.strip() for c in args.categories.split(",") if c.strip()] or list(wl.CATEGORIES)
    try:
        lengths = [int(x) for x in args.lengths.split(",") if x.strip()]
        rows = wl.builtin_long_rows(lengths, cats, args.tokens_per_word, args.output_len or None)
    except (ValueError, wl.WorkloadError) as exc:
        ap.error(str(exc))
    with open(args.out, "w", encoding="utf-8") as fh:
        for r in rows:
            row = dict((k, r[k]) for k in ("prompt", "category", "output_len") if r[k] is not None)
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    print("wrote %d rows (%d categories x %d lengths) to %s" % (len(rows), len(cats), len(lengths), args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
