"""Where training's hidden states come from, and why, in one sentence with the hours: offline, hybrid or online.

- offline: extraction writes every sample's hidden states once and training reads them every epoch. The choice
  whenever they fit the verified free disk (estimate.py's verdict), and wherever the host's vLLM is known to lack
  the extract_hidden_states method the other two need.
- hybrid: they do not fit. Extraction keeps the hidden states of the first K samples, in the generated file's order
  (extract.py --offline-samples K: sample index < K), K the most that fit under the free disk after everything else
  the run writes, the reserve and the online bound; every later sample gets only a token file, and training fetches
  its hidden states every epoch from an extraction server it starts beside the trainer (production's launch with the
  extract_hidden_states method), at most a window of samples on disk at once, each deleted once read.
- online: not even one sample's hidden states fit beside that: K is 0, extraction only tokenizes (no server, no
  weights), and every sample is fetched every epoch.

Online pays the target's prefill for the fetched samples once per epoch (the extraction hours scaled by the fetched
share, times the epochs), on top of training. The run size `extraction_mode` overrides the choice; the reason then
says what the plan would have chosen, and says so when the requested mode cannot run on this host.

On a CUDA host speculators' own dataset fetches the samples (speculators/train/data.py, ArrowDataset with
--on-missing generate), not eyas's loop, and the gates and the dry run say what differs in a row of their own
("on CUDA", HiddenStatesMode.cuda_text; not in the verdict's paragraph): the bound holds, as train.py gives the GPUs
at most --window dataloader workers, each holding one sample at a time; but eyas counts
nothing per epoch there, and a sample whose hidden states are for other tokens is asked for three times and then
skipped with a warning (never trained on, training goes on) where eyas's CPU loop stops at the first.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, model_serializer

from eyas.tools.planning.estimate import (
    Alternative,
    Plan,
    PlanInputs,
    fetch_hours,
    kept_samples,
    online_bound,
    split_bytes,
    split_needed_bytes,
)
from eyas.tools.planning.plan_text import per_job, samples_text, verdict, worst_text
from eyas.tools.settings.units import format_hours, format_size

Mode = Literal["offline", "online", "hybrid"]
LACKS = "this host's vLLM lacks the extract_hidden_states method they need (verify's compat rows for extract/vllm)"


class HiddenStatesMode(BaseModel):
    """plan["extraction_mode"]: where training's hidden states come from, what the run asked for, and why, with the
    figures the phases and the gates take from it."""

    mode: Mode
    requested: str  # the run size: auto, offline, online or hybrid
    reason: str
    samples: int = Field(ge=0)
    offline_samples: int | None = Field(
        None, ge=0, description="K: the first K samples keep their hidden states on disk (None: all, offline)"
    )
    window: int = Field(gt=0, description="fetched samples' hidden states on disk at once (train.py --window)")
    bound_bytes: int = Field(ge=0, description="the most bytes fetched hidden states take at once (0: none fetched)")
    dtype: str = Field(description="what the online extraction server writes, the bound's dtype")
    extract_hours: float = Field(ge=0, description="the extract phase: the K samples' extraction (0: tokenizing only)")
    online_hours: float = Field(ge=0, description="the target's prefill for the fetched samples, every epoch")
    train_hours: float = Field(ge=0, description="the train phase: training plus online_hours")
    hours: float = Field(ge=0, description="extract_hours + train_hours")
    extract_bytes: int = Field(ge=0, description="what extraction writes: hidden-state and token files")
    needed_bytes: int = Field(ge=0, description="the run's disk in this mode, the online bound included")
    fits: bool
    runnable: bool | None = Field(
        description="whether this host's vLLM has extract_hidden_states, which online and hybrid need (None: not known)"
    )
    server_memory_utilization: float | None = Field(
        None, description="the train phase's extraction server's --gpu-memory-utilization, where the plan lowers it"
    )
    train_gpus: int | None = Field(
        None, ge=0, description="the train host's GPUs: 0, eyas's CPU loop fetches; more, speculators' (None: unknown)"
    )
    gpu_refusal: str | None = Field(
        None, description="why the GPUs cannot hold online training's server beside its trainer (None: they can)"
    )

    @model_serializer(mode="wrap")
    def _without_unknown_gpus(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Absent when not known, so a plan recorded before the fields existed dumps as it was read (replays match).
        optional = ("train_gpus", "gpu_refusal")
        return {key: value for key, value in handler(self).items() if key not in optional or value is not None}

    @property
    def fetched(self) -> int:
        """Samples whose hidden states training fetches online."""
        return self.samples - (self.samples if self.offline_samples is None else self.offline_samples)

    @property
    def online(self) -> bool:
        """Whether the train phase starts an extraction server (some sample is fetched)."""
        return self.mode != "offline" and self.fetched > 0

    @property
    def cuda(self) -> bool:
        """Whether speculators' dataset may be the one fetching: a GPU host, or one not known to be without."""
        return self.train_gpus != 0

    def cuda_text(self) -> str:
        """What differs when speculators' dataset fetches (CUDA), in the words of the gates' and the dry run's row
        "on CUDA" (not in the one-paragraph verdict)."""
        gpus = f"the {self.train_gpus} GPUs" if self.train_gpus else "the GPUs"
        return (
            f"on CUDA speculators' own dataset fetches them, one at a time per dataloader worker, each deleted once "
            f"loaded; train.py gives {gpus} at most {self.window} workers in all, so the bound holds. eyas counts "
            "nothing per epoch there (the report shows the bound, not the samples, bytes or high-water mark), and a "
            "sample whose hidden states are for other tokens is asked for three times, then skipped with a warning in "
            "the trainer's log: never trained on, but training goes on (20 in a row in one worker stop it), where "
            "eyas's CPU loop stops at the first"
        )

    @property
    def extracts_nothing(self) -> bool:
        """Whether extraction only tokenizes (K = 0): no server, no weights, no GPU."""
        return self.offline_samples == 0

    def lines(self) -> list[tuple[str, str]]:
        """The mode as (label, text) rows, as the gates and the dry run show it: the reason, then (online or hybrid)
        the rule, the bound and the hours."""
        rows = [("hidden states", self.reason)]
        if self.mode == "offline":
            return rows
        k = self.offline_samples or 0
        rows.append((
            "kept on disk",
            f"the first {k:,} of {self.samples:,} samples' hidden states, in the generated file's order (extract.py "
            f"--offline-samples {k}); the other {self.fetched:,} only as token files, fetched online every epoch",
        ))  # fmt: skip
        rows.append((
            "online bound",
            f"at most {format_size(self.bound_bytes)} of fetched hidden states on disk at once ({self.window} samples "
            f"at the longest length, {self.dtype}; train.py --window {self.window}), deleted once read",
        ))  # fmt: skip
        rows.append((
            "online hours",
            f"{format_hours(self.online_hours)} of the target's prefill over every epoch; training "
            f"{format_hours(self.train_hours)} with it, extraction {format_hours(self.extract_hours)}",
        ))  # fmt: skip
        if self.cuda:
            rows.append(("on CUDA", self.cuda_text()))
        if self.server_memory_utilization is not None:
            rows.append((
                "online server",
                f"--gpu-memory-utilization {self.server_memory_utilization:.2f}, lowered from production's so that "
                "the trainer fits beside it",
            ))  # fmt: skip
        return rows


def figures(
    mode: Mode, requested: str, kept: int | None, inputs: PlanInputs, plan: Plan, vllm_works: bool | None
) -> HiddenStatesMode:
    """The mode's hours and bytes with `kept` samples offline (None: all of them); the reason is filled in later."""
    n = plan.samples
    offline = mode == "offline" or kept is None
    k = n if offline else max(0, min(n, kept or 0))
    fetched = n - k
    online_h = fetch_hours(inputs, plan, k) if fetched else 0.0
    # An online train.py runs on one node (its extraction server beside it): the cluster's split does not apply.
    training_h = plan.training_hours * (inputs.cluster.train_nodes if fetched else 1)
    extract_h = plan.extraction_hours if k == n else plan.extraction_hours * k / n
    needed = plan.needed_bytes if offline else split_needed_bytes(inputs, plan, k)
    return HiddenStatesMode(
        mode=mode, requested=requested, reason="", samples=n, offline_samples=None if mode == "offline" else k,
        window=inputs.online_window, bound_bytes=online_bound(inputs) if fetched else 0, dtype=inputs.online_dtype,
        extract_hours=extract_h, online_hours=online_h, train_hours=training_h + online_h,
        hours=extract_h + training_h + online_h,
        extract_bytes=plan.hidden_state_bytes if offline else split_bytes(inputs, plan, k),
        needed_bytes=needed, fits=plan.fits if offline else inputs.free_disk_bytes - needed >= inputs.reserve_bytes,
        runnable=vllm_works, train_gpus=inputs.train_gpus,
    )  # fmt: skip


def _states(plan: Plan) -> str:
    return f"the hidden states ({format_size(plan.hidden_state_bytes)}) do not fit the " + (
        f"{format_size(plan.free_disk_bytes)} free at {plan.data_path}"
    )


def _online_text(choice: HiddenStatesMode, inputs: PlanInputs) -> str:
    """What fetching costs, the same words in every reason."""
    return (
        f"at most {format_size(choice.bound_bytes)} of them on disk at once ({choice.window} samples); the target's "
        f"prefill for them repeats each of the {inputs.epochs} epoch(s) ({format_hours(choice.online_hours)} in all), "
        f"so training takes {format_hours(choice.train_hours)}"
    )


def _split_text(choice: HiddenStatesMode, inputs: PlanInputs) -> str:
    """The rule and its cost: which samples stay on disk and which are fetched."""
    k, n = choice.offline_samples or 0, choice.samples
    if choice.fetched == 0:
        return f"all {n:,} samples keep their hidden states on disk, and nothing is fetched online"
    if k == 0:
        return (
            f"every one of the {n:,} samples is fetched online every epoch (extraction only tokenizes), "
            + _online_text(choice, inputs)
        )
    return (
        f"the first {k:,} of the {n:,} samples (in the generated file's order) keep their hidden states on disk and "
        f"the other {choice.fetched:,} are fetched online every epoch, " + _online_text(choice, inputs)
        + f", and extraction {format_hours(choice.extract_hours)}"
    )  # fmt: skip


def planned_mode(
    inputs: PlanInputs, plan: Plan, vllm_works: bool | None, gpu_refusal: str | None = None
) -> HiddenStatesMode:
    """The plan's own choice (see the module's rules). `vllm_works` is what the compat check found for vLLM's
    extract_hidden_states path (None: not known); `gpu_refusal` why the GPUs cannot hold online training at all
    (gpu_budget.online_unplaceable; None: they can): a mode that cannot run is never chosen."""
    offline = figures("offline", "auto", None, inputs, plan, vllm_works).model_copy(update={"gpu_refusal": gpu_refusal})
    if plan.fits:
        reason = (
            f"offline: the hidden states ({format_size(plan.hidden_state_bytes)}) fit the "
            f"{format_size(plan.free_disk_bytes)} free at {plan.data_path}, so extraction writes them once "
            f"({format_hours(plan.extraction_hours)}) and training reads them every epoch "
            f"({format_hours(plan.training_hours)})"
        )
        return offline.model_copy(update={"reason": reason})
    kept = kept_samples(inputs, plan)
    if kept is None:
        needed = format_size(split_needed_bytes(inputs, plan, 0))
        reason = (
            f"offline: {_states(plan)}, and neither would online training ({needed} with the data, the checkpoints "
            "and the online bound)"
        )
        return offline.model_copy(update={"reason": reason})
    mode: Mode = "hybrid" if kept > 0 else "online"
    choice = figures(mode, "auto", kept, inputs, plan, vllm_works)
    if vllm_works is False or gpu_refusal:
        reason = f"offline: {_states(plan)}; {mode} training would fit the disk, but {gpu_refusal or LACKS}"
        return offline.model_copy(update={"reason": reason})
    unknown = " (this host's vLLM could not be checked for the extract_hidden_states method it needs)"
    reason = f"{mode}: {_states(plan)}, so {_split_text(choice, inputs)}{'' if vllm_works else unknown}"
    return choice.model_copy(update={"reason": reason})


def choose_mode(
    requested: str, inputs: PlanInputs, plan: Plan, vllm_works: bool | None, gpu_refusal: str | None = None
) -> HiddenStatesMode:
    """The run's mode: the size's when it names one (the reason says what the plan would have chosen, and whether
    it can run here: an online or hybrid mode the GPUs cannot hold does not fit), else the plan's."""
    planned = planned_mode(inputs, plan, vllm_works, gpu_refusal)
    if requested == "auto":
        return planned
    would = planned.mode + (
        f", the first {planned.offline_samples:,} samples on disk"
        if planned.mode == "hybrid" and planned.fetched
        else ""
    )
    asked = f"the run's size extraction_mode asks for it (the plan would choose {would})"
    if requested == "offline":
        chosen = figures("offline", requested, None, inputs, plan, vllm_works)
        return chosen.model_copy(update={"reason": f"offline: {asked}"})
    mode: Mode = "hybrid" if requested == "hybrid" else "online"
    kept = (kept_samples(inputs, plan) or 0) if mode == "hybrid" else 0
    chosen = figures(mode, requested, kept, inputs, plan, vllm_works)
    refusal = gpu_refusal if chosen.online else None
    cannot = f"; it cannot run here: {LACKS}" if vllm_works is False else ""
    cannot += f"; it cannot run here: {refusal}" if refusal else ""
    too_big = "" if chosen.fits else f"; it does not fit either ({format_size(chosen.needed_bytes)} needed)"
    reason = f"{mode}: {asked}: {_split_text(chosen, inputs)}{too_big}{cannot}"
    fits = chosen.fits and refusal is None
    return chosen.model_copy(update={"reason": reason, "gpu_refusal": refusal, "fits": fits})


def offered(alternatives: list[Alternative], choice: HiddenStatesMode) -> list[Alternative]:
    """The ways out a plan offers: training online is not one where the host's vLLM cannot serve it, nor where the
    run already does it."""
    unusable = choice.runnable is False or choice.mode != "offline" or choice.gpu_refusal is not None
    return [way for way in alternatives if not (unusable and way.kind == "online_extraction")]


def mode_verdict(inputs: PlanInputs, plan: Plan, choice: HiddenStatesMode) -> str:
    """The plan in one paragraph for the chosen mode: offline's is estimate.py's verdict (without a way out that
    cannot run here); online and hybrid say what is kept, what is fetched, the bound and the hours."""
    ways = offered(plan.alternatives, choice)
    if choice.mode == "offline":
        said = verdict(inputs, plan.model_copy(update={"alternatives": ways}))
        return said if plan.fits or not choice.gpu_refusal else f"{said} Not online or hybrid: {choice.gpu_refusal}."
    left = inputs.free_disk_bytes - choice.needed_bytes
    k = choice.offline_samples or 0
    kept = (
        "every sample's are fetched online every epoch"
        if k == 0
        else f"the first {k:,} samples keep theirs on disk ({format_size(choice.extract_bytes)} with the token files) "
        f"and the other {choice.fetched:,} are fetched online every epoch"
    )
    if choice.fetched == 0:
        kept = "every sample keeps them on disk"
    head = (
        f"{samples_text(inputs, plan)}, against {format_size(plan.free_disk_bytes)} free at {plan.data_path}: "
        f"{choice.mode}, {kept}, at most {format_size(choice.bound_bytes)} of fetched hidden states on disk at once; "
        f"{format_size(choice.needed_bytes)} with the data and checkpoints."
    )
    extraction = "tokenizing only" if k == 0 else format_hours(choice.extract_hours)
    hours = (
        f" Time: generation {format_hours(plan.generation_hours)}, extraction {extraction}, training "
        f"{format_hours(choice.train_hours)} (with {format_hours(choice.online_hours)} of online prefill over "
        f"{inputs.epochs} epoch(s))."
    )
    if plan.shards and choice.fetched == 0:
        hours += f" {per_job(plan.shards)}"
    hours += f" It cannot run here: {LACKS}." if choice.runnable is False else ""
    hours += f" It cannot run here: {choice.gpu_refusal}." if choice.gpu_refusal else ""
    hours += worst_text(plan)
    if choice.fits:
        return f"Fits {choice.mode}: {head} {format_size(left)} stays free.{hours}"
    out = f" Ways out: {'; '.join(way.summary for way in ways)}." if ways else ""
    if left >= inputs.reserve_bytes:  # the disk holds it; the GPUs do not
        return f"Cannot run {choice.mode}: {head} {format_size(left)} would stay free.{hours}{out}"
    short = format_size(choice.needed_bytes + inputs.reserve_bytes - inputs.free_disk_bytes)
    reserve = f"keeping {format_size(inputs.reserve_bytes)} free"
    return f"Does not fit {choice.mode}: {head} It is {short} short ({reserve}).{hours}{out}"
