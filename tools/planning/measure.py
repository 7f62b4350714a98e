"""The planner's measurements on the live host: the model's config.json, free disk, generation throughput.

Every figure the operator gives is used as is and not measured, so a plan for an unreachable host needs
no connection at all. What is measured is read where it really is: the model directory the server says it
loaded (`root` in /v1/models, served.py), df where the data will go, and a short burst of real completions
(decoding, one request alone, and a prefill wave of long prompts answered with one token each, as extraction runs:
throughput_probe.py). The figures as given are figures.py's; the prompts counted and measured, prompt_count.py's.

With production down (stopped for a phase, or still loading) nothing can be asked of the server: the model is read
from target.model_dir (its shape, its weights' bytes), and the rates are assumed from the weights and the GPUs
(tools/planning/estimate.py: decoding bound by memory bandwidth, prefill by FLOP/s); the sources say which figure
was assumed and how. Either way the run's sizes are checked against the context the server takes, so a run whose
every request would be refused never starts.
"""

from __future__ import annotations

import posixpath
import shlex

from pydantic import BaseModel, Field

from eyas.tools.checks.disk import check_disk
from eyas.tools.checks.gpus import check_gpus
from eyas.tools.checks.remote_code import trust_remote_code
from eyas.tools.checks.result import CheckContext, Status
from eyas.tools.checks.service import check_service, production_headers, read_unit
from eyas.tools.hosts.clock import SYSTEM_CLOCK, Clock
from eyas.tools.hosts.host import Host
from eyas.tools.hosts.http import HttpClient
from eyas.tools.launch.inherited import inherit_launch
from eyas.tools.launch.unit_file import UnitFile
from eyas.tools.planning.answer_lengths import AnswerLengths, expected_sequence_tokens
from eyas.tools.planning.answer_sample import sample_answers, shaped
from eyas.tools.planning.cluster_plan import ClusterShape
from eyas.tools.planning.estimate import (
    CPU_CORE_TRAINING_FLOPS,
    GPU_TRAINING_FLOPS,
    PlanInputs,
    Volume,
)
from eyas.tools.planning.figures import Figures
from eyas.tools.planning.host_probe import SpeedRequest, probe_speeds, sample_bucket
from eyas.tools.planning.model_config import MeasureError, model_config_path, read_model_dims, weights_on_disk
from eyas.tools.planning.model_dims import ModelDims
from eyas.tools.planning.prompt_count import prompt_tokens_on_host, run_conversations
from eyas.tools.planning.rates import assumed_decoding, extraction_rate
from eyas.tools.planning.served import (
    Context,
    ContextTooShort,
    ServedModel,
    context_problem,
    served_context,
    served_model,
)
from eyas.tools.planning.throughput_probe import Throughput, probe_throughput
from eyas.tools.planning.token_stats import TokenStats, token_stats
from eyas.tools.settings.config import EyasConfig, TargetConfig
from eyas.tools.settings.units import parse_size

PSEUDO_FILESYSTEMS = ("tmpfs", "devtmpfs", "squashfs", "efivarfs", "proc", "sysfs")


GUESSED = ("assumed", "estimated")  # how the sources of a figure that nothing measured begin


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
    neither can be found and the shape is given (`need` false: a MeasureError says why when it is needed). A
    directory the server names but this host lacks (a container's mount) gives way to target.model_dir."""
    if served is not None:
        try:
            path = model_config_path(host, served.root)
        except MeasureError:
            if target.model_dir is None and need:
                raise
        else:
            if target.model_dir is None or host.exists(path):
                return path
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
    served = None if server_down else served_model(ctx.http, target, production_headers(ctx))
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


def probe_shape(throughput: Throughput, run_concurrency: int) -> str:
    """The probe's shape as the plan's sources name it, and whether it is the run's: a rate probed at another
    concurrency is not the run's rate (a GPU server's grows with the requests in flight), and the gate says so."""
    shape = f"probe: {throughput.requests} requests, decoding at concurrency {throughput.concurrency}"
    if throughput.concurrency == run_concurrency:
        return f"{shape}, the run's"
    return f"{shape}, not the run's {run_concurrency} (generation's rate at {run_concurrency} may differ)"


def measure_inputs(
    figures: Figures,
    *,
    config: EyasConfig,
    host: Host | None,
    http: HttpClient,
    probe_concurrency: int | None = None,
    clock: Clock = SYSTEM_CLOCK,
    server_down: str | None = None,
) -> Measured:
    """The plan's inputs: given figures as they are, the rest measured on `host` (None: nothing may be). The
    server is asked first (ServerDown when it does not answer), and probed at the run's concurrency unless
    `probe_concurrency` says otherwise (decoding's rate grows with the requests in flight); `server_down` (why it
    cannot be asked) plans without it: the model from target.model_dir, the rates assumed. Raises ContextTooShort
    when the run's sizes do not fit the context the server takes."""
    data_path = figures.data_path or config.host().workdir
    sources = {"samples": "given", "max_tokens": "given", "model": "given", "free_disk": "given", "throughput": "given"}
    sources["prompt_tokens"] = "given" if figures.prompt_tokens is not None else "not counted"
    sources["training"] = f"one GPU, {GPU_TRAINING_FLOPS:.0e} FLOP/s (assumed)"
    flops, stats, others, throughput, overhead, gpus, serving = GPU_TRAINING_FLOPS, None, [], None, 0.0, 1, 0
    answers: AnswerLengths | None = None
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
        samples = run_conversations(ctx, figures) if stats is None else []
        if prompt_tokens is None and stats is None:
            prompt_tokens, sources["prompt_tokens"] = prompt_tokens_on_host(ctx, config, figures, found.served, samples)
        if stats is None and found.served is not None and samples:
            answers = sample_answers(
                http, config.target, samples, max_tokens=figures.max_tokens, concurrency=figures.concurrency,
                headers=production_headers(ctx),
            )  # fmt: skip
            answers = shaped(answers, samples, prompt_tokens or 0.0, figures.max_seq_len) if answers else None
            sources["answers"] = answers.text() if answers else "not sampled: no answer came back; max_tokens assumed"
        sequence = expected_sequence_tokens(stats, prompt_tokens or 0.0, figures.max_tokens, answers)
        if figures.generation_tok_s is None and found.served is not None:
            length = found.context.tokens if found.context else None
            concurrency = probe_concurrency or figures.concurrency
            throughput = probe_throughput(
                http, config.target, concurrency=concurrency, clock=clock, max_model_len=length,
                headers=production_headers(ctx),
            )  # fmt: skip
            tok_s, overhead, single = throughput.tokens_per_s, throughput.overhead_s, throughput.single_tok_s
            sources["throughput"] = probe_shape(throughput, figures.concurrency)
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
        sequence = expected_sequence_tokens(stats, prompt_tokens or 0.0, figures.max_tokens, answers)
        rate, sources["extraction"] = extraction_rate(figures, throughput, dims, prefill_flops, sequence, tok_s)
        if probe_failed:
            sources["extraction"] += f" ({probe_failed})"
        speeds = {**speeds, "extraction_tok_s": rate}
    inputs = PlanInputs(
        model=dims,
        samples=figures.samples,
        max_tokens=figures.max_tokens,
        measured=stats,
        answers=answers,
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
