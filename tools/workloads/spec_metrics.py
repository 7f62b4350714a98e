"""vLLM's speculative-decoding counters from /metrics text, for evaluate.py (prometheus_client, which vLLM
itself depends on, parses the text).

The counters are cumulative since the server started and exported once per engine: sum the engines, and
diff a scrape taken before a workload from one taken after it. Only the four counters are read; the
`..._created` timestamps that Prometheus clients export beside them are not counters and are skipped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

_TOTALS = {
    "vllm:spec_decode_num_drafts_total": "drafts",
    "vllm:spec_decode_num_draft_tokens_total": "draft_tokens",
    "vllm:spec_decode_num_accepted_tokens_total": "accepted",
}
_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"


@dataclass(frozen=True)
class Counters:
    drafts: float = 0.0
    draft_tokens: float = 0.0
    accepted: float = 0.0
    per_pos: dict[int, float] = field(default_factory=dict)

    def minus(self, earlier: Counters) -> Counters:
        """Counts between an earlier scrape of the same server run and this one."""
        positions = sorted(self.per_pos.keys() | earlier.per_pos.keys())
        diff = Counters(
            drafts=self.drafts - earlier.drafts,
            draft_tokens=self.draft_tokens - earlier.draft_tokens,
            accepted=self.accepted - earlier.accepted,
            per_pos={p: self.per_pos.get(p, 0.0) - earlier.per_pos.get(p, 0.0) for p in positions},
        )
        if min(diff.drafts, diff.draft_tokens, diff.accepted, *diff.per_pos.values()) < 0:
            raise ValueError("spec-decode counters went backwards between the scrapes: the server restarted")
        return diff

    def summary(self, k: int) -> dict[str, object]:
        """Mean acceptance length is 1 + accepted / drafts: tokens produced per target forward pass.

        per_position has k entries; a position vLLM exported no counter for accepted nothing.
        """
        drafts = self.drafts
        return {
            "mean_acceptance_length": 1 + self.accepted / drafts if drafts else None,
            "acceptance_rate": self.accepted / self.draft_tokens if self.draft_tokens else None,
            "per_position": [self.per_pos.get(p, 0.0) / drafts for p in range(k)] if drafts else [],
            "drafts": drafts,
            "draft_tokens": self.draft_tokens,
            "accepted_tokens": self.accepted,
        }


def scrape(text: str) -> Counters:
    """The spec-decode counters of one /metrics page, summed over engines (zeros when none are exported)."""
    totals = dict.fromkeys(_TOTALS.values(), 0.0)
    per_pos: dict[int, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in _TOTALS:
                totals[_TOTALS[sample.name]] += sample.value
            elif sample.name == _PER_POS:
                position = int(sample.labels["position"])
                per_pos[position] = per_pos.get(position, 0.0) + sample.value
    return Counters(**totals, per_pos=dict(sorted(per_pos.items())))
