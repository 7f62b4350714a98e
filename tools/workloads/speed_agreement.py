"""Whether the evaluation's speedup and vLLM's benchmark's agree, and which one decides when they do not.

Both measure the drafter's server against the target alone on the same held-out prompts, so beyond their intervals
they should not differ; when they do, something other than the drafter moved one of them, most often the load on the
machine. The evaluation decides: it pairs each prompt's two runs, and where the servers are up side by side it sends
each prompt to them moments apart (interleaved), so a change of load falls on both; `vllm bench serve` runs each
server's requests in one stretch, one server after the other, and a change of load between the stretches shows up as
a speedup. Plain Python: evaluate.py imports it by its plain name.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from eval_runs import IN_TURN, INTERLEAVED

WHY = {
    INTERLEAVED: "it sent each prompt to both servers moments apart and pairs the two runs, so a change of load on "
    "the machine falls on both, while vllm bench serve ran each server's requests in one stretch, one after the "
    "other, where a change of load between them counts as speedup",
    IN_TURN: "it pairs each prompt's runs on the two servers; here it too measured each server in one stretch "
    "(the servers started one after the other), so a change of load between them may have moved either figure: "
    "measure again on a quiet host",
}


class Speedup(NamedTuple):
    value: float
    interval: list[float] | None  # [low, high] at 95%, None where none was measured

    def bounds(self) -> tuple[float, float]:
        return (self.interval[0], self.interval[1]) if self.interval else (self.value, self.value)

    def text(self) -> str:
        shown = f"{self.value:.2f}x"
        return shown + (f" [{self.interval[0]:.2f}, {self.interval[1]:.2f}]" if self.interval else " (no interval)")


def disagree(evaluation: Speedup, bench: Speedup) -> bool:
    """Their intervals do not overlap (a figure without one stands as its point); two bare points never disagree,
    as nothing says how far either would move on other prompts."""
    if evaluation.interval is None and bench.interval is None:
        return False
    (low, high), (other_low, other_high) = evaluation.bounds(), bench.bounds()
    return high < other_low or other_high < low


def note(server: str, concurrency: str, evaluation: Speedup, bench: Speedup, order: str) -> str:
    """The one sentence every report shows for a disagreement."""
    return (
        f"{server} at concurrency {concurrency}: the evaluation measured a speedup of {evaluation.text()}, vllm bench "
        f"serve {bench.text()}, beyond each other's 95% intervals. The evaluation decides: {WHY[order]}."
    )


def disagreements(results: list[dict[str, Any]], bench: dict[str, Any], concurrency: int, order: str) -> list[dict]:
    """Each drafter's k whose evaluation speedup and bench speedup at the evaluation's concurrency disagree."""
    found = []
    at = str(concurrency)
    for result in results:
        server = f"speculative-k{result['k']}"
        bench_value = bench.get("speedup", {}).get(server, {}).get(at)
        if result.get("speedup") is None or bench_value is None:
            continue
        evaluation = Speedup(result["speedup"], (result.get("intervals") or {}).get("speedup"))
        benched = Speedup(bench_value, bench.get("speedup_interval", {}).get(server, {}).get(at))
        if disagree(evaluation, benched):
            found.append({
                "server": server, "concurrency": concurrency, "decides": "evaluation",
                "evaluation": evaluation._asdict(), "bench": benched._asdict(),
                "note": note(server, at, evaluation, benched, order),
            })  # fmt: skip
    return found
