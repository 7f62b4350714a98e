"""The drafter to finetune from (pipeline.drafter_base), made ready before the data gate: downloaded if it is a hub
id, its format detected, checked against the target and converted to speculators' format (download.py --target).

On the motivating host generation and extraction take tens of hours; a drafter that cannot be finetuned for the
target must be found before them, and the operator must see, where they approve generation, which drafter training
will take: its format, what it reads of the target, and where the converted one is, or why there is none. A drafter
that cannot be used blocks the data gate (an approval ends the run, nothing is launched).
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any

from langgraph.runtime import Runtime

from eyas.graph.context import RunContext
from eyas.graph.phases.data.jobs import download_spec, training_drafter
from eyas.graph.phases.data.node import drafter_base_dir
from eyas.graph.run_facts import run_facts
from eyas.graph.state import Record, RunState
from eyas.graph.supervise import patient
from eyas.tools.jobs.detached import JobSpec, JobStatus, last_words
from eyas.tools.jobs.executor import launch_noted
from eyas.tools.jobs.job_progress import progress_in
from eyas.tools.jobs.upload import upload_workloads
from eyas.tools.workloads.drafter_format import shape
from eyas.tools.workloads.target_model import text_fields

FAILED_PREFIX = "download.py: "  # how download.py's refusals begin (its SystemExit message)


class DrafterCheck(Record):
    """What the data gate shows of the drafter to finetune: the detected format, the check against the target, and
    the drafter training takes (speculators' format, converted from SpecForge's if need be), or why there is none."""

    source: str  # pipeline.drafter_base: a hub id or a directory on the host
    job_id: str
    format: str | None = None  # as detected: speculators, specforge
    fits: str | None = None  # what it reads of the target, checked against the target's config.json
    converted: str | None = None  # what was made for training, and where
    error: str | None = None  # why it cannot be finetuned for this target: the run stops at the data gate

    def lines(self) -> list[tuple[str, str]]:
        """(label, text) rows for a gate."""
        rows = [("drafter", self.source)]
        rows += [(label, text) for label, text in (("format", self.format), ("target", self.fits),
                 ("training takes", self.converted)) if text]  # fmt: skip
        return rows + ([("drafter refused", self.error)] if self.error else [])

    def blocked(self) -> str | None:
        """Why the phases the gate would launch must not run, when the drafter cannot be used."""
        if self.error is None:
            return None
        return (
            f"the drafter {self.source} cannot be finetuned for this target: {self.error} Fix pipeline.drafter_base "
            "and start a new run; generation would be spent on a run whose training cannot start."
        )


def prepare_drafter(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Make the drafter ready before the data gate, once per run (a re-plan after an edit keeps it)."""
    ctx = runtime.context
    base = ctx.config.pipeline.drafter_base
    if not base or (run_facts(state).drafter or {}).get("source") == base:
        return {}
    return ctx.boundary.node("prepare_drafter", _prepare, ctx, base)


def drafter_spec(ctx: RunContext) -> JobSpec | None:
    """The job that makes the drafter ready (download.py with the target), when there is a drafter_base and the
    target's directory to check it against and convert it with."""
    base, model_dir = ctx.config.pipeline.drafter_base, ctx.config.target.model_dir
    if not base or model_dir is None:
        return None
    job_id = f"{ctx.run.run_id}.download"
    ready = training_drafter(ctx.artifact("drafter_base"))
    return download_spec(job_id, ctx.host_config, ctx.workloads_dir, base, drafter_base_dir(ctx), model_dir, ready)


def _prepare(ctx: RunContext, base: str) -> dict[str, Any]:
    spec = drafter_spec(ctx)
    if spec is None:
        why = "target.model_dir is not set, so it can be neither checked against the target nor converted; set it."
        check = DrafterCheck(source=base, job_id=f"{ctx.run.run_id}.download", error=why)
        return {"drafter": check.model_dump(mode="json")}
    job_id = spec.job_id
    upload_workloads(ctx.host, ctx.host_config.workdir)
    ctx.on_note(f"drafter: preparing {base} (download, check against the target, conversion) before the data gate")
    job = launch_noted(ctx.boundary, ctx.jobs, spec)
    while not job.finished:
        ctx.clock.sleep(ctx.poll_interval_s)
        job = patient(ctx, partial(ctx.jobs.status, job_id))
        ctx.on_progress("drafter", [job], {job_id: progress_in(patient(ctx, partial(ctx.jobs.tail, job_id, 20)))})
    tail = patient(ctx, partial(ctx.jobs.tail, job_id, 60))
    found = summary(tail) if job.status is JobStatus.SUCCEEDED else None
    if found is not None:
        check = prepared(ctx, base, job_id, found)
    else:
        check = DrafterCheck(source=base, job_id=job_id, error=refusal(tail, job.describe()))
    ctx.on_note(f"drafter: {'; '.join(text for _, text in check.lines()[1:])}")
    return {"drafter": check.model_dump(mode="json")}


def summary(tail: str) -> dict[str, Any] | None:
    """download.py's last line: the checkpoint it validated, and under "drafter" the one training takes."""
    for line in reversed(tail.splitlines()):
        if line.startswith("{"):
            found: dict[str, Any] = json.loads(line)
            if "drafter" in found:
                return found
    return None


def refusal(tail: str, status: str) -> str:
    """download.py's own reason, else the job's end (killed, not found)."""
    lines = [line for line in tail.splitlines() if line.strip()]
    reason = next((line for line in reversed(lines) if line.startswith(FAILED_PREFIX)), None)
    if reason is not None:
        return reason.removeprefix(FAILED_PREFIX)
    return f"its download job {status}; the log ends with: {last_words(tail) or '(empty log)'}."


def prepared(ctx: RunContext, base: str, job_id: str, found: dict[str, Any]) -> DrafterCheck:
    """The check of a drafter download.py made ready: its shape read back from its config.json and the target's."""
    drafter = shape(json.loads(ctx.host.read_text(f"{found['path'].rstrip('/')}/config.json")))
    target = text_fields(json.loads(ctx.host.read_text(f"{ctx.model_dir.rstrip('/')}/config.json")))
    layers = drafter.aux_layer_ids or "the default three"
    fits = (
        f"fits {ctx.model_dir}: reads width {drafter.target_hidden_size} (the target's {target.get('hidden_size')}), "
        f"vocabulary {drafter.target_vocab_size} (the target's {target.get('vocab_size')}), draft vocabulary "
        f"{drafter.draft_vocab_size}, layers {layers} of the target's {target.get('num_hidden_layers')}"
    )
    ready = found["drafter"]
    if ready.get("converted_from"):
        made = f"converted from {ready['converted_from']}'s format to speculators' ({ready.get('mapping')} mapping)"
    else:
        made = "speculators' format, its weights linked"
    return DrafterCheck(
        source=base, job_id=job_id, format=drafter.format, fits=fits,
        converted=f"{made}, loaded as training loads it: {ready.get('path')}",
    )  # fmt: skip
