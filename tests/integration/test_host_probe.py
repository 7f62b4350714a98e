"""The planner's speed probe: extraction and training measured on the host by speed_probe.py (real target venv,
real SmolLM2, real speculators drafter), cached on the host, and used by the plan in place of assumed FLOP/s."""

from __future__ import annotations

from pathlib import Path

import pytest

from eyas.tools.hosts.clock import SYSTEM_CLOCK
from eyas.tools.hosts.http import HttpClient
from eyas.tools.hosts.local import LocalHost
from eyas.tools.planning.estimate import PlanInputs, estimate
from eyas.tools.planning.figures import Figures
from eyas.tools.planning.host_probe import SpeedRequest, Speeds, probe_speeds, sample_bucket
from eyas.tools.planning.measure import measure_inputs
from eyas.tools.settings.config import LOCAL, EyasConfig, HostConfig, TargetConfig
from eyas.tools.target.embedded import SERVED_MODEL, EmbeddedTarget
from model_shapes import SMOLLM2

# Small shapes: the probe's cost is mostly imports and loading the model.
TINY = {"max_tokens": 48, "max_seq_len": 256, "draft_vocab_size": 1024, "epochs": 2, "concurrency": 2}


@pytest.fixture
def probe_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache of this test's own (the host is this machine, whose shell reads XDG_CACHE_HOME)."""
    cache = tmp_path / "xdg-cache"
    monkeypatch.setenv("EYAS_CACHE_DIR", str(EmbeddedTarget.from_env().cache_dir))  # the target venv stays put
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    return cache / "eyas" / "probes"


def local_config(target_url: str, workdir: Path) -> EyasConfig:
    workdir.mkdir(parents=True, exist_ok=True)  # the data folder exists (verify fails one that does not)
    python = str(EmbeddedTarget.from_env().python)
    return EyasConfig(
        hosts={LOCAL: HostConfig(address=LOCAL, python=python, workdir=str(workdir))},
        target=TargetConfig(base_url=target_url, model=SERVED_MODEL),
    )


@pytest.mark.slow
def test_the_plan_uses_speeds_measured_on_the_host_and_the_second_plan_reuses_them(
    embedded_target: EmbeddedTarget, tmp_path: Path, probe_cache: Path
) -> None:
    config = local_config(embedded_target.base_url, tmp_path / "work")
    figures = Figures(samples=40, **TINY)
    measured = measure_inputs(figures, config=config, host=LocalHost(), http=HttpClient())
    inputs, sources = measured.inputs, measured.sources
    assert inputs.training_tok_s is not None and inputs.training_tok_s > 0
    assert inputs.extraction_tok_s is not None and inputs.extraction_tok_s > 0
    assert sources["training"].startswith("probe on the host's cpu") and "adamw" in sources["training"]
    assert sources["extraction"].startswith("probe on the host's cpu")
    assert (inputs.epochs, inputs.draft_vocab_size) == (2, 1024)  # the run's sizes, not the planner's defaults

    plan = estimate(inputs)
    assert plan.training_hours == pytest.approx(2 * plan.total_tokens / inputs.training_tok_s / 3600)
    assert plan.extraction_hours == pytest.approx(plan.total_tokens / inputs.extraction_tok_s / 3600)

    (cached,) = probe_cache.iterdir()
    written = cached.stat().st_mtime_ns
    model_dir = str(embedded_target.model_dir)
    bucket = sample_bucket(plan.tokens_per_sample, TINY["max_seq_len"])
    request = SpeedRequest(
        model_dir=model_dir, sample_tokens=bucket, total_seq_len=TINY["max_seq_len"],
        draft_vocab_size=TINY["draft_vocab_size"],
    )  # fmt: skip
    again = probe_speeds(LocalHost(), config.host(), request, SYSTEM_CLOCK)
    assert isinstance(again, Speeds) and again.training_tok_s == inputs.training_tok_s
    assert cached.stat().st_mtime_ns == written  # read, not measured and written again


@pytest.mark.slow
def test_a_probe_that_cannot_run_gives_its_reason_and_caches_nothing(tmp_path: Path, probe_cache: Path) -> None:
    config = local_config("http://127.0.0.1:9", tmp_path / "work")
    request = SpeedRequest(
        model_dir=str(tmp_path / "no-model"), sample_tokens=64, total_seq_len=128, draft_vocab_size=64
    )
    result = probe_speeds(LocalHost(), config.host(), request, SYSTEM_CLOCK)
    assert isinstance(result, str) and result.startswith("speed probe failed (exit 1)")
    assert "config.json" in result  # the workload's own one-line reason, not a traceback's last line
    assert not probe_cache.exists() or not any(probe_cache.iterdir())  # a failure is not cached


def test_measured_training_speed_replaces_the_assumed_flops() -> None:
    base = {"model": SMOLLM2, "samples": 100, "max_tokens": 200, "prompt_tokens": 56.0, "generation_tok_s": 50.0}
    assumed = estimate(PlanInputs(**base, free_disk_bytes=10**12, epochs=4, training_flops_per_s=1e9))
    probed = estimate(PlanInputs(**base, free_disk_bytes=10**12, epochs=4, training_tok_s=64.0, extraction_tok_s=640.0))
    assert probed.training_hours == pytest.approx(4 * 100 * 256 / 64.0 / 3600)
    assert probed.extraction_hours == pytest.approx(100 * 256 / 640.0 / 3600)
    assert assumed.training_hours != pytest.approx(probed.training_hours)


@pytest.mark.parametrize(
    ("tokens", "max_seq_len", "bucket"),
    [(10, 512, 64), (65, 512, 128), (300, 512, 512), (700, 512, 512), (128, 96, 96)],
)
def test_probe_samples_are_bucketed_to_share_a_cache_and_never_exceed_the_longest(
    tokens: float, max_seq_len: int, bucket: int
) -> None:
    assert sample_bucket(tokens, max_seq_len) == bucket
