#!/usr/bin/env python3
"""Measure what an EAGLE-3 drafter buys: acceptance from vLLM's own counters, and tokens/s with and without it.

Two ways to run it, both at temperature 0 over held-out prompts (JSONL rows with "messages" or "prompt"):

1. It starts the servers itself (the embedded default; any host with room for two more servers) with this
   interpreter's vLLM: the target alone, and the target with the drafter for each --k. Without CUDA they start side
   by side where the memory allows (eval_servers.py) and are measured interleaved: each prompt goes to every server
   in turn, the order rotated per prompt (eval_runs.py), so a change of load on the machine falls on all of them. On
   a GPU host each takes production's GPUs, so they start and are measured in turn on --port:

       python evaluate.py --model TARGET_DIR --drafter DRAFTER_DIR --prompts held_out.jsonl --k 3 \\
           --out result.json [--vllm-args "--enforce-eager --max-model-len 2048"]

2. Against servers already running (a GPU host whose target runs as a service): the baseline server, and
   one started with --speculative-config '{"method": "eagle3", "model": DRAFTER_DIR,
   "num_speculative_tokens": K}' and the same other flags; --k must be that K. Both are up, so they are measured
   interleaved:

       python evaluate.py --baseline-url http://127.0.0.1:8000 --speculative-url http://127.0.0.1:8001 \\
           --k 3 --prompts held_out.jsonl --out result.json

With --ngram, each k is also measured with vLLM's n-gram speculation (prompt lookup: drafts copied from the
context, no drafter) on the same prompts and flags: the free baseline a trained drafter has to beat. Its figures go
under "ngram", by k (acceptance per draft step, and speedup, the fair comparison: n-gram drafts only where the
context repeats itself).

With --bench-concurrency (e.g. 1 256), vLLM's own benchmark, `vllm bench serve` (bench_serve.py), also runs on
every server (the baseline's, each drafter's and each n-gram's), on the same held-out prompts, at each of those
concurrencies: TTFT, TPOT, ITL and output tokens/s per server and concurrency, and the speedup at each concurrency
(with its interval at concurrency 1), under "bench". Where the bench's speedup and the evaluation's disagree beyond
their intervals, "disagreement" says so, and that the evaluation decides (speed_agreement.py).

Acceptance comes from the `vllm:spec_decode_*` counters (summed over engines, diff of scrapes before and
after the prompts): mean acceptance length = 1 + accepted / drafts, acceptance rate = accepted / drafted,
and per position the share of drafts whose token there was accepted. Speculative decoding must not change
greedy output, so the texts with and without the drafter are compared too (outputs_identical). The JSON
result holds k, mean_acceptance_length, acceptance_rate, per_position, tokens_per_s_baseline,
tokens_per_s_speculative, speedup and outputs_identical (and by_k when several k are measured), and how the speed was
measured: "measured" is "interleaved" or "in turn".
"""

from __future__ import annotations

import argparse
import http.client
import json
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import progress
from bench_serve import BASELINE, bench_server, bench_summary, write_dataset
from eval_runs import IN_TURN, INTERLEAVED, ServerRun, measure_in_turn, measure_interleaved
from eval_servers import ServerSpec, served
from held_out_prompts import load_prompts
from intervals import LEVEL, RESAMPLES, bootstrap, paired_ratio, ratio_of_sums
from speculative import drafter_config, ngram_config
from speed_agreement import disagreements


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
        help="also run vLLM's benchmark on every server (baseline, drafter, n-gram) at these concurrencies (default: "
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
        found["speedup"] = bootstrap(len(rows), paired_ratio(spec_rate, base_rate))
    return found


def speculative_result(base_url: str, run: dict[str, Any], k: int, method: str = "eagle3") -> dict[str, Any]:
    """A speculative server's figures from its run; a drafter's server that did not draft k tokens a step is named."""
    counts = run.pop("counters")
    if method == "ngram":  # n-gram drafts only where the context repeats: few or no drafts is a result, not a fault
        return {"k": k, **counts.summary(k), "prompts": len(run["texts"]), "run": run}
    if counts.drafts == 0:
        raise SystemExit(
            f"{base_url} made no drafts: it is not serving with a speculative config (vllm:spec_decode_*)."
        )
    if round(counts.draft_tokens / counts.drafts) != k:
        raise SystemExit(
            f"{base_url} drafts {counts.draft_tokens / counts.drafts:.2f} tokens per step, not --k {k}; pass the "
            "num_speculative_tokens it was started with."
        )
    return {"k": k, **counts.summary(k), "prompts": len(run["texts"]), "run": run}


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
        specs.append(ServerSpec(f"speculative-k{k}", drafter_config(str(args.drafter.resolve()), k)))
        if args.ngram:
            specs.append(ServerSpec(f"ngram-k{k}", ngram_config(k)))
    return specs


Bench = Callable[[str, str], None]  # (server name, its URL): vLLM's benchmark on that server while it is up
Served = list[tuple[ServerSpec, str, dict[str, Any]]]  # each server, its URL and its run


class Measured(NamedTuple):
    baseline: dict[str, Any] | None
    specs: list[dict[str, Any]]  # the drafter's, per k
    ngrams: list[dict[str, Any]]  # n-gram speculation's, per k
    order: str  # INTERLEAVED or IN_TURN


def running_servers(args: argparse.Namespace) -> list[tuple[ServerSpec, str]]:
    """--baseline-url (unless --acceptance-only) and --speculative-url, as the servers they are."""
    k = args.k[0]
    drafter = ServerSpec(f"speculative-k{k}", {"method": "eagle3", "num_speculative_tokens": k})
    baseline = (
        [(ServerSpec(BASELINE, None), args.baseline_url)] if args.baseline_url and not args.acceptance_only else []
    )
    return [*baseline, (drafter, args.speculative_url)]


def measure_up(
    servers: list[tuple[ServerSpec, str]], args: argparse.Namespace, prompts: list, bench: Bench
) -> Measured:
    """Servers up at once, measured interleaved (one alone has nothing to interleave with), then each benched."""
    runs = [ServerRun(spec.name, url, args.max_tokens) for spec, url in servers]
    if len(runs) > 1:
        measure_interleaved(runs, prompts, args.concurrency)
        results = [run.result() for run in runs]
    else:
        results = [measure_in_turn(runs[0], prompts, args.concurrency)]
    for spec, url in servers:
        bench(spec.name, url)
    served_runs = [(spec, url, result) for (spec, url), result in zip(servers, results, strict=True)]
    return sorted_runs(served_runs, INTERLEAVED if len(runs) > 1 else IN_TURN)


def measure(args: argparse.Namespace, prompts: list, bench: Bench) -> Measured:
    """The baseline run (unless --acceptance-only), one speculative run per k, and with --ngram one n-gram run per
    k, on running or started servers: interleaved where they are up side by side, else in turn; `bench` runs on every
    server after its measurement, while it is up (the deploy weighs n-gram against the drafter at both
    concurrencies)."""
    if args.speculative_url:
        return measure_up(running_servers(args), args, prompts, bench)
    with served(args, server_specs(args)) as servers:
        if servers.side_by_side:
            return measure_up(servers.up(), args, prompts, bench)
        served_runs: Served = []
        for spec, url in servers.turns():
            run = measure_in_turn(ServerRun(spec.name, url, args.max_tokens), prompts, args.concurrency)
            served_runs.append((spec, url, run))
            bench(spec.name, url)
        return sorted_runs(served_runs, IN_TURN)


def sorted_runs(served_runs: Served, order: str) -> Measured:
    measured = Measured(None, [], [], order)
    for spec, url, run in served_runs:
        if spec.speculative is None:
            measured = measured._replace(baseline=run)
            continue
        method, k = spec.speculative["method"], spec.speculative["num_speculative_tokens"]
        (measured.ngrams if method == "ngram" else measured.specs).append(speculative_result(url, run, k, method))
    return measured


NO_BENCH_PROMPT = (
    "not run: no held-out prompt is a single user turn, and vLLM's custom dataset takes nothing else (bench_serve.py)"
)


def benched_measure(args: argparse.Namespace, prompts: list) -> tuple[Measured, dict[str, Any] | None]:
    """measure, with vLLM's benchmark on each server when --bench-concurrency asks for it: its summary (None without
    it)."""
    if not args.bench_concurrency:
        return measure(args, prompts, lambda name, url: None), None
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
        return measured, {"error": NO_BENCH_PROMPT, **dataset}
    return measured, bench_summary(servers, dataset, args.bench_concurrency, args.bench_prompts, args.max_tokens)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    prompts = load_prompts(args.prompts)
    try:
        measured, bench = benched_measure(args, prompts)
    except (OSError, http.client.HTTPException) as error:
        raise SystemExit(
            f"The evaluation lost its server: {error}. Check that the server is up and serving (its log is beside "
            "--out unless --logs says otherwise), then rerun this command to measure again."
        ) from None
    results = [result_for(spec, measured.baseline) for spec in measured.specs]
    summary = {
        **results[0],
        "prompts": len(prompts),
        "max_tokens": args.max_tokens,
        "concurrency": args.concurrency,
        "measured": measured.order,
        "drafter": str(args.drafter) if args.drafter else args.speculative_url,
    }
    if len(results) > 1:
        summary["by_k"] = {str(result["k"]): result for result in results}
    if measured.ngrams:
        summary["ngram"] = {str(spec["k"]): result_for(spec, measured.baseline) for spec in measured.ngrams}
    if bench is not None:
        summary["bench"] = bench
        summary["disagreement"] = disagreements(results, bench, args.concurrency, measured.order)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_name(args.out.name + ".partial")
    tmp.write_text(json.dumps(summary, indent=2) + "\n")
    tmp.replace(args.out)
    progress.emit(
        phase="done", out=str(args.out), **{key: summary[key] for key in ("k", "mean_acceptance_length", "speedup")}
    )


if __name__ == "__main__":
    main()
