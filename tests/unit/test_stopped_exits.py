"""Exit statuses an operator bets an outage on (issue 38, point 9): a run that stops before its end is a no, not a
done; and `eyas plan` reads the model from target.model_dir where production serves it from a path this host does
not have. The real command line in this process, a real run folder (the real graph and checkpoint DB) and a real
HTTP server on 127.0.0.1 for /v1/models (a stand-in: tests/support/stub_http.py, vLLM's listing shape, since
no vLLM runs in a unit test)."""

from __future__ import annotations

import json
from pathlib import Path

from eyas.graph.dry_run import stops
from eyas.tools.exit_codes import ExitCode
from gated_runs import run_at_data_gate
from in_process import eyas
from stub_http import stub_server

REFUSAL = "the drafter's hidden size 4096 is not the target's 576."


def test_a_resumed_run_stopped_by_a_refused_drafter_exits_no(tmp_path: Path) -> None:
    """The drafter's preparation refused it: the data gate is blocked, so an approval ends the run, launching
    nothing. `eyas resume` then exits 1 and says why, where it used to exit 0 as if the run had been done."""
    drafter = {"source": "/models/other-drafter", "job_id": "refused.download", "error": REFUSAL}
    run = run_at_data_gate(tmp_path / "runs", "refused", {"drafter": drafter})
    env = {"EYAS_RUNS_DIR": str(tmp_path / "runs"), "EYAS_CACHE_DIR": str(tmp_path / "cache")}
    assert eyas("approve", run.run_id, env=env).code == ExitCode.OK
    resumed = eyas("resume", run.run_id, env=env)
    assert resumed.code == ExitCode.NO, resumed.output
    said = " ".join(resumed.output.split())
    assert "run stopped before its end: the data phase was approved but cannot run on this host" in said, said
    assert REFUSAL in said and "Traceback" not in said
    assert not (tmp_path / "work" / "jobs").exists()  # nothing launched


def test_a_dry_run_says_why_a_run_of_its_plan_would_stop() -> None:
    """`stops` is what `eyas run --dry-run` exits 1 on: each reason a run would stop at a gate (the Kimi dry run of
    tests/unit/test_dry_run.py exits 1 on too few prompts through the real command)."""
    fits = {"fits": True, "prompt_supply": {"enough": True}}
    phases = [{"phase": "data"}, {"phase": "extract"}]
    assert stops({"plan": fits, "phases": phases}) == []
    assert stops({"plan": {"fits": None}, "phases": phases}) == []  # hours not measured: not known to stop
    short = {"plan": {"fits": False, "prompt_supply": {"enough": False}}, "phases": phases}
    assert stops(short) == [
        "the plan does not fit (see plan:)", "the prompt source holds too few prompts (see plan:)"]  # fmt: skip
    blocked = [{"phase": "data"}, {"phase": "extract", "blocked": "extract.py needs vLLM's method"}]
    assert stops({"plan": fits, "phases": blocked}) == ["the extract phase is blocked"]


LLAMA = {"hidden_size": 576, "num_hidden_layers": 30, "vocab_size": 49152, "max_position_embeddings": 8192}


def test_plan_reads_target_model_dir_where_production_serves_from_a_path_not_on_this_host(tmp_path: Path) -> None:
    """Production's /v1/models names the directory it loaded (here a container's /models/smol, absent on the
    host): the plan used to read config.json there and exit 2 asking for the target.model_dir already set."""
    model_dir = tmp_path / "smol"
    model_dir.mkdir()
    (model_dir / "config.json").write_text(json.dumps(LLAMA))
    listing = {"object": "list", "data": [{"id": "smol", "object": "model", "root": "/models/smol",
                                           "max_model_len": 8192}]}  # fmt: skip
    with stub_server({"GET /v1/models": (200, json.dumps(listing))}) as url:
        config = tmp_path / "eyas.toml"
        config.write_text(
            f'[hosts.box]\naddress = "local"\npython = "/usr/bin/python3"\nworkdir = "{tmp_path / "work"}"\n\n'
            f'[target]\nhost = "box"\nbase_url = "{url}"\nmodel = "smol"\nmodel_dir = "{model_dir}"\n'
            "load_wait_s = 0\n"
        )
        figures = ["--throughput", "100", "--prefill-throughput", "1000", "--prompt-tokens", "50", "--free-disk", "1TB"]
        ran = eyas("plan", "--config", str(config), "--json", "--samples", "100", *figures)
    assert ran.code in (ExitCode.OK, ExitCode.NO), ran.output  # a verdict, not a refusal
    plan = json.loads(ran.stdout)
    assert plan["sources"]["model"].endswith(f"{model_dir}/config.json"), plan["sources"]
    assert plan["inputs"]["model"]["hidden_size"] == 576
