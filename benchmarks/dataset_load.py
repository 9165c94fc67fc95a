"""How fast, and in how much memory, does the controller load a ShareGPT file of the real one's size, next to
bench_serving's own loader on the same file?

Prints numbers (this is a measurement script, not a test):

1. Generates (once; deterministic for ``--seed``) a file shaped like ``ShareGPT_V3_unfiltered_cleaned_split.json``,
   the default dataset of ``sglang.bench_serving`` (~94k conversations, ~650 MB): a JSON array, indented, non-ASCII
   text unescaped (``ensure_ascii=False``), with the real file's broken row shapes mixed in - empty ``conversations``,
   a single turn, an assistant-first conversation, an empty value, only assistant turns - and system turns.
2. Measures, each in its own fresh Python process (wall time with ``time.perf_counter``, CPU time of the process with
   ``time.process_time`` - the steadier number on a shared machine -, peak RSS with
   ``resource.getrusage(RUSAGE_SELF).ru_maxrss`` at the end), ``--repeat`` times alternately:

   * ``ours``: ``workloads.load_workload_counted(path, limit=2000, seed=1)`` - the serving_benchmark action plugin's
     load on the controller: read, parse every row, skip and count the unusable ones, sample 2000 rows
     (category-stratified).
   * ``bench_serving``: the dataset-reading part of SGLang 0.5.23's ``sample_sharegpt_requests``
     (``sglang/benchmark/datasets/sharegpt.py``), copied below line for line: ``json.load`` of the whole file, the
     ``>= 2 turns`` filter, the first two turns of each conversation, ``random.shuffle``. Not measured: its tokenizer
     (``tokenizer.encode`` of each sampled prompt and completion for the length filter), which needs ``transformers``
     and a model's tokenizer and only adds to its time and memory.
   * ``python``: an interpreter that imports the same modules and loads nothing (the floor of both RSS numbers).

   Each process imports ``workloads`` before its clock starts (the action plugin has it loaded already).

Goal: ``ours`` no slower and no larger in peak RSS than ``bench_serving``.

Usage: .venv/bin/python benchmarks/dataset_load.py [--path /tmp/sharegpt_v3_like.json] [--conversations 94145]
       [--target-mb 650] [--seed 0] [--repeat 2] [--keep]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, ".collections"))

WORDS = ("the of and to in is that for it as with was on be by this are or an at from which can your you have not "
         "code function python model data error value list file server request token please explain write how what "
         "why example using would should could output input string number return class import").split()
FOREIGN = ("数据 模型 请 解释 一下 这个 函数 为什么 错误", "Привет как дела объясни пожалуйста этот код",
           "こんにちは この コード を 説明 して ください", "café résumé naïve über straße", "😀 🚀 ✅ 🤖")


def _paragraph(rng, n_words):
    words = [rng.choice(WORDS) for _w in range(n_words)]
    if rng.random() < 0.3:
        words.insert(rng.randrange(len(words) + 1), rng.choice(FOREIGN))
    return " ".join(words).capitalize() + "."


def _turns(rng, n, first="human", pool=()):
    out = []
    who = first
    for _t in range(n):
        out.append({"from": who, "value": " ".join(rng.choice(pool) for _p in range(rng.randint(1, 3)))})
        who = "gpt" if who == "human" else "human"
    return out


def _indented(row_id, conv):
    """The row as ``json.dump(dataset, indent=2, ensure_ascii=False)`` writes it inside the array (what the real file looks
    like), built with the C encoder for each value (``indent`` would switch json to its pure-Python encoder)."""
    enc = json.JSONEncoder(ensure_ascii=False).encode
    if not conv:
        return '  {\n    "id": %s,\n    "conversations": []\n  }' % enc(row_id)
    turns = ",\n".join('      {\n        "from": %s,\n        "value": %s\n      }' % (enc(t["from"]), enc(t["value"])) for t in conv)
    return '  {\n    "id": %s,\n    "conversations": [\n%s\n    ]\n  }' % (enc(row_id), turns)


def generate(path, conversations, target_mb, seed):
    """Write the ShareGPT-V3-shaped file; returns (bytes, {shape: rows})."""
    rng = random.Random(seed)
    shapes = {}
    # ~6.9 KB per row at 94k rows and 650 MB; the mean words per turn are set from the target. Turns are drawn from a
    # pool of paragraphs (generating every word would take minutes).
    mean_words = max(10, int(target_mb * 1e6 / conversations / 6 / 3.13))
    pool = [_paragraph(rng, rng.randint(8, 2 * mean_words // 3)) for _p in range(4000)]
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("[\n")
        for i in range(conversations):
            r = rng.random()
            if r < 0.010:
                shape, conv = "empty conversations", []
            elif r < 0.025:
                shape, conv = "single turn", _turns(rng, 1, pool=pool)
            elif r < 0.045:
                shape, conv = "assistant first", _turns(rng, rng.randint(2, 8), "gpt", pool)
            elif r < 0.052:
                shape, conv = "empty value", _turns(rng, 2, pool=pool)
                conv[0]["value"] = ""
            elif r < 0.056:
                shape, conv = "only assistant turns", [dict(t, **{"from": "gpt"}) for t in _turns(rng, 2, "gpt", pool)]
            elif r < 0.066:
                shape, conv = "system turn", [{"from": "system", "value": _paragraph(rng, 20)}] + _turns(rng, 2, pool=pool)
            else:
                shape, conv = "ok", _turns(rng, rng.choice((2, 2, 2, 4, 4, 6, 8, 12)), pool=pool)
            shapes[shape] = shapes.get(shape, 0) + 1
            fh.write(_indented("%08x_%d" % (rng.getrandbits(32), i % 7), conv) + (",\n" if i + 1 < conversations else "\n"))
        fh.write("]\n")
    return os.path.getsize(path), shapes


def child(kind, path):
    """One measured load in this process; prints a JSON line."""
    from ansible_collections.llmops.sglang.plugins.module_utils._bench import workloads    # the plugin has it loaded
    t0, c0 = time.perf_counter(), time.process_time()
    if kind == "ours":
        def progress(p, done, total, rows):      # the action plugin shows this line on the play's output
            sys.stderr.write("workload %s: %d of %d MiB read, %d rows\n" % (p, done >> 20, total >> 20, rows))

        _name, rows, counts = workloads.load_workload_counted(path, limit=2000, seed=1, progress=progress)
        out = {"rows_kept": counts["used"], "sample": len(rows), "counts": counts["text"]}
    elif kind == "bench_serving":
        dataset_path = path
        # ---- SGLang 0.5.23 sglang/benchmark/datasets/sharegpt.py sample_sharegpt_requests, before the tokenizer ----
        # Load the dataset.
        with open(dataset_path) as f:
            dataset = json.load(f)

        # Filter out the conversations with less than 2 turns.
        dataset = [
            data
            for data in dataset
            if len(data.get("conversations", data.get("conversation", []))) >= 2
        ]
        # Only keep the first two turns of each conversation.
        dataset = [
            (
                data.get("conversations", data.get("conversation", []))[0]["value"],
                data.get("conversations", data.get("conversation", []))[1]["value"],
            )
            for data in dataset
        ]

        # Shuffle the dataset.
        random.shuffle(dataset)
        # ---- end of the copied lines ----
        out = {"rows_kept": len(dataset)}
    else:
        out = {"rows_kept": len(workloads.BUILTIN_PROMPTS)}
    use = resource.getrusage(resource.RUSAGE_SELF)
    out.update(kind=kind, wall_s=time.perf_counter() - t0, cpu_s=time.process_time() - c0, maxrss_mib=use.ru_maxrss / 1024.0)
    print(json.dumps(out))


def measure(kind, path):
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", kind, "--path", path],
                          check=True, stdout=subprocess.PIPE, universal_newlines=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    ap.add_argument("--path", default="/tmp/sharegpt_v3_like.json")
    ap.add_argument("--conversations", type=int, default=94145)
    ap.add_argument("--target-mb", type=float, default=650)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--keep", action="store_true", help="keep the generated file")
    ap.add_argument("--child", choices=("ours", "bench_serving", "python"))
    a = ap.parse_args()
    if a.child:
        child(a.child, a.path)
        return
    made = False
    if not os.path.exists(a.path):
        t0 = time.perf_counter()
        size, shapes = generate(a.path, a.conversations, a.target_mb, a.seed)
        made = True
        print("generated %s: %d conversations, %.0f MB in %.1f s; shapes: %s" % (
            a.path, a.conversations, size / 1e6, time.perf_counter() - t0,
            ", ".join("%d %s" % (n, s) for s, n in sorted(shapes.items(), key=lambda kv: -kv[1]))))
    else:
        print("using %s (%.0f MB)" % (a.path, os.path.getsize(a.path) / 1e6))
    try:
        results = {"python": [], "ours": [], "bench_serving": []}
        results["python"].append(measure("python", a.path))
        for _r in range(a.repeat):
            for kind in ("bench_serving", "ours"):
                results[kind].append(measure(kind, a.path))
        print("%-14s %-24s %-24s %10s  %s" % ("loader", "wall s (each run)", "CPU s (each run)", "peak MiB", "rows"))
        for kind, rs in results.items():
            print("%-14s %-24s %-24s %10.0f  %s" % (
                kind, " ".join("%.2f" % r["wall_s"] for r in rs), " ".join("%.2f" % r["cpu_s"] for r in rs),
                max(r["maxrss_mib"] for r in rs), rs[0].get("counts") or rs[0].get("rows_kept", "-")))
        for kind, rs in results.items():
            for r in rs:
                print(json.dumps(r))
    finally:
        if made and not a.keep:
            os.unlink(a.path)


if __name__ == "__main__":
    main()
