#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: serving_benchmark
short_description: Measure an SGLang (or OpenAI-compatible) server like sglang.bench_serving
version_added: "1.0.0"
description:
  - Sends streaming requests to a running server - random token-id prompts of fixed or ranged length (C(random-ids)),
    the collection's built-in category-labelled prompt set (C(builtin)), or your own prompt files (read on the
    controller) - and measures, per sweep level, the metrics of C(sglang.bench_serving) with its JSONL key names
    (SGLang 0.5.9 C(bench_serving.calculate_metrics)) - completed and failed requests, duration (s),
    request/input/output/total throughput (req/s, tok/s), mean/median/std/p90/p99 of TTFT, TPOT, ITL and E2E
    latency (ms), concurrency (sum of E2E latencies / duration), peak output tok/s and peak concurrent requests.
  - TPOT per request is (E2E - TTFT) / (output tokens - 1). With the C(sglang) backend a chunk that carries several
    tokens (speculative decoding) has its gap split evenly over those tokens for ITL.
  - Accept length is computed from this level's responses (sum of C(completion_tokens) / sum of C(spec_verify_ct) of
    each request's final C(meta_info)), not the server's lifetime C(avg_spec_accept_length) that bench_serving reports.
  - With text prompts and speculative decoding, each response's C(meta_info) gives that request's accept length and
    accept rate; every level reports them per category (mean, p10/p50/p90), with output tok/s and TPOT, and an
    accept-length histogram. When speculative decoding is on and the workload is C(random-ids), each record carries a
    warning that synthetic prompts inflate speculative throughput (SPEED-Bench, arXiv 2604.09557, about 23 %).
  - A sweep is the product of O(max_concurrency) levels and O(request_rate) levels. Each level first sends
    O(warmup_requests) requests that are not counted.
  - The sweep is planned once, on the controller, by the action plugin, which then runs the module on the load generator
    once per level and shows a line per level as soon as it ends (what it measured, the ETA of the rest). With
    O(stop_on_failure) a failed level skips the rest.
  - The load generator is standard-library Python (asyncio), runs wherever the module runs (the GPU host by default,
    against loopback; delegate the task to a load host or the controller and point O(url) at the server).
  - Fails, with all measured levels in C(records), when a gate misses (naming the level and the metric), when the
    failed fraction of a level exceeds O(gates.max_failed_fraction) (default 0, any failed request), or when the
    server cannot be reached before the load starts.
author:
  - llmops.sglang developers (@llmops)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - llmops.sglang.sglang_http
options:
  backend:
    description:
      - C(sglang) posts to C(/generate) with C(input_ids) (no tokenizer needed) and reads C(meta_info).
      - C(openai) posts to C(/v1/completions) with the token ids as C(prompt); C(openai-chat) posts to
        C(/v1/chat/completions) with a text prompt of O(input_len) words. Output tokens come from C(usage).
      - Both OpenAI backends ask for C(return_spec_tokens_details). SGLang 0.5.23 answers with per-request speculative
        details (C(sglext.spec_tokens_details)); older versions ignore the field and send none, so with speculative
        decoding on each level's C(accept_length) is measured on the server from C(/metrics) instead, with no per-request
        or per-category accept length, and the level carries a warning (see RETURN C(accept_length_source)).
    type: str
    choices: [sglang, openai, openai-chat]
    default: sglang
  model:
    description: Model name sent to the OpenAI backends. Empty uses the server's C(served_model_name) from server info.
    type: str
    default: ""
  workload:
    description:
      - What the requests ask. C(random-ids) sends random token ids of O(input_len) tokens (bench_serving's C(random-ids);
        for capacity tests; it inflates speculative decoding). C(builtin) sends the collection's category-labelled prompt
        set (10 categories x 10 prompts, plugins/module_utils/_bench/builtin_prompts.py). C(builtin-long) sends a
        long-context set built from it (one row per category at about 1000, 4000, 12000 and 20000 input tokens, 1.3 tokens
        per word - a reference document of the category's prompts, then one of them as the task), so the report's accept
        length by input length covers every bucket. C(auto) is C(builtin) when the server's info shows speculative
        decoding on, else C(random-ids).
      - Anything else is a prompt file, a directory (its C(.json)/C(.jsonl)/C(.parquet) files) or a glob, read on the
        controller by the action plugin and sent to the load generator as O(prompts). Formats - ShareGPT JSON
        (C(conversations) with C(from)/C(value)), JSONL (or a JSON array) with C(prompt) or OpenAI C(messages), question
        files with C(category) and C(turns) (MT-Bench, SPEED-Bench JSONL exports), and NVIDIA SPEED-Bench's own Parquet
        split files (C(qualitative/test-*.parquet), C(throughput_16k/test-*.parquet), ...; reading Parquet needs the
        Python package pyarrow on the controller); rows may carry C(category) and C(output_len).
      - "Rows that cannot be used are skipped and counted by reason, as C(bench_serving) drops them - C(not UTF-8) and
        C(not JSON) (a JSON Lines line), C(not an object), C(no prompt key), C(too few turns) (a ShareGPT conversation of
        fewer than 2 turns, C(bench_serving)'s own filter), C(no human turn), C(empty value), C(bad field) (a C(category),
        C(output_len), C(system) or message of the wrong type), C(too long) and C(SPEED-Bench placeholder) (a SPEED-Bench
        row still holding the data set's placeholder text, not resolved with NVIDIA's C(prepare_data.py); a file that is
        mostly placeholders fails). The counts are in RV(workload_rows) and every record's C(workload_rows), and the play
        shows them, for example C(9 of 12 rows used; skipped: 2 no human turn, 1 not JSON (lines 4, 7, 11)). A system turn
        is never sent as the user turn, and a leading assistant turn is skipped."
      - A file is refused before any request is sent when none of its rows is usable, when the skipped share of its rows
        is above O(workload_max_skipped_fraction), or when it cannot be read at all (unreadable, empty, unknown format, a
        JSON array that is not valid JSON). The refusal names the file, its first skipped lines with their reasons and the
        fix. A category filter that matches nothing fails the task too.
      - Files are read in chunks and parsed row by row; a file of 128 MiB or more shows a progress line every 128 MiB and
        at its end.
      - Text prompts reach the server as production traffic does. C(sglang) sends C(text) to C(/generate), C(openai)
        sends the text as C(prompt), and C(openai-chat) sends the row's C(messages) (the server applies the chat
        template). Input and output token counts come from the server's C(meta_info)/C(usage).
    type: str
    default: random-ids
  workload_categories:
    description: Only the rows of these categories (C(builtin) and files). A name that no row carries fails the task.
    type: list
    elements: str
    default: []
  workload_max_prompts:
    description: At most this many rows of a file workload are shipped to the load generator (a seeded sample that keeps
      each category's share; 0 = all). Each level takes its requests from them in a seeded round-robin over the categories.
    type: int
    default: 2000
  workload_max_skipped_fraction:
    description: A prompt file whose share of unusable (skipped) rows is above this fraction (0..1) is refused as the
      wrong file. 0 refuses any skipped row, 1 takes a file as long as one row is usable.
    type: float
    default: 0.5
  prompts:
    description:
      - The workload's rows as data, C([{prompt | messages, category, output_len, source}]). The action plugin fills it
        from a file O(workload); give it directly only to send prompts built elsewhere (O(workload) then names them).
    type: list
    elements: dict
  multi_turn:
    description:
      - Replay the conversations of a prompt-file workload turn by turn. ShareGPT C(conversations) (every C(human) turn),
        OpenAI C(messages) (every C(user) message; C(system) messages are the system prompt) and question files
        (every item of C(turns)) become conversations. Each next user turn is sent after the previous turn's answer
        has ended, with the earlier user turns and the server's own answers (not the file's assistant turns). The
        prompt then grows as in production chat traffic, and the server's prefix (radix) cache sees the shared history.
      - C(openai-chat) sends the history as a messages list, and the server applies the chat template. C(sglang)
        (C(/generate)) and C(openai) (C(/v1/completions)) send it as text joined by blank lines, as they send
        C(messages) rows, without a chat template.
      - As C(bench_serving)'s multi-turn mode (SGLang 0.5.10, C(--gsp-num-turns)), a level's O(num_prompts) counts
        conversations. O(max_concurrency) counts conversations in flight (a conversation keeps its slot until its last
        turn). O(request_rate) spaces the conversations' first turns. Every metric is per request (turn). Records carry
        C(multi_turn), C(conversations), C(requests) and C(by_turn), the per-turn statistics with the server's prompt
        tokens and prefix-cache hits. O(output_details) lists C(conversation_ids) and C(turn_indices).
      - A turn that fails ends its conversation. Its later turns count as failed, with that reason.
      - Needs a prompt-file workload (or O(prompts)). Not with C(random-ids), C(builtin), C(auto), O(trace) or
        O(shared_prefix).
    type: bool
    default: false
  multi_turn_max_turns:
    description: With O(multi_turn), send at most this many user turns of each conversation (0 = all). Long ShareGPT
      conversations otherwise grow past the model's context.
    type: int
    default: 8
  temperature:
    description: Sampling temperature of every request (0 = greedy, as bench_serving). Recorded per level.
    type: float
    default: 0.0
  top_p:
    description: Nucleus sampling cut-off in (0, 1]; sent only below 1.0. Recorded per level.
    type: float
    default: 1.0
  input_len:
    description: Prompt length in tokens for C(random-ids) (the maximum when O(range_ratio) < 1).
    type: int
    default: 1000
  output_len:
    description: Output length in tokens, generated with C(ignore_eos) (the maximum when O(range_ratio) < 1). Rows of a
      prompt workload that carry C(output_len) use theirs.
    type: int
    default: 1000
  range_ratio:
    description:
      - Lengths are uniform in [max(int(len * ratio), 1), len], as bench_serving's C(--random-range-ratio).
      - C(1.0) (the default here; bench_serving defaults to 0.0) gives fixed lengths.
    type: float
    default: 1.0
  num_prompts:
    description: Measured requests per level (warm-up excluded).
    type: int
    default: 100
  prompts_per_concurrency:
    description: When > 0, a level sends max(O(num_prompts), this * its max_concurrency) requests, so high levels
      still reach a steady state.
    type: int
    default: 0
  max_concurrency:
    description:
      - Levels of at most this many requests in flight (bench_serving C(--max-concurrency)). Empty means no limit.
      - A list; a string such as C("1,8") is refused, not split.
    type: list
    elements: int
    default: [1]
  request_rate:
    description: Levels of Poisson arrival rate in req/s (bench_serving C(--request-rate)). Empty means all at once. A list, as
      O(max_concurrency).
    type: list
    elements: float
    default: []
  extra_concurrency:
    description: Concurrency levels that join O(max_concurrency) (the sglang_benchmark role passes the A/B run's target
      concurrency here, which extra vars cannot hide).
    type: list
    elements: int
    default: []
  sort_levels:
    description: Run the concurrency levels ascending, each once (O(extra_concurrency) included). C(false) runs them as
      given, a repeated level measured again, O(extra_concurrency) last.
    type: bool
    default: false
  phases:
    description:
      - A load that moves (closed loop) - a list of phases, each C({concurrency, duration_s}), run in order. For
        C(duration_s) seconds at most C(concurrency) requests are in flight, each finished request replaced at once by
        the next prompt. At a phase boundary a lower cap lets the requests above it finish (none is cut). No request
        starts after the last phase ends. SGLang's adaptive speculative decoding picks its draft length per batch-size
        bucket at run time, so a load that moves through the buckets is how a tuned table is proven.
      - The phases replace the concurrency levels - the sweep is one level, named after them, whose O(max_concurrency)
        is the highest phase's. The prompts cycle through a pool of O(num_prompts) (at least
        O(prompts_per_concurrency) x that concurrency).
      - The level's record carries C(phases) - per phase C(phase), C(concurrency), C(duration_s), C(start_s),
        C(end_s), C(requests) and C(failed) (the requests started in the phase), C(output_throughput) (tok/s of the
        output tokens that arrived inside the phase's window), C(mean_in_flight) (time-weighted requests in flight in
        the window), C(tpot_p50_ms), C(decode_tok_s_per_req) and C(accept_length) (of the requests started in it),
        C(settle_s) (seconds from the phase's start until the requests in flight first drop to at most its cap - the
        drain after a fall in concurrency; 0.0 when the cap did not fall) and C(settled_throughput) (tok/s of the output
        tokens that arrived from C(start_s) + C(settle_s) to C(end_s), over that time; null when the drain lasted the
        whole phase). After a fall the window's tok/s depends on which prompts were in flight at the boundary; the
        settled tok/s leaves that drain out.
      - Not with O(request_rate), O(trace), O(shared_prefix), O(multi_turn) or O(client_processes) above 1.
    type: list
    elements: dict
    default: []
  stop_on_failure:
    description: After a level that failed (a missed gate, failed requests beyond O(gates.max_failed_fraction), or no
      measurement at all), skip the remaining levels. Their count is shown in the level's line. (The action plugin runs the
      levels; the module run outside Ansible runs all it is given.)
    type: bool
    default: false
  levels:
    description:
      - The planned levels this call runs, as RV(levels) lists them. The action plugin plans the sweep from the options
        above and gives the module one level per call; the module plans only when it runs outside Ansible.
      - Give it only to run levels planned elsewhere.
    type: list
    elements: dict
    suboptions:
      max_concurrency:
        description: Requests in flight at most; null for no limit.
        type: int
      request_rate:
        description: Poisson arrival rate in req/s; null for all at once.
        type: float
      num_prompts:
        description: Measured requests of the level.
        type: int
        required: true
      waves:
        description: The level's length in the unit of the ETA (num_prompts / concurrency, or the seconds at the rate).
        type: float
        default: 1.0
      name:
        description: The level's name in lines and messages, for example C(concurrency 4).
        type: str
        required: true
      phases:
        description: The phases of a moving load (see O(phases)), normalized; absent for a fixed level.
        type: list
        elements: dict
  variable_names:
    description:
      - The caller's name of an option, used in messages instead of the option's (a key per option, C(gates.<gate>) and
        C(delegate_to) included). The sglang_benchmark role passes its variables, so a message names
        C(sglang_benchmark_concurrency) rather than C(max_concurrency).
    type: dict
    default: {}
  burstiness:
    description:
      - Shape of the arrival process at each O(request_rate) level (vLLM C(--burstiness)). C(1.0) is Poisson
        (exponential gaps). Other values draw gamma gaps with shape C(burstiness) and scale
        C(1 / (request_rate * burstiness)). The mean rate stays O(request_rate); the coefficient of variation of the
        gaps is C(1 / sqrt(burstiness)). Below 1 the traffic comes in bursts; above 1 it is more regular.
      - Needs O(request_rate) levels. SGLang 0.5.9 bench_serving has only the Poisson case.
    type: float
    default: 1.0
  trace:
    description:
      - A request trace to replay, as Mooncake JSONL text, one request per line with C(timestamp) (ms),
        C(input_length), C(output_length) and C(hash_ids). This is the format of C(bench_serving --dataset-name mooncake)
        and aiperf C(mooncake_trace). Read it on the controller, for example with
        C(lookup('ansible.builtin.file', 'trace.jsonl')); the role does this for C(sglang_benchmark_trace_file).
      - Every line is one measured request, sent at its timestamp (scaled by O(trace_time_scale)) after the start of the
        level, with exactly C(input_length) prompt tokens and C(output_length) output tokens. Requests that share
        leading C(hash_ids) share exactly those prompt blocks of O(trace_block_size) tokens, so the server's prefix
        cache sees the reuse the trace recorded.
      - O(num_prompts), O(input_len), O(range_ratio) and O(request_rate) do not apply; O(max_concurrency) levels still
        cap the requests in flight. Records say C(dataset_name=mooncake), C(arrival=trace), and O(output_file) writes
        C(request_rate) as C("trace"), as bench_serving does.
    type: str
  trace_time_scale:
    description: Multiplies the trace's time offsets (bench_serving C(--mooncake-slowdown-factor)); C(2.0) replays at half
      speed, C(0.5) at double speed.
    type: float
    default: 1.0
  trace_block_size:
    description: Tokens per C(hash_ids) block of the trace. The Mooncake traces use 512.
    type: int
    default: 512
  trace_max_requests:
    description:
      - Replay only the first this many lines of the trace file (0 = all), as bench_serving's C(--num-prompts) slices a
        trace.
      - Each prompt token costs about 14 bytes of the load generator's memory while a level runs (the token id list and
        the JSON body). The whole public Mooncake trace is about 190 million prompt tokens, so slice it.
    type: int
    default: 0
  shared_prefix:
    description:
      - The generated-shared-prefix workload of C(bench_serving --dataset-name generated-shared-prefix). The requests
        come in O(shared_prefix.num_groups) groups. Each group has one system prompt of
        O(shared_prefix.system_prompt_len) tokens, and each request adds its own question of
        O(shared_prefix.question_len) tokens. The requests are shuffled.
      - Each level sends C(num_groups * prompts_per_group) requests (O(num_prompts) does not apply), with O(output_len)
        output tokens and O(range_ratio) applied to all three lengths, as C(--gsp-range-ratio).
      - Levels after the first reuse the first level's system prompts (the same seed), so they measure a warm prefix
        cache, as a service with fixed system prompts runs.
    type: dict
    suboptions:
      num_groups:
        description: Number of distinct system prompts (C(--gsp-num-groups)).
        type: int
        required: true
      prompts_per_group:
        description: Requests per system prompt (C(--gsp-prompts-per-group)).
        type: int
        required: true
      system_prompt_len:
        description: System-prompt tokens (C(--gsp-system-prompt-len)).
        type: int
        required: true
      question_len:
        description: Question tokens after the system prompt (C(--gsp-question-len)).
        type: int
        required: true
  slo:
    description:
      - Service-level objectives for goodput, in ms (vLLM and aiperf C(--goodput)). A completed request is good when
        every set threshold holds (value <= threshold). A request with one output token has TPOT 0.
      - Each record then has C(goodput) (good requests / duration, req/s), C(goodput_completed) and
        C(goodput_fraction) (good / all requests of the level).
    type: dict
    default: {}
    suboptions:
      ttft_ms:
        description: Maximum TTFT, ms.
        type: float
      tpot_ms:
        description: Maximum TPOT, ms.
        type: float
      e2e_latency_ms:
        description: Maximum E2E latency, ms.
        type: float
  client_processes:
    description:
      - Client processes that share each level's load, 1 to 64. C(1) is one asyncio process (about 77k output tok/s of
        capacity on one core). More are forked on the host that runs the module, Linux only.
      - Requests are dealt round-robin with their planned send times. C(max_concurrency) is split between the processes.
        The per-request records are merged before the metrics, so the figures are those of one client.
    type: int
    default: 1
  warmup_requests:
    description: Requests sent before each level and not counted (bench_serving C(--warmup-requests)); they use
      O(input_len) and at most 32 output tokens.
    type: int
    default: 1
  seed:
    description:
      - Seed for prompt token ids, ranged lengths and Poisson gaps (>= 0).
      - Level number N (counting O(level_offset)) uses C(seed + N - 1), so every level sends different prompts and
        none is served from the prefix (radix) cache that an earlier level filled; the same seed and level number
        give the same prompts, so both arms of an A/B comparison send the same requests at each level.
    type: int
    default: 1
  timeout:
    description: Limit for one whole request, in seconds (0 = none).
    type: float
    default: 1800
  stall_timeout:
    description: Limit without any byte from the server on a request, in seconds (0 = none). A stalled stream
      fails with this reason.
    type: float
    default: 60
  abort_after_failures:
    description:
      - Stop sending a level's remaining requests after this many consecutive failures (0 = never); they count as
        failed with the reason, so a crashed server ends the sweep quickly.
      - A hung server ends it sooner. The level stops after a whole wave of consecutive stalls or timeouts with no
        success in between. A wave is max(2, max_concurrency) requests, and never more than this value. At
        concurrency 1 that costs two O(stall_timeout) periods instead of twenty.
    type: int
    default: 20
  server_info:
    description: Read C(/server_info) (C(/get_server_info) on 404) before the load, embed it in each record as
      bench_serving does, and fail early with the status when the server does not answer. Also polls C(/health) once and
      fails before any request when it answers 503 (the server is still loading or warming up, or its health generation
      fails), instead of letting every request stall; other answers (404 on servers without the route) let the load start.
    type: bool
    default: true
  gates:
    description: Optional thresholds checked on every level; a miss fails the task naming the level and the metric.
    type: dict
    default: {}
    suboptions:
      min_output_throughput:
        description: Minimum output throughput, tok/s.
        type: float
      max_p99_ttft_ms:
        description: Maximum p99 TTFT, ms.
        type: float
      max_p99_tpot_ms:
        description: Maximum p99 TPOT, ms.
        type: float
      min_accept_length:
        description: Minimum accept length of the level's responses (a level without one fails this gate).
        type: float
      max_failed_fraction:
        description: Maximum fraction of failed requests (0..1). Default 0, any failure fails the task.
        type: float
        default: 0.0
      min_goodput:
        description: Minimum goodput, req/s meeting O(slo) (a level measured without an SLO fails this gate).
        type: float
      min_goodput_fraction:
        description: Minimum fraction (0..1) of the level's requests that meet O(slo).
        type: float
  tag:
    description: bench_serving's C(tag) written in each record; empty writes C(null), as bench_serving without C(--tag).
    type: str
    default: ""
  label:
    description: Free label of this run (for example C(mtp_on)), written in each record.
    type: str
    default: ""
  run_id:
    description:
      - Run identifier written in each record. It names the report directory (C(reports/<host>/<run_id>/)), so it is
        refused before the first request unless it uses only letters, digits, C(.), C(_) and C(-) (not C(.) or C(..)),
        the report writer's rule.
    type: str
    default: ""
  raw_records:
    description:
      - A JSONL file on the controller that the action plugin writes each level's records to (one JSON object per
        record, keys sorted) as soon as the level ends, before anything checks them. A report or a gate that refuses
        later leaves the measurement there. Created (emptied) before the first request; one that cannot be written is
        refused while nothing has been sent. The module itself ignores it.
      - The sglang_benchmark role writes C(reports/<host>/<run_id>/raw_records.jsonl).
    type: path
  level_offset:
    description: Number of levels already run in this sweep, so C(level) numbers (and the seeds) continue when the sweep
      is split over several tasks. The action plugin adds the levels before each one.
    type: int
    default: 0
  output_file:
    description:
      - When set, records are appended to this JSONL file on the host that runs the module (bench_serving
        C(--output-file) semantics). The values are bench_serving's. An unlimited C(request_rate) is written
        C(Infinity), a replayed trace C("trace"), and an empty C(tag) C(null).
    type: path
  output_details:
    description:
      - Also write each level's per-request lists into its O(output_file) line, under bench_serving's
        C(--output-details) keys. C(input_lens) has the prompt tokens of every request. C(output_lens) has the output
        tokens of the completed requests only. C(ttfts) (s) and C(itls) (s, one list per request) follow,
        then C(generated_texts) and C(errors) (one string per request, empty on success).
      - Needs O(output_file). The lists are not returned in C(records).
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    details: In check mode no request is sent; the planned levels are returned (a file workload is still read and checked).
  diff_mode:
    support: none
  platform:
    platforms: posix
notes:
  - Standard library only on the host that runs it (Python 3.8+); no tokenizer, no aiohttp.
  - Times are measured with C(time.perf_counter) at the arrival of each chunk's bytes.
  - Warns when a level's max_concurrency exceeds the server's C(max_running_requests) (SGLang silently caps it at 48 under
    speculative decoding when it is not set), because the extra requests then queue and TTFT includes the wait.
seealso:
  - name: sglang.bench_serving
    description: The reference implementation whose metric definitions and JSONL keys this module follows.
    link: https://github.com/sgl-project/sglang/blob/main/python/sglang/bench_serving.py
"""

EXAMPLES = r"""
- name: Speculative decoding on representative traffic - the built-in prompt set, greedy, per-category accept length
  llmops.sglang.serving_benchmark:
    workload: builtin
    max_concurrency: [1, 8, 32]
    output_len: 256
  register: bench

- name: Your own prompts (read on the controller), only two categories, sampled like production
  llmops.sglang.serving_benchmark:
    workload: "{{ playbook_dir }}/prompts/*.jsonl"
    workload_categories: [coding, support]
    temperature: 0.7
    top_p: 0.9

- name: Sweep concurrency 1..64 with 1000-in / 1000-out like the seed benchmark
  llmops.sglang.serving_benchmark:
    url: http://127.0.0.1:30000
    max_concurrency: [1, 4, 16, 64]
    num_prompts: 64
    prompts_per_concurrency: 4
    gates:
      min_accept_length: 1.5
      max_p99_tpot_ms: 50
  register: bench

- name: Replay the service's own Mooncake-format trace at half speed, with goodput under a 500 ms TTFT / 50 ms TPOT SLO
  llmops.sglang.serving_benchmark:
    url: http://127.0.0.1:30000
    trace: "{{ lookup('ansible.builtin.file', 'traces/prod-2026-11.jsonl') }}"
    trace_time_scale: 2.0
    max_concurrency: []
    slo:
      ttft_ms: 500
      tpot_ms: 50
    gates:
      min_goodput_fraction: 0.95

- name: Chat traffic - ShareGPT conversations sent turn by turn (up to 4 turns), 16 conversations in flight
  llmops.sglang.serving_benchmark:
    workload: "{{ playbook_dir }}/data/sharegpt_sample.json"
    backend: openai-chat
    multi_turn: true
    multi_turn_max_turns: 4
    max_concurrency: [16]
    num_prompts: 64
    output_len: 256

- name: Shared system prompts (8 groups x 32 requests, 2048-token system prompt), bursty arrivals, two client processes
  llmops.sglang.serving_benchmark:
    shared_prefix:
      num_groups: 8
      prompts_per_group: 32
      system_prompt_len: 2048
      question_len: 128
    output_len: 256
    max_concurrency: []
    request_rate: [4, 16]
    burstiness: 0.5
    client_processes: 2

- name: OpenAI-compatible endpoint of another engine, Poisson arrivals at 2 and 8 req/s, from the controller
  llmops.sglang.serving_benchmark:
    url: "http://{{ inventory_hostname }}:8000"
    backend: openai-chat
    model: my-model
    api_key: "{{ vault_api_key }}"
    request_rate: [2, 8]
    max_concurrency: []
    input_len: 512
    output_len: 256
  delegate_to: localhost
"""

RETURN = r"""
records:
  description:
    - One record per level, in sweep order, with every bench_serving 0.5.9 JSONL key (C(server_info) embedded)
      plus C(p90/p95) keys, C(failed), C(failed_fraction), C(error_kinds) (first distinct errors with counts),
      C(max_itl_ms), C(decode_tok_s_per_request) (1000 / median TPOT), C(accept_length) (this level's),
      C(accept_length_source), C(spec_verify_ct), C(num_prompts), C(warmup_requests), C(seed) (this level's prompt seed), C(level), C(label),
      C(run_id), C(url), C(speculative) and C(started_at). Also returned when the task fails.
    - C(error_kinds) lists the first distinct errors with their counts, C([{error, count}]). The key C(errors) is left to
      bench_serving's per-request list (O(output_details)).
    - "Multi-turn keys: C(multi_turn) (bool), C(multi_turn_max_turns), C(conversations) (conversations sent),
      C(requests) (turns, the requests the metrics count) and C(by_turn) (one dict per turn index - C(turn),
      C(requests), C(completed), C(mean_prompt_tokens), C(mean_ttft_ms), C(median_ttft_ms), C(mean_e2e_latency_ms),
      C(cached_tokens), C(cached_fraction)). Without O(multi_turn) C(multi_turn) is false and the others are null."
    - "Traffic and SLO keys: C(dataset_name) (C(random-ids), C(generated-shared-prefix) or C(mooncake)); C(arrival)
      (C(all-at-once), C(poisson), C(gamma), C(trace) or C(phases)); C(phases) (a moving load's per-phase metrics, see
      O(phases)); C(burstiness); C(trace_time_scale); C(cached_tokens) (sum of
      C(meta_info.cached_tokens), the server's prefix-cache hits, null when not reported); C(slo) (the thresholds, ms);
      C(goodput) (req/s); C(goodput_completed); C(goodput_fraction). The goodput keys are null without O(slo)."
    - "Workload keys: C(dataset_name) (the workload: C(random-ids), C(builtin) or the file spec), C(workload_prompts) (rows
      available), C(temperature), C(top_p), C(accept_length_mean)/C(_p10)/C(_p50)/C(_p90) (per-request accept lengths),
      C(accept_rate) (accepted / proposed drafts, 0..1, null when the server does not report the counts),
      C(accept_length_histogram) (C([{lo, hi, count}]), 0.25-token bins), C(categories) (per category C(requests),
      C(completed), C(failed), C(output_tokens), C(output_tok_s), C(mean_tpot_ms), C(median_tpot_ms),
      C(decode_tok_s_per_request), C(spec_requests), C(accept_length) (pooled), C(accept_length_mean)/C(_p10)/C(_p50)/C(_p90),
      C(accept_rate)), C(input_length_buckets) (the same keys per input-length bucket of the requests' prompt tokens,
      C(<2k) (below 2048), C(2k-8k), C(8k-16k), C(>16k) (16384 and more), plus C(input_tokens_mean); only the buckets that
      hold a request) and C(warnings) (e.g. synthetic prompts with speculative decoding, or no per-request accept length
      on an OpenAI backend)."
    - "C(accept_length_source): C(responses) (per request: C(/generate) C(meta_info), or on the OpenAI backends SGLang
      0.5.23's C(sglext.spec_tokens_details), asked for with C(return_spec_tokens_details)); on an OpenAI backend of an
      older SGLang, whose OpenAI responses carry no speculative fields, C(server_counters) (the level's delta of
      C(sglang:generation_tokens_total) / C(sglang:spec_verify_calls_total) from C(/metrics), 0.5.14+) or C(server_gauge)
      (C(sglang:spec_accept_length) after the level: its last decode-log interval), with a warning in C(warnings);
      null when not measured (speculative decoding off, or no C(/metrics))."
    - "Units, as in bench_serving: C(duration) s; C(*_ms) ms; C(request_throughput) req/s; C(input_throughput),
      C(output_throughput), C(total_throughput), C(max_output_tokens_per_s) and C(decode_tok_s_per_request) tok/s;
      C(request_rate) req/s (null = all at once or a trace); C(concurrency) = sum of E2E latencies / duration (mean requests
      in flight); C(total_*_tokens) tokens; C(accept_length) tokens per verify step."
  returned: always
  type: list
  elements: dict
summary:
  description: Compact per-level rows (level, concurrency, request_rate in req/s, completed, failed, output_tok_s
    in tok/s, decode_tok_s_per_req in tok/s, median/p90/p99 TTFT and TPOT in ms, median ITL in ms, median E2E in ms,
    measured concurrency, accept_length, duration_s in s, goodput_req_s in req/s or null); the columns of the field
    table REPORT_FIELDS in C(plugins/module_utils/_report/benchmark.py).
  returned: always
  type: list
  elements: dict
markdown:
  description: The per-level Markdown table.
  returned: always
  type: str
levels:
  description: The planned sweep, one dict per level in the order they run - C(max_concurrency), C(request_rate)
    (req/s), C(num_prompts), C(waves) (num_prompts / concurrency, or the seconds at the rate) and C(name).
  returned: always
  type: list
  elements: dict
problems:
  description: One entry per failed level, C(level N (name) - message), in the order they ran; empty when every level passed.
    When an input is refused before anything is sent, the refusal.
  returned: always (the action plugin)
  type: list
  elements: str
  sample: ["level 2 (concurrency 8): serving_benchmark: 1 gate(s) missed: level 2 (max_concurrency=8): p99_tpot_ms 52.10 ms is above the gate 40.00 ms"]
lines:
  description: The lines shown while the sweep ran - before each level C(Benchmark level 1/2 - concurrency 1, 16 requests),
    after it C(Result concurrency 1 - 16 ok / 0 failed; output ... tok/s, ...; 1 level(s) left, ETA ~40 s).
  returned: always (the action plugin)
  type: list
  elements: str
raw_records:
  description: The O(raw_records) file the levels' records were written to as they ended (empty without one).
  returned: when the sweep started (the action plugin)
  type: str
stopped:
  description: True when O(stop_on_failure) skipped levels after a failed one.
  returned: always (the action plugin)
  type: bool
server_info:
  description: The server's C(/server_info) JSON (empty when O(server_info=false)).
  returned: always
  type: dict
speculative:
  description: The speculative settings read from server info (C(algorithm), C(num_steps), C(eagle_topk),
    C(num_draft_tokens), C(draft_model_path)); C(algorithm) null when off.
  returned: always
  type: dict
failed_requests:
  description: Failed requests over all levels.
  returned: always
  type: int
first_errors:
  description: The first distinct request errors over all levels, C([{level, error, count}]).
  returned: always
  type: list
  elements: dict
gate_failures:
  description: Gate misses, each naming the level and the metric.
  returned: always
  type: list
  elements: str
duration_s:
  description: Wall time of the whole call, warm-ups included, in seconds.
  returned: always
  type: float
workload_rows:
  description:
    - "The rows of a prompt-file workload, used and skipped - C(rows) (rows seen), C(used) (usable rows, before the
      category filter and the O(workload_max_prompts) sample), C(skipped) (C({reason: count})), C(first_skipped)
      (the first skipped rows, C([{source, reason}]), C(source) as C(file:line)), C(files) (base names) and C(text), the
      line shown in the play output, C(summary.json) and C(summary.md). Every record carries it too, as C(workload_rows)."
    - Null for a workload that reads no file.
  returned: always (the action plugin)
  type: dict
  sample: {"rows": 12, "used": 9, "skipped": {"no human turn": 2, "not JSON": 1},
           "first_skipped": [{"source": "p.jsonl:4", "reason": "no human turn"}], "files": ["p.jsonl"],
           "text": "9 of 12 rows used; skipped: 2 no human turn, 1 not JSON (lines 4, 7, 11)"}
"""

import os
import time
import traceback

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.llmops.sglang.plugins.module_utils._bench import arrivals
from ansible_collections.llmops.sglang.plugins.module_utils._bench import client as bench_client
from ansible_collections.llmops.sglang.plugins.module_utils._bench import phases as bench_phases
from ansible_collections.llmops.sglang.plugins.module_utils._bench import processes as bench_multi
from ansible_collections.llmops.sglang.plugins.module_utils._bench import options
from ansible_collections.llmops.sglang.plugins.module_utils._bench import plan as bench_plan
from ansible_collections.llmops.sglang.plugins.module_utils._bench.plan import option_name
from ansible_collections.llmops.sglang.plugins.module_utils._bench import conversations
from ansible_collections.llmops.sglang.plugins.module_utils._bench import shared_prefix
from ansible_collections.llmops.sglang.plugins.module_utils._bench import traces
from ansible_collections.llmops.sglang.plugins.module_utils._report.benchmark import (
    ReportError, check_gates, jsonl_line, make_record, markdown_table, summary_rows,
)
from ansible_collections.llmops.sglang.plugins.module_utils._bench.stats import level_metrics, normalize_slo, output_details
from ansible_collections.llmops.sglang.plugins.module_utils._bench import speculative as spec_stats
from ansible_collections.llmops.sglang.plugins.module_utils._bench import workloads
from ansible_collections.llmops.sglang.plugins.module_utils._server.client import SGLangHTTPError, module_client

SPEC_KEYS = (("algorithm", "speculative_algorithm"), ("num_steps", "speculative_num_steps"),
             ("eagle_topk", "speculative_eagle_topk"), ("num_draft_tokens", "speculative_num_draft_tokens"),
             ("draft_model_path", "speculative_draft_model_path"))


def plan_levels(params, trace_records=None):
    """The levels this call runs: ``levels`` as the action plugin planned them (every run through Ansible), else the sweep
    planned here from the same options (the module run directly, e.g. by the tests). Raises bench_plan.PlanError."""
    if params.get("levels"):
        levels = [dict(lv) for lv in params["levels"]]
        bench_plan.check_levels(levels, option_name(params.get("variable_names"), "levels"))
        return levels
    return bench_plan.plan_sweep(params, trace_requests=len(trace_records) if trace_records is not None else None,
                                 names=params.get("variable_names"))


def level_prompts(params, lv, seed, text, trace_records=None):
    """``(prompts, arrival_offsets or None, dataset_name)`` of one level (see the trace and shared_prefix options)."""
    if trace_records is not None:
        prompts = traces.build_prompts(trace_records, params["trace_block_size"], seed=params["seed"], text=text)
        offs = arrivals.trace_offsets([r.timestamp_ms for r in trace_records], params["trace_time_scale"])
        return prompts, offs, "mooncake"
    gsp = params.get("shared_prefix")
    if gsp:
        # the run's seed, not the level's: every level sends the same system prompts, as a service does
        prompts, _groups = shared_prefix.make_prompts(gsp["num_groups"], gsp["prompts_per_group"], gsp["system_prompt_len"],
                                                      gsp["question_len"], params["output_len"], params["range_ratio"],
                                                      seed=params["seed"], text=text)
        return prompts, None, "generated-shared-prefix"
    prompts = bench_client.make_prompts(lv["num_prompts"], params["input_len"], params["output_len"],
                                        params["range_ratio"], seed, text=text)
    return prompts, None, "random-ids"


def arrival_kind(params, lv, trace_records):
    """The ``arrival`` value of a record: ``trace``, ``all-at-once``, ``poisson`` or ``gamma``."""
    if trace_records is not None:
        return "trace"
    if arrivals.is_unlimited(lv["request_rate"]):
        return "all-at-once"
    return "poisson" if params.get("burstiness", 1.0) == 1.0 else "gamma"


SYNTHETIC_WARNING = ("speculative decoding measured on synthetic prompts (random token ids): random token ids inflate "
                     "speculative throughput (SPEED-Bench, arXiv 2604.09557: about 23 %); decide on workload builtin or your "
                     "own prompt files")


def resolve_workload(params, speculative):
    """``(name, rows)`` of the workload: rows None for random-ids. ``auto`` becomes ``builtin`` when ``speculative``
    (the server's settings) names an algorithm. Raises workloads.WorkloadError for unusable rows or filters."""
    name = params["workload"]
    if name not in (workloads.RANDOM_IDS, workloads.AUTO) and (params.get("trace") or params.get("shared_prefix")):
        raise workloads.WorkloadError("workload=%s and %s are two workloads; set one of them" % (
            name, "trace" if params.get("trace") else "shared_prefix"))
    if params.get("prompts"):
        if name in (workloads.RANDOM_IDS, workloads.AUTO):
            raise workloads.WorkloadError("prompts are given but workload=%s; set workload to a name for them (e.g. the file "
                                          "they came from)" % name)
        rows = workloads.filter_categories(workloads.validate_rows(params["prompts"]), params["workload_categories"], name)
        return name, rows
    if name == workloads.AUTO:
        # a trace replay or a shared-prefix run keeps its own prompts; otherwise the built-in set under speculation
        synthetic_shape = params.get("trace") or params.get("shared_prefix")
        name = workloads.BUILTIN if (speculative or {}).get("algorithm") and not synthetic_shape else workloads.RANDOM_IDS
    if name == workloads.RANDOM_IDS:
        if params["workload_categories"]:
            raise workloads.WorkloadError("workload_categories=%s applies to prompt workloads, not random-ids; use workload "
                                          "builtin or a file, or drop the filter" % (params["workload_categories"],))
        return name, None
    if name in (workloads.BUILTIN, workloads.BUILTIN_LONG):
        return workloads.load_workload(name, params["workload_categories"])
    raise workloads.WorkloadError("workload %r is a file spec, but no prompts arrived: files are read on the controller by "
                                  "the llmops.sglang.serving_benchmark action plugin; run the module through Ansible (not "
                                  "directly), or use workload builtin" % name)


def speculative_from(info):
    """Speculative settings from a server-info dict (SGLang 0.5.9 top-level ServerArgs fields)."""
    return dict((k, (info or {}).get(src)) for k, src in SPEC_KEYS)


def capacity_warnings(levels, info):
    """Levels whose max_concurrency exceeds the server's ``max_running_requests`` (SGLang caps it at 48 under
    speculative decoding when it is not set): the extra requests wait in ``#queue-req`` and TTFT includes the wait."""
    cap = (info or {}).get("max_running_requests")
    out = []
    if isinstance(cap, int) and cap > 0:
        for lv in levels:
            if lv["max_concurrency"] and lv["max_concurrency"] > cap:
                out.append("max_concurrency %d exceeds the server's max_running_requests %d: %d requests per wave queue "
                           "(#queue-req) and their TTFT includes the wait; raise sglang_server_max_running_requests to measure "
                           "%d concurrent decodes" % (lv["max_concurrency"], cap, lv["max_concurrency"] - cap, lv["max_concurrency"]))
    return out


def workload_fields(name, rows, params, prompts, results, duration, speculative, metrics):
    """The workload keys of a record (see RETURN): sampling settings, per-request accept-length statistics, the
    histogram, per-category statistics and warnings."""
    overall = spec_stats.group_stats(results, duration)
    spec_on = bool((speculative or {}).get("algorithm")) or metrics.get("accept_length") is not None
    warnings = [SYNTHETIC_WARNING] if spec_on and rows is None else []
    return {
        "workload_prompts": len(rows) if rows is not None else None,
        "temperature": params["temperature"], "top_p": params["top_p"],
        "accept_length_mean": overall["accept_length_mean"], "accept_length_p10": overall["accept_length_p10"],
        "accept_length_p50": overall["accept_length_p50"], "accept_length_p90": overall["accept_length_p90"],
        "accept_rate": overall["accept_rate"],
        "accept_length_histogram": spec_stats.accept_length_histogram(results),
        "categories": spec_stats.by_category(prompts, results, duration),
        "input_length_buckets": spec_stats.by_input_length(results, duration),
        "warnings": warnings,
    }


def openai_spec_warning(backend, version, source):
    """The level warning when an OpenAI backend's responses carried no per-request speculative fields: which SGLang
    version, what ``accept_length`` is instead (``source``: a key of spec_stats.SERVER_SOURCES or None) and the fix."""
    how = spec_stats.SERVER_SOURCES.get(source) or (
        "not measured: the server exposes no /metrics (start it with --enable-metrics for the server-side measure)")
    return ("per-request accept length is unavailable on backend %s with SGLang %s: SGLang returns speculative details in "
            "OpenAI responses only from 0.5.23 (return_spec_tokens_details); accept_length is %s, and there is no per-request "
            "or per-category accept length; use backend sglang (/generate meta_info) to measure acceptance per request"
            % (backend, version or "(version unknown)", how))


def metrics_scraper(client):
    """A callable returning ``client``'s ``/metrics`` text, None when the server exposes none or the read fails (the level
    then reports no server-side accept length rather than failing)."""
    def scrape():
        try:
            return client.metrics_text()
        except SGLangHTTPError:
            return None
    return scrape


def run_levels(params, target, levels, server_info, speculative, module_log=None, trace_records=None, details=None,
               workload=None, scrape=None):
    """Run every planned level; returns (records, first_errors). Never raises for server-side failures.

    ``details`` (a list or None): receives each level's :func:`bench_stats.output_details` when given.
    ``workload``: ``(name, rows)`` from :func:`resolve_workload` (rows None: the random-ids, shared-prefix or trace
    prompts of :func:`level_prompts`); None = random-ids.
    ``scrape``: a callable returning the server's ``/metrics`` text (None when not exposed), or None. With an OpenAI backend
    and speculative decoding on it is read before and after each level; when the responses carried no per-request
    speculative fields (SGLang before 0.5.23), the level's ``accept_length`` comes from it
    (:func:`spec_stats.server_accept_length`), ``accept_length_source`` says how, and the level gets
    :func:`openai_spec_warning`."""
    records = []
    first_errors = []
    text = params["backend"] == "openai-chat"
    name, rows = workload if workload is not None else (workloads.RANDOM_IDS, None)
    slo = normalize_slo(params.get("slo"))
    for i, lv in enumerate(levels):
        level_no = params["level_offset"] + i + 1
        # a seed per level: identical prompts at two levels would let the second hit SGLang's radix cache
        seed = params["seed"] + level_no - 1
        warm = None
        if rows is None:
            prompts, offsets, dataset = level_prompts(params, lv, seed, text, trace_records)
            if params["warmup_requests"]:
                # like bench_serving's warm-up: the prompt length of the run, at most 32 output tokens
                warm = bench_client.make_prompts(params["warmup_requests"], params["input_len"], min(params["output_len"], 32),
                                                 params["range_ratio"], seed + 7919, text=text)
        elif params.get("multi_turn"):
            prompts, offsets, dataset = (bench_client.conversation_prompts(rows, lv["num_prompts"], params["output_len"], seed,
                                                                           params.get("multi_turn_max_turns") or 0), None, name)
        else:
            prompts, offsets, dataset = (bench_client.workload_prompts(rows, lv["num_prompts"], params["output_len"], seed,
                                                                       params["backend"]), None, name)
        if rows is not None and params["warmup_requests"]:
            warm = bench_client.workload_prompts(rows, params["warmup_requests"], params["output_len"], seed + 7919,
                                                 params["backend"])
            for w in warm:
                w.output_len = min(w.output_len, 32)
        started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        server_side = params["backend"] != "sglang" and bool((speculative or {}).get("algorithm")) and scrape is not None
        before = scrape() if server_side else None
        phase_rows = None
        if lv.get("phases"):
            # a moving load (issue 21): the prompts are the pool the closed loop cycles through
            if warm:
                bench_client.run_benchmark(target, warm, max_concurrency=len(warm))
            results, duration, load_start, _total = bench_client.run_phases(
                target, prompts, lv["phases"], params["abort_after_failures"])
            phase_rows = bench_phases.phase_metrics(results, lv["phases"], load_start)
            prompts = [prompts[i % len(prompts)] for i in range(len(results))]
        else:
            results, duration, _warm = bench_multi.run_benchmark_processes(
                target, prompts, processes=params.get("client_processes") or 1, max_concurrency=lv["max_concurrency"],
                request_rate=lv["request_rate"], burstiness=params.get("burstiness", 1.0), arrival_offsets=offsets,
                warmup_prompts=warm, seed=seed, abort_after_failures=params["abort_after_failures"])
        metrics = level_metrics(results, duration, slo=slo)
        source = "responses" if metrics.get("accept_length") is not None else None
        spec_warning = None
        if server_side and source is None:
            metrics["accept_length"], source = spec_stats.server_accept_length(before, scrape())
            spec_warning = openai_spec_warning(params["backend"], (server_info or {}).get("version"), source)
        if details is not None:
            details.append(output_details(results))
            if params.get("multi_turn"):
                details[-1]["conversation_ids"] = [r.conversation for r in results]
                details[-1]["turn_indices"] = [r.turn for r in results]
        kind = "phases" if phase_rows is not None else arrival_kind(params, lv, trace_records)
        config = {"backend": params["backend"], "max_concurrency": lv["max_concurrency"], "request_rate": lv["request_rate"],
                  "random_input_len": params["input_len"], "random_output_len": params["output_len"],
                  "random_range_ratio": params["range_ratio"], "tag": params["tag"] or None, "num_prompts": lv["num_prompts"],
                  "warmup_requests": params["warmup_requests"], "seed": seed, "dataset_name": dataset,
                  "arrival": kind, "burstiness": params.get("burstiness", 1.0) if kind in ("poisson", "gamma") else None,
                  "trace_time_scale": params.get("trace_time_scale") if kind == "trace" else None,
                  "accept_length_source": source}
        meta = {"level": level_no, "label": params["label"], "run_id": params["run_id"],
                "url": params["url"], "speculative": speculative, "started_at": started}
        per_request = [p for p in prompts for _k in range(p.requests())]
        meta.update(workload_fields(name, rows, params, per_request, results, duration, speculative, metrics))
        meta.update(multi_turn_fields(params, prompts, results))
        if spec_warning:
            meta["warnings"] = meta["warnings"] + [spec_warning]
        if phase_rows is not None:
            meta["phases"] = phase_rows
        rec = make_record(metrics, config, server_info=server_info or None, meta=meta)
        records.append(rec)
        for e in metrics["error_kinds"]:
            if len(first_errors) < 5:
                first_errors.append({"level": level_no, "error": e["error"], "count": e["count"]})
        if module_log is not None:
            module_log("serving_benchmark level %d: %d ok, %d failed, %.1f tok/s" % (
                level_no, metrics["completed"], metrics["failed"], metrics["output_throughput"]))
    return records, first_errors


def multi_turn_fields(params, prompts, results):
    """The multi-turn keys of a record (see RETURN): all null but ``multi_turn`` (false) without it."""
    if not params.get("multi_turn"):
        return {"multi_turn": False, "multi_turn_max_turns": None, "conversations": None, "requests": None, "by_turn": None}
    return {"multi_turn": True, "multi_turn_max_turns": params.get("multi_turn_max_turns") or 0,
            "conversations": len(prompts), "requests": len(results), "by_turn": conversations.by_turn(results)}


def append_jsonl(path, records, details=None):
    """Append records to a JSONL file (bench_serving --output-file semantics and values, :func:`bench_report.jsonl_line`),
    each with its level's per-request ``details`` (bench_serving --output-details keys) when given."""
    d = os.path.dirname(path)
    if d and not os.path.isdir(d):
        os.makedirs(d)
    with open(path, "a") as fh:
        for i, rec in enumerate(records):
            fh.write(jsonl_line(rec, details[i] if details else None) + "\n")


def main():
    module = AnsibleModule(argument_spec=options.argument_spec(), supports_check_mode=True)
    p = module.params
    t_start = time.time()
    result = dict(changed=False, records=[], summary=[], markdown="", levels=[], server_info={}, speculative={},
                  failed_requests=0, first_errors=[], gate_failures=[], duration_s=0.0)
    errs = options.validate(p)
    try:
        target = bench_client.Target(p["url"], backend=p["backend"], model=p["model"], api_key=p["api_key"],
                                     timeout_s=p["timeout"], stall_timeout_s=p["stall_timeout"],
                                     validate_certs=p["validate_certs"], keep_text=p["output_details"],
                                     temperature=p["temperature"], top_p=p["top_p"], spec_details=p["backend"] != "sglang")
    except bench_client.BenchError as exc:
        errs.append("url/backend/sampling: %s" % to_native(exc))
        target = None
    trace_records = None
    if p["trace"] is not None:
        try:
            trace_records = traces.parse_mooncake(p["trace"], limit=max(p["trace_max_requests"], 0))
        except traces.TraceError as exc:
            errs.append("%s: %s" % (option_name(p["variable_names"], "trace"), to_native(exc)))
    try:
        levels = plan_levels(p, trace_records)
    except bench_plan.PlanError as exc:
        errs.append(to_native(exc))
        levels = []
    result["levels"] = levels
    if errs:
        module.fail_json(msg="serving_benchmark: invalid options: " + "; ".join(errs), **result)
    workload = None
    if p["workload"] != workloads.AUTO:
        # every prompt problem is refused here, before the server is even asked
        try:
            workload = resolve_workload(p, None)
        except workloads.WorkloadError as exc:
            module.fail_json(msg="serving_benchmark: %s" % to_native(exc), **result)
    if module.check_mode:
        result["msg"] = "check mode: %d level(s) planned, no request sent" % len(levels)
        module.exit_json(**result)

    info = {}
    if p["server_info"]:
        client = module_client(module, 30)
        try:
            _path, info = client.server_info()
        except SGLangHTTPError as exc:
            module.fail_json(msg="serving_benchmark: the server at %s did not answer server info before the load: %s. "
                             "Check that the service is up (systemctl status, journalctl) and that url/api_key are right."
                             % (p["url"], to_native(exc)), status=getattr(exc, "status", None), **result)
        health = client.health(timeout=30)
        if health["status"] == 503:
            module.fail_json(msg="serving_benchmark: the server at %s is not ready: GET /health answered 503 (SGLang answers 503 while it "
                             "loads weights, captures CUDA graphs or warms up, and when its health generation fails); no request was sent. "
                             "Wait for readiness (the serve stage waits for /health 200) and read the server log (journalctl -u <unit>)."
                             % p["url"], status=503, **result)
        if p["backend"] != "sglang" and not p["model"]:
            target.model = info.get("served_model_name") or info.get("model_path") or ""
    result["server_info"] = info
    result["speculative"] = speculative = speculative_from(info)
    for msg in capacity_warnings(levels, info):
        module.warn(msg)
    if workload is None:
        try:
            workload = resolve_workload(p, speculative)
        except workloads.WorkloadError as exc:
            module.fail_json(msg="serving_benchmark: %s" % to_native(exc), **result)
    if workload[1] is None and speculative.get("algorithm"):
        module.warn(SYNTHETIC_WARNING)
    scrape = None
    if p["server_info"] and p["backend"] != "sglang" and speculative.get("algorithm"):
        scrape = metrics_scraper(client)

    try:
        details = [] if p["output_details"] else None
        records, first_errors = run_levels(p, target, levels, info, speculative, module_log=module.log,
                                           trace_records=trace_records, details=details,
                                           workload=workload, scrape=scrape)
    except bench_client.BenchError as exc:
        module.fail_json(msg="serving_benchmark: %s" % to_native(exc), **result)
    except Exception as exc:  # pylint: disable=broad-except
        module.fail_json(msg="serving_benchmark: internal error while measuring: %s: %s" % (type(exc).__name__, to_native(exc)),
                         exception=traceback.format_exc(), **result)

    gate_msgs = []
    try:
        for rec in records:
            gate_msgs.extend(check_gates(rec, p["gates"]))
    except ReportError as exc:
        module.fail_json(msg="serving_benchmark: %s" % to_native(exc), **result)
    result.update(records=records, summary=summary_rows(records), markdown=markdown_table(records),
                  failed_requests=sum(r["failed"] for r in records), first_errors=first_errors,
                  gate_failures=gate_msgs, duration_s=round(time.time() - t_start, 3))
    if p["output_file"]:
        try:
            append_jsonl(p["output_file"], records, details)
            result["changed"] = True
        except (IOError, OSError) as exc:
            module.fail_json(msg="serving_benchmark: cannot append to output_file=%s: %s" % (p["output_file"], to_native(exc)), **result)
    if gate_msgs:
        failed_note = ""
        if result["failed_requests"]:
            failed_note = " %d request(s) failed; first errors: %s." % (
                result["failed_requests"], "; ".join("level %s: %s (x%d)" % (e["level"], e["error"], e["count"]) for e in first_errors))
        module.fail_json(msg="serving_benchmark: %d gate(s) missed: %s.%s" % (len(gate_msgs), "; ".join(gate_msgs), failed_note), **result)
    result["msg"] = "%d level(s) measured" % len(records)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
