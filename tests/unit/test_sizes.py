"""One set of sizes: the defaults that `eyas run`, `eyas plan` and `eyas demo` offer are those of `Sizes`
(or of its demo preset), so the commands cannot drift apart again."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer
from pydantic import ValidationError
from typer.core import TyperGroup, TyperOption

from eyas.agents.faces.cli.main import app
from eyas.agents.faces.cli.options import chosen_sizes
from eyas.agents.faces.dashboard.forms import SIZE_PREFIX, GateForm
from eyas.graph.state import GateAnswer, run_sizes
from eyas.tools.settings.config import format_validation_error
from eyas.tools.settings.sizes import (
    CHARS_PER_TOKEN,
    DEFAULT_SIZES,
    DEMO,
    MIN_PROMPT_TOKENS,
    Sizes,
    recorded_sizes,
    shown_size,
    starting_sizes,
    typed_size,
)
from pipeline_runs import TINY

MAKEFILE = Path(__file__).resolve().parents[2] / "Makefile"


def size_options(command: str) -> list[TyperOption]:
    """A command's options that set a size, as its command line really offers them."""
    group = typer.main.get_command(app)
    assert isinstance(group, TyperGroup)
    params = group.commands[command].params
    return [param for param in params if isinstance(param, TyperOption) and param.name in Sizes.model_fields]


def option_defaults(command: str) -> dict[str | None, object]:
    return {option.name: option.default for option in size_options(command)}


def test_run_offers_every_size_and_leaves_the_default_to_the_target() -> None:
    assert option_defaults("run") == dict.fromkeys(DEFAULT_SIZES.model_dump())


def test_plan_offers_the_sizes_it_plans_with_and_agrees_with_run() -> None:
    plan = option_defaults("plan")
    assert set(plan) == {
        "samples",
        "max_tokens",
        "max_seq_len",
        "epochs",
        "ttt_steps",
        "draft_vocab_size",
        "prompt_source",
        "extraction_mode",  # the plan chooses offline, hybrid or online from it
        "online_window",  # online training's disk bound
        "concurrency",  # the throughput probe runs at it: generation's rate grows with the requests in flight
    }
    assert plan == {name: option_defaults("run")[name] for name in plan}


@pytest.mark.parametrize("command", ["run", "plan"])
def test_the_help_names_both_defaults(command: str) -> None:
    for option in size_options(command):
        assert option.name is not None and option.help is not None
        assert f"default {shown_size(getattr(DEFAULT_SIZES, option.name))};" in option.help
        assert f"{shown_size(getattr(DEMO, option.name))} on the embedded default" in option.help


def test_a_run_starts_from_the_preset_that_fits_its_target() -> None:
    assert starting_sizes(True) == DEMO
    assert starting_sizes(False) == DEFAULT_SIZES
    assert starting_sizes(True, samples=7, epochs=None) == DEMO.model_copy(update={"samples": 7})
    with pytest.raises(ValidationError):
        starting_sizes(False, samples=0)


def test_demo_offers_the_demo_preset() -> None:
    demo = option_defaults("demo")
    assert demo and demo == {name: getattr(DEMO, name) for name in demo}


@pytest.mark.parametrize("command", ["run", "plan", "demo"])
def test_the_help_of_each_size_is_its_description(command: str) -> None:
    for option in size_options(command):
        assert option.name is not None and option.help is not None
        assert option.help.startswith(str(Sizes.model_fields[option.name].description))


def test_the_demo_preset_is_valid_and_fits_the_embedded_context() -> None:
    assert Sizes.model_validate(DEMO.model_dump()) == DEMO
    assert DEMO.max_tokens < DEMO.max_seq_len <= 2048  # SmolLM2 is served with --max-model-len 2048


def test_the_state_keeps_plain_json_and_missing_keys_take_the_defaults() -> None:
    assert run_sizes({"sizes": {"samples": 7}}) == Sizes(samples=7)
    assert run_sizes({}) == DEFAULT_SIZES
    assert Sizes.model_validate(DEMO.model_dump(mode="json")) == DEMO


@pytest.mark.parametrize("bad", [{"samples": 0}, {"epochs": -1}, {"eval_max_tokens": 0}, {"colour": 3}])
def test_invalid_sizes_are_refused(bad: dict[str, int]) -> None:
    with pytest.raises(ValidationError):
        Sizes.model_validate(bad)


def flag_sizes(argv: list[str]) -> dict[str, str]:
    """The sizes a command line's flags set (`--max-seq-len 256` -> max_seq_len; `--prompts` -> prompt_source;
    a switch `--no-eval-ngram` -> eval_ngram false)."""
    names: dict[str, str] = {}
    at = 0
    while at < len(argv):
        name = argv[at].removeprefix("--").replace("-", "_")
        if at + 1 < len(argv) and not argv[at + 1].startswith("--"):
            names[name], at = argv[at + 1], at + 2
        else:
            switched_off = name.startswith("no_")
            names[name.removeprefix("no_")], at = "false" if switched_off else "true", at + 1
    if "prompts" in names:
        names["prompt_source"] = names.pop("prompts")
    return {name: value for name, value in names.items() if name in Sizes.model_fields}


def test_every_preset_leaves_room_for_a_prompt_beside_its_answers() -> None:
    """The defaults, the demo's, the tests' TINY and the Makefile's EXAMPLE_SIZES: each passes the pair's check."""
    example = re.search(r"^EXAMPLE_SIZES := (.*)$", MAKEFILE.read_text(), re.MULTILINE)
    assert example is not None
    embedded = {"TINY": flag_sizes(TINY), "EXAMPLE_SIZES": flag_sizes(example.group(1).split())}
    assert all(sizes["max_seq_len"] for sizes in embedded.values())  # each sets the pair itself
    presets = {"DEFAULT_SIZES": DEFAULT_SIZES, "DEMO": DEMO}
    presets |= {name: starting_sizes(True, **sizes) for name, sizes in embedded.items()}
    for name, sizes in presets.items():
        assert sizes.max_seq_len - sizes.max_tokens >= MIN_PROMPT_TOKENS, name
        assert Sizes.model_validate(sizes.model_dump()) == sizes, name
        assert sizes.max_prompt_chars == (sizes.max_seq_len - sizes.max_tokens) * CHARS_PER_TOKEN


def test_a_max_seq_len_without_room_for_a_prompt_is_refused_with_both_fixes() -> None:
    with pytest.raises(ValidationError, match=r"raise max_seq_len \(--max-seq-len\) to at least 4160, or lower "):
        Sizes(max_tokens=4096, max_seq_len=4096)
    # Left at its default, max_seq_len is checked all the same.
    with pytest.raises(ValidationError, match="max_seq_len 4096 leaves no room for a prompt beside max_tokens 4040"):
        Sizes(max_tokens=4040)
    assert Sizes(max_tokens=4032).max_prompt_chars == MIN_PROMPT_TOKENS * CHARS_PER_TOKEN
    # No max_tokens can fit below MIN_PROMPT_TOKENS: only the raise is offered.
    with pytest.raises(ValidationError) as refused:
        Sizes(max_tokens=8, max_seq_len=40)
    said = str(refused.value)
    assert "raise max_seq_len (--max-seq-len) to at least 72" in said and "lower" not in said
    with pytest.raises(typer.BadParameter, match="max_seq_len 512 leaves no room"):
        chosen_sizes(True, max_tokens=500)  # the demo's max_seq_len, under `eyas run`'s flags


def test_a_run_recorded_before_the_check_still_reads_back() -> None:
    """A run's own sizes are read as they were recorded: shown and reported, never refused for the pair."""
    recorded = {"max_tokens": 4096, "max_seq_len": 4096}
    assert run_sizes({"sizes": recorded}) == recorded_sizes(recorded)
    assert run_sizes({"sizes": recorded}).max_prompt_chars == 1
    with pytest.raises(ValidationError):
        Sizes.model_validate(recorded)
    with pytest.raises(ValidationError, match="less than or equal to 1048576"):
        recorded_sizes({"max_tokens": 10**9})  # each size's own bounds still hold


def test_an_edit_at_a_gate_takes_the_extraction_mode_and_refuses_an_unknown_one_in_words() -> None:
    """The dashboard's edit form names every size `size.<name>`, as it names extraction_backend."""
    current = DEFAULT_SIZES.model_dump()
    edit = {"gate_id": "g", "action": "edit"}
    answer = GateForm.parse({**edit, "size.extraction_mode": "online"}).answer(current)
    assert answer.sizes is not None and answer.sizes["extraction_mode"] == "online"
    assert Sizes.model_validate(answer.sizes).extraction_mode == "online"
    with pytest.raises(ValidationError) as refused:
        GateForm.parse({**edit, "size.extraction_mode": "sometimes"}).answer(current)
    (said,) = format_validation_error(refused.value)
    assert said.startswith("extraction_mode: must be one of auto, offline, online, hybrid (offline: ")
    with pytest.raises(ValidationError):
        GateAnswer(action="edit", sizes={"extraction_mode": "sometimes"})
    assert DEFAULT_SIZES.extraction_mode == DEMO.extraction_mode == "auto"


def test_the_n_gram_switch_is_edited_at_a_gate_as_the_gate_shows_it() -> None:
    """eval_ngram is the one switch among the sizes: a gate shows it on or off, and an edit typed that way (the
    dashboard's form, the terminal's prompt) reads back as a switch, not as the count 1 or the text "on"."""
    current = DEMO.model_dump()
    assert current["eval_ngram"] is True and typed_size(True) == "on" and shown_size(25_000) == "25,000"
    typed = {f"{SIZE_PREFIX}{name}": typed_size(value) for name, value in current.items()}
    kept = GateForm.parse({"gate_id": "g", "action": "edit", **typed}).answer(current)
    assert kept.sizes == current and kept.sizes["eval_ngram"] is True
    off = GateForm.parse({"gate_id": "g", "action": "edit", **typed, f"{SIZE_PREFIX}eval_ngram": "off"})
    assert off.answer(current).sizes == {**current, "eval_ngram": False}
    assert starting_sizes(True, eval_ngram=False).eval_ngram is False and starting_sizes(False).eval_ngram is True
