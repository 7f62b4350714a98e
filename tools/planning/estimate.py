"""The planner: how long the data, extraction and training phases take, and whether their files fit the disk.

Pure functions over pydantic inputs, so a plan can be made for a host that cannot be reached (every
figure given by hand) as well as from measurements (tools/planning/measure.py). The arithmetic:

- tokens per sample: the generated file's average when there is one (usage.sequence_tokens: prompt + answers),
  else the average prompt (chat template included) plus the mean of a sample of the served model's own answers
  (answer_sample.py; the bytes at a high percentile of that mean), else plus max_tokens (the worst case, which a
  sampled plan shows beside its figures).
- generation: samples x (generated tokens per sample / decoding throughput + requests per sample x overhead per
  request), both measured by the probe at the run's own concurrency (a GPU server's rate grows with it).
- hidden states (what vLLM's extract_hidden_states connector writes and speculators trains from): per token
  hidden_size x captured layers x bytes per value, plus the int64 token id; plus a ~160 B header per file.
  Captured layers default to [2, L//2, L-3] and the last layer L.
- extraction: one forward pass over each sample's tokens (vLLM's max_tokens=1), at prefill speed: measured by the
  host's speed probe (no GPU) or the throughput probe's wave of long prompts, else assumed compute-bound
  (`assumed_prefill_tok_s`). With production down, decoding is assumed bound by memory bandwidth, every step of the
  run's concurrency reading the weights once (`assumed_decode_tok_s`), never faster than prefill.
- training: epochs x tokens / the training tokens/s a probe measured on the host (tools/planning/host_probe.py);
  without a probe (a GPU host), epochs x tokens x 6 x drafter parameters x test-time-training steps / an
  assumed sustained FLOP/s. The drafter is EAGLE-3's: a 3h->h fusion layer, one decoder layer, and an lm_head
  over the draft vocabulary.
- disk: hidden states + the generated JSONL + one bf16 drafter checkpoint per epoch must leave `reserve` free: 2% of
  the volume's free bytes, at least 10 GB and at most 200 GB (tools/planning/reserve.py).
- online (tools/planning/hidden_states_mode.py chooses it): a sample fetched online keeps only its token file
  (int64 ids and a bool mask per token), and training holds at most a window of fetched samples at once
  (hidden_states_file.online_bound_bytes, at max_seq_len tokens each, in the dtype the extraction server writes);
  hybrid keeps the first K samples' hidden states, K the most that fit beside everything else, and fetches the rest.
  Each epoch pays the target's prefill again for the fetched share: extraction hours x share x epochs.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from eyas.tools.planning.answer_lengths import AnswerLengths, expected_sequence_tokens
from eyas.tools.planning.cluster_plan import ClusterShape, ShardPlan, nodes_for_hidden_states, shard_plans
from eyas.tools.planning.model_dims import ModelDims
from eyas.tools.planning.reserve import disk_reserve_bytes
from eyas.tools.planning.token_stats import TokenStats
from eyas.tools.settings.sizes import DEFAULT_SIZES
from eyas.tools.settings.units import format_hours, format_size
from eyas.tools.workloads.hidden_states_file import LOSS_MASK_BYTES, ONLINE_WINDOW, online_bound_bytes

FILE_HEADER_BYTES = 160
# Sustained FLOP/s, for training and (when nothing measured the server's prefill) for prefill: both are dense matmuls
# over whole sequences, at about the same share of the peak.
GPU_TRAINING_FLOPS = 1e14  # a data-center GPU at 30-40% of its bf16 peak
# Decoding when nothing measured it: each step reads the weights once (a MoE's too: a batch of 64 touches 3 in 4 of
# Kimi-K2's 384 experts at 8 a token, and counting them all errs long), so it is bound by memory bandwidth. A
# data-center GPU's HBM gives 2 to 4.8 TB/s (A100 80 GB to H200), and vLLM's decode reaches 40-60% of it before the
# tensor-parallel all-reduces: 1 TB/s per GPU errs long.
GPU_DECODE_BYTES_PER_S = 1e12
CPU_CORE_TRAINING_FLOPS = 1e10  # one AVX2 core running torch training
TOKEN_ID_BYTES = 8
HIDDEN_VALUE_BYTES = 2  # one bf16/fp16 hidden-state value, as extraction writes them
JSONL_BYTES_PER_TOKEN = 4.5  # generated JSONL text per token, when no generated file measures it


class Volume(BaseModel):
    mount: str
    free_bytes: int


class PlanInputs(BaseModel):
    model: ModelDims
    samples: int = Field(gt=0)
    max_tokens: int = Field(gt=0, description="longest answer in tokens (generate.py --max-tokens)")
    prompt_tokens: float = Field(0.0, ge=0, description="average prompt, chat template included")
    measured: TokenStats | None = None
    answers: AnswerLengths | None = Field(
        None,
        description="a sample of the served model's answers at max_tokens (replaced by `measured` once data exists)",
    )
    captured_layers: list[int] | None = Field(None, description="default [2, L//2, L-3, L]")
    bytes_per_value: int = Field(HIDDEN_VALUE_BYTES, gt=0, description="2 for bf16/fp16 hidden states")
    generation_tok_s: float = Field(gt=0, description="measured decoding throughput, completion tokens/s")
    generation_overhead_s: float = Field(0.0, ge=0, description="per request beyond decoding, amortized")
    extraction_tok_s: float | None = Field(
        None, gt=0, description="prefill tokens/s, measured; default assumed from training_flops_per_s"
    )
    training_flops_per_s: float = Field(
        GPU_TRAINING_FLOPS, gt=0, description="sustained, all devices together (training, and prefill when assumed)"
    )
    training_tok_s: float | None = Field(
        None, gt=0, description="measured drafter training tokens/s (a probe); replaces the FLOP/s arithmetic"
    )
    epochs: int = Field(DEFAULT_SIZES.epochs, gt=0)
    ttt_steps: int = Field(DEFAULT_SIZES.ttt_steps, gt=0, description="EAGLE-3 test-time-training steps per position")
    draft_vocab_size: int = Field(DEFAULT_SIZES.draft_vocab_size, gt=0)
    data_bytes_per_token: float = Field(
        JSONL_BYTES_PER_TOKEN, gt=0, description="JSONL text per token when nothing is measured"
    )
    free_disk_bytes: int = Field(ge=0)
    data_path: str = "the data directory"
    reserve_bytes: int = Field(
        ge=0, description="left free after everything; default scaled to the volume (reserve.disk_reserve_bytes)"
    )
    other_volumes: list[Volume] = Field(default_factory=list)
    cluster: ClusterShape = Field(default_factory=ClusterShape, description="the jobs each phase runs at once")
    max_seq_len: int | None = Field(
        None, gt=0, description="longest sample extraction keeps (the online bound's); default prompt + max_tokens"
    )
    online_dtype: Literal["bfloat16", "float16", "float32"] = Field(
        "bfloat16", description="what an online extraction server writes: float32 on a CPU host (the safe side)"
    )
    online_window: int = Field(ONLINE_WINDOW, gt=0, description="fetched samples on disk at once (train.py --window)")
    train_gpus: int | None = Field(
        None, ge=0, description="the train host's GPUs: 0: eyas's CPU loop trains, more: speculators' (None: not known)"
    )

    @model_validator(mode="before")
    @classmethod
    def _reserve_for_the_volume(cls, data: Any) -> Any:
        # The reserve grows with the volume unless a figure is given: 10 GB is too little headroom on 2.9 TB.
        if (
            isinstance(data, dict)
            and data.get("reserve_bytes") is None
            and isinstance(data.get("free_disk_bytes"), int)
        ):
            return {**data, "reserve_bytes": disk_reserve_bytes(data["free_disk_bytes"])}
        return data

    @property
    def layers(self) -> list[int]:
        return self.captured_layers or self.model.default_layers()

    @property
    def sequence_tokens(self) -> float:
        """Tokens per sample: the generated file's average, else the average prompt plus the sampled answers' mean,
        else plus the longest answer."""
        return expected_sequence_tokens(self.measured, self.prompt_tokens, self.max_tokens, self.answers)

    @property
    def disk_sequence_tokens(self) -> float:
        """Tokens per sample as the disk is planned: the sampled answers' high figure (answer_sample.py), else as
        sequence_tokens (measured, or the worst case)."""
        if self.answers and not self.measured:
            return self.answers.disk_sequence_tokens or self.prompt_tokens + self.answers.high_tokens
        return self.sequence_tokens

    @property
    def extraction_rate(self) -> float:
        """Extraction's tokens/s: measured, else the prefill assumed from the host's FLOP/s, and never slower than
        decoding (a prefill step does a decode step's reads for many tokens at once)."""
        if self.extraction_tok_s:
            return self.extraction_tok_s
        assumed = assumed_prefill_tok_s(self.model, self.training_flops_per_s, self.sequence_tokens)
        return max(self.generation_tok_s, assumed)


def assumed_prefill_tok_s(model: ModelDims, flops_per_s: float, sequence_tokens: float) -> float:
    """Prefill tokens/s when nothing measured it: compute-bound, the sustained FLOP/s over a token's forward FLOPs."""
    return flops_per_s / model.forward_flops(sequence_tokens)


def assumed_decode_tok_s(weight_bytes: int, gpus: int, concurrency: int, prefill_tok_s: float) -> float:
    """Decoding tokens/s when nothing measured it (production down): every step of `concurrency` requests reads
    the weights once from the GPUs' memory (GPU_DECODE_BYTES_PER_S each), and a step is never faster than its
    tokens' prefill (a large batch is compute-bound)."""
    return min(concurrency * gpus * GPU_DECODE_BYTES_PER_S / weight_bytes, prefill_tok_s)


class Alternative(BaseModel):
    kind: Literal["fewer_samples", "shorter_samples", "online_extraction", "other_path", "spread_extraction"]
    summary: str
    nodes: int | None = None
    samples: int | None = None
    max_tokens: int | None = None
    path: str | None = None
    needed_bytes: int | None = None
    hours: float | None = None


class WorstCase(BaseModel):
    """The plan with every answer at max_tokens: the bound, shown beside the expected figures."""

    generation_hours: float
    extraction_hours: float
    training_hours: float
    needed_bytes: int
    fits: bool


class Plan(BaseModel):
    fits: bool
    samples: int
    tokens_per_sample: float
    tokens_from: Literal["measured", "sampled", "max_tokens"]
    total_tokens: float
    disk_tokens_per_sample: float | None = Field(None, description="what the bytes are planned at; None: as above")
    worst_case: WorstCase | None = Field(None, description="every answer at max_tokens, beside a sampled plan")
    captured_layers: list[int]
    generation_hours: float
    extraction_hours: float
    training_hours: float
    total_hours: float
    hidden_state_bytes: int
    data_bytes: int
    checkpoint_bytes: int
    needed_bytes: int
    free_disk_bytes: int
    disk_left_bytes: int
    reserve_bytes: int
    data_path: str
    alternatives: list[Alternative]
    shards: list[ShardPlan] = Field(default_factory=list, description="phases of more than one job (a cluster)")

    @property
    def bytes_tokens(self) -> float:
        """Tokens per sample as the bytes are planned."""
        return self.disk_tokens_per_sample or self.tokens_per_sample


def drafter_parameters(inputs: PlanInputs) -> tuple[int, int]:
    """(trained, saved) parameters of an EAGLE-3 drafter; saved adds the frozen copy of the embeddings."""
    h, model = inputs.model.hidden_size, inputs.model
    mlp = 3 * h * (model.intermediate_size or 4 * h)
    trained = 3 * h * h + 7 * h * h + mlp + h * min(inputs.draft_vocab_size, model.vocab_size)
    return trained, trained + model.vocab_size * h


def hidden_bytes_per_token(inputs: PlanInputs) -> int:
    return inputs.model.hidden_size * len(inputs.layers) * inputs.bytes_per_value + TOKEN_ID_BYTES


def online_bound(inputs: PlanInputs) -> int:
    """The most bytes of hidden states online training holds at once: its window of samples at the longest length,
    as the extraction server writes them (hidden_states_file.online_bound_bytes, the same sum train.py checks)."""
    longest = inputs.max_seq_len or math.ceil(inputs.prompt_tokens + inputs.max_tokens)
    return online_bound_bytes(
        inputs.online_window, longest, inputs.model.hidden_size, len(inputs.layers), inputs.online_dtype
    )


def split_bytes(inputs: PlanInputs, plan: Plan, kept: int) -> int:
    """What extraction writes when the first `kept` samples keep their hidden states and the rest only their token
    files (hybrid; 0 kept: online)."""
    hidden = plan.bytes_tokens * hidden_bytes_per_token(inputs) + FILE_HEADER_BYTES
    tokens = plan.bytes_tokens * (TOKEN_ID_BYTES + LOSS_MASK_BYTES) + FILE_HEADER_BYTES
    return math.ceil(kept * hidden + (plan.samples - kept) * tokens)


def split_needed_bytes(inputs: PlanInputs, plan: Plan, kept: int) -> int:
    """The run's disk with `kept` samples offline: extraction's files, the data, the checkpoints, and (while any
    sample is fetched) the online bound."""
    bound = online_bound(inputs) if kept < plan.samples else 0
    return split_bytes(inputs, plan, kept) + plan.data_bytes + plan.checkpoint_bytes + bound


def kept_samples(inputs: PlanInputs, plan: Plan) -> int | None:
    """The most samples whose hidden states fit on disk beside everything else the run writes, the reserve and the
    online bound (hybrid's K, the first K of the generated file); None when even online does not fit."""
    room = inputs.free_disk_bytes - inputs.reserve_bytes
    if split_needed_bytes(inputs, plan, 0) > room:
        return None
    hidden = plan.bytes_tokens * hidden_bytes_per_token(inputs) + FILE_HEADER_BYTES
    tokens = plan.bytes_tokens * (TOKEN_ID_BYTES + LOSS_MASK_BYTES) + FILE_HEADER_BYTES
    kept = min(plan.samples, math.floor((room - split_needed_bytes(inputs, plan, 0)) / (hidden - tokens)))
    while kept > 0 and split_needed_bytes(inputs, plan, kept) > room:  # the rounding of the sums above
        kept -= 1
    return kept


def fetch_hours(inputs: PlanInputs, plan: Plan, kept: int) -> float:
    """The target's prefill for the samples fetched online, once per epoch, by one extraction server."""
    share = (plan.samples - kept) / plan.samples
    return plan.extraction_hours * inputs.cluster.extract_shards * share * inputs.epochs


def estimate(inputs: PlanInputs) -> Plan:
    """The plan's hours (at the expected tokens per sample) and bytes (at the tokens the disk is planned at), with
    the worst case beside a plan made on a sample of answers."""
    measured, sampled = inputs.measured, inputs.answers if not inputs.measured else None
    tokens, disk_tokens = inputs.sequence_tokens, inputs.disk_sequence_tokens
    if measured:
        generated = measured.avg_completion_tokens
    else:  # every question a sample asks is answered (a sample of answers measures their length)
        generated = sampled.mean_tokens * sampled.requests_per_sample if sampled else float(inputs.max_tokens)
    line_bytes = measured.avg_line_bytes if measured else disk_tokens * inputs.data_bytes_per_token
    total = inputs.samples * tokens
    trained, saved = drafter_parameters(inputs)
    requests = measured.avg_requests if measured else sampled.requests_per_sample if sampled else 1.0
    per_sample_s = generated / inputs.generation_tok_s + requests * inputs.generation_overhead_s
    shape = inputs.cluster
    generation_h = inputs.samples * per_sample_s / 3600 / shape.endpoints
    extraction_h = total / inputs.extraction_rate / 3600 / shape.extract_shards
    if inputs.training_tok_s:
        training_h = inputs.epochs * total / inputs.training_tok_s / 3600
    else:
        training_h = inputs.epochs * total * 6 * trained * inputs.ttt_steps / inputs.training_flops_per_s / 3600
    training_h /= shape.train_nodes
    hidden = math.ceil(
        inputs.samples * disk_tokens * hidden_bytes_per_token(inputs) + inputs.samples * FILE_HEADER_BYTES
    )
    data = math.ceil(inputs.samples * line_bytes)
    checkpoints = saved * 2 * inputs.epochs
    needed = hidden + data + checkpoints
    hours = {"generation": generation_h, "extraction": extraction_h, "training": training_h}
    plan = Plan(
        fits=inputs.free_disk_bytes - needed >= inputs.reserve_bytes,
        samples=inputs.samples,
        tokens_per_sample=tokens,
        tokens_from="measured" if measured else "sampled" if sampled else "max_tokens",
        total_tokens=total,
        disk_tokens_per_sample=disk_tokens if sampled else None,
        worst_case=worst_case(inputs) if sampled and sampled.mean_tokens < inputs.max_tokens else None,
        captured_layers=inputs.layers,
        generation_hours=generation_h,
        extraction_hours=extraction_h,
        training_hours=training_h,
        total_hours=generation_h + extraction_h + training_h,
        hidden_state_bytes=hidden,
        data_bytes=data,
        checkpoint_bytes=checkpoints,
        needed_bytes=needed,
        free_disk_bytes=inputs.free_disk_bytes,
        disk_left_bytes=inputs.free_disk_bytes - needed,
        reserve_bytes=inputs.reserve_bytes,
        data_path=inputs.data_path,
        alternatives=[],
        shards=shard_plans(shape, hours, {"generation": data, "extraction": hidden}),
    )
    return plan if plan.fits else plan.model_copy(update={"alternatives": alternatives(inputs, plan)})


def worst_case(inputs: PlanInputs) -> WorstCase:
    """The plan with every answer at max_tokens, every question a sample asks at that length."""
    worst = estimate(inputs.model_copy(update={"answers": inputs.answers.worst() if inputs.answers else None}))
    return WorstCase(
        generation_hours=worst.generation_hours, extraction_hours=worst.extraction_hours,
        training_hours=worst.training_hours, needed_bytes=worst.needed_bytes, fits=worst.fits,
    )  # fmt: skip


def alternatives(inputs: PlanInputs, plan: Plan) -> list[Alternative]:
    """Concrete ways out of a plan that does not fit, each with the numbers that make it fit."""
    budget = inputs.free_disk_bytes - inputs.reserve_bytes - plan.checkpoint_bytes
    per_token = hidden_bytes_per_token(inputs) + plan.data_bytes / (plan.samples * plan.bytes_tokens)
    samples = math.floor(budget / (plan.bytes_tokens * per_token + FILE_HEADER_BYTES)) if budget > 0 else 0
    measured = inputs.measured
    prompt = measured.avg_sequence_tokens - measured.avg_completion_tokens if measured else inputs.prompt_tokens
    answers = plan.bytes_tokens - prompt
    max_tokens = math.floor((budget / inputs.samples - FILE_HEADER_BYTES) / per_token - prompt) if budget > 0 else 0
    online = split_needed_bytes(inputs, plan, 0)
    online_hours = fetch_hours(inputs, plan, 0)
    roomy = [v for v in inputs.other_volumes if v.free_bytes - plan.needed_bytes >= inputs.reserve_bytes]
    found: list[Alternative] = []
    if samples >= 1:
        summary = f"generate {samples:,} samples instead of {inputs.samples:,} (same length)"
        found.append(Alternative(kind="fewer_samples", samples=samples, summary=summary))
    if max_tokens >= 1:
        summary = f"cap answers at {max_tokens:,} tokens instead of {answers:,.0f} (all samples)"
        found.append(Alternative(kind="shorter_samples", max_tokens=max_tokens, summary=summary))
    kept = kept_samples(inputs, plan)
    if kept is not None:
        hybrid = f", or hybrid to keep the first {kept:,} samples' on disk and fetch the rest" if kept else ""
        summary = (
            f"train on hidden states fetched online (--extraction-mode online{hybrid}; auto chooses it where the "
            f"host's vLLM has extract_hidden_states): an extraction server eyas starts beside the trainer serves "
            f"each epoch's, at most {format_size(online_bound(inputs))} of them on disk at once "
            f"({inputs.online_window} samples), {format_size(online)} in all with the data and checkpoints, and the "
            f"target's prefill repeats every epoch ({format_hours(online_hours)} for {inputs.epochs} epoch(s), on "
            "top of training)"
        )
        found.append(Alternative(kind="online_extraction", needed_bytes=online, hours=online_hours, summary=summary))
    nodes = nodes_for_hidden_states(inputs.cluster, plan.hidden_state_bytes, inputs.reserve_bytes)
    if nodes is not None:
        per_node = plan.hidden_state_bytes / nodes
        shard_hours = plan.extraction_hours * inputs.cluster.extract_shards / nodes
        summary = (
            f"spread extraction over {nodes} nodes with their own disks: {format_size(per_node)} of hidden states "
            f"on each (of {format_size(inputs.cluster.node_free_disk_bytes or 0)} free), {format_hours(shard_hours)}"
            f" per shard ([cluster] extract_shards = {nodes}, each shard's path on its node's disk; training then "
            "reads every node's share)"
        )
        found.append(Alternative(kind="spread_extraction", nodes=nodes, hours=shard_hours, summary=summary))
    for volume in sorted(roomy, key=lambda v: -v.free_bytes):
        summary = f"put the data on {volume.mount} ({format_size(volume.free_bytes)} free)"
        found.append(Alternative(kind="other_path", path=volume.mount, needed_bytes=plan.needed_bytes, summary=summary))
    if not roomy:
        wanted = plan.needed_bytes + inputs.reserve_bytes
        summary = f"put the data on a volume with at least {format_size(wanted)} free"
        if inputs.other_volumes:
            summary += " (none of the volumes checked has that much)"
        found.append(Alternative(kind="other_path", needed_bytes=wanted, summary=summary))
    return found
