"""Test helper run by the target venv's Python: conversations.py's tokens and loss mask for a file of conversations,
under the model's own chat template and others (files), decoded so a test reads what the drafter learns.

    python render_masks.py --model DIR --input conversations.jsonl [--template NAME=TEMPLATE.jinja ...]

Prints one JSON object, by template ("own" is the model's): {"renders_reasoning", "samples": [{"id", "text",
"spans"}], "skipped": [reasons]}, where `spans` are the loss mask's runs of tokens, decoded, and `text` the render.
One process for every template, since loading transformers is most of the time.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "workloads"))

from conversations import Conversation, end_of_turn_ids, read_conversations, renders_reasoning, tokenize


def masked_spans(tokenizer: Any, token_ids: list[int], mask: list[bool]) -> list[str]:
    spans, position = [], 0
    for masked, run in itertools.groupby(mask):
        length = len(list(run))
        if masked:
            spans.append(tokenizer.decode(token_ids[position : position + length]))
        position += length
    return spans


def render(model: Path, template: str | None, conversations: Path) -> dict[str, Any]:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model)  # a fresh one: renders_reasoning is kept per tokenizer
    if template is not None:
        tokenizer.chat_template = template
    end_ids = end_of_turn_ids(tokenizer, None)
    samples, skipped = [], []
    for item in read_conversations(conversations):
        if not isinstance(item, Conversation):
            skipped.append(item.reason)
            continue
        tokenized = tokenize(tokenizer, item.messages, end_ids, 10**6)
        spans = masked_spans(tokenizer, tokenized.token_ids, tokenized.loss_mask)
        samples.append({"id": item.sample_id, "text": tokenizer.decode(tokenized.token_ids), "spans": spans})
    return {"renders_reasoning": renders_reasoning(tokenizer), "samples": samples, "skipped": skipped}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--input", type=Path, required=True)
    parser.add_argument("--template", action="append", default=[], help="NAME=FILE: a chat template to use as well")
    args = parser.parse_args()
    templates: dict[str, str | None] = {"own": None}
    for named in args.template:
        name, path = named.split("=", 1)
        templates[name] = Path(path).read_text()
    print(json.dumps({name: render(args.model, text, args.input) for name, text in templates.items()}))


if __name__ == "__main__":
    main()
