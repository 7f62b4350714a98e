"""`eyas publish RUN --repo ID` for real: the real `eyas` command in this process, a real run folder and checkpoint,
publish.py run on this machine (the embedded host) by the target environment's Python with its huggingface_hub, as
a real detached job.

Stand-in: the hub is the tests' own (hub_standin.py), since nothing may reach the internet here; it takes what
huggingface_hub 2.4's create_repo and create_commit send, files inline only, so the drafter here is small. No
pipeline ran: the run's state is put in as its training would have left it, and the drafter folder is written by
hand (config, weights, a model card, a marker file that is not uploaded)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from eyas.graph.life.runner import checkpointer, thread
from eyas.graph.life.session import run_meta
from eyas.graph.pipeline import build_graph
from eyas.graph.runs import RunDir
from eyas.tools.config_source import ConfigSource
from eyas.tools.exit_codes import ExitCode
from eyas.tools.settings.sizes import DEMO
from eyas.tools.target.embedded import EmbeddedTarget
from hub_standin import HubStandin, hub_standin
from in_process import Ran, eyas
from safetensors_files import write_drafter

slow = pytest.mark.slow  # publish.py runs with the target environment's Python
RUN, REPO = "to-publish", "my-org/tiny-eagle3"
TOKEN_ENV, TOKEN = "EYAS_TEST_HUB_TOKEN", "hf_PublishTestTokenWriteAccess0123456789"
CARD = "---\nlicense: apache-2.0\nlibrary_name: vllm\n---\n# tiny-eagle3\nAn EAGLE-3 drafter for a test.\n"


@dataclass
class Publishing:
    hub: HubStandin
    runs: Path
    work: Path
    drafter: Path
    config: Path

    def expected(self) -> dict[str, bytes]:
        """What the hub must receive: every file of the drafter's folder but the marker, byte for byte."""
        files = (path for path in self.drafter.rglob("*") if path.is_file() and not path.name.startswith("."))
        return {path.relative_to(self.drafter).as_posix(): path.read_bytes() for path in files}


def write_config(path: Path, work: Path, hub_url: str, *, offline: bool = False) -> Path:
    python = EmbeddedTarget.from_env().python
    path.write_text(
        f'[hosts.local]\naddress = "local"\npython = "{python}"\nworkdir = "{work}"\n'
        f'hub_offline = {str(offline).lower()}\nhub_endpoint = "{hub_url}"\nhub_token_env = "{TOKEN_ENV}"\n'
        '[target]\nhost = "local"\nbase_url = "http://127.0.0.1:9"\nmodel = "tiny"\n'
    )
    return path


def store_run(runs: Path, config: Path, artifacts: dict[str, str], run_id: str = RUN) -> None:
    """runs/<run_id> as its training leaves it: the config it was made with, `artifacts` in its state."""
    run = RunDir(runs / run_id)
    run.write_meta(run_meta(ConfigSource(config, "a test"), None, DEMO))
    values = {"run_id": run_id, "sizes": DEMO.model_dump(), "decisions": [], "artifacts": artifacts}
    with checkpointer(run) as saver:
        build_graph(saver).update_state(thread(run), values, as_node="monitor_train")


@pytest.fixture
def publishing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Publishing]:
    runs, work = tmp_path / "runs", tmp_path / "work"
    monkeypatch.setenv("EYAS_RUNS_DIR", str(runs))
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    drafter = write_drafter(work / "runs" / RUN / "drafter")
    (drafter / "README.md").write_text(CARD)
    (drafter / "training_metrics.jsonl").write_bytes(b'{"step": 1, "loss": 2.5}\n' * 3)
    (drafter / ".eyas-download.json").write_text("{}")
    with hub_standin({}, token=TOKEN) as hub:
        config = write_config(tmp_path / "eyas.toml", work, hub.url)
        store_run(runs, config, {"drafter": str(drafter)})
        yield Publishing(hub, runs, work, drafter, config)


def refused(ran: Ran, code: ExitCode, *words: str) -> None:
    """One paragraph naming the problem, no traceback, the exit code that says which kind of problem."""
    assert ran.code == code, ran.output
    assert "Traceback" not in ran.output and ran.output.count("error:") == 1, ran.output
    (paragraph,) = [line for line in ran.output.splitlines() if line.startswith("error:")]
    assert all(word in paragraph for word in words), paragraph


@slow
def test_publish_uploads_every_file_with_the_token_and_never_shows_it(publishing: Publishing) -> None:
    ran = eyas("publish", RUN, "--repo", REPO, "--json")
    assert ran.code == 0, ran.output
    hub = publishing.hub
    assert hub.created == [REPO] and hub.received[REPO] == publishing.expected()
    assert hub.authorizations and set(hub.authorizations) == {f"Bearer {TOKEN}"}
    result = json.loads(ran.stdout)
    assert result["repo"] == REPO and result["commit"] in result["commit_url"] and result["dry_run"] is False
    assert {entry["path"] for entry in result["files"]} == set(publishing.expected())
    assert "publish: 4 of 4 files" in ran.output and f"published {REPO}" in ran.output
    # The job took the hub from the config and the token by file, which is gone once the job had read it.
    job = publishing.work / "jobs" / f"{RUN}.publish"
    spec = json.loads((job / "job.json").read_text())
    assert spec["env"]["HF_ENDPOINT"] == hub.url and spec["secrets"] == [TOKEN_ENV]
    assert not (job / "secrets.env").exists() and (job / "rc").read_text().strip() == "0"
    written = [
        path for root in (publishing.runs, publishing.work / "jobs") for path in root.rglob("*") if path.is_file()
    ]
    assert written and not [str(path) for path in written if TOKEN.encode() in path.read_bytes()]
    assert TOKEN not in ran.output

    again = eyas("publish", RUN, "--repo", REPO)  # the repo exists now: the same files, committed again
    assert again.code == 0 and hub.created == [REPO], again.output


@slow
def test_a_dry_run_lists_the_files_and_uploads_nothing(publishing: Publishing) -> None:
    ran = eyas("publish", RUN, "--repo", REPO, "--dry-run")
    assert ran.code == 0, ran.output
    lines = ran.output.splitlines()
    assert f"eyas publish {RUN}: 4 files" in ran.output and f"to {publishing.hub.url}/{REPO}" in ran.output
    assert {line.split()[0] for line in lines if line.startswith("  ") and "token" not in line} == set(
        publishing.expected()
    )
    assert f"  token: ${TOKEN_ENV}, sent by eyas" in lines and lines[-1].startswith("dry run: nothing was uploaded")
    assert publishing.hub.requests == [] and not (publishing.work / "jobs" / f"{RUN}.publish").exists()


def test_a_run_without_a_drafter_is_refused(publishing: Publishing) -> None:
    store_run(publishing.runs, publishing.config, {}, run_id="untrained")
    refused(eyas("publish", "untrained", "--repo", REPO), ExitCode.NOT_FOUND, "has no drafter yet", "eyas status")
    assert publishing.hub.requests == []


@slow
def test_a_drafter_not_saved_yet_is_refused(publishing: Publishing) -> None:
    store_run(publishing.runs, publishing.config, {"drafter": str(publishing.work / "training")}, run_id="training")
    refused(eyas("publish", "training", "--repo", REPO), ExitCode.NOT_FOUND, "does not exist on this host")
    assert publishing.hub.requests == []


@slow
def test_an_offline_host_is_refused(publishing: Publishing) -> None:
    write_config(publishing.config, publishing.work, publishing.hub.url, offline=True)
    refused(eyas("publish", RUN, "--repo", REPO), ExitCode.USAGE, "HF_HUB_OFFLINE", "hub_offline = false")
    assert publishing.hub.requests == []


@slow
@pytest.mark.parametrize("repo", ["my-org/tiny..eagle3", "tiny-eagle3", "a/b/c"])
def test_a_bad_repo_id_is_refused(publishing: Publishing, repo: str) -> None:
    refused(eyas("publish", RUN, "--repo", repo), ExitCode.USAGE, repr(repo), "org/name")
    assert publishing.hub.requests == []


def test_a_token_variable_that_is_not_set_is_refused(publishing: Publishing, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TOKEN_ENV)
    refused(eyas("publish", RUN, "--repo", REPO), ExitCode.USAGE, f"names {TOKEN_ENV}, which is not set")
    assert publishing.hub.requests == []
