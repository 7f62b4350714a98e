"""The learning rate's warm-up (drafter_recipe.Recipe.warmup_steps): a share of the run with a floor, the same for
train.py's CPU loop and the flag speculators' trainer gets. The CPU loop's own schedule, step by step, is asserted
from a real run's metrics in test_train_target."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from eyas.tools.jobs.upload import WORKLOADS_DIR
from eyas.tools.workloads.drafter_recipe import DEFAULT_RECIPE, Recipe, speculators_flags

sys.path.insert(0, str(WORKLOADS_DIR))  # workloads import their siblings by plain name, as on the host

import train

RECIPE = Recipe(warmup_ratio=0.05, warmup_min_steps=10)


@pytest.mark.parametrize(
    ("total", "warmup"),
    [
        (4000, 200),  # a long run: its share
        (200, 10),  # share and floor agree
        (108, 10),  # the ceiling test's run: 5% would be 5 steps, the floor gives 10
        (24, 6),  # a short run: the floor, but never more than a quarter of the run
        (3, 0),
    ],
)
def test_warm_up_is_the_share_or_the_floor_but_never_more_than_a_quarter_of_the_run(total: int, warmup: int) -> None:
    assert RECIPE.warmup_steps(total) == warmup


def test_a_ratio_above_the_floor_and_no_floor_are_taken_as_given() -> None:
    assert Recipe(warmup_ratio=0.5, warmup_min_steps=20).warmup_steps(100) == 50
    assert Recipe(warmup_ratio=0.01, warmup_min_steps=0).warmup_steps(108) == 1  # speculators' own default


def test_train_py_flags_default_to_the_recipe_and_reach_speculators_as_steps(tmp_path: Path) -> None:
    args = train.parse_args(["--data", str(tmp_path), "--verifier", str(tmp_path), "--out", str(tmp_path / "o")])
    assert Recipe.from_args(args) == DEFAULT_RECIPE
    flags = speculators_flags(Recipe.from_args(args), new_drafter=True, total_steps=108)
    assert flags[flags.index("--scheduler-warmup-steps") + 1] == str(DEFAULT_RECIPE.warmup_steps(108))


def test_a_negative_floor_is_refused_with_the_flag_named(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    args = train.parse_args(
        ["--data", str(tmp_path), "--verifier", str(tmp_path), "--out", str(tmp_path / "o"), "--warmup-min-steps", "-1"]
    )
    with pytest.raises(SystemExit, match="--warmup-min-steps -1 must be 0 or more"):
        train.check_args(args)
