#!/usr/bin/env python3
"""Measure what an EAGLE-3 drafter buys: acceptance from vLLM's own counters, and tokens/s with and without it.

Two ways to run it, both at temperature 0 over held-out prompts (JSONL rows with "messages" or "prompt"):

1. It starts the servers itself (the embedded default; any host with room for two more servers) with this
   interpreter's vLLM: the target alone, then the target with the drafter for each --k, measured one after the
   other (on a GPU host they also start in turn on --port; without CUDA, side by side where the memory allows,
   eval_servers.py):

       python evaluate.py --model TARGET_DIR --drafter DRAFTER_DIR --prompts held_out.jsonl --k 3 \\
           --out result.json [--vllm-args "--enforce-eager --max-model-len 2048"]

2. Against servers already running (a GPU host whose target runs as a service): the baseline server, and
   one started with --speculative-config '{"method": "eagle3", "model": DRAFTER_DIR,
   "num_speculative_tokens": K}' and the same other flags; --k must be that K:

       python evaluate.py --baseline-url http://127.0.0.1:8000 --speculative-url http://127.0.0.1:8001 \\
           --k 3 --prompts held_out.jsonl --out result.json

With --ngram, each k is also measured with vLLM's n-gram speculation (prompt lookup: drafts copied from the
context, no drafter) on the same prompts and flags: the free baseline a trained drafter has to beat. Its figures go
under "ngram", by k (acceptance per draft step, and speedup, the fair comparison: n-gram drafts only where the
context repeats itself).

With --bench-concurrency (e.g. 1 256), vLLM's own benchmark, `vllm bench serve` (bench_serve.py), also runs on the
baseline's server and each drafter's, on the same held-out prompts, at each of those concurrencies: TTFT, TPOT, ITL and
output tokens/s per server and concurrency, and the speedup at each concurrency, under "bench".

Acceptance comes from the `vllm:spec_decode_*` counters (summed over engines, diff of scrapes before and
after the prompts): mean acceptance length = 1 + accepted / drafts, acceptance rate = accepted / drafted,
and per position the share of drafts whose token there was accepted. Speculative decoding must not change
greedy output, so the texts with and without the drafter are compared too (outputs_identical). The JSON
result holds k, mean_acceptance_length, acceptance_rate, per_position, tokens_per_s_baseline,
tokens_per_s_speculative, speedup and outputs_identical (and by_k when several k are measured).
"""

from __future__ import annotations

import argparse
import http.client
import json
import signal
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import progress
from bench_serve import BASELINE, bench_server, bench_summary, write_dataset
from eval_servers import ServerSpec, served
from held_out_prompts import load_prompts
from http_fetch import fetch
from intervals import LEVEL, RESAMPLES, bootstrap, ratio_of_sums
from spec_metrics import Counters, scrape

# Deadlines for the whole exchange: a model listing or a metrics scrape, and one completion of --max-tokens.
LISTING_DEADLINE_S = 30.0
COMPLETION_DEADLINE_S = 600.0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=Path, required=True, help="held-out prompts, JSONL")
    parser.add_argument("--out", type=Path, required=True, help="where to write the JSON result")
    parser.add_argument("--k", type=int, nargs="+", default=[3], help="speculative tokens per step (default 3)")
    parser.add_argument("--max-tokens", type=int, default=128, help="tokens generated per prompt (default 128)")
    parser.add_argument("--concurrency", type=int, default=1, help="requests in flight at once (default 1)")
    parser.add_argument("--acceptance-only", action="store_true", help="skip the baseline run (no tokens/s ratio)")
    parser.add_argument(
        "--ngram", action="store_true", help="also measure vLLM's n-gram speculation (no drafter) at each --k"
    )
    bench = parser.add_argument_group("vllm bench serve")
    bench.add_argument(
        "--bench-concurrency", type=int, nargs="+", default=[],
        help="also run vLLM's benchmark on the baseline's and each drafter's server at these concurrencies (default: "
        "none)",
    )  # fmt: skip
    bench.add_argument(
        "--bench-prompts", type=int, default=8, help="requests per benchmark run, at least its concurrency (default 8)"
    )
    embedded = parser.add_argument_group("servers started here")
    embedded.add_argument("--model", type=Path, help="the target model directory")
    embedded.add_argument("--drafter", type=Path, help="the drafter directory (config.json + model.safetensors)")
    embedded.add_argument(
        "--port",
        type=int,
        default=8800,
        help="the servers' port (default 8800), each in turn; started side by side (a host without CUDA with the "
        "memory for all of them) the n-th takes --port + n",
    )
    embedded.add_argument("--vllm-args", default="", help="extra flags for both servers, one shell-quoted string")
    embedded.add_argument(
        "--inherit",
        type=json.loads,
        default=[],
        help="production's launch flags as JSON [[flag, value or null], ...]: both servers start with them, "
        "minus the flags they set themselves (eyas builds it from the production unit)",
    )
    embedded.add_argument("--start-timeout", type=float, default=900, help="seconds a server may take to start")
    embedded.add_argument("--logs", type=Path, help="server logs directory (default: beside --out)")
    running = parser.add_argument_group("servers already running")
    running.add_argument("--baseline-url", help="the target without a drafter")
    running.add_argument("--speculative-url", help="the target with the drafter, num_speculative_tokens = --k")
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The arguments, checked against each other and the files they name."""
    parser = build_parser()
    args = parser.parse_args(argv)
    _check(parser, args)
    return args


def _check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.speculative_url:
        if args.model or args.drafter:
            parser.error("give either --model/--drafter (servers started here) or the URLs of running servers")
        if len(args.k) != 1:
            parser.error("a running speculative server has one k: pass the --k it was started with")
        if args.ngram:
            parser.error("--ngram starts its own servers: use it with --model (servers started here)")
        if not (args.baseline_url or args.acceptance_only):
            parser.error("--baseline-url is needed for tokens/s and the output check (or pass --acceptance-only)")
    elif not (args.model and args.drafter):
        parser.error("pass --model and --drafter (servers started here) or --speculative-url (running servers)")
    elif not (args.drafter / "config.json").is_file():
        parser.error(f"--drafter {args.drafter} has no config.json: train.py writes config.json + model.safetensors")
    if not args.prompts.is_file():
        parser.error(f"--prompts {args.prompts} does not exist")
    if min([*args.k, *args.bench_concurrency]) < 1 or min(args.max_tokens, args.concurrency, args.bench_prompts) < 1:
        parser.error("--k, --max-tokens, --concurrency, --bench-concurrency and --bench-prompts must be positive")


def served_model(base_url: str) -> str:
    return str(json.loads(fetch(f"{base_url}/v1/models", deadline_s=LISTING_DEADLINE_S))["data"][0]["id"])


def run_prompts(
    base_url: str, prompts: list[list[dict[str, str]]], args: argparse.Namespace, phase: str
) -> dict[str, Any]:
    """All prompts at temperature 0, after one warm-up request; tokens/s is the completion tokens over the wall
    time of the whole run. The spec-decode counters are scraped after the warm-up and at the end."""
    model = served_model(base_url)

    def one(messages: list[dict[str, str]]) -> tuple[str, int]:
        body = {"model": model, "messages": messages, "temperature": 0, "max_tokens": args.max_tokens}
        answer = json.loads(fetch(f"{base_url}/v1/chat/completions", body, deadline_s=COMPLETION_DEADLINE_S))
        return answer["choices"][0]["message"]["content"], answer["usage"]["completion_tokens"]

    one(prompts[0])  # warm-up, outside the timing and the counters
    if args.concurrency == 1:
        return run_one_by_one(base_url, prompts, one, phase)
    before = metrics(base_url)
    started = time.monotonic()
    pool, results = ThreadPoolExecutor(args.concurrency), []
    try:
        for done, result in enumerate(pool.map(one, prompts), start=1):
            results.append(result)
            progress.emit(phase=phase, done=done, total=len(prompts))
    finally:
        # Not `with`: on SIGTERM, waiting for the requests in flight would delay stopping the server.
        pool.shutdown(wait=False, cancel_futures=True)
    elapsed = time.monotonic() - started
    tokens = sum(count for _, count in results)
    return {
        "counters": metrics(base_url).minus(before),
        "texts": [text for text, _ in results],
        "tokens": tokens,
        "seconds": elapsed,
        "tokens_per_s": tokens / elapsed,
    }


def run_one_by_one(
    base_url: str,
    prompts: list[list[dict[str, str]]],
    one: Callable[[list[dict[str, str]]], tuple[str, int]],
    phase: str,
) -> dict[str, Any]:
    """The prompts one at a time, scraping the counters between them, so that each prompt's tokens, seconds and
    acceptance are known: the confidence intervals resample prompts. Tokens/s is over the requests' own time."""
    first = before = metrics(base_url)
    texts, per_prompt = [], []
    for done, messages in enumerate(prompts, start=1):
        started = time.monotonic()
        text, tokens = one(messages)
        seconds = time.monotonic() - started
        after = metrics(base_url)
        texts.append(text)
        per_prompt.append({"tokens": tokens, "seconds": seconds, "counters": after.minus(before)})
        before = after
        progress.emit(phase=phase, done=done, total=len(prompts))
    tokens, seconds = sum(row["tokens"] for row in per_prompt), sum(row["seconds"] for row in per_prompt)
    return {
        "counters": before.minus(first),
        "texts": texts,
        "tokens": tokens,
        "seconds": seconds,
        "tokens_per_s": tokens / seconds,
        "per_prompt": per_prompt,
    }


def confidence_intervals(run: dict[str, Any], baseline: dict[str, Any] | None, k: int) -> dict[str, Any]:
    """95% bootstrap intervals over prompts of what result_for reports; speedup pairs each prompt's two runs."""
    rows = run["per_prompt"]
    counters = [row["counters"] for row in rows]
    drafts = [c.drafts for c in counters]
    accepted = [c.accepted for c in counters]
    found: dict[str, Any] = {
        "level": LEVEL,
        "resamples": RESAMPLES,
        "prompts": len(rows),
        "mean_acceptance_length": bootstrap(len(rows), ratio_of_sums(accepted, drafts, offset=1.0)),
        "acceptance_rate": bootstrap(len(rows), ratio_of_sums(accepted, [c.draft_tokens for c in counters])),
        "per_position": [
            bootstrap(len(rows), ratio_of_sums([c.per_pos.get(position, 0.0) for c in counters], drafts))
            for position in range(k)
        ],
    }
    if baseline is not None and "per_prompt" in baseline:
        spec_rate = ratio_of_sums([row["tokens"] for row in rows], [row["seconds"] for row in rows])
        base = baseline["per_prompt"]
        base_rate = ratio_of_sums([row["tokens"] for row in base], [row["seconds"] for row in base])

        def speedup(indices: Sequence[int]) -> float | None:
            faster, slower = spec_rate(indices), base_rate(indices)
            return faster / slower if faster is not None and slower else None

        found["speedup"] = bootstrap(len(rows), speedup)
    return found


def metrics(base_url: str) -> Counters:
    return scrape(fetch(f"{base_url}/metrics", deadline_s=LISTING_DEADLINE_S).decode())


def ngram_config(k: int) -> dict[str, Any]:
    """vLLM's prompt-lookup speculation: the last 2 to 4 tokens looked up in the context, k tokens copied on."""
    return {"method": "ngram", "num_speculative_tokens": k, "prompt_lookup_max": 4, "prompt_lookup_min": 2}


def measure_speculative(
    base_url: str, prompts: list, args: argparse.Namespace, k: int, method: str = "eagle3"
) -> dict[str, Any]:
    run = run_prompts(base_url, prompts, args, phase=f"{'speculative' if method == 'eagle3' else method}-k{k}")
    counts = run.pop("counters")
    if method == "ngram":  # n-gram drafts only where the context repeats: few or no drafts is a result, not a fault
        return {"k": k, **counts.summary(k), "prompts": len(prompts), "run": run}
    if counts.drafts == 0:
        raise SystemExit(
            f"{base_url} made no drafts: it is not serving with a speculative config (vllm:spec_decode_*)."
        )
    if round(counts.draft_tokens / counts.drafts) != k:
        raise SystemExit(
            f"{base_url} drafts {counts.draft_tokens / counts.drafts:.2f} tokens per step, not --k {k}; pass the "
            "num_speculative_tokens it was started with."
        )
    return {"k": k, **counts.summary(k), "prompts": len(prompts), "run": run}


def result_for(spec: dict[str, Any], baseline: dict[str, Any] | None) -> dict[str, Any]:
    run = spec.pop("run")
    result = {
        **spec,
        "tokens_per_s_speculative": run["tokens_per_s"],
        "tokens_per_s_baseline": baseline["tokens_per_s"] if baseline else None,
        "speedup": run["tokens_per_s"] / baseline["tokens_per_s"] if baseline else None,
        "outputs_identical": run["texts"] == baseline["texts"] if baseline else None,
        "completion_tokens_speculative": run["tokens"],
        "completion_tokens_baseline": baseline["tokens"] if baseline else None,
    }
    if baseline:
        result["differing_prompts"] = [
            i for i, (a, b) in enumerate(zip(baseline["texts"], run["texts"], strict=True)) if a != b
        ]
    if "per_prompt" in run:
        result["intervals"] = confidence_intervals(run, baseline, spec["k"])
    return result


def _stop_on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)  # unwinds through eval_servers.served, which stops every server


def server_specs(args: argparse.Namespace) -> list[ServerSpec]:
    """The servers to start, in the order they are measured: the target alone (unless --acceptance-only), then per
    k the drafter's, and with --ngram n-gram speculation's."""
    specs = [] if args.acceptance_only else [ServerSpec("baseline", None)]
    for k in args.k:
        drafter = {"method": "eagle3", "model": str(args.drafter.resolve()), "num_speculative_tokens": k}
        specs.append(ServerSpec(f"speculative-k{k}", drafter))
        if args.ngram:
            specs.append(ServerSpec(f"ngram-k{k}", ngram_config(k)))
    return specs


Bench = Callable[[str, str], None]  # (server name, its URL): vLLM's benchmark on that server while it is up


def measure(
    args: argparse.Namespace, prompts: list, bench: Bench
) -> tuple[dict[str, Any] | None, list[dict[str, Any]], list[dict[str, Any]]]:
    """The baseline run (unless --acceptance-only), one speculative run per k, and with --ngram one n-gram run per
    k, on running or started servers; `bench` runs after each baseline and drafter run, on the same server."""
    baseline: dict[str, Any] | None = None
    specs, ngrams = [], []
    if args.speculative_url:
        if args.baseline_url and not args.acceptance_only:
            baseline = run_prompts(args.baseline_url, prompts, args, phase="baseline")
            bench(BASELINE, args.baseline_url)
        specs.append(measure_speculative(args.speculative_url, prompts, args, args.k[0]))
        bench(f"speculative-k{args.k[0]}", args.speculative_url)
    else:
        with served(args, server_specs(args)) as turns:
            for spec, url in turns:
                if spec.speculative is None:
                    baseline = run_prompts(url, prompts, args, phase="baseline")
                    bench(BASELINE, url)
                elif spec.speculative["method"] == "ngram":
                    ngrams.append(measure_speculative(url, prompts, args, spec.speculative["num_speculative_tokens"],
                                                      method="ngram"))  # fmt: skip
                else:
                    specs.append(measure_speculative(url, prompts, args, spec.speculative["num_speculative_tokens"]))
                    bench(spec.name, url)
    return baseline, specs, ngrams


NO_BENCH_PROMPT = (
    "not run: no held-out prompt is a single user turn, and vLLM's custom dataset takes nothing else (bench_serve.py)"
)


def benched_measure(
    args: argparse.Namespace, prompts: list
) -> tuple[dict[str, Any] | None, list[dict[str, Any]], list[dict[str, Any]], dict[str, Any] | None]:
    """measure, with vLLM's benchmark on each server when --bench-concurrency asks for it: its summary last (None
    without it)."""
    if not args.bench_concurrency:
        return (*measure(args, prompts, lambda name, url: None), None)
    path = args.out.with_name(args.out.stem + "-bench-prompts.jsonl")
    dataset = write_dataset(prompts, path)
    servers: dict[str, dict[str, dict[str, Any]]] = {}

    def bench(name: str, url: str) -> None:
        if dataset["prompts"]:
            tokenizer = str(args.model) if args.model else None
            servers[name] = bench_server(name, url, path, args.bench_concurrency, args.bench_prompts, args.max_tokens,
                                         tokenizer, args.logs or args.out.parent)  # fmt: skip

    measured = measure(args, prompts, bench)
    if not dataset["prompts"]:
        return (*measured, {"error": NO_BENCH_PROMPT, **dataset})
    return (*measured, bench_summary(servers, dataset, args.bench_concurrency, args.bench_prompts, args.max_tokens))


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    prompts = load_prompts(args.prompts)
    try:
        baseline, specs, ngrams, bench = benched_measure(args, prompts)
    except (OSError, http.client.HTTPException) as error:
        raise SystemExit(
            f"The evaluation lost its server: {error}. Check that the server is up and serving (its log is beside "
            "--out unless --logs says otherwise), then rerun this command to measure again."
        ) from None
    results = [result_for(spec, baseline) for spec in specs]
    summary = {
        **results[0],
        "prompts": len(prompts),
        "max_tokens": args.max_tokens,
        "concurrency": args.concurrency,
        "drafter": str(args.drafter) if args.drafter else args.speculative_url,
    }
    if len(results) > 1:
        summary["by_k"] = {str(result["k"]): result for result in results}
    if ngrams:
        summary["ngram"] = {str(spec["k"]): result_for(spec, baseline) for spec in ngrams}
    if bench is not None:
        summary["bench"] = bench
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_name(args.out.name + ".partial")
    tmp.write_text(json.dumps(summary, indent=2) + "\n")
    tmp.replace(args.out)
    progress.emit(
        phase="done", out=str(args.out), **{key: summary[key] for key in ("k", "mean_acceptance_length", "speedup")}
    )


if __name__ == "__main__":
    main()
