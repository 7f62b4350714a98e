"""The trained drafter made ready to publish: a model card (README.md) in its folder, and a config.json whose
speculators_config names the verifier by its hub id (not a host path) and carries the k eyas evaluated.

Written by the report node, not by train.py: only there are all the facts known (the evaluation's acceptance and
speedup with their intervals, the prompts' split, the sizes and the versions), and the report node runs at the end
of every run that trained, evaluated or not. The files go through the run's host like every other write, so a
replay answers them from the transcript.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from typing import Any

from eyas.graph.context import RunContext
from eyas.graph.phases.evaluate.record import Evaluation, run_evaluation
from eyas.graph.phases.report.markdown import md_text
from eyas.graph.phases.report.what_ran import prompts_text, size_rows, throughput_text, training_text
from eyas.graph.run_facts import run_facts
from eyas.graph.state import RunState, run_sizes
from eyas.tools.workloads.speculative import drafter_config

CARD = "README.md"
CONFIG = "config.json"
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_HUB_CACHE = re.compile(r"models--([\w.-]+)--([\w.-]+)")
MEASURES = (
    ("mean_acceptance_length", "mean acceptance length"),
    ("acceptance_rate", "acceptance rate"),
    ("speedup", "speedup (decode tokens/s)"),
)


def hub_id(served_name: str | None, model_dir: str, name_or_path: str | None) -> str | None:
    """The target's Hugging Face id when something says it: the served model name (vLLM serves a hub model under its
    id), the hub cache's folder name (models--ORG--NAME) in the model's path, or its config's _name_or_path."""
    for candidate in (served_name, name_or_path):
        if candidate and _HUB_ID.match(candidate):  # org/name; a path starts with "/", "~" or "."
            return candidate
    cached = _HUB_CACHE.search(model_dir)
    return f"{cached.group(1)}/{cached.group(2)}" if cached else None


def published_config(config: dict[str, Any], verifier: str | None, k: int) -> dict[str, Any]:
    """The drafter's config.json naming `verifier` (when known) and proposing `k` tokens, which vLLM takes as its
    num_speculative_tokens when --speculative-config gives none; a config without speculators_config as it is."""
    speculators = config.get("speculators_config")
    if not isinstance(speculators, dict):
        return config
    if verifier is not None:
        speculators["verifier"]["name_or_path"] = verifier
    for method in speculators.get("proposal_methods") or []:
        method["speculative_tokens"] = k
    return config


def _interval(evaluation: Evaluation, measure: str) -> str:
    bounds = evaluation.intervals.of(measure) if evaluation.intervals else None
    if bounds is None:
        return ""
    level = evaluation.intervals.level if evaluation.intervals else 0.95
    return f" ({level:.0%} interval {bounds[0]:.3f} to {bounds[1]:.3f})"


def evaluation_lines(evaluation: Evaluation | None) -> list[str]:
    if evaluation is None:
        return ["Not evaluated: the run ended before its evaluation."]
    lines = [f"On {evaluation.prompts} held-out prompts at temperature 0, k = {evaluation.k}:", ""]
    for measure, label in MEASURES:
        value = evaluation.figure(measure)
        if value is not None:
            lines.append(f"- {label}: {value:.3f}{_interval(evaluation, measure)}")
    if evaluation.per_position:
        rates = ", ".join(f"{position + 1}: {rate:.3f}" for position, rate in enumerate(evaluation.per_position))
        lines.append(f"- acceptance by draft position: {rates}")
    if evaluation.tokens_per_s_baseline is not None and evaluation.tokens_per_s_speculative is not None:
        lines.append(
            f"- tokens/s: {evaluation.tokens_per_s_baseline:.1f} without the drafter, "
            f"{evaluation.tokens_per_s_speculative:.1f} with it"
        )
    ngram = evaluation.side_by_side()[1]  # vLLM's n-gram speculation, the free baseline, on the same prompts
    lines.append(f"- n-gram speculation (no drafter): {ngram.summary() if ngram.measured else 'not measured'}")
    return lines


def model_card(
    state: Mapping[str, Any], target: str, verifier: str | None, drafter_dir: str, k: int, evaluation: Evaluation | None
) -> str:
    """README.md for the drafter: front matter for the hub, then target, data, sizes, recipe, results, serving."""
    front = ["---", "library_name: speculators", "tags:", "- speculators", "- eagle3", "- speculative-decoding"]
    front += [f"base_model: {verifier}"] if verifier else []
    run = run_facts(state)
    speculative = json.dumps(drafter_config(drafter_dir, k))
    lines = [*front, "---", "", f"# EAGLE-3 drafter for {md_text(verifier or target)}", ""]
    lines += [
        f"Trained by eyas {md_text(run.eyas.get('version') or '?')} (run {md_text(run.run_id or '?')}) on the "
        "target's own hidden states, in speculators' format.",
        "",
        "## Target",
        "",
        f"{md_text(verifier) if verifier else 'Hub id not known'}; served as {md_text(target)}.",
        "",
        "## Data",
        "",
        md_text(prompts_text(run.prompts)),
        "",
        "## Sizes",
        "",
        "| size | value | meaning |",
        "|---|---|---|",
        *(f"| {name} | {md_text(value)} | {md_text(meaning)} |" for name, value, meaning in size_rows(state)),
        "",
        "## Training recipe",
        "",
        md_text(training_text(state, None)) + ".",
        f"Throughput: {md_text(throughput_text(run.training))}. The curves are in metrics.jsonl and, for "
        "TensorBoard, in tensorboard/.",
        "",
        "## Evaluation",
        "",
        *evaluation_lines(evaluation),
        "",
        "## Serving with vLLM",
        "",
        "```sh",
        f"vllm serve {shlex.quote(verifier or target)} --speculative-config {shlex.quote(speculative)}",
        "```",
        "",
        "Once uploaded, give the repository's id as the drafter's `model` instead of this folder.",
    ]
    return "\n".join(lines) + "\n"


def make_ready_to_publish(ctx: RunContext, state: RunState) -> None:
    """Write the card and the published config into the drafter's folder on the host (nothing when it has none)."""
    drafter = ctx.artifact("drafter")
    config_path = f"{drafter}/{CONFIG}"
    if not ctx.host.exists(config_path):
        return
    target_config = f"{ctx.model_dir}/{CONFIG}"
    name_or_path = (
        json.loads(ctx.host.read_text(target_config)).get("_name_or_path") if ctx.host.exists(target_config) else None
    )
    verifier = hub_id(ctx.config.target.model, ctx.model_dir, name_or_path)
    evaluation = run_evaluation(state)
    k = evaluation.k if evaluation and evaluation.k else run_sizes(state).num_speculative_tokens
    saved = json.loads(ctx.host.read_text(config_path))
    config = published_config(json.loads(json.dumps(saved)), verifier, k)
    if config != saved:
        ctx.host.write_text(config_path, json.dumps(config, indent=2) + "\n")
    ctx.host.write_text(
        f"{drafter}/{CARD}", model_card(state, ctx.config.target.model, verifier, drafter, k, evaluation)
    )
