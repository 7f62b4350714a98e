"""What a script can rely on from `eyas`: `--json` on each command that prints results (JSON alone on stdout, with
the keys a script reads), one exit status per outcome as tools/exit_codes.py defines and `eyas --help` lists, and
tables that keep whole ids when written to a file. The real command line in this process, real run folders (the
real graph and checkpoint DB, stopped at the data gate) and a real SSH dial to a port that refuses."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from eyas.tools.exit_codes import ExitCode
from gated_runs import run_at_data_gate
from in_process import Ran, eyas
from jobs_config import UNREACHABLE, jobs_config

WAITING = "waiting-run-20261201-133401-0123456789abcdef"  # longer than a table cell at 60 columns
TO_APPROVE = "to-approve"


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A runs folder with two runs at the data gate, a local config and one whose host refuses connections."""
    root = tmp_path_factory.mktemp("contract")
    for run_id in (WAITING, TO_APPROVE):
        run_at_data_gate(root / "runs", run_id)
    jobs_config(root / "local.toml", root / "work")
    (root / "unreachable.toml").write_text(UNREACHABLE.format(known_hosts=root / "known_hosts"))
    (root / "known_hosts").write_text("")
    (root / "bad.toml").write_text("[hosts.box\n")
    return root


def run_eyas(place: Path, *argv: str, columns: int = 400) -> Ran:
    """`eyas ARGV` on this test's runs folder, target cache and config files."""
    args = [arg.format(root=place) for arg in argv]
    env = {"EYAS_RUNS_DIR": str(place / "runs"), "EYAS_CACHE_DIR": str(place / "cache"), "COLUMNS": str(columns)}
    ran = eyas(*args, env=env)
    assert "Traceback" not in ran.output, ran.output
    return ran


@dataclass(frozen=True)
class JsonCase:
    argv: tuple[str, ...]
    keys: set[str]  # of the object, or of each item of a list
    code: ExitCode = ExitCode.OK
    check: Callable[[Any], bool] = field(default=lambda _: True)

    @property
    def id(self) -> str:
        return " ".join(self.argv[:2])


JSON_CASES = [
    JsonCase(("runs", "--json"), {"run", "phase", "state", "driver", "report"},
             check=lambda rows: {row["run"] for row in rows} == {WAITING, TO_APPROVE}),
    JsonCase(("status", WAITING, "--json"), {"run_id", "phase", "waiting_at", "jobs", "decisions"},
             check=lambda status: status["waiting_at"]["phase"] == "data"),
    JsonCase(("approve", TO_APPROVE, "--json", "--reason", "fits"), {"run_id", "gate", "action", "continues"},
             check=lambda said: (said["gate"], said["action"], said["continues"]) == ("data", "approve", "on resume")),
    JsonCase(("report", WAITING, "--json"), {"run_id", "html", "markdown"},
             check=lambda said: Path(said["html"]).is_file() and said["html"].endswith("report.html")),
    JsonCase(("watch", WAITING, "--once", "--json"), {"runs"},
             check=lambda said: [(run["run"], run["condition"]) for run in said["runs"]] == [(WAITING, "unwatched")]),
    JsonCase(("config", "check", "{root}/local.toml", "--json"), {"config", "valid", "problems"},
             check=lambda said: said["valid"] is True and said["problems"] == []),
    JsonCase(("config", "check", "{root}/bad.toml", "--json"), {"config", "valid", "problems"}, ExitCode.NO,
             check=lambda said: said["valid"] is False and "not valid TOML" in said["problems"][0]),
    JsonCase(("target", "status", "--json"), {"base_url", "server"},
             check=lambda said: said["server"]["pid"] is None),
    JsonCase(("jobs", "--config", "{root}/local.toml", "--json"), set(), check=lambda jobs: jobs == []),
    JsonCase(("verify", "--config", "{root}/unreachable.toml", "--check", "disk", "--json"),
             {"name", "status", "message", "facts"}, ExitCode.UNREACHABLE,
             check=lambda results: [(r["name"], r["status"]) for r in results] == [("disk", "fail")]),
]  # fmt: skip


@pytest.mark.parametrize("case", JSON_CASES, ids=[case.id for case in JSON_CASES])
def test_json_output_is_json_alone_with_the_keys_a_script_reads(case: JsonCase, place: Path) -> None:
    ran = run_eyas(place, *case.argv)
    assert ran.code == case.code, ran.output
    said = json.loads(ran.stdout)  # nothing else on stdout: notices and progress went to stderr
    for item in said if isinstance(said, list) else [said]:
        assert case.keys <= set(item), item
    assert case.check(said), said


OUTCOMES = [
    pytest.param(("jobs", "--config", "{root}/unreachable.toml"), ExitCode.UNREACHABLE, "Cannot reach host 'box'",
                 id="unreachable-jobs"),
    pytest.param(("verify", "--config", "{root}/unreachable.toml", "--check", "gpus"), ExitCode.UNREACHABLE,
                 "Cannot reach", id="unreachable-verify"),
    pytest.param(("status", "no-such-run"), ExitCode.NOT_FOUND, "There is no run 'no-such-run'", id="unknown-run"),
    pytest.param(("resume", "no-such-run"), ExitCode.NOT_FOUND, "There is no run", id="unknown-run-resume"),
    pytest.param(("show", "{root}/absent.jsonl"), ExitCode.NOT_FOUND, "No transcript at", id="no-transcript"),
    pytest.param(("show", WAITING), ExitCode.NOT_FOUND, f"/runs/{WAITING}/transcript.jsonl; runs keep theirs",
                 id="run-without-transcript"),  # a run id is looked up in the runs folder
    pytest.param(("runs", "--no-such-flag"), ExitCode.USAGE, "No such option: --no-such-flag", id="bad-flag"),
    pytest.param(("resume", "no run/id"), ExitCode.USAGE, "is not a valid run id", id="bad-run-id"),
]  # fmt: skip


@pytest.mark.parametrize(("argv", "code", "says"), OUTCOMES)
def test_each_outcome_has_its_own_exit_status(place: Path, argv: tuple[str, ...], code: ExitCode, says: str) -> None:
    ran = run_eyas(place, *argv)
    assert (ran.code, says in ran.output) == (code, True), ran.output


def test_help_lists_every_exit_status_from_the_enum_and_commands_their_own(place: Path) -> None:
    def listed(*argv: str) -> set[ExitCode]:
        ran = run_eyas(place, *argv, "--help")
        assert ran.code == ExitCode.OK and "Exit status:" in ran.output, ran.output
        lines = {" ".join(line.split()) for line in ran.output.splitlines()}
        return {code for code in ExitCode if f"{code.value} {code.meaning}" in lines}

    assert listed() == set(ExitCode)
    assert ExitCode.ROLLED_BACK in listed("deploy") and ExitCode.ROLLED_BACK not in listed("rollback")
    assert {ExitCode.GATE, ExitCode.UNREACHABLE} <= listed("run") and ExitCode.NOT_FOUND not in listed("run")
    assert {ExitCode.GATE, ExitCode.NOT_FOUND} <= listed("resume")
    assert {ExitCode.NO, ExitCode.UNREACHABLE} <= listed("verify")
    assert {ExitCode.NO, ExitCode.NOT_FOUND} <= listed("replay")


def test_the_readme_lists_the_exit_statuses_as_the_enum_says() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    rows = [line for line in readme.splitlines() if line.startswith("| ") and line.split("|")[1].strip().isdigit()]
    assert rows == [f"| {code.value} | {code.meaning} |" for code in ExitCode]


def test_a_table_written_to_a_file_keeps_whole_ids(place: Path) -> None:
    """At 60 columns a terminal's table cuts the id with "…"; a pipe or a file gets the table as wide as its cells."""
    ran = run_eyas(place, "runs", columns=60)
    assert ran.code == ExitCode.OK and WAITING in ran.stdout and "…" not in ran.stdout, ran.stdout
    row = next(line for line in ran.stdout.splitlines() if WAITING in line)
    assert "waiting at" in row or "data" in row, row  # the row stays one line, its other cells beside the id
