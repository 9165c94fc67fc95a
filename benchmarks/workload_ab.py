"""Random token ids against the built-in prompt set: `playbooks/mtp_ab.yml` twice on the embedded sandbox, one sweep.

Issue #11's must-show. SPEED-Bench (NVIDIA, arXiv 2604.09557) measured that random-token inputs overestimate
speculative throughput by about 23 %, and that coding and math accept far more drafts than roleplay and creative
writing. This script runs the MTP A/B playbook (serve -> verify -> benchmark with MTP off, then with MTP on, the
inventory's NEXTN settings) twice on the sandbox host, with everything but the workload held equal:

  1. ``tests/sandbox/sandbox.yml`` (idempotent: starts the sandbox host if it is not running; ``--skip-sandbox`` skips
     it); when the host has no SGLang service answering ``/server_info`` yet, ``site.yml`` provisions it first;
  2. ``mtp_ab.yml -e sglang_benchmark_workload=random-ids`` and then ``=builtin``, the same concurrency levels (plus the
     same target concurrency, which the playbook adds), the same prompts per level and the same output length;
  3. prints, per level, the MTP speedup (MTP-on / MTP-off output tok/s) of both runs, their ratio (random-ids /
     builtin: the overestimate), the MTP-on arm's accept length of both runs, and the built-in run's per-category
     accept-length table (MTP-on arm, pooled per category: completion tokens / verify steps);
  4. checks, and exits 1 naming what failed: both runs measured the same levels with the same request counts and output
     length; the random-ids run's ``ab_summary.json`` and ``ab_summary.md``, its decision reason and its level records
     carry the synthetic-prompt warning; the built-in run carries none; at every level coding and math accept more than
     roleplay and writing; and the random-ids speedup is above the built-in one at every level.

The expected size (docs/simulator.md "Acceptance"): with the sandbox's one draft token (NEXTN 1/1/2) the built-in
mix decodes about 1.62 tokens per verify step against 2.00 for random ids, so the ratio is about 1.23 where decode
dominates (low concurrency), and moves with the batch mix at higher levels.

The sandbox is shared: run it under the lock, e.g.
    flock /tmp/llmops-sandbox.lock .venv/bin/python benchmarks/workload_ab.py
Defaults: levels 1,8, target 32, 10 prompts per level (max(10, 1 x concurrency)), 256 output tokens. About 10-15 min
on the 2-core build machine. Results also go to ``--out`` (JSON). The sandbox environment (CONTAINERS_CONF,
ANSIBLE_CONFIG) is set when unset. The host is left in whatever configuration the second run decided.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV_BIN = os.path.join(ROOT, ".venv", "bin")
WORKLOADS = ("random-ids", "builtin")
HIGH = ("coding", "math")            # SPEED-Bench's high-acceptance categories
LOW = ("roleplay", "writing")        # and its low ones
WARNING_CUE = "synthetic prompts"    # serving_benchmark.SYNTHETIC_WARNING starts "speculative decoding measured on synthetic prompts"


def env():
    e = dict(os.environ)
    e["PATH"] = VENV_BIN + os.pathsep + e.get("PATH", "")
    e.setdefault("CONTAINERS_CONF", os.path.join(ROOT, "tests", "sandbox", "containers.conf"))
    e.setdefault("ANSIBLE_CONFIG", os.path.join(ROOT, "ansible.cfg"))
    e["ANSIBLE_NOCOLOR"] = "1"
    e["PWD"] = ROOT
    return e


def playbook(args, log):
    """Run ansible-playbook ARGS from the repository root, output to LOG; returns (rc, seconds, output)."""
    t0 = time.monotonic()
    proc = subprocess.run([os.path.join(VENV_BIN, "ansible-playbook")] + args, cwd=ROOT, env=env(),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
    dt = time.monotonic() - t0
    with open(log, "w", encoding="utf-8") as fh:
        fh.write(proc.stdout)
    print("  ansible-playbook %s: rc=%d, %.0f s (log %s)" % (" ".join(args[:1]), proc.returncode, dt, log), flush=True)
    return proc.returncode, dt, proc.stdout


def server_info(host):
    proc = subprocess.run(["podman", "exec", host, "curl", "-sf", "http://127.0.0.1:30000/server_info"], env=env(),
                          capture_output=True, text=True, timeout=60, check=False)
    if proc.returncode != 0:
        return None
    try:
        return json.loads(proc.stdout)
    except ValueError:
        return None


def read_jsonl(path):
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def load_run(report_root, host, run_id):
    """The A/B summary and both arms' level records of one mtp_ab.yml run."""
    base = os.path.join(report_root, host, run_id)
    with open(os.path.join(base, "ab_summary.json"), encoding="utf-8") as fh:
        ab = json.load(fh)
    with open(os.path.join(base, "ab_summary.md"), encoding="utf-8") as fh:
        md = fh.read()
    arms = {arm: {r["max_concurrency"]: r for r in read_jsonl(os.path.join(base + "-" + arm, "results.jsonl"))}
            for arm in ("mtp_off", "mtp_on")}
    return {"ab": ab, "md": md, "arms": arms, "dir": base}


def fmt(x, nd=3):
    return "-" if x is None else ("%.*f" % (nd, x))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    ap.add_argument("--concurrency", default="1,8", help="comma-separated concurrency levels of both runs [1,8]")
    ap.add_argument("--target", type=int, default=32, help="sglang_target_concurrency (added to the levels) [32]")
    ap.add_argument("--num-prompts", type=int, default=10, help="measured requests per level (at least) [10]")
    ap.add_argument("--prompts-per-concurrency", type=int, default=1, help="a level sends max(num, this x concurrency) [1]")
    ap.add_argument("--output-len", type=int, default=256, help="output tokens per request (ignore_eos) [256]")
    ap.add_argument("--host", default="sglang-sbx-1", help="the sandbox host (inventories/sandbox) [sglang-sbx-1]")
    ap.add_argument("--skip-sandbox", action="store_true", help="do not run tests/sandbox/sandbox.yml first")
    ap.add_argument("--reuse", metavar="STAMP", help="only read and compare the reports of an earlier run wab-STAMP-*")
    ap.add_argument("--out", default="/tmp/workload_ab.json", help="JSON results [/tmp/workload_ab.json]")
    args = ap.parse_args(argv)
    levels = [int(x) for x in args.concurrency.split(",") if x.strip()]
    report_root = os.path.join(ROOT, "reports")
    stamp = args.reuse or time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    run_ids = {w: "wab-%s-%s" % (stamp, w) for w in WORKLOADS}
    timings = {}

    if not args.reuse:
        if not args.skip_sandbox:
            print("sandbox: tests/sandbox/sandbox.yml", flush=True)
            rc, timings["sandbox"], out = playbook(["tests/sandbox/sandbox.yml"], "/tmp/workload_ab-sandbox.log")
            if rc != 0:
                print(out[-4000:])
                return 2
        if server_info(args.host) is None:
            print("%s has no SGLang service yet: site.yml provisions it" % args.host, flush=True)
            rc, timings["site"], out = playbook(["site.yml", "--limit", args.host], "/tmp/workload_ab-site.log")
            if rc != 0:
                print(out[-4000:])
                return 2
        for w in WORKLOADS:
            extra = {"sglang_target_concurrency": args.target, "sglang_benchmark_concurrency": levels,
                     "sglang_benchmark_num_prompts": args.num_prompts,
                     "sglang_benchmark_prompts_per_concurrency": args.prompts_per_concurrency,
                     "sglang_benchmark_output_len": args.output_len, "sglang_benchmark_workload": w,
                     "sglang_benchmark_ab_run_id": run_ids[w], "sglang_benchmark_report_dir": report_root,
                     "sglang_benchmark_plots": True}
            print("mtp_ab.yml, workload %s: %s" % (w, json.dumps(extra)), flush=True)
            rc, timings[w], out = playbook(["playbooks/mtp_ab.yml", "--limit", args.host, "-e", json.dumps(extra)],
                                           "/tmp/workload_ab-%s.log" % w)
            if rc != 0:
                print(out[-6000:])
                return 2

    runs = {w: load_run(report_root, args.host, run_ids[w]) for w in WORKLOADS}
    problems = []
    rnd, blt = runs["random-ids"], runs["builtin"]
    lv_r = [r["level"] for r in rnd["ab"]["levels"]]
    lv_b = [r["level"] for r in blt["ab"]["levels"]]
    if lv_r != lv_b:
        problems.append("the runs measured different levels: random-ids %s, builtin %s" % (lv_r, lv_b))
    for arm in ("mtp_off", "mtp_on"):
        for lv in lv_r:
            a, b = rnd["arms"][arm].get(lv, {}), blt["arms"][arm].get(lv, {})
            for key in ("completed", "random_output_len", "max_concurrency"):
                if a.get(key) != b.get(key):
                    problems.append("%s level %s: %s differs (random-ids %s, builtin %s)" % (arm, lv, key, a.get(key), b.get(key)))
            if a.get("failed") or b.get("failed"):
                problems.append("%s level %s: failed requests (random-ids %s, builtin %s)" % (arm, lv, a.get("failed"), b.get("failed")))
            if a.get("dataset_name") != "random-ids" or b.get("dataset_name") != "builtin":
                problems.append("%s level %s: dataset_name %s / %s" % (arm, lv, a.get("dataset_name"), b.get("dataset_name")))

    rows = []
    print("\nMTP speedup (MTP-on / MTP-off output tok/s), the same sweep; ratio = random-ids / builtin")
    print("| concurrency | speedup random-ids | speedup builtin | ratio | accept length random-ids | accept length builtin |")
    print("|---:|---:|---:|---:|---:|---:|")
    by_b = {r["level"]: r for r in blt["ab"]["levels"]}
    for r in rnd["ab"]["levels"]:
        b = by_b.get(r["level"], {})
        sr, sb = r.get("speedup"), b.get("speedup")
        ratio = (sr / sb) if sr and sb else None
        rows.append({"level": r["level"], "speedup_random_ids": sr, "speedup_builtin": sb, "ratio": ratio,
                     "accept_length_random_ids": r.get("candidate_accept_length"),
                     "accept_length_builtin": b.get("candidate_accept_length"),
                     "off_tok_s": [r.get("baseline_output_tok_s"), b.get("baseline_output_tok_s")],
                     "on_tok_s": [r.get("candidate_output_tok_s"), b.get("candidate_output_tok_s")]})
        print("| %g | %s | %s | %s | %s | %s |" % (r["level"], fmt(sr), fmt(sb), fmt(ratio),
                                                   fmt(r.get("candidate_accept_length"), 2), fmt(b.get("candidate_accept_length"), 2)))
        if sr is None or sb is None or not sr > sb:
            problems.append("level %s: the random-ids speedup %s is not above the builtin one %s" % (r["level"], sr, sb))
    for w in WORKLOADS:
        d = runs[w]["ab"]["decision"] or {}
        print("%s: decision at %s: %s (speedup %s, %s); crossover: %s" % (
            w, d.get("target"), d.get("winner"), fmt(d.get("speedup")), d.get("basis"), runs[w]["ab"]["crossover"].get("note")))

    cats = sorted({c for lv in lv_b for c in (blt["arms"]["mtp_on"].get(lv, {}).get("categories") or {})})
    print("\nAccept length per category, builtin run, MTP-on arm (completion tokens / verify steps, pooled)")
    print("| category | " + " | ".join("c=%g" % lv for lv in lv_b) + " |")
    print("|---|" + "---:|" * len(lv_b))
    table = {}
    for c in sorted(cats, key=lambda c: -(blt["arms"]["mtp_on"][lv_b[0]]["categories"].get(c, {}).get("accept_length") or 0)):
        vals = [(blt["arms"]["mtp_on"].get(lv, {}).get("categories") or {}).get(c, {}).get("accept_length") for lv in lv_b]
        table[c] = dict(zip([str(lv) for lv in lv_b], vals))
        print("| %s | %s |" % (c, " | ".join(fmt(v, 2) for v in vals)))
    for lv in lv_b:
        cat = blt["arms"]["mtp_on"].get(lv, {}).get("categories") or {}
        hi = [cat[c]["accept_length"] for c in HIGH if c in cat and cat[c].get("accept_length") is not None]
        lo = [cat[c]["accept_length"] for c in LOW if c in cat and cat[c].get("accept_length") is not None]
        if hi and lo and not min(hi) > max(lo):
            problems.append("level %s: coding/math %s not above roleplay/writing %s" % (lv, hi, lo))
        elif not hi or not lo:
            print("  (level %g has no %s: its prompts did not cover both groups)" % (lv, "coding/math" if not hi else "roleplay/writing"))

    print("\nSynthetic-prompt warning")
    checks = {
        "random-ids ab_summary.json warnings": any(WARNING_CUE in x for x in rnd["ab"].get("warnings") or []),
        "random-ids decision reason": WARNING_CUE in ((rnd["ab"]["decision"] or {}).get("reason") or ""),
        "random-ids ab_summary.md": WARNING_CUE in rnd["md"],
        "random-ids MTP-on level records": all(any(WARNING_CUE in x for x in r.get("warnings") or [])
                                               for r in rnd["arms"]["mtp_on"].values()),
        "builtin carries none": not blt["ab"].get("warnings") and all(not r.get("warnings") for arm in blt["arms"].values()
                                                                      for r in arm.values()),
    }
    for name, ok in checks.items():
        print("  %-36s %s" % (name, "yes" if ok else "NO"))
        if not ok:
            problems.append("warning check failed: " + name)

    result = {"stamp": stamp, "run_ids": run_ids, "report_dirs": {w: runs[w]["dir"] for w in WORKLOADS},
              "sweep": {"concurrency": levels, "target": args.target, "num_prompts": args.num_prompts,
                        "prompts_per_concurrency": args.prompts_per_concurrency, "output_len": args.output_len},
              "levels": rows, "categories_builtin_mtp_on": table, "warning_checks": checks, "playbook_s": timings,
              "loadavg": open("/proc/loadavg").read().split()[:3], "problems": problems}
    with open(args.out, "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=1)
    print("\nreports: %s, %s; results: %s" % (rnd["dir"], blt["dir"], args.out))
    if problems:
        print("PROBLEMS:\n  " + "\n  ".join(problems))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
