"""The planner's arithmetic and its verdict, and `eyas plan` for a host that is never contacted.

The plan from a real generated file and the measured plan of the live target are in test_data_real.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from pydantic import ValidationError
from typer.testing import CliRunner

from eyas.agents.faces.cli.plan import plan_command
from eyas.tools.planning.cluster_plan import ClusterShape
from eyas.tools.planning.estimate import FILE_HEADER_BYTES, PlanInputs, Volume, estimate
from eyas.tools.planning.measure import cluster_shape
from eyas.tools.planning.model_dims import ModelDims
from eyas.tools.planning.plan_text import verdict
from eyas.tools.planning.reserve import disk_reserve_bytes
from eyas.tools.planning.token_stats import token_stats
from eyas.tools.settings.config import ClusterConfig, EyasConfig
from eyas.tools.settings.units import format_size, parse_size
from eyas.tools.workloads.hidden_states_file import HEADER_ALLOWANCE
from model_shapes import SMOLLM2

KIMI_K2 = ModelDims(hidden_size=7168, num_layers=61, vocab_size=163840, intermediate_size=18432)


TB29 = parse_size("2.9TB")


def kimi(**changes: object) -> PlanInputs:
    figures = {
        "model": KIMI_K2,
        "samples": 25_000,
        "max_tokens": 4096,
        "generation_tok_s": 2000.0,
        "free_disk_bytes": parse_size("2.9TB"),
        "data_path": "/data",
    }
    return PlanInputs.model_validate(figures | changes)


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("2.9TB", 2_900_000_000_000),
        ("2.9 tb", 2_900_000_000_000),
        ("500GB", 500 * 1000**3),
        ("2.6TiB", round(2.6 * 1024**4)),
        ("2.6T", round(2.6 * 1024**4)),  # as df -h prints it
        ("12MiB", 12 * 1024**2),
        ("1234", 1234),
        ("1e3MB", 10**9),
        (".5KB", 500),
    ],
)
def test_sizes_parse_in_decimal_and_binary_units(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "TB", "2.9XB", "-1GB", "2.9 T B", "two GB"])
def test_a_malformed_size_is_refused_with_examples(text: str) -> None:
    with pytest.raises(ValueError, match=r"2\.9TB"):
        parse_size(text)


def test_kimi_k2_does_not_fit_on_2_9_tb() -> None:
    inputs = kimi()
    plan = estimate(inputs)

    assert plan.captured_layers == [2, 30, 58, 61]
    values = 25_000 * 4096 * 7168 * 4 * 2
    assert values == 5_872_025_600_000  # ~5.9 TB of bf16 values alone
    assert plan.hidden_state_bytes == values + 25_000 * 4096 * 8 + 25_000 * FILE_HEADER_BYTES
    assert not plan.fits and plan.disk_left_bytes < 0
    assert plan.generation_hours == pytest.approx(25_000 * 4096 / 2000 / 3600)
    text = verdict(inputs, plan)
    assert text.startswith("Does not fit") and "5.87 TB" in text and "2.90 TB free at /data" in text
    assert [alt.kind for alt in plan.alternatives] == [
        "fewer_samples",
        "shorter_samples",
        "online_extraction",
        "other_path",
    ]


def test_each_way_out_really_fits_and_is_the_largest_that_does() -> None:
    plan = estimate(
        kimi(
            prompt_tokens=300,
            other_volumes=[
                Volume(mount="/mnt/big", free_bytes=parse_size("8TB")),
                Volume(mount="/boot", free_bytes=10**9),
            ],
        )
    )
    ways = {alt.kind: alt for alt in plan.alternatives if alt.kind != "other_path"}

    samples = ways["fewer_samples"].samples
    assert samples is not None and estimate(kimi(samples=samples, prompt_tokens=300)).fits
    assert not estimate(kimi(samples=samples + 1, prompt_tokens=300)).fits
    tokens = ways["shorter_samples"].max_tokens
    assert tokens is not None and estimate(kimi(max_tokens=tokens, prompt_tokens=300)).fits
    assert not estimate(kimi(max_tokens=tokens + 1, prompt_tokens=300)).fits

    # Online: no hidden-state set, only each sample's token file (int64 ids, a bool mask) and at most a window of
    # fetched samples at the longest length (4,396 tokens here: no --max-seq-len, so prompt + answer).
    online = ways["online_extraction"]
    token_files = 25_000 * (4396 * (8 + 1) + FILE_HEADER_BYTES)
    bound = 8 * (4396 * (7168 * 4 * 2 + 8 + 1) + HEADER_ALLOWANCE)
    assert online.needed_bytes == plan.data_bytes + plan.checkpoint_bytes + token_files + bound
    assert online.needed_bytes < parse_size("2.9TB") - disk_reserve_bytes(parse_size("2.9TB"))
    assert online.hours == pytest.approx(3 * plan.extraction_hours)  # the prefill, once per epoch
    # Worded as the option it is (what a run can ask for), with its bound and hours.
    assert "--extraction-mode online, or hybrid to keep the first" in online.summary
    assert f"at most {format_size(bound)} of them on disk at once (8 samples)" in online.summary
    assert [alt.path for alt in plan.alternatives if alt.kind == "other_path"] == ["/mnt/big"]


def test_on_a_cluster_each_phase_is_planned_per_job_and_the_hidden_states_spread_over_node_disks() -> None:
    """The Kimi-K2 job on four 8-GPU nodes with 3.84 TB NVMe each, two vLLM endpoints and 2.9 TB shared."""
    one_host = estimate(kimi(training_tok_s=50_000.0))
    cluster = {"endpoints": 2, "extract_shards": 4, "train_nodes": 4, "node_free_disk_bytes": parse_size("3.84TB")}
    inputs = kimi(training_tok_s=50_000.0, cluster=cluster)
    plan = estimate(inputs)

    assert plan.generation_hours == pytest.approx(one_host.generation_hours / 2)
    assert plan.extraction_hours == pytest.approx(one_host.extraction_hours / 4)
    assert plan.training_hours == pytest.approx(one_host.training_hours / 4)
    by_phase = {shard.phase: shard for shard in plan.shards}
    assert by_phase["generation"].jobs == 2 and by_phase["generation"].bytes_each == -(-plan.data_bytes // 2)
    assert by_phase["extraction"].bytes_each == -(-plan.hidden_state_bytes // 4)
    assert by_phase["training"].hours_each == plan.training_hours and by_phase["training"].bytes_each == 0
    text = verdict(inputs, plan)
    assert "Per job, at once: generation 2 endpoints x" in text and "training 4 nodes x" in text
    # 5.9 TB of hidden states: two node disks of 3.84 TB, each keeping the 10 GB reserve, hold them.
    [spread] = [alt for alt in plan.alternatives if alt.kind == "spread_extraction"]
    assert spread.nodes == 2 and plan.hidden_state_bytes / 2 <= parse_size("3.84TB") - inputs.reserve_bytes
    assert (
        "spread extraction over 2 nodes with their own disks" in spread.summary
        and "extract_shards = 2" in spread.summary
    )
    assert spread.hours == pytest.approx(one_host.extraction_hours / 2)
    # One host: no per-job sentence, and no spread without node disks.
    assert one_host.shards == [] and "Per job" not in verdict(kimi(), one_host)
    assert "spread_extraction" not in [alt.kind for alt in one_host.alternatives]


def test_a_plan_that_fits_has_no_ways_out_and_reports_what_stays_free() -> None:
    inputs = PlanInputs(
        model=SMOLLM2,
        samples=313,
        max_tokens=256,
        prompt_tokens=47,
        generation_tok_s=87.0,
        generation_overhead_s=0.1,
        free_disk_bytes=parse_size("75GB"),
    )
    plan = estimate(inputs)
    assert plan.fits and plan.alternatives == []
    assert plan.captured_layers == [2, 15, 27, 30]
    assert plan.tokens_per_sample == 47 + 256
    assert plan.hidden_state_bytes == 313 * 303 * (576 * 4 * 2 + 8) + 313 * FILE_HEADER_BYTES
    assert plan.generation_hours == pytest.approx(313 * (256 / 87 + 0.1) / 3600)  # answers only, plus overhead
    assert plan.disk_left_bytes == parse_size("75GB") - plan.needed_bytes
    assert verdict(inputs, plan).startswith("Fits") and format_size(plan.disk_left_bytes) in verdict(inputs, plan)


def test_measured_token_counts_replace_the_maximum() -> None:
    lines = [
        json.dumps({"id": "a", "usage": {"completion_tokens": 100, "sequence_tokens": 300}}),
        json.dumps({"id": "b", "usage": {"completion_tokens": 50, "total_tokens": 100}}),  # older lines: total
        "",
    ]
    stats = token_stats(lines)
    assert stats is not None and stats.samples == 2
    assert (stats.avg_sequence_tokens, stats.avg_completion_tokens) == (200, 75)
    assert stats.avg_line_bytes == sum(len(line) + 1 for line in lines[:2]) / 2

    inputs = PlanInputs(
        model=SMOLLM2, samples=1000, max_tokens=2048, measured=stats, generation_tok_s=75, free_disk_bytes=10**12
    )
    plan = estimate(inputs)
    assert plan.tokens_from == "measured" and plan.total_tokens == 200_000
    assert plan.generation_hours == pytest.approx(1000 * 75 / 75 / 3600)
    assert plan.data_bytes == round(1000 * stats.avg_line_bytes)
    assert token_stats(["", ""]) is None


@pytest.fixture
def cli() -> typer.Typer:
    app = typer.Typer()
    app.command("plan")(plan_command)
    app.command("other")(lambda: None)  # a second command, so typer keeps "plan" as a subcommand
    return app


def unreachable_host_config(tmp_path: Path) -> Path:
    """A config whose SSH host is a TEST-NET address: any attempt to reach it fails."""
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("")
    config = tmp_path / "eyas.toml"
    config.write_text(
        f'[hosts.gpu]\naddress = "203.0.113.7"\nknown_hosts = "{known_hosts}"\npython = "/opt/venv/bin/python"\n'
        'workdir = "/data/eyas"\n\n[target]\nhost = "gpu"\nbase_url = "http://203.0.113.7:8000"\nmodel = "kimi"\n'
    )
    return config


def test_eyas_plan_json_for_a_host_that_is_never_contacted(cli: typer.Typer, tmp_path: Path) -> None:
    """The config names an SSH host at a TEST-NET address: a plan from given figures must not connect."""
    config = unreachable_host_config(tmp_path)
    # The operator's sizes: answers of up to 4,096 tokens need a --max-seq-len that leaves room for the prompt.
    figures = ["--hidden-size", "7168", "--num-layers", "61", "--vocab-size", "163840", "--samples", "25000"]
    figures += ["--max-tokens", "4096", "--max-seq-len", "8192", "--free-disk", "2.9TB", "--throughput", "1500"]
    result = CliRunner().invoke(cli, ["plan", "--config", str(config), "--json", *figures])

    assert result.exit_code == 1, result.output
    plan = json.loads(result.stdout)
    assert plan["offline_fits"] is False and plan["data_path"] == "/data/eyas"
    assert plan["hidden_state_bytes"] > 5.87e12 and plan["generation_hours"] == pytest.approx(
        25_000 * 4096 / 1500 / 3600
    )
    # The 5.9 TB do not fit 2.9 TB, so auto trains hybrid: the first K samples on disk, the rest fetched online.
    mode = plan["extraction_mode"]
    assert (mode["mode"], mode["requested"], plan["fits"]) == ("hybrid", "auto", True), mode
    assert 0 < mode["offline_samples"] < 25_000 and plan["needed_bytes"] <= parse_size("2.9TB") - disk_reserve_bytes(
        parse_size("2.9TB")
    )
    assert "Fits hybrid" in plan["verdict"] and f"the first {mode['offline_samples']:,} samples" in plan["verdict"]
    # Online is what the run does now, so it is no longer offered as a way out; the others still are.
    assert {alt["kind"] for alt in plan["alternatives"]} >= {"fewer_samples", "shorter_samples"}
    assert "online_extraction" not in {alt["kind"] for alt in plan["alternatives"]}
    offline = CliRunner().invoke(cli, ["plan", "--config", str(config), "--json", *figures, "--extraction-mode",
                                       "offline"])  # fmt: skip
    assert offline.exit_code == 1, offline.output  # a plan that does not fit is a no (issue 38)
    refused = json.loads(offline.stdout)
    assert refused["fits"] is False and refused["extraction_mode"]["mode"] == "offline"
    assert "online_extraction" in {alt["kind"] for alt in refused["alternatives"]}
    assert refused["verdict"].startswith("Does not fit") and "--extraction-mode online" in refused["verdict"]
    sources = plan["sources"]
    # Extraction is prefill: with no host to measure it, assumed from one GPU's FLOP/s (never below decoding).
    assert sources.pop("extraction").startswith("assumed, not measured: prefill at ")
    assert set(sources.values()) == {"given", "not counted", "one GPU, 1e+14 FLOP/s (assumed)"}
    # The shipped set is eyas's own file: counted without the host, as the data phase will split it.
    supply = plan["prompt_supply"]
    assert (supply["available"], supply["samples"], supply["enough"]) == (313, 25_000, False), supply
    assert "Too few prompts: the shipped prompt set holds 313 usable prompts" in plan["verdict"]

    roomy = [*figures[:-4], "--free-disk", "8TB", "--throughput", "1500"]
    fits = CliRunner().invoke(cli, ["plan", "--config", str(config), *roomy])
    # The disk holds it, but the prompt source does not: still no plan to run.
    assert fits.exit_code == 1 and "Fits:" in fits.output and "Too few prompts" in fits.output, fits.output
    assert "generate 300 samples instead of 25,000" in " ".join(fits.output.split())
    # A file on the host cannot be counted by a plan that contacts no host: it says so, and the disk decides.
    elsewhere = CliRunner().invoke(cli, ["plan", "--config", str(config), *roomy, "--prompts", "/data/p.jsonl"])
    assert elsewhere.exit_code == 0 and "Fits:" in elsewhere.output and "Prompts: not counted" in elsewhere.output

    bad = CliRunner().invoke(cli, ["plan", "--config", str(config), *figures[:-4], "--free-disk", "lots"])
    assert bad.exit_code == 2 and "--free-disk" in bad.output


def test_eyas_plan_takes_the_training_shapes_the_run_will_use(cli: typer.Typer, tmp_path: Path) -> None:
    """--epochs and --draft-vocab-size (and --max-seq-len, the speed probe's row length) reach the plan, so a plan
    made before `eyas run --epochs 6 ...` estimates that run, not the defaults."""
    config = unreachable_host_config(tmp_path)
    # 300 samples: the training prompts the shipped set holds (more, and the plan says it holds too few).
    figures = ["--hidden-size", "4096", "--num-layers", "32", "--vocab-size", "128000", "--samples", "300"]
    figures += ["--max-tokens", "1024", "--free-disk", "8TB", "--throughput", "1500", "--json"]

    def training_hours(*shapes: str) -> float:
        result = CliRunner().invoke(cli, ["plan", "--config", str(config), *figures, *shapes])
        assert result.exit_code == 0, result.output
        return float(json.loads(result.stdout)["training_hours"])

    three = training_hours("--epochs", "3", "--draft-vocab-size", "32000", "--max-seq-len", "2048")
    assert training_hours("--epochs", "6", "--draft-vocab-size", "32000") == pytest.approx(2 * three)
    assert training_hours("--epochs", "3", "--draft-vocab-size", "8000") < three  # a smaller head trains faster


def test_the_cluster_section_sets_the_jobs_each_phase_plans_with_and_a_node_disk_must_be_a_size(tmp_path: Path) -> None:
    base = {
        "hosts": {"local": {"address": "local", "python": "/usr/bin/python3", "workdir": str(tmp_path)}},
        "target": {"base_url": "http://127.0.0.1:1", "model": "m"},
    }
    assert cluster_shape(EyasConfig.model_validate(base)) == ClusterShape()
    cluster = {"endpoints": ["http://a:8000", "http://b:8000", "http://c:8000"], "extract_shards": 2, "train_nodes": 4}
    shape = cluster_shape(EyasConfig.model_validate(base | {"cluster": cluster | {"node_free_disk": "3.84TB"}}))
    assert shape == ClusterShape(endpoints=3, extract_shards=2, train_nodes=4, node_free_disk_bytes=3_840_000_000_000)
    with pytest.raises(ValidationError, match="is not a size: write e"):
        ClusterConfig.model_validate({"node_free_disk": "lots"})
