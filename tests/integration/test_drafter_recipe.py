"""The drafter train.py's CPU loop builds, audited against the target's own weights and speculators' EAGLE-3 recipe
(tests/support/recipe_probe.py, one process of the target environment, no server): what comes from the target and
stays frozen, what trains, and what the loss compares. The batches' shift is test_train_target's, the loss mask's
and the captured layers' test_extract's, the draft vocabulary's test_vocab's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from extraction import prepared_target, run_python

pytestmark = pytest.mark.slow  # runs with the target environment's Python (torch, speculators)

PROBE = Path(__file__).resolve().parents[1] / "support" / "recipe_probe.py"
# speculators loads these from the target and never trains them: the drafter reads the target's token embeddings
# and predicts through the target's own head (its rows for the draft vocabulary); the verifier's norm and head turn
# the target's last hidden states into the distribution the loss compares with.
FROZEN = {"embed_tokens.weight", "lm_head.weight", "verifier_lm_head.weight", "verifier_norm.weight"}


@pytest.fixture(scope="module")
def audit(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    target = prepared_target()
    done = run_python(target, PROBE, "--verifier", target.model_dir, "--work", tmp_path_factory.mktemp("recipe"))
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_embeddings_head_and_final_norm_start_as_the_targets_and_only_the_drafters_own_weights_train(
    audit: dict[str, Any],
) -> None:
    # Equal to the bit: copied, not re-initialised (the drafter's trainable final norm starts from the target's too,
    # drafter_recipe.init_output_norm, since its logits go through the target's head).
    assert audit["from_target"] == dict.fromkeys(
        ("embed_tokens", "lm_head", "verifier_lm_head", "verifier_norm", "norm"), 0.0
    )
    assert set(audit["frozen"]) == FROZEN
    # One AdamW step at a real learning rate: every other weight moves (the fc, its per-layer norms, the decoder
    # layer, the final norm), and the frozen ones stay exactly as loaded.
    assert set(audit["still"]) == FROZEN
    assert {"fc.weight", "fc_norm.0.weight", "fc_norm.2.weight", "norm.weight"} <= set(audit["moved"])
    assert not set(audit["moved"]) & FROZEN


def test_the_loss_is_the_kl_divergence_to_the_targets_own_distribution_over_the_loss_masked_tokens(
    audit: dict[str, Any],
) -> None:
    """The loss, recomputed here from the drafter's logits and the target's final norm and head read from its files:
    the soft target (the target's whole next-token distribution), averaged over exactly the assistant tokens."""
    assert 0 < audit["masked"] < audit["real"]  # a batch where the mask leaves tokens out
    assert audit["loss"] == pytest.approx(audit["kl"], rel=1e-4)
    # Each alternative is far enough off to tell: the mask ignored, or hard labels (the target's argmax).
    assert abs(audit["kl_unmasked"] - audit["kl"]) > 0.01 * audit["kl"]
    assert abs(audit["hard_ce"] - audit["kl"]) > 0.01 * audit["kl"]
