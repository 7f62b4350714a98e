"""What `vllm bench serve` measured in the evaluation (tools/workloads/bench_serve.py writes it under "bench"), typed,
and the latency table both reports show from it: per server and concurrency, TTFT, TPOT and output tokens/s, and the
drafter's speedup over the baseline at each concurrency."""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field

from eyas.graph.state import Record

BASELINE = "baseline"  # bench_serve.py's name for the target served alone
LATENCY_HEADERS = (
    "server", "concurrency", "requests", "TTFT median (ms)", "TTFT p99 (ms)", "TPOT median (ms)", "TPOT p99 (ms)",
    "output tokens/s", "speedup",
)  # fmt: skip


class BenchRun(Record):
    """One server at one concurrency, in vLLM's own names (extra keys kept); `error` where the run failed."""

    model_config = ConfigDict(frozen=True, extra="allow")

    completed: int | None = None
    failed: int | None = None
    output_throughput: float | None = None
    median_ttft_ms: float | None = None
    p99_ttft_ms: float | None = None
    median_tpot_ms: float | None = None
    p99_tpot_ms: float | None = None
    error: str | None = None


class Bench(Record):
    """vLLM's benchmark on the evaluation's servers; `error` where it could not run at all (the reason, in words)."""

    model_config = ConfigDict(frozen=True, extra="allow")

    tool: str | None = None
    dataset: dict[str, Any] = Field(default_factory=dict)
    concurrency: list[int] = Field(default_factory=list)
    max_tokens: int | None = None
    servers: dict[str, dict[str, BenchRun]] = Field(default_factory=dict)
    speedup: dict[str, dict[str, float]] = Field(default_factory=dict)
    not_run: dict[str, str] = Field(default_factory=dict)  # vLLM's standard sets, by where each comes from
    not_run_reason: str | None = None
    error: str | None = None

    def caption(self) -> str:
        """What ran, on what, and what did not, in one paragraph."""
        if self.error:
            return f"vllm bench serve: {self.error}"
        dataset = self.dataset
        left_out = dataset.get("left_out_multi_turn") or 0
        text = (
            f"{self.tool or 'vllm bench serve'} on {dataset.get('prompts', '?')} {dataset.get('name', 'prompts')}"
            f"{f' ({left_out} of several turns left out)' if left_out else ''}, at most {self.max_tokens} tokens "
            "each, temperature 0; speedup is output tokens/s over the baseline's at the same concurrency."
        )
        if self.not_run:
            sets = ", ".join(f"{name} ({source})" for name, source in self.not_run.items())
            text += f" Not run: {sets}: {self.not_run_reason or 'not available here'}."
        return text

    def rows(self) -> list[tuple[str, ...]]:
        """The latency table's rows (LATENCY_HEADERS), as text: a failed run says its error in its first figure."""
        rows: list[tuple[str, ...]] = []
        for server, runs in self.servers.items():
            for concurrency, run in runs.items():
                if run.error:
                    rows.append((server, concurrency, "—", f"failed: {run.error}", *("—",) * 5))
                    continue
                speedup = self.speedup.get(server, {}).get(concurrency)
                rows.append((
                    server, concurrency, _requests(run),
                    _figure(run.median_ttft_ms, 0), _figure(run.p99_ttft_ms, 0),
                    _figure(run.median_tpot_ms, 1), _figure(run.p99_tpot_ms, 1),
                    _figure(run.output_throughput, 1), "—" if server == BASELINE else _figure(speedup, 2),
                ))  # fmt: skip
        return rows


def _requests(run: BenchRun) -> str:
    done = _figure(run.completed, 0)
    return f"{done} ({run.failed} failed)" if run.failed else done


def _figure(value: float | None, digits: int) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"
