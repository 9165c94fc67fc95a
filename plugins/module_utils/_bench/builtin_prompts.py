# -*- coding: utf-8 -*-
# Copyright: llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""The built-in, category-labelled benchmark prompt set (``workload: builtin``).

Written for this collection (no copied dataset): 10 categories x 10 prompts, the categories SPEED-Bench
(arXiv 2604.09557) found to differ most in draft acceptance: coding, math, reasoning, qa, summarization, rag (long
context), extraction (JSON), translation (multilingual), writing (creative), roleplay. Lengths vary from one line to a
few thousand words (the RAG prompts carry a long context assembled from the documents below), so prefill and decode
both see realistic spreads. ``BUILTIN_PROMPTS`` is a tuple of ``(category, prompt text)``.
"""

from __future__ import annotations

CATEGORIES = ("coding", "math", "reasoning", "qa", "summarization", "rag", "extraction", "translation", "writing", "roleplay")

_CODING = (
    "Write a Python function `merge_intervals(intervals)` that merges overlapping closed intervals given as a list of "
    "(start, end) tuples and returns them sorted. Include type hints and a docstring.",
    "Here is a Python function that is supposed to return the n-th Fibonacci number but is too slow for n = 80:\n\n"
    "```python\ndef fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n```\n\n"
    "Rewrite it to run in linear time and explain the change in two sentences.",
    "Implement a thread-safe LRU cache class in Python with `get(key)` and `put(key, value)` methods, a fixed capacity, "
    "and O(1) operations. Use only the standard library.",
    "Write a bash script that finds every file larger than 100 MB under a directory given as the first argument, prints "
    "them sorted by size with human-readable sizes, and exits with status 1 when the directory does not exist.",
    "Write a SQL query over the tables `orders(id, customer_id, created_at, total)` and `customers(id, name, country)` "
    "that returns, per country, the number of customers who placed at least three orders in 2025 and their average order "
    "total, ordered by that average descending.",
    "Convert this JavaScript callback code to async/await and add error handling:\n\n```javascript\nfunction load(id, cb) {\n"
    "  db.get(id, function (err, row) {\n    if (err) return cb(err);\n    http.post('/audit', row, function (err2) {\n"
    "      cb(err2, row);\n    });\n  });\n}\n```",
    "Write a Go function that reads lines from an io.Reader, counts word frequencies case-insensitively, and returns the "
    "ten most frequent words with their counts. Include a table-driven unit test.",
    "Explain what this Rust compiler error means and how to fix the code:\n\n```rust\nfn longest(a: &str, b: &str) -> &str "
    "{\n    if a.len() > b.len() { a } else { b }\n}\n```\n\nerror[E0106]: missing lifetime specifier",
    "Write a Python class `RateLimiter` implementing a token bucket: a capacity, a refill rate in tokens per second, and a "
    "method `allow()` that returns True when a request may proceed. Then write three pytest tests for it, one of which "
    "uses a fake clock.",
    "Write a Dockerfile for a Python 3.12 FastAPI service that installs dependencies from requirements.txt in a separate "
    "layer, runs as a non-root user, exposes port 8080, and starts uvicorn with two workers.",
)

_MATH = (
    "What is 15*23? Answer briefly.",
    "Solve for x: 3x + 7 = 2x - 5. Show each step.",
    "A train leaves at 09:40 and travels 248 km at an average speed of 62 km/h. At what time does it arrive? Show the "
    "calculation.",
    "Compute the derivative of f(x) = x^3 * ln(x) and find the value of x > 0 where f'(x) = 0.",
    "What is the sum of all integers from 1 to 1000 that are divisible by 3 or by 5? Explain the method.",
    "A bag holds 5 red, 4 blue and 3 green marbles. Two marbles are drawn without replacement. What is the probability "
    "that they have the same colour? Give the answer as a fraction in lowest terms.",
    "Prove that the square root of 2 is irrational.",
    "Calculate the monthly payment of a 25-year loan of 300000 at a fixed annual interest rate of 4.2 %, compounded "
    "monthly. Give the formula and the result rounded to cents.",
    "Find all real solutions of x^2 - 5x + 6 = 0 and of x^4 - 5x^2 + 4 = 0.",
    "Count from 1 to 60, separated by commas, and then give the sum of those numbers.",
)

_REASONING = (
    "Alice is older than Bob. Carol is younger than Bob but older than Dave. Eve is older than Alice. List the five from "
    "oldest to youngest and explain how you know.",
    "A farmer must carry a wolf, a goat and a cabbage across a river in a boat that holds him and one item. The wolf eats "
    "the goat and the goat eats the cabbage when left alone. Give the shortest plan and explain why it works.",
    "If every server in rack A is also in the monitoring group, and some servers in the monitoring group run GPUs, does it "
    "follow that some servers in rack A run GPUs? Explain the logic.",
    "Three boxes are labelled 'apples', 'oranges' and 'mixed', and every label is wrong. You may take one fruit from one "
    "box without looking inside. Which box do you pick from, and how do you relabel all three?",
    "A deployment failed after three changes were made on the same day: a driver upgrade, a kernel parameter change and "
    "a new container image. The failure only appears on hosts with more than two GPUs. Reason step by step about which "
    "change is most likely responsible and what test would confirm it.",
    "You have two ropes that each take exactly one hour to burn, but they burn unevenly. How can you measure exactly 45 "
    "minutes? Explain your reasoning.",
    "A team's service meets its latency target at 8 concurrent users but misses it at 32. Doubling the GPU count did not "
    "help. List the hypotheses in order of likelihood and the measurement that would separate them.",
    "In a tournament each of 6 teams plays every other team once. A win gives 3 points, a draw 1 point. Can all teams "
    "finish with the same number of points? Justify the answer.",
    "Is the following argument valid? 'If the cache is warm, latency is low. Latency is low. Therefore the cache is warm.' "
    "Name the fallacy if there is one and give a counterexample.",
    "Four people must cross a bridge at night with one torch; at most two cross at a time, at the slower one's pace. They "
    "take 1, 2, 5 and 10 minutes. What is the minimum total time, and why can it not be less?",
)

_QA = (
    "What is the difference between a process and a thread?",
    "Why is the sky blue?",
    "What does the HTTP status code 429 mean, and how should a client react to it?",
    "Who proposed the theory of general relativity, and in which decade was it published?",
    "What is the capital of Australia, and why is it not Sydney?",
    "How does a vaccine train the immune system?",
    "What is the difference between TCP and UDP? Give one typical use of each.",
    "What causes the seasons on Earth?",
    "What is a mixture-of-experts language model, and why can it be cheaper to run than a dense model of the same size?",
    "What is the role of the IOMMU on a server with several GPUs?",
)

_SUMMARY_TEXT_1 = (
    "The city council met on Tuesday evening to discuss the proposal to convert the old freight yard into a mixed-use "
    "district. Supporters argued that the plan would bring around 1,200 homes, a primary school and a park to an area "
    "that has stood empty for fifteen years. Opponents raised concerns about traffic on the two narrow access roads, the "
    "cost of removing contaminated soil, and the absence of a firm commitment to affordable housing. The developer "
    "offered to fund a new bus line for the first five years and to reserve twenty percent of the homes for rent below "
    "market rates. After three hours of debate the council postponed the vote by a month and asked the planning office "
    "for an independent estimate of the clean-up costs and a traffic study covering peak hours on weekdays.")
_SUMMARY_TEXT_2 = (
    "Incident report. At 02:14 UTC the inference cluster's error rate rose from 0.1 % to 37 %. The on-call engineer "
    "found that a configuration change rolled out at 02:05 had lowered the maximum number of running requests from 64 to "
    "8 on every node, so requests queued and timed out at the load balancer. The change had passed review because the "
    "diff showed a renamed variable rather than a changed value. Rolling back took eleven minutes because the rollout "
    "tool processed one node at a time. Error rates returned to normal at 02:41. Follow-up actions: show effective values "
    "in configuration diffs, add a canary stage that compares request latency before and after a change, and allow "
    "parallel rollback.")
_SUMMARY_TEXT_3 = (
    "Researchers tracked the sleep of 2,300 adults for two years using wrist-worn sensors. Participants who kept a "
    "regular bedtime, within thirty minutes on most nights, reported better mood and scored higher on attention tests than "
    "those whose bedtime varied by more than two hours, even when total sleep time was the same. The effect was strongest "
    "in people who worked shifts. The authors caution that the study was observational, so it cannot show that regular "
    "bedtimes cause the improvement, and that people with irregular schedules may differ in other ways, such as stress at "
    "work or caring duties at home. A controlled trial is planned for next year.")

_SUMMARIZATION = (
    "Summarize the following text in two sentences:\n\n" + _SUMMARY_TEXT_1,
    "Summarize this incident report as three bullet points (cause, impact, actions):\n\n" + _SUMMARY_TEXT_2,
    "Give a one-paragraph summary of this article for a general audience:\n\n" + _SUMMARY_TEXT_3,
    "Write a TL;DR of at most 25 words for this text:\n\n" + _SUMMARY_TEXT_1,
    "Summarize the key findings and the main limitation of this study:\n\n" + _SUMMARY_TEXT_3,
    "Summarize this report for a manager who has one minute to read it:\n\n" + _SUMMARY_TEXT_2,
    "Summarize the arguments for and against the proposal in this text, in a short table:\n\n" + _SUMMARY_TEXT_1,
    "Summarize these three texts, one sentence each:\n\n1. " + _SUMMARY_TEXT_1 + "\n\n2. " + _SUMMARY_TEXT_2 + "\n\n3. "
    + _SUMMARY_TEXT_3,
    "Condense this report into a headline and a two-sentence abstract:\n\n" + _SUMMARY_TEXT_2,
    "Summarize the text below in plain language, avoiding technical terms:\n\n" + _SUMMARY_TEXT_3,
)

# Documents for the RAG prompts: an invented handbook of an invented company (no real data), long enough that
# the assembled contexts reach a few thousand tokens.
_DOCS = (
    ("Leave policy", "Employees of Nordwind Logistics accrue 2.25 days of paid leave per full month worked, up to 27 days "
     "per calendar year. Up to 5 unused days may be carried into the following year and must be taken before the end of "
     "March; any further unused days lapse. Requests for more than ten consecutive days need the approval of the "
     "department head at least six weeks in advance. Parental leave is governed separately by the family policy. Sick "
     "days do not count against paid leave when a medical certificate is submitted within three working days."),
    ("Travel policy", "Business travel must be booked through the internal travel desk. Economy class is the default for "
     "flights under six hours; premium economy may be booked for longer flights. Hotel costs are reimbursed up to 140 "
     "euros per night in most cities and up to 210 euros in London, Paris, Zurich and New York. Meal allowances follow the "
     "national per-diem tables. Receipts must be uploaded within 30 days of the end of the trip; claims submitted later "
     "need written approval from the finance controller. Private extensions of business trips are allowed if the "
     "employee pays every additional cost."),
    ("Equipment", "Each new employee receives a laptop, a headset and, on request, a second monitor. Laptops are replaced "
     "every four years or earlier when a repair would cost more than 40 percent of a new device. Lost or stolen equipment "
     "must be reported to the IT service desk within 24 hours. Employees may buy their old laptop at a residual price "
     "set by IT when it is replaced. Personal software may not be installed on company devices without approval from "
     "the security team."),
    ("Remote work", "Staff may work remotely up to three days per week after their probation period of six months. Teams "
     "agree on at least one common office day. Working from another country is allowed for up to 20 working days per "
     "year, subject to an approval that checks tax and insurance rules. The company pays a monthly allowance of 30 euros "
     "towards internet costs for employees who work remotely at least two days per week. Remote workers must use the VPN "
     "for all access to internal systems."),
    ("Warehouse safety", "Forklift trucks may only be driven by staff holding a valid internal licence, renewed every two "
     "years after a practical test. The speed limit inside the halls is 6 km/h. High-visibility vests are mandatory in "
     "loading zones. Accidents and near misses are reported in the safety system within the same shift; the safety "
     "officer reviews every report within five working days. Fire drills take place twice a year in each warehouse."),
    ("Expense approval", "Purchases up to 500 euros can be approved by the team lead. Purchases between 500 and 5,000 euros "
     "need the department head; above 5,000 euros the finance director must approve as well. Software subscriptions of "
     "any amount need a security review before the first payment. Splitting a purchase to stay under a threshold is a "
     "breach of policy. Approved expenses are paid with the next monthly payroll."),
    ("Training", "Every employee has a training budget of 1,200 euros per year and five training days. Unused budget does "
     "not carry over. Certifications that the company requires for a role are paid outside this budget. When the company "
     "pays more than 3,000 euros for a single course and the employee leaves within twelve months of completing it, half "
     "of the cost must be repaid. Internal courses are free and do not use the budget."),
    ("On-call duty", "Engineers on the on-call rota receive a flat allowance of 250 euros per week on call plus their hourly "
     "rate for time spent on incidents outside working hours. The response time for a critical alert is 15 minutes. Each "
     "engineer is on call at most one week in four. After a night with more than two hours of incident work, the engineer "
     "may start work at noon the next day. Swapping shifts must be recorded in the rota tool before the shift begins."),
)


def _context(indices):
    return "\n\n".join("Document %d: %s\n%s" % (n + 1, _DOCS[i][0], _DOCS[i][1]) for n, i in enumerate(indices))


_ALL = tuple(range(len(_DOCS)))
_RAG = (
    "Answer the question using only the documents below. Cite the document number.\n\n" + _context(_ALL)
    + "\n\nQuestion: How many unused leave days can be carried into the next year, and until when must they be taken?",
    "Use the context to answer. If the context does not contain the answer, say so.\n\nContext:\n" + _context((1, 5, 6))
    + "\n\nQuestion: What is the hotel limit per night in Zurich, and who approves a late expense claim?",
    "Based on the retrieved passages below, answer the question and quote the sentence that supports your answer.\n\n"
    + _context((3, 2, 7, 0)) + "\n\nQuestion: Does the company contribute to internet costs for remote workers?",
    "Read the documents and answer.\n\n" + _context(_ALL + _ALL)
    + "\n\nQuestion: An engineer was on call for two weeks and spent 6 hours on incidents at night. What is paid, and can "
    "they swap a shift afterwards?",
    "Using only the following documents, answer the question. Cite the documents you used.\n\n" + _context((4, 5, 6, 7, 0, 1))
    + "\n\nQuestion: Who must approve a purchase of 7,500 euros, and what extra step applies if it is a software subscription?",
    "Context documents:\n" + _context((2, 3, 4)) + "\n\nBased on the context above: what happens when a laptop is stolen, "
    "and can the employee buy their old laptop?",
    "Answer from the documents below only; answer 'not in the documents' otherwise.\n\n" + _context((0, 6, 7, 1, 2, 3, 4, 5))
    + "\n\nQuestion: What is the company's policy on pets in the office?",
    "Given the retrieved documents below, write a short answer with citations.\n\n" + _context((6, 0))
    + "\n\nQuestion: If an employee leaves six months after a 4,000 euro course, how much must they repay?",
    "Here are the documents retrieved for the user's question.\n\n" + _context(_ALL + (0, 1, 2))
    + "\n\nQuestion: Summarize every rule in the documents that has a deadline, with the deadline.",
    "According to the context below, how fast may forklifts drive inside the halls, and how often are licences renewed?"
    "\n\nContext:\n" + _context((4, 7, 3)),
)

_EXTRACTION = (
    "Extract the fields name, email, company and phone from this signature and return JSON only:\n\n"
    "Best regards,\nMarta Kowalczyk\nHead of Procurement, Vistula Components Sp. z o.o.\nmarta.kowalczyk@vistula-comp.example\n"
    "+48 22 555 01 37",
    "Return a JSON object with keys date, amount, currency and merchant for this receipt line: "
    "'2026-03-14 CAFE LUNA BERLIN EUR 18,40 CARD ****1234'.",
    "From the following job posting, extract a JSON object with title, location, remote (true/false), salary_min, "
    "salary_max and required_skills (a list):\n\nWe are hiring a Senior Platform Engineer in Lyon (hybrid, two days "
    "remote). Salary 68,000-82,000 EUR. You know Kubernetes, Terraform and Python, and you have run GPU workloads in "
    "production.",
    "Parse these log lines into a JSON array of objects with timestamp, level and message:\n\n"
    "2026-11-02T10:15:02Z INFO server started on port 30000\n2026-11-02T10:15:09Z WARN max_running_requests reset to 48\n"
    "2026-11-02T10:16:44Z ERROR request 8c1f timed out after 60 s",
    "Extract every date mentioned in this text and return them as a JSON list in ISO 8601 format: 'The contract starts "
    "on 3 February 2026, the first review is due on the 15th of May, and the contract ends on 31/01/2027.'",
    "Convert this table to JSON (a list of objects with keys city, population, country):\n\n"
    "| city | population | country |\n|---|---|---|\n| Porto | 232000 | Portugal |\n| Graz | 291000 | Austria |\n"
    "| Tartu | 97000 | Estonia |",
    "Extract the entities from this sentence as JSON with keys people, organisations and places: 'On Monday, Dr. Amara "
    "Osei of the Lagos Institute of Technology met representatives of Nordwind Logistics in Rotterdam.'",
    "Fill this JSON schema from the text and output valid JSON only. Schema: {\"product\": str, \"quantity\": int, "
    "\"unit_price\": float, \"delivery\": str}. Text: 'Please send 250 units of the M8 stainless hex bolts at 0.32 each, "
    "delivery by express to our Gdansk warehouse.'",
    "Extract the key-value pairs from this configuration snippet as a flat JSON object:\n\n"
    "model_path = /models/qwen\ntp_size = 4\nspeculative_algorithm = NEXTN\nspeculative_num_steps = 1\nport = 30000",
    "Read the customer message and return JSON with fields sentiment (positive/neutral/negative), product, issue and "
    "wants_refund (true/false): 'The kettle I bought last week stopped heating after three days. I'd like my money back, "
    "this is the second one that broke.'",
)

_TRANSLATION = (
    "Translate into German: 'The server will restart at midnight for maintenance. Please save your work.'",
    "Translate the following into French and Spanish: 'Thank you for your order. It will be shipped within two "
    "business days.'",
    "Traduis en anglais : « Le rapport trimestriel montre une hausse de huit pour cent des ventes, portée surtout par "
    "les nouveaux marchés en Europe de l'Est. »",
    "Translate into Japanese, then give a word-by-word gloss: 'Where is the nearest train station?'",
    "Übersetze ins Englische: „Die Wartungsarbeiten verzögern sich um zwei Stunden, weil ein Ersatzteil fehlt.\u201c",
    "Translate this paragraph into Italian, keeping the technical terms in English: 'Speculative decoding uses a small "
    "draft model to propose several tokens, which the target model then verifies in a single forward pass.'",
    "Translate into Polish and Portuguese: 'The meeting has been moved to Thursday at 3 pm.'",
    "Traduce al inglés: «Necesitamos que confirmes la dirección de entrega antes del viernes; de lo contrario, el pedido "
    "se retrasará una semana.»",
    "Translate into Chinese (simplified) and Korean: 'Please keep your ticket until the end of the journey.'",
    "Translate into Dutch, Swedish and Turkish: 'Our office is closed on public holidays.'",
)

_WRITING = (
    "Write a short story of about 300 words about a lighthouse keeper who finds a message in a bottle written in her "
    "own handwriting.",
    "Write a poem in free verse about the first snow falling on a city at night.",
    "Write the opening paragraph of a mystery novel set on a night train from Vienna to Venice.",
    "Write a limerick about a cat who learns to use a laptop.",
    "Write a fable, in the style of Aesop, about a river and a mountain arguing over who is stronger, with a moral at the end.",
    "Write a sonnet about an old oak tree that has watched a village change over two hundred years.",
    "Invent a myth that explains why the moon changes shape, told as a grandmother would tell it to a child.",
    "Write a short science-fiction story about the last bookshop on a generation ship, told from the point of view of "
    "the bookshop's cat.",
    "Write song lyrics, with a chorus, about leaving home for the first time.",
    "Write a humorous short essay titled 'In Defence of Mondays'.",
)

_ROLEPLAY = (
    "You are a grumpy medieval innkeeper. A tired traveller walks in and asks for a room and a hot meal. Stay in "
    "character and respond.",
    "Pretend you are a pirate captain giving a speech to a nervous crew before a storm. Stay in character.",
    "Act as a detective in 1920s Chicago interviewing me, a witness to a jewel theft. Ask your first questions in character.",
    "You are a friendly dragon who guards a library instead of gold. I am a child who has come to borrow a book. Play "
    "the dragon.",
    "Roleplay as a starship's AI that has just woken the crew from cryosleep two hundred years too early. I am the "
    "captain. Speak to me.",
    "Be an eccentric wizard shopkeeper trying to sell me a slightly cursed umbrella. Stay in character and haggle.",
    "You are Sherlock Holmes meeting me for the first time. Deduce three things about me from my muddy boots and ink-"
    "stained fingers, in character.",
    "Play the role of a stern but kind ballet teacher on the first day of class. I am a nervous new student.",
    "Pretend to be a ghost who haunts a lighthouse and is lonely. I have just arrived as the new keeper. Talk to me.",
    "You are a sarcastic robot butler in a Victorian mansion. I ask you to bring me tea. Respond in character.",
)

BUILTIN_PROMPTS = tuple(
    (cat, text) for cat, texts in (
        ("coding", _CODING), ("math", _MATH), ("reasoning", _REASONING), ("qa", _QA), ("summarization", _SUMMARIZATION),
        ("rag", _RAG), ("extraction", _EXTRACTION), ("translation", _TRANSLATION), ("writing", _WRITING),
        ("roleplay", _ROLEPLAY),
    ) for text in texts
)
