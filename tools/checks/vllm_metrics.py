"""Parse vLLM's Prometheus /metrics, so load and speculative-decoding acceptance come from the server itself."""

import re
from typing import Self

from pydantic import BaseModel, ConfigDict

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(,?)')
_LABELS_END = re.compile(r"\s*\}")
_ESCAPED = re.compile(r"\\(.)")

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
    """Parse Prometheus text exposition; ValueError naming the line for anything that is not a sample."""
    samples = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            samples.append(_parse_sample(line))
        except ValueError as error:
            raise ValueError(f"line {number} is not a Prometheus sample ({error}): {line!r}") from None
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


def _parse_sample(line: str) -> Sample:
    name = _NAME.match(line)
    if name is None:
        raise ValueError("no metric name")
    labels: dict[str, str] = {}
    position = name.end()
    if line.startswith("{", position):
        labels, position = _parse_labels(line, position + 1)
    fields = line[position:].split()
    if not line[position : position + 1].isspace() or len(fields) not in (1, 2):
        raise ValueError("expected 'name{labels} value [timestamp]'")
    if len(fields) == 2:
        float(fields[1])  # the timestamp is not kept, but must be a number
    return Sample(name=name.group(), labels=labels, value=float(fields[0]))


def _parse_labels(line: str, position: int) -> tuple[dict[str, str], int]:
    """Parse `name="value", ...}` from position; return the labels and the position after the brace."""
    labels = {}
    while (end := _LABELS_END.match(line, position)) is None:
        pair = _LABEL.match(line, position)
        if pair is None:
            raise ValueError(f"malformed label at column {position + 1}")
        labels[pair[1]] = _ESCAPED.sub(lambda escape: "\n" if escape[1] == "n" else escape[1], pair[2])
        position = pair.end()
        if not pair[3] and _LABELS_END.match(line, position) is None:
            raise ValueError(f"expected ',' or '}}' at column {position + 1}")
    return labels, end.end()


def _position(sample: Sample) -> int:
    try:
        return int(sample.labels["position"])
    except (KeyError, ValueError):
        raise ValueError(f"{sample.name} sample without an integer position label: {sample.labels}") from None
