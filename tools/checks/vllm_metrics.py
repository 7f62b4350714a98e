"""Parse vLLM's Prometheus /metrics, so load and speculative-decoding acceptance come from the server itself."""

from typing import Self

from prometheus_client.parser import text_string_to_metric_families
from pydantic import BaseModel, ConfigDict

_RUNNING = "vllm:num_requests_running"
_WAITING = "vllm:num_requests_waiting"
# vLLM renamed the KV-cache gauge; servers of either age are read.
_KV_CACHE_USAGE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
_DRAFTS = "vllm:spec_decode_num_drafts_total"
_DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
_ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
_ACCEPTED_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"


class Sample(BaseModel):
    """One line of the exposition: metric name, its labels and its value (timestamp dropped)."""

    model_config = ConfigDict(frozen=True)

    name: str
    labels: dict[str, str]
    value: float


class SpecDecodeCounters(BaseModel):
    """vLLM's cumulative speculative-decoding counters, summed over engines.

    They count since the server started; diff two scrapes with `minus` to measure one workload.
    """

    model_config = ConfigDict(frozen=True)

    num_drafts: float
    num_draft_tokens: float
    num_accepted_tokens: float
    accepted_per_pos: dict[int, float]

    def minus(self, earlier: Self) -> Self:
        """Counts between an earlier scrape and this one; ValueError if a counter went backwards."""
        positions = sorted(self.accepted_per_pos.keys() | earlier.accepted_per_pos.keys())
        diff = type(self)(
            num_drafts=self.num_drafts - earlier.num_drafts,
            num_draft_tokens=self.num_draft_tokens - earlier.num_draft_tokens,
            num_accepted_tokens=self.num_accepted_tokens - earlier.num_accepted_tokens,
            accepted_per_pos={
                position: self.accepted_per_pos.get(position, 0.0) - earlier.accepted_per_pos.get(position, 0.0)
                for position in positions
            },
        )
        totals = (diff.num_drafts, diff.num_draft_tokens, diff.num_accepted_tokens)
        if min((*totals, *diff.accepted_per_pos.values())) < 0:
            raise ValueError(
                "speculative-decoding counters went backwards between the two scrapes "
                "(was the server restarted?); the earlier scrape must come from the same server run"
            )
        return diff

    @property
    def mean_acceptance_length(self) -> float | None:
        """Tokens produced per target forward pass: the draft's accepted tokens plus the target's one."""
        return 1 + self.num_accepted_tokens / self.num_drafts if self.num_drafts else None

    @property
    def acceptance_rate(self) -> float | None:
        """Share of proposed draft tokens that the target accepted."""
        return self.num_accepted_tokens / self.num_draft_tokens if self.num_draft_tokens else None

    @property
    def per_position_rate(self) -> dict[int, float]:
        """For each draft position, the share of drafts whose token there was accepted."""
        if not self.num_drafts:
            return {}
        return {position: accepted / self.num_drafts for position, accepted in self.accepted_per_pos.items()}


class VllmMetrics(BaseModel):
    """What eyas reads from one scrape; None where the server does not export the metric."""

    model_config = ConfigDict(frozen=True)

    requests_running: float | None
    requests_waiting: float | None
    kv_cache_usage: float | None
    spec_decode: SpecDecodeCounters | None


def parse_prometheus(text: str) -> list[Sample]:
    """Parse Prometheus text exposition (with prometheus_client's parser, line by line so that an error can
    name its line); ValueError naming the line for anything that is not a sample."""
    samples = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            parsed = [sample for family in text_string_to_metric_families(line + "\n") for sample in family.samples]
        except ValueError as error:
            raise ValueError(f"line {number} is not a Prometheus sample ({error}): {line!r}") from None
        samples += [Sample(name=sample.name, labels=dict(sample.labels), value=sample.value) for sample in parsed]
    return samples


def summarize_vllm_metrics(text: str) -> VllmMetrics:
    """Read vLLM's load gauges and spec-decode counters from /metrics text, over all engines.

    Request counts and counters are summed over engines; KV-cache usage, a fraction per engine, is their
    mean. spec_decode is None when the server exports none of the spec-decode counters.
    """
    samples = parse_prometheus(text)

    def values(name: str) -> list[float]:
        return [sample.value for sample in samples if sample.name == name]

    def total(name: str) -> float | None:
        found = values(name)
        return sum(found) if found else None

    kv_cache = next((found for name in _KV_CACHE_USAGE if (found := values(name))), None)
    spec_decode = None
    if any(values(name) for name in (_DRAFTS, _DRAFT_TOKENS, _ACCEPTED)):
        per_pos: dict[int, float] = {}
        for sample in samples:
            if sample.name == _ACCEPTED_PER_POS:
                position = _position(sample)
                per_pos[position] = per_pos.get(position, 0.0) + sample.value
        spec_decode = SpecDecodeCounters(
            num_drafts=sum(values(_DRAFTS)),
            num_draft_tokens=sum(values(_DRAFT_TOKENS)),
            num_accepted_tokens=sum(values(_ACCEPTED)),
            accepted_per_pos=dict(sorted(per_pos.items())),
        )
    return VllmMetrics(
        requests_running=total(_RUNNING),
        requests_waiting=total(_WAITING),
        kv_cache_usage=sum(kv_cache) / len(kv_cache) if kv_cache else None,
        spec_decode=spec_decode,
    )


def _position(sample: Sample) -> int:
    try:
        return int(sample.labels["position"])
    except (KeyError, ValueError):
        raise ValueError(f"{sample.name} sample without an integer position label: {sample.labels}") from None
