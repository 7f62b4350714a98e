"""Prompts for the drafter tests and benchmark, as generate.py and evaluate.py read them.

The answers come from the target itself (generate.py at temperature 0): the drafter learns to predict the
target. The tests use short template prompts, whose held-out ones name topics the training prompts never
mention; the benchmark splits the prompt set eyas ships (tools/data/prompts.jsonl).

The counting prompts are the drafter's ceiling: SmolLM2 answers each greedily with a sequence that continues
without surprise ("1234567890123...", "1. 1\n2. 2\n3. 3\n...", "1, 2, 3, ..."), so a drafter trained on some of
them must draft nearly every token of the held-out ones (other numbers, the same kinds): acceptance near k + 1.
A recipe that cannot get there is broken (a shift off by one, a loss on the wrong tokens, a vocabulary mapping
that sends drafts to other tokens), whatever the data size.
"""

from __future__ import annotations

import json
from pathlib import Path

_TRAIN_TOPICS = (
    "photosynthesis", "the water cycle", "volcanoes", "the moon", "rainbows", "bread baking", "bicycles",
    "honey bees", "the internet", "electric cars", "coffee", "glaciers", "tides", "the human heart",
    "paper making", "wind turbines", "chess", "lighthouses", "recycling", "thunderstorms", "sleep",
    "the pyramids", "compost", "bridges", "clouds", "magnets", "deserts", "coral reefs", "fireworks", "owls",
    "the printing press", "soap", "rivers", "wolves", "batteries", "umbrellas", "mushrooms", "satellites",
    "cheese", "the olympics",
)  # fmt: skip
_HELD_OUT_TOPICS = ("earthquakes", "solar panels", "penguins", "libraries", "trains", "vaccines", "maps", "tea")
_TASKS = (
    "Explain {topic} to a ten-year-old.",
    "Write three short facts about {topic}.",
    "Describe {topic} in two sentences.",
    "What are the main benefits of {topic}?",
    "Write a short poem about {topic}.",
)


def _prompts(topics: tuple[str, ...], count: int) -> list[str]:
    prompts = [task.format(topic=topic) for task in _TASKS for topic in topics]
    if count > len(prompts):
        raise ValueError(f"only {len(prompts)} prompts are available, not {count}")
    return prompts[:count]


_COUNTING_TASKS = (
    "Count from 1 to {n}, separated by commas.",
    "List the numbers from 1 to {n}.",
    "Count up from 1 to {n}.",
    "Write the numbers from 1 to {n} in order.",
)
_TRAIN_NUMBERS = tuple(range(20, 80, 3))  # 20 of them; the held-out numbers are never among them
_HELD_OUT_NUMBERS = (17, 45, 91, 130)


def _counting_prompts(numbers: tuple[int, ...], count: int) -> list[str]:
    prompts = [task.format(n=n) for n in numbers for task in _COUNTING_TASKS]
    if count > len(prompts):
        raise ValueError(f"only {len(prompts)} counting prompts are available, not {count}")
    return prompts[:count]


def write_prompts(path: Path, count: int, *, held_out: bool = False, counting: bool = False) -> Path:
    """`count` prompts as generate.py and evaluate.py read them: {"id", "prompt"} per line; with `counting`, the
    ceiling's counting prompts."""
    if counting:
        prompts = _counting_prompts(_HELD_OUT_NUMBERS if held_out else _TRAIN_NUMBERS, count)
    else:
        prompts = _prompts(_HELD_OUT_TOPICS if held_out else _TRAIN_TOPICS, count)
    prefix = "held" if held_out else "train"
    path.write_text("".join(json.dumps({"id": f"{prefix}-{i}", "prompt": p}) + "\n" for i, p in enumerate(prompts)))
    return path


def split_prompt_set(source: Path, train: Path, held_out: Path, held_out_count: int) -> None:
    """Evenly spaced lines of `source` (every kind of prompt it holds) held out; the rest kept for training."""
    lines = [line for line in source.read_text().splitlines() if line.strip()]
    step = len(lines) / held_out_count
    picked = {int(i * step + step / 2) for i in range(held_out_count)}
    held_out.write_text("".join(lines[i] + "\n" for i in sorted(picked)))
    train.write_text("".join(line + "\n" for i, line in enumerate(lines) if i not in picked))
