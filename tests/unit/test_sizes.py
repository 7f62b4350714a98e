"""One set of sizes: the defaults that `eyas run`, `eyas plan` and `eyas demo` offer are those of `Sizes`
(or of its demo preset), so the commands cannot drift apart again."""

from __future__ import annotations

import pytest
import typer
from pydantic import ValidationError
from typer.core import TyperGroup, TyperOption

from eyas.agents.faces.cli.main import app
from eyas.graph.state import run_sizes
from eyas.tools.settings.sizes import DEFAULT_SIZES, DEMO, Sizes, starting_sizes


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
    }
    assert plan == {name: option_defaults("run")[name] for name in plan}


@pytest.mark.parametrize("command", ["run", "plan"])
def test_the_help_names_both_defaults(command: str) -> None:
    for option in size_options(command):
        assert option.name is not None and option.help is not None
        assert f"default {shown(getattr(DEFAULT_SIZES, option.name))};" in option.help
        assert f"{shown(getattr(DEMO, option.name))} on the embedded default" in option.help


def shown(value: object) -> str:
    return f"{value:,}" if isinstance(value, int) else str(value)


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
